"""ONNX frontend: turn an ``.onnx`` file into a :class:`~perfcast.graph.ModelGraph`.

``graph_from_onnx(path, batch_size=...)`` reads the model *without* its external-data bytes
(initializer shapes and dtypes live in the ``TensorProto`` header, so a multi-GB model costs a
few MB of RAM), binds the symbolic batch dimension, runs ONNX shape inference, and emits one
:class:`~perfcast.graph.Node` per ONNX node with canonical op (:mod:`perfcast.ops`), shapes,
dtypes, parameter counts and the FLOPs/MACs of :func:`perfcast.flops.cost`.

Conventions:

* Graph inputs and initializers are not nodes; every ONNX node is (``Constant`` included).
* Op types outside :data:`ONNX_OP_MAP` / :data:`MS_OP_MAP` become ``other`` and their
  domain-qualified name (the node's ``target``) is listed in ``meta.unmapped_ops``.
* Control flow (``If``/``Loop``/``Scan``) is *not* expanded: the outer node stands for its
  whole subgraph (op ``other``, zero FLOPs). Outer-scope tensors its body reads become edges
  into it, and initializers read or defined by its body count as its parameters.
* Model-local functions are inlined first, so their bodies are costed like ordinary nodes.
* Parameters are floating-point initializers only (int64 shape tensors, quantized uint8
  weights and ``Constant`` nodes are not parameters).
* A shape with any unresolved dimension is unknown: stored as ``()`` on nodes and ``-1`` per
  unresolved dim in ``meta.input_shapes``. Ops whose output shape is unknown cost 0 and get
  ``attrs["shape_unknown"] = True``.
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
import onnx.inliner
from onnx import (AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto,
                  external_data_helper, numpy_helper)

from perfcast import ops as _ops
from perfcast.errors import ModelSpecError, TraceError
from perfcast.flops import REDUCTIONS, cost
from perfcast.graph import Edge, GraphMeta, ModelGraph, Node, Shape

__all__ = ["graph_from_onnx", "ONNX_OP_MAP", "MS_OP_MAP", "map_op_type"]

# ---------------------------------------------------------------------------------- dtypes

#: ONNX element type -> (torch-style dtype name, bits per element).
_DTYPES: dict[int, tuple[str, int]] = {
    TensorProto.FLOAT: ("float32", 32), TensorProto.UINT8: ("uint8", 8),
    TensorProto.INT8: ("int8", 8), TensorProto.UINT16: ("uint16", 16),
    TensorProto.INT16: ("int16", 16), TensorProto.INT32: ("int32", 32),
    TensorProto.INT64: ("int64", 64), TensorProto.STRING: ("string", 0),
    TensorProto.BOOL: ("bool", 8), TensorProto.FLOAT16: ("float16", 16),
    TensorProto.DOUBLE: ("float64", 64), TensorProto.UINT32: ("uint32", 32),
    TensorProto.UINT64: ("uint64", 64), TensorProto.COMPLEX64: ("complex64", 64),
    TensorProto.COMPLEX128: ("complex128", 128), TensorProto.BFLOAT16: ("bfloat16", 16),
    TensorProto.FLOAT8E4M3FN: ("float8_e4m3fn", 8),
    TensorProto.FLOAT8E4M3FNUZ: ("float8_e4m3fnuz", 8),
    TensorProto.FLOAT8E5M2: ("float8_e5m2", 8),
    TensorProto.FLOAT8E5M2FNUZ: ("float8_e5m2fnuz", 8),
    TensorProto.UINT4: ("uint4", 4), TensorProto.INT4: ("int4", 4),
    TensorProto.FLOAT4E2M1: ("float4_e2m1fn", 4),
}
for _name, _dtype in (("FLOAT8E8M0", ("float8_e8m0fnu", 8)), ("UINT2", ("uint2", 2)),
                      ("INT2", ("int2", 2)), ("FLOAT6E2M3", ("float6_e2m3fn", 6)),
                      ("FLOAT6E3M2", ("float6_e3m2fn", 6))):
    if hasattr(TensorProto, _name):  # newer element types; absent in older onnx releases
        _DTYPES[getattr(TensorProto, _name)] = _dtype

#: dtype names whose initializers count as (learnable) parameters.
FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64", "float8_e4m3fn",
                          "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                          "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"})


_BITS = {name: bits for name, bits in _DTYPES.values()}


def _dtype_name(elem_type: int) -> str:
    return _DTYPES.get(elem_type, ("", 0))[0]


def _nbytes(shape: Shape | None, dtype: str, elem_type: int | None = None) -> int:
    """Bytes of a tensor (0 if its shape or dtype is unknown); sub-byte types are packed."""
    if shape is None:
        return 0
    bits = _DTYPES[elem_type][1] if elem_type in _DTYPES else _BITS.get(dtype, 0)
    return (math.prod(shape) * bits + 7) // 8


# ---------------------------------------------------------------------------------- op map

# Entries starting with "@" are resolved per node (shapes/attributes decide the class).
_CONV, _CONVT, _DENSE, _MAXPOOL, _AVGPOOL, _CLIP, _RESIZE, _GATHER = (
    "@conv", "@conv_transpose", "@dense", "@max_pool", "@avg_pool", "@clip", "@resize", "@gather")

#: ONNX default-domain (``ai.onnx``) op type -> canonical op (or a per-node resolver).
ONNX_OP_MAP: dict[str, str] = {
    # convolution and dense
    "Conv": _CONV, "ConvInteger": _CONV, "QLinearConv": _CONV, "DeformConv": _CONV,
    "ConvTranspose": _CONVT,
    "Gemm": _DENSE, "MatMul": _DENSE, "MatMulInteger": _DENSE, "QLinearMatMul": _DENSE,
    "Einsum": "einsum", "Attention": "sdpa",
    # normalisation
    "BatchNormalization": "batch_norm", "LayerNormalization": "layer_norm",
    "GroupNormalization": "group_norm", "InstanceNormalization": "instance_norm",
    "RMSNormalization": "rms_norm", "SimplifiedLayerNormalization": "rms_norm",
    "MeanVarianceNormalization": "layer_norm", "LRN": "local_response_norm",
    "LpNormalization": "lp_normalize",
    # activations
    "Relu": "relu", "ThresholdedRelu": "relu", "Clip": _CLIP, "LeakyRelu": "leaky_relu",
    "PRelu": "prelu", "Elu": "elu", "Selu": "selu", "Celu": "celu", "Gelu": "gelu",
    "Swish": "silu", "Mish": "mish", "Sigmoid": "sigmoid", "HardSigmoid": "hardsigmoid",
    "HardSwish": "hardswish", "Tanh": "tanh", "Softplus": "softplus", "Softsign": "softsign",
    "Shrink": "hardtanh", "SwiGLU": "glu", "Softmax": "softmax", "LogSoftmax": "log_softmax",
    "Hardmax": "arg_reduce",
    # pooling
    "MaxPool": _MAXPOOL, "AveragePool": _AVGPOOL, "LpPool": "lp_pool",
    "GlobalAveragePool": "adaptive_avg_pool", "GlobalMaxPool": "adaptive_max_pool",
    "GlobalLpPool": "lp_pool", "MaxRoiPool": "adaptive_max_pool", "RoiAlign": "grid_sample",
    "MaxUnpool": "scatter",
    # elementwise binary / variadic
    "Add": "add", "Sum": "add", "Mean": "add", "Sub": "sub", "Mul": "mul", "Div": "div",
    "Pow": "pow", "Max": "maximum", "Min": "minimum", "Mod": "remainder",
    # elementwise unary
    "Sqrt": "sqrt", "Exp": "exp", "Log": "log", "Abs": "abs", "Neg": "neg",
    "Reciprocal": "reciprocal", "Erf": "erf", "Sign": "sign", "RotaryEmbedding": "mul",
    "Sin": "trig", "Cos": "trig", "Tan": "trig", "Asin": "trig", "Acos": "trig", "Atan": "trig",
    "Sinh": "trig", "Cosh": "trig", "Asinh": "trig", "Acosh": "trig", "Atanh": "trig",
    "Floor": "rounding", "Ceil": "rounding", "Round": "rounding",
    "Where": "where", "Equal": "compare", "Less": "compare", "LessOrEqual": "compare",
    "Greater": "compare", "GreaterOrEqual": "compare", "IsNaN": "compare", "IsInf": "compare",
    "And": "logical", "Or": "logical", "Not": "logical", "Xor": "logical",
    "BitwiseAnd": "logical", "BitwiseOr": "logical", "BitwiseXor": "logical",
    "BitwiseNot": "logical", "BitShift": "logical",
    # reductions
    "ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "reduce_max",
    "ReduceMin": "reduce_min", "ReduceProd": "reduce_prod", "ArgMax": "arg_reduce",
    "ArgMin": "arg_reduce", "ReduceL1": "norm", "ReduceL2": "norm", "ReduceSumSquare": "norm",
    "ReduceLogSum": "logsumexp", "ReduceLogSumExp": "logsumexp", "CumSum": "cumsum",
    "CumProd": "cumsum",
    # shape and memory movement
    "Reshape": "reshape", "Flatten": "reshape", "Squeeze": "reshape", "Unsqueeze": "reshape",
    "Transpose": "transpose", "Expand": "expand", "Concat": "concat",
    "ConcatFromSequence": "concat", "Split": "split", "SplitToSequence": "split",
    "Slice": "slice", "Gather": _GATHER, "GatherElements": "gather", "GatherND": "gather",
    "Compress": "gather", "ScatterND": "scatter", "ScatterElements": "scatter",
    "Scatter": "scatter", "TensorScatter": "scatter", "Pad": "pad", "CenterCropPad": "pad",
    "Tile": "repeat", "Identity": "identity", "Cast": "cast", "CastLike": "cast",
    "BitCast": "cast", "QuantizeLinear": "cast", "DequantizeLinear": "cast",
    "DynamicQuantizeLinear": "cast", "ReverseSequence": "flip", "Trilu": "tril_triu",
    "OneHot": "one_hot", "TopK": "topk", "Unique": "sort", "NonZero": "nonzero",
    "Col2Im": "unfold", "DepthToSpace": "pixel_shuffle", "SpaceToDepth": "pixel_shuffle",
    "Resize": _RESIZE, "Upsample": _RESIZE, "GridSample": "grid_sample",
    "Shape": "shape_of", "Size": "shape_of",
    "Constant": "constant", "ConstantOfShape": "constant", "Range": "constant",
    "EyeLike": "constant", "RandomNormal": "constant", "RandomNormalLike": "constant",
    "RandomUniform": "constant", "RandomUniformLike": "constant", "Bernoulli": "constant",
    "Multinomial": "constant", "HannWindow": "constant", "HammingWindow": "constant",
    "BlackmanWindow": "constant",
    "Dropout": "dropout",
    # losses and recurrent layers
    "SoftmaxCrossEntropyLoss": "loss", "NegativeLogLikelihoodLoss": "loss",
    "LSTM": "lstm", "GRU": "gru", "RNN": "rnn",
}

#: ONNX Runtime contrib ops (``com.microsoft``); looked up before :data:`ONNX_OP_MAP`.
MS_OP_MAP: dict[str, str] = {
    "Attention": "multihead_attention", "MultiHeadAttention": "multihead_attention",
    "GroupQueryAttention": "multihead_attention", "PackedAttention": "multihead_attention",
    "PackedMultiHeadAttention": "multihead_attention", "SparseAttention": "multihead_attention",
    "DecoderMaskedMultiHeadAttention": "multihead_attention",
    "DecoderMaskedSelfAttention": "multihead_attention",
    "FastGelu": "gelu", "BiasGelu": "gelu", "Gelu": "gelu", "QuickGelu": "gelu",
    "SkipLayerNormalization": "layer_norm", "EmbedLayerNormalization": "layer_norm",
    "SkipSimplifiedLayerNormalization": "rms_norm", "SimplifiedLayerNormalization": "rms_norm",
    "BiasAdd": "add", "BiasSoftmax": "softmax", "BiasDropout": "dropout",
    "FusedConv": _CONV, "NhwcConv": _CONV, "FusedMatMul": _DENSE, "MatMulNBits": "linear",
    "MatMulIntegerToFloat": _DENSE, "DynamicQuantizeMatMul": _DENSE,
    "RotaryEmbedding": "mul",
}

_DEFAULT_DOMAINS = ("", "ai.onnx")
_MS_DOMAIN = "com.microsoft"

#: Ops whose output is a constant when all their inputs are (weight dequantize/cast/transpose).
_CONST_PASSTHROUGH = frozenset({"Identity", "Cast", "CastLike", "DequantizeLinear", "Transpose",
                                "Reshape", "Squeeze", "Unsqueeze", "Flatten"})

#: For ops whose weight is not input 1: which inputs ``cost`` sees (x, weight[, bias]).
_COST_INPUTS: dict[str, tuple[int, ...]] = {"QLinearConv": (0, 3, 8), "QLinearMatMul": (0, 3)}


def map_op_type(op_type: str, domain: str = "") -> str:
    """Canonical op (or ``@resolver`` placeholder) of an ONNX op type; ``other`` if unknown."""
    if domain == _MS_DOMAIN:
        return MS_OP_MAP.get(op_type) or ONNX_OP_MAP.get(op_type, "other")
    if domain in _DEFAULT_DOMAINS:
        return ONNX_OP_MAP.get(op_type, "other")
    return "other"


# ---------------------------------------------------------------------------------- tensors


@dataclass
class _Tensor:
    shape: Shape | None  # None: unknown
    dtype: str  # torch-style name, "" if unknown
    elem_type: int = 0

    @property
    def nbytes(self) -> int:
        return _nbytes(self.shape, self.dtype, self.elem_type)


_UNKNOWN = _Tensor(None, "")


def _vi_tensor(vi: ValueInfoProto) -> _Tensor:
    """Shape/dtype of a value_info (non-tensor types and symbolic dims -> unknown shape)."""
    if not vi.type.HasField("tensor_type"):
        return _UNKNOWN
    tt = vi.type.tensor_type
    shape: Shape | None = None
    if tt.HasField("shape"):
        if all(d.HasField("dim_value") for d in tt.shape.dim):
            shape = tuple(int(d.dim_value) for d in tt.shape.dim)
    return _Tensor(shape, _dtype_name(tt.elem_type), tt.elem_type)


def _init_tensor(t: TensorProto) -> _Tensor:
    return _Tensor(tuple(int(d) for d in t.dims), _dtype_name(t.data_type), t.data_type)


@dataclass
class _Ctx:
    """Everything known about the main graph's tensors."""

    tensors: dict[str, _Tensor] = field(default_factory=dict)
    initializers: dict[str, TensorProto] = field(default_factory=dict)
    constants: dict[str, TensorProto] = field(default_factory=dict)  # Constant-node outputs
    derived: set[str] = field(default_factory=set)  # computed from constants only (e.g. QDQ)
    base_dir: str = ""
    opset: int = 0

    def get(self, name: str) -> _Tensor:
        return self.tensors.get(name, _UNKNOWN) if name else _UNKNOWN

    def is_const(self, name: str) -> bool:
        return bool(name) and (name in self.initializers or name in self.constants
                               or name in self.derived)

    def value(self, name: str, max_numel: int = 64) -> list[float] | None:
        """Values of a small constant tensor (reads at most ``max_numel`` external elements)."""
        t = self.initializers.get(name)
        if t is None:
            t = self.constants.get(name)
        if t is None or math.prod(t.dims) > max_numel:
            return None
        try:
            if t.data_location == TensorProto.EXTERNAL:
                info = {e.key: e.value for e in t.external_data}
                if int(info.get("length", "-1")) not in range(0, 16 * max_numel + 1):
                    return None  # never read an unbounded slice of a data file
                t2 = TensorProto()
                t2.CopyFrom(t)
                external_data_helper.load_external_data_for_tensor(t2, self.base_dir)
                t = t2
            return [float(v) for v in numpy_helper.to_array(t).reshape(-1).tolist()]
        except Exception:  # unreadable small constant: treat as unknown
            return None


