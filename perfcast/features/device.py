"""Device feature vector for the learned predictors.

Magnitudes are ``log1p``-scaled so datacenter and laptop parts live on one scale; unknown
values become 0 plus an explicit indicator where "unknown" is common (CPU bandwidth / TDP).
"""

from __future__ import annotations

import math

import numpy as np

from perfcast.devices import Device

DEVICE_FEATURES: tuple[str, ...] = (
    "log1p_peak_fp32_tflops",
    "log1p_peak_fp16_tflops",  # FP16 tensor peak, FP32 peak when the device has none
    "log1p_memory_gb",
    "log1p_bandwidth_gbs",  # 0 when unknown
    "bandwidth_unknown",
    "log1p_compute_units",  # SMs (GPU) or cores (CPU)
    "log1p_l2_mb",  # last-level cache for CPUs; 0 when unknown
    "log1p_tdp_w",  # 0 when unknown
    "tdp_unknown",
    "is_gpu",
)


def _log1p(value: float | None) -> float:
    if value is None:
        return 0.0
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        return 0.0
    return math.log1p(v)


def _known(value: float | None) -> bool:
    return value is not None and math.isfinite(float(value)) and float(value) > 0


def device_vector(device: Device) -> np.ndarray:
    """Features of ``device`` in :data:`DEVICE_FEATURES` order, float32, always finite."""
    values = [
        _log1p(device.peak_fp32_tflops),
        _log1p(device.peak_tflops("fp16")),
        _log1p(device.memory_gb),
        _log1p(device.bandwidth_gbs),
        0.0 if _known(device.bandwidth_gbs) else 1.0,
        _log1p(device.compute_units),
        _log1p(device.l2_mb),
        _log1p(device.tdp_w),
        0.0 if _known(device.tdp_w) else 1.0,
        1.0 if device.is_gpu else 0.0,
    ]
    return np.asarray(values, dtype=np.float32)


__all__ = ["DEVICE_FEATURES", "device_vector"]
