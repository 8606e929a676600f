"""Static-feature baselines (no graph learning): TraPPM's ``mlp`` and ``xgboost`` (TraPPM's
GBoost baseline, §V-E, and the thesis' XGBoost predictor, ch. 6.5).

Both read only the record's static vector (:data:`perfcast.features.records.STATIC_NAMES`)
and learn ``log(target)``.

``mlp`` — two fully connected layers (ReLU, dropout 0.05) and a linear output layer, one output
per target (masked MSE, so records missing a label still teach the other targets); Adam,
lr 1e-3, 100 epochs, as in TraPPM. Features standardised and targets standardised in log space
with training statistics only. ``valid`` (optional) → early stopping on the validation loss
(best epoch restored). ``warm_start=True`` continues training a fitted/loaded model on new data
with its scalers unchanged (fine-tuning on a user's measurements).

``xgboost`` — one booster per target on ``log(target)``. With ``grid=True`` a small grid
(:data:`DEFAULT_GRID`: depth × row subsample × column subsample; the number of rounds is chosen
by early stopping inside the cross-validation) is searched with **GroupKFold over model
families inside the training data**: the choice never sees a test split and rewards
generalisation to unseen families. The TraPPM grid (500–2000 trees of depth 10–50 at lr 1e-3)
is far too slow for a 2-core laptop, and lr 0.1 with early-stopped rounds is the thesis' optimum
(ch. 6.5: lr 0.1, depth 8). Boosters are saved as XGBoost's own JSON (a uint8 tensor per
target), no pickle. ``warm_start=True`` adds ``warm_start_rounds`` boosting rounds to the loaded
boosters on the new data.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.predictors import register_predictor
from perfcast.predictors.base import BestEpoch, FeatureScaler, Predictor, TargetScaler
from perfcast.features.records import FeatureSet
from perfcast.trees import as_xgboost


@contextlib.contextmanager
def _torch_threads(n: int):
    """Run with ``n`` intra-op threads (restored after). A tiny MLP is fastest on one thread,
    and on a loaded 2-core machine two OpenMP threads made it ~100x slower (spin-waiting)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _warm_targets(pred: Predictor, fitted: list[str] | None) -> list[str]:
    """For ``warm_start``: the predictor keeps its output layout (``fitted``); the targets of the
    new data must be among them. Returns the new data's targets and restores ``targets_``."""
    new = list(pred.targets_)
    if fitted is None:
        return new
    missing = [t for t in new if t not in fitted]
    if missing:
        raise PerfcastError(f"{pred.name}: warm start on target(s) {missing} the fitted model "
                            f"does not predict ({', '.join(fitted)})")
    pred.targets_ = list(fitted)
    return new


