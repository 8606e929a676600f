"""``crossdevice`` — any GPU from its spec sheet, with answers a user can trust.

A record's time is composed from the kernels its graph launches
(:mod:`perfcast.features.kernels`): each kernel's GPU time from the GPU's spec numbers
(:mod:`~perfcast.predictors.crossdevice.pricing`), queued behind the host's dispatch
(:mod:`~perfcast.predictors.crossdevice.composition`) and scaled once by a device-free correction
(:mod:`~perfcast.predictors.crossdevice.predictor`) — physically consistent by construction: a
GPU at least as good in every spec number is never predicted slower, and more work never
faster. Its accuracy is in ``reports/crossdevice/`` (BENCHMARKS.md)."""

from __future__ import annotations

from perfcast.predictors.crossdevice.composition import (
    kernel_frame,
    queue_time,
)
from perfcast.predictors.crossdevice.predictor import (
    CORRECTION_FEATURES,
    DEVICE_FEATURES,
    MONOTONE_CORRECTION,
    CrossDevicePredictor,
    composition_features,
    correction_regime,
)
from perfcast.predictors.crossdevice.pricing import (
    REFERENCE,
    TC_PEAKS,
    KernelPrices,
    has_matrix_units,
    kernel_frame_work,
    peak_unit,
    price_kernels,
)
from perfcast.workload import TF32_MODES

#: The name the report and the CPU predictor import.
_kernel_frame = kernel_frame

__all__ = [
    "CORRECTION_FEATURES",
    "CrossDevicePredictor",
    "DEVICE_FEATURES",
    "KernelPrices",
    "MONOTONE_CORRECTION",
    "REFERENCE",
    "TC_PEAKS",
    "TF32_MODES",
    "composition_features",
    "correction_regime",
    "has_matrix_units",
    "kernel_frame",
    "kernel_frame_work",
    "peak_unit",
    "price_kernels",
    "queue_time",
]
