"""Each kernel's GPU time on a GPU of the registry (:func:`price_kernels`): the peak of the
units that run it (:func:`peak_unit`), its work (:func:`kernel_frame_work`) and the operator
model's answer or the GPU-time base, between the roofline and the bound the operator data
allow. Only GPUs: CPU records are refused."""

from __future__ import annotations

import dataclasses

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.features.table import Table, unique

#: Reference GPU numbers the device-free size feature is measured in (TFLOPS of SIMT FP32 and of
#: tensor cores, GB/s): an A100's — any fixed numbers would do, they only set the unit.
REFERENCE = {"fp32": 19.5, "tensor": 156.0, "bandwidth": 1555.0}


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
    the FP32 one (tensor cores give 4–16×; P100's half2 or Pascal's FP16 units give ≤ 2× —
    but so does a GeForce card's FP32-accumulate tensor figure, hence the architecture
    first)."""
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
    GEMMs only with ``tf32="on"`` (:data:`perfcast.workload.TF32_MODES`), GEMMs on FP32 matrix
    cores where the GPU has them (AMD CDNA: rocBLAS SGEMM runs MFMA); everything else at the
    FP32 peak."""
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
    ``pandas.DataFrame``). With ``c`` its compute time (FLOPs ÷ the peak of the units that run
    it, :func:`peak_unit` — SIMT FP32, TF32, fp16 / bf16 tensor cores, AMD FP32 matrix cores)
    and ``m`` its memory time (bytes ÷ bandwidth), a kernel's GPU time is:

    * on tensor / matrix cores, and a norm or element-wise kernel at an operand size whose GPU
      times were measured (2-byte, :meth:`KernelModel.gpu_time_covers`): the GPU-time base
      ``τ + ((c / η)^p + (m / β)^p)^(1/p)`` (GEMMs and convolutions overlap compute and memory,
      ``p`` fitted; ``p = 1`` — the sum — for the other classes);
    * otherwise the operator model (:class:`~perfcast.predictors.kernels.KernelModel`,
      NeuSight's fp32 kernels on five GPUs: its base ``τ + c/η + m/β`` times a shape-only
      factor that fades out below the sizes it measured), asked about the kernel's fp32 twin on
      a virtual device with the kernel's own peak and operand size (:func:`_virtual_device`);
    * never below ``max(c, m)`` (the roofline), never above ``K_class · (max(c, m) + launch)``
      (``K``: the largest slowdown the operator measurements show for the class,
      :attr:`KernelModel.slowdown_max_`).

    ``τ``, ``η``, ``β``, ``p`` per class are the GPU-time constants fitted on Vidur's A100 / A40
    operator profiles (:meth:`KernelModel.fit_gpu_time`: CUDA-event times of the token-level
    operators of LLM layers) — the kernels' own time, without host dispatch. Every term is
    non-increasing in the peak of the kernel's units and in the bandwidth, so a GPU at least as
    good in both prices every kernel no slower. Devices are read from the registry by the
    rows' ``device_key``, with derived spec fields filled (:func:`_device`)."""
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
    from perfcast.predictors.kernels.gputime import _base

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
