"""The work of one kernel and its roofline: FLOPs and bytes moved per kernel class
(:func:`kernel_work`), the fewest FLOPs the fastest algorithm needs (:func:`min_flops_factor`)
and ``max(FLOPs / peak, bytes / bandwidth)`` on a GPU of the registry (:func:`roofline_ms`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError

#: The kernel classes, one booster each.
KERNEL_CLASSES: tuple[str, ...] = ("gemm", "conv", "norm", "softmax", "elementwise")
#: Element-wise ops NeuSight measured (the op code is a feature of the elementwise booster).
ELEMENTWISE_OPS: tuple[str, ...] = ("add", "addu", "mul", "mulu", "div", "divu", "pow", "powu",
                                    "relu", "gelu", "tanh")
#: Element-wise ops reading two tensors (the others read one tensor and maybe a scalar).
BINARY_OPS = frozenset({"add", "mul", "div", "pow"})
#: Operator name → kernel class.
OP_CLASS: dict[str, str] = {"bmm": "gemm", "linear": "gemm", "conv": "conv", "ln": "norm",
                            "softmax": "softmax", **{o: "elementwise" for o in ELEMENTWISE_OPS}}
#: The dimensions each class reads (NeuSight's column names; ``Kernel_Szie`` sic).
CLASS_DIMS: dict[str, tuple[str, ...]] = {
    "gemm": ("B", "M", "N", "K"),
    "conv": ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride",
             "Padding"),
    "norm": ("B", "H"), "softmax": ("B", "H"), "elementwise": ("B", "H"),
}
#: Bytes per element by precision.
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "amp": 2, "fp64": 8}
#: Arithmetic saving of Winograd F(4×4, 3×3) over direct convolution: 16·9 / 6² = 4.
WINOGRAD_GAIN = 4.0


def kernel_class_of(op: str) -> str:
    """The kernel class of an operator name (``"bmm"`` → ``"gemm"``) or of a class name."""
    key = str(op).strip().lower()
    if key in KERNEL_CLASSES:
        return key
    try:
        return OP_CLASS[key]
    except KeyError:
        raise PerfcastError(f"unknown kernel operator {op!r} (known: "
                            f"{', '.join(sorted(OP_CLASS))}; or a class: "
                            f"{', '.join(KERNEL_CLASSES)})") from None


def _dim(dims: Mapping[str, Any], name: str, kernel_class: str) -> np.ndarray:
    if name not in dims:
        raise PerfcastError(f"{kernel_class} needs dimension {name!r} "
                            f"(dims: {', '.join(CLASS_DIMS[kernel_class])})")
    return np.asarray(dims[name], dtype=np.float64)


def _bytes_per_element(precision: str, dtype_bytes: int | None) -> int:
    if dtype_bytes is not None:
        return int(dtype_bytes)
    p = str(precision).strip().lower()
    if p not in DTYPE_BYTES:
        raise PerfcastError(f"unknown precision {precision!r} (use {', '.join(DTYPE_BYTES)})")
    return DTYPE_BYTES[p]


def conv_output_size(input_size, kernel_size, stride=1, padding=0):
    """``⌊(S + 2P − R) / stride⌋ + 1`` (square images)."""
    s, r = np.asarray(input_size, dtype=np.float64), np.asarray(kernel_size, dtype=np.float64)
    st, p = np.asarray(stride, dtype=np.float64), np.asarray(padding, dtype=np.float64)
    return np.floor((s + 2 * p - r) / st) + 1


def _inputs(op, dims: Mapping[str, Any]):
    if "inputs" in dims:
        return np.asarray(dims["inputs"], dtype=np.float64)
    if op is None:
        return 1.0
    ops = np.asarray(op, dtype=object)
    return np.where(np.isin(ops, list(BINARY_OPS)), 2.0, 1.0) if ops.ndim else \
        (2.0 if str(op) in BINARY_OPS else 1.0)


def kernel_work(kernel_class: str, dims: Mapping[str, Any], precision: str = "fp32",
                dtype_bytes: int | None = None, *, op=None) -> tuple[Any, Any]:
    """``(FLOPs, bytes moved)`` of one kernel (``s`` = bytes per element, 4 for fp32):

    * ``gemm``: ``2·B·M·N·K`` FLOPs, ``s·B·(M·K + K·N + M·N)`` bytes;
    * ``conv``: the implicit GEMM's ``2·(B·O²)·Co·(Ci·R²)`` FLOPs with
      ``O = ⌊(S + 2P − R)/stride⌋ + 1``, ``s·(B·Ci·S² + Co·Ci·R² + B·Co·O²)`` bytes;
    * ``norm``: ``8·B·H`` FLOPs (mean, variance, normalise, scale + shift),
      ``s·(2·B·H + 2·H) + 4·2·B`` bytes (x, y, γ, β; fp32 mean and rstd);
    * ``softmax``: ``5·B·H`` FLOPs (max, sub, exp, sum, div), ``s·2·B·H`` bytes;
    * ``elementwise``: ``B·H`` FLOPs (one per element), ``s·(inputs + 1)·B·H`` bytes.

    Each tensor is moved once. Dimensions use the names of NeuSight's CSVs
    (``perfcast.datasets.kernels``): GEMM ``B, M, N, K`` (``linear``: ``B = 1``); conv ``B,
    Input_Channel (Ci), Output_Channel (Co), Kernel_Szie (R, sic), Input_Size (S, square),
    Stride, Padding``; the others ``B`` rows of ``H`` elements.

    ``kernel_class`` is a class (``gemm`` …) or an op name (``bmm``, ``add`` …); ``dims`` maps
    the class's dimension names (:data:`CLASS_DIMS`) to numbers or equal-length arrays (then
    arrays come back). ``dtype_bytes`` defaults to the precision's element size (4 for fp32).
    Element-wise ops read two tensors for ``op`` in :data:`BINARY_OPS` (an op name, or an array
    of them; also when ``kernel_class`` is such an op name), else one — or ``dims["inputs"]``.
    """
    if op is None and str(kernel_class).strip().lower() in OP_CLASS:
        op = str(kernel_class).strip().lower()
    kc = kernel_class_of(kernel_class)
    s = float(_bytes_per_element(precision, dtype_bytes))
    g = lambda name: _dim(dims, name, kc)
    if kc == "gemm":
        b, m, n, k = g("B"), g("M"), g("N"), g("K")
        flops = 2.0 * b * m * n * k
        moved = s * b * (m * k + k * n + m * n)
    elif kc == "conv":
        b, ci, co = g("B"), g("Input_Channel"), g("Output_Channel")
        r, size = g("Kernel_Szie"), g("Input_Size")
        st = np.asarray(dims.get("Stride", 1), dtype=np.float64)
        pad = np.asarray(dims.get("Padding", 0), dtype=np.float64)
        o = conv_output_size(size, r, st, pad)
        flops = 2.0 * (b * o * o) * co * (ci * r * r)
        moved = s * (b * ci * size * size + co * ci * r * r + b * co * o * o)
    else:
        b, h = g("B"), g("H")
        n = b * h
        if kc == "norm":
            flops, moved = 8.0 * n, s * (2.0 * n + 2.0 * h) + 4.0 * 2.0 * b
        elif kc == "softmax":
            flops, moved = 5.0 * n, s * 2.0 * n
        else:
            flops, moved = 1.0 * n, s * (_inputs(op, dims) + 1.0) * n
    if np.ndim(flops) == 0:
        return float(flops), float(moved)
    return flops, moved


def min_flops_factor(kernel_class: str, dims: Mapping[str, Any]):
    """How many times fewer multiplications than :func:`kernel_work`'s FLOPs the fastest
    algorithm may need: :data:`WINOGRAD_GAIN` for 3×3 stride-1 convolutions (cuDNN runs
    Winograd there, faster than their direct-FLOP roofline), else 1."""
    if kernel_class_of(kernel_class) != "conv":
        return 1.0
    r = np.asarray(dims["Kernel_Szie"], dtype=np.float64)
    st = np.asarray(dims.get("Stride", 1), dtype=np.float64)
    out = np.where((r == 3) & (st == 1), WINOGRAD_GAIN, 1.0)
    return float(out) if out.ndim == 0 else out


def _device(device):
    from perfcast.devices import Device, get_device

    return device if isinstance(device, Device) else get_device(str(device))


def device_spec(device) -> dict[str, float]:
    """The spec-sheet numbers the model reads, in SI units: ``peak_flops`` (FP32, FLOP/s) and
    ``bandwidth`` (B/s). ``device``: a registry key or a :class:`~perfcast.devices.Device` (a
    GPU with these fields)."""
    dev = _device(device)
    missing = [f for f in ("peak_fp32_tflops", "bandwidth_gbs") if getattr(dev, f) is None]
    if not dev.is_gpu or missing:
        raise PerfcastError(f"device '{dev.key}': the kernel model needs a GPU with "
                            f"{', '.join(missing) or 'a GPU kind'} in its spec")
    return {"peak_flops": float(dev.peak_tflops("fp32")) * 1e12,
            "bandwidth": float(dev.bandwidth_gbs) * 1e9}


def roofline_ms(flops, bytes_moved, device, precision: str = "fp32"):
    """``max(flops / peak, bytes / bandwidth)`` in ms on ``device`` (key or Device) at
    ``precision``'s peak (:meth:`~perfcast.devices.Device.peak_tflops`). Scalars or arrays."""
    dev = _device(device)
    peak = dev.peak_tflops(precision)
    if not peak or not dev.bandwidth_gbs:
        raise PerfcastError(f"device '{dev.key}' has no {precision} peak or bandwidth")
    out = np.maximum(np.asarray(flops, dtype=np.float64) / (float(peak) * 1e12),
                     np.asarray(bytes_moved, dtype=np.float64) / (float(dev.bandwidth_gbs) * 1e9))
    out = out * 1e3
    return float(out) if out.ndim == 0 else out


def kernel_roofline_ms(kernel_class: str, dims: Mapping[str, Any], device,
                       precision: str = "fp32", *, op=None):
    """The bound the model's utilization is relative to: :func:`roofline_ms` of
    :func:`kernel_work`, with the FLOPs divided by :func:`min_flops_factor` (Winograd)."""
    flops, moved = kernel_work(kernel_class, dims, precision, op=op)
    return roofline_ms(np.asarray(flops) / min_flops_factor(kernel_class, dims), moved, device,
                       precision)