# ---------------------------------------------------------------------------------- helpers


def _attrs(node: NodeProto) -> dict[str, Any]:
    """JSON-safe ONNX attributes (tensors and graphs omitted)."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS, AttributeProto.TENSOR,
                      AttributeProto.TENSORS, AttributeProto.SPARSE_TENSOR,
                      AttributeProto.SPARSE_TENSORS, AttributeProto.TYPE_PROTO,
                      AttributeProto.TYPE_PROTOS):
            continue
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list):
            v = [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v]
        out[a.name] = v
    return out


@functools.lru_cache(maxsize=None)
def _default_attr(op_type: str, domain: str, opset: int, name: str) -> Any:
    """Schema default of an attribute at ``opset`` (None if required/unknown)."""
    try:
        schema = onnx.defs.get_schema(op_type, max(opset, 1), domain)
        a = schema.attributes[name]
    except Exception:
        return None
    if a.required or not a.default_value.type:
        return None
    return onnx.helper.get_attribute_value(a.default_value)


def _subgraphs(node: NodeProto) -> Iterator[GraphProto]:
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            yield a.g
        elif a.type == AttributeProto.GRAPHS:
            yield from a.graphs


def _graph_scope(g: GraphProto) -> tuple[list[str], list[TensorProto], int]:
    """(outer-scope names read, initializers defined, node count) of a subgraph, recursively."""
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    for n in g.node:
        defined.update(o for o in n.output if o)
    free: dict[str, None] = {}
    inits = list(g.initializer)
    count = len(g.node)
    for n in g.node:
        for name in n.input:
            if name and name not in defined:
                free[name] = None
        for sub in _subgraphs(n):
            f, i, c = _graph_scope(sub)
            inits += i
            count += c
            free.update((x, None) for x in f if x not in defined)
    return list(free), inits, count


def _dedup(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(n for n in names if n))


# ---------------------------------------------------------------------------------- loading


def _load(path: Path) -> ModelProto:
    if not path.exists():
        raise ModelSpecError(f"ONNX file not found: {path} (check the path)")
    if not path.is_file():
        raise ModelSpecError(f"not a file: {path} (pass the path of an .onnx file)")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf DecodeError, OSError, ...
        raise ModelSpecError(f"not a valid ONNX model: {path} ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''})") from exc
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelSpecError(f"not a valid ONNX model: {path} (no IR version or graph)")
    return model


def _opset(model: ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in _DEFAULT_DOMAINS:
            return int(imp.version)
    return 0


def _bind_batch(graph: GraphProto, batch_size: int | None) -> tuple[int, list[Shape], dict]:
    """Bind symbolic/unknown leading dims of graph inputs to the batch size, in place.

    Returns (batch size used, full input shapes with -1 for unresolved dims, unresolved dims).
    """
    init_names = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in init_names]
    fixed: list[tuple[str, int]] = []
    to_bind = []
    params: set[str] = set()
    for vi in inputs:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape") or not tt.shape.dim:
            continue
        d0 = tt.shape.dim[0]
        if d0.HasField("dim_value") and d0.dim_value > 0:
            fixed.append((vi.name, int(d0.dim_value)))
        else:
            to_bind.append(d0)
            if d0.HasField("dim_param") and d0.dim_param:
                params.add(d0.dim_param)
    if batch_size is not None and fixed and not to_bind:
        name, n = next(((nm, v) for nm, v in fixed if v != batch_size), (None, None))
        if name is not None:
            raise ModelSpecError(
                f"model has a fixed batch {n} (input {name!r}), not {batch_size}: use batch "
                f"size {n} (--batch-size {n}) or re-export with a dynamic batch dimension")
    batch = batch_size if batch_size is not None else (fixed[0][1] if fixed and not to_bind else 1)
    for d in to_bind:
        d.dim_value = batch
    if params:  # the same symbol elsewhere (other inputs, outputs, value_info) is the batch too
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            if vi.type.HasField("tensor_type"):
                for d in vi.type.tensor_type.shape.dim:
                    if d.HasField("dim_param") and d.dim_param in params:
                        d.dim_value = batch
    shapes: list[Shape] = []
    unresolved: dict[str, list[str]] = {}
    for vi in inputs:
        tt = vi.type.tensor_type
        dims = list(tt.shape.dim) if vi.type.HasField("tensor_type") else []
        shapes.append(tuple(int(d.dim_value) if d.HasField("dim_value") else -1 for d in dims))
        bad = [d.dim_param or "?" for d in dims if not d.HasField("dim_value")]
        if bad:
            unresolved[vi.name] = bad
    return batch, shapes, unresolved


def _infer_shapes(model: ModelProto, path: Path) -> tuple[ModelProto, str]:
    """Run ONNX shape inference in memory; fall back to ``infer_shapes_path`` via a temp file."""
    errors: list[str] = []
    for data_prop in (True, False):
        try:
            return onnx.shape_inference.infer_shapes(model, data_prop=data_prop), "in-memory"
        except Exception as exc:  # e.g. protobuf > 2 GB, inference bug with data_prop
            errors.append(f"{type(exc).__name__}: {exc}")
    try:
        with tempfile.TemporaryDirectory(prefix="perfcast-onnx-") as tmp:
            src, dst = os.path.join(tmp, "in.onnx"), os.path.join(tmp, "out.onnx")
            with open(src, "wb") as f:
                f.write(model.SerializeToString())
            onnx.shape_inference.infer_shapes_path(src, dst, data_prop=True)
            return onnx.load(dst, load_external_data=False), "path"
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    raise TraceError(f"ONNX shape inference failed for {path}: {errors[-1].splitlines()[0]}")


#: Contrib ops whose output 0 has the shape and dtype of input 0 (ONNX cannot infer them).
_SAME_SHAPE_CONTRIB = frozenset({
    "FastGelu", "BiasGelu", "Gelu", "QuickGelu", "BiasAdd", "BiasSoftmax", "BiasDropout",
    "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
    "SimplifiedLayerNormalization", "RotaryEmbedding"})


def _contrib_output_shape(node: NodeProto, known: dict[str, _Tensor]) -> Shape | None:
    """Output-0 shape of a ``com.microsoft`` op from its input shapes (None if unknown)."""
    def get(i: int) -> Shape | None:
        return known.get(node.input[i], _UNKNOWN).shape if i < len(node.input) else None

    raw = _attrs(node)
    x = get(0)
    if x is None:
        return None
    op = node.op_type
    if op in _SAME_SHAPE_CONTRIB:
        return x
    if op == "Attention" and len(x) == 3:
        w = get(1)
        sizes = raw.get("qkv_hidden_sizes")
        v = sizes[2] if sizes else (w[1] // 3 if w and len(w) == 2 else None)
        return (x[0], x[1], int(v)) if v else None
    if op in ("MultiHeadAttention", "DecoderMaskedMultiHeadAttention"):
        v = get(2)
        if len(x) == 5:  # packed QKV [B, S, N, 3, H]
            return (x[0], x[1], x[2] * x[4])
        if len(x) == 3 and v is not None and len(v) == 3:
            return (x[0], x[1], v[2])
        if len(x) == 3 and v is not None and len(v) == 4:
            return (x[0], x[1], v[1] * v[3])
        return x if len(x) == 3 else None
    if op == "GroupQueryAttention" and len(x) == 3:
        heads, kv_heads = int(raw.get("num_heads", 0)), int(raw.get("kv_num_heads", 0))
        k = get(1) if len(node.input) > 1 and node.input[1] else None
        if k is None and heads and kv_heads:  # packed QKV
            return (x[0], x[1], x[2] * heads // (heads + 2 * kv_heads))
        return x
    if op == "MatMulNBits" and "N" in raw:
        return (*x[:-1], int(raw["N"]))
    return None


def _propagate_contrib_shapes(model: ModelProto, max_passes: int = 64) -> ModelProto:
    """Give ONNX Runtime contrib ops output shapes and re-run inference until nothing changes."""
    def contrib_nodes(g: GraphProto) -> list[NodeProto]:
        return [n for n in g.node if n.domain == _MS_DOMAIN
                or (n.domain in _DEFAULT_DOMAINS and n.op_type in _SAME_SHAPE_CONTRIB)]

    g = model.graph
    contrib = contrib_nodes(g)
    for _ in range(max_passes if contrib else 0):
        known = {t.name: _init_tensor(t) for t in g.initializer}
        known.update((vi.name, _vi_tensor(vi)) for vi in list(g.input) + list(g.value_info)
                     + list(g.output))
        outputs = {vi.name: vi for vi in g.output}
        added = 0
        for n in contrib:
            out = n.output[0] if n.output else ""
            if not out or known.get(out, _UNKNOWN).shape is not None:
                continue
            shape = _contrib_output_shape(n, known)
            x = known.get(n.input[0], _UNKNOWN) if n.input else _UNKNOWN
            if shape is None or not x.elem_type:
                continue
            vi = onnx.helper.make_tensor_value_info(out, x.elem_type, list(shape))
            if out in outputs:
                outputs[out].type.CopyFrom(vi.type)
            else:
                g.value_info.append(vi)
            known[out] = _vi_tensor(vi)
            added += 1
        if not added:
            break
        try:
            model = onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception:  # keep what we have; later nodes stay unknown
            break
        g = model.graph
        contrib = contrib_nodes(g)
    return model


# ---------------------------------------------------------------------------------- per node


def _conv_attrs(node: NodeProto, raw: dict[str, Any], x: _Tensor, w: _Tensor,
                has_bias: bool) -> tuple[str, dict[str, Any]]:
    transposed = node.op_type == "ConvTranspose"
    kernel = list(raw.get("kernel_shape") or (w.shape[2:] if w.shape else []))
    r = len(kernel) or (len(x.shape) - 2 if x.shape else 2)
    groups = int(raw.get("group", 1))
    in_ch = 0
    if w.shape and len(w.shape) >= 2:  # weight [C_out, C_in/g, *k] or [C_in, C_out/g, *k]
        in_ch = w.shape[0] if transposed else w.shape[1] * groups
    op = _ops.refine_conv("conv_transpose" if transposed else "conv", groups, in_ch, r)
    pads = list(raw.get("pads") or [0] * (2 * r))
    attrs: dict[str, Any] = {
        "kernel": kernel, "stride": list(raw.get("strides") or [1] * r),
        "padding": pads[:r], "dilation": list(raw.get("dilations") or [1] * r),
        "groups": groups, "bias": has_bias, "transposed": transposed,
    }
    if pads[:r] != pads[r:]:
        attrs["pads"] = pads  # ONNX begin..., end...
    if raw.get("auto_pad", "NOTSET") not in ("NOTSET", ""):
        attrs["auto_pad"] = raw["auto_pad"]
    if transposed and raw.get("output_padding"):
        attrs["output_padding"] = list(raw["output_padding"])
    return op, attrs


def _dense(node: NodeProto, raw: dict[str, Any], ctx: _Ctx,
           idx: Sequence[int]) -> tuple[str, dict[str, Any]]:
    ins = list(node.input)
    a_name = ins[idx[0]] if len(ins) > idx[0] else ""
    b_name = ins[idx[1]] if len(ins) > idx[1] else ""
    a, b = ctx.get(a_name).shape, ctx.get(b_name).shape
    attrs: dict[str, Any] = {}
    b_const = ctx.is_const(b_name)
    if node.op_type == "Gemm":
        op = "linear" if b_const else "matmul"
        ta, tb = int(raw.get("transA", 0)), int(raw.get("transB", 0))
        k = (a[0] if ta else a[1]) if a and len(a) == 2 else ((b[1] if tb else b[0]) if b else None)
        attrs.update(transA=bool(ta), transB=bool(tb), bias=len(ins) > 2 and bool(ins[2]))
    else:
        op = "linear" if b_const and b is not None and len(b) == 2 else "matmul"
        ta = int(raw.get("transA", 0))  # FusedMatMul only
        k = None
        if a:
            k = a[-2] if ta and len(a) >= 2 else a[-1]
        elif b:
            k = b[-2] if len(b) >= 2 else b[0]
        attrs["bias"] = False
    if k is not None:
        attrs["contract"] = int(k)
    return op, attrs


def _clip_op(node: NodeProto, raw: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    lo: float | None = raw.get("min")
    hi: float | None = raw.get("max")
    ins = list(node.input)
    if len(ins) > 1 and ins[1]:
        v = ctx.value(ins[1], 1)
        lo = v[0] if v else None
    if len(ins) > 2 and ins[2]:
        v = ctx.value(ins[2], 1)
        hi = v[0] if v else None
    attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
    return ("relu6" if lo == 0.0 and hi == 6.0 else "clamp"), attrs


def _attention_shapes(q: Shape, k: Shape, v: Shape, q_heads: int, kv_heads: int) -> list[Shape]:
    """Per-head Q/K/V shapes ``[B, H, L, E]`` so ``sdpa_macs`` also counts GQA correctly."""
    if len(q) == 5 and not k:  # packed QKV [B, S, H, 3, E]
        qq = (q[0], q[2], q[1], q[4])
        return [qq, qq, qq]
    if len(q) == 3 and len(k) == 3 and len(v) == 3 and q_heads > 0:
        kvh = kv_heads or q_heads
        return [(q[0], q_heads, q[1], q[2] // q_heads), (k[0], q_heads, k[1], k[2] // kvh),
                (v[0], q_heads, v[1], v[2] // kvh)]
    return [q, k, v]


def _recurrent_macs(node: NodeProto, raw: dict[str, Any],
                    ctx: _Ctx) -> tuple[float, dict[str, Any]]:
    """MACs of LSTM/GRU/RNN: seq·batch·dirs·gates·hidden·(input + hidden)."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[node.op_type]
    x = ctx.get(node.input[0]).shape
    hidden = int(raw.get("hidden_size", 0))
    dirs = 2 if raw.get("direction", "forward") == "bidirectional" else 1
    attrs: dict[str, Any] = {"hidden_size": hidden, "num_directions": dirs}
    if not x or len(x) != 3 or not hidden:
        return 0.0, attrs
    seq, batch = (x[1], x[0]) if int(raw.get("layout", 0)) else (x[0], x[1])
    return float(seq * batch * dirs * gates * hidden * (x[2] + hidden)), attrs


