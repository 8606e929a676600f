"""FLOPs and MACs of one canonical operator, from its shapes and attributes.

One set of rules for every frontend, so ONNX and PyTorch graphs of the same model agree.

Conventions (documented in docs/concepts/flow.md):

* MACs are counted only for conv / dense / attention ops and their backward kernels
  (:data:`perfcast.ops.MAC_OPS`), as timm's, TVM's and DIPPM's counters do.
  FLOPs of those ops are ``2 × MACs`` — exactly what ``torch.utils.flop_counter`` reports —
  plus one FLOP per output element for a fused bias.
* Other ops cost a fixed number of FLOPs per element (table below); shape ops and memory
  movement cost 0 FLOPs.
* All counts are for the whole batch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

Shape = Sequence[int]

#: FLOPs per output element for non-MAC ops (rough, documented constants).
PER_ELEMENT_FLOPS: dict[str, float] = {
    "relu": 1, "relu6": 2, "leaky_relu": 2, "prelu": 2, "elu": 4, "selu": 5, "celu": 4,
    "gelu": 8, "silu": 5, "mish": 8, "sigmoid": 4, "hardsigmoid": 3, "hardswish": 4,
    "tanh": 5, "softplus": 4, "softsign": 3, "hardtanh": 2, "log_sigmoid": 5, "glu": 5,
    "softmax": 5, "log_softmax": 5,
    "batch_norm": 2, "layer_norm": 5, "group_norm": 5, "instance_norm": 5, "rms_norm": 4,
    "local_response_norm": 6, "lp_normalize": 3,
    "add": 1, "sub": 1, "mul": 1, "div": 1, "pow": 1, "maximum": 1, "minimum": 1, "remainder": 1,
    "sqrt": 1, "rsqrt": 1, "exp": 1, "log": 1, "abs": 1, "neg": 1, "reciprocal": 1, "erf": 1,
    "trig": 1, "rounding": 1, "sign": 1, "clamp": 2, "where": 1, "logical": 1, "compare": 1,
    "masked_fill": 1, "upsample_linear": 4, "grid_sample": 8, "cumsum": 1,
    # backward kernels: per element of their output
    "batch_norm_backward": 8, "layer_norm_backward": 8, "group_norm_backward": 8,
    "rms_norm_backward": 6, "relu_backward": 1, "gelu_backward": 10, "silu_backward": 6,
    "sigmoid_backward": 2, "tanh_backward": 2, "hardswish_backward": 4,
    "activation_backward": 3, "softmax_backward": 4, "log_softmax_backward": 4,
    "dropout_backward": 1, "upsample_backward": 4, "loss_backward": 2,
    "max_pool_backward": 1, "avg_pool_backward": 1, "adaptive_pool_backward": 1,
    "embedding_backward": 1,
    # optimizer updates: per parameter element
    "sgd_update": 2, "sgd_momentum_update": 4, "adam_update": 12, "adamw_update": 14,
}

#: Reductions cost one FLOP per *input* element.
REDUCTIONS = frozenset({"sum", "mean", "reduce_max", "reduce_min", "reduce_prod", "arg_reduce",
                        "var_std", "norm", "logsumexp", "adaptive_avg_pool", "adaptive_max_pool",
                        "loss"})
POOLS = frozenset({"max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d",
                   "avg_pool3d", "lp_pool"})


def numel(shape: Shape | None) -> int:
    if shape is None:
        return 0
    return int(math.prod(int(d) for d in shape))


def _first(shapes: Sequence[Shape], i: int = 0) -> Shape:
    return shapes[i] if len(shapes) > i and shapes[i] is not None else ()


def conv_macs(output_shape: Shape, weight_shape: Shape, input_shape: Shape,
              transposed: bool = False) -> float:
    """MACs of a (transposed) convolution from its tensors' shapes.

    Weight layout is PyTorch's and ONNX's: ``[C_out, C_in/groups, *kernel]`` for a convolution,
    ``[C_in, C_out/groups, *kernel]`` for a transposed one.
    """
    per_out = numel(weight_shape[1:])
    if transposed:
        return float(numel(input_shape) * per_out)
    return float(numel(output_shape) * per_out)


def einsum_contract(equation: str, input_shapes: Sequence[Shape]) -> int:
    """Product of the sizes of the indices summed over in an einsum (``...`` supported)."""
    eq = equation.replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, input_shapes):
        if "..." in term:
            pre, post = term.split("...")
            n_ell = len(shape) - len(pre) - len(post)
            letters = list(pre) + [f"_{k}" for k in range(n_ell)] + list(post)
        else:
            letters = list(term)
        for letter, dim in zip(letters, shape):
            sizes[letter] = max(sizes.get(letter, 1), int(dim))
    if not rhs and "->" not in eq:
        counts: dict[str, int] = {}
        for term in terms:
            for c in re.sub(r"\.\.\.", "", term):
                counts[c] = counts.get(c, 0) + 1
        rhs = "".join(sorted(c for c, k in counts.items() if k == 1))
    out_letters = set(re.sub(r"\.\.\.", "", rhs))
    contracted = [s for letter, s in sizes.items()
                  if not letter.startswith("_") and letter not in out_letters]
    return int(math.prod(contracted)) if contracted else 1


def sdpa_macs(q: Shape, k: Shape, v: Shape) -> float:
    """MACs of softmax(QKᵀ)V: Q ``[..., L, E]``, K ``[..., S, E]``, V ``[..., S, Ev]``."""
    if len(q) < 2 or len(k) < 2 or len(v) < 2:
        return 0.0
    batch = numel(q[:-2])
    L, E = int(q[-2]), int(q[-1])
    S, Ev = int(k[-2]), int(v[-1])
    return float(batch * L * S * (E + Ev))


def cost(op: str, input_shapes: Sequence[Shape], output_shapes: Sequence[Shape],
         attrs: dict[str, Any]) -> tuple[float, float]:
    """Return ``(flops, macs)`` of one operator for the whole batch."""
    out = _first(output_shapes)
    n_out = numel(out)
    macs = 0.0
    extra = 0.0

    if op.startswith("conv") and op != "conv_backward":
        x, w = _first(input_shapes, 0), _first(input_shapes, 1)
        macs = conv_macs(out, w, x, transposed=op.startswith("conv_transpose"))
        if attrs.get("bias"):
            extra = n_out
    elif op == "conv_backward":
        # inputs: grad_output, input, weight; attrs["grads"] = how many of (dX, dW) are computed
        g, x, w = _first(input_shapes, 0), _first(input_shapes, 1), _first(input_shapes, 2)
        transposed = bool(attrs.get("transposed"))
        one = conv_macs(g, w, x, transposed=transposed)
        macs = one * int(attrs.get("grads", 2))
        if attrs.get("bias_grad"):
            extra = numel(g)
    elif op in ("linear", "matmul", "bmm"):
        k = attrs.get("contract")
        if k is None:
            a = _first(input_shapes, 0)
            k = int(a[-1]) if len(a) else 1
        macs = float(n_out * int(k))
        if attrs.get("bias"):
            extra = n_out
    elif op == "einsum":
        eq = attrs.get("equation")
        if eq:
            macs = float(n_out * einsum_contract(eq, input_shapes))
    elif op in ("sdpa", "multihead_attention"):
        q, k, v = (_first(input_shapes, i) for i in range(3))
        macs = sdpa_macs(q, k, v)
        extra = 5.0 * numel(q[:-1]) * (int(k[-2]) if len(k) >= 2 else 0)  # softmax
    elif op == "sdpa_backward":
        # inputs: grad_out, q, k, v — recompute QKᵀ, then dV, dP, dQ, dK: L·S·(3E + 2Ev) MACs
        q, k, v = (_first(input_shapes, i) for i in (1, 2, 3))
        if len(q) >= 2 and len(k) >= 2 and len(v) >= 2:
            macs = float(numel(q[:-2]) * int(q[-2]) * int(k[-2]) * (3 * int(q[-1]) + 2 * int(v[-1])))
        extra = 4.0 * numel(q[:-1]) * (int(k[-2]) if len(k) >= 2 else 0)
    elif op in ("lstm", "gru", "rnn"):
        macs = float(attrs.get("macs", 0.0))
    elif op in REDUCTIONS:
        extra = float(numel(_first(input_shapes)))
    elif op in POOLS:
        extra = float(n_out * numel(attrs.get("kernel") or (1,)))
    elif op in PER_ELEMENT_FLOPS:
        extra = PER_ELEMENT_FLOPS[op] * n_out
    return 2.0 * macs + float(extra), macs
