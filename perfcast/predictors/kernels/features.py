"""The operator model's inputs: per kernel row, its device-free shape features
(:func:`kernel_features`), its compute and memory times on its device (:func:`kernel_times`) and
its size on a fixed reference GPU (:func:`reference_ms`). Kernel rows are a
``pandas.DataFrame`` (training, evaluation) or a light :class:`~perfcast.features.table.Table`
(answering: no pandas), read the same way."""

from __future__ import annotations

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.features.table import Table
from perfcast.predictors.kernels.work import (
    BINARY_OPS,
    CLASS_DIMS,
    ELEMENTWISE_OPS,
    conv_output_size,
    device_spec,
    kernel_class_of,
    kernel_work,
    min_flops_factor,
)

#: Output tile (rows × columns per thread block) the tile-count feature counts in.
TILE = (128, 128)
#: The fixed GPU whose roofline measures a kernel's size device-free (an A100's FP32 peak and
#: bandwidth; any fixed numbers would do, they only set the unit).
REFERENCE_GPU = {"fp32_tflops": 19.5, "bandwidth_gbs": 1555.0}


def _frame_devices(frame) -> dict[str, np.ndarray]:
    """Per-row device numbers (:func:`device_spec`: ``peak_flops``, ``bandwidth``) from
    ``device_key`` (or ``device``): registry keys or :class:`~perfcast.devices.Device`
    objects."""
    col = "device_key" if "device_key" in frame.columns else "device"
    if col not in frame.columns:
        raise PerfcastError("kernel rows need a device_key column (registry key or Device)")
    vals = frame[col].tolist()
    specs = {v: device_spec(v) for v in dict.fromkeys(vals)}
    fields = ("peak_flops", "bandwidth")
    return {f: np.array([specs[v][f] for v in vals], dtype=np.float64) for f in fields}


def _dims_of(frame, kc: str) -> dict[str, np.ndarray]:
    out = {}
    for name in CLASS_DIMS[kc]:
        if name not in frame.columns:
            raise PerfcastError(f"{kc} rows need column {name!r}")
        out[name] = frame[name].to_numpy(dtype=np.float64)
    return out


def _ops_of(frame) -> np.ndarray | None:
    """The ``op`` column as strings (``None`` without one)."""
    return frame["op"].astype(str).to_numpy() if "op" in frame.columns else None


def _roof_parts(frame, kc: str, dev: dict[str, np.ndarray]):
    dims = _dims_of(frame, kc)
    flops, moved = kernel_work(kc, dims, "fp32", op=_ops_of(frame))
    flops = np.broadcast_to(np.asarray(flops, dtype=np.float64), (len(frame),))
    moved = np.broadcast_to(np.asarray(moved, dtype=np.float64), (len(frame),))
    eff_flops = flops / np.asarray(min_flops_factor(kc, dims))
    t_c = eff_flops / dev["peak_flops"] * 1e3
    t_m = moved / dev["bandwidth"] * 1e3
    return dims, flops, moved, t_c, t_m, np.maximum(t_c, t_m)


def reference_ms(kernel_class: str, frame) -> np.ndarray:
    """The kernel's roofline (ms, fp32 operands, Winograd FLOPs) on :data:`REFERENCE_GPU`."""
    kc = kernel_class_of(kernel_class)
    dims = _dims_of(frame, kc)
    flops, moved = kernel_work(kc, dims, "fp32", op=_ops_of(frame))
    eff = np.asarray(flops, np.float64) / np.asarray(min_flops_factor(kc, dims))
    out = np.maximum(eff / (REFERENCE_GPU["fp32_tflops"] * 1e12),
                     np.asarray(moved, np.float64) / (REFERENCE_GPU["bandwidth_gbs"] * 1e9)) * 1e3
    return np.broadcast_to(out, (len(frame),)).astype(np.float64)


