"""Vidur's LLM layer-operator profiles (``vidur/compute/mlp-<gpu>.csv``): microsoft/vidur
(MLSys'24, MIT). fp16, CUDA events around each operator (GPU time, no host dispatch), times in
ms; one CSV row per (model, ``num_tokens``, ``num_tensor_parallel_workers``) holds the median of
every token-level operator of one transformer layer.

:func:`load_vidur_ops` returns one row per (CSV row, operator) with the operator as the kernel
perfcast's lowering would launch (:mod:`perfcast.features.kernels` vocabulary, 2-byte operands)
— what the cross-GPU small-work evaluation prices (``benchmarks/crossdevice_small_work.py``):

====================================  =========================================================
operator                              kernel (``t`` tokens, ``T`` tensor-parallel workers,
                                      ``d = n_embd / n_head``, ``q = n_head·d/T``,
                                      ``kv = max(1, n_kv_head/T)·d``, ``f = n_expanded/T``)
====================================  =========================================================
``attn_pre_proj`` (QKV)               GEMM ``[t, n_embd] × [n_embd, q + 2·kv]``
``attn_post_proj`` (output)           GEMM ``[t, q] × [q, n_embd]``
``mlp_up_proj``                       GEMM ``[t, n_embd] × [n_embd, f·(2 if gated else 1)]``
``mlp_down_proj``                     GEMM ``[t, f] × [f, n_embd]``
``input_layernorm``,                  norm over ``t`` rows of ``n_embd``
``post_attention_layernorm``
``attn_rope``                         element-wise (``mul``) over ``t × (q + kv)`` (rotary on
                                      queries and keys)
``mlp_act``                           element-wise over ``t × f`` (gated: SiLU(x)·y, two
                                      inputs; else GELU)
``add``                               element-wise ``add`` over ``t × n_embd`` (the residual)
====================================  =========================================================

The embedding lookup (``emb``) is left out: a gather of ``t`` rows whose cost is the index
traffic, not a kernel class perfcast prices. ``phase`` is ``decode`` for ``t ≤`` 
:data:`DECODE_TOKENS` (a decode batch: one token per sequence) and ``prefill`` above.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.datasets._base import resolve_data_dir
from perfcast.errors import PerfcastError, unknown_choice

COMPUTE_DIR = "vidur/compute"
#: The profiles' GPUs → perfcast registry keys. Vidur's A100 profile is from its DGX A100
#: (80 GB SXM); the A40 from a PCIe card.
DEVICE_KEYS: dict[str, str] = {"a100": "a100-80gb", "a40": "a40"}
#: Tokens of a forward pass up to which it is a decode batch (one token per sequence).
DECODE_TOKENS = 64
#: Operators priced, in the layer's order.
OPERATORS: tuple[str, ...] = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
                              "post_attention_layernorm", "mlp_up_proj", "mlp_act",
                              "mlp_down_proj", "add")
UPSTREAM = "microsoft/vidur (MLSys'24), vidur/compute profiles"


def vidur_files(data_dir: str | os.PathLike | None = None) -> dict[str, Path]:
    """``{device key: profile CSV}`` of the profiles present."""
    root = resolve_data_dir(data_dir) / COMPUTE_DIR
    out = {}
    for gpu, key in DEVICE_KEYS.items():
        path = root / f"mlp-{gpu}.csv"
        if path.is_file():
            out[key] = path
    return out


def _kernel(op: str, t, cfg) -> dict:
    d = cfg["n_embd"] / cfg["n_head"]
    tp = cfg["tp"]
    q = cfg["n_head"] * d / tp
    kv = max(1.0, cfg["n_kv_head"] / tp) * d
    f = cfg["n_expanded_embd"] / tp
    gated = bool(cfg["use_gated_mlp"])
    e = cfg["n_embd"]
    if op == "attn_pre_proj":
        return {"op": "linear", "kernel_class": "gemm", "B": 1, "M": t, "N": q + 2 * kv, "K": e}
    if op == "attn_post_proj":
        return {"op": "linear", "kernel_class": "gemm", "B": 1, "M": t, "N": e, "K": q}
    if op == "mlp_up_proj":
        return {"op": "linear", "kernel_class": "gemm", "B": 1, "M": t,
                "N": f * (2 if gated else 1), "K": e}
    if op == "mlp_down_proj":
        return {"op": "linear", "kernel_class": "gemm", "B": 1, "M": t, "N": e, "K": f}
    if op in ("input_layernorm", "post_attention_layernorm"):
        return {"op": "ln", "kernel_class": "norm", "B": t, "H": e}
    if op == "attn_rope":
        return {"op": "mulu", "kernel_class": "elementwise", "B": t, "H": q + kv}
    if op == "mlp_act":
        return {"op": "mul" if gated else "gelu", "kernel_class": "elementwise", "B": t, "H": f}
    if op == "add":
        return {"op": "add", "kernel_class": "elementwise", "B": t, "H": e}
    raise PerfcastError(f"vidur: no kernel for operator {op!r}")


def load_vidur_ops(device: str | None = None, data_dir: str | os.PathLike | None = None,
                   stat: str = "median") -> pd.DataFrame:
    """One row per (profile row, operator of :data:`OPERATORS`): ``model``, ``num_tokens``,
    ``tp``, ``operator``, ``phase``, the kernel's ``op`` / ``kernel_class`` / dims (``B, M, N,
    K`` or ``B, H``), ``dtype_bytes`` (2), ``device_key``, ``latency_ms`` (the profile's
    ``stat``: median by default), ``source`` and ``source_row``. ``device``: one registry key of
    :data:`DEVICE_KEYS` (default: every profile present)."""
    files = vidur_files(data_dir)
    if device is not None:
        if device not in DEVICE_KEYS.values():
            raise unknown_choice("vidur profile device", device, DEVICE_KEYS.values())
        files = {k: v for k, v in files.items() if k == device}
    if not files:
        raise PerfcastError(f"no vidur profile under {resolve_data_dir(data_dir) / COMPUTE_DIR}"
                            f" (see PERFCAST_DATA)")
    rows = []
    for key, path in files.items():
        df = pd.read_csv(path)
        rel = f"{COMPUTE_DIR}/{path.name}"
        for i, r in enumerate(df.itertuples(index=False)):
            rd = r._asdict()
            cfg = {"n_embd": float(rd["n_embd"]), "n_head": float(rd["n_head"]),
                   "n_kv_head": float(rd["n_kv_head"]),
                   "n_expanded_embd": float(rd["n_expanded_embd"]),
                   "use_gated_mlp": rd["use_gated_mlp"], "tp": float(rd["num_tensor_parallel_workers"])}
            t = float(rd["num_tokens"])
            for op in OPERATORS:
                col = f"time_stats.{op}.{stat}"
                v = df[col].iat[i] if col in df else np.nan
                if not (np.isfinite(v) and v > 0):
                    continue
                rows.append({"model": rd["model"], "num_tokens": int(t), "tp": int(cfg["tp"]),
                             "operator": op,
                             "phase": "decode" if t <= DECODE_TOKENS else "prefill",
                             **_kernel(op, t, cfg), "dtype_bytes": 2, "device_key": key,
                             "latency_ms": float(v), "source": rel, "source_row": i})
    out = pd.DataFrame(rows)
    for c in ("B", "M", "N", "K", "H"):
        if c not in out:
            out[c] = np.nan
    return out


__all__ = ["DECODE_TOKENS", "DEVICE_KEYS", "OPERATORS", "load_vidur_ops", "vidur_files"]