def group_kfold(groups: np.ndarray, n_splits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Deterministic GroupKFold (sklearn's rule: largest groups first, each into the currently
    smallest fold). Returns ``[(train_idx, test_idx)]``."""
    groups = np.asarray(groups).astype(str)
    uniq, inv, counts = np.unique(groups, return_inverse=True, return_counts=True)
    n_splits = min(int(n_splits), len(uniq))
    if n_splits < 2:
        raise PerfcastError("group k-fold needs at least two groups")
    fold_of_group = np.zeros(len(uniq), dtype=np.int64)
    sizes = np.zeros(n_splits, dtype=np.int64)
    for g in np.argsort(-counts, kind="stable"):
        f = int(np.argmin(sizes))
        fold_of_group[g] = f
        sizes[f] += counts[g]
    fold = fold_of_group[inv]
    return [(np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(n_splits)]


# ---------------------------------------------------------------------------------------------
# MLP
# ---------------------------------------------------------------------------------------------

def _build_mlp(n_in: int, hidden: int, layers: int, n_out: int, dropout: float):
    import torch.nn as nn

    mods: list = []
    d = n_in
    for _ in range(int(layers)):
        mods += [nn.Linear(d, int(hidden)), nn.ReLU(), nn.Dropout(float(dropout))]
        d = int(hidden)
    mods.append(nn.Linear(d, n_out))
    return nn.Sequential(*mods)


@register_predictor
class MLPPredictor(Predictor):
    """TraPPM's baseline MLP on static features (module doc)."""

    uses_graphs = False
    #: answers with numpy from the saved weights (no torch); training builds the torch module
    state_format = "numpy"

    name = "mlp"

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {"hidden": 256, "layers": 2, "dropout": 0.05, "lr": 1e-3, "weight_decay": 0.0,
                "epochs": 100, "batch_size": 64, "loss": "mse", "huber_delta": 1.0,
                "patience": 20, "seed": 0, "n_jobs": 1, "warm_start": False}

    def _loss(self, pred, z, mask):
        import torch
        import torch.nn.functional as F

        if self.p("loss") == "mse":
            el = (pred - z) ** 2
        elif self.p("loss") == "huber":
            el = F.huber_loss(pred, z, reduction="none", delta=float(self.p("huber_delta")))
        else:
            raise PerfcastError(f"mlp: loss must be 'mse' or 'huber', got {self.p('loss')!r}")
        el = torch.where(mask, el, torch.zeros_like(el))
        return el.sum() / mask.sum().clamp_min(1)

    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        with _torch_threads(self.p("n_jobs")):
            self._fit_net(train, valid, progress)

    def _fit_net(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        import torch

        warm = bool(self.p("warm_start")) and (getattr(self, "net_", None) is not None
                                               or getattr(self, "weights_", None) is not None)
        fit_targets = _warm_targets(self, self.fitted_targets_ if warm else None)
        if warm and getattr(self, "net_", None) is None:
            self.net_ = self._net_from_weights()
        x = train.static.astype(np.float32)
        y = self._label_matrix(train, fit_targets)
        if not warm:
            self.x_scaler_ = FeatureScaler.fit(x)
            self.y_scaler_ = TargetScaler.fit(y)
        z = self.y_scaler_.transform(y)
        keep = np.isfinite(z).any(axis=1)
        if not keep.any():
            raise PerfcastError("mlp: no record with a positive label")
        xt = torch.from_numpy(self.x_scaler_.transform(x[keep]))
        zt = torch.from_numpy(np.nan_to_num(z[keep]).astype(np.float32))
        mt = torch.from_numpy(np.isfinite(z[keep]))
        if valid is not None and len(valid):
            yv = self._label_matrix(valid, fit_targets)
            zv = self.y_scaler_.transform(yv)
            kv = np.isfinite(zv).any(axis=1)
            vx = torch.from_numpy(self.x_scaler_.transform(valid.static.astype(np.float32)[kv]))
            vz = torch.from_numpy(np.nan_to_num(zv[kv]).astype(np.float32))
            vm = torch.from_numpy(np.isfinite(zv[kv]))
            has_valid = bool(kv.any())
        else:
            has_valid = False
        epochs, bs, patience = int(self.p("epochs")), max(1, int(self.p("batch_size"))), \
            int(self.p("patience"))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.p("seed")))
            if not warm:
                self.net_ = _build_mlp(x.shape[1], self.p("hidden"), self.p("layers"),
                                       len(self.targets_), self.p("dropout"))
            net = self.net_
            opt = torch.optim.Adam(net.parameters(), lr=float(self.p("lr")),
                                   weight_decay=float(self.p("weight_decay")))
            gen = torch.Generator().manual_seed(int(self.p("seed")))
            keep = BestEpoch(patience, tol=1e-6, snapshot=lambda m: {
                k: v.detach().clone() for k, v in m.state_dict().items()})
            n = len(xt)
            for ep in range(epochs):
                net.train()
                perm = torch.randperm(n, generator=gen)
                tot, cnt = 0.0, 0
                for s in range(0, n, bs):
                    idx = perm[s:s + bs]
                    loss = self._loss(net(xt[idx]), zt[idx], mt[idx])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    tot += float(loss.detach()) * len(idx)
                    cnt += len(idx)
                rec = {"epoch": ep + 1, "train_loss": tot / max(cnt, 1)}
                if has_valid:
                    net.eval()
                    with torch.no_grad():
                        vl = float(self._loss(net(vx), vz, vm))
                    rec["valid_loss"] = vl
                    keep.update(vl, net)
                self.history_.append(rec)
                if progress:
                    progress(ep + 1, epochs)
                if keep.stop:
                    break
            keep.restore(net)
        net.eval()
        self.weights_ = None  # the module holds them now
        self.fitted_targets_ = list(self.targets_)

    def _weights(self) -> dict[str, np.ndarray]:
        """The network's parameters by state-dict name (``0.weight`` …), as numpy arrays."""
        if getattr(self, "net_", None) is not None:
            return {k: v.detach().cpu().numpy() for k, v in self.net_.state_dict().items()}
        return self.weights_

    def _net_from_weights(self):
        """The torch module of the loaded weights (to continue training them)."""
        import torch

        net = _build_mlp(int(len(self.x_scaler_.mean)), self.p("hidden"), self.p("layers"),
                         len(self.targets_), self.p("dropout"))
        net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in self.weights_.items()})
        net.eval()
        return net

    def _predict(self, data: FeatureSet) -> np.ndarray:
        """The forward pass in numpy (float32, as the module computes it): Linear → ReLU (→
        dropout, the identity at inference) per hidden layer, then the output Linear."""
        w = self._weights()
        h = self.x_scaler_.transform(data.static.astype(np.float32)).astype(np.float32)
        n_linear = int(self.p("layers")) + 1
        for i in range(n_linear):
            k = 3 * i  # Sequential indices: Linear, ReLU, Dropout per hidden layer
            h = h @ np.asarray(w[f"{k}.weight"], np.float32).T + np.asarray(w[f"{k}.bias"],
                                                                              np.float32)
            if i < n_linear - 1:
                h = np.maximum(h, np.float32(0.0))
        return self.y_scaler_.inverse(h.astype(np.float64))

    def _state(self):
        tensors = {f"net.{k}": v for k, v in self._weights().items()}
        tensors.update({"x_mean": self.x_scaler_.mean, "x_std": self.x_scaler_.std,
                        "y_mean": self.y_scaler_.mean, "y_std": self.y_scaler_.std})
        return tensors, {"n_in": int(len(self.x_scaler_.mean))}

    def _set_state(self, tensors, state) -> None:
        self.x_scaler_ = FeatureScaler(np.asarray(tensors["x_mean"]), np.asarray(tensors["x_std"]))
        self.y_scaler_ = TargetScaler(np.asarray(tensors["y_mean"]), np.asarray(tensors["y_std"]))
        want = {f"{3 * i}.{p}" for i in range(int(self.p("layers")) + 1) for p in ("weight", "bias")}
        weights = {k[4:]: np.asarray(v) for k, v in tensors.items() if k.startswith("net.")}
        if set(weights) != want or int(state["n_in"]) != len(self.x_scaler_.mean):
            raise PerfcastError(f"mlp: saved weights {sorted(weights)} do not match its "
                                f"configuration ({self.p('layers')} hidden layers); retrain it")
        self.net_ = None
        self.weights_ = weights
        self.fitted_targets_ = list(self.targets_)


