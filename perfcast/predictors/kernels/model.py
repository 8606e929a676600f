"""KernelModel: per kernel class, the kernel's GPU time as the physical base times a factor
learned on the kernel's shape, never below the roofline; fitted with XGBoost, saved as
``config.json`` + XGBoost's JSON per class, answered by numpy trees."""

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
from perfcast.predictors.kernels.features import (
    _conv_as_gemm,
    kernel_features,
    kernel_times,
    reference_ms,
)
from perfcast.predictors.kernels.gputime import (
    GPU_TIME_FALLBACK,
    OVERLAP_CLASSES,
    _base,
    _fit_base,
    _gpu_times,
)
from perfcast.predictors.kernels.work import (
    CLASS_DIMS,
    KERNEL_CLASSES,
    OP_CLASS,
    WINOGRAD_GAIN,
    _device,
    kernel_class_of,
)

#: A measured kernel is GPU-bound — a training row — when its latency is above this multiple
#: of the 1st percentile of its class on its GPU (:attr:`KernelModel.floors_`): NeuSight's
#: harness times each operator from the host, so a small kernel reads as the host's dispatch
#: time, not as the kernel's.
GPU_BOUND_FACTOR = 3.0
#: Version of the feature definitions; a saved model with another version is refused.
FEATURE_VERSION = "kernels-4"
FORMAT_VERSION = "1"
CONFIG_FILE = "config.json"


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
    LLM layer's 2-byte norms better across GPUs but worsens two whole-model held-out figures
    (RTX 3090 leave-one-GPU-out, L4 leave-newest-out), so it does not ship; both are compared by
    ``benchmarks/crossdevice_small_work.py`` in ``reports/crossdevice/small_work.md``).

    The operator measurements are PyTorch 2.1 fp32: PyTorch does not use TF32 for matmul by
    default, and the A100 80GB convolution rows ran only FP32 SIMT kernels (``ampere_sgemm_*``,
    ``*_scudnn_*``, ``ampere_gcgemm_*``, ``implicit/precomputed_convolve_sgemm``; no
    ``xmma`` / ``tensorop`` / ``tf32`` kernel) — so the FP32 peak applies everywhere, and
    :meth:`predict_ms` refuses another precision. Earlier versions learned the utilization from
    tile waves per SM and the intensity over the ridge point: as accurate on NeuSight's
    leave-one-GPU-out, but a GPU with more SMs at the same peak could come out slower, and a
    model constrained monotone in every device-relative feature was less accurate on the
    aligned test GEMMs (``reports/crossdevice/kernels.md``).

    The GPU-time constants (:meth:`fit_gpu_time`, :mod:`~perfcast.predictors.kernels.gputime`)
    give every class its ``τ`` and price the kernels the operator measurements never ran:
    tensor-core GEMMs and convolutions, and the 2-byte norms and element-wise kernels
    (:meth:`gpu_time_covers`; :func:`perfcast.predictors.crossdevice.price_kernels`).

    Estimator contract in the spirit of :mod:`perfcast.predictors.base`: ``__init__`` only
    stores hyper-parameters; ``fit`` learns one XGBoost booster per kernel class (on a
    ``pandas.DataFrame``); fitted attributes end in ``_``; :meth:`save` writes ``config.json`` +
    ``<class>.json`` (XGBoost's own JSON model format, never pickle) and :meth:`load` reads them
    back.
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
        from perfcast.paths import read_dir_config

        path = Path(path)
        cfg = read_dir_config(path, CONFIG_FILE, "kernel model")
        return cls.from_config(cfg, {kc: str(path / f"{kc}.json")
                                     for kc in cfg.get("classes", [])}, origin=str(path))

    def __repr__(self) -> str:
        ps = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({ps})"
