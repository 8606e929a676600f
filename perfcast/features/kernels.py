"""Lowering a :class:`~perfcast.graph.ModelGraph` to the kernels a GPU runs, at any batch size.

The device-conditioned predictor (:mod:`perfcast.predictors.crossdevice`) prices a model as the
sum of its kernels, each priced by the operator-level model
(:mod:`perfcast.predictors.kernels`). This module says which kernels a graph launches:

* one kernel per compute node of the **forward** graph, in the operator model's vocabulary —
  ``gemm`` (``linear``: ``[M, K] × [K, N]``; ``bmm``: ``B × [M, K] × [K, N]``), ``conv`` (a
  dense 2-d convolution), ``norm`` (``ln``: rows × H), ``softmax`` (rows × H), ``elementwise``
  (``add``, ``mul``, ``div``, ``pow``, ``relu``, ``gelu``, ``tanh`` … on rows × H) — and a
  ``stream`` kernel (bytes in + bytes out, the bandwidth bound) for what the operator model has
  no measurements of: depthwise / grouped convolutions, pooling, reductions, memory movement,
  embeddings, ``other``. View ops (``reshape``, ``transpose``, ``split`` …), constants and
  inference dropout launch nothing. A recurrent layer (``lstm``, ``gru``, ``rnn``) is a stream
  kernel too, whose bytes include each recurrent weight matrix read once per time step
  (:func:`recurrent_weight_bytes`): its T steps depend on each other, so the recurrent GEMM is
  issued T times and streams its weights each time (cuDNN's standard algorithm; a layer's
  ``W_hh`` — 16.8 MB for an fp32 LSTM of 1,024 — is larger than a GPU's L2). Attention (``sdpa``) is lowered as the unfused
  ``bmm → softmax → bmm`` in fp32 and as one fused GEMM-shaped kernel (``B·heads × S × Skv``
  over ``K = d_qk + d_v``: the FLOPs of both products) in fp16 / bf16 / amp, where PyTorch
  runs FlashAttention.
* for a training step (``mode="train"``), the backward kernels are derived from the forward
  ones, as autograd would launch them: a GEMM's two gradient GEMMs (``dX = dY·Wᵀ``,
  ``dW = Xᵀ·dY``), a convolution's data and weight gradients (as implicit GEMMs), one
  element-wise kernel per element-wise / activation node, two normalisation passes, one softmax
  pass, a stream kernel per stream node; then the optimizer's update over the parameters
  (``sgd``: 1 pass, ``sgd-momentum``: 2, ``adam`` / ``adamw``: 4, ``none``: 0). A forward graph
  is 1–2 s to build where the AOTAutograd training graph is 8–24 s, and this lowering serves
  every optimizer; the whole-model correction of the crossdevice predictor learns what it
  misses (fusion, recomputation, allocator and launch gaps).

**Any batch from two graphs.** :class:`KernelPlan` is built from the forward graphs at batch 2
and 3 (one symbolic-batch trace when the model allows it): every dimension of every node is an
affine function of the batch there (``d(b) = d₂ + (d₃ − d₂)(b − 2)``), so
:meth:`KernelPlan.kernels` gives the exact kernel list at any batch without tracing again.

Precision: ``fp32`` — 4-byte operands; ``amp`` — GEMMs and convolutions on fp16 tensor cores with
2-byte operands, normalisation and softmax in fp32, other element-wise kernels on fp16;
``fp16`` / ``bf16`` — 2 bytes everywhere. Which peak a kernel runs at (SIMT fp32, TF32, fp16
tensor cores) is the operator model's business (:func:`perfcast.predictors.kernels.peak_for`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.graph import ModelGraph
from perfcast.ops import VIEW_OPS

#: Kernel classes the operator model knows, and the fallback.
KERNEL_CLASSES = ("gemm", "conv", "norm", "softmax", "elementwise", "stream")
#: Graph ops → the operator model's element-wise op (measured kernels: add, mul, div, pow,
#: relu, gelu, tanh and their scalar variants); other element-wise ops take the closest one.
ELEMENTWISE = {
    "add": "add", "sub": "add", "mul": "mul", "div": "div", "pow": "pow", "maximum": "add",
    "minimum": "add", "remainder": "div", "where": "add", "masked_fill": "addu",
    "relu": "relu", "relu6": "relu", "leaky_relu": "relu", "hardtanh": "relu", "clamp": "relu",
    "gelu": "gelu", "silu": "gelu", "mish": "gelu", "hardswish": "gelu", "elu": "gelu",
    "selu": "gelu", "celu": "gelu", "softplus": "gelu", "prelu": "mul",
    "tanh": "tanh", "sigmoid": "tanh", "hardsigmoid": "relu", "log_sigmoid": "tanh",
    "softsign": "tanh", "erf": "tanh", "exp": "tanh", "log": "tanh", "sqrt": "powu",
    "rsqrt": "powu", "reciprocal": "divu", "abs": "relu", "neg": "mulu", "sign": "relu",
    "trig": "tanh", "rounding": "relu", "logical": "add", "compare": "add", "cast": "addu",
    "copy": "addu", "dropout": "mul",
}
#: Ops that launch nothing (views, metadata, constants).
NO_KERNEL = frozenset(VIEW_OPS | {"constant", "shape_of", "identity"})
NORMS = frozenset({"layer_norm", "rms_norm", "group_norm", "instance_norm", "lp_normalize",
                   "local_response_norm"})
#: Precisions whose attention (``sdpa``) runs as one fused kernel (FlashAttention needs fp16 /
#: bf16 operands). In fp32 it is lowered unfused (``bmm → softmax → bmm``), as eager
#: attention runs — what NeuSight's fp32 labels measured.
FUSED_ATTENTION_PRECISIONS = frozenset({"amp", "fp16", "bf16"})
#: Element-wise passes over the parameters per optimizer step.
OPTIMIZER_PASSES = {"sgd": 1, "sgd-momentum": 2, "adam": 4, "adamw": 4, "none": 0}


@dataclass
class Kernel:
    """One kernel launch. ``op`` is the operator model's op name (``linear``, ``bmm``, ``conv``,
    ``ln``, ``softmax``, ``add`` …, ``stream``); ``dims`` its dimensions (``B, M, N, K`` for
    GEMMs; ``B, Cin, Cout, kernel, size, stride, padding`` for convolutions; ``B, H`` for rows ×
    H kernels); ``dtype_bytes`` the operand size; ``stream_bytes`` / ``stream_flops`` the work of
    a ``stream`` kernel; ``phase`` forward / backward / optimizer; ``node`` the graph node it
    comes from and ``graph_op`` its op."""

    op: str
    kernel_class: str
    dims: dict[str, int]
    dtype_bytes: int
    phase: str = "forward"
    node: str = ""
    stream_bytes: float = 0.0
    stream_flops: float = 0.0
    #: the graph op the kernel comes from (``conv_depthwise``, ``max_pool2d`` …; "optimizer")
    graph_op: str = ""


def _numel(shape) -> int:
    return int(math.prod(int(d) for d in shape)) if shape else 1


def _rows_h(shape) -> dict[str, int]:
    h = int(shape[-1]) if shape else 1
    return {"B": max(1, _numel(shape) // max(1, h)), "H": max(1, h)}


def _dtype_bytes(kernel_class: str, precision: str) -> int:
    if precision == "fp32":
        return 4
    if precision == "amp":
        return 4 if kernel_class in ("norm", "softmax") else 2
    return 2


def _gemm(op: str, B: int, M: int, N: int, K: int, precision: str, phase: str,
          node: str) -> Kernel:
    return Kernel(op, "gemm", {"B": B, "M": M, "N": N, "K": K}, _dtype_bytes("gemm", precision),
                  phase, node)


def _stream(in_shapes, out_shapes, flops: float, precision: str, phase: str,
            node: str, scale: float = 1.0) -> Kernel:
    db = _dtype_bytes("stream", precision)
    moved = (sum(_numel(s) for s in in_shapes) + sum(_numel(s) for s in out_shapes)) * db
    return Kernel("stream", "stream", {}, db, phase, node, stream_bytes=moved * scale,
                  stream_flops=float(flops) * scale)


#: Recurrent graph ops (a whole sequence through one or more layers, both directions).
RECURRENT = frozenset({"lstm", "gru", "rnn"})


def recurrent_weight_bytes(in_shapes: list, dtype_bytes: int) -> float:
    """The bytes a recurrent node (``aten.lstm`` / ``gru`` / ``rnn_*``: input ``x``, the 3-D
    initial states ``[layers·directions, N, H]``, then per layer and direction ``W_ih``,
    ``W_hh`` and biases) reads beyond its tensors once: every ``W_hh`` once per time step, ``T =
    tokens / N`` (the batch ``N`` from the initial state, so either layout of ``x``). 0 when the
    shapes do not say (no 3-D state: an unbatched call)."""
    if not in_shapes or len(in_shapes[0]) < 2:
        return 0.0
    states = [s for s in in_shapes[1:] if len(s) == 3]
    if not states or int(states[0][1]) < 1:
        return 0.0
    steps = _numel(in_shapes[0][:-1]) // int(states[0][1])
    mats = [s for s in in_shapes[1:] if len(s) == 2]  # W_ih, W_hh of each layer-direction
    return float(max(0, steps - 1) * sum(_numel(s) for s in mats[1::2]) * dtype_bytes)


def lower_node(op: str, in_shapes: list, out_shapes: list, attrs: dict[str, Any],
               flops: float, precision: str, name: str = "") -> list[Kernel]:
    """The forward kernels of one graph node (``[]`` for views and constants)."""
    if op in NO_KERNEL or (op == "dropout") or not out_shapes:
        return []
    out = out_shapes[0]
    if op == "linear":
        k = int(attrs.get("contract") or (in_shapes[0][-1] if in_shapes else 1))
        n = int(out[-1]) if out else 1
        return [_gemm("linear", 1, max(1, _numel(out) // max(1, n)), n, k, precision,
                      "forward", name)]
    if op in ("matmul", "bmm", "einsum") and len(in_shapes) >= 2 and len(in_shapes[0]) >= 2 \
            and len(in_shapes[1]) >= 2 and op != "einsum":
        a, b = in_shapes[0], in_shapes[1]
        m, k, n = int(a[-2]), int(a[-1]), int(b[-1])
        batch = max(1, _numel(out) // max(1, m * n))
        return [_gemm("bmm", batch, m, n, k, precision, "forward", name)]
    if op == "sdpa" and len(in_shapes) >= 3:
        q, kk = in_shapes[0], in_shapes[1]
        s, d, skv = int(q[-2]), int(q[-1]), int(kk[-2])
        bh = max(1, _numel(q) // max(1, s * d))
        dv = int(in_shapes[2][-1])
        if precision in FUSED_ATTENTION_PRECISIONS:
            # flash attention: both products in one kernel, the S×Skv scores never leave the SM
            return [_gemm("bmm", bh, s, skv, d + dv, precision, "forward", name)]
        return [_gemm("bmm", bh, s, skv, d, precision, "forward", name),
                Kernel("softmax", "softmax", {"B": bh * s, "H": skv},
                       _dtype_bytes("softmax", precision), "forward", name),
                _gemm("bmm", bh, s, dv, skv, precision, "forward", name)]
    if op == "conv2d" and len(in_shapes) >= 2 and len(in_shapes[0]) == 4:
        x, w = in_shapes[0], in_shapes[1]
        ks = attrs.get("kernel") or list(w[2:])
        stride = attrs.get("stride") or [1, 1]
        pad = attrs.get("padding") or [0, 0]
        if int(x[2]) == int(x[3]) and ks[0] == ks[1] and stride[0] == stride[1] \
                and pad[0] == pad[1] and not attrs.get("transposed"):
            return [Kernel("conv", "conv", {"B": int(x[0]), "Cin": int(x[1]), "Cout": int(w[0]),
                                            "kernel": int(ks[0]), "size": int(x[2]),
                                            "stride": int(stride[0]), "padding": int(pad[0])},
                           _dtype_bytes("conv", precision), "forward", name)]
        # non-square: the same work as an implicit GEMM
        return [_gemm("linear", 1, _numel(out) // max(1, int(out[1])), int(w[0]),
                      int(w[1]) * _numel(ks), precision, "forward", name)]
    if op in NORMS:
        x = in_shapes[0] if in_shapes else out
        return [Kernel("ln", "norm", _rows_h(x), _dtype_bytes("norm", precision), "forward",
                       name)]
    if op in ("softmax", "log_softmax"):
        return [Kernel("softmax", "softmax", _rows_h(out), _dtype_bytes("softmax", precision),
                       "forward", name)]
    if op == "batch_norm":  # inference: a per-channel scale and shift
        return [Kernel("mul", "elementwise", _rows_h(out),
                       _dtype_bytes("elementwise", precision), "forward", name)]
    if op in ELEMENTWISE:
        unary = len([s for s in in_shapes if _numel(s) > 1]) <= 1
        kop = ELEMENTWISE[op]
        if unary and kop in ("add", "mul", "div", "pow"):
            kop += "u"
        return [Kernel(kop, "elementwise", _rows_h(out), _dtype_bytes("elementwise", precision),
                       "forward", name)]
    k = _stream(in_shapes, out_shapes, flops, precision, "forward", name)
    if op in RECURRENT:
        k.stream_bytes += recurrent_weight_bytes(in_shapes, k.dtype_bytes)
    return [k]


def backward_of(k: Kernel, precision: str) -> list[Kernel]:
    """The kernels autograd launches for the gradient of forward kernel ``k``."""
    d, name = k.dims, k.node
    if k.kernel_class == "gemm":
        B, M, N, K = d["B"], d["M"], d["N"], d["K"]
        return [_gemm(k.op, B, M, K, N, precision, "backward", name),   # dX = dY·Wᵀ
                _gemm(k.op, B, K, N, M, precision, "backward", name)]   # dW = Xᵀ·dY
    if k.kernel_class == "conv":  # as implicit GEMMs over the B·Ho·Wo output positions
        ho = max(1, (d["size"] + 2 * d["padding"] - d["kernel"]) // d["stride"] + 1)
        m, kk = d["B"] * ho * ho, d["Cin"] * d["kernel"] ** 2
        return [_gemm("linear", 1, m, kk, d["Cout"], precision, "backward", name),  # dX: dY·W
                _gemm("linear", 1, d["Cout"], kk, m, precision, "backward", name)]  # dW: dYᵀ·X
    if k.kernel_class == "norm":
        return [Kernel("ln", "norm", dict(d), k.dtype_bytes, "backward", name)] * 2
    if k.kernel_class == "softmax":
        return [Kernel("softmax", "softmax", dict(d), k.dtype_bytes, "backward", name)]
    if k.kernel_class == "elementwise":
        return [Kernel("mul", "elementwise", dict(d), k.dtype_bytes, "backward", name)]
    return [Kernel("stream", "stream", {}, k.dtype_bytes, "backward", name,
                   stream_bytes=k.stream_bytes, stream_flops=k.stream_flops)]


def optimizer_kernels(param_count: int, optimizer: str | None, precision: str) -> list[Kernel]:
    """The optimizer's element-wise passes over all parameters (fp32 master weights)."""
    passes = OPTIMIZER_PASSES.get(optimizer or "sgd-momentum", 2)
    rows = _rows_h((max(1, param_count),))
    return [Kernel("mul", "elementwise", dict(rows), 4, "optimizer", "optimizer")
            for _ in range(passes)]


