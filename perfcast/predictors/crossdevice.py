"""``crossdevice`` — one device-conditioned predictor for any GPU given by its spec sheet.

A record's time is composed from its kernels and corrected once for what kernels do not see::

    kernels   = KernelPlan.kernels(batch, mode, precision, optimizer)   (perfcast.features.kernels)
    t_kernels = Σ_k  roofline_k / u_k           u_k ∈ (0, 1]: the operator model's predicted
                                                utilization (perfcast.predictors.kernels)
    time_ms   = max(t_kernels · exp(c(features)), Σ_k roofline_k)     c: a learned correction

* The **operator model** (NeuSight's idea: a kernel's achieved fraction of its roofline bound,
  from its dimensions and the GPU's spec numbers) is trained on kernel measurements of five
  GPUs (``ops/train``) and never sees whole models; every kernel time is ≥ its roofline bound.
  Kernels it has no class for (pooling, reductions, memory movement, depthwise convolutions…)
  are priced as streaming element-wise kernels over their bytes — a bandwidth-bound estimate;
  their share of the time is reported (``stream_share``).
* The **correction** ``c`` is learned from every whole-model GPU label at once (timm, torchvision
  benchmark, NeuSight's transformer labels), with the device as *features*, not as an identity:
  log(t_kernels), the share of time per kernel class, kernel count per ms (launch-bound models),
  mode, optimizer, precision, and spec ratios (tensor-core peak / fp32 peak, ridge point,
  architecture year). It absorbs framework overhead, kernel fusion (cuDNN, SDPA), the difference
  between tensor-core and SIMT kernels (the operator data are fp32 SIMT), and the backward pass
  the lowering derives rather than traces. It is a ridge regression by default (few
  coefficients: it extrapolates to GPUs beyond the training range without leaving it), or a
  shallow XGBoost (``correction="xgboost"``).

Devices are read from the registry by the records' ``device`` key, which may be a GPU given by
its spec (``perfcast devices add`` / ``--device my.json``). Only GPUs: CPU records are refused.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from perfcast.errors import PerfcastError
from perfcast.features.kernels import KERNEL_CLASSES, Kernel, kernel_row
from perfcast.features.records import FeatureSet
from perfcast.predictors import register_predictor
from perfcast.predictors.base import Predictor
from perfcast.workload import PRECISIONS

#: Per-kernel launch time used to express a model's kernel count as time (a feature, not a
#: prediction): CUDA launch + PyTorch eager dispatch.
LAUNCH_MS = 0.005
#: Weight of a device's own records in few-shot adaptation, in (device, source) groups of the
#: training data (:meth:`CrossDevicePredictor.recalibrate`).
SHOT_GROUP_WEIGHT = 4.0
#: Tensor-core efficiency before any tensor-core label is seen (a typical cuBLAS fraction).
TC_ETA_DEFAULT = 0.7
#: Correction features, in order.
CORRECTION_FEATURES: tuple[str, ...] = (
    "log_kernels_ms", "log_roofline_ms", "launch_share",
    *(f"share_{c}" for c in KERNEL_CLASSES),
    "mode=train", "optimizer=none", *(f"precision={p}" for p in PRECISIONS),
    "log_tensor_over_fp32_peak", "log_ridge_flop_per_byte", "arch_year", "vendor=amd",
    "log_batch",
)


#: The correction features that describe the device (``device_features=False`` leaves them out).
DEVICE_FEATURES = ("log_tensor_over_fp32_peak", "log_ridge_flop_per_byte", "arch_year",
                   "vendor=amd")


def _device_row(key: str):
    from perfcast.devices import get_device

    d = get_device(key)
    if not d.is_gpu:
        raise PerfcastError(f"crossdevice predicts GPUs; {key} is a {d.kind}")
    if not d.peak_fp32_tflops or not d.bandwidth_gbs:
        raise PerfcastError(f"crossdevice: {key} needs peak_fp32_tflops and bandwidth_gbs")
    return d


#: Our kernel dims → the operator model's (NeuSight's CSV) column names.
_CONV_COLUMNS = {"Cin": "Input_Channel", "Cout": "Output_Channel", "kernel": "Kernel_Szie",
                 "size": "Input_Size", "stride": "Stride", "padding": "Padding"}
#: Rows of a stream kernel when it is priced as an element-wise kernel.
_STREAM_H = 1024


def _peak_precision(kernel_class: str, precision: str, device) -> str:
    """The peak a kernel runs at: GEMMs and convolutions at the tensor-core peak of amp / fp16 /
    bf16; in fp32, convolutions at TF32 where the GPU has it (cuDNN's default in PyTorch),
    GEMMs on FP32 matrix cores where the GPU has them (AMD CDNA: rocBLAS SGEMM runs MFMA),
    otherwise at the FP32 SIMT peak (PyTorch's matmul default); everything else at FP32."""
    if kernel_class in ("gemm", "conv"):
        if precision == "amp":
            return "fp16"
        if precision in ("fp16", "bf16"):
            return precision
        if kernel_class == "conv" and device.peak_tf32_tflops:
            return "tf32"
        if kernel_class == "gemm" and device.peak_fp32_matrix_tflops:
            return "fp32_matrix"
    return "fp32"


def _virtual_device(device, peak: str, dtype_bytes: float):
    """The fp32 device on which this kernel's fp32 twin has the same roofline: the FP32 peak
    replaced by the peak the kernel runs at (tensor / matrix cores) and the bandwidth scaled by
    ``4 / dtype_bytes`` (a 2-byte operand moves half the bytes of its fp32 twin). The operator
    model, learned on fp32 kernels, then sees the kernel's real compute/bandwidth balance."""
    import dataclasses

    tflops = float(device.peak_tflops(peak) or device.peak_fp32_tflops)
    bw = float(device.bandwidth_gbs) * 4.0 / float(dtype_bytes)
    if tflops == device.peak_fp32_tflops and bw == device.bandwidth_gbs:
        return device
    virt = dataclasses.replace(device, key=f"{device.key}+{peak}-{int(dtype_bytes)}b")
    # set after validation: a tensor peak may exceed what a real FP32 peak can be
    object.__setattr__(virt, "peak_fp32_tflops", tflops)
    object.__setattr__(virt, "bandwidth_gbs", bw)
    return virt


def kernel_frame_work(kf: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(FLOPs, bytes moved)`` per kernel row of :func:`_kernel_frame` at each row's own operand
    size (:func:`~perfcast.predictors.kernels.kernel_work`; a ``stream`` kernel's own
    ``stream_flops`` / ``stream_bytes``)."""
    from perfcast.predictors.kernels import kernel_work

    f = kf.rename(columns=_CONV_COLUMNS)
    flops, moved = np.zeros(len(f)), np.zeros(len(f))
    kcs = f["kernel_class"].to_numpy()
    for kc in pd.unique(kcs):
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


#: How a kernel that does not run as an fp32 SIMT kernel (tensor / matrix cores, 2-byte
#: operands) gets its utilization: ``"virtual"`` — the operator model asked about the kernel's
#: fp32 twin on :func:`_virtual_device`; ``"fp32"`` — the utilization of the fp32 twin on the
#: real device, applied to the kernel's own roofline.
PRICINGS = ("virtual", "fp32")


def price_kernels(km, kf: pd.DataFrame, pricing: str = "virtual") -> tuple[np.ndarray,
                                                                        np.ndarray]:
    """``(ms, roofline_ms)`` per kernel row of :func:`_kernel_frame`: the operator model's
    utilization (learned on fp32 kernels) applied to the kernel's roofline at its own
    precision and peak (:func:`_peak_precision`); ``pricing`` (:data:`PRICINGS`) says on which
    device the utilization is asked; stream kernels as element-wise kernels over their bytes
    (a bandwidth-bound estimate)."""
    from perfcast.devices import get_device
    from perfcast.predictors.kernels import kernel_work, min_flops_factor, roofline_ms

    if pricing not in PRICINGS:
        raise PerfcastError(f"crossdevice: unknown pricing {pricing!r} ({', '.join(PRICINGS)})")
    f = kf.rename(columns=_CONV_COLUMNS).copy()
    stream = (f["kernel_class"] == "stream").to_numpy()
    if stream.any():
        n = np.maximum(1.0, f.loc[stream, "stream_bytes"].to_numpy(float)
                       / (2.0 * f.loc[stream, "dtype_bytes"].to_numpy(float)))
        f.loc[stream, "op"] = "addu"
        f.loc[stream, "kernel_class"] = "elementwise"
        f.loc[stream, "H"] = float(_STREAM_H)
        f.loc[stream, "B"] = np.maximum(1.0, np.round(n / _STREAM_H))
    if pricing == "virtual":
        keys = f["device_key"].astype(str).to_numpy()
        kcs0 = f["kernel_class"].to_numpy()
        precs0 = f["precision"].astype(str).to_numpy()
        dbytes = f["dtype_bytes"].to_numpy(float)
        virt = {}
        for dk, kc, pr, db in dict.fromkeys(zip(keys, kcs0, precs0, dbytes)):
            dev = get_device(dk)
            virt[(dk, kc, pr, db)] = _virtual_device(dev, _peak_precision(kc, pr, dev), db)
        f_u = f.assign(device_key=[virt[t] for t in zip(keys, kcs0, precs0, dbytes)])
    else:
        f_u = f
    u = km.predict_utilization(f_u)
    roof = np.empty(len(f))
    kcs, devs = f["kernel_class"].to_numpy(), f["device_key"].astype(str).to_numpy()
    precs = f["precision"].astype(str).to_numpy()
    for (kc, dk, pr), idx in pd.Series(range(len(f))).groupby([kcs, devs, precs]).groups.items():
        idx = np.asarray(list(idx))
        rows = f.iloc[idx]
        dims = {c: rows[c].to_numpy(float) for c in rows.columns
                if c in ("B", "M", "N", "K", "H", *_CONV_COLUMNS.values())}
        flops, moved = kernel_work(kc, dims, dtype_bytes=1, op=rows["op"].to_numpy())
        moved = np.asarray(moved) * rows["dtype_bytes"].to_numpy(float)
        dev = get_device(dk)
        roof[idx] = roofline_ms(np.asarray(flops) / min_flops_factor(kc, dims), moved, dev,
                                _peak_precision(kc, pr, dev))
    return roof / u, roof


#: Output tile of the tensor-core GEMM model (rows × columns per thread block): a kernel's
#: waves are its tiles over the SMs, and a partly filled last wave costs a whole one.
TC_TILE = (128, 128)
#: Peaks served by tensor / matrix cores (priced by the tensor-core model, not the operator
#: model, whose measurements are FP32 SIMT kernels).
TC_PEAKS = frozenset({"fp16", "bf16", "tf32", "fp32_matrix"})


def has_matrix_units(device) -> bool:
    """Whether the GPU has tensor / matrix cores: NVIDIA compute capability ≥ 7.0 (Volta),
    AMD CDNA (gfx908 and later ``gfx9xx`` data-centre targets), Intel Xe-HPC; for a spec without
    a compute capability, a half-precision peak at least 4× the FP32 one (tensor cores give
    4–16×; P100's half2 or Pascal's FP16 units give ≤ 2×)."""
    cc = str(device.compute_capability or "").strip().lower()
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


def tensor_core_work(kf: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(on tensor cores, wave-quantised roofline ms)`` per kernel row of :func:`_kernel_frame`.

    A GEMM or convolution whose peak (:func:`_peak_precision`) is a tensor / matrix-core peak
    runs as tiles of :data:`TC_TILE` outputs (a convolution as its implicit GEMM ``B·O² × Co``);
    with ``w`` waves of tiles over the SMs the compute roof is scaled by ``⌈w⌉ / w`` (the last
    wave costs a whole one; fewer tiles than SMs are not penalised — cuBLAS then picks smaller
    tiles or split-K). The bound is ``max(quantised compute, bytes / bandwidth)`` at the
    kernel's own precision. The tensor-core model (:class:`CrossDevicePredictor`) prices such a
    kernel as ``bound / η + τ``."""
    from perfcast.devices import get_device
    from perfcast.predictors.kernels import conv_output_size, kernel_work

    f = kf.rename(columns=_CONV_COLUMNS)
    tc = np.zeros(len(f), bool)
    roof_q = np.zeros(len(f))
    kcs, devs = f["kernel_class"].to_numpy(), f["device_key"].astype(str).to_numpy()
    precs = f["precision"].astype(str).to_numpy()
    mask = np.isin(kcs, ["gemm", "conv"])
    if not mask.any():
        return tc, roof_q
    for (kc, dk, pr), idx in pd.Series(np.flatnonzero(mask)).groupby(
            [kcs[mask], devs[mask], precs[mask]]).groups.items():
        idx = np.asarray([int(np.flatnonzero(mask)[i]) for i in idx])
        dev = get_device(dk)
        peak = _peak_precision(kc, pr, dev)
        if peak not in TC_PEAKS or not has_matrix_units(dev) or not dev.sm_count \
                or getattr(dev, f"peak_{peak}_tflops", None) is None:
            continue
        rows = f.iloc[idx]
        dims = {c: rows[c].to_numpy(float) for c in rows.columns
                if c in ("B", "M", "N", "K", "H", *_CONV_COLUMNS.values())}
        flops, moved = kernel_work(kc, dims, dtype_bytes=1, op=rows["op"].to_numpy())
        moved = np.asarray(moved) * rows["dtype_bytes"].to_numpy(float)
        if kc == "gemm":
            b, m, n = dims["B"], dims["M"], dims["N"]
        else:
            o = conv_output_size(dims["Input_Size"], dims["Kernel_Szie"], dims["Stride"],
                                 dims["Padding"])
            b, m, n = np.ones(len(rows)), dims["B"] * o * o, dims["Output_Channel"]
        waves = b * np.ceil(m / TC_TILE[0]) * np.ceil(n / TC_TILE[1]) / float(dev.sm_count)
        q = np.where(waves >= 1.0, np.ceil(waves) / np.maximum(waves, 1e-9), 1.0)
        t_c = np.asarray(flops) * q / (float(dev.peak_tflops(peak)) * 1e12) * 1e3
        t_m = moved / (float(dev.bandwidth_gbs) * 1e9) * 1e3
        tc[idx] = True
        roof_q[idx] = np.maximum(t_c, t_m)
    return tc, roof_q


def _kernel_frame(fs: FeatureSet) -> tuple[pd.DataFrame, list[int]]:
    """Every kernel of every record (``record`` column) — records without a plan are skipped
    (their index is returned). Records of one plan, mode, precision, optimizer and device are
    lowered together (:meth:`KernelPlan.kernel_table`)."""
    missing, groups = [], {}
    rows = fs.rows
    mode = rows["mode"].where(rows["mode"].notna(), "infer").astype(str).to_numpy() \
        if "mode" in rows else np.full(len(fs), "infer")
    opts = rows["optimizer"].to_numpy() if "optimizer" in rows else np.full(len(fs), None)
    for i in range(len(fs)):
        plan_i = fs.graph_index[i] if fs.plans else None
        if plan_i is None or fs.plans[plan_i] is None:
            missing.append(i)
            continue
        opt = opts[i] if isinstance(opts[i], str) else None
        key = (plan_i, mode[i] or "infer", str(rows["precision"].iat[i]), opt,
               str(rows["device"].iat[i]))
        groups.setdefault(key, []).append(i)
    frames = []
    for (plan_i, md, prec, opt, dev), idx in groups.items():
        batches = [int(rows["batch_size"].iat[i]) for i in idx]
        t = fs.plans[plan_i].kernel_table(batches, mode=md, precision=prec, optimizer=opt)
        t["record"] = np.asarray(idx)[t["item"].to_numpy()]
        t["device_key"], t["precision"] = dev, prec
        frames.append(t.drop(columns=["batch", "item"]))
    if not frames:
        return pd.DataFrame(), missing
    return pd.concat(frames, ignore_index=True), missing


def _kernel_row(k: Kernel, record: int, device: str, precision: str) -> dict[str, Any]:
    return {"record": record, "device_key": device, "precision": precision, **kernel_row(k)}


#: Compositions by (graph key, batch, mode, precision, optimizer, device) with the shipped
#: operator model, for this process.
_COMPOSED: dict[tuple, dict] = {}


@register_predictor
class CrossDevicePredictor(Predictor):
    """See the module docstring. Hyper-parameters: ``kernel_model`` (``"shipped"`` or a
    directory of a saved :class:`~perfcast.predictors.kernels.KernelModel`), ``correction``
    (``"ridge"`` | ``"xgboost"`` | ``"none"``), ``alpha`` (ridge penalty), ``xgb_rounds``,
    ``xgb_depth``, ``balance`` (weight records so each (device, source) counts equally)."""

    name: ClassVar[str] = "crossdevice"
    supported_targets: ClassVar[tuple[str, ...]] = ("time_ms",)
    uses_graphs: ClassVar[bool] = False
    uses_plans: ClassVar[bool] = True

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {"kernel_model": "shipped", "pricing": "virtual", "correction": "ridge",
                "alpha": 1.0, "xgb_rounds": 200, "xgb_depth": 3, "balance": True,
                "device_features": True, "tensor_cores": "analytic"}

    # ----------------------------------------------------------------------------- composition
    def _kernel_model(self):
        from perfcast.paths import package_data
        from perfcast.predictors.kernels import KernelModel

        if getattr(self, "kernel_model_", None) is None:
            src = self.p("kernel_model")
            self.kernel_model_ = KernelModel.load(
                package_data("predictors", "shipped_kernels") if src == "shipped" else src)
        return self.kernel_model_

    def compose(self, fs: FeatureSet) -> pd.DataFrame:
        """Per record: ``kernels_ms`` (Σ kernel times), ``roofline_ms``, ``n_kernels`` and the
        time share per kernel class; NaN for records without a kernel plan. Memoised per
        process for the shipped operator model (the composition does not depend on the
        correction, so a leave-one-GPU-out evaluation composes each record once)."""
        keys = None
        if self.p("kernel_model") == "shipped" and "graph_key" in fs.rows:
            cols = ["graph_key", "batch_size", "mode", "precision", "optimizer", "device"]
            keys = [(self.p("pricing"), self.p("tensor_cores"), *map(str, r))
                    for r in fs.rows.reindex(
                columns=cols).itertuples(index=False, name=None)]
            if all(k in _COMPOSED for k in keys):
                return pd.DataFrame([_COMPOSED[k] for k in keys])
        out = self._compose(fs)
        if keys is not None:
            for k, row in zip(keys, out.to_dict("records")):
                _COMPOSED[k] = row
        return out

    def _compose(self, fs: FeatureSet) -> pd.DataFrame:
        """Per record and kernel class: ``ms_<class>`` (Σ operator-model times), and for the
        kernels on tensor / matrix cores (``tensor_cores="analytic"``) ``tcroof_<class>`` (Σ
        wave-quantised bounds) and ``tcn_<class>`` (their count) instead; ``roofline_ms``,
        ``n_kernels``. :meth:`_sums` turns them into times with the fitted ``η``, ``τ``."""
        kf, missing = _kernel_frame(fs)
        out = pd.DataFrame(index=np.arange(len(fs)))
        if len(kf):
            # price each distinct kernel once (a transformer repeats its layer's kernels per
            # layer, and the batch grid of the bounds repeats the model per batch)
            keys = [c for c in kf.columns if c not in ("record", "phase", "graph_op")]
            code = kf.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
            first = np.unique(code, return_index=True)[1]
            uk = kf.iloc[first].reset_index(drop=True)
            ms, roof = price_kernels(self._kernel_model(), uk, self.p("pricing"))
            if self.p("tensor_cores") == "analytic":
                tc, roof_q = tensor_core_work(uk)
            elif self.p("tensor_cores") == "operator":
                tc, roof_q = np.zeros(len(uk), bool), np.zeros(len(uk))
            else:
                raise PerfcastError(f"crossdevice: unknown tensor_cores "
                                    f"{self.p('tensor_cores')!r} (analytic, operator)")
            kf["ms"], kf["roofline_ms"] = ms[code], roof[code]
            kf["tc"], kf["tcroof"] = tc.astype(float)[code], roof_q[code]
            tc = tc[code]
            kf.loc[tc, "ms"] = 0.0
            by = kf.groupby("record")
            out["roofline_ms"] = by["roofline_ms"].sum()
            out["n_kernels"] = by.size()
            for col, val in (("ms", "ms"), ("tcroof", "tcroof"), ("tcn", "tc")):
                per = kf.pivot_table(index="record", columns="kernel_class", values=val,
                                     aggfunc="sum", fill_value=0.0)
                for c in KERNEL_CLASSES:
                    out[f"{col}_{c}"] = (per[c] if c in per else 0.0)
        for c in ("roofline_ms", "n_kernels", *(f"{p}_{c}" for p in ("ms", "tcroof", "tcn")
                                                for c in KERNEL_CLASSES)):
            if c not in out:
                out[c] = np.nan
        out["missing"] = False
        out.loc[missing, "missing"] = True
        return out

    def _sums(self, comp: pd.DataFrame, eta: float | None = None,
              tau: float | None = None) -> pd.DataFrame:
        """``kernels_ms`` and ``share_<class>`` of composed records at tensor-core efficiency
        ``η`` and per-kernel fixed time ``τ`` (ms; default: the fitted ones)."""
        eta = self.eta_ if eta is None else eta
        tau = self.tau_ if tau is None else tau
        per = {c: comp[f"ms_{c}"].to_numpy(float) + comp[f"tcroof_{c}"].to_numpy(float) / eta
               + comp[f"tcn_{c}"].to_numpy(float) * tau for c in KERNEL_CLASSES}
        total = np.sum(list(per.values()), axis=0)
        total = np.where(comp["missing"].to_numpy(bool), np.nan, total)
        out = pd.DataFrame({"kernels_ms": total, "roofline_ms": comp["roofline_ms"].to_numpy(),
                            "n_kernels": comp["n_kernels"].to_numpy()})
        for c in KERNEL_CLASSES:
            out[f"share_{c}"] = per[c] / total
        return out

    def _fit_tensor_cores(self, comp: pd.DataFrame, y: np.ndarray, w: np.ndarray) -> None:
        """``η``, the achieved fraction of the tensor / matrix-core peak, by weighted least
        squares of log time over the records with tensor-core work (:data:`TC_ETA_DEFAULT`
        where there is none). ``τ``, the fixed time of such a kernel, is the launch latency
        :data:`LAUNCH_MS` (the operator model's isolated kernel timings include theirs): fitted
        freely it grows to absorb host overhead of launch-bound models, which is not a property
        of the kernel — the correction's ``launch_share`` sees that."""
        from scipy.optimize import minimize_scalar

        self.eta_, self.tau_ = TC_ETA_DEFAULT, LAUNCH_MS
        tcroof = sum(comp[f"tcroof_{c}"].to_numpy(float) for c in KERNEL_CLASSES)
        sel = tcroof > 0
        if sel.sum() < 4:
            return
        c0 = comp[sel]
        ly, ws = np.log(y[sel]), w[sel]

        def loss(eta):
            r = np.log(self._sums(c0, eta, LAUNCH_MS)["kernels_ms"].to_numpy()) - ly
            return float(np.sum(ws * r * r))

        self.eta_ = float(minimize_scalar(loss, bounds=(0.05, 1.0), method="bounded").x)

    def features(self, fs: FeatureSet, comp: pd.DataFrame) -> np.ndarray:
        """The :data:`CORRECTION_FEATURES` matrix of composed records (:meth:`_sums`)."""
        rows = fs.rows
        devs = {k: _device_row(k) for k in rows["device"].astype(str).unique()}
        X = np.zeros((len(fs), len(CORRECTION_FEATURES)))
        col = {n: j for j, n in enumerate(CORRECTION_FEATURES)}
        X[:, col["log_kernels_ms"]] = np.log(comp["kernels_ms"].to_numpy(float))
        X[:, col["log_roofline_ms"]] = np.log(comp["roofline_ms"].to_numpy(float))
        X[:, col["launch_share"]] = (comp["n_kernels"].to_numpy(float) * LAUNCH_MS
                                     / comp["kernels_ms"].to_numpy(float))
        for c in KERNEL_CLASSES:
            X[:, col[f"share_{c}"]] = comp[f"share_{c}"].to_numpy(float)
        mode = rows["mode"].astype(str).to_numpy()
        opt = rows["optimizer"].astype(str).to_numpy() if "optimizer" in rows else np.array([""])
        prec = rows["precision"].astype(str).to_numpy()
        X[:, col["mode=train"]] = mode == "train"
        X[:, col["optimizer=none"]] = (mode == "train") & (opt == "none")
        for p in PRECISIONS:
            X[:, col[f"precision={p}"]] = prec == p
        for i, key in enumerate(rows["device"].astype(str)):
            d = devs[key]
            tensor = d.peak_tflops("fp16") or d.peak_fp32_tflops
            X[i, col["log_tensor_over_fp32_peak"]] = math.log(tensor / d.peak_fp32_tflops)
            X[i, col["log_ridge_flop_per_byte"]] = math.log(d.peak_fp32_tflops * 1e3
                                                            / d.bandwidth_gbs)
            X[i, col["arch_year"]] = float(getattr(d, "arch_year", None) or 2018) - 2018
            X[i, col["vendor=amd"]] = str(d.vendor or "").lower() == "amd"
        X[:, col["log_batch"]] = np.log(rows["batch_size"].to_numpy(float))
        if not self.p("device_features"):
            # the device only through the kernel model: its columns are constant (unused)
            X[:, [col[c] for c in DEVICE_FEATURES]] = 0.0
        return X

    # ----------------------------------------------------------------------------- fit/predict
    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        if not train.plans:
            raise PerfcastError("crossdevice needs kernel plans: build the feature set with "
                                "plans=True (perfcast.labeled.feature_set)")
        comp = self.compose(train)
        y = train.target("time_ms")
        ok = np.isfinite(y) & ~comp["missing"].to_numpy(bool)
        if ok.sum() < 2:
            raise PerfcastError("crossdevice: fewer than 2 records with a label and a kernel plan")
        w = self._weights(train.rows[ok])
        self._fit_tensor_cores(comp[ok].reset_index(drop=True), y[ok], w)
        X = self.features(train, self._sums(comp))[ok]
        r = np.log(y[ok]) - X[:, 0]  # residual of the kernel sum, in log space
        # kept with the model (a few hundred rows × 20 numbers): few-shot adaptation refits the
        # correction on them plus the new device's records (:meth:`recalibrate`)
        self.train_X_, self.train_r_, self.train_w_ = X, r, w
        rows = train.rows[ok]
        groups = (rows["device"].astype(str) + "|" + rows.get(
            "source", pd.Series("", index=rows.index)).astype(str)).nunique()
        self.group_weight_ = float(np.sum(w)) / max(1, groups)  # total weight of one group
        self._fit_correction(X, r, w)

    def _fit_correction(self, X: np.ndarray, r: np.ndarray, w: np.ndarray) -> None:
        kind = self.p("correction")
        self.x_mean_ = np.average(X, axis=0, weights=w)
        self.x_std_ = np.sqrt(np.average((X - self.x_mean_) ** 2, axis=0, weights=w)) + 1e-9
        Z = (X - self.x_mean_) / self.x_std_
        self.z_min_, self.z_max_ = Z.min(axis=0), Z.max(axis=0)
        self.booster_ = None
        if kind == "none":
            self.coef_, self.intercept_ = np.zeros(X.shape[1]), 0.0
        elif kind == "ridge":
            self.intercept_ = float(np.average(r, weights=w))
            A = Z * np.sqrt(w)[:, None]
            b = (r - self.intercept_) * np.sqrt(w)
            self.coef_ = np.linalg.solve(A.T @ A + self.p("alpha") * np.eye(Z.shape[1]), A.T @ b)
        elif kind == "xgboost":
            import xgboost as xgb

            self.booster_ = xgb.train({"max_depth": int(self.p("xgb_depth")), "eta": 0.05,
                                       "subsample": 0.8, "nthread": 2, "seed": 0},
                                      xgb.DMatrix(Z, label=r, weight=w), int(self.p("xgb_rounds")))
            self.coef_, self.intercept_ = np.zeros(X.shape[1]), 0.0
        else:
            raise PerfcastError(f"crossdevice: unknown correction {kind!r} (ridge, xgboost, none)")
        self.history_.append({"records": int(len(r)),
                              "train_mape": float(np.mean(np.abs(np.exp(self._correct(Z) - r) - 1)))})

    def recalibrate(self, data: FeatureSet, *, targets: list[str] | None = None,
                    slope: bool | None = None) -> CrossDevicePredictor:
        """Few-shot adaptation to a device's own measurements: the correction is refitted on its
        training rows (kept with the model) plus ``data``'s records, which count together as
        :data:`SHOT_GROUP_WEIGHT` (device, source) groups of the training data (the kernel
        composition and ``η`` stay). A model saved without its training rows falls back to
        :meth:`Predictor.recalibrate` (``log y = a + b·log ŷ``)."""
        if getattr(self, "train_X_", None) is None:
            return super().recalibrate(data, targets=targets, slope=slope)
        comp = self._sums(self.compose(data))
        y = data.target("time_ms")
        ok = np.isfinite(y) & (y > 0) & np.isfinite(comp["kernels_ms"].to_numpy(float))
        if not ok.any():
            raise PerfcastError(f"{self.name}: no labeled record with a kernel plan to adapt to")
        Xs = self.features(data, comp)[ok]
        rs = np.log(y[ok]) - Xs[:, 0]
        ws = np.full(len(rs), self.group_weight_ * SHOT_GROUP_WEIGHT / len(rs))
        self._fit_correction(np.vstack([self.train_X_, Xs]), np.concatenate([self.train_r_, rs]),
                             np.concatenate([self.train_w_, ws]))
        self.calibration_ = {}
        self.trained_on_ = {**self.trained_on_, "adapted": {
            "records": int(ok.sum()),
            "devices": sorted(map(str, data.rows["device"].astype(str).unique()))}}
        return self

    def _weights(self, rows: pd.DataFrame) -> np.ndarray:
        if not self.p("balance"):
            return np.ones(len(rows))
        key = rows["device"].astype(str) + "|" + rows.get("source", pd.Series("", index=rows.index)).astype(str)
        counts = key.map(key.value_counts())
        return (1.0 / counts.to_numpy(float)) * len(rows) / key.nunique()

    def _correct(self, Z: np.ndarray) -> np.ndarray:
        c = self.intercept_ + Z @ self.coef_
        if getattr(self, "booster_", None) is not None:
            import xgboost as xgb

            c = c + self.booster_.predict(xgb.DMatrix(Z))
        return c

    def _predict(self, data: FeatureSet) -> np.ndarray:
        comp = self._sums(self.compose(data))
        X = self.features(data, comp)
        # outside the training range the correction is held at its edge: it must not
        # extrapolate (the kernel sum carries the scale)
        Z = np.clip((X - self.x_mean_) / self.x_std_, self.z_min_, self.z_max_)
        # never faster than physics: the kernels run one after another in eager PyTorch, so
        # the sum of their roofline bounds is a lower bound of the whole step
        return np.maximum(np.exp(X[:, 0] + self._correct(Z)),
                          comp["roofline_ms"].to_numpy(float))[:, None]

    # ----------------------------------------------------------------------------- state
    def _state(self):
        km = self._kernel_model()
        tensors = {f"kernels.{kc}": np.frombuffer(bytes(b.save_raw("json")), dtype=np.uint8).copy()
                   for kc, b in km.boosters_.items()}
        tensors.update({"x_mean": self.x_mean_, "x_std": self.x_std_, "coef": self.coef_,
                        "z_min": self.z_min_, "z_max": self.z_max_})
        if getattr(self, "train_X_", None) is not None:
            tensors.update({"train_X": self.train_X_, "train_r": self.train_r_,
                            "train_w": self.train_w_})
        if getattr(self, "booster_", None) is not None:
            tensors["booster"] = np.frombuffer(bytes(self.booster_.save_raw("json")),
                                               dtype=np.uint8).copy()
        return tensors, {"intercept": float(self.intercept_),
                         "group_weight": float(getattr(self, "group_weight_", 1.0)),
                         "tensor_cores": {"eta": self.eta_, "tau_ms": self.tau_},
                         "kernels": {"params": km.get_params(), "feature_names": km.feature_names_,
                                     "trained_on": km.trained_on_,
                                     "domain": getattr(km, "domain_", {})},
                         "features": list(CORRECTION_FEATURES)}

    def _set_state(self, tensors, state) -> None:
        from perfcast.predictors.kernels import KernelModel

        if list(state.get("features", [])) != list(CORRECTION_FEATURES):
            raise PerfcastError("crossdevice: saved with other correction features; retrain it")
        import xgboost as xgb

        cfg = state["kernels"]
        km = KernelModel(**{k: v for k, v in cfg["params"].items()
                            if k in KernelModel.default_params()})
        km.boosters_, km.feature_names_, km.trained_on_ = {}, {}, cfg.get("trained_on", {})
        km.domain_ = cfg.get("domain", {})
        tcs = state.get("tensor_cores") or {}
        self.eta_ = float(tcs.get("eta", TC_ETA_DEFAULT))
        self.tau_ = float(tcs.get("tau_ms", LAUNCH_MS))
        for key, raw in tensors.items():
            if key.startswith("kernels."):
                kc = key[len("kernels."):]
                km.boosters_[kc] = xgb.Booster()
                km.boosters_[kc].load_model(bytearray(raw.numpy().tobytes()))
                km.feature_names_[kc] = list(cfg["feature_names"][kc])
        self.kernel_model_ = km
        self.x_mean_ = tensors["x_mean"].numpy()
        self.x_std_ = tensors["x_std"].numpy()
        self.coef_ = tensors["coef"].numpy()
        self.z_min_, self.z_max_ = tensors["z_min"].numpy(), tensors["z_max"].numpy()
        self.train_X_ = tensors["train_X"].numpy() if "train_X" in tensors else None
        self.train_r_ = tensors["train_r"].numpy() if "train_r" in tensors else None
        self.train_w_ = tensors["train_w"].numpy() if "train_w" in tensors else None
        self.group_weight_ = float(state.get("group_weight", 1.0))
        self.intercept_ = float(state["intercept"])
        self.booster_ = None
        if "booster" in tensors:
            self.booster_ = xgb.Booster()
            self.booster_.load_model(bytearray(tensors["booster"].numpy().tobytes()))


__all__ = ["CORRECTION_FEATURES", "CrossDevicePredictor", "LAUNCH_MS"]
