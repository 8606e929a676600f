"""The one operator vocabulary shared by every frontend.

Each canonical class has a *category* (used for DIPPM's conv/dense/relu counts and for
grouping in reports).  Frontends map their native op names (ATen overloads, ONNX op types)
to these classes; anything not mapped becomes ``other`` and is listed in the graph's
``unmapped_ops`` — never silently dropped.

The vocabulary order is part of the feature layout: append new classes at the end and bump
``perfcast.features.FEATURE_LAYOUT_VERSION``.
"""

from __future__ import annotations

# (canonical name, category) — order is the one-hot order. Append only.
_VOCAB: list[tuple[str, str]] = [
    # convolutions
    ("conv1d", "conv"), ("conv2d", "conv"), ("conv3d", "conv"),
    ("conv_depthwise", "conv"), ("conv_grouped", "conv"),
    ("conv_transpose1d", "conv"), ("conv_transpose2d", "conv"), ("conv_transpose3d", "conv"),
    # dense
    ("linear", "dense"), ("matmul", "dense"), ("bmm", "dense"), ("einsum", "dense"),
    # attention
    ("sdpa", "attention"), ("multihead_attention", "attention"),
    # normalisation
    ("batch_norm", "norm"), ("layer_norm", "norm"), ("group_norm", "norm"),
    ("instance_norm", "norm"), ("rms_norm", "norm"), ("local_response_norm", "norm"),
    ("lp_normalize", "norm"),
    # activations
    ("relu", "activation"), ("relu6", "activation"), ("leaky_relu", "activation"),
    ("prelu", "activation"), ("elu", "activation"), ("selu", "activation"),
    ("celu", "activation"), ("gelu", "activation"), ("silu", "activation"),
    ("mish", "activation"), ("sigmoid", "activation"), ("hardsigmoid", "activation"),
    ("hardswish", "activation"), ("tanh", "activation"), ("softplus", "activation"),
    ("softsign", "activation"), ("hardtanh", "activation"), ("log_sigmoid", "activation"),
    ("glu", "activation"),
    ("softmax", "softmax"), ("log_softmax", "softmax"),
    # pooling
    ("max_pool1d", "pool"), ("max_pool2d", "pool"), ("max_pool3d", "pool"),
    ("avg_pool1d", "pool"), ("avg_pool2d", "pool"), ("avg_pool3d", "pool"),
    ("adaptive_avg_pool", "pool"), ("adaptive_max_pool", "pool"), ("lp_pool", "pool"),
    # elementwise binary
    ("add", "elementwise"), ("sub", "elementwise"), ("mul", "elementwise"),
    ("div", "elementwise"), ("pow", "elementwise"), ("maximum", "elementwise"),
    ("minimum", "elementwise"), ("remainder", "elementwise"),
    # elementwise unary / misc
    ("sqrt", "elementwise"), ("rsqrt", "elementwise"), ("exp", "elementwise"),
    ("log", "elementwise"), ("abs", "elementwise"), ("neg", "elementwise"),
    ("reciprocal", "elementwise"), ("erf", "elementwise"), ("trig", "elementwise"),
    ("rounding", "elementwise"), ("sign", "elementwise"), ("clamp", "elementwise"),
    ("where", "elementwise"), ("logical", "elementwise"), ("compare", "elementwise"),
    # reductions
    ("sum", "reduction"), ("mean", "reduction"), ("reduce_max", "reduction"),
    ("reduce_min", "reduction"), ("reduce_prod", "reduction"), ("arg_reduce", "reduction"),
    ("var_std", "reduction"), ("norm", "reduction"), ("cumsum", "reduction"),
    ("logsumexp", "reduction"),
    # shape and memory movement
    ("reshape", "shape"), ("transpose", "shape"), ("expand", "shape"), ("concat", "shape"),
    ("split", "shape"), ("slice", "shape"), ("gather", "memory"), ("scatter", "memory"),
    ("pad", "memory"), ("repeat", "memory"), ("copy", "memory"), ("cast", "memory"),
    ("roll", "memory"), ("flip", "memory"), ("tril_triu", "memory"),
    ("masked_fill", "memory"), ("one_hot", "memory"), ("topk", "memory"), ("sort", "memory"),
    ("nonzero", "memory"), ("unfold", "memory"), ("pixel_shuffle", "memory"),
    ("upsample_nearest", "resize"), ("upsample_linear", "resize"), ("grid_sample", "resize"),
    ("constant", "constant"), ("shape_of", "constant"), ("embedding", "embedding"),
    ("dropout", "regularization"), ("identity", "shape"),
    # losses and recurrent layers
    ("loss", "loss"), ("lstm", "recurrent"), ("gru", "recurrent"), ("rnn", "recurrent"),
    # backward operators (training graphs)
    ("conv_backward", "backward"), ("batch_norm_backward", "backward"),
    ("layer_norm_backward", "backward"), ("group_norm_backward", "backward"),
    ("rms_norm_backward", "backward"), ("relu_backward", "backward"),
    ("gelu_backward", "backward"), ("silu_backward", "backward"),
    ("sigmoid_backward", "backward"), ("tanh_backward", "backward"),
    ("hardswish_backward", "backward"), ("activation_backward", "backward"),
    ("softmax_backward", "backward"), ("log_softmax_backward", "backward"),
    ("max_pool_backward", "backward"), ("avg_pool_backward", "backward"),
    ("adaptive_pool_backward", "backward"), ("embedding_backward", "backward"),
    ("sdpa_backward", "backward"), ("dropout_backward", "backward"),
    ("upsample_backward", "backward"), ("loss_backward", "backward"),
    ("shape_backward", "backward"),
    # optimizer update (one node per parameter tensor)
    ("sgd_update", "optimizer"), ("sgd_momentum_update", "optimizer"),
    ("adam_update", "optimizer"), ("adamw_update", "optimizer"),
    # fallback
    ("other", "other"),
]

