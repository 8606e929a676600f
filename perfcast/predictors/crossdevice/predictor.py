"""The ``crossdevice`` predictor: the composed kernel times, scaled once by a correction learned
device-free (:class:`CrossDevicePredictor`), and the composition as features for other
predictors (:func:`composition_features`)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from perfcast._memo import Memo
from perfcast.errors import PerfcastError
from perfcast.features.kernels import KERNEL_CLASSES
from perfcast.features.records import FeatureSet
from perfcast.features.table import Table
from perfcast.predictors import register_predictor
from perfcast.predictors.base import Predictor
from perfcast.predictors.crossdevice.composition import (
    _group_codes,
    _scale_for,
    kernel_frame,
    queue_time,
)
from perfcast.predictors.crossdevice.pricing import _device, price_kernels
from perfcast.workload import PRECISIONS

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


#: Compositions by (graph key, batch, mode, precision, optimizer, tf32, device) with the shipped
#: operator model, for this process (bounded: the oldest go first).
_COMPOSED = Memo(20_000)


@register_predictor
class CrossDevicePredictor(Predictor):
    """A record's time from its kernels' GPU times
    (:func:`~perfcast.predictors.crossdevice.pricing.price_kernels`), queued behind the host's
    dispatch (:func:`queue_time`) and corrected once by what kernels do not see:
    ``T = queue_time(kernels, h, s)`` with ``s = exp(g(x))``.

    The correction scales the kernels' time by what the composition misses (fusion, cuDNN
    algorithm choice, the backward pass the lowering derives, recomputation). ``x``
    (:data:`CORRECTION_FEATURES`) is mode, optimizer, precision, TF32, what kinds of kernel the
    model has, the share of its kernels per class and on tensor cores (which the GPU's
    architecture decides, not its numbers) — counts, which neither the batch nor the sequence
    changes —, its size in reference units (work on a fixed reference GPU, kernel count, batch)
    with ``g`` non-decreasing in the sizes — and of the device only its board power (``g``
    non-increasing in it: low-power cards sustain a smaller share of their peak) and vendor. So:

    * a GPU at least as good in every spec number is never predicted slower (every kernel time
      is non-increasing in every number, ``g`` in the power);
    * more work (batch, sequence, layers) is never predicted faster;
    * the answer stays inside ``[Σ max(c, m), Σ K·(max(c, m) + launch)]`` (:meth:`bounds`).

    The correction scales only the kinds of work it learned from (:func:`correction_regime`:
    the precision, and whether the model has convolutions; :attr:`regimes_`). Another kind is
    answered by the kernels' GPU time and the dispatch queue alone (``s = 1``) and says so
    (:meth:`out_of_range`): the shipped model learned half precision from CNNs alone, and their
    ``s`` mispriced an H100's fp16 LLM layer operators (``reports/crossdevice/small_work.md``).
    Spec fields the composition needs are read through :func:`perfcast.devices.derive.complete`:
    a missing TF32 / bf16 peak is derived from the architecture with the rule said in ``notes``
    (:meth:`device_notes`); nothing is silently defaulted. Kernel rows are a light
    :class:`~perfcast.features.table.Table`: composing an answer needs neither pandas nor torch.

    Hyper-parameters: ``kernel_model`` (``"shipped"`` or a
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