# ---------------------------------------------------------------------------------------------
# XGBoost
# ---------------------------------------------------------------------------------------------

#: Grid searched by ``xgboost`` (``grid=True``); rounds come from early stopping in the CV.
DEFAULT_GRID: dict[str, list] = {"max_depth": [3, 5, 8], "subsample": [0.7, 1.0],
                                 "colsample_bytree": [0.6, 1.0]}


@register_predictor
class XGBoostPredictor(Predictor):
    """XGBoost on static features, one booster per log target, family-grouped grid search
    (module doc)."""

    uses_graphs = False
    state_format = "numpy"  # boosters answer through perfcast.trees (no XGBoost)

    name = "xgboost"

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {"grid": True, "grid_space": None, "cv_folds": 3, "max_rounds": 1000,
                "early_stopping_rounds": 30, "n_estimators": 500, "learning_rate": 0.1,
                "max_depth": 6, "subsample": 0.8, "colsample_bytree": 0.8,
                "min_child_weight": 1.0, "reg_lambda": 1.0, "n_jobs": 1, "seed": 0,
                "warm_start": False, "warm_start_rounds": 50, "target_space": "log",
                "memory_baseline": False, "operator_features": False}

    @property
    def uses_plans(self) -> bool:  # type: ignore[override]
        """Kernel plans are needed for ``operator_features`` only."""
        return bool(self.p("operator_features"))

    def _x(self, data: FeatureSet) -> np.ndarray:
        """The design matrix: the static vector, and with ``operator_features`` the
        operator-level composition of the record on its device
        (:func:`~perfcast.predictors.crossdevice.composition_features`: log Σ kernel GPU time,
        log Σ roofline, log kernel count, the share of the kernels per class)."""
        x = data.static.astype(np.float32)
        if not self.p("operator_features"):
            return x
        from perfcast.predictors.crossdevice import composition_features

        if not data.plans:
            raise PerfcastError("xgboost: operator_features needs kernel plans (build the "
                                "feature set with plans=True)")
        comp = composition_features(data)
        extra = [np.log(comp["gpu_ms"]), np.log(comp["roofline_ms"]), np.log(comp["n_kernels"]),
                 *(comp[c] for c in comp.columns if c.startswith("kernel_share_"))]
        return np.column_stack([x, *(np.asarray(e, dtype=np.float32) for e in extra)])

    def _baseline(self, data: FeatureSet, target: str) -> np.ndarray | None:
        """``memory_baseline``: log(simulated tensors + runtime offset) per record, the boosting
        start for ``memory_mb`` (the trees learn the log ratio to it, which — unlike a tree's
        output — carries over to batches beyond the training data). The offset (MiB) is the
        median of measured − simulated over the training records with the smallest simulations
        (``offset_mb_``, set in fit)."""
        if not (self.p("memory_baseline") and target == "memory_mb"
                and self.p("target_space") == "log"):
            return None
        names = list(data.static_names)
        if "log1p_memsim_mb" not in names:
            raise PerfcastError("xgboost: memory_baseline needs the memory-simulation feature "
                                "(build the feature set with memsim=True)")
        sim = np.expm1(data.static[:, names.index("log1p_memsim_mb")].astype(np.float64))
        return np.log(np.maximum(sim + self.offset_mb_, 1.0))

    def _fit_offset(self, train: FeatureSet) -> None:
        self.offset_mb_ = 0.0
        if not (self.p("memory_baseline") and "memory_mb" in self.targets_):
            return
        names = list(train.static_names)
        if "log1p_memsim_mb" not in names:
            return
        sim = np.expm1(train.static[:, names.index("log1p_memsim_mb")].astype(np.float64))
        y = train.target("memory_mb")
        m = np.isfinite(y) & (y > 0) & (sim > 0)
        if m.sum() >= 5:
            small = m & (sim <= np.quantile(sim[m], 0.05))
            self.offset_mb_ = float(max(0.0, np.median(y[small] - sim[small])))

    def _fwd(self, y: np.ndarray) -> np.ndarray:
        """Label transform: ``log`` (relative error; default) or ``linear`` (ablation)."""
        return np.log(y) if self.p("target_space") == "log" else y

    def _inv(self, z: np.ndarray) -> np.ndarray:
        return np.exp(z) if self.p("target_space") == "log" else np.maximum(z, 1e-6)

    def _base_params(self) -> dict[str, Any]:
        return {"objective": "reg:squarederror", "eval_metric": "rmse", "tree_method": "hist",
                "learning_rate": float(self.p("learning_rate")),
                "max_depth": int(self.p("max_depth")), "subsample": float(self.p("subsample")),
                "colsample_bytree": float(self.p("colsample_bytree")),
                "min_child_weight": float(self.p("min_child_weight")),
                "reg_lambda": float(self.p("reg_lambda")), "nthread": int(self.p("n_jobs")),
                "seed": int(self.p("seed"))}

    def _search(self, x, ly, groups, target, base=None
                ) -> tuple[dict[str, Any], int, dict[str, Any]]:
        """Grid search for one target; returns ``(params, rounds, report)``."""
        import xgboost as xgb

        space = self.p("grid_space") or DEFAULT_GRID
        folds = group_kfold(groups, int(self.p("cv_folds")))
        dtrain = xgb.DMatrix(x, label=ly, nthread=int(self.p("n_jobs")), base_margin=base)
        keys = sorted(space)
        best = None
        t0 = time.perf_counter()
        for combo in itertools.product(*(space[k] for k in keys)):
            params = {**self._base_params(), **dict(zip(keys, combo))}
            res = xgb.cv(params, dtrain, num_boost_round=int(self.p("max_rounds")), folds=folds,
                         early_stopping_rounds=int(self.p("early_stopping_rounds")),
                         metrics="rmse", seed=int(self.p("seed")), as_pandas=False,
                         verbose_eval=False)
            score = float(res["test-rmse-mean"][-1])
            rounds = len(res["test-rmse-mean"])
            if best is None or score < best[0] - 1e-12:
                best = (score, params, rounds)
        score, params, rounds = best
        report = {"target": target, "cv_rmse_log": score, "rounds": rounds,
                  "folds": len(folds), "families": int(len(np.unique(groups))),
                  "combos": int(np.prod([len(space[k]) for k in keys])),
                  "seconds": round(time.perf_counter() - t0, 2),
                  "chosen": {k: params[k] for k in keys}}
        return params, rounds, report

    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        import xgboost as xgb

        warm = bool(self.p("warm_start")) and bool(getattr(self, "boosters_", None))
        fit_targets = _warm_targets(self, list(self.boosters_) if warm else None)
        if not warm:
            self.boosters_: dict[str, Any] = {}
            self.chosen_: dict[str, Any] = {}
            self._fit_offset(train)
        x_all = self._x(train)
        groups_all = train.families() if "family" in train.rows.columns else \
            np.zeros(len(train), dtype=str)
        nthread = int(self.p("n_jobs"))
        for j, t in enumerate(fit_targets):
            y = train.target(t)
            m = np.isfinite(y) & (y > 0)
            if not m.any():
                raise PerfcastError(f"xgboost: no positive label for {t}")
            x, ly, groups = x_all[m], self._fwd(y[m]), groups_all[m]
            base = self._baseline(train, t)
            base = base[m] if base is not None else None
            dtrain = xgb.DMatrix(x, label=ly, nthread=nthread, base_margin=base)
            evals, dvalid = [], None
            if valid is not None and len(valid):
                yv = valid.target(t)
                mv = np.isfinite(yv) & (yv > 0)
                if mv.any():
                    bv = self._baseline(valid, t)
                    dvalid = xgb.DMatrix(self._x(valid)[mv],
                                         label=self._fwd(yv[mv]), nthread=nthread,
                                         base_margin=bv[mv] if bv is not None else None)
                    evals = [(dvalid, "valid")]
            rec: dict[str, Any] = {"target": t}
            if warm:
                info = self.chosen_.get(t, {})
                params = {**self._base_params(), **info.get("params", {})}
                bst = xgb.train(params, dtrain, num_boost_round=int(self.p("warm_start_rounds")),
                                xgb_model=as_xgboost(self.boosters_[t]))
                info = {**info, "warm_rounds": int(info.get("warm_rounds", 0))
                        + int(self.p("warm_start_rounds"))}
                rec["warm_rounds"] = int(self.p("warm_start_rounds"))
            else:
                n_groups = len(np.unique(groups))
                if self.p("grid") and n_groups >= 2:
                    params, rounds, report = self._search(x, ly, groups, t, base)
                    rec.update({k: v for k, v in report.items() if k != "chosen"})
                    es = None
                else:
                    params, rounds, report = self._base_params(), int(self.p("n_estimators")), {}
                    if self.p("grid"):
                        report = {"skipped": f"grid search needs >= 2 families, got {n_groups}"}
                    es = int(self.p("early_stopping_rounds")) if evals else None
                bst = xgb.train(params, dtrain, num_boost_round=rounds, evals=evals,
                                early_stopping_rounds=es, verbose_eval=False)
                if es is not None:
                    best_it = int(bst.best_iteration)
                    bst = bst[: best_it + 1]
                    rounds = best_it + 1
                tuned = {k: params[k] for k in ("learning_rate", "max_depth", "subsample",
                                                 "colsample_bytree", "min_child_weight",
                                                 "reg_lambda")}
                info = {"params": tuned, "rounds": int(rounds), "search": report}
                rec["rounds"] = int(rounds)
            if dvalid is not None:
                pv = bst.predict(dvalid)
                rec["valid_rmse_log"] = float(np.sqrt(np.mean((pv - dvalid.get_label()) ** 2)))
            self.boosters_[t] = bst
            self.chosen_[t] = info
            self.history_.append(rec)
            if progress:
                progress(j + 1, len(fit_targets))

    def _predict(self, data: FeatureSet) -> np.ndarray:
        x = self._x(data)
        out = np.full((len(data), len(self.targets_)), np.nan)
        for j, t in enumerate(self.targets_):
            bst = self.boosters_[t]
            bst.set_param({"nthread": int(self.p("n_jobs"))})
            base = self._baseline(data, t)
            z = bst.inplace_predict(x, base_margin=base) if base is not None else \
                bst.inplace_predict(x)
            out[:, j] = self._inv(z.astype(np.float64))
        return out

    def _state(self):
        tensors = {f"booster.{t}": np.frombuffer(bytes(b.save_raw("json")), dtype=np.uint8).copy()
                   for t, b in self.boosters_.items()}
        return tensors, {"chosen": self.chosen_, "offset_mb": self.offset_mb_}

    def _set_state(self, tensors, state) -> None:
        from perfcast.trees import load_booster

        self.boosters_ = {}
        for t in self.targets_:
            key = f"booster.{t}"
            if key not in tensors:
                raise PerfcastError(f"xgboost: saved predictor has no booster for {t}")
            self.boosters_[t] = load_booster(np.asarray(tensors[key], dtype=np.uint8))
        self.chosen_ = dict(state.get("chosen", {}))
        self.offset_mb_ = float(state.get("offset_mb", 0.0))


__all__ = ["DEFAULT_GRID", "MLPPredictor", "XGBoostPredictor", "group_kfold"]
