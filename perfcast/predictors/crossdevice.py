"""``crossdevice`` — any GPU from its spec sheet, with answers a user can trust.

A record's time is composed from the kernels its graph launches (:mod:`perfcast.features.kernels`)
and corrected once by what kernels do not see — in a form that is **physically consistent by
construction**:

**1. Each kernel's GPU time** (:func:`price_kernels`; priced once per distinct kernel). With ``c``
its compute time (FLOPs ÷ the peak of the units that run it, :func:`peak_unit` — SIMT FP32, TF32,
fp16 / bf16 tensor cores, AMD FP32 matrix cores) and ``m`` its memory time (bytes ÷ bandwidth):

* on tensor / matrix cores, and a norm or element-wise kernel at an operand size whose GPU
  times were measured (2-byte, :meth:`KernelModel.gpu_time_covers`): the GPU-time base
  ``τ + ((c / η)^p + (m / β)^p)^(1/p)`` (GEMMs and convolutions overlap compute and memory,
  ``p`` fitted; ``p = 1`` — the sum — for the other classes);
* otherwise the operator model (:class:`~perfcast.predictors.kernels.KernelModel`, NeuSight's
  fp32 kernels on five GPUs: its base ``τ + c/η + m/β`` times a shape-only factor that fades
  out below the sizes it measured), asked about the kernel's fp32 twin on a virtual device
  with the kernel's own peak and operand size;
* never below ``max(c, m)`` (the roofline), never above ``K_class · (max(c, m) + launch)``
  (``K``: the largest slowdown the operator measurements show for the class,
  :attr:`KernelModel.slowdown_max_`).

``τ``, ``η``, ``β``, ``p`` per class are the GPU-time constants fitted on Vidur's A100 / A40
operator profiles (:meth:`KernelModel.fit_gpu_time`: CUDA-event times of the token-level
operators of LLM layers, 1–32k tokens) — the kernels' own time, without host dispatch. Every
term is non-increasing in the peak of the kernel's units and in the bandwidth, so a GPU at
least as good in both prices every kernel no slower.

**2. The record's time** — eager PyTorch: the host dispatches kernel ``j`` at ``j·h`` (``h`` per
kernel and mode, fitted), the GPU runs the kernels in order as soon as each is dispatched::

    T(s) = max_j ( j·h + s · Σ_{i ≥ j} t_i )

a launch-bound model is ``n·h``, a GPU-bound one ``s·Σ t``, and everything between is the queue.

**3. The correction** ``s = exp(g(x))`` scales the kernels' time by what the composition misses
(fusion, cuDNN algorithm choice, the backward pass the lowering derives, recomputation). ``x`` is
mode, optimizer, precision, TF32, what kinds of kernel the model has, the share of its kernels
per class and on tensor cores (which the GPU's architecture decides, not its numbers) — counts,
which neither the batch nor the sequence changes —, its size in reference
units (work on a fixed reference GPU, kernel count, batch) with ``g`` non-decreasing in the
sizes — and of the device only its board power (``g`` non-increasing in it: low-power cards
sustain a smaller share of their peak) and vendor. So:

* a GPU at least as good in every spec number is never predicted slower (every ``t_i`` is
  non-increasing in every number, ``g`` in the power);
* more work (batch, sequence, layers) is never predicted faster;
* the answer stays inside ``[Σ max(c, m), Σ K·(max(c, m) + launch)]``.

The correction scales only the kinds of work it learned from (:func:`correction_regime`: the
precision, and whether the model has convolutions; :attr:`CrossDevicePredictor.regimes_`).
Another kind is answered by the kernels' GPU time and the dispatch queue alone (``s = 1``) and
says so (:meth:`CrossDevicePredictor.out_of_range`): the shipped model learned half precision
from CNNs alone, and their ``s`` priced an H100's fp16 LLM layer operators several times slower
than an A100 runs them (reports/crossdevice/small_work.md).

Spec fields the composition needs are read through :func:`perfcast.devices.derive.complete`:
a missing TF32 / bf16 peak is derived from the architecture with the rule said in ``notes``
(:meth:`CrossDevicePredictor.device_notes`); nothing is silently defaulted.

Kernel rows are a light :class:`~perfcast.features.table.Table` (or a ``pandas.DataFrame`` a
caller passes): composing an answer needs neither pandas nor torch.

Devices are read from the registry by the records' ``device`` key (a GPU given by its spec
file is registered under its key). Only GPUs: CPU records are refused.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

from perfcast._memo import Memo
from perfcast.errors import PerfcastError
from perfcast.features.kernels import KERNEL_CLASSES, Kernel, kernel_row
from perfcast.features.records import FeatureSet
from perfcast.features.table import Table, unique
from perfcast.predictors import register_predictor
from perfcast.predictors.base import Predictor
from perfcast.workload import PRECISIONS, TF32_MODES

#: Reference GPU numbers the device-free size feature is measured in (TFLOPS of SIMT FP32 and of
#: tensor cores, GB/s): an A100's — any fixed numbers would do, they only set the unit.
REFERENCE = {"fp32": 19.5, "tensor": 156.0, "bandwidth": 1555.0}
#: Correction features, in order (all device-free).
CORRECTION_FEATURES: tuple[str, ...] = (
    "mode=train", "optimizer=none", *(f"precision={p}" for p in PRECISIONS),
    "tf32_conv", "tf32_gemm", "has_conv", "has_attention", "has_norm", "tc_share",
    "log_ref_ms", "log_kernels", "log_batch", "log_tdp_w", "vendor=amd",
    *(f"kernel_share_{c}" for c in KERNEL_CLASSES),
)
#: Correction features it is non-decreasing in (work: the size measures) and non-increasing in
#: (the board power: a GPU allowed more watts sustains its clocks longer).
MONOTONE_CORRECTION = {"log_ref_ms": 1, "log_kernels": 1, "log_batch": 1, "log_tdp_w": -1}
#: The correction features that describe the device.
DEVICE_FEATURES = ("log_tdp_w", "vendor=amd")


def correction_regime(X: np.ndarray) -> np.ndarray:
    """The kind of work of each row of a :data:`CORRECTION_FEATURES` matrix, as the correction
    tells kinds apart: its precision and whether the model has convolutions (``"amp,
    convolutions"``, ``"fp16, no convolutions"`` …) — device-free, and the same at every batch,
    sequence and layer count."""
    col = {name: j for j, name in enumerate(CORRECTION_FEATURES)}
    prec = np.full(len(X), "other precision", dtype=object)
    for p in PRECISIONS:
        prec[X[:, col[f"precision={p}"]] > 0.5] = p
    conv = np.where(X[:, col["has_conv"]] > 0.5, "convolutions", "no convolutions")
    return np.array([f"{p}, {c}" for p, c in zip(prec, conv)], dtype=object)


def _device(key: str):
    """The registry device ``key`` with derived spec fields filled
    (:func:`perfcast.devices.derive.complete`) — a GPU with an FP32 peak and a bandwidth."""
    from perfcast.devices import get_device
    from perfcast.devices.derive import complete

    d = get_device(key)
    if not d.is_gpu:
        raise PerfcastError(f"crossdevice predicts GPUs; {key} is a {d.kind}")
    if not d.peak_fp32_tflops or not d.bandwidth_gbs:
        raise PerfcastError(f"crossdevice: {key} needs peak_fp32_tflops and bandwidth_gbs")
    return complete(d)[0]


def has_matrix_units(device) -> bool:
    """Whether the GPU has tensor / matrix cores: NVIDIA compute capability ≥ 7.0 (Volta),
    AMD CDNA (gfx908 and later ``gfx9xx`` data-centre targets), Intel Xe-HPC. The compute
    capability is the spec's, else the one its architecture / name gives
    (:func:`perfcast.devices.derive.compute_capability`: "Blackwell (GB202)" is 12.0, said in
    ``notes``); only for a spec naming no known chip either, a half-precision peak at least 4×
    the FP32 one (tensor cores give 4–16×; P100's half2 or Pascal's FP16 units give ≤ 2× — but
    so does a GeForce card's FP32-accumulate tensor figure, hence the architecture first)."""
    from perfcast.devices.derive import compute_capability

    cc = str(compute_capability(device)[0] or "").strip().lower()
    vendor = str(device.vendor or "").strip().lower()
    if cc.startswith("gfx"):
        return cc in ("gfx908", "gfx90a") or cc.startswith("gfx94") or cc.startswith("gfx95")
    if cc:
        try:
            return float(cc) >= 7.0
        except ValueError:
            return False
    if vendor == "intel" and "xe-hpc" in str(device.architecture or "").lower():
        return True
    half = device.peak_fp16_tflops or device.peak_bf16_tflops
    return bool(half and device.peak_fp32_tflops and half >= 4.0 * device.peak_fp32_tflops)


def peak_unit(kernel_class: str, precision: str, device, tf32: str = "default") -> str:
    """The peak a kernel runs at (a :meth:`~perfcast.devices.Device.peak_tflops` name): GEMMs and
    convolutions at the tensor-core peak of amp / fp16 / bf16 where the GPU has tensor cores; in
    fp32 on a GPU with TF32 units, convolutions at the TF32 peak unless ``tf32="off"`` and
    GEMMs only with ``tf32="on"`` (:data:`perfcast.workload.TF32_MODES`), GEMMs on FP32 matrix cores where the
    GPU has them (AMD CDNA: rocBLAS SGEMM runs MFMA); everything else at the FP32 peak."""
    if kernel_class in ("gemm", "conv"):
        if precision in ("amp", "fp16", "bf16"):
            half = "fp16" if precision == "amp" else precision
            return half if has_matrix_units(device) and device.peak_tflops(half) else "fp32"
        if device.peak_tf32_tflops and (tf32 == "on" or (tf32 == "default"
                                                         and kernel_class == "conv")):
            return "tf32"
        if kernel_class == "gemm" and device.peak_fp32_matrix_tflops:
            return "fp32_matrix"
    return "fp32"


#: Peaks served by tensor / matrix cores.
TC_PEAKS = frozenset({"fp16", "bf16", "tf32", "fp32_matrix"})
#: Our kernel dims → the operator model's (NeuSight's CSV) column names.
_CONV_COLUMNS = {"Cin": "Input_Channel", "Cout": "Output_Channel", "kernel": "Kernel_Szie",
                 "size": "Input_Size", "stride": "Stride", "padding": "Padding"}
#: Rows of a stream kernel when it is priced as an element-wise kernel.
_STREAM_H = 1024


def _virtual_device(device, peak: str, dtype_bytes: float):
    """The fp32 device on which this kernel's fp32 twin has the same roofline: the FP32 peak
    replaced by the peak the kernel runs at and the bandwidth scaled by ``4 / dtype_bytes`` (a
    2-byte operand moves half the bytes of its fp32 twin). The operator model, learned on fp32
    kernels, then sees the kernel's real compute and memory times."""
    tflops = float(device.peak_tflops(peak) or device.peak_fp32_tflops)
    bw = float(device.bandwidth_gbs) * 4.0 / float(dtype_bytes)
    if tflops == device.peak_fp32_tflops and bw == device.bandwidth_gbs:
        return device
    virt = dataclasses.replace(device, key=f"{device.key}+{peak}-{int(dtype_bytes)}b")
    # set after validation: a tensor peak may exceed what a real FP32 peak can be
    object.__setattr__(virt, "peak_fp32_tflops", tflops)
    object.__setattr__(virt, "bandwidth_gbs", bw)
    return virt


def kernel_frame_work(kf) -> tuple[np.ndarray, np.ndarray]:
    """``(FLOPs, bytes moved)`` per kernel row of :func:`kernel_frame` at each row's own operand
    size (:func:`~perfcast.predictors.kernels.kernel_work`; a ``stream`` kernel's own
    ``stream_flops`` / ``stream_bytes``)."""
    from perfcast.predictors.kernels import kernel_work

    f = kf.rename(columns=_CONV_COLUMNS)
    flops, moved = np.zeros(len(f)), np.zeros(len(f))
    kcs = f["kernel_class"].to_numpy()
    for kc in unique(kcs):
        idx = np.flatnonzero(kcs == kc)
        rows = f.iloc[idx]
        if kc == "stream":
            flops[idx] = rows["stream_flops"].to_numpy(float)
            moved[idx] = rows["stream_bytes"].to_numpy(float)
            continue
        dims = {c: rows[c].to_numpy(float) for c in rows.columns
                if c in ("B", "M", "N", "K", "H", *_CONV_COLUMNS.values())}
        fl, mv = kernel_work(kc, dims, dtype_bytes=1, op=rows["op"].to_numpy())
        flops[idx] = fl
        moved[idx] = np.asarray(mv) * rows["dtype_bytes"].to_numpy(float)
    return flops, moved


def _effective_flops(kf, flops: np.ndarray) -> np.ndarray:
    """FLOPs the fastest algorithm needs (Winograd for 3×3 stride-1 convolutions,
    :func:`~perfcast.predictors.kernels.min_flops_factor`)."""
    from perfcast.predictors.kernels import min_flops_factor

    out = np.asarray(flops, dtype=np.float64).copy()
    conv = (kf["kernel_class"] == "conv").to_numpy()
    if conv.any():
        rows = kf.iloc[conv].rename(columns=_CONV_COLUMNS)
        out[conv] /= np.asarray(min_flops_factor("conv", {
            "Kernel_Szie": rows["Kernel_Szie"].to_numpy(float),
            "Stride": rows["Stride"].to_numpy(float)}))
    return out


@dataclasses.dataclass
class KernelPrices:
    """Per kernel row: GPU time ``ms``, ``roofline_ms`` (max(c, m)), ``upper_ms`` (the bound
    from the operator data), whether it runs on tensor / matrix cores (``tc``), and its
    reference-GPU roofline (``ref_ms``, device-free)."""

    ms: np.ndarray
    roofline_ms: np.ndarray
    upper_ms: np.ndarray
    tc: np.ndarray
    ref_ms: np.ndarray


def price_kernels(km, kf) -> KernelPrices:
    """GPU time of every kernel row of :func:`kernel_frame` (columns ``device_key``,
    ``precision``, ``tf32``; a :class:`~perfcast.features.table.Table` or a
    ``pandas.DataFrame``): the module docstring's step 1."""
    n = len(kf)
    flops, moved = kernel_frame_work(kf)
    eff = _effective_flops(kf, flops)
    kcs = kf["kernel_class"].astype(str).to_numpy()
    keys = kf["device_key"].astype(str).to_numpy()
    precs = kf["precision"].astype(str).to_numpy()
    tf32s = kf["tf32"].astype(str).to_numpy() if "tf32" in kf else np.full(n, "default")
    dbytes = kf["dtype_bytes"].to_numpy(float)
    peak = np.empty(n)
    bw = np.empty(n)
    tc = np.zeros(n, bool)
    units = np.empty(n, dtype=object)
    devs = {}
    for combo in dict.fromkeys(zip(keys, kcs, precs, tf32s)):
        dk, kc, pr, t32 = combo
        dev = devs.setdefault(dk, _device(dk))
        unit = peak_unit("gemm" if kc == "gemm" else kc, pr, dev, t32)
        sel = (keys == dk) & (kcs == kc) & (precs == pr) & (tf32s == t32)
        units[sel] = unit
        peak[sel] = float(dev.peak_tflops(unit) or dev.peak_fp32_tflops) * 1e12
        bw[sel] = float(dev.bandwidth_gbs) * 1e9
        tc[sel] = unit in TC_PEAKS and has_matrix_units(dev)
    c = eff / peak * 1e3
    m = moved / bw * 1e3
    roof = np.maximum(c, m)
    # device-free size: the roofline on the reference numbers
    ref_peak = np.where(tc, REFERENCE["tensor"], REFERENCE["fp32"]) * 1e12
    ref = np.maximum(eff / ref_peak, moved / (REFERENCE["bandwidth"] * 1e9)) * 1e3
    # tensor / matrix cores, and SIMT kernels of a class at an operand size whose GPU times were
    # measured: the GPU-time base fitted on kernel GPU times (Vidur's profiles)
    from perfcast.predictors.kernels import _base

    ms = np.empty(n)
    cls = np.where(kcs == "stream", "elementwise", kcs)
    measured = tc.copy()
    for kc, b in dict.fromkeys(zip(cls[~tc], dbytes[~tc])):
        if kc in ("norm", "softmax", "elementwise") and km.gpu_time_covers(kc, b):
            measured |= ~tc & (cls == kc) & (dbytes == b)
    if measured.any():
        gt = km.gpu_time_constants()
        for kc in unique(cls[measured]):
            sel = measured & (cls == kc)
            ms[sel] = _base(gt[kc], c[sel], m[sel])
    simt = ~measured
    if simt.any():
        # everything else: the operator model, asked about the kernel's fp32 twin on the
        # virtual device with the kernel's own peak and operand size
        idx = np.flatnonzero(simt)
        f = Table.of(kf.iloc[idx].rename(columns=_CONV_COLUMNS))
        stream = (f["kernel_class"] == "stream").to_numpy()
        if stream.any():
            elems = np.maximum(1.0, f["stream_bytes"].to_numpy(float)[stream]
                               / (2.0 * f["dtype_bytes"].to_numpy(float)[stream]))
            for name, value in (("op", "addu"), ("kernel_class", "elementwise"),
                                ("H", float(_STREAM_H)),
                                ("B", np.maximum(1.0, np.round(elems / _STREAM_H)))):
                col = _writable(f, name, value)
                col[stream] = value
                f[name] = col
        virt = {}
        vk = [(k, u, b) for k, u, b in zip(keys[idx], units[idx], dbytes[idx])]
        for k, u, b in dict.fromkeys(vk):
            virt[(k, u, b)] = _virtual_device(devs[k], u, b)
        f["device_key"] = [virt[t] for t in vk]
        ms[idx] = km.predict(f)
    ms = np.maximum(ms, roof)
    launch = km.upper_launch_ms()
    kmax = np.array([km.slowdown_max(k) for k in cls])
    upper = kmax * (roof + launch)
    ms = np.minimum(ms, upper)
    return KernelPrices(ms=ms, roofline_ms=roof, upper_ms=upper, tc=tc, ref_ms=ref)


def _writable(t: Table, name: str, value) -> np.ndarray:
    """A copy of column ``name`` of ``t`` that can take ``value`` (as ``DataFrame.loc`` would
    set it: a missing column starts as NaN, a string goes into an object column)."""
    if name not in t.columns:
        return np.full(len(t), np.nan, dtype=object if isinstance(value, str) else np.float64)
    col = t[name].to_numpy().copy()
    if isinstance(value, str) and col.dtype != object:
        col = col.astype(object)
    elif not isinstance(value, str) and col.dtype.kind in "biu":
        col = col.astype(np.float64)
    return col


def kernel_frame(fs: FeatureSet) -> tuple[Table, list[int]]:
    """Every kernel of every record (``record`` column, in launch order within a record; the
    record's ``device_key``, ``precision`` and ``tf32``) as one
    :class:`~perfcast.features.table.Table` — records without a plan are skipped (their index
    is returned). Records of one plan, mode, precision, optimizer and device are lowered
    together (:meth:`~perfcast.features.kernels.KernelPlan.kernel_table`)."""
    missing, groups = [], {}
    rows = fs.rows
    mode = rows["mode"].where(rows["mode"].notna(), "infer").astype(str).to_numpy() \
        if "mode" in rows else np.full(len(fs), "infer")
    opts = rows["optimizer"].to_numpy() if "optimizer" in rows else np.full(len(fs), None)
    tf32 = rows["tf32"].where(rows["tf32"].notna(), "default").astype(str).to_numpy() \
        if "tf32" in rows else np.full(len(fs), "default")
    for i in range(len(fs)):
        plan_i = fs.graph_index[i] if fs.plans else None
        if plan_i is None or fs.plans[plan_i] is None:
            missing.append(i)
            continue
        opt = opts[i] if isinstance(opts[i], str) else None
        key = (plan_i, mode[i] or "infer", str(rows["precision"].iat[i]), opt,
               str(rows["device"].iat[i]), tf32[i])
        groups.setdefault(key, []).append(i)
    frames = []
    for (plan_i, md, prec, opt, dev, t32), idx in groups.items():
        batches = [int(rows["batch_size"].iat[i]) for i in idx]
        t = fs.plans[plan_i].kernel_table(batches, mode=md, precision=prec, optimizer=opt)
        t["record"] = np.asarray(idx)[t["item"].to_numpy()]
        t["device_key"], t["precision"], t["tf32"] = dev, prec, t32
        frames.append(t.drop(columns=["batch", "item"]))
    if not frames:
        return Table(), missing
    return Table.concat(frames), missing


#: The name the report and the CPU predictor import.
_kernel_frame = kernel_frame


def _group_codes(t, cols: list[str]) -> np.ndarray:
    """The group number of each row of ``t`` by the values of ``cols``, groups numbered in
    order of first appearance, a missing value (NaN / ``None``) equal to another — what
    ``DataFrame.groupby(cols, dropna=False, sort=False).ngroup()`` gives."""
    from perfcast.features.table import missing

    n = len(t)
    parts = []
    for c in cols:
        v = t[c].to_numpy()
        na = missing(v)
        vals = v.tolist()
        if na.any():
            vals = [None if m else x for x, m in zip(vals, na.tolist())]
        parts.append(vals)
    seen: dict[tuple, int] = {}
    codes = np.empty(n, dtype=np.int64)
    for i, key in enumerate(zip(*parts) if parts else [()] * n):
        codes[i] = seen.setdefault(key, len(seen))
    return codes


def _kernel_row(k: Kernel, record: int, device: str, precision: str,
                tf32: str = "default") -> dict[str, Any]:
    return {"record": record, "device_key": device, "precision": precision, "tf32": tf32,
            **kernel_row(k)}


def queue_time(pos: np.ndarray, suffix: np.ndarray, starts: np.ndarray, h: np.ndarray,
               s: np.ndarray) -> np.ndarray:
    """``T = max_j (j·h + s·S_j)`` per record: ``pos`` the kernel's index within its record,
    ``suffix`` ``S_j`` (GPU ms from kernel ``j`` to the record's end), ``starts`` the first row
    of each record (rows grouped by record), ``h`` / ``s`` per record."""
    rec = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(pos))))
    val = pos * h[rec] + s[rec] * suffix
    return np.maximum.reduceat(val, starts) if len(val) else np.zeros(0)