def lower_graph(graph: ModelGraph, *, mode: str = "infer", precision: str = "fp32",
                optimizer: str | None = "sgd-momentum") -> list[Kernel]:
    """Every kernel of a forward ``graph`` (inference) or of a training step built on it."""
    return _lower([(n.op, n.input_shapes, n.output_shapes, n.attrs, n.flops, n.name)
                   for n in graph.nodes], int(graph.params), mode, precision, optimizer)


def _lower(nodes, params: int, mode: str, precision: str, optimizer) -> list[Kernel]:
    fwd: list[Kernel] = []
    for op, ins, outs, attrs, flops, name in nodes:
        for k in lower_node(op, ins, outs, attrs, flops, precision, name):
            k.graph_op = op
            fwd.append(k)
    if mode != "train":
        return fwd
    bwd = []
    for k in reversed(fwd):
        for b in backward_of(k, precision):
            b.graph_op = k.graph_op
            bwd.append(b)
    opt = optimizer_kernels(params, optimizer, precision)
    for k in opt:
        k.graph_op = "optimizer"
    return fwd + bwd + opt


#: Non-numeric columns of :func:`kernel_row`.
_TEXT_COLUMNS = ("op", "kernel_class", "phase", "graph_op")


def kernel_row(k: Kernel) -> dict[str, Any]:
    """One kernel as a flat row: ``op``, ``kernel_class``, ``phase``, ``graph_op``,
    ``dtype_bytes``, ``stream_bytes``, ``stream_flops`` and its dimensions."""
    row = {"op": k.op, "kernel_class": k.kernel_class, "phase": k.phase, "graph_op": k.graph_op,
           "dtype_bytes": k.dtype_bytes, "stream_bytes": k.stream_bytes,
           "stream_flops": k.stream_flops}
    row.update(k.dims)
    return row


