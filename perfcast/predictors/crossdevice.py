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
from perfcast.features.kernels import KERNEL_CLASSES, Kernel
from perfcast.features.records import FeatureSet
from perfcast.predictors import register_predictor
from perfcast.predictors.base import Predictor
from perfcast.workload import PRECISIONS

#: Per-kernel launch time used to express a model's kernel count as time (a feature, not a
#: prediction): CUDA launch + PyTorch eager dispatch.
LAUNCH_MS = 0.005
#: Correction features, in order.
CORRECTION_FEATURES: tuple[str, ...] = (
    "log_kernels_ms", "log_roofline_ms", "launch_share",
    *(f"share_{c}" for c in KERNEL_CLASSES),
    "mode=train", "optimizer=none", *(f"precision={p}" for p in PRECISIONS),
    "log_tensor_over_fp32_peak", "log_ridge_flop_per_byte", "arch_year", "vendor=amd",
    "log_batch",
)


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
    GEMMs at the FP32 SIMT peak (PyTorch's matmul default); everything else at FP32."""
    if kernel_class in ("gemm", "conv"):
        if precision == "amp":
            return "fp16"
        if precision in ("fp16", "bf16"):
            return precision
        if kernel_class == "conv" and device.peak_tflops("tf32"):
            return "tf32"
    return "fp32"


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


def price_kernels(km, kf: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(ms, roofline_ms)`` per kernel row of :func:`_kernel_frame`: the operator model's
    utilization (learned on fp32 kernels: the shape of the kernel on the device) applied to the
    kernel's roofline at its own precision and peak (:func:`_peak_precision`); stream kernels
    as element-wise kernels over their bytes (a bandwidth-bound estimate)."""
    from perfcast.devices import get_device
    from perfcast.predictors.kernels import kernel_work, min_flops_factor, roofline_ms

    f = kf.rename(columns=_CONV_COLUMNS).copy()
    stream = (f["kernel_class"] == "stream").to_numpy()
    if stream.any():
        n = np.maximum(1.0, f.loc[stream, "stream_bytes"].to_numpy(float)
                       / (2.0 * f.loc[stream, "dtype_bytes"].to_numpy(float)))
        f.loc[stream, "op"] = "addu"
        f.loc[stream, "kernel_class"] = "elementwise"
        f.loc[stream, "H"] = float(_STREAM_H)
        f.loc[stream, "B"] = np.maximum(1.0, np.round(n / _STREAM_H))
    u = km.predict_utilization(f)
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


def _kernel_frame(fs: FeatureSet) -> tuple[pd.DataFrame, list[int]]:
    """Every kernel of every record (``record`` column) — records without a plan are skipped
    (their index is returned)."""
    rows, missing = [], []
    recs = fs.rows.to_dict("records")
    for i, rec in enumerate(recs):
        plan = fs.plans[fs.graph_index[i]] if fs.plans else None
        if plan is None:
            missing.append(i)
            continue
        mode = str(rec.get("mode") or "infer")
        opt = rec.get("optimizer") if isinstance(rec.get("optimizer"), str) else None
        for k in plan.kernels(int(rec["batch_size"]), mode=mode,
                              precision=str(rec["precision"]), optimizer=opt):
            rows.append(_kernel_row(k, i, str(rec["device"]), str(rec["precision"])))
    return pd.DataFrame(rows), missing


def _kernel_row(k: Kernel, record: int, device: str, precision: str) -> dict[str, Any]:
    row = {"record": record, "op": k.op, "kernel_class": k.kernel_class, "phase": k.phase,
           "device_key": device, "precision": precision, "dtype_bytes": k.dtype_bytes,
           "stream_bytes": k.stream_bytes, "stream_flops": k.stream_flops,
           "graph_op": k.graph_op}
    row.update(k.dims)
    return row


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
        return {"kernel_model": "shipped", "correction": "ridge", "alpha": 1.0,
                "xgb_rounds": 200, "xgb_depth": 3, "balance": True}

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
            keys = [tuple(map(str, r)) for r in fs.rows.reindex(columns=cols).itertuples(
                index=False, name=None)]
            if all(k in _COMPOSED for k in keys):
                return pd.DataFrame([_COMPOSED[k] for k in keys])
        out = self._compose(fs)
        if keys is not None:
            for k, row in zip(keys, out.to_dict("records")):
                _COMPOSED[k] = row
        return out

    def _compose(self, fs: FeatureSet) -> pd.DataFrame:
        kf, missing = _kernel_frame(fs)
        out = pd.DataFrame(index=np.arange(len(fs)))
        if len(kf):
            kf["ms"], kf["roofline_ms"] = price_kernels(self._kernel_model(), kf)
            by = kf.groupby("record")
            out["kernels_ms"] = by["ms"].sum()
            out["roofline_ms"] = by["roofline_ms"].sum()
            out["n_kernels"] = by.size()
            per = kf.pivot_table(index="record", columns="kernel_class", values="ms",
                                 aggfunc="sum", fill_value=0.0)
            for c in KERNEL_CLASSES:
                out[f"share_{c}"] = (per[c] if c in per else 0.0) / out["kernels_ms"]
        for c in ("kernels_ms", "roofline_ms", "n_kernels", *(f"share_{c}" for c in
                                                              KERNEL_CLASSES)):
            if c not in out:
                out[c] = np.nan
        out.loc[missing, "kernels_ms"] = np.nan
        return out

    def features(self, fs: FeatureSet, comp: pd.DataFrame) -> np.ndarray:
        """The :data:`CORRECTION_FEATURES` matrix."""
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
        return X

    # ----------------------------------------------------------------------------- fit/predict
    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        if not train.plans:
            raise PerfcastError("crossdevice needs kernel plans: build the feature set with "
                                "plans=True (perfcast.labeled.feature_set)")
        comp = self.compose(train)
        y = train.target("time_ms")
        ok = np.isfinite(y) & np.isfinite(comp["kernels_ms"].to_numpy(float))
        if ok.sum() < 2:
            raise PerfcastError("crossdevice: fewer than 2 records with a label and a kernel plan")
        X = self.features(train, comp)[ok]
        r = np.log(y[ok]) - X[:, 0]  # residual of the kernel sum, in log space
        w = self._weights(train.rows[ok])
        kind = self.p("correction")
        self.x_mean_ = np.average(X, axis=0, weights=w)
        self.x_std_ = np.sqrt(np.average((X - self.x_mean_) ** 2, axis=0, weights=w)) + 1e-9
        Z = (X - self.x_mean_) / self.x_std_
        self.z_min_, self.z_max_ = Z.min(axis=0), Z.max(axis=0)
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
        self.history_.append({"records": int(ok.sum()),
                              "train_mape": float(np.mean(np.abs(np.exp(self._correct(Z) - r) - 1)))})

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
        comp = self.compose(data)
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
        if getattr(self, "booster_", None) is not None:
            tensors["booster"] = np.frombuffer(bytes(self.booster_.save_raw("json")),
                                               dtype=np.uint8).copy()
        return tensors, {"intercept": float(self.intercept_),
                         "kernels": {"params": km.get_params(), "feature_names": km.feature_names_,
                                     "trained_on": km.trained_on_},
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
        self.intercept_ = float(state["intercept"])
        self.booster_ = None
        if "booster" in tensors:
            self.booster_ = xgb.Booster()
            self.booster_.load_model(bytearray(tensors["booster"].numpy().tobytes()))


__all__ = ["CORRECTION_FEATURES", "CrossDevicePredictor", "LAUNCH_MS"]
