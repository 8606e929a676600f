"""Operator-level (kernel) latency on a GPU as a fraction of its roofline bound (issue #13 item 2).

For one kernel-level operator — a GEMM (``bmm``, ``linear``), a ``conv``, a layer norm (``ln``),
a ``softmax`` or an element-wise op (``add addu mul mulu div divu pow powu relu gelu tanh``;
``…u`` = with a scalar operand) — :class:`KernelModel` predicts the latency on a GPU from the
operator's dimensions and the GPU's spec-sheet numbers only, so it answers for a GPU it never saw
(NeuSight's idea: predict the *utilization* of the hardware, not the time).

The target is the utilization ``u = t_roofline / t_measured``; the model predicts ``log u``,
clipped so ``u ≤ 1``, and answers ``t = t_roofline / u`` — never faster than the roofline.

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

Features (:func:`kernel_features`) are scale-free and see the device only through ratios: the
roofline time over a nominal launch latency (:data:`LAUNCH_US`), arithmetic intensity over the
device's ridge point, tile waves per SM for a few nominal tile sizes and the efficiency of the
last wave, the wave-quantised roofline; plus device-independent shape features (log dims, the op).
With four or five training GPUs raw device numbers act as device identities and transfer worse
(reports/crossdevice/kernels.md).

Device numbers come from the registry (:func:`perfcast.devices.get_device`: ``peak_tflops``,
``bandwidth_gbs``, ``sm_count``, ``fp32_cores_per_sm``, ``l2_mb``) — give a registry key or a
:class:`~perfcast.devices.Device`.

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
import pandas as pd

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
#: Nominal kernel launch latency (µs) the roofline time is compared with (a feature scale only).
LAUNCH_US = 5.0
#: Arithmetic saving of Winograd F(4×4, 3×3) over direct convolution: 16·9 / 6² = 4.
WINOGRAD_GAIN = 4.0
#: Nominal GEMM tile sizes (rows × cols of the output per thread block) for the wave features.
GEMM_TILES: tuple[tuple[int, int], ...] = ((32, 32), (64, 64), (128, 64), (64, 128), (128, 128))
#: Elements per thread block of PyTorch's vectorised element-wise kernel (128 threads × 4).
ELEMENTWISE_BLOCK = 512
#: Version of the feature definitions; a saved model with another version is refused.
FEATURE_VERSION = "kernels-2"
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
    """The spec-sheet numbers the model reads, in SI units: ``peak_flops`` (FP32, FLOP/s),
    ``bandwidth`` (B/s), ``sm_count``, ``cores_per_sm``, ``l2_bytes``. ``device``: a registry
    key or a :class:`~perfcast.devices.Device` (a GPU with these fields)."""
    dev = _device(device)
    missing = [f for f in ("peak_fp32_tflops", "bandwidth_gbs", "sm_count", "l2_mb")
               if getattr(dev, f) is None]
    if not dev.is_gpu or missing:
        raise PerfcastError(f"device '{dev.key}': the kernel model needs a GPU with "
                            f"{', '.join(missing) or 'a GPU kind'} in its spec")
    return {"peak_flops": float(dev.peak_tflops("fp32")) * 1e12,
            "bandwidth": float(dev.bandwidth_gbs) * 1e9,
            "sm_count": float(dev.sm_count),
            "cores_per_sm": float(dev.fp32_cores_per_sm or 64),
            "l2_bytes": float(dev.l2_mb) * 1e6}


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
def _frame_devices(frame: pd.DataFrame) -> pd.DataFrame:
    """Per-row device numbers (:func:`device_spec`) from ``device_key`` (or ``device``): registry
    keys or :class:`~perfcast.devices.Device` objects."""
    col = "device_key" if "device_key" in frame.columns else "device"
    if col not in frame.columns:
        raise PerfcastError("kernel rows need a device_key column (registry key or Device)")
    vals = frame[col].tolist()
    specs = {v: device_spec(v) for v in dict.fromkeys(vals)}
    fields = ("peak_flops", "bandwidth", "sm_count", "cores_per_sm", "l2_bytes")
    return pd.DataFrame({f: np.array([specs[v][f] for v in vals], dtype=np.float64)
                         for f in fields}, index=frame.index)


def _dims_of(frame: pd.DataFrame, kc: str) -> dict[str, np.ndarray]:
    out = {}
    for name in CLASS_DIMS[kc]:
        if name not in frame.columns:
            raise PerfcastError(f"{kc} rows need column {name!r}")
        out[name] = frame[name].to_numpy(dtype=np.float64)
    return out


def _roof_parts(frame: pd.DataFrame, kc: str, dev: pd.DataFrame):
    dims = _dims_of(frame, kc)
    ops = frame["op"].astype(str).to_numpy() if "op" in frame.columns else None
    flops, moved = kernel_work(kc, dims, "fp32", op=ops)
    flops = np.broadcast_to(np.asarray(flops, dtype=np.float64), (len(frame),))
    moved = np.broadcast_to(np.asarray(moved, dtype=np.float64), (len(frame),))
    eff_flops = flops / np.asarray(min_flops_factor(kc, dims))
    t_c = eff_flops / dev["peak_flops"].to_numpy() * 1e3
    t_m = moved / dev["bandwidth"].to_numpy() * 1e3
    return dims, flops, moved, t_c, t_m, np.maximum(t_c, t_m)


def kernel_features(kernel_class: str, frame: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """``(features, roofline_ms)`` for rows of one kernel class (dims columns, ``op``,
    ``device_key``). Features are scale-free; the device enters only through ratios."""
    kc = kernel_class_of(kernel_class)
    dev = _frame_devices(frame)
    dims, flops, moved, t_c, t_m, tr = _roof_parts(frame, kc, dev)
    sm = dev["sm_count"].to_numpy()
    ridge = dev["peak_flops"].to_numpy() / dev["bandwidth"].to_numpy()
    log = np.log
    f: dict[str, np.ndarray] = {"log_troof_launch": log(tr * 1e3 / LAUNCH_US)}
    if kc == "gemm":
        b, m, n, k = dims["B"], dims["M"], dims["N"], dims["K"]
        f["log_ai_ridge"] = log(flops / moved / ridge)
        ops = frame["op"].astype(str).to_numpy() if "op" in frame.columns else None
        f["is_linear"] = (ops == "linear").astype(np.float64) if ops is not None else \
            np.zeros(len(frame))
        # shape, not size: sizes enter only relative to the device (roofline time, waves)
        f["log_M_N"] = log(m / n)
        f["log_K_MN"] = log(k / np.sqrt(m * n))
        for t1, t2 in GEMM_TILES:
            f[f"log_waves_{t1}x{t2}"] = log(b * np.ceil(m / t1) * np.ceil(n / t2) / sm)
    elif kc == "conv":
        f["log_ai_ridge"] = log(flops / moved / ridge)
        o = conv_output_size(dims["Input_Size"], dims["Kernel_Szie"], dims["Stride"],
                             dims["Padding"])
        ci, co = dims["Input_Channel"], dims["Output_Channel"]
        gm, gk = dims["B"] * o * o, ci * dims["Kernel_Szie"] ** 2  # implicit-GEMM M and K
        f.update(log_B=log(dims["B"]), log_Ci=log(ci), log_Co=log(co),
                 log_S=log(dims["Input_Size"]), log_Mg=log(gm), log_Kg=log(gk))
        for t1, t2 in GEMM_TILES:
            waves = np.ceil(gm / t1) * np.ceil(co / t2) / sm
            f[f"log_waves_{t1}x{t2}"] = log(waves)
            # wave-quantised compute time (whole waves of padded tiles) over the roofline
            t_q = np.ceil(waves) * sm * t1 * t2 / (gm * co) * t_c
            f[f"log_q_{t1}x{t2}"] = log(np.maximum(t_q, t_m) / tr)
        f["log_flops_per_core"] = log(flops / (sm * dev["cores_per_sm"].to_numpy()))
    else:
        b, h = dims["B"], dims["H"]
        if kc == "elementwise":
            ops = frame["op"].astype(str).to_numpy() if "op" in frame.columns else \
                np.full(len(frame), "add")
            f["op"] = np.array([ELEMENTWISE_OPS.index(o) if o in ELEMENTWISE_OPS else
                                (0 if o in BINARY_OPS else 1) for o in ops], dtype=np.float64)
            f["binary"] = np.isin(ops, list(BINARY_OPS)).astype(np.float64)
            waves = np.ceil(b * h / ELEMENTWISE_BLOCK) / sm
        else:
            waves = b / sm
        f["log_waves"] = log(waves)
        f["tail"] = waves / np.ceil(waves)
    return pd.DataFrame(f, index=frame.index), tr


#: Features along which utilization may only grow (``monotone="size"``): more work per launch,
#: per SM or per core never makes the hardware less busy. ``"roofline"`` constrains only
#: ``log_troof_launch``; ``"none"`` nothing.
SIZE_FEATURES = ("log_troof_launch", "log_flops_per_core", "log_B", "log_M", "log_N", "log_K",
                 "log_Mg", "log_Kg", "log_waves")


def _monotone(names: list[str], mode) -> str | None:
    if mode in (None, "none", False):
        return None
    if mode == "roofline":
        inc = {"log_troof_launch"}
    elif mode == "waves":
        inc = {n for n in names if n.startswith("log_waves")}
    elif mode == "size":
        inc = {n for n in names if n in SIZE_FEATURES or n.startswith("log_waves")}
    else:
        raise PerfcastError(f"monotone must be none, roofline, waves or size, got {mode!r}")
    return "(" + ",".join("1" if n in inc else "0" for n in names) + ")"


def _conv_as_gemm(rows: pd.DataFrame) -> pd.DataFrame:
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


# ---------------------------------------------------------------------------------------- model
def _as_frame(frame: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise PerfcastError(f"kernel rows must be a pandas DataFrame, got {type(frame).__name__}")
    df = frame
    if "kernel_class" not in df.columns:
        if "op" not in df.columns:
            raise PerfcastError("kernel rows need an 'op' or a 'kernel_class' column")
        df = df.assign(kernel_class=df["op"].map(kernel_class_of))
    return df


class KernelModel:
    """One XGBoost booster per kernel class predicting ``log u`` (u = roofline / measured).

    Hyper-parameters (:meth:`default_params`): ``rounds``, ``max_depth``, ``eta``,
    ``subsample``, ``colsample_bytree``, ``min_child_weight``, ``nthread``, ``seed``,
    ``monotone`` (:data:`SIZE_FEATURES`), ``max_rows_per_class`` (random subsample of a class's training rows; None = all) and
    ``class_params`` (per-class overrides, e.g. ``{"gemm": {"max_depth": 8}}``).
    """

    name = "kernel-utilization"

    def __init__(self, **params: Any) -> None:
        self.params = dict(params)

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {"rounds": 250, "max_depth": 4, "eta": 0.1, "subsample": 0.8,
                "colsample_bytree": 0.8, "min_child_weight": 20.0, "nthread": 2, "seed": 0,
                "monotone": "size", "max_rows_per_class": None,
                "class_params": {"gemm": {"monotone": "roofline"}}}

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
    def fit(self, frame: pd.DataFrame, *, classes: list[str] | None = None,
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
        self.fit_seconds_: dict[str, float] = {}
        self.domain_: dict[str, dict[str, Any]] = {}
        for i, kc in enumerate(todo):
            t0 = time.perf_counter()
            p = self._class_params(kc)
            rows = df[df["kernel_class"] == kc]
            lat = rows["latency_ms"].to_numpy(dtype=np.float64)
            ok = np.isfinite(lat) & (lat > 0)
            rows, lat = rows[ok], lat[ok]
            n_all = len(rows)
            cap = p.get("max_rows_per_class")
            if cap and len(rows) > int(cap):
                pick = np.sort(np.random.default_rng(p["seed"]).choice(len(rows), int(cap),
                                                                       replace=False))
                rows, lat = rows.iloc[pick], lat[pick]
            X, tr = kernel_features(kc, rows)
            y = np.log(tr / lat)
            xp = {"objective": "reg:squarederror", "tree_method": "hist", "verbosity": 0,
                  "eta": p["eta"], "max_depth": int(p["max_depth"]),
                  "subsample": p["subsample"], "colsample_bytree": p["colsample_bytree"],
                  "min_child_weight": p["min_child_weight"], "nthread": int(p["nthread"]),
                  "seed": int(p["seed"])}
            mono = _monotone(list(X.columns), p.get("monotone"))
            if mono is not None:
                xp["monotone_constraints"] = mono
            booster = xgb.train(xp, xgb.DMatrix(X.to_numpy(), y, feature_names=list(X.columns)),
                                int(p["rounds"]))
            self.boosters_[kc] = booster
            self.feature_names_[kc] = list(X.columns)
            dev_col = "device_key" if "device_key" in rows.columns else "device"
            self.trained_on_[kc] = {
                "rows": len(rows), "rows_available": int(n_all),
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

    def _log_u(self, kc: str, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        import xgboost as xgb

        if kc not in self.boosters_:
            raise PerfcastError(f"{self.name}: no booster for kernel class {kc!r} (trained: "
                                f"{', '.join(self.boosters_)})")
        X, tr = kernel_features(kc, rows)
        X = X[self.feature_names_[kc]]
        lu = self.boosters_[kc].predict(xgb.DMatrix(X.to_numpy(),
                                                    feature_names=self.feature_names_[kc]))
        return np.minimum(np.asarray(lu, dtype=np.float64), 0.0), tr

    def predict_utilization(self, frame: pd.DataFrame) -> np.ndarray:
        """Utilization ``u ∈ (0, 1]`` per row (roofline time / predicted time)."""
        return self._predict(frame)[0]

    def predict_frame(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``roofline_ms``, ``utilization`` and ``latency_ms`` (predicted) per row."""
        u, tr = self._predict(frame)
        return pd.DataFrame({"roofline_ms": tr, "utilization": u, "latency_ms": tr / u},
                            index=frame.index)

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """Predicted latency (ms) per row, ``≥`` the row's roofline bound."""
        u, tr = self._predict(frame)
        return tr / u

    def _predict(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """``(u, roofline_ms)`` per row. Rows inside the trained domain (:attr:`domain_`) are
        asked directly. A larger GEMM / convolution is priced as ``n`` equal in-domain chunks run
        one after another (``latency = n · chunk latency``: utilization saturates with the number of
        waves, and a chunk of a big kernel is a kernel the model has measured); a convolution
        whose kernel size / stride was never measured is priced as its implicit GEMM
        (``M = B·O², N = Co, K = Ci·R²``). ``u`` is then the row's own roofline over that
        latency (≤ 1)."""
        self._check_fitted()
        df = _as_frame(frame)
        u = np.full(len(df), np.nan)
        tr = np.full(len(df), np.nan)
        kcs = df["kernel_class"].to_numpy()
        for kc in pd.unique(kcs):
            sel = np.flatnonzero(kcs == kc)
            rows = df.iloc[sel]
            domain = getattr(self, "domain_", {}).get(str(kc))
            if not domain:
                lu, t = self._log_u(str(kc), rows)
                u[sel], tr[sel] = np.exp(lu), t
                continue
            _, t_full = kernel_features(str(kc), rows)
            lat = np.empty(len(rows))
            as_gemm = np.zeros(len(rows), bool)
            if kc == "conv" and "gemm" in self.boosters_:
                shapes = {tuple(x) for x in domain.get("shapes", [])}
                as_gemm = np.array([(int(r), int(st)) not in shapes for r, st in
                                    zip(rows["Kernel_Szie"], rows["Stride"])], bool)
            if as_gemm.any():
                lat[as_gemm] = self._chunked_latency("gemm", _conv_as_gemm(rows[as_gemm]))
            if (~as_gemm).any():
                lat[~as_gemm] = self._chunked_latency(str(kc), rows[~as_gemm])
            lat = np.maximum(lat, t_full)
            u[sel], tr[sel] = t_full / lat, t_full
        return u, tr

    def _chunked_latency(self, kc: str, rows: pd.DataFrame) -> np.ndarray:
        """Latency (ms) of rows of class ``kc`` as ``n`` in-domain chunks (see :meth:`_predict`).
        Only GEMMs and convolutions are cut: their shape features (``M/N``, ``K/√MN``) leave the
        measured range with the size, while a streaming kernel beyond it is priced well as it is
        (its utilization is monotone in its size and flat beyond the data)."""
        domain = getattr(self, "domain_", {}).get(kc, {})
        rows = rows.copy()
        n = np.ones(len(rows))
        split = {"gemm": ("B", "M", "N", "K"), "conv": ("B", "Output_Channel")}.get(kc, ())
        for d in split:
            if d in domain and d in rows.columns:
                v = rows[d].to_numpy(float)
                k = np.maximum(1.0, np.ceil(v / domain[d]))
                rows[d] = np.ceil(v / k)
                n = n * k
        lu, t = self._log_u(kc, rows)
        return n * t / np.exp(lu)

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
        frame = pd.DataFrame({k: np.broadcast_to(v, (n,)) for k, v in cols.items()})
        frame["op"] = name if name in OP_CLASS else ("add" if kc == "elementwise" else name)
        frame["kernel_class"] = kc
        frame["device_key"] = [_device(device)] * n
        out = self.predict(frame)
        scalar = all(np.ndim(v) == 0 for v in dims.values())
        return float(out[0]) if scalar else out

    # -- persistence ------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write ``path/config.json`` + ``path/<class>.json`` (XGBoost JSON) atomically."""
        self._check_fitted()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        config = {"format": FORMAT_VERSION, "model": self.name,
                  "feature_version": FEATURE_VERSION, "params": self.get_params(),
                  "classes": list(self.boosters_), "feature_names": self.feature_names_,
                  "trained_on": self.trained_on_, "fit_seconds": self.fit_seconds_,
                  "domain": getattr(self, "domain_", {}), "launch_us": LAUNCH_US,
                  "winograd_gain": WINOGRAD_GAIN}
        from perfcast.paths import write_dir_atomically

        def fill(tmp: Path) -> None:
            (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=1))
            for kc, booster in self.boosters_.items():
                booster.save_model(str(tmp / f"{kc}.json"))

        return write_dir_atomically(path, fill)

    @classmethod
    def load(cls, path: str | os.PathLike) -> KernelModel:
        """A model written by :meth:`save`."""
        import xgboost as xgb

        path = Path(path)
        cfg_path = path / CONFIG_FILE
        if not cfg_path.is_file():
            raise PerfcastError(f"{path}: not a saved kernel model (no {CONFIG_FILE})")
        try:
            cfg = json.loads(cfg_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise PerfcastError(f"{cfg_path}: unreadable kernel-model config ({exc})") from None
        if cfg.get("model") != cls.name:
            raise PerfcastError(f"{path}: holds {cfg.get('model')!r}, not a {cls.name!r} model")
        if cfg.get("feature_version") != FEATURE_VERSION:
            raise PerfcastError(f"{path}: kernel model uses features {cfg.get('feature_version')!r}"
                                f", this perfcast computes {FEATURE_VERSION!r} — retrain it "
                                f"(benchmarks/kernel_model.py)")
        obj = cls(**{k: v for k, v in cfg.get("params", {}).items()
                     if k in cls.default_params()})
        obj.boosters_, obj.feature_names_ = {}, {}
        for kc in cfg["classes"]:
            booster = xgb.Booster()
            try:
                booster.load_model(str(path / f"{kc}.json"))
            except xgb.core.XGBoostError as exc:
                raise PerfcastError(f"{path / f'{kc}.json'}: corrupt booster ({exc})") from None
            obj.boosters_[kc] = booster
            obj.feature_names_[kc] = list(cfg["feature_names"][kc])
        obj.trained_on_ = cfg.get("trained_on", {})
        obj.fit_seconds_ = cfg.get("fit_seconds", {})
        # trained dimension ranges (a model saved without them prices every row directly)
        obj.domain_ = cfg.get("domain", {})
        return obj

    def __repr__(self) -> str:
        ps = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({ps})"


__all__ = [
    "BINARY_OPS",
    "CLASS_DIMS",
    "ELEMENTWISE_OPS",
    "KERNEL_CLASSES",
    "LAUNCH_US",
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