def _scale_for(pos, suffix, starts, h, y) -> np.ndarray:
    """The ``s`` with ``T(s) = y`` per record (the queue is increasing and piecewise linear in
    ``s``): ``min_j (y − j·h) / S_j``; a record slower than its dispatch alone allows a tiny
    ``s`` (the GPU time hides in the dispatch)."""
    rec = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(pos))))
    with np.errstate(divide="ignore", invalid="ignore"):
        cand = np.where(suffix > 0, (y[rec] - pos * h[rec]) / suffix, np.inf)
    s = np.minimum.reduceat(cand, starts)
    return np.clip(s, 1e-3, 1e3)


#: Compositions by (graph key, batch, mode, precision, optimizer, tf32, device) with the shipped
#: operator model, for this process (bounded: the oldest go first).
_COMPOSED = Memo(20_000)


@register_predictor
class CrossDevicePredictor(Predictor):
    """See the module docstring. Hyper-parameters: ``kernel_model`` (``"shipped"`` or a
    directory of a saved :class:`~perfcast.predictors.kernels.KernelModel`), ``correction``
    (``"xgboost"`` | ``"ridge"`` | ``"none"``), ``alpha`` (ridge penalty), ``xgb_rounds``,
    ``xgb_depth``, ``balance`` (weight records so each (device, source) counts equally),
    ``host_us`` (per-kernel dispatch candidates, µs: the fit picks one per mode) and
    ``residual`` (``"none"`` | ``"xgboost"``: for one GPU's own labels, an XGBoost on the
    record's static graph features learns what the physics base still misses — the per-device
    residual; it reads no device number, but it is not monotone in the work as the base is).

    Fitted attributes beside the correction: ``host_ms_`` (dispatch per kernel and mode),
    ``tdp_floor_w_`` and ``regimes_`` — the kinds of work (:func:`correction_regime`) the
    correction learned from and alone scales."""

    name: ClassVar[str] = "crossdevice"
    extrapolates: ClassVar[bool] = True  # physics: work at learned rates
    supported_targets: ClassVar[tuple[str, ...]] = ("time_ms",)
    uses_graphs: ClassVar[bool] = False
    uses_plans: ClassVar[bool] = True
    state_format: ClassVar[str] = "numpy"  # trees and arrays: answered without torch

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {"kernel_model": "shipped", "correction": "xgboost", "alpha": 1.0,
                "xgb_rounds": 200, "xgb_depth": 3, "balance": True,
                "host_us": [5.0, 7.0, 10.0, 14.0, 20.0, 28.0], "residual": "none",
                "residual_rounds": 300, "residual_depth": 4}

    # ----------------------------------------------------------------------------- composition
    def _kernel_model(self):
        from perfcast.paths import package_data
        from perfcast.predictors.kernels import KernelModel

        if getattr(self, "kernel_model_", None) is None:
            src = self.p("kernel_model")
            self.kernel_model_ = KernelModel.load(
                package_data("predictors", "shipped_kernels") if src == "shipped" else src)
        return self.kernel_model_

    def compose(self, fs: FeatureSet) -> list[dict | None]:
        """Per record: the kernels' launch-order GPU times as ``pos`` / ``suffix`` arrays (for
        :func:`queue_time`), ``gpu_ms`` (Σ), ``roofline_ms`` (Σ max(c, m)), ``upper_ms`` (Σ of
        the per-kernel upper bounds), ``n_kernels``, ``ref_ms`` and the kernel-kind flags;
        ``None`` for records without a kernel plan. Memoised per process for the shipped
        operator model."""
        keys = None
        if self.p("kernel_model") == "shipped" and "graph_key" in fs.rows:
            cols = ["graph_key", "batch_size", "mode", "precision", "optimizer", "tf32"]
            # the device by its spec's values (a spec file changed under the same key is
            # another device)
            devs = {k: _device(k) for k in fs.rows["device"].astype(str).unique()}
            n = len(fs.rows)
            vals = [fs.rows[c].tolist() if c in fs.rows.columns else [np.nan] * n
                    for c in cols]
            keys = [(*map(str, r), devs[str(d)]) for r, d in zip(
                zip(*vals), fs.rows["device"].tolist())]
            hit = _COMPOSED.get_all(keys)
            if hit is not None:
                return hit
        out = self._compose(fs)
        if keys is not None:
            _COMPOSED.put_all(zip(keys, out))
        return out

    def _compose(self, fs: FeatureSet) -> list[dict | None]:
        kf, missing = kernel_frame(fs)
        out: list[dict | None] = [None] * len(fs)
        if not len(kf):
            return out
        # price each distinct kernel once (a transformer repeats its layer's kernels per layer,
        # and the batch grid repeats the model per batch)
        cols = [c for c in kf.columns if c not in ("record", "phase", "graph_op", "node")]
        code = _group_codes(kf, cols)
        first = np.unique(code, return_index=True)[1]
        pr = price_kernels(self._kernel_model(), kf.iloc[first].reset_index(drop=True))
        ms, roof, upper, ref = pr.ms[code], pr.roofline_ms[code], pr.upper_ms[code], \
            pr.ref_ms[code]
        tcs = pr.tc[code]
        kcs = kf["kernel_class"].astype(str).to_numpy()
        gop = kf["graph_op"].astype(str).to_numpy() if "graph_op" in kf else np.full(len(kf), "")
        rec = kf["record"].to_numpy()
        order = np.argsort(rec, kind="stable")  # launch order kept within a record
        bounds = np.flatnonzero(np.r_[True, rec[order][1:] != rec[order][:-1]])
        for a, b in zip(bounds, np.r_[bounds[1:], len(order)]):
            idx = order[a:b]
            t = ms[idx]
            out[int(rec[idx[0]])] = {
                "pos": np.arange(len(idx), dtype=np.float64),
                "suffix": np.cumsum(t[::-1])[::-1].copy(),
                "gpu_ms": float(t.sum()), "roofline_ms": float(roof[idx].sum()),
                "upper_ms": float(upper[idx].sum()), "n_kernels": int(len(idx)),
                "ref_ms": float(ref[idx].sum()),
                "tc_share": float(np.mean(tcs[idx])),
                **{f"kernel_share_{c}": float(np.mean(kcs[idx] == c)) for c in KERNEL_CLASSES},
                "has_conv": bool(np.any(kcs[idx] == "conv")),
                "has_attention": bool(np.any(np.isin(gop[idx], ("sdpa", "matmul", "bmm")))),
                "has_norm": bool(np.any(kcs[idx] == "norm"))}
        return out

    @staticmethod
    def _stack(comp: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.concatenate([c["pos"] for c in comp])
        suffix = np.concatenate([c["suffix"] for c in comp])
        starts = np.cumsum([0] + [len(c["pos"]) for c in comp[:-1]])
        return pos, suffix, starts

    def _host_ms(self, rows) -> np.ndarray:
        """Per record: the fitted dispatch time per kernel (ms) of its mode."""
        mode = rows["mode"].astype(str).to_numpy() if "mode" in rows else \
            np.full(len(rows), "infer")
        return np.where(mode == "train", self.host_ms_["train"], self.host_ms_["infer"])

    def features(self, fs: FeatureSet, comp: list[dict]) -> np.ndarray:
        """The :data:`CORRECTION_FEATURES` matrix (device-free) of composed records."""
        rows = fs.rows
        n = len(fs)
        col = {name: j for j, name in enumerate(CORRECTION_FEATURES)}
        X = np.zeros((n, len(CORRECTION_FEATURES)))
        mode = rows["mode"].astype(str).to_numpy()
        opt = rows["optimizer"].astype(str).to_numpy() if "optimizer" in rows \
            else np.full(n, "")
        prec = rows["precision"].astype(str).to_numpy()
        tf32 = rows["tf32"].fillna("default").astype(str).to_numpy() if "tf32" in rows \
            else np.full(n, "default")
        X[:, col["mode=train"]] = mode == "train"
        X[:, col["optimizer=none"]] = (mode == "train") & (opt == "none")
        for p in PRECISIONS:
            X[:, col[f"precision={p}"]] = prec == p
        fp32 = prec == "fp32"
        X[:, col["tf32_conv"]] = fp32 & (tf32 != "off")
        X[:, col["tf32_gemm"]] = fp32 & (tf32 == "on")
        for name in ("has_conv", "has_attention", "has_norm", "tc_share",
                     *(f"kernel_share_{c}" for c in KERNEL_CLASSES)):
            X[:, col[name]] = [float(c[name]) for c in comp]
        X[:, col["log_ref_ms"]] = np.log([c["ref_ms"] for c in comp])
        X[:, col["log_kernels"]] = np.log([c["n_kernels"] for c in comp])
        X[:, col["log_batch"]] = np.log(rows["batch_size"].to_numpy(float))
        devs = {k: _device(k) for k in rows["device"].astype(str).unique()}
        for key, d in devs.items():
            sel = (rows["device"].astype(str) == key).to_numpy()
            tdp = d.tdp_w or getattr(self, "tdp_floor_w_", None)
            if not tdp:
                raise PerfcastError(f"crossdevice: device {key} needs tdp_w in its spec — add "
                                    f"\"tdp_w\": <the datasheet's board power in W> (it sets "
                                    f"the clocks a GPU sustains)")
            X[sel, col["log_tdp_w"]] = math.log(float(tdp))
            X[sel, col["vendor=amd"]] = str(d.vendor or "").strip().lower() == "amd"
        return X

    # ----------------------------------------------------------------------------- fit/predict
    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        if not train.plans:
            raise PerfcastError("crossdevice needs kernel plans: build the feature set with "
                                "plans=True (perfcast.labeled.feature_set)")
        for key in train.rows["device"].astype(str).unique():
            _device(key)
        comp = self.compose(train)
        y = train.target("time_ms")
        ok = np.flatnonzero(np.isfinite(y) & (y > 0) & np.array([c is not None for c in comp]))
        if len(ok) < 2:
            raise PerfcastError("crossdevice: fewer than 2 records with a label and a kernel plan")
        sub = train.subset(ok)
        comp = [comp[i] for i in ok]
        y = y[ok]
        w = self._weights(sub.rows)
        self.tdp_floor_w_ = None
        X = self.features(sub, comp)
        # a spec without a board power is answered at the lowest the training GPUs had (the
        # slowest sustained clocks the correction knows: an upper estimate, said in notes)
        self.tdp_floor_w_ = float(np.exp(X[:, CORRECTION_FEATURES.index("log_tdp_w")].min()))
        pos, suffix, starts = self._stack(comp)
        mode = sub.rows["mode"].astype(str).to_numpy()
        # the dispatch time per kernel of each mode: the candidate whose scale targets a
        # correction explains best (a ridge fit; the correction itself follows)
        self.host_ms_ = {}
        choice = {}
        for md in ("infer", "train"):
            sel = mode == md
            if not sel.any():
                self.host_ms_[md] = float(np.median(self.p("host_us"))) * 1e-3
                continue
            best = None
            for h_us in self.p("host_us"):
                h = np.full(len(comp), h_us * 1e-3)
                r = np.log(_scale_for(pos, suffix, starts, h, y))
                loss = self._ridge_loss(X[sel], r[sel], w[sel])
                if best is None or loss < best[0]:
                    best = (loss, h_us)
            self.host_ms_[md] = best[1] * 1e-3
            choice[md] = best[1]
        h = self._host_ms(sub.rows)
        r = np.log(_scale_for(pos, suffix, starts, h, y))
        # the kinds of work the correction learns from: it scales no other (_correct)
        self.regimes_ = sorted(map(str, set(correction_regime(X))))
        self._fit_correction(X, r, w)
        pred = queue_time(pos, suffix, starts, h, np.exp(self._correct(X)))
        self.residual_ = None
        if self.p("residual") == "xgboost":
            import xgboost as xgb

            self.residual_ = xgb.train(
                {"max_depth": int(self.p("residual_depth")), "eta": 0.05, "subsample": 0.8,
                 "colsample_bytree": 0.8, "nthread": 2, "seed": 0, "min_child_weight": 2.0},
                xgb.DMatrix(self._residual_x(sub, pred), label=np.log(y / pred)),
                int(self.p("residual_rounds")))
            pred = pred * np.exp(self.residual_.predict(xgb.DMatrix(self._residual_x(sub, pred))))
        elif self.p("residual") != "none":
            raise PerfcastError(f"crossdevice: unknown residual {self.p('residual')!r} "
                                f"(none, xgboost)")
        self.history_.append({"records": int(len(y)),
                              "train_mape": float(np.mean(np.abs(pred / y - 1))),
                              **{f"host_us_{k}": float(v) for k, v in choice.items()}})

    def _ridge_loss(self, X: np.ndarray, r: np.ndarray, w: np.ndarray) -> float:
        mean = np.average(X, axis=0, weights=w)
        std = np.sqrt(np.average((X - mean) ** 2, axis=0, weights=w)) + 1e-9
        Z = (X - mean) / std
        b0 = float(np.average(r, weights=w))
        A = Z * np.sqrt(w)[:, None]
        coef = np.linalg.solve(A.T @ A + self.p("alpha") * np.eye(Z.shape[1]),
                               A.T @ ((r - b0) * np.sqrt(w)))
        res = r - b0 - Z @ coef
        return float(np.average(res * res, weights=w))

    def _fit_correction(self, X: np.ndarray, r: np.ndarray, w: np.ndarray) -> None:
        kind = self.p("correction")
        self.x_mean_ = np.average(X, axis=0, weights=w)
        self.x_std_ = np.sqrt(np.average((X - self.x_mean_) ** 2, axis=0, weights=w)) + 1e-9
        Z = (X - self.x_mean_) / self.x_std_
        self.booster_ = None
        self.intercept_ = float(np.average(r, weights=w))
        self.coef_ = np.zeros(X.shape[1])
        if kind == "none":
            return
        if kind == "ridge":
            A = Z * np.sqrt(w)[:, None]
            b = (r - self.intercept_) * np.sqrt(w)
            coef = np.linalg.solve(A.T @ A + self.p("alpha") * np.eye(Z.shape[1]), A.T @ b)
            # the monotone features keep only a slope of their sign
            for name, sign in MONOTONE_CORRECTION.items():
                j = CORRECTION_FEATURES.index(name)
                coef[j] = max(coef[j] * sign, 0.0) * sign
            self.coef_ = coef
        elif kind == "xgboost":
            import xgboost as xgb

            mono = "(" + ",".join(str(MONOTONE_CORRECTION.get(n, 0))
                                  for n in CORRECTION_FEATURES) + ")"
            self.booster_ = xgb.train(
                {"max_depth": int(self.p("xgb_depth")), "eta": 0.05, "subsample": 0.8,
                 "nthread": 2, "seed": 0, "monotone_constraints": mono,
                 "base_score": self.intercept_},
                xgb.DMatrix(Z, label=r, weight=w), int(self.p("xgb_rounds")))
            self.intercept_ = 0.0
        else:
            raise PerfcastError(f"crossdevice: unknown correction {kind!r} (xgboost, ridge, "
                                f"none)")

    def _weights(self, rows) -> np.ndarray:
        if not self.p("balance"):
            return np.ones(len(rows))
        import pandas as pd

        rows = rows.to_pandas() if isinstance(rows, Table) else rows
        key = rows["device"].astype(str) + "|" + rows.get(
            "source", pd.Series("", index=rows.index)).astype(str)
        counts = key.map(key.value_counts())
        return (1.0 / counts.to_numpy(float)) * len(rows) / key.nunique()

    def _correct(self, X: np.ndarray) -> np.ndarray:
        """``log s`` per row: the learned correction for the kinds of work it learned from
        (:attr:`regimes_`), 0 for any other (a model saved before regimes were recorded
        corrects every row)."""
        Z = (X - self.x_mean_) / self.x_std_
        c = self.intercept_ + Z @ self.coef_
        if getattr(self, "booster_", None) is not None:  # numpy trees or an xgboost.Booster
            c = c + self.booster_.inplace_predict(Z)
        return np.where(self._in_regimes(X), c, 0.0)

    def _in_regimes(self, X: np.ndarray) -> np.ndarray:
        regimes = getattr(self, "regimes_", None)
        if regimes is None:
            return np.ones(len(X), bool)
        return np.isin(correction_regime(X), list(regimes))

    def out_of_range(self, data: FeatureSet) -> list[str]:
        """Why each record's correction does not apply, one string per record ("" when it
        does, or without a kernel plan): a kind of work (:func:`correction_regime`) none of
        its training records was."""
        comp = self.compose(data)
        ok = np.flatnonzero([c is not None for c in comp])
        out = [""] * len(data)
        if not len(ok) or getattr(self, "regimes_", None) is None:
            return out
        sub = data.subset(ok) if len(ok) < len(data) else data
        X = self.features(sub, [comp[i] for i in ok])
        inside = self._in_regimes(X)
        for i, kind, yes in zip(ok, correction_regime(X), inside):
            if not yes:
                out[i] = (f"its correction learned from {'; '.join(self.regimes_)} records, "
                          f"none {kind}: the kernels' GPU time and the dispatch queue, "
                          f"uncorrected")
        return out

    def _predict(self, data: FeatureSet) -> np.ndarray:
        comp = self.compose(data)
        ok = np.flatnonzero([c is not None for c in comp])
        out = np.full((len(data), 1), np.nan)
        if not len(ok):
            return out
        sub = data.subset(ok) if len(ok) < len(data) else data
        cs = [comp[i] for i in ok]
        X = self.features(sub, cs)
        pos, suffix, starts = self._stack(cs)
        t = queue_time(pos, suffix, starts, self._host_ms(sub.rows), np.exp(self._correct(X)))
        if getattr(self, "residual_", None) is not None:  # numpy trees or an xgboost.Booster
            t = t * np.exp(self.residual_.inplace_predict(self._residual_x(sub, t)))
        lo = np.array([c["roofline_ms"] for c in cs])
        hi = np.array([c["upper_ms"] for c in cs])
        out[ok, 0] = np.minimum(np.maximum(t, lo), np.maximum(hi, lo))
        return out

    @staticmethod
    def _residual_x(data: FeatureSet, base_ms: np.ndarray) -> np.ndarray:
        """The per-device residual's inputs: the static graph features and the log base time."""
        return np.column_stack([data.static, np.log(base_ms)])

    def bounds(self, data: FeatureSet) -> np.ndarray:
        """``[n, 2]``: per record the lower (Σ roofline) and upper (Σ K·(roofline + launch))
        bound every answer of this predictor stays within (NaN without a kernel plan)."""
        comp = self.compose(data)
        return np.array([[c["roofline_ms"], c["upper_ms"]] if c is not None
                         else [np.nan, np.nan] for c in comp])

    def device_notes(self, key: str) -> list[str]:
        """What was derived for device ``key`` (:func:`perfcast.devices.derive.complete`) or
        assumed (no board power: the lowest the training GPUs had)."""
        from perfcast.devices import get_device
        from perfcast.devices.derive import complete

        dev = get_device(key)
        out = [d.note(dev.key) for d in complete(dev)[1]
               if d.field in ("compute_capability", "peak_tf32_tflops", "peak_bf16_tflops")]
        if not dev.tdp_w and getattr(self, "tdp_floor_w_", None):
            out.append(f"device {dev.key}: no tdp_w in its spec — answered as a "
                       f"{self.tdp_floor_w_:g} W board (the lowest power of the GPUs the "
                       f"correction learned from: the slowest sustained clocks, an upper "
                       f"estimate); give tdp_w for a sharper answer")
        return out

    # ----------------------------------------------------------------------------- state
    def _state(self):
        km = self._kernel_model()
        tensors = {f"kernels.{kc}": np.frombuffer(bytes(b.save_raw("json")), dtype=np.uint8).copy()
                   for kc, b in km.boosters_.items()}
        tensors.update({"x_mean": self.x_mean_, "x_std": self.x_std_, "coef": self.coef_})
        if getattr(self, "booster_", None) is not None:
            tensors["booster"] = np.frombuffer(bytes(self.booster_.save_raw("json")),
                                               dtype=np.uint8).copy()
        if getattr(self, "residual_", None) is not None:
            tensors["residual"] = np.frombuffer(bytes(self.residual_.save_raw("json")),
                                                dtype=np.uint8).copy()
        return tensors, {"intercept": float(self.intercept_), "host_ms": self.host_ms_,
                         "tdp_floor_w": getattr(self, "tdp_floor_w_", None),
                         "regimes": getattr(self, "regimes_", None),
                         "kernels": km.config(), "features": list(CORRECTION_FEATURES)}

    def _set_state(self, tensors, state) -> None:
        from perfcast.predictors.kernels import KernelModel

        if list(state.get("features", [])) != list(CORRECTION_FEATURES):
            raise PerfcastError("crossdevice: saved with other correction features; retrain it")
        from perfcast.trees import load_booster

        boosters = {key[len("kernels."):]: bytearray(raw.numpy().tobytes())
                    for key, raw in tensors.items() if key.startswith("kernels.")}
        self.kernel_model_ = KernelModel.from_config(state["kernels"], boosters)
        self.host_ms_ = {k: float(v) for k, v in state["host_ms"].items()}
        self.tdp_floor_w_ = state.get("tdp_floor_w")
        regimes = state.get("regimes")
        self.regimes_ = None if regimes is None else [str(r) for r in regimes]
        self.x_mean_ = tensors["x_mean"].numpy()
        self.x_std_ = tensors["x_std"].numpy()
        self.coef_ = tensors["coef"].numpy()
        self.intercept_ = float(state["intercept"])
        self.booster_ = self.residual_ = None
        if "booster" in tensors:
            self.booster_ = load_booster(tensors["booster"].numpy().tobytes())
        if "residual" in tensors:
            self.residual_ = load_booster(tensors["residual"].numpy().tobytes())


def composition_features(fs: FeatureSet, kernel_model: str = "shipped"):
    """Per record, the uncorrected composition on the record's device: ``gpu_ms`` (Σ kernel GPU
    time), ``roofline_ms``, ``n_kernels`` and the share of the kernels per class
    (``kernel_share_<class>``; NaN without a plan) — operator-level features for other
    predictors (``xgboost(operator_features=True)``)."""
    import pandas as pd

    comp = CrossDevicePredictor(kernel_model=kernel_model).compose(fs)
    cols = ("gpu_ms", "roofline_ms", "n_kernels", *(f"kernel_share_{c}" for c in KERNEL_CLASSES))
    return pd.DataFrame([{k: (c[k] if c is not None else np.nan) for k in cols} for c in comp])


__all__ = ["CORRECTION_FEATURES", "CrossDevicePredictor", "TF32_MODES",
           "composition_features", "correction_regime", "has_matrix_units", "kernel_frame",
           "peak_unit", "price_kernels", "queue_time"]
