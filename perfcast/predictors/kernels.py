"""Operator-level (kernel) time on a GPU, from its dimensions and the GPU's spec sheet.

For one kernel-level operator — a GEMM (``bmm``, ``linear``), a ``conv``, a layer norm (``ln``),
a ``softmax`` or an element-wise op (``add addu mul mulu div divu pow powu relu gelu tanh``;
``…u`` = with a scalar operand) — :class:`KernelModel` predicts the kernel's GPU time from the
operator's dimensions and the GPU's spec-sheet numbers only, so it answers for a GPU it never saw
(NeuSight's idea, learned from NeuSight's operator measurements).

The model answers ``max(base · exp(f(shape)), t_roofline)`` with ``base = τ + c/η + m/β``
(``c`` = FLOPs ÷ peak, ``m`` = bytes ÷ bandwidth, ``τ, η, β`` fitted per class) and ``f`` an
XGBoost booster on the kernel's **shape only** — never faster than the roofline, and
**physically consistent by construction**: the GPU enters only through ``c`` and ``m``, so a GPU
at least as good in every spec number never gets a slower kernel.

Work per kernel class (:func:`kernel_work`; ``s`` = bytes per element, 4 for fp32)
=================  ===========================================  ===================================
class              FLOPs                                        bytes moved (each tensor once)
=================  ===========================================  ===================================
``gemm``           ``2·B·M·N·K``                                ``s·B·(M·K + K·N + M·N)``
``conv``           implicit GEMM ``2·(B·O²)·Co·(Ci·R²)``,       ``s·(B·Ci·S² + Co·Ci·R² + B·Co·O²)``
                   ``O = ⌊(S + 2P − R)/stride⌋ + 1``
``norm``           ``8·B·H`` (mean, variance, normalise,        ``s·(2·B·H + 2·H) + 4·2·B``
                   scale + shift)                               (x, y, γ, β; fp32 mean and rstd)
``softmax``        ``5·B·H`` (max, sub, exp, sum, div)          ``s·2·B·H``
``elementwise``    ``B·H`` (one per element)                    ``s·(inputs + 1)·B·H``; inputs = 2
                                                                for add/mul/div/pow, else 1
=================  ===========================================  ===================================

Dimensions use the names of NeuSight's CSVs (``perfcast.datasets.kernels``): GEMM ``B, M, N, K``
(``linear``: ``B = 1``); conv ``B, Input_Channel (Ci), Output_Channel (Co), Kernel_Szie (R, sic),
Input_Size (S, square), Stride, Padding``; the others ``B`` rows of ``H`` elements.

Roofline (:func:`roofline_ms`): ``max(FLOPs / peak, bytes / bandwidth)`` at the precision's
peak. The measurements are PyTorch 2.1 fp32: PyTorch does not use TF32 for matmul by default,
and although cuDNN may use TF32 for convolutions on Ampere, the A100 80GB conv rows ran only
FP32 SIMT kernels (``ampere_sgemm_*``, ``*_scudnn_*``, ``ampere_gcgemm_*``,
``implicit/precomputed_convolve_sgemm``; no ``xmma``/``tensorop``/``tf32`` kernel) — so the FP32
peak applies everywhere. A 3×3 stride-1 convolution can beat its direct-FLOP roofline: cuDNN
runs Winograd (measured up to 2.25× faster than ``FLOPs / peak``); its bound divides the FLOPs by
:data:`WINOGRAD_GAIN` = 4, the arithmetic saving of Winograd F(4×4, 3×3) (:func:`min_flops_factor`).

Features of ``f`` (:func:`kernel_features`): log dimensions, element / tile counts, shape
ratios, arithmetic intensity, op codes — no device number. Earlier versions learned the
utilization from tile waves per SM and the intensity over the ridge point: as accurate on
NeuSight's leave-one-GPU-out, but a GPU with more SMs at the same peak could come out slower, and
a model constrained monotone in every device-relative feature lost 15 points on the aligned test
GEMMs (reports/crossdevice/kernels.md).

The measurements time each operator from the host, so a small kernel reads as the harness's
dispatch time: only rows above :data:`GPU_BOUND_FACTOR` × that floor train the model; a smaller
kernel is priced by the same base (``τ`` is its fixed GPU-side time), and
:meth:`KernelModel.predict_measured` adds the harness's floor back when comparing with it.

**GPU-time constants** (:meth:`KernelModel.fit_gpu_time`): per class, ``τ, η, β`` — and for a
GEMM the overlap exponent ``p`` of ``τ + ((c/η)^p + (m/β)^p)^(1/p)`` (:func:`_base`) — fitted on
kernel GPU times (Vidur's CUDA-event profiles of LLM layer operators, fp16). They give every
class its ``τ`` and price the kernels the operator measurements never ran: tensor-core GEMMs
and convolutions, and the 2-byte norms and element-wise kernels
(:meth:`KernelModel.gpu_time_covers`; :func:`perfcast.predictors.crossdevice.price_kernels`).
The device enters them through ``c`` and ``m`` only, as everywhere here.

Device numbers come from the registry (:func:`perfcast.devices.get_device`: ``peak_tflops``,
``bandwidth_gbs``) — give a registry key or a :class:`~perfcast.devices.Device`.

Kernel rows are a ``pandas.DataFrame`` (training, evaluation) or a light
:class:`~perfcast.features.table.Table` (answering: no pandas); the functions that price rows read
either the same way, and :meth:`KernelModel.fit` trains on a ``pandas.DataFrame``.

Estimator contract in the spirit of :mod:`perfcast.predictors.base`: ``__init__`` only stores
hyper-parameters; ``fit`` learns one XGBoost booster per kernel class; fitted attributes end in
``_``; ``save(dir)`` writes ``config.json`` + ``<class>.json`` (XGBoost's own JSON model format,
never pickle) and ``KernelModel.load(dir)`` reads them back.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.features.table import Table, unique

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
#: Output tile (rows × columns per thread block) the tile-count feature counts in.
TILE = (128, 128)
#: A measured kernel is GPU-bound — a training row — when its latency is above this multiple
#: of the 1st percentile of its class on its GPU (:attr:`KernelModel.floors_`): NeuSight's
#: harness times each operator from the host, so a small kernel reads as the host's dispatch
#: time (≈ 24–58 µs per class and GPU), not as the kernel's.
GPU_BOUND_FACTOR = 3.0
#: Version of the feature definitions; a saved model with another version is refused.
FEATURE_VERSION = "kernels-4"
FORMAT_VERSION = "1"
CONFIG_FILE = "config.json"


# ------------------------------------------------------------------------------ work and roofline
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
    """``(FLOPs, bytes moved)`` of one kernel (formulas in the module doc).

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
    algorithm may need: :data:`WINOGRAD_GAIN` for 3×3 stride-1 convolutions, else 1."""
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


# ------------------------------------------------------------------------------------- features
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


#: The fixed GPU whose roofline measures a kernel's size device-free (an A100's FP32 peak and
#: bandwidth; any fixed numbers would do, they only set the unit).
REFERENCE_GPU = {"fp32_tflops": 19.5, "bandwidth_gbs": 1555.0}


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
    features as a table of named columns. The features are the kernel's own shape — log dimensions and counts, shape
    ratios, op codes — and **never the device**: the device enters a prediction only through the
    physical base ``τ + c/η + m/β`` (:meth:`KernelModel.base_ms`), whose compute time ``c`` and
    memory time ``m`` never grow on a faster GPU."""
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


