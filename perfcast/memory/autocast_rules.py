"""CUDA's autocast dtype rules applied to (fake) CPU tensors.

``torch.autocast("cuda")`` cannot be used to simulate on a CPU-only machine: it disables itself
when CUDA is unavailable, and even forced on (``torch.set_autocast_enabled("cuda", True)``) the
``AutocastCUDA`` kernels only cast CUDA tensors; and a fake *CUDA* device cannot run backward
without a CUDA context. So the simulation runs on a fake CPU device under
``torch.autocast("cpu", dtype=float16)`` and, inside :func:`cuda_autocast_rules`, replaces the
``AutocastCPU`` kernels whose policy differs from CUDA's with Python kernels implementing the CUDA
policy (the same mechanism as ``torch.library.register_autocast``):

* both devices cast to fp16: convolutions, ``linear``, ``matmul``, ``mm``, ``addmm``, ``bmm``,
  ``baddbmm``, ``addbmm``, ``prelu``, ``scaled_dot_product_attention``, ``linalg_vecdot``;
  both run in fp32: the loss functions (``nll_loss``, ``mse_loss``, ``l1_loss``, ``kl_div``,
  ``binary_cross_entropy_with_logits`` …) and ``cdist``;
* CUDA-only fp16 (added here): ``addmv``, ``addr``, ``mv``, ``einsum``, ``chain_matmul``,
  ``linalg_multi_dot``, ``convolution``/``_convolution``, RNN cells,
  ``_scaled_dot_product_flash_attention``;
* CUDA-only fp32 (added here; **on CPU these run in the input dtype**, e.g. fp16 LayerNorm
  outputs): ``layer_norm``, ``native_layer_norm``, ``group_norm``, ``rms_norm``, ``exp``, ``log``,
  ``log1p``, ``log2``, ``log10``, ``expm1``, ``pow``, ``rsqrt``, ``reciprocal``, ``softplus``,
  ``acos``/``asin``/``cosh``/``sinh``/``tan``, ``erfinv``, ``logsumexp``, ``dist``, ``pdist``,
  ``renorm``, ``cosine_similarity``, ``frobenius_norm``/``nuclear_norm``, all ``upsample_*``;
* CUDA-only "fp32 output dtype" (an fp16 input gives an fp32 result): ``softmax``,
  ``log_softmax``, ``sum``, ``cumsum``, ``cumprod``, ``prod``, ``linalg_vector_norm``,
  ``linalg_matrix_norm``, ``norm``;
* CUDA-only "promote to the widest input type": ``addcdiv``, ``addcmul``, ``atan2``,
  ``bilinear``, ``cross``, ``dot``, ``vdot``, ``index_put``, ``scatter_add``, ``tensordot``,
  ``grid_sampler`` (CPU: fp32);
* CPU-only rules removed here (CUDA has none): fp32 for ``cross_entropy_loss`` (CUDA: no extra
  fp32 copy of the logits; ``log_softmax`` produces fp32), 3-D pooling, reflection/replication
  padding, FFTs, linear algebra (``inverse``, ``svd``, ``qr`` …), ``quantile``, ``stft``,
  ``polar``; fp16 for ``_addmm_activation`` and ``_native_multi_head_attention``; promotion
  for ``cat``/``stack``/``index_copy`` (CUDA relies on built-in type promotion: same dtype).

The CPU-only set is read from the dispatcher at run time (ops with an ``AutocastCPU`` kernel and
no ``AutocastCUDA`` kernel); the CUDA policies are PyTorch's ``autocast_mode.cpp`` tables, applied
only to ops that do have an ``AutocastCUDA`` kernel in the installed torch. Not reproduced:
the banned ``binary_cross_entropy`` error, ``_cudnn_rnn`` (cuDNN's packed weights), and
``float64`` subtleties. The registration is process-wide while the context is active.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import torch

__all__ = ["cuda_autocast_rules", "CUDA_POLICIES"]

_LOWER = "lower_precision_fp"
_FP32 = "fp32"
_SET_OPT = "fp32_set_opt_dtype"
_APPEND = "fp32_append_dtype"
_PROMOTE = "promote"

#: CUDA autocast policy of ops whose CPU policy differs (op name or ``name.overload``).
CUDA_POLICIES: dict[str, str] = {
    **{n: _LOWER for n in (
        "_convolution", "convolution", "cudnn_convolution", "cudnn_convolution_transpose",
        "addmv", "addr", "mv", "einsum", "chain_matmul", "linalg_multi_dot",
        "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell", "gru_cell",
        "rnn_tanh_cell", "rnn_relu_cell", "_scaled_dot_product_flash_attention")},
    **{n: _FP32 for n in (
        "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
        "reciprocal", "rsqrt", "sinh", "tan", "pow.Scalar", "pow.Tensor_Scalar",
        "pow.Tensor_Tensor", "softplus", "layer_norm", "native_layer_norm", "group_norm",
        "rms_norm", "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim",
        "cosine_similarity", "dist", "pdist", "renorm", "logsumexp",
        "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
        "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
        "upsample_linear1d", "upsample_bilinear2d", "_upsample_bilinear2d_aa",
        "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa")},
    **{n: _SET_OPT for n in (
        "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum",
        "linalg_vector_norm", "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum",
        "sum.dim_IntList")},
    **{n: _APPEND for n in ("norm.Scalar", "norm.ScalarOpt_dim")},
    **{n: _PROMOTE for n in (
        "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "index_put",
        "scatter_add", "tensordot", "grid_sampler")},
}

_AUTOCAST_CPU = torch._C.DispatchKey.AutocastCPU


def _eligible(t: Any) -> bool:
    return (isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64
            and t.device.type == "cpu")


class _CastCache:
    """Autocast's weight cache: fp16 copies of leaf fp32 tensors that require grad."""

    def __init__(self) -> None:
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def cast(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if t.dtype == dtype:
            return t
        cacheable = (dtype != torch.float32 and t.dtype == torch.float32 and t.requires_grad
                     and t.is_leaf and not t._is_view() and torch.is_autocast_cache_enabled())
        if not cacheable:
            return t.to(dtype)
        hit = self.cache.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        out = t.to(dtype)
        self.cache[id(t)] = (t, out)
        return out


def _cast_all(args: tuple, kwargs: dict, dtype: torch.dtype, cache: _CastCache):
    def one(a: Any) -> Any:
        if _eligible(a):
            return cache.cast(a, dtype)
        if isinstance(a, (list, tuple)) and any(_eligible(x) for x in a):
            return type(a)(cache.cast(x, dtype) if _eligible(x) else x for x in a)
        return a
    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


def _widest(args: tuple, kwargs: dict) -> torch.dtype | None:
    found = [x.dtype for x in _flat(list(args) + list(kwargs.values())) if _eligible(x)]
    if not found:
        return None
    return torch.float32 if torch.float32 in found else found[0]


def _flat(items: list) -> list:
    out = []
    for a in items:
        if isinstance(a, (list, tuple)):
            out.extend(_flat(list(a)))
        else:
            out.append(a)
    return out


def _resolve(name: str):
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return None
    return getattr(packet, overload or "default", None)


def _qualname(op) -> str:
    overload = op._overloadname
    return f"{op._schema.name.removeprefix('aten::')}" + ("" if overload == "default"
                                                         else f".{overload}")


def _kernel(op, policy: str, cache: _CastCache):
    excl = torch._C.DispatchKeySet(_AUTOCAST_CPU)
    dtype_idx = next((i for i, a in enumerate(op._schema.arguments) if a.name == "dtype"), None)

    def run(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(excl):
            if policy == _LOWER:
                args, kwargs = _cast_all(args, kwargs, torch.get_autocast_dtype("cpu"), cache)
            elif policy == _FP32:
                args, kwargs = _cast_all(args, kwargs, torch.float32, cache)
            elif policy == _PROMOTE:
                wide = _widest(args, kwargs)
                if wide is not None:
                    args, kwargs = _cast_all(args, kwargs, wide, cache)
            elif policy == _SET_OPT:
                if args and _eligible(args[0]) and dtype_idx is not None:
                    if len(args) > dtype_idx:
                        if args[dtype_idx] is None:
                            args = args[:dtype_idx] + (torch.float32,) + args[dtype_idx + 1:]
                    elif kwargs.get("dtype") is None:
                        kwargs = {**kwargs, "dtype": torch.float32}
            elif policy == _APPEND:
                if args and _eligible(args[0]):
                    if op._overloadname == "Scalar":
                        p = args[1] if len(args) > 1 else kwargs.get("p", 2)
                        return torch.ops.aten.norm.ScalarOpt_dtype(args[0], p,
                                                                   dtype=torch.float32)
                    return torch.ops.aten.norm.ScalarOpt_dim_dtype(*args, **kwargs,
                                                                   dtype=torch.float32)
            return op(*args, **kwargs)
    return run


def _fallthrough_kernel(op):
    """No autocast rule (as on CUDA): decompose composite ops with autocast still active."""
    excl = torch._C.DispatchKeySet(_AUTOCAST_CPU)
    composite = torch._C._dispatch_has_kernel_for_dispatch_key(
        op.name(), torch._C.DispatchKey.CompositeImplicitAutograd)

    def run(*args, **kwargs):
        if composite:
            return op.decompose(*args, **kwargs)
        with torch._C._ExcludeDispatchKeyGuard(excl):
            return op(*args, **kwargs)
    return run


@lru_cache(maxsize=1)
def _plan() -> tuple[tuple[str, str], ...]:
    """(qualified op name, policy) of every AutocastCPU kernel to install."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    plan: list[tuple[str, str]] = []
    for name, policy in CUDA_POLICIES.items():
        op = _resolve(name)
        if op is not None and has(op.name(), "AutocastCUDA"):
            plan.append((name, policy))
    cuda_rules = {n for n, _ in plan}
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        try:
            if has(full, "AutocastCPU") and not has(full, "AutocastCUDA"):
                name = full.removeprefix("aten::")
                if name not in cuda_rules and _resolve(name) is not None:
                    plan.append((name, "fallthrough"))
        except RuntimeError:
            continue
    return tuple(plan)


@contextlib.contextmanager
def cuda_autocast_rules() -> Iterator[None]:
    """Inside, ``torch.autocast("cpu", ...)`` follows CUDA's autocast op lists (see module doc)."""
    cache = _CastCache()
    lib = torch.library.Library("aten", "IMPL")  # noqa: TOR901 - deliberately overriding aten
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, policy in _plan():
                op = _resolve(name)
                fn = _fallthrough_kernel(op) if policy == "fallthrough" else \
                    _kernel(op, policy, cache)
                lib.impl(_qualname(op), fn, "AutocastCPU")
        yield
    finally:
        cache.cache.clear()
        lib._destroy()