OPS: tuple[str, ...] = tuple(name for name, _ in _VOCAB)
CATEGORY: dict[str, str] = dict(_VOCAB)
OP_INDEX: dict[str, int] = {name: i for i, name in enumerate(OPS)}

#: Canonical classes whose cost is a multiply-accumulate count (conv, dense, attention, and
#: their backward kernels). MACs are counted only for these — the convention of timm's,
#: TVM's and DIPPM's MAC counters.
MAC_OPS = frozenset(
    {n for n, c in _VOCAB if c in ("conv", "dense", "attention", "recurrent")}
    | {"conv_backward", "sdpa_backward"}
)

#: Ops that only re-index storage (views); they allocate no activation memory.
VIEW_OPS = frozenset({"reshape", "transpose", "expand", "split", "slice", "identity"})


def op_index(op: str) -> int:
    """Position of ``op`` in the one-hot vocabulary (``other`` if unknown)."""
    return OP_INDEX.get(op, OP_INDEX["other"])


def category(op: str) -> str:
    return CATEGORY.get(op, "other")


def refine_conv(op: str, groups: int, in_channels: int, spatial_dims: int) -> str:
    """Turn a generic convolution into its canonical class (1d/2d/3d, depthwise, grouped)."""
    if op.startswith("conv_transpose"):
        return f"conv_transpose{max(1, min(3, spatial_dims))}d"
    if groups > 1 and groups == in_channels:
        return "conv_depthwise"
    if groups > 1:
        return "conv_grouped"
    return f"conv{max(1, min(3, spatial_dims))}d"


#: Operator timings (perfcast.profiler.opbench, perfcast.predictors.opmodel): unary
#: element-wise ops → the ``torch`` function timed for them.
OP_UNARY = {
    "relu": "relu", "relu6": ("nn.functional", "relu6"), "gelu": ("nn.functional", "gelu"),
    "silu": ("nn.functional", "silu"), "hardswish": ("nn.functional", "hardswish"),
    "hardsigmoid": ("nn.functional", "hardsigmoid"), "sigmoid": "sigmoid", "tanh": "tanh",
    "mish": ("nn.functional", "mish"), "elu": ("nn.functional", "elu"),
    "leaky_relu": ("nn.functional", "leaky_relu"), "softplus": ("nn.functional", "softplus"),
    "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "neg": "neg",
    "erf": "erf", "reciprocal": "reciprocal", "hardtanh": ("nn.functional", "hardtanh"),
    "clamp": "relu", "trig": "sin", "cast": "clone", "copy": "clone",
}
OP_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "maximum",
          "minimum": "minimum", "pow": "mul"}
#: Op groups of the operator model (one regressor each).
OP_GROUPS = {
    "conv2d": "conv", "conv_depthwise": "dwconv", "conv_grouped": "dwconv",
    "linear": "gemm", "matmul": "gemm", "bmm": "gemm", "sdpa": "attention",
    "batch_norm": "norm", "layer_norm": "norm", "group_norm": "norm", "norm": "norm",
    "softmax": "softmax", "log_softmax": "softmax",
    "mean": "reduce", "adaptive_avg_pool": "reduce", "max_pool2d": "pool", "avg_pool2d": "pool",
    "concat": "copy", "pad": "copy",
    **{k: "elementwise" for k in OP_UNARY}, **{k: "elementwise" for k in OP_BINARY},
}




def op_group(op: str) -> str | None:
    """The operator model's group of a canonical op (``None``: views, data-dependent ops)."""
    return OP_GROUPS.get(op)
