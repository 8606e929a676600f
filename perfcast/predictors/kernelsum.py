"""``kernelsum`` — a step as the sum of its kernels, each at a learned fraction of this machine's
measured roofline: answers that scale with the model, the batch and the thread count.

Built for the one device we can measure (before it, tree models on 26 small CPU models answered
≈ 40 ms for every everyday model). The prediction is a non-negative combination of physical
work, so it can only grow with FLOPs, bytes and batch, and it extrapolates linearly beyond the
trained range instead of going flat::

    kernels    = KernelPlan.kernels(batch, mode, precision, optimizer)   (perfcast.features.kernels)
    per class c ∈ {gemm, conv1x1, conv, norm, softmax, elementwise, stream} and phase
    p ∈ {forward, backward (+ optimizer)}:
        F_cp = Σ FLOPs / P(threads)      [ms at the measured GEMM peak]
        M_cp = Σ bytes / B(threads)      [ms at the measured streaming bandwidth]
        N_cp = number of kernels
    time_ms    = t0 + Σ_cp  a_cp · F_cp + b_cp · M_cp + o_cp · N_cp        a, b, o, t0 ≥ 0

``P(t)`` and ``B(t)`` are this machine's sustained GFLOP/s and GB/s at ``t`` threads, measured by
:func:`perfcast.profiler.micro.measure_machine` (a few seconds) and stored inside the fitted
predictor (:attr:`machine_`): ``1 / a`` is a kernel class's achieved fraction of peak, ``o`` its
per-kernel dispatch cost. The coefficients are fitted by non-negative least squares on the
*relative* error (rows weighted by ``1 / y``), i.e. for MAPE.

An optional bounded correction (``correction="xgboost"``) multiplies the sum by
``exp(c)``, ``|c| ≤ max_correction``, learned from batch-free features of the model (FLOP share
per class, mode, threads, per-sample work); it cannot make the answer flat or non-monotone in
batch because none of its inputs moves with the batch.

Devices: any device for which a :class:`~perfcast.profiler.micro.MachineProfile` is given
(``machine``, see :class:`KernelSumPredictor`).

**This machine.** Answering, the terms are scaled by the ratio of this machine's probe to the
training machine's (:mod:`perfcast.predictors.kernelsum_probe`); ``perfcast calibrate`` wins.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.features.records import FeatureSet
from perfcast.features.table import Table
from perfcast.predictors import register_predictor
from perfcast.predictors.base import Predictor
from perfcast.predictors.kernelsum_probe import (
    MachineScaling,
    _column_kinds,
    _threads,
    local_dataset_reference,
)

#: Kernel classes priced separately (``conv1x1``: pointwise convolutions, a GEMM in disguise).
CLASSES = ("gemm", "conv1x1", "conv", "norm", "softmax", "elementwise", "stream")
PHASES = ("forward", "backward")
TERMS = ("compute", "memory", "launches")
#: The physics columns, in order: ``<class>.<phase>.<term>`` then ``step``.
COLUMNS: tuple[str, ...] = tuple(f"{c}.{p}.{t}" for c in CLASSES for p in PHASES
                                 for t in TERMS) + ("step",)
#: Op groups priced by the operator model (``ops`` mode), and its columns: forward and backward
#: time per group as the operator model predicts it, the roofline time of nodes it has no
#: model for, the optimizer's passes, node counts (dispatch) per phase, ``step``.
OP_GROUP_NAMES = ("conv", "dwconv", "gemm", "attention", "norm", "softmax", "reduce", "pool",
                  "copy", "elementwise")
OP_COLUMNS: tuple[str, ...] = (*(f"{g}.{p}" for g in OP_GROUP_NAMES for p in ("fwd", "bwd")),
                               "other.work", "optimizer.memory", "nodes.forward",
                               "nodes.backward", "step")
#: Operator-model terms per (graph, batch, mode, optimizer, threads, machine, operator model),
#: for this process (a leave-one-family-out evaluation prices each record once).
_OP_TERMS: dict[tuple, np.ndarray] = {}
#: The correction's features (batch-free), in order.
CORRECTION_FEATURES: tuple[str, ...] = (
    *(f"flop_share_{c}" for c in CLASSES), "log_gflop_per_sample", "log_kernels",
    "mode=train", "log_threads",
)


def group_sums(labels: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Per group ``0 … groups−1``, the sum of its ``values`` in row order with Kahan's
    compensation (NaN skipped) — the arithmetic of ``pandas``' group-by sum, so the totals
    are the same to the last bit without pandas."""
    labels = np.asarray(labels, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(labels, kind="stable")
    lab = labels[order]
    sizes = np.bincount(lab, minlength=groups)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pos = np.arange(len(lab)) - starts[lab]
    pad = np.zeros((groups, int(sizes.max()) if len(sizes) and len(lab) else 0))
    pad[lab, pos] = values[order]
    total, comp = np.zeros(groups), np.zeros(groups)
    for k in range(pad.shape[1]):
        v = pad[:, k]
        on = (k < sizes) & ~np.isnan(v)
        y = v - comp
        t = total + y
        c = (t - total) - y
        c = np.where(np.isnan(c), 0.0, c)  # an infinite value: no compensation (pandas #53606)
        comp = np.where(on, c, comp)
        total = np.where(on, t, total)
    return total


def kernel_terms(fs: FeatureSet) -> tuple[Table, Table]:
    """Per record: FLOPs (GFLOP), bytes (GB) and kernel count per (class, phase) — the
    machine-free part of :data:`COLUMNS` — and the records without a kernel plan (NaN), as
    light tables (:class:`~perfcast.features.table.Table`; no pandas)."""
    from perfcast.predictors.crossdevice import _kernel_frame, kernel_frame_work

    kf, missing = _kernel_frame(fs)
    n = len(fs)
    out: dict[str, np.ndarray] = {}
    if len(kf):
        flops, moved = kernel_frame_work(kf)
        kc = kf["kernel_class"].astype(str).to_numpy().copy()
        if "kernel" in kf.columns:
            pointwise = (kc == "conv") & (kf["kernel"].to_numpy(float) == 1)
            kc[pointwise] = "conv1x1"
        ph = np.where(kf["phase"].astype(str).to_numpy() == "forward", "forward", "backward")
        rec = kf["record"].to_numpy().astype(np.int64)
        for c in CLASSES:
            for p in PHASES:
                sel = (kc == c) & (ph == p)
                if not sel.any():
                    continue
                seen = np.bincount(rec[sel], minlength=n) > 0
                for k, v in (("gflop", flops), ("gb", moved)):
                    s = group_sums(rec[sel], v[sel], n) / 1e9
                    out[f"{c}.{p}.{k}"] = np.where(seen, s, 0.0)
                out[f"{c}.{p}.n"] = np.bincount(rec[sel], minlength=n).astype(np.float64)
    cols = {}
    for c in CLASSES:
        for p in PHASES:
            for k in ("gflop", "gb", "n"):
                col = f"{c}.{p}.{k}"
                cols[col] = out[col] if col in out else np.zeros(n)
                if missing:
                    cols[col] = cols[col].astype(np.float64)
                    cols[col][missing] = np.nan
    return Table(cols, length=n), Table({"record": np.asarray(missing, dtype=np.int64)},
                                        length=len(missing))


def _gflop(terms) -> np.ndarray:
    return terms[[f"{c}.{p}.gflop" for c in CLASSES for p in PHASES]].to_numpy(float).sum(axis=1)


@register_predictor
class KernelSumPredictor(MachineScaling, Predictor):
    """See the module docstring. Hyper-parameters: ``machine`` (``"auto"``: the profile
    ``perfcast calibrate`` measured (``machine-cpu.json`` in
    :func:`perfcast.paths.user_models_dir`), else the project dataset's; ``"local-dataset"``: the profile measured with the project's CPU
    dataset, ``cpu/machine.json`` in :func:`perfcast.paths.local_datasets_dir`; a
    :class:`~perfcast.profiler.micro.MachineProfile`, its dict or its JSON file), ``warm_start`` (refit starting from the fitted coefficients, pulled towards them
    with the weight of ``prior_records`` records: few-shot fine-tuning on another machine),
    ``correction`` (``"none"`` | ``"xgboost"``), ``max_correction`` (bound of the log
    correction), ``xgb_rounds``, ``xgb_depth``, ``ops`` (``None``: price kernels on the
    roofline, :data:`COLUMNS`; an operator-benchmark CSV of the machine or ``"local-dataset"``
    (``cpu/ops-t1.csv`` of the project's dataset): price every node with the
    :class:`~perfcast.predictors.opmodel.OpModel` fitted on it, :data:`OP_COLUMNS`),
    ``probe`` (``"auto"``: scale the answers to this machine by its probe when the model
    carries a reference probe; ``"off"``)."""

    name: ClassVar[str] = "kernelsum"
    extrapolates: ClassVar[bool] = True  # physics: work at learned rates
    supported_targets: ClassVar[tuple[str, ...]] = ("time_ms",)
    uses_graphs: ClassVar[bool] = False
    uses_plans: ClassVar[bool] = True
    state_format: ClassVar[str] = "numpy"  # coefficients and trees: no torch to answer

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {"machine": "auto", "correction": "xgboost", "max_correction": 0.3,
                "xgb_rounds": 150, "xgb_depth": 3, "warm_start": False, "prior_records": 20.0,
                "ops": None, "probe": "auto"}

    # ----------------------------------------------------------------------------- physics
    def _profile(self):
        from perfcast.devices.machine import MachineProfile

        if getattr(self, "machine_", None) is None:
            m = self.p("machine")
            if m == "auto":  # the user's measured profile, else the project dataset's
                from perfcast.paths import local_datasets_dir, user_models_dir

                for cand in (user_models_dir() / "machine-cpu.json",
                             local_datasets_dir() / "cpu" / "machine.json"):
                    if cand.exists():
                        m = str(cand)
                        break
                else:
                    raise PerfcastError("kernelsum: no machine profile — measure one with "
                                        "perfcast calibrate, or pass machine=")
            if isinstance(m, MachineProfile):
                self.machine_ = m
            elif isinstance(m, dict):
                self.machine_ = MachineProfile.from_dict(m)
            elif m == "local-dataset":  # measured with the project's CPU dataset
                from perfcast.paths import local_datasets_dir

                self.machine_ = MachineProfile.load(local_datasets_dir() / "cpu" / "machine.json")
            elif isinstance(m, str):
                self.machine_ = MachineProfile.load(m)
            else:
                raise PerfcastError(f"kernelsum: machine must be 'auto', 'local-dataset' or a machine "
                                    f"profile (object, dict or JSON file), "
                                    f"got {m!r}")
        return self.machine_

    def _columns(self) -> tuple[str, ...]:
        return OP_COLUMNS if self._uses_ops() else COLUMNS

    def _uses_ops(self) -> bool:
        return getattr(self, "op_model_", None) is not None or self.p("ops") is not None

    def _op_model(self):
        from perfcast.predictors.opmodel import OpModel, frame_from_bench

        if getattr(self, "op_model_", None) is None:
            import pandas as pd

            src = self.p("ops")
            if src == "local-dataset":
                from perfcast.paths import local_datasets_dir

                src = local_datasets_dir() / "cpu" / "ops-t1.csv"
            try:
                bench = pd.read_csv(src)
            except (OSError, ValueError) as exc:
                raise PerfcastError(f"kernelsum: operator benchmark {src} unreadable ({exc})") \
                    from None
            prof = self._profile()
            frames = []
            for t, part in bench.groupby("threads"):
                g, b = prof.at(int(t))
                frames.append(frame_from_bench(part, g, b))
            self.op_model_ = OpModel().fit(pd.concat(frames, ignore_index=True))
            self.op_trained_on_ = {"source": str(src), "nodes": len(bench)}
        return self.op_model_

    def _op_physics(self, fs: FeatureSet) -> np.ndarray:
        """The :data:`OP_COLUMNS` matrix: every node of every record priced by the operator
        model at the record's batch and threads."""
        return self._op_physics_split(fs, None)[0]

    def _op_physics_split(self, fs: FeatureSet,
                          floors: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
        """``(X, D)``: :meth:`_op_physics`'s matrix and, with ``floors`` (ms per forward and
        backward call of a tiny op on the machine the operator model was measured on), the part
        of each group column that is dispatch: per node ``min(time, floor)`` (zeros without
        ``floors``)."""
        from perfcast.features.kernels import OPTIMIZER_PASSES
        from perfcast.predictors.opmodel import node_frame

        prof = self._profile()
        th = _threads(fs.rows, max(prof.gflops))
        recs = fs.rows.to_dict("records")
        frames, owners = [], []
        n_nodes = np.zeros(len(fs))
        X = np.zeros((len(fs), len(OP_COLUMNS)))
        D = np.zeros((len(fs), len(OP_COLUMNS)))
        col = {c: j for j, c in enumerate(OP_COLUMNS)}
        # memo per process: the operator terms depend on the graph, batch, mode, optimizer,
        # threads, the machine and the operator model only (not on the NNLS fit)
        tag = (json.dumps(prof.to_dict(), sort_keys=True),
               json.dumps(getattr(self, "op_trained_on_", {}), sort_keys=True), floors)
        k_cols = len(OP_COLUMNS)
        keys: list[tuple | None] = []
        for i, rec in enumerate(recs):
            gk = rec.get("graph_key")
            keys.append((gk, int(rec["batch_size"]), str(rec.get("mode")),
                         str(rec.get("optimizer")), int(th[i]), tag)
                        if isinstance(gk, str) else None)
        todo = [i for i, k in enumerate(keys) if k is None or k not in _OP_TERMS]
        for i, k in enumerate(keys):
            if k is not None and k in _OP_TERMS:
                X[i], D[i] = _OP_TERMS[k][:k_cols], _OP_TERMS[k][k_cols:]
        for i in todo:
            rec = recs[i]
            plan = fs.plans[fs.graph_index[i]] if fs.plans else None
            if plan is None:
                X[i] = np.nan
                D[i] = np.nan
                continue
            g, b = prof.at(int(th[i]))
            nodes = list(plan.nodes_at(int(rec["batch_size"])))
            frames.append(node_frame(nodes, g, b))
            owners.append(np.full(len(nodes), i))
            n_nodes[i] = len(nodes)
            train = str(rec.get("mode")) == "train"
            X[i, col["nodes.forward"]] = len(nodes)
            if train:
                X[i, col["nodes.backward"]] = len(nodes)
                opt = rec.get("optimizer") if isinstance(rec.get("optimizer"), str) else None
                passes = OPTIMIZER_PASSES.get(opt or "sgd-momentum", 2)
                X[i, col["optimizer.memory"]] = passes * 3 * 4.0 * plan.params / (b * 1e9) * 1e3
        if frames:
            nf = Table.concat(frames)
            own = np.concatenate(owners)
            fwd, bwd = self._op_model().predict(nf)
            train = np.array([str(r.get("mode")) == "train" for r in recs])[own]
            work = nf["work_ms"].to_numpy(float)
            grp = nf["group"].to_numpy()
            modeled = np.isfinite(fwd)
            for gname in OP_GROUP_NAMES:
                m = (grp == gname) & modeled
                np.add.at(X[:, col[f"{gname}.fwd"]], own[m], fwd[m])
                mb = m & train & np.isfinite(bwd)
                np.add.at(X[:, col[f"{gname}.bwd"]], own[mb], bwd[mb])
                if floors is not None:
                    np.add.at(D[:, col[f"{gname}.fwd"]], own[m], np.minimum(fwd[m], floors[0]))
                    np.add.at(D[:, col[f"{gname}.bwd"]], own[mb],
                              np.minimum(bwd[mb], floors[1]))
            other = ~modeled
            np.add.at(X[:, col["other.work"]], own[other], work[other] * np.where(train[other],
                                                                                  3.0, 1.0))
        X[:, col["step"]] = 1.0
        for i in todo:
            if keys[i] is not None:
                _OP_TERMS[keys[i]] = np.concatenate([X[i], D[i]])
        return X, D

    def physics(self, fs: FeatureSet) -> tuple[np.ndarray, Table]:
        """``(X, terms)``: the physics matrix — :data:`COLUMNS` (ms at peak, ms at bandwidth,
        kernel counts, 1) or, with an operator model, :data:`OP_COLUMNS` — and the machine-free
        :func:`kernel_terms`."""
        terms, _ = kernel_terms(fs)
        if self._uses_ops():
            return self._op_physics(fs), terms
        prof = self._profile()
        default = max(prof.gflops)
        th = _threads(fs.rows, default)
        peaks = np.array([prof.at(int(t)) for t in th], dtype=np.float64).reshape(-1, 2)
        X = np.zeros((len(fs), len(COLUMNS)))
        j = 0
        for c in CLASSES:
            for p in PHASES:
                X[:, j] = terms[f"{c}.{p}.gflop"].to_numpy(float) / peaks[:, 0] * 1e3
                X[:, j + 1] = terms[f"{c}.{p}.gb"].to_numpy(float) / peaks[:, 1] * 1e3
                X[:, j + 2] = terms[f"{c}.{p}.n"].to_numpy(float)
                j += 3
        X[:, -1] = 1.0
        return X, terms

    def correction_features(self, fs: FeatureSet, terms) -> np.ndarray:
        """The :data:`CORRECTION_FEATURES` matrix (nothing in it moves with the batch size
        except through per-sample normalisation)."""
        b = fs.rows["batch_size"].to_numpy(float)
        fl = {c: sum(terms[f"{c}.{p}.gflop"].to_numpy(float) for p in PHASES) for c in CLASSES}
        total = sum(fl.values()) + 1e-12
        n = sum(terms[f"{c}.{p}.n"].to_numpy(float) for c in CLASSES for p in PHASES)
        Z = np.zeros((len(fs), len(CORRECTION_FEATURES)))
        for j, c in enumerate(CLASSES):
            Z[:, j] = fl[c] / total
        k = len(CLASSES)
        Z[:, k] = np.log(total / b + 1e-9)
        Z[:, k + 1] = np.log(n + 1.0)
        Z[:, k + 2] = fs.rows["mode"].astype(str).to_numpy() == "train"
        Z[:, k + 3] = np.log(_threads(fs.rows, max(self._profile().gflops)))
        return Z

    # ----------------------------------------------------------------------------- fit/predict
    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        from scipy.optimize import nnls

        if not train.plans:
            raise PerfcastError("kernelsum needs kernel plans: build the feature set with "
                                "plans=True (perfcast.labeled.feature_set)")
        fresh = getattr(self, "machine_", None) is None  # the profile comes from the params
        X, terms = self.physics(train)
        y = train.target("time_ms")
        ok = np.isfinite(y) & (y > 0) & np.isfinite(X).all(axis=1)
        if ok.sum() < 2:
            raise PerfcastError("kernelsum: fewer than 2 records with a label and a kernel plan")
        A = X[ok] / y[ok, None]  # relative error: (X·w − y) / y
        scale = np.sqrt((A ** 2).sum(axis=0))
        scale[scale == 0] = 1.0
        As, b = A / scale, np.ones(ok.sum())
        old = getattr(self, "coef_", None) if self.p("warm_start") else None
        if old is not None:  # pull towards the fitted coefficients (in the scaled space)
            lam = np.sqrt(float(self.p("prior_records")) / len(self._columns()))
            As = np.vstack([As, lam * np.eye(len(self._columns()))])
            b = np.concatenate([b, lam * old * scale])
        w, _ = nnls(As, b, maxiter=50 * A.shape[1])
        self.coef_ = w / scale
        self.booster_ = None
        base = X[ok] @ self.coef_
        if self.p("correction") == "xgboost":
            import xgboost as xgb

            Z = self.correction_features(train, terms)[ok]
            r = np.clip(np.log(y[ok] / base), -self.p("max_correction"), self.p("max_correction"))
            self.booster_ = xgb.train({"max_depth": int(self.p("xgb_depth")), "eta": 0.05,
                                       "subsample": 0.8, "nthread": 2, "seed": 0},
                                      xgb.DMatrix(Z, label=r), int(self.p("xgb_rounds")))
        elif self.p("correction") != "none":
            raise PerfcastError(f"kernelsum: unknown correction {self.p('correction')!r} "
                                f"(none, xgboost)")
        b = train.rows["batch_size"].to_numpy(float)[ok]
        gflop = _gflop(terms)[ok]
        self.range_ = {"batch_size": [float(b.min()), float(b.max())],
                       "gflop": [float(gflop.min()), float(gflop.max())]}
        pred = self._combine(X, terms, train)[ok]  # the physics of the fit, not computed again
        self.history_.append({"records": int(ok.sum()),
                              "train_mape": float(np.mean(np.abs(pred / y[ok] - 1)))})
        # the probe of the machine the labels were measured on: the project dataset's own
        # records say it; any other fit (perfcast calibrate's, a user's) has none — not scaled
        self.reference_probe_ = None
        if fresh and self.p("machine") == "local-dataset" and self.p("ops") == "local-dataset":
            self.reference_probe_ = local_dataset_reference()

    def _predict(self, data: FeatureSet) -> np.ndarray:
        return self._answer(data, scale=True)[:, None]

    def _answer(self, data: FeatureSet, scale: bool) -> np.ndarray:
        """ms per record; with ``scale``, scaled to this machine by its probe
        (:meth:`probe_scaling`) when the model carries a reference probe."""
        info = self._scalings(data) if scale else {}
        if not any("ratios" in v for v in info.values()):
            X, terms = self.physics(data)
            return self._combine(X, terms, data)
        ref = next(v["ref"] for v in info.values() if "ratios" in v)
        if self._uses_ops():
            bwd = ref.dispatch_bwd_us if np.isfinite(ref.dispatch_bwd_us) else 0.0
            terms, _ = kernel_terms(data)
            X, D = self._op_physics_split(data, (ref.dispatch_fwd_us / 1e3, bwd / 1e3))
        else:
            X, terms = self.physics(data)
            D = np.zeros_like(X)
        kinds = _column_kinds(self._columns())
        th = _threads(data.rows, max(self._profile().gflops))
        W, Dm = np.ones_like(X), np.ones_like(X)
        for i, t in enumerate(th):
            r = info.get(int(t), {}).get("ratios")
            if r is None:
                continue
            W[i] = [r[work] for work, _ in kinds]
            Dm[i] = [r[disp] for _, disp in kinds]
        return self._combine((X - D) * W + D * Dm, terms, data)

    def _combine(self, X: np.ndarray, terms, data: FeatureSet) -> np.ndarray:
        """ms per record from its physics matrix: the fitted sum, times the bounded correction."""
        out = X @ self.coef_
        if self.booster_ is not None:  # an xgboost.Booster or a numpy TreeEnsemble
            c = self.booster_.inplace_predict(self.correction_features(data, terms))
            m = self.p("max_correction")
            out = out * np.exp(np.clip(c, -m, m))
        return out

    def out_of_range(self, data: FeatureSet) -> list[str]:
        """Why each request lies outside the training range (batch size, GFLOP per step), one
        string per record ("" when inside). Reads the kernel terms only (no pricing)."""
        terms, _ = kernel_terms(data)
        gflop = _gflop(terms)
        b = data.rows["batch_size"].to_numpy(float)
        out = []
        for bi, gi in zip(b, gflop):
            why = []
            lo, hi = self.range_["batch_size"]
            if not lo <= bi <= hi:
                why.append(f"batch {bi:g} outside the trained {lo:g}–{hi:g}")
            lo, hi = self.range_["gflop"]
            if not lo <= gi <= hi:
                why.append(f"{gi:.3g} GFLOP per step outside the trained {lo:.3g}–{hi:.3g}")
            out.append("; ".join(why))
        return out

    def efficiencies(self):
        """The fitted coefficients as physics: per (class, phase) the achieved fraction of the
        GEMM peak (``1 / a``) and of the bandwidth (``1 / b``) and the per-kernel cost (µs); with
        an operator model, the coefficient of each column (≈ 1: the operator model's time is
        the whole model's). A ``pandas.DataFrame``."""
        import pandas as pd

        if self._uses_ops():
            return pd.DataFrame({"column": list(OP_COLUMNS), "coefficient": self.coef_})
        rows = []
        for i, c in enumerate(CLASSES):
            for k, p in enumerate(PHASES):
                a, bb, o = self.coef_[(i * len(PHASES) + k) * 3:(i * len(PHASES) + k) * 3 + 3]
                rows.append({"class": c, "phase": p,
                             "fraction_of_peak": (1 / a) if a > 0 else None,
                             "fraction_of_bandwidth": (1 / bb) if bb > 0 else None,
                             "us_per_kernel": o * 1e3})
        return pd.DataFrame(rows)

    # ----------------------------------------------------------------------------- state
    def _state(self):
        tensors = {"coef": self.coef_}
        if self.booster_ is not None:
            tensors["booster"] = np.frombuffer(bytes(self.booster_.save_raw("json")),
                                               dtype=np.uint8).copy()
        state = {"machine": self._profile().to_dict(), "columns": list(self._columns()),
                 "correction_features": list(CORRECTION_FEATURES), "range": self.range_}
        if getattr(self, "reference_probe_", None) is not None:
            state["reference_probe"] = self.reference_probe_
        if self._uses_ops():
            op_tensors, op_state = self._op_model().state()
            tensors.update(op_tensors)
            state["op_model"] = {**op_state, "trained_on": self.op_trained_on_}
        return tensors, state

    def _set_state(self, tensors, state) -> None:
        from perfcast.devices.machine import MachineProfile

        self.op_model_ = None
        if "op_model" in state:
            from perfcast.predictors.opmodel import OpModel

            self.op_model_ = OpModel.from_state(tensors, state["op_model"])
            self.op_trained_on_ = state["op_model"].get("trained_on", {})
        if list(state.get("columns", [])) != list(self._columns()) or list(
                state.get("correction_features", [])) != list(CORRECTION_FEATURES):
            raise PerfcastError("kernelsum: saved with other features; retrain it")
        self.coef_ = np.asarray(tensors["coef"].numpy() if hasattr(tensors["coef"], "numpy")
                                else tensors["coef"], dtype=np.float64)
        self.machine_ = MachineProfile.from_dict(state["machine"])
        self.reference_probe_ = state.get("reference_probe")
        self.range_ = state["range"]
        self.booster_ = None
        if "booster" in tensors:
            from perfcast.trees import load_booster

            raw = tensors["booster"]
            raw = raw.numpy() if hasattr(raw, "numpy") else raw
            self.booster_ = load_booster(np.asarray(raw, dtype=np.uint8))


__all__ = [
    "CLASSES",
    "COLUMNS",
    "CORRECTION_FEATURES",
    "OP_COLUMNS",
    "KernelSumPredictor",
    "kernel_terms",
]