@dataclass
class KernelPlan:
    """A forward graph's nodes with every dimension affine in the batch size (see the module
    docstring): :meth:`kernels` lowers it at any batch."""

    model_id: str
    params: int
    ops: list[str]
    names: list[str]
    attrs: list[dict[str, Any]]
    flops2: list[float]
    flops3: list[float]
    in2: list[list[tuple[int, ...]]]
    in3: list[list[tuple[int, ...]]]
    out2: list[list[tuple[int, ...]]]
    out3: list[list[tuple[int, ...]]]
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_graphs(cls, g2: ModelGraph, g3: ModelGraph) -> KernelPlan:
        """From the forward graphs of one model at batch 2 and 3 (node for node the same)."""
        if len(g2.nodes) != len(g3.nodes) or any(
                a.op != b.op or len(a.input_shapes) != len(b.input_shapes)
                or len(a.output_shapes) != len(b.output_shapes)
                or any(len(x) != len(y) for x, y in zip(a.input_shapes + a.output_shapes,
                                                         b.input_shapes + b.output_shapes))
                for a, b in zip(g2.nodes, g3.nodes)):
            raise PerfcastError(f"{g2.meta.model_id}: its graphs at batch 2 and 3 differ in "
                                f"structure; the kernel plan needs the graph at each batch")
        return cls(model_id=g2.meta.model_id, params=int(g2.params),
                   ops=[n.op for n in g2.nodes], names=[n.name for n in g2.nodes],
                   attrs=[dict(n.attrs) for n in g2.nodes],
                   flops2=[float(n.flops) for n in g2.nodes],
                   flops3=[float(n.flops) for n in g3.nodes],
                   in2=[[tuple(s) for s in n.input_shapes] for n in g2.nodes],
                   in3=[[tuple(s) for s in n.input_shapes] for n in g3.nodes],
                   out2=[[tuple(s) for s in n.output_shapes] for n in g2.nodes],
                   out3=[[tuple(s) for s in n.output_shapes] for n in g3.nodes])

    def nodes_at(self, batch: int):
        """``(op, input shapes, output shapes, attrs, flops, name)`` per node at ``batch``."""
        if batch < 1:
            raise PerfcastError(f"batch size must be ≥ 1, got {batch}")
        t = batch - 2

        def at(s2, s3):
            return [tuple(max(1, a + (b - a) * t) for a, b in zip(x, y)) for x, y in zip(s2, s3)]

        for i, op in enumerate(self.ops):
            yield (op, at(self.in2[i], self.in3[i]), at(self.out2[i], self.out3[i]),
                   self.attrs[i], max(0.0, self.flops2[i] + (self.flops3[i] - self.flops2[i]) * t),
                   self.names[i])

    def kernels(self, batch: int, *, mode: str = "infer", precision: str = "fp32",
                optimizer: str | None = "sgd-momentum") -> list[Kernel]:
        """The kernel list at ``batch`` (see :func:`lower_graph`)."""
        return _lower(list(self.nodes_at(batch)), self.params, mode, precision, optimizer)

    def kernel_table(self, batches, *, mode: str = "infer", precision: str = "fp32",
                     optimizer: str | None = "sgd-momentum"):
        """Every kernel at every batch of ``batches`` as one :class:`~perfcast.features.table.
        Table` (columns ``batch``, ``item`` — the position in ``batches`` — and
        :func:`kernel_row`'s; what ``pandas.DataFrame`` of the rows would hold, without
        pandas), in the order of ``batches`` then :meth:`kernels`. Lowering is Python work per
        node; the kernel list at batch ≥ 2 is affine in the batch like the plan (the lists at
        2, 3 and 4 are checked to be — then every other batch is arithmetic), so a batch grid
        costs three lowerings, not one per batch. Where they are not (a node whose lowering
        changes with the batch) every batch is lowered."""
        import numpy as np

        from perfcast.features.table import Table

        kw = {"mode": mode, "precision": precision, "optimizer": optimizer}
        batches = [int(b) for b in batches]

        def frame(b):
            return Table.from_records([kernel_row(k) for k in self.kernels(b, **kw)])

        parts: dict[int, Table] = {}
        big = sorted({b for b in batches if b >= 2})
        if len(big) > 3:
            f2, f3, f4 = frame(2), frame(3), frame(4)
            num = [c for c in f2.columns if c not in _TEXT_COLUMNS]
            same = (len(f2) == len(f3) == len(f4) and list(f2.columns) == list(f3.columns)
                    == list(f4.columns) and all(f2[c].equals(f3[c]) and f2[c].equals(f4[c])
                                                for c in _TEXT_COLUMNS if c in f2))
            if same:
                a, d = f2[num].to_numpy(float), f3[num].to_numpy(float) - f2[num].to_numpy(float)
                same = np.allclose(a + 2 * d, f4[num].to_numpy(float), rtol=1e-12, equal_nan=True)
            if same:
                for b in big:
                    f = f2.copy()
                    vals = a + d * (b - 2)
                    for j, c in enumerate(num):
                        f[c] = vals[:, j]
                    parts[b] = f
        for b in dict.fromkeys(batches):
            if b not in parts:
                parts[b] = frame(b)
        return Table.concat([parts[b].assign(batch=b, item=i) for i, b in enumerate(batches)])


__all__ = ["ELEMENTWISE", "KERNEL_CLASSES", "Kernel", "KernelPlan", "OPTIMIZER_PASSES",
           "RECURRENT", "recurrent_weight_bytes",
           "backward_of", "kernel_row", "lower_graph", "lower_node", "optimizer_kernels"]