def _node_cost(node: NodeProto, op: str, raw: dict[str, Any], ctx: _Ctx,
               in_shapes: list[Shape], out_shapes: list[Shape],
               attrs: dict[str, Any]) -> tuple[float, float]:
    """(flops, macs) of one node, via :func:`perfcast.flops.cost` on the right tensors."""
    idx = _COST_INPUTS.get(node.op_type)
    cin = [in_shapes[i] if i < len(in_shapes) else () for i in idx] if idx else in_shapes
    if op in ("lstm", "gru", "rnn"):
        return cost(op, cin, out_shapes, attrs)
    if op == "multihead_attention" and node.domain == _MS_DOMAIN and node.op_type == "Attention":
        x, w = cin[0], cin[1] if len(cin) > 1 else ()
        if len(x) != 3 or len(w) != 2:
            return 0.0, 0.0
        sizes = list(raw.get("qkv_hidden_sizes") or [w[1] // 3] * 3)
        heads = int(raw.get("num_heads", 1)) or 1
        f1, m1 = cost("linear", [x], [(x[0], x[1], w[1])],
                      {"contract": x[2], "bias": len(cin) > 2 and bool(cin[2])})
        qkv = [(x[0], heads, x[1], s // heads) for s in sizes]
        f2, m2 = cost("sdpa", qkv, out_shapes, {})
        return f1 + f2, m1 + m2
    if op in ("sdpa", "multihead_attention"):
        q_heads = int(raw.get("q_num_heads", raw.get("num_heads", 0)) or 0)
        kv_heads = int(raw.get("kv_num_heads", 0) or 0)
        q, k, v = (cin[i] if i < len(cin) else () for i in range(3))
        cin = _attention_shapes(q, k, v, q_heads, kv_heads)
    return cost(op, cin, out_shapes, attrs)


def _cost_known(node: NodeProto, op: str, ins: list[_Tensor], outs: list[_Tensor],
                attrs: dict[str, Any]) -> bool:
    """Whether every shape that ``cost`` reads for this op is known."""
    if node.output and node.output[0] and outs[0].shape is None:
        return False
    idx = _COST_INPUTS.get(node.op_type)
    used = [ins[i] if i < len(ins) else _UNKNOWN for i in idx] if idx else ins
    if op in ("linear", "matmul", "bmm"):
        return "contract" in attrs
    if op.startswith("conv"):
        return all(t.shape is not None for t in used[:2])
    if op == "einsum":
        return all(t.shape is not None for t in used)
    if op in ("sdpa", "multihead_attention") or op in REDUCTIONS:
        return bool(used) and used[0].shape is not None  # K/V may be packed or optional
    return True


def _resolve(node: NodeProto, raw: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    """Canonical op and canonical attrs of one node."""
    mapped = map_op_type(node.op_type, node.domain)
    ins = list(node.input)
    attrs: dict[str, Any] = {}
    if mapped in (_CONV, _CONVT):
        x_i, w_i, b_i = _COST_INPUTS.get(node.op_type, (0, 1, 2))
        x, w = (ctx.get(ins[i]) if i < len(ins) else _UNKNOWN for i in (x_i, w_i))
        return _conv_attrs(node, raw, x, w, has_bias=len(ins) > b_i and bool(ins[b_i]))
    if mapped == _DENSE:
        return _dense(node, raw, ctx, _COST_INPUTS.get(node.op_type, (0, 1)))
    if mapped in (_MAXPOOL, _AVGPOOL) or mapped == "lp_pool":
        if node.op_type == "GlobalLpPool":
            x = ctx.get(ins[0]).shape
            return "lp_pool", {"kernel": list(x[2:]) if x else []}
        kernel = list(raw.get("kernel_shape") or [])
        r = max(1, min(3, len(kernel) or 2))
        pads = list(raw.get("pads") or [0] * (2 * r))
        attrs = {"kernel": kernel, "stride": list(raw.get("strides") or [1] * r),
                 "padding": pads[:r], "dilation": list(raw.get("dilations") or [1] * r),
                 "ceil_mode": bool(raw.get("ceil_mode", 0))}
        if pads[:r] != pads[r:]:
            attrs["pads"] = pads
        if mapped == "lp_pool":
            return "lp_pool", attrs
        return f"{'max' if mapped == _MAXPOOL else 'avg'}_pool{r}d", attrs
    if mapped == _CLIP:
        return _clip_op(node, raw, ctx)
    if mapped == _RESIZE:
        mode = str(raw.get("mode", "nearest")).lower()
        attrs = {"mode": mode}
        return ("upsample_nearest" if mode == "nearest" else "upsample_linear"), attrs
    if mapped == _GATHER:
        data = ctx.initializers.get(ins[0]) if ins else None
        op = "gather"
        if data is not None and len(data.dims) == 2 and _dtype_name(data.data_type) in FLOAT_DTYPES:
            op = "embedding"  # nn.Embedding exports as Gather(weight_initializer, ids)
        return op, attrs
    if mapped == "einsum":
        return "einsum", {"equation": str(raw.get("equation", ""))}
    if mapped == "linear":  # MatMulNBits: K is an attribute, weights are packed
        attrs = {"bias": len(ins) > 5 and bool(ins[5])}
        if "K" in raw:
            attrs["contract"] = int(raw["K"])
        return "linear", attrs
    return mapped, attrs


def _extra_attrs(node: NodeProto, op: str, raw: dict[str, Any], ctx: _Ctx,
                 attrs: dict[str, Any]) -> None:
    """Canonical ``axis``/``axes``/``perm``/``to`` keys where the op has them."""
    axis = raw.get("axis")
    if axis is None and node.domain in _DEFAULT_DOMAINS:
        axis = _default_attr(node.op_type, node.domain, ctx.opset, "axis")
    if axis is not None and not isinstance(axis, (list, str)):
        attrs["axis"] = int(axis)
    ins = list(node.input)
    if _ops.category(op) == "reduction" or node.op_type.startswith("Reduce"):
        axes = raw.get("axes")
        if axes is None and len(ins) > 1 and ins[1] and node.op_type.startswith("Reduce"):
            v = ctx.value(ins[1])
            axes = [int(a) for a in v] if v is not None else None
        if axes is not None:
            attrs["axes"] = list(axes)
        if "keepdims" in raw:
            attrs["keepdims"] = bool(raw["keepdims"])
    if node.op_type == "CumSum" and len(ins) > 1:
        v = ctx.value(ins[1], 1)
        if v:
            attrs["axis"] = int(v[0])
    if node.op_type == "Transpose" and "perm" in raw:
        attrs["perm"] = list(raw["perm"])
    if node.op_type == "Cast" and "to" in raw:
        attrs["to"] = _dtype_name(int(raw["to"]))
    for key in ("num_heads", "q_num_heads", "kv_num_heads", "epsilon"):
        if key in raw:
            attrs[key] = raw[key]


# ---------------------------------------------------------------------------------- main


def graph_from_onnx(path: str | os.PathLike, batch_size: int | None = None,
                    model_id: str | None = None, precision: str = "fp32") -> ModelGraph:
    """Build a :class:`ModelGraph` from an ONNX file (external-data bytes are never read).

    ``batch_size`` binds symbolic/unknown leading dims of the graph inputs (default 1, or the
    model's fixed batch); a fixed batch that differs raises :class:`ModelSpecError`.
    FLOPs/MACs on nodes are for the whole batch; bytes are bytes.
    """
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                   or batch_size <= 0):
        raise ModelSpecError(f"batch_size must be a positive integer, got {batch_size!r}")
    path = Path(path)
    model = _load(path)
    opset = _opset(model)
    n_functions = len(model.functions)
    if n_functions:
        try:
            model = onnx.inliner.inline_local_functions(model)
        except Exception:  # keep the calls; they become unmapped "other" nodes
            pass
    batch, input_shapes, unresolved = _bind_batch(model.graph, batch_size)
    model, inference = _infer_shapes(model, path)
    model = _propagate_contrib_shapes(model)
    g = model.graph

    ctx = _Ctx(base_dir=str(path.parent), opset=opset)
    for t in g.initializer:
        ctx.initializers[t.name] = t
        ctx.tensors[t.name] = _init_tensor(t)
    sparse: dict[str, _Tensor] = {}
    for sp in g.sparse_initializer:
        sparse[sp.values.name] = _Tensor(tuple(int(d) for d in sp.dims),
                                         _dtype_name(sp.values.data_type), sp.values.data_type)
    ctx.tensors.update(sparse)
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.name not in ctx.initializers:
            ctx.tensors[vi.name] = _vi_tensor(vi)
    for n in g.node:
        if n.op_type == "Constant" and n.domain in _DEFAULT_DOMAINS and n.output:
            for a in n.attribute:
                if a.name == "value" and a.type == AttributeProto.TENSOR:
                    ctx.constants[n.output[0]] = a.t
                    if ctx.get(n.output[0]).shape is None:
                        ctx.tensors[n.output[0]] = _init_tensor(a.t)

    for n in g.node:  # e.g. MatMul(x, DequantizeLinear(int8 weight)) is still a linear layer
        if (n.op_type in _CONST_PASSTHROUGH and n.domain in _DEFAULT_DOMAINS and n.input
                and all(ctx.is_const(x) for x in n.input if x)):
            ctx.derived.update(o for o in n.output if o)

    # parameters: floating initializers, each counted once (subgraph initializers included)
    def is_param(name: str) -> bool:
        t = ctx.tensors.get(name)
        return (name in ctx.initializers or name in sparse) and t is not None \
            and t.dtype in FLOAT_DTYPES
    param_names = [n for n in list(ctx.initializers) + list(sparse) if is_param(n)]
    total_params = sum(math.prod(ctx.tensors[n].shape or ()) for n in param_names)
    total_param_bytes = sum(ctx.tensors[n].nbytes for n in param_names)

    producers: dict[str, int] = {}
    for i, n in enumerate(g.node):
        for o in n.output:
            if o:
                producers[o] = i

    nodes: list[Node] = []
    edges: list[Edge] = []
    unmapped: set[str] = set()
    seen_names: set[str] = set()
    subgraph_nodes = 0
    for i, n in enumerate(g.node):
        raw = _attrs(n)
        target = n.op_type if n.domain in _DEFAULT_DOMAINS else f"{n.domain}.{n.op_type}"
        name = n.name or f"{n.op_type}_{i}"
        if name in seen_names:
            name = f"{name}_{i}"
        seen_names.add(name)

        op, attrs = _resolve(n, raw, ctx)
        if op == "other":
            unmapped.add(target)
        _extra_attrs(n, op, raw, ctx, attrs)
        if op in ("lstm", "gru", "rnn"):
            macs, rattrs = _recurrent_macs(n, raw, ctx)
            attrs.update(rattrs, macs=macs)

        ins = [ctx.get(x) for x in n.input]
        outs = [ctx.get(x) for x in n.output]
        in_shapes: list[Shape] = [t.shape if t.shape is not None else () for t in ins]
        out_shapes: list[Shape] = [t.shape if t.shape is not None else () for t in outs]

        # implicit inputs and initializers of If/Loop/Scan bodies
        implicit: list[str] = []
        inner_params: list[TensorProto] = []
        for sub in _subgraphs(n):
            free, inits, count = _graph_scope(sub)
            implicit += free
            inner_params += [t for t in inits if _dtype_name(t.data_type) in FLOAT_DTYPES]
            subgraph_nodes += count
        if implicit or inner_params:
            attrs["subgraph"] = True
        inner = [_init_tensor(t) for t in inner_params]  # body-local: parameters of the model too
        total_params += sum(math.prod(t.shape or ()) for t in inner)
        total_param_bytes += sum(t.nbytes for t in inner)

        consumed = _dedup(list(n.input) + implicit)
        params = [ctx.tensors[x] for x in consumed if is_param(x)] + inner
        n_params = sum(math.prod(t.shape or ()) for t in params)
        p_bytes = sum(t.nbytes for t in params)

        if not _cost_known(n, op, ins, outs, attrs):
            attrs["shape_unknown"] = True
            flops, macs = 0.0, 0.0
        else:
            flops, macs = _node_cost(n, op, raw, ctx, in_shapes, out_shapes, attrs)

        nodes.append(Node(
            name=name, op=op, target=target,
            input_shapes=in_shapes, input_dtypes=[t.dtype for t in ins],
            output_shapes=out_shapes, output_dtypes=[t.dtype for t in outs],
            flops=float(flops), macs=float(macs), params=int(n_params), param_bytes=int(p_bytes),
            output_bytes=int(sum(t.nbytes for t in outs)), attrs=attrs, phase="forward"))

        for x in consumed:  # one edge per (tensor, consumer)
            src = producers.get(x)
            if src is not None and src != i:
                edges.append(Edge(src, i, ctx.get(x).nbytes, "forward"))

    extra: dict[str, Any] = {
        "opset": opset, "ir_version": int(model.ir_version),
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "shape_inference": inference,
    }
    if unresolved:
        extra["unresolved_dims"] = unresolved
    if n_functions:
        extra["local_functions"] = n_functions
    if subgraph_nodes:
        extra["subgraph_nodes_not_expanded"] = subgraph_nodes
    n_unknown = sum(1 for nd in nodes if nd.attrs.get("shape_unknown"))
    if n_unknown:
        extra["nodes_with_unknown_shapes"] = n_unknown

    meta = GraphMeta(
        model_id=model_id or path.stem, batch_size=batch, input_shapes=input_shapes,
        mode="infer", precision=precision, frontend="onnx",
        frontend_version=f"onnx-{onnx.__version__}/opset-{opset}",
        unmapped_ops=sorted(unmapped), total_params=int(total_params),
        total_param_bytes=int(total_param_bytes), extra=extra)
    return ModelGraph(nodes, edges, meta)