def kernel_times(kernel_class: str, frame) -> tuple[np.ndarray, np.ndarray]:
    """``(compute ms, memory ms)`` per row: effective FLOPs (Winograd) ÷ the device's FP32 peak
    and bytes (fp32 operands) ÷ its bandwidth — a virtual device
    (:func:`perfcast.predictors.crossdevice.price_kernels`) carries another peak or operand size."""
    kc = kernel_class_of(kernel_class)
    _, _, _, t_c, t_m, _ = _roof_parts(frame, kc, _frame_devices(frame))
    return t_c, t_m


def kernel_features(kernel_class: str, frame) -> tuple[Table, np.ndarray]:
    """``(features, roofline_ms)`` for rows of one kernel class (dims columns, ``op``,
    ``device_key``; a ``pandas.DataFrame`` or a :class:`~perfcast.features.table.Table`), the
    features as a table of named columns. The features are the kernel's own shape — log
    dimensions and counts, shape ratios, op codes — and **never the device**: the device enters
    a prediction only through the physical base ``τ + c/η + m/β``
    (:func:`~perfcast.predictors.kernels.gputime._base`), whose compute time ``c`` and memory
    time ``m`` never grow on a faster GPU."""
    kc = kernel_class_of(kernel_class)
    dev = _frame_devices(frame)
    dims, flops, moved, t_c, t_m, tr = _roof_parts(frame, kc, dev)
    log = np.log
    f: dict[str, np.ndarray] = {}
    if kc == "gemm":
        b, m, n, k = dims["B"], dims["M"], dims["N"], dims["K"]
        ops = _ops_of(frame)
        f.update(log_B=log(b), log_M=log(m), log_N=log(n), log_K=log(k), log_M_N=log(m / n),
                 log_K_MN=log(k / np.sqrt(m * n)),
                 log_tiles=log(b * np.ceil(m / TILE[0]) * np.ceil(n / TILE[1])),
                 log_intensity=log(flops / moved))
        f["is_linear"] = (ops == "linear").astype(np.float64) if ops is not None else \
            np.zeros(len(frame))
    elif kc == "conv":
        o = conv_output_size(dims["Input_Size"], dims["Kernel_Szie"], dims["Stride"],
                             dims["Padding"])
        ci, co = dims["Input_Channel"], dims["Output_Channel"]
        gm, gk = dims["B"] * o * o, ci * dims["Kernel_Szie"] ** 2  # implicit-GEMM M and K
        f.update(log_B=log(dims["B"]), log_Ci=log(ci), log_Co=log(co),
                 log_S=log(dims["Input_Size"]), log_Mg=log(gm), log_Kg=log(gk),
                 log_tiles=log(np.ceil(gm / TILE[0]) * np.ceil(co / TILE[1])),
                 log_intensity=log(flops / moved), kernel=dims["Kernel_Szie"],
                 stride=dims["Stride"], padding=dims["Padding"])
    else:
        b, h = dims["B"], dims["H"]
        f.update(log_B=log(b), log_H=log(h), log_n=log(b * h))
        if kc == "elementwise":
            ops = frame["op"].astype(str).to_numpy() if "op" in frame.columns else \
                np.full(len(frame), "add")
            f["op"] = np.array([ELEMENTWISE_OPS.index(o) if o in ELEMENTWISE_OPS else
                                (0 if o in BINARY_OPS else 1) for o in ops], dtype=np.float64)
            f["binary"] = np.isin(ops, list(BINARY_OPS)).astype(np.float64)
    return Table(f, length=len(frame)), tr


def _conv_as_gemm(rows):
    """Convolution rows as their implicit GEMM (``linear``: ``M = B·O², N = Co, K = Ci·R²``)."""
    o = conv_output_size(rows["Input_Size"], rows["Kernel_Szie"], rows["Stride"],
                         rows["Padding"])
    out = rows.copy()
    out["op"], out["kernel_class"] = "linear", "gemm"
    out["B"] = 1.0
    out["M"] = rows["B"].to_numpy(float) * o * o
    out["N"] = rows["Output_Channel"].to_numpy(float)
    out["K"] = rows["Input_Channel"].to_numpy(float) * rows["Kernel_Szie"].to_numpy(float) ** 2
    return out
