"""Operator benchmark: time one graph node's op on this machine, forward and backward.

A node of a :class:`~perfcast.graph.ModelGraph` carries its op, input / output shapes and attrs —
enough to call the same PyTorch op on random tensors of those shapes. Timing the nodes of many
models gives operator-level labels of *this* machine at the shapes real models use (the CPU
counterpart of NeuSight's GPU kernel measurements): a CPU's speed varies by an order of magnitude
between ops and shapes (on the development VM the timed 3×3 depthwise convolutions run at
0.9–16.8 GFLOP/s, p10–p90, the dense 3×3 ones at 36.7–160; ``reports/cpu/oracle.md``), which no
roofline captures.

:func:`op_call` builds the call (``None`` for ops without one here — views cost only dispatch,
data-dependent ops are skipped); :func:`time_node` times it (median of adaptive repetitions);
``backward`` times ``torch.autograd.grad`` of the output w.r.t. every floating input.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from perfcast.ops import OP_BINARY as BINARY
from perfcast.ops import OP_GROUPS as GROUPS
from perfcast.ops import OP_UNARY as UNARY
from perfcast.ops import op_group as group_of


def _fn(spec):
    import torch

    if isinstance(spec, tuple):
        mod = torch
        for part in spec[0].split("."):
            mod = getattr(mod, part)
        return getattr(mod, spec[1])
    return getattr(torch, spec)


def _numel(s: Sequence[int]) -> int:
    return int(math.prod(int(d) for d in s)) if s else 1


def op_call(op: str, in_shapes: list, out_shapes: list, attrs: dict[str, Any], *,
            grad: bool = False, generator=None) -> tuple[Callable[[], Any], list] | None:
    """``(fn, inputs)``: ``fn()`` runs the node's op on random tensors of its shapes (``inputs``
    are the tensors, with ``requires_grad`` when ``grad``), or ``None`` when perfcast has no
    call for that op here."""
    import torch
    import torch.nn.functional as F

    def t(shape, req=grad):
        x = torch.randn(*[int(d) for d in shape], generator=generator) if shape else \
            torch.randn((), generator=generator)
        return x.requires_grad_(req)

    if not in_shapes or not out_shapes:
        return None
    x_shape = in_shapes[0]
    out = out_shapes[0]
    try:
        if op in ("conv2d", "conv_depthwise", "conv_grouped") and len(in_shapes) >= 2 \
                and len(x_shape) == 4 and not attrs.get("transposed"):
            x, w = t(x_shape), t(in_shapes[1])
            b = t(in_shapes[2]) if len(in_shapes) > 2 and attrs.get("bias") else None
            kw = {"stride": attrs.get("stride") or 1, "padding": attrs.get("padding") or 0,
                  "dilation": attrs.get("dilation") or 1, "groups": int(attrs.get("groups") or 1)}
            return (lambda: F.conv2d(x, w, b, **kw)), [v for v in (x, w, b) if v is not None]
        if op == "linear" and len(in_shapes) >= 2:
            x, w = t(x_shape), t(in_shapes[1])
            b = t(in_shapes[2]) if len(in_shapes) > 2 else None
            return (lambda: F.linear(x, w, b)), [v for v in (x, w, b) if v is not None]
        if op in ("matmul", "bmm") and len(in_shapes) >= 2:
            a, b = t(x_shape), t(in_shapes[1])
            return (lambda: torch.matmul(a, b)), [a, b]
        if op == "sdpa" and len(in_shapes) >= 3:
            q, k, v = t(in_shapes[0]), t(in_shapes[1]), t(in_shapes[2])
            return (lambda: F.scaled_dot_product_attention(q, k, v)), [q, k, v]
        if op == "batch_norm":
            x = t(x_shape)
            c = int(x_shape[1]) if len(x_shape) > 1 else 1
            w, b = t((c,)), t((c,))
            rm, rv = torch.zeros(c), torch.ones(c)
            return (lambda: F.batch_norm(x, rm, rv, w, b, training=grad)), [x, w, b]
        if op == "layer_norm":
            x = t(x_shape)
            h = int(x_shape[-1])
            w, b = t((h,)), t((h,))
            return (lambda: F.layer_norm(x, (h,), w, b)), [x, w, b]
        if op == "group_norm" and len(x_shape) >= 2:
            x = t(x_shape)
            c = int(x_shape[1])
            g = int(attrs.get("groups") or 1)
            return (lambda: F.group_norm(x, g if c % g == 0 else 1)), [x]
        if op in ("softmax", "log_softmax"):
            x = t(x_shape)
            f = torch.softmax if op == "softmax" else torch.log_softmax
            return (lambda: f(x, -1)), [x]
        if op in ("mean", "adaptive_avg_pool") and len(x_shape) == len(out):
            x = t(x_shape)
            dims = [i for i, (a, b) in enumerate(zip(x_shape, out)) if int(a) != int(b)]
            if not dims:
                return None
            return (lambda: x.mean(dim=dims, keepdim=True)), [x]
        if op in ("max_pool2d", "avg_pool2d") and len(x_shape) == 4:
            x = t(x_shape)
            k = attrs.get("kernel") or [2, 2]
            s = attrs.get("stride") or k
            p = attrs.get("padding") or 0
            f = F.max_pool2d if op == "max_pool2d" else F.avg_pool2d
            return (lambda: f(x, k, s, p)), [x]
        if op == "concat" and len(in_shapes) >= 2:
            xs = [t(s) for s in in_shapes]
            dim = next((i for i in range(len(out)) if any(int(s[i]) != int(out[i])
                                                          for s in in_shapes
                                                          if len(s) == len(out))), 0)
            return (lambda: torch.cat(xs, dim)), xs
        if op in BINARY and len(in_shapes) >= 2:
            a, b = t(x_shape), t(in_shapes[1])
            f = _fn(BINARY[op])
            return (lambda: f(a, b)), [a, b]
        if op in BINARY or op in UNARY:
            x = t(x_shape)
            f = _fn(UNARY.get(op, "clone")) if op in UNARY else (lambda v: v * 2.0)
            return (lambda: f(x)), [x]
    except (RuntimeError, ValueError, TypeError, IndexError):
        return None
    return None


def _median_ms(fn: Callable[[], Any], max_seconds: float, min_reps: int = 3,
               max_reps: int = 25) -> float:
    times: list[float] = []
    t_end = time.perf_counter() + max_seconds
    while len(times) < max_reps and (len(times) < min_reps or time.perf_counter() < t_end):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def time_node(op: str, in_shapes: list, out_shapes: list, attrs: dict[str, Any], *,
              backward: bool = False, max_seconds: float = 0.05) -> dict[str, float] | None:
    """``{"fwd_ms", "bwd_ms"}`` (median ms; ``bwd_ms`` only with ``backward``) of one node on
    this machine with torch's current thread count, or ``None`` when the op has no call."""
    import torch

    g = torch.Generator().manual_seed(0)
    call = op_call(op, in_shapes, out_shapes, attrs, grad=backward, generator=g)
    if call is None:
        return None
    fn, inputs = call
    try:
        if not backward:
            with torch.no_grad():
                fn()  # warm-up (allocator, oneDNN primitive cache)
                return {"fwd_ms": _median_ms(fn, max_seconds)}
        y = fn()
        fwd = _median_ms(fn, max_seconds)
        gy = torch.randn_like(y)
        req = [v for v in inputs if v.requires_grad]

        def bwd():
            torch.autograd.grad(y, req, gy, retain_graph=True)

        bwd()
        return {"fwd_ms": fwd, "bwd_ms": _median_ms(bwd, max_seconds)}
    except (RuntimeError, ValueError, TypeError, IndexError):
        return None


__all__ = ["GROUPS", "group_of", "op_call", "time_node"]
