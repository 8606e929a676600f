"""Intervals by regime with a locally-adaptive width (issue 42).

A request falls in one of four **regimes** for the model answering it: its device is among the
model's training devices or not, its model family among the families of the model's training
records or not (:func:`regime_name`; the family is judged torch-free, by the model's name or its
:func:`stem`). Each regime is calibrated on held-out residuals that mimic it (leave-one-GPU-out,
leave-family-out, both, another model of a trained family: ``benchmarks/uncertainty_regimes.py``).

The width is **locally adaptive**: the conformal score of a held-out record is its centred log
residual ``r − c`` (``r = log(actual / predicted)``) divided by an estimated difficulty ``σ(x)``
(:class:`Difficulty`: a ridge regression of ``log(|r − c| + ε)`` on what the request says about
itself — its distance to the training architectures, unseen op classes, octaves of batch and
input outside the trained range, the GPU's distance to the trained GPUs, log batch, mode,
precision, transformer or not, and the regime). On a trained GPU, each ``device|mode|precision``
stratum has its own centre ``c`` (the median residual of its held-out records) and scale offset
of σ, both shrunk toward zero with few records; elsewhere ``c = 0``. The interval of a request
is ``ŷ·exp(c + σ(x)·q_lo) … ŷ·exp(c + σ(x)·q_hi)`` with ``q_lo, q_hi`` the two one-sided
split-conformal quantiles of ``(r − c) / σ`` in its regime (Mondrian by regime): narrow where
the model has been reliable, wide where it has not.

The **unusual-request flag** is ``σ(x) ≥ threshold`` (the threshold maximizes F1 for "APE >
25 %" on the calibration records): the same number that widens the interval raises the flag,
so a flagged request's interval is wider than every unflagged one of its regime and stratum. A
flagged request's quantiles are hulled with those of the flagged calibration records (their
conditional coverage). A request whose features lie beyond every calibration record is flagged
too, but its difficulty does not extrapolate: every feature is clipped to the calibration range
(a GPU farther than every calibrated held-out GPU gets the difficulty of the farthest one), and
no floor is added — on the nested held-out splits a floor at the hardest tenth's σ made those
records' intervals 8.8× wide (cross-device; 2.2× without it) to raise their 90 % coverage from
84 % to 92 % (``reports/uncertainty/regimes.md``, "Requests beyond the calibration data"); the
flag is the warning. The distance of a GPU is unsigned: split into the part where the GPU is faster than its
nearest trained GPU and the part where it is slower, the nested held-out residuals give the
faster part the (small) positive coefficient and the slower part none, so a newer GPU is not
treated as easier than the data say.

Everything is numbers and strings in the calibration JSON (no pickle); nothing here imports
torch or pandas.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfcast.uncertainty.conformal import conformal_bounds

#: "A large error" for the unusual-request flag: APE above this.
FLAG_APE = 0.25
#: ε of ``log(|r| + ε)`` in the difficulty regression (a 1 % error is as easy as a 0 % one).
EPS = 0.01
#: Ridge penalty of the difficulty regression (standardized features).
RIDGE = 3.0
#: A regime needs this many calibration records for its own quantiles; fewer: pooled ones
#: (hulled with its own when it has any).
MIN_REGIME = 30
#: Flagged calibration records needed for the flagged hull.
MIN_FLAGGED_CAL = 20
#: Shrinkage (in records) of a seen stratum's own centre and scale toward the pooled ones.
SHRINK = 20.0
#: Features whose coefficient may not be negative (farther never means easier).
DISTANCES = ("arch", "new_ops", "batch_oct", "input_oct", "device_dist")
FEATURES = ("arch", "new_ops", "batch_oct", "input_oct", "device_dist", "log2_batch", "train",
            "fp32", "half", "transformer", "device_unseen", "family_unseen", "both_unseen")
REGIMES = ("device-seen/family-seen", "device-seen/family-unseen",
           "device-unseen/family-seen", "device-unseen/family-unseen")
#: Prefixes of timm / torchvision names that are not the family (weights' origin).
_NOT_STEMS = {"tf", "tv", "gluon", "legacy", "ig", "ssl", "swsl", "hf", "timm", "torchvision"}


def precision_class(precision: str) -> str:
    """``fp32`` (and TF32), ``amp`` (mixed), ``half`` (pure fp16 / bf16 / lower)."""
    p = str(precision).lower()
    return "fp32" if p in ("fp32", "tf32") else "amp" if p == "amp" else "half"


def stratum_of(device: str, mode: str, precision: str) -> str:
    return f"{device}|{mode}|{precision}"


def regime_name(device_seen: bool, family_seen: bool) -> str:
    return (f"device-{'seen' if device_seen else 'unseen'}/"
            f"family-{'seen' if family_seen else 'unseen'}")


def stem(spec: str) -> str:
    """A torch-free family key of a model spec: its kind and the first alphabetic token of its
    name that is not a weights prefix (``timm:seresnext26d_32x4d`` → ``timm:seresnext``,
    ``hf:meta-llama/Llama-2-7b-hf`` → ``hf:llama``)."""
    kind, _, name = str(spec).partition(":")
    if not name:
        kind, name = "", kind
    name = name.split("/")[-1].lower()
    toks = [t for t in re.split(r"[^a-z]+", name) if t]
    toks = [t for t in toks if t not in _NOT_STEMS] or toks
    kind = {"tv": "torchvision"}.get(kind, kind)
    return f"{kind}:{toks[0] if toks else name}"


def feature_vector(parts: dict[str, float], batch: float, mode: str, precision: str,
                   transformer: bool, regime: str) -> np.ndarray:
    """The difficulty features of one request (order: :data:`FEATURES`)."""
    du, fu = "device-unseen" in regime, "family-unseen" in regime
    return np.array([min(float(parts.get("arch", 0.0)), 50.0), float(parts.get("new_ops", 0.0)),
                     float(parts.get("batch_oct", 0.0)), float(parts.get("input_oct", 0.0)),
                     min(float(parts.get("device_dist", 0.0)), 50.0),
                     math.log2(max(1.0, float(batch or 1))), float(mode == "train"),
                     float(precision == "fp32"), float(precision_class(precision) == "half"),
                     float(bool(transformer)), float(du), float(fu),
                     float(du and fu)], dtype=np.float64)


@dataclass
class Difficulty:
    """``σ(x) = exp(intercept + coef · (clip(x) − mean) / std)``: the expected |log residual|
    (geometric mean) of a request with features ``x`` (:data:`FEATURES`), features clipped to
    the calibration range ``[x_min, x_max]``."""

    intercept: float
    coef: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    x_min: np.ndarray
    x_max: np.ndarray

    @classmethod
    def fit(cls, X: np.ndarray, r: np.ndarray, ridge: float = RIDGE) -> Difficulty:
        X = np.asarray(X, np.float64)
        y = np.log(np.abs(np.asarray(r, np.float64)) + EPS)
        mean, std = X.mean(axis=0), X.std(axis=0)
        live = std > 1e-9
        std = np.where(live, std, 1.0)
        Z = (X - mean) / std
        active = live.copy()
        dist = np.array([f in DISTANCES for f in FEATURES])
        coef = np.zeros(X.shape[1])
        for _ in range(X.shape[1]):  # drop distance features that come out negative, refit
            A = Z[:, active]
            yc = y - y.mean()
            w = np.linalg.solve(A.T @ A + ridge * np.eye(A.shape[1]), A.T @ yc) \
                if A.shape[1] else np.zeros(0)
            coef = np.zeros(X.shape[1])
            coef[active] = w
            neg = active & dist & (coef < 0)
            if not neg.any():
                break
            active &= ~neg
        coef[~active] = 0.0
        return cls(intercept=float(y.mean()), coef=coef, mean=mean, std=std,
                   x_min=X.min(axis=0), x_max=X.max(axis=0))

    def log_sigma(self, X: np.ndarray) -> np.ndarray:
        X = np.clip(np.atleast_2d(np.asarray(X, np.float64)), self.x_min, self.x_max)
        return self.intercept + ((X - self.mean) / self.std) @ self.coef

    def sigma(self, X: np.ndarray) -> np.ndarray:
        return np.exp(self.log_sigma(X))

    def beyond(self, x: np.ndarray) -> list[str]:
        """Distance features of ``x`` beyond every calibration record (a tolerance of 5 %)."""
        x = np.asarray(x, np.float64)
        return [f for i, f in enumerate(FEATURES)
                if f in DISTANCES and x[i] > self.x_max[i] * 1.05 + 1e-6]

    def to_json(self) -> dict[str, Any]:
        r = lambda a: np.round(np.asarray(a, np.float64), 6).tolist()  # noqa: E731
        return {"features": list(FEATURES), "intercept": round(self.intercept, 6),
                "coef": r(self.coef), "mean": r(self.mean), "std": r(self.std),
                "x_min": r(self.x_min), "x_max": r(self.x_max)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Difficulty:
        if list(d.get("features") or FEATURES) != list(FEATURES):
            raise ValueError("difficulty features changed: rebuild the calibration file")
        a = lambda k: np.asarray(d[k], np.float64)  # noqa: E731
        return cls(float(d["intercept"]), a("coef"), a("mean"), a("std"), a("x_min"), a("x_max"))


def _f1_threshold(sig: np.ndarray, large: np.ndarray) -> float | None:
    """The σ threshold (flag ``σ ≥ t``) of best F1 for ``large``; ``None`` without both
    classes."""
    sig, large = np.asarray(sig, np.float64), np.asarray(large, bool)
    if not large.any() or large.all():
        return None
    best, best_t = -1.0, None
    for t in np.unique(sig):
        f = sig >= t
        tp = float((f & large).sum())
        prec, rec = tp / max(1, f.sum()), tp / large.sum()
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        if f1 > best + 1e-12:
            best, best_t = f1, float(t)
    return best_t


@dataclass
class RegimeCalibration:
    """One model's adaptive calibration: its :class:`Difficulty`, per regime the sorted
    normalized residuals ``r / σ`` (all, and the flagged ones), the flag threshold on σ, and
    what decides the regime of a request — the training devices and the families (``names``:
    model name → family of every training record's model; ``stems``: their :func:`stem`)."""

    difficulty: Difficulty
    scores: dict[str, np.ndarray]
    flagged_scores: dict[str, np.ndarray]
    threshold: float | None
    devices: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    stems: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    #: seen strata (``device|mode|precision`` of a trained GPU): the shrunk median log residual
    #: (``shift``, the interval's centre) and log-scale offset of σ (``scale``) of their records
    shift: dict[str, float] = field(default_factory=dict)
    scale: dict[str, float] = field(default_factory=dict)
    #: ``stem``: a model whose name's stem is a trained one's counts as a seen family; ``name``:
    #: only the trained models themselves (chosen per model by how often the stem rule calls a
    #: held-out family unseen: ``benchmarks/uncertainty_regimes.py``)
    family_rule: str = "stem"

    @staticmethod
    def _centre(X, r, strata, seen) -> tuple[Difficulty, dict[str, float], dict[str, float],
                                             np.ndarray, np.ndarray]:
        """Seen strata's shrunk median residual (the centre), the difficulty model of the
        centred residuals, the strata's shrunk scale offsets; the centre and log σ of every
        record."""
        shift, scale = {}, {}
        ctr = np.zeros(len(r))
        keys = [] if strata is None else sorted(set(strata[seen].tolist()))
        for k in keys:
            m = seen & (strata == k)
            shift[k] = float(m.sum() / (m.sum() + SHRINK) * np.median(r[m]))
            ctr[m] = shift[k]
        diff = Difficulty.fit(X, r - ctr)
        ls = diff.log_sigma(X)
        res = np.log(np.abs(r - ctr) + EPS) - ls
        for k in keys:
            m = seen & (strata == k)
            scale[k] = float(m.sum() / (m.sum() + SHRINK) * (np.median(res[m]) - np.median(res)))
            ls[m] += scale[k]
        return diff, shift, scale, ctr, ls

    @staticmethod
    def _apply(diff, shift, scale, X, strata, seen) -> tuple[np.ndarray, np.ndarray]:
        ls = diff.log_sigma(X)
        if strata is None:
            return np.zeros(len(X)), ls
        ctr = np.array([shift.get(k, 0.0) if o else 0.0 for k, o in zip(strata, seen)])
        ls = ls + np.array([scale.get(k, 0.0) if o else 0.0 for k, o in zip(strata, seen)])
        return ctr, ls

    @classmethod
    def fit(cls, X: np.ndarray, r: np.ndarray, regimes, *, strata=None, precisions=None,
            devices=(), names=None, family_rule: str = "stem",
            flag_ape: float = FLAG_APE) -> RegimeCalibration:
        """From held-out records: features ``X`` (:func:`feature_vector`), log residuals ``r``
        and their regime names. The σ a record's score is divided by is cross-fitted (five
        interleaved parts: the difficulty model of the other four), so no score uses its own
        residual; the stored :class:`Difficulty` is fitted on every record."""
        X, r = np.asarray(X, np.float64), np.asarray(r, np.float64)
        regimes = np.asarray(regimes, dtype=object)
        strata = None if strata is None else np.asarray(strata, dtype=object)
        ok = np.isfinite(r) & np.isfinite(X).all(axis=1)
        X, r, regimes = X[ok], r[ok], regimes[ok]
        strata = None if strata is None else strata[ok]
        precisions = None if precisions is None else np.asarray(precisions, dtype=object)[ok]
        seen = np.char.startswith(regimes.astype(str), "device-seen")
        diff, shift_all, scale_all, _, _ = cls._centre(X, r, strata, seen)
        sig, ctr = np.empty(len(r)), np.zeros(len(r))
        parts = np.arange(len(r)) % 5
        for k in range(5):  # cross-fitted: no record's score uses its own residual
            te, tr = parts == k, parts != k
            st_tr = None if strata is None else strata[tr]
            st_te = None if strata is None else strata[te]
            if te.any() and tr.sum() > X.shape[1]:
                d, sh, sc, _, _ = cls._centre(X[tr], r[tr], st_tr, seen[tr])
            else:
                d, sh, sc = diff, shift_all, scale_all
            c, ls = cls._apply(d, sh, sc, X[te], st_te, seen[te])
            ctr[te], sig[te] = c, np.exp(ls)
        s = (r - ctr) / sig
        large = np.abs(1 - np.exp(-r)) > flag_ape
        thr = _f1_threshold(sig, large)
        flagged = sig >= thr if thr is not None else np.zeros(len(r), bool)
        scores, fscores, counts = {}, {}, {}
        pcls = np.array([precision_class(p) for p in precisions], dtype=object) \
            if precisions is not None else None
        for g in REGIMES:
            m = regimes == g
            counts[g] = int(m.sum())
            scores[g] = np.sort(s[m])
            fscores[g] = np.sort(s[m & flagged])
            for c in ("fp32", "amp", "half") if pcls is not None else ():
                mc = m & (pcls == c)
                if mc.sum() >= MIN_REGIME and mc.sum() < m.sum():
                    scores[f"{g}|{c}"] = np.sort(s[mc])
                    counts[f"{g}|{c}"] = int(mc.sum())
        scores["*"], fscores["*"] = np.sort(s), np.sort(s[flagged])
        names = dict(names or {})
        return cls(difficulty=diff, scores=scores, flagged_scores=fscores, threshold=thr,
                   devices=sorted(devices), names=names,
                   stems=sorted({stem(n) for n in names}),
                   counts=counts,
                   shift=shift_all, scale=scale_all, family_rule=family_rule)

    # -- the regime of a request -------------------------------------------------------------
    def family_seen(self, spec: str) -> bool:
        """The model is one of the training records', or its :func:`stem` is one of theirs
        (the timm module a name belongs to is not known without importing timm; how often the
        stem agrees with the module on held-out families, and the coverage with regimes picked
        this way: ``reports/uncertainty/regimes.md``)."""
        name = str(spec)
        if name in self.names:
            return True
        if self.family_rule == "stem" or name.startswith("hf:"):
            return stem(name) in set(self.stems)
        return False

    def regime(self, device: str | None, spec: str) -> str:
        dev_seen = device is None or not self.devices or device in self.devices
        return regime_name(dev_seen, self.family_seen(spec))

    # -- bounds ------------------------------------------------------------------------------
    def _quantiles(self, regime: str, coverage: float, flagged: bool,
                   precision: str | None = None) -> tuple[float, float]:
        own = self.scores.get(regime, np.zeros(0))
        if precision is not None:  # Mondrian by precision class where it has the records
            own = self.scores.get(f"{regime}|{precision_class(precision)}", own)
        pooled = self.scores["*"]
        lo, hi = conformal_bounds(own if len(own) >= MIN_REGIME else pooled, coverage)
        if 0 < len(own) < MIN_REGIME:  # a thin regime: never narrower than its own records say
            a, b = conformal_bounds(own, coverage)
            if math.isfinite(a) and math.isfinite(b):
                lo, hi = min(lo, a), max(hi, b)
        if flagged:
            f = self.flagged_scores.get(regime, np.zeros(0))
            f = f if len(f) >= MIN_FLAGGED_CAL else self.flagged_scores["*"]
            if len(f) >= MIN_FLAGGED_CAL:
                a, b = conformal_bounds(f, coverage)
                lo, hi = min(lo, a), max(hi, b)
        return lo, hi

    def bounds(self, x: np.ndarray, regime: str, coverage: float,
               stratum: str | None = None, precision: str | None = None) -> dict[str, Any]:
        """``q_lo, q_hi`` (log bounds of ``actual / predicted``), σ, the flag and why;
        ``stratum`` (``device|mode|precision``) of a device-seen request its centre and scale."""
        seen = regime.startswith("device-seen") and stratum is not None
        ctr = self.shift.get(stratum, 0.0) if seen else 0.0
        sig = float(np.exp(self.difficulty.log_sigma(x)[0]
                           + (self.scale.get(stratum, 0.0) if seen else 0.0)))
        beyond = self.difficulty.beyond(x)  # σ used the clipped features: no extrapolation
        flagged = bool(beyond) or (self.threshold is not None and sig >= self.threshold)
        lo, hi = self._quantiles(regime, coverage, flagged, precision)
        return {"q_lo": ctr + lo * sig if math.isfinite(lo) else -math.inf,
                "q_hi": ctr + hi * sig if math.isfinite(hi) else math.inf,
                "sigma": sig, "flagged": flagged, "beyond": beyond,
                "regime_records": int(self.counts.get(regime, 0))}

    @property
    def n(self) -> int:
        return int(len(self.scores["*"]))

    # -- JSON --------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        rnd = lambda a: np.round(np.asarray(a, np.float64), 5).tolist()  # noqa: E731
        return {"difficulty": self.difficulty.to_json(),
                "scores": {k: rnd(v) for k, v in self.scores.items()},
                "flagged_scores": {k: rnd(v) for k, v in self.flagged_scores.items()},
                "threshold": self.threshold, "devices": self.devices, "names": self.names,
                "stems": self.stems, "counts": self.counts,
                "shift": {k: round(v, 5) for k, v in self.shift.items()},
                "scale": {k: round(v, 5) for k, v in self.scale.items()},
                "family_rule": self.family_rule}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RegimeCalibration:
        arr = lambda m: {k: np.asarray(v, np.float64) for k, v in m.items()}  # noqa: E731
        return cls(difficulty=Difficulty.from_json(d["difficulty"]), scores=arr(d["scores"]),
                   flagged_scores=arr(d["flagged_scores"]), threshold=d.get("threshold"),
                   devices=list(d.get("devices") or []), names=dict(d.get("names") or {}),
                   stems=list(d.get("stems") or []),
                   counts={k: int(v) for k, v in (d.get("counts") or {}).items()},
                   shift=dict(d.get("shift") or {}), scale=dict(d.get("scale") or {}),
                   family_rule=str(d.get("family_rule") or "stem"))
