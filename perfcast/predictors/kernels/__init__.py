"""Operator-level (kernel) GPU time from the kernel's dimensions and the GPU's spec sheet only,
so it answers for a GPU it never saw (NeuSight's idea, learned from NeuSight's operator
measurements): :class:`KernelModel` answers ``max(base · exp(f(shape)), roofline)`` with a
physical base ``τ + c/η + m/β`` and ``f`` learned on the kernel's shape alone — a GPU at least
as good in every spec number never gets a slower kernel. Its accuracy is in
``reports/crossdevice/kernels.md`` (``benchmarks/kernel_model.py``).

Modules: :mod:`~perfcast.predictors.kernels.work` (FLOPs, bytes, rooflines),
:mod:`~perfcast.predictors.kernels.features` (the shape features),
:mod:`~perfcast.predictors.kernels.gputime` (the GPU-time base) and
:mod:`~perfcast.predictors.kernels.model` (:class:`KernelModel`)."""

from __future__ import annotations

from perfcast.predictors.kernels.features import (
    REFERENCE_GPU,
    TILE,
    kernel_features,
    kernel_times,
    reference_ms,
)
from perfcast.predictors.kernels.gputime import (
    GPU_TIME_FALLBACK,
    OVERLAP_CLASSES,
    P_MAX,
)
from perfcast.predictors.kernels.model import (
    CONFIG_FILE,
    FEATURE_VERSION,
    FORMAT_VERSION,
    GPU_BOUND_FACTOR,
    KernelModel,
)
from perfcast.predictors.kernels.work import (
    BINARY_OPS,
    CLASS_DIMS,
    DTYPE_BYTES,
    ELEMENTWISE_OPS,
    KERNEL_CLASSES,
    OP_CLASS,
    WINOGRAD_GAIN,
    conv_output_size,
    device_spec,
    kernel_class_of,
    kernel_roofline_ms,
    kernel_work,
    min_flops_factor,
    roofline_ms,
)

__all__ = [
    "BINARY_OPS",
    "CLASS_DIMS",
    "CONFIG_FILE",
    "DTYPE_BYTES",
    "ELEMENTWISE_OPS",
    "FEATURE_VERSION",
    "FORMAT_VERSION",
    "GPU_BOUND_FACTOR",
    "GPU_TIME_FALLBACK",
    "KERNEL_CLASSES",
    "KernelModel",
    "OP_CLASS",
    "OVERLAP_CLASSES",
    "P_MAX",
    "REFERENCE_GPU",
    "TILE",
    "WINOGRAD_GAIN",
    "conv_output_size",
    "device_spec",
    "kernel_class_of",
    "kernel_features",
    "kernel_roofline_ms",
    "kernel_times",
    "kernel_work",
    "min_flops_factor",
    "reference_ms",
    "roofline_ms",
]
