"""The GPU-time base of a kernel class, ``τ + ((c/η)^p + (m/β)^p)^(1/p)`` (:func:`_base`), and
its fit by least squares on kernel GPU times (:func:`_fit_base`; Vidur's CUDA-event profiles of
LLM layer operators, :meth:`~perfcast.predictors.kernels.KernelModel.fit_gpu_time`). The device
enters only through ``c`` (FLOPs ÷ peak) and ``m`` (bytes ÷ bandwidth)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from perfcast.features.table import unique
from perfcast.predictors.kernels.features import _dims_of, _ops_of
from perfcast.predictors.kernels.work import _device, kernel_work

#: Classes whose GPU-time base overlaps compute and memory (:func:`_base`'s exponent ``p``
#: fitted): a GEMM's shapes vary its compute-to-memory ratio, so the data tell ``p`` apart;
#: a norm's or an element-wise op's ratio is fixed by its class (their ``p`` stays 1).
OVERLAP_CLASSES: tuple[str, ...] = ("gemm",)
#: Where a class without GPU-time measurements takes its constants from (first fitted wins).
GPU_TIME_FALLBACK: dict[str, tuple[str, ...]] = {
    "gemm": ("gemm",), "conv": ("gemm",), "norm": ("norm", "elementwise"),
    "softmax": ("norm", "elementwise"), "elementwise": ("elementwise", "norm")}


def _gpu_times(df) -> tuple[np.ndarray, np.ndarray]:
    """``(compute ms, memory ms)`` per kernel row at its own operand size (``dtype_bytes``,
    default 4): 2-byte GEMMs at the GPU's fp16 tensor peak, everything else at its FP32 peak."""
    c, m = np.zeros(len(df)), np.zeros(len(df))
    kcs = df["kernel_class"].astype(str).to_numpy()
    col = "device_key" if "device_key" in df.columns else "device"
    db = df["dtype_bytes"].to_numpy(np.float64) if "dtype_bytes" in df else np.full(len(df), 4.0)
    for kc in unique(kcs):
        idx = np.flatnonzero(kcs == kc)
        rows = df.iloc[idx]
        dims = _dims_of(rows, kc)
        flops, moved = kernel_work(kc, dims, dtype_bytes=1, op=_ops_of(rows))
        flops = np.broadcast_to(np.asarray(flops, float), (len(rows),))
        moved = np.broadcast_to(np.asarray(moved, float), (len(rows),)) * db[idx]
        devs = {d: _device(d) for d in dict.fromkeys(rows[col])}
        half = (kc == "gemm") & (db[idx] <= 2)
        peak = np.array([float(devs[d].peak_tflops("fp16" if h else "fp32"))
                         for d, h in zip(rows[col], half)])
        bw = np.array([float(devs[d].bandwidth_gbs) for d in rows[col]])
        c[idx] = flops / (peak * 1e12) * 1e3
        m[idx] = moved / (bw * 1e9) * 1e3
    return c, m


#: Largest overlap exponent ``p`` of :func:`_base` a fit may choose (``p → ∞`` is the plain
#: maximum of the compute and memory terms; at 8 the two differ by at most 9 %).
P_MAX = 8.0


def _base(q: Mapping[str, float], c, m):
    """``τ + ((c/η)^p + (m/β)^p)^(1/p)`` (ms) with the class's base parameters ``q``: the compute
    and memory terms overlapped by a smooth maximum of exponent ``p`` (a GEMM streams its tiles
    while it computes); ``p = 1`` — their sum — where ``q`` has no ``p``. Non-decreasing in
    ``c`` and ``m``, and ``≥ max(c/η, m/β)`` for every ``p ≥ 1``."""
    a = np.asarray(c, dtype=np.float64) / q["eta"]
    b = np.asarray(m, dtype=np.float64) / q["beta"]
    p = float(q.get("p", 1.0))
    if p == 1.0:
        return q["tau_ms"] + a + b
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(hi > 0, lo / hi, 0.0)
    return q["tau_ms"] + hi * (1.0 + ratio ** p) ** (1.0 / p)


def _fit_base(c: np.ndarray, m: np.ndarray, log_t: np.ndarray,
              tau_ms: float | None = None, fit_p: bool = False) -> dict[str, float]:
    """``τ, η, β`` (and with ``fit_p`` the overlap exponent ``p`` in [1, :data:`P_MAX`]) of
    :func:`_base` by least squares of ``log t`` (``τ > 0``, or fixed to ``tau_ms``; ``η, β``
    in (0, 1]: a kernel never beats the peak or the bandwidth)."""
    from scipy.optimize import least_squares

    def unpack(q):
        out = {"tau_ms": float(np.exp(q[0])) if tau_ms is None else float(tau_ms),
               "eta": float(1 / (1 + np.exp(-q[1]))), "beta": float(1 / (1 + np.exp(-q[2])))}
        if fit_p:
            out["p"] = float(1.0 + (P_MAX - 1.0) / (1 + np.exp(-q[3])))
        return out

    start = [np.log(5e-3), 0.5, 0.5] + ([0.0] if fit_p else [])
    q = least_squares(lambda q: np.log(_base(unpack(q), c, m)) - log_t, start).x
    return unpack(q)
