"""Split-conformal intervals in log space, Mondrian by OOD-score bucket: the order statistics (:func:`conformal_bounds`), a model's :class:`Calibration` per target and the calibration file beside the shipped manifest (``uncertainty.json``, built by ``benchmarks/uncertainty_report.py``).

Why our own code and not MAPIE: its regressors conformalize a scikit-learn estimator over an array; ours take feature sets with graphs, and the residuals come from group K-fold evaluations with one model per fold. What remains is a sorted array and two order statistics, stored as JSON."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
import numpy as np
from perfcast.shipped import CALIBRATION_FILE  # the calibration file beside the manifest

from perfcast.uncertainty.ood import FORMAT, LARGE_APE, MIN_BUCKET, N_BUCKETS, OODReference, _ape, flag_threshold  # noqa: F401


def conformal_bounds(residuals, coverage: float) -> tuple[float, float]:
    """``(q_lo, q_hi)``: two one-sided split-conformal quantiles of ``residuals`` at miscoverage
    ``(1 − coverage)/2`` each: ``q_hi`` is the ⌈(n+1)(1 − α/2)⌉-th smallest residual and
    ``q_lo`` the same rank counted from the largest; ``(-inf, inf)`` when there are too few
    residuals for that rank."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), got {coverage}")
    r = np.sort(np.asarray(residuals, dtype=np.float64))
    n = len(r)
    k = math.ceil((n + 1) * (1 - (1 - coverage) / 2) - 1e-9)
    if n == 0 or k > n:
        return -math.inf, math.inf
    return float(r[n - k]), float(r[k - 1])


def interval(value: float, q_lo: float, q_hi: float) -> tuple[float, float]:
    """``value·e^{q_lo}``, ``value·e^{q_hi}`` widened to contain ``value``."""
    lo = value * math.exp(min(q_lo, 0.0)) if math.isfinite(q_lo) else 0.0
    hi = value * math.exp(max(q_hi, 0.0)) if math.isfinite(q_hi) else math.inf
    return lo, hi


# -- a calibration ----------------------------------------------------------------------------

@dataclass
class Calibration:
    """One model's calibration for one key: sorted residuals per OOD bucket (``edges``: the
    upper score of every bucket but the last), its OOD reference and threshold."""

    key: str
    residuals: list[np.ndarray]
    edges: list[float] = field(default_factory=list)
    reference: OODReference | None = None
    threshold: float | None = None
    max_score: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: intervals by regime with a locally-adaptive width (:mod:`perfcast.uncertainty.regimes`);
    #: when present they answer, and ``residuals`` is the pooled fallback
    adaptive: Any = None

    @classmethod
    def build(cls, key: str, residuals, scores=None, *, reference: OODReference | None = None,
              n_buckets: int = N_BUCKETS, min_bucket: int = MIN_BUCKET,
              meta: dict[str, Any] | None = None, adaptive=None) -> Calibration:
        """From held-out residuals ``log(actual / predicted)`` and their OOD scores: buckets at
        score quantiles (as many as give ≥ ``min_bucket`` residuals each) and the threshold
        (Youden's J of "APE > 20 %" vs score)."""
        r = np.asarray(residuals, np.float64)
        ok = np.isfinite(r)
        s = np.zeros(len(r)) if scores is None else np.asarray(scores, np.float64)
        r, s = r[ok], s[ok]
        nb = max(1, min(n_buckets, len(r) // max(1, min_bucket)))
        edges = [] if scores is None or nb == 1 else \
            [float(e) for e in np.quantile(s, np.arange(1, nb) / nb)]
        edges = sorted(set(edges))
        idx = np.searchsorted(edges, s, side="left") if edges else np.zeros(len(s), int)
        res = [np.sort(r[idx == j]) for j in range(len(edges) + 1)]
        thr = None
        if scores is not None:
            thr = flag_threshold(s, _ape(r) > LARGE_APE)
        return cls(key=key, residuals=res, edges=edges, reference=reference, threshold=thr,
                   max_score=float(s.max()) if scores is not None and len(s) else None,
                   meta=dict(meta or {}), adaptive=adaptive)

    def bucket(self, score: float | None) -> int:
        if score is None or not self.edges:
            return 0
        return int(np.searchsorted(self.edges, score, side="left"))

    def bounds(self, score: float | None, coverage: float) -> tuple[float, float, int]:
        """``(q_lo, q_hi, bucket)`` for a request of OOD ``score``: the bucket's conformal
        quantiles hulled with those of every bucket below it (wider with the distance)."""
        j = self.bucket(score)
        lo, hi = math.inf, -math.inf
        for i in range(j + 1):
            a, b = conformal_bounds(self.residuals[i], coverage)
            lo, hi = min(lo, a), max(hi, b)
        return lo, hi, j

    @property
    def n(self) -> int:
        return int(sum(len(r) for r in self.residuals))

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "edges": self.edges, "threshold": self.threshold,
                "max_score": self.max_score, "meta": self.meta,
                "buckets": [np.round(r, 5).tolist() for r in self.residuals],
                "reference": self.reference.to_json() if self.reference else None,
                **({"adaptive": self.adaptive.to_json()} if self.adaptive is not None else {})}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Calibration:
        adaptive = None
        if d.get("adaptive"):
            from perfcast.uncertainty.regimes import RegimeCalibration

            try:
                adaptive = RegimeCalibration.from_json(d["adaptive"])
            except (KeyError, ValueError, TypeError):  # a stale file: the pooled interval answers
                adaptive = None
        return cls(adaptive=adaptive, key=d["key"], residuals=[np.asarray(b, np.float64) for b in d["buckets"]],
                   edges=list(d.get("edges") or []),
                   reference=OODReference.from_json(d["reference"]) if d.get("reference")
                   else None, threshold=d.get("threshold"), max_score=d.get("max_score"),
                   meta=dict(d.get("meta") or {}))


def calibration_path(root: Path | None = None) -> Path:
    """The calibration file under ``root`` or the shipped directory."""
    from perfcast.shipped import shipped_file

    return shipped_file(CALIBRATION_FILE, root)


@lru_cache(maxsize=8)
def _load_file(path: str) -> dict[str, dict[str, Calibration]]:
    p = Path(path)
    if not p.exists():
        return {}
    try:
        doc = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return {mid: {k: Calibration.from_json(c) for k, c in keys.items()}
            for mid, keys in (doc.get("models") or {}).items()}


def calibrations(root: Path | None = None) -> dict[str, dict[str, Calibration]]:
    """Model id → key → :class:`Calibration` of the shipped calibration file (cached)."""
    return _load_file(str(calibration_path(root)))


def find_calibration(model_id: str | None, key: str) -> Calibration | None:
    if not model_id:
        return None
    return calibrations().get(model_id, {}).get(key)


def write_calibrations(cals: dict[str, dict[str, Calibration]], path: Path,
                       meta: dict[str, Any] | None = None) -> Path:
    from perfcast.paths import write_file_atomically

    doc = {"format": FORMAT, **(meta or {}),
           "models": {mid: {k: c.to_json() for k, c in keys.items()} for mid, keys in cals.items()}}
    write_file_atomically(path, json.dumps(doc, separators=(",", ":")))
    _load_file.cache_clear()
    return path
