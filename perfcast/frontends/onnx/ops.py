"""ONNX op types -> canonical perfcast ops, and ONNX attribute helpers (values, schema defaults).

:func:`map_op_type` maps an op type (and domain) through :data:`ONNX_OP_MAP` /
:data:`MS_OP_MAP`; entries starting with ``@`` are resolved per node by :mod:`.cost`.
"""

from __future__ import annotations

import functools
from typing import Any

import onnx
from onnx import AttributeProto, NodeProto

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