# ---------------------------------------------------------------------------------------- model
def _as_frame(frame):
    """Kernel rows with a ``kernel_class`` column, of the type given (a ``pandas.DataFrame``
    or a :class:`~perfcast.features.table.Table`)."""
    if not isinstance(frame, Table) and type(frame).__name__ != "DataFrame":
        raise PerfcastError(f"kernel rows must be a pandas DataFrame or a perfcast Table, got "
                            f"{type(frame).__name__}")
    df = frame
    if "kernel_class" not in df.columns:
        if "op" not in df.columns:
            raise PerfcastError("kernel rows need an 'op' or a 'kernel_class' column")
        df = df.assign(kernel_class=df["op"].map(kernel_class_of))
    return df


class KernelModel:
    """Per kernel class, the kernel's GPU time (ms) as a physical base times a learned shape
    factor, never below the roofline::

        t = max(base · exp(f(shape)), max(c, m)),   base = τ + c/η + m/β

    ``c`` / ``m``: compute / memory time at the device's peak and bandwidth; ``τ, η, β`` fitted
    per class (:attr:`base_`, least squares of ``log t``); ``f`` an XGBoost booster on the
    kernel's device-free shape (:func:`kernel_features`). The device enters through ``c`` and
    ``m`` only, so a GPU at least as good in every spec number never gets a slower kernel.

    Only GPU-bound measurements train it (latency above :data:`GPU_BOUND_FACTOR` × the class's
    1st percentile on its GPU, :attr:`floors_`): below, the harness measured its own dispatch.
    :meth:`predict_measured` adds that floor back to compare with such a harness.

    Hyper-parameters (:meth:`default_params`): ``rounds``, ``max_depth``, ``eta``,
    ``subsample``, ``colsample_bytree``, ``min_child_weight``, ``nthread``, ``seed``,
    ``gpu_bound_factor``, ``max_rows_per_class`` (random subsample of a class's training rows;
    None = all), ``class_params`` (per-class overrides, e.g. ``{"gemm": {"max_depth": 8}}``),
    ``overlap_classes`` (the classes whose GPU-time base fits the overlap exponent ``p``,
    :data:`OVERLAP_CLASSES`; ``[]``: the sum for every class) and ``simt_gpu_time`` (SIMT kernels
    of a class at an operand size with measured GPU times are priced by the GPU-time base,
    :meth:`gpu_time_covers`; ``False``, the default: by the operator model — ``True`` prices an
    LLM layer's 2-byte norms better across GPUs but worsens two whole-model held-out figures by
    more than a point (RTX 3090 leave-one-GPU-out, L4 leave-newest-out), so it does not ship;
    both are compared in ``benchmarks/crossdevice_small_work.py``).
    """

    name = "kernel-time"

    def __init__(self, **params: Any) -> None:
        self.params = dict(params)

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {"rounds": 300, "max_depth": 6, "eta": 0.1, "subsample": 0.8,
                "colsample_bytree": 0.8, "min_child_weight": 20.0, "nthread": 2, "seed": 0,
                "gpu_bound_factor": GPU_BOUND_FACTOR, "max_rows_per_class": None,
                "class_params": {}, "overlap_classes": list(OVERLAP_CLASSES),
                "simt_gpu_time": False}

    def get_params(self) -> dict[str, Any]:
        return {**self.default_params(), **self.params}

    def set_params(self, **params: Any) -> KernelModel:
        self.params.update(params)
        return self

    def _class_params(self, kc: str) -> dict[str, Any]:
        p = self.get_params()
        return {**{k: v for k, v in p.items() if k != "class_params"},
                **(p.get("class_params") or {}).get(kc, {})}

    # -- fit ---------------------------------------------------------------------------------
    def fit(self, frame, *, classes: list[str] | None = None,
            progress=None) -> KernelModel:
        """Learn from measured kernels: a frame like :func:`perfcast.datasets.load_kernels`
        (``op``, dims, ``device_key``, ``latency_ms``). ``classes`` limits the classes
        learned (default: every class present)."""
        import xgboost as xgb

        unknown = set(self.get_params()) - set(self.default_params())
        if unknown:
            raise PerfcastError(f"{self.name}: unknown hyper-parameter(s) {sorted(unknown)}")
        df = _as_frame(frame)
        if "latency_ms" not in df.columns:
            raise PerfcastError("training rows need a latency_ms column")
        present = [c for c in KERNEL_CLASSES if (df["kernel_class"] == c).any()]
        todo = [kernel_class_of(c) for c in classes] if classes else present
        missing = [c for c in todo if c not in present]
        if missing or not todo:
            raise PerfcastError(f"{self.name}: no training rows for class(es) "
                                f"{', '.join(missing) or 'any'}")
        self.boosters_: dict[str, Any] = {}
        self.feature_names_: dict[str, list[str]] = {}
        self.trained_on_: dict[str, Any] = {}
        if not hasattr(self, "gpu_time_"):
            self.gpu_time_: dict[str, dict[str, Any]] = {}
        self.fit_seconds_: dict[str, float] = {}
        self.domain_: dict[str, dict[str, Any]] = {}
        self.floors_: dict[str, dict[str, float]] = {}
        self.slowdown_max_: dict[str, float] = {}
        self.base_: dict[str, dict[str, float]] = {}
        self.gate_ms_: dict[str, tuple[float, float]] = {}
        dev_col = "device_key" if "device_key" in df.columns else "device"
        for i, kc in enumerate(todo):
            t0 = time.perf_counter()
            p = self._class_params(kc)
            rows = df[df["kernel_class"] == kc]
            lat = rows["latency_ms"].to_numpy(dtype=np.float64)
            ok = np.isfinite(lat) & (lat > 0)
            rows, lat = rows[ok], lat[ok]
            n_all = len(rows)
            # the harness's floor per GPU; only rows clearly above it time the kernel
            keys = rows[dev_col].astype(str)
            self.floors_[kc] = {str(k): float(np.quantile(lat[(keys == k).to_numpy()], 0.01))
                                for k in keys.unique()}
            floor = keys.map(self.floors_[kc]).to_numpy(np.float64)
            # the largest slowdown any measured kernel of the class shows over its roofline
            # plus the harness's launch floor: the upper bound a composed time may reach
            _, roof_all = kernel_features(kc, rows)
            self.slowdown_max_[kc] = float(np.max(lat / (roof_all + floor)))
            bound = lat > float(p["gpu_bound_factor"]) * floor
            rows, lat = rows[bound], lat[bound]
            cap = p.get("max_rows_per_class")
            if cap and len(rows) > int(cap):
                pick = np.sort(np.random.default_rng(p["seed"]).choice(len(rows), int(cap),
                                                                       replace=False))
                rows, lat = rows.iloc[pick], lat[pick]
            X, tr = kernel_features(kc, rows)
            y = np.log(lat)
            ref = reference_ms(kc, rows)
            self.gate_ms_[kc] = (float(np.quantile(ref, 0.01)), float(np.quantile(ref, 0.10)))
            c, m = kernel_times(kc, rows)
            # τ: the kernel's fixed GPU-side time where kernel GPU times were measured
            # (fit_gpu_time; the harness's rows carry its dispatch too)
            tau = self.gpu_time_constants()[kc]["tau_ms"] if getattr(self, "gpu_time_", None) \
                else None
            self.base_[kc] = _fit_base(c, m, y, tau)
            y = y - np.log(_base(self.base_[kc], c, m))
            xp = {"objective": "reg:squarederror", "tree_method": "hist", "verbosity": 0,
                  "eta": p["eta"], "max_depth": int(p["max_depth"]),
                  "subsample": p["subsample"], "colsample_bytree": p["colsample_bytree"],
                  "min_child_weight": p["min_child_weight"], "nthread": int(p["nthread"]),
                  "seed": int(p["seed"])}
            booster = xgb.train(xp, xgb.DMatrix(X.to_numpy(), y, feature_names=list(X.columns)),
                                int(p["rounds"]))
            self.boosters_[kc] = booster
            self.feature_names_[kc] = list(X.columns)
            self.trained_on_[kc] = {
                "rows": len(rows), "rows_available": int(n_all),
                "rows_host_bound": int(n_all - int(bound.sum())),
                "devices": sorted(map(str, rows[dev_col].unique())),
                "ops": sorted(map(str, rows["op"].unique())) if "op" in rows.columns else [],
                "sources": sorted({str(s).split("/")[0] for s in rows["source"]})
                if "source" in rows.columns else []}
            self.domain_[kc] = {d: float(rows[d].max()) for d in CLASS_DIMS[kc]
                                if d in rows.columns}
            if kc == "conv":
                self.domain_[kc]["shapes"] = sorted(
                    {(int(r), int(st)) for r, st in zip(rows["Kernel_Szie"], rows["Stride"])})
            self.fit_seconds_[kc] = round(time.perf_counter() - t0, 2)
            if progress:
                progress(i + 1, len(todo))
        return self

    # -- predict -------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "boosters_"):
            raise PerfcastError(f"{self.name}: not fitted (call fit or KernelModel.load)")

    def _log_t(self, kc: str, rows) -> tuple[np.ndarray, np.ndarray]:
        """``(log predicted ms, roofline ms)`` of rows of class ``kc``: the base times the shape
        factor, the factor faded out below the sizes it was learned on (:meth:`shape_gate`)."""
        if kc not in self.boosters_:
            raise PerfcastError(f"{self.name}: no booster for kernel class {kc!r} (trained: "
                                f"{', '.join(self.boosters_)})")
        X, tr = kernel_features(kc, rows)
        X = X[self.feature_names_[kc]]
        # (columns in the trained order; numpy trees or an xgboost.Booster, perfcast.trees)
        f = self.boosters_[kc].inplace_predict(X.to_numpy())
        c, m = kernel_times(kc, rows)
        gate = self.shape_gate(kc, rows)
        return np.log(_base(self.base_[kc], c, m)) + gate * np.asarray(f, np.float64), tr

    def shape_gate(self, kernel_class: str, rows) -> np.ndarray:
        """How much of the shape factor applies, in [0, 1], from the kernel's size on the fixed
        :data:`REFERENCE_GPU` (device-free): 1 from the 10th percentile of the GPU-bound
        training kernels' reference times up, 0 below their 1st percentile, log-linear
        between (:attr:`gate_ms_`). Below the sizes the operator data timed, the base alone
        (its fixed time ``τ`` measured on kernel GPU times) prices a kernel."""
        lo, hi = (getattr(self, "gate_ms_", None) or {}).get(kernel_class, (0.0, 0.0))
        if not hi > lo > 0:
            return np.ones(len(rows))
        ref = reference_ms(kernel_class, rows)
        return np.clip(np.log(ref / lo) / np.log(hi / lo), 0.0, 1.0)

    def predict_utilization(self, frame) -> np.ndarray:
        """Utilization ``u ∈ (0, 1]`` per row (roofline time / predicted time)."""
        t, tr = self._predict(frame)
        return tr / t

    def predict_frame(self, frame):
        """``roofline_ms``, ``utilization`` and ``latency_ms`` (predicted) per row (a
        ``pandas.DataFrame`` on ``frame``'s index)."""
        import pandas as pd

        t, tr = self._predict(frame)
        return pd.DataFrame({"roofline_ms": tr, "utilization": tr / t, "latency_ms": t},
                            index=frame.index)

    def predict(self, frame) -> np.ndarray:
        """Predicted GPU time (ms) per row, ``≥`` the row's roofline bound."""
        return self._predict(frame)[0]

    def harness_floor_ms(self, kernel_class: str) -> float:
        """The dispatch floor of the harness the model learned from, for a GPU it did not see:
        the median over its GPUs of the class's 1st-percentile latency (:attr:`floors_`)."""
        floors = getattr(self, "floors_", {}).get(kernel_class_of(kernel_class)) or {}
        return float(np.median(list(floors.values()))) if floors else 0.0

    def predict_measured(self, frame) -> np.ndarray:
        """What the training harness would read (ms): ``max(GPU time, its dispatch floor)`` —
        the GPU's own floor where the model learned it, else :meth:`harness_floor_ms`. For
        comparing with measurements of that harness (``benchmarks/kernel_model.py``); a
        prediction of a kernel in a model is :meth:`predict`."""
        df = _as_frame(frame)
        t = self.predict(df)
        col = "device_key" if "device_key" in df.columns else "device"
        floor = np.array([
            (getattr(self, "floors_", {}).get(str(kc)) or {}).get(
                str(getattr(d, "key", d)), self.harness_floor_ms(str(kc)))
            for kc, d in zip(df["kernel_class"], df[col])], dtype=np.float64)
        return np.maximum(t, floor)

    def _predict(self, frame) -> tuple[np.ndarray, np.ndarray]:
        """``(t, roofline_ms)`` per row (the class docstring); a convolution whose kernel size /
        stride was never measured is priced as its implicit GEMM (``M = B·O², N = Co,
        K = Ci·R²``)."""
        self._check_fitted()
        df = _as_frame(frame)
        t = np.full(len(df), np.nan)
        tr = np.full(len(df), np.nan)
        kcs = df["kernel_class"].to_numpy()
        for kc in unique(kcs):
            sel = np.flatnonzero(kcs == kc)
            rows = df.iloc[sel]
            domain = getattr(self, "domain_", {}).get(str(kc))
            _, t_full = kernel_features(str(kc), rows)
            lat = np.empty(len(rows))
            as_gemm = np.zeros(len(rows), bool)
            if kc == "conv" and "gemm" in self.boosters_ and domain:
                shapes = {tuple(x) for x in domain.get("shapes", [])}
                as_gemm = np.array([(int(r), int(st)) not in shapes for r, st in
                                    zip(rows["Kernel_Szie"], rows["Stride"])], bool)
            if as_gemm.any():
                lat[as_gemm] = np.exp(self._log_t("gemm", _conv_as_gemm(rows.iloc[as_gemm]))[0])
            if (~as_gemm).any():
                lat[~as_gemm] = np.exp(self._log_t(str(kc), rows.iloc[~as_gemm])[0])
            t[sel], tr[sel] = np.maximum(lat, t_full), t_full
        return t, tr

    def predict_ms(self, op: str, dims: Mapping[str, Any], device, precision: str = "fp32"):
        """Latency (ms) of operator ``op`` (``"bmm"``, ``"linear"``, ``"conv"``, ``"ln"``,
        ``"softmax"``, an element-wise op, or a class name) with ``dims`` (numbers or equal-
        length arrays, :data:`CLASS_DIMS`) on ``device`` (registry key or Device). Always
        ``≥`` :func:`kernel_roofline_ms`. The model learned fp32 kernels only: another
        ``precision`` is refused."""
        if str(precision).lower() != "fp32":
            raise PerfcastError(f"{self.name}: trained on fp32 kernels only; no {precision} "
                                f"prediction (use kernel_roofline_ms for a bound)")
        kc = kernel_class_of(op)
        name = str(op).strip().lower()
        cols = {k: np.atleast_1d(np.asarray(v, dtype=np.float64)) for k, v in dims.items()
                if k in CLASS_DIMS[kc]}
        n = max(len(v) for v in cols.values()) if cols else 1
        frame = Table({k: np.broadcast_to(v, (n,)) for k, v in cols.items()}, length=n)
        frame["op"] = name if name in OP_CLASS else ("add" if kc == "elementwise" else name)
        frame["kernel_class"] = kc
        frame["device_key"] = [_device(device)] * n
        out = self.predict(frame)
        scalar = all(np.ndim(v) == 0 for v in dims.values())
        return float(out[0]) if scalar else out

    # -- GPU-time constants and bounds ---------------------------------------------------------
    def fit_gpu_time(self, frame) -> KernelModel:
        """Fit, per class, the base ``τ + ((c/η)^p + (m/β)^p)^(1/p)`` (:func:`_fit_base`; ``c``
        FLOPs ÷ the peak of the units that run the kernel — tensor cores for 2-byte GEMMs —,
        ``m`` bytes ÷ bandwidth, both in ms; ``p`` fitted for the classes of
        :data:`OVERLAP_CLASSES`, else 1) on kernel-level GPU times: a frame like
        :func:`perfcast.datasets.vidur.load_vidur_ops` (``kernel_class``, dims, ``dtype_bytes``,
        ``device_key``, ``latency_ms``). What prices kernels on tensor cores, which the
        operator measurements (fp32 SIMT) never ran, and the SIMT kernels of a class at the
        operand sizes it was measured at (``dtype_bytes``: :meth:`gpu_time_covers`). ``τ`` is
        the least-squares sum's (``p = 1``) for every class — the fixed time the operator model
        shares —, and an overlap class refits ``η, β, p`` with it. Classes the frame lacks take
        a measured class's constants (:data:`GPU_TIME_FALLBACK`)."""
        df = _as_frame(frame)
        c, m = _gpu_times(df)
        y = np.log(df["latency_ms"].to_numpy(np.float64))
        kcs = df["kernel_class"].astype(str).to_numpy()
        db = df["dtype_bytes"].to_numpy(np.float64) if "dtype_bytes" in df \
            else np.full(len(df), 4.0)
        out: dict[str, dict[str, Any]] = {}
        for kc in unique(kcs):
            sel = kcs == kc
            q = _fit_base(c[sel], m[sel], y[sel])
            if str(kc) in self.get_params()["overlap_classes"]:
                # the fixed time τ is the sum's (the one number the operator model shares);
                # the overlap refits η, β and p with it
                q = _fit_base(c[sel], m[sel], y[sel], tau_ms=q["tau_ms"], fit_p=True)
            res = np.log(_base(q, c[sel], m[sel])) - y[sel]
            out[str(kc)] = {**q, "rows": int(sel.sum()),
                            "rmse_log": float(np.sqrt(np.mean(res ** 2))),
                            "dtype_bytes": sorted(int(b) for b in np.unique(db[sel])),
                            "devices": sorted(map(str, df.loc[sel, "device_key"].map(
                                lambda d: getattr(d, "key", d)).unique()))}
        self.gpu_time_ = out
        return self

    def gpu_time_constants(self) -> dict[str, dict[str, float]]:
        """``{class: {"tau_ms", "eta", "beta", "p"}}`` for every class of
        :data:`KERNEL_CLASSES` (:meth:`fit_gpu_time`; a class without its own takes
        :data:`GPU_TIME_FALLBACK`'s; ``p`` = 1 — the sum — where none was fitted)."""
        fitted = getattr(self, "gpu_time_", None) or {}
        if not fitted:
            raise PerfcastError(f"{self.name}: no GPU-time constants (fit_gpu_time on kernel "
                                f"GPU times, benchmarks/kernel_model.py)")
        out = {}
        for kc in KERNEL_CLASSES:
            src = kc if kc in fitted else next((f for f in GPU_TIME_FALLBACK[kc] if f in fitted),
                                               next(iter(fitted)))
            out[kc] = {k: float(fitted[src][k]) for k in ("tau_ms", "eta", "beta")}
            out[kc]["p"] = float(fitted[src].get("p", 1.0))
        return out

    def gpu_time_covers(self, kernel_class: str, dtype_bytes: float) -> bool:
        """Whether the class's own GPU-time constants were measured on kernels of this operand
        size (:meth:`fit_gpu_time` records them; a model fitted before it did covers none) —
        then they, not the operator model learned on fp32 kernels timed from the host, price
        the class's SIMT kernels of that size (:func:`perfcast.predictors.crossdevice.
        price_kernels`)."""
        if not self.get_params()["simt_gpu_time"]:
            return False
        q = (getattr(self, "gpu_time_", None) or {}).get(kernel_class_of(kernel_class)) or {}
        return int(dtype_bytes) in set(q.get("dtype_bytes") or ())

    def slowdown_max(self, kernel_class: str) -> float:
        """The largest measured slowdown of the class over ``roofline + launch floor``
        (:attr:`slowdown_max_`; the largest of any class for a class it has none of)."""
        sm = getattr(self, "slowdown_max_", None) or {}
        if not sm:
            raise PerfcastError(f"{self.name}: fitted without slowdown bounds; retrain it")
        return float(sm.get(kernel_class, max(sm.values())))

    def upper_launch_ms(self) -> float:
        """The launch time per kernel the upper bound adds: the largest dispatch floor of the
        training harness over its GPUs (:attr:`floors_` of the element-wise class, the one whose
        smallest kernels do no work)."""
        floors = list((getattr(self, "floors_", None) or {}).get("elementwise", {}).values())
        if not floors:
            raise PerfcastError(f"{self.name}: fitted without harness floors; retrain it")
        return float(max(floors))

    # -- persistence ------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """Everything but the boosters, as JSON (what :meth:`save` writes to config.json)."""
        self._check_fitted()
        return {"format": FORMAT_VERSION, "model": self.name,
                "feature_version": FEATURE_VERSION, "params": self.get_params(),
                "classes": list(self.boosters_), "feature_names": self.feature_names_,
                "trained_on": self.trained_on_, "fit_seconds": getattr(self, "fit_seconds_", {}),
                "domain": getattr(self, "domain_", {}),
                "floors_ms": getattr(self, "floors_", {}),
                "slowdown_max": getattr(self, "slowdown_max_", {}),
                "gpu_time": getattr(self, "gpu_time_", {}),
                "base": getattr(self, "base_", {}),
                "gate_ms": getattr(self, "gate_ms_", {}),
                "winograd_gain": WINOGRAD_GAIN}

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], boosters: Mapping[str, Any],
                    origin: str = "kernel model") -> KernelModel:
        """A model from :meth:`config`'s dict and ``{class: XGBoost model (path, bytes or
        bytearray)}`` — answered by numpy trees (:mod:`perfcast.trees`: no XGBoost import)."""
        from perfcast.trees import load_booster

        if cfg.get("model") != cls.name:
            raise PerfcastError(f"{origin}: holds {cfg.get('model')!r}, not a {cls.name!r} model")
        if cfg.get("feature_version") != FEATURE_VERSION:
            raise PerfcastError(f"{origin}: kernel model uses features "
                                f"{cfg.get('feature_version')!r}, this perfcast computes "
                                f"{FEATURE_VERSION!r} — retrain it (benchmarks/kernel_model.py)")
        obj = cls(**{k: v for k, v in cfg.get("params", {}).items()
                     if k in cls.default_params()})
        obj.boosters_, obj.feature_names_ = {}, {}
        for kc in cfg["classes"]:
            try:
                raw = boosters[kc]
                booster = load_booster(Path(raw).read_bytes() if isinstance(raw, (str, Path))
                                       else raw)
            except Exception as exc:  # missing, unreadable, or XGBoost's error for bad bytes
                if not isinstance(exc, (KeyError, OSError)) \
                        and type(exc).__name__ != "XGBoostError":
                    raise
                raise PerfcastError(f"{origin}: corrupt or missing {kc} booster ({exc})") from None
            obj.boosters_[kc] = booster
            obj.feature_names_[kc] = list(cfg["feature_names"][kc])
        obj.trained_on_ = cfg.get("trained_on", {})
        obj.fit_seconds_ = cfg.get("fit_seconds", {})
        obj.domain_ = cfg.get("domain", {})
        obj.floors_ = cfg.get("floors_ms", {})
        obj.slowdown_max_ = cfg.get("slowdown_max", {})
        obj.gpu_time_ = cfg.get("gpu_time", {})
        obj.base_ = cfg.get("base", {})
        obj.gate_ms_ = {k: tuple(v) for k, v in cfg.get("gate_ms", {}).items()}
        return obj

    def save(self, path: str | os.PathLike) -> Path:
        """Write ``path/config.json`` + ``path/<class>.json`` (XGBoost JSON) atomically."""
        config = self.config()
        from perfcast.paths import write_dir_atomically

        def fill(tmp: Path) -> None:
            (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=1))
            for kc, booster in self.boosters_.items():
                booster.save_model(str(tmp / f"{kc}.json"))

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_dir_atomically(path, fill)

    @classmethod
    def load(cls, path: str | os.PathLike) -> KernelModel:
        """A model written by :meth:`save`."""
        path = Path(path)
        cfg_path = path / CONFIG_FILE
        if not cfg_path.is_file():
            raise PerfcastError(f"{path}: not a saved kernel model (no {CONFIG_FILE})")
        try:
            cfg = json.loads(cfg_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise PerfcastError(f"{cfg_path}: unreadable kernel-model config ({exc})") from None
        return cls.from_config(cfg, {kc: str(path / f"{kc}.json")
                                     for kc in cfg.get("classes", [])}, origin=str(path))

    def __repr__(self) -> str:
        ps = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({ps})"


__all__ = [
    "BINARY_OPS",
    "CLASS_DIMS",
    "ELEMENTWISE_OPS",
    "KERNEL_CLASSES",
    "kernel_times",
    "OP_CLASS",
    "WINOGRAD_GAIN",
    "KernelModel",
    "conv_output_size",
    "device_spec",
    "kernel_class_of",
    "kernel_features",
    "kernel_roofline_ms",
    "kernel_work",
    "min_flops_factor",
    "roofline_ms",
]
