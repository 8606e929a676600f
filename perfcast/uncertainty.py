"""How sure a prediction is: calibrated intervals and an out-of-distribution score.

**Intervals — split conformal in log space, Mondrian by OOD-score bucket.** For a shipped model,
the calibration residuals are ``r = log(actual / predicted)`` of records the model never trained
on: the held-out families of the evaluation's ``unseen-family`` folds (held-out GPUs for the
cross-device model), so an interval reflects *unseen* architectures, not training rows. For a
coverage ``1 − α`` the interval of a prediction ``ŷ`` is ``[ŷ·e^{q_lo}, ŷ·e^{q_hi}]`` with the two
one-sided split-conformal quantiles at ``α/2`` each (:func:`conformal_bounds`: ``q_hi`` the
⌈(n+1)(1 − α/2)⌉-th smallest residual, ``q_lo`` the same rank from the top), so
``P(y ∉ interval) ≤ α`` for an exchangeable new record, bias included (a model that under-predicts
unseen families gets an interval shifted up). The residuals are split by the OOD score of each
calibration record into buckets (Mondrian conformal): a request takes the quantiles of its
bucket, hulled with those of the buckets below, so the interval widens with the extrapolation
distance and never narrows. A low bound below physics is raised to it (the time floor of
:mod:`perfcast.routing`; for memory the weights (+ gradients + optimizer state) + inputs, or
the simulated live tensors when the request was simulated; for energy the GPU's idle power × the
time floor), and every interval contains its point.

Why our own code and not MAPIE (``mapie`` 1.x, a maintained library): its regressors conformalize
a scikit-learn estimator over an array ``X`` (a prefit one for split conformal, or one it
refits itself for the cross-conformal variants); ours take
:class:`~perfcast.features.records.FeatureSet`\\ s with graphs, and our residuals come from
group (family / device) K-fold evaluations with one fitted model per fold — neither a prefit
estimator nor a refit MAPIE could do. What remains is a sorted array and two order statistics
(:func:`conformal_bounds`, a few lines), stored as JSON; MAPIE would add scikit-learn to the
prediction path and pickled state for that.

**OOD score.** Per request and answering model (:class:`OODReference`): the distance of the
request's architecture descriptor (batch-independent graph aggregates + op-class mix, see
:func:`descriptor`) to its nearest training architecture, in units of the training set's own
typical nearest-neighbour distance; + 1 when the graph has op classes no training graph had; +
the octaves by which the batch and the per-sample input size lie outside the trained range; and,
for a device-conditioned model, the device's distance to the nearest training GPU (log peak
FLOP/s, bandwidth, memory, SMs) in units of the training GPUs' typical spacing. ``ood.flagged``
when the score reaches a threshold calibrated on the same held-out records (:func:`flag_threshold`:
of the thresholds flagging ≥ 10 % of them, the one whose flagged records most often have
APE > 20 %), so the flagged requests are the ones with large errors there.

**Storage.** :data:`CALIBRATION_FILE` beside the shipped manifest (``perfcast/shipped/
uncertainty.json``, :func:`perfcast.shipped.shipped_file`): per model id and target the sorted
residuals of each bucket, the bucket edges, the OOD reference and threshold, and where the
residuals came from. Built by
``python benchmarks/uncertainty_report.py`` (which also writes ``reports/uncertainty/``). A
target's calibration is generic (a key → residuals mapping): ``energy_j`` (or any other key)
gets an interval as soon as a calibration for it is stored. A model without one answers
``coverage: null`` for that key, with a note — never a made-up interval.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.shipped import CALIBRATION_FILE  # the calibration file beside the manifest
from perfcast.workload import RISKS  # the decisions' risk attitudes: which bound they plan with

#: Coverage of the intervals when none is asked for.
DEFAULT_COVERAGE = 0.9
#: Keys that get ``<key>_low`` / ``<key>_high`` on a :class:`~perfcast.api.Prediction`.
INTERVAL_KEYS: tuple[str, ...] = ("time_ms", "memory_mb", "energy_j")
FORMAT = "1"
#: Mondrian buckets (by OOD score) when every one gets at least :data:`MIN_BUCKET` residuals.
N_BUCKETS = 3
MIN_BUCKET = 80
#: "A large error": the OOD threshold separates APE above this from below.
LARGE_APE = 0.20
#: Dimensions the architecture descriptors are projected to (PCA of the training set).
PCA_DIMS = 16
#: Weight of the op-class mix against the standardized graph aggregates in a descriptor.
OP_WEIGHT = 2.0


# -- split conformal ------------------------------------------------------------------------

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


# -- descriptors ----------------------------------------------------------------------------

def _n_ops() -> int:
    from perfcast import ops

    return len(ops.OPS)


def op_counts_of_graph(graph) -> np.ndarray:
    """Op-class counts of a :class:`~perfcast.graph.ModelGraph`."""
    from perfcast import ops

    idx = [ops.op_index(n.op) for n in graph.nodes]
    return np.bincount(np.asarray(idx, dtype=np.int64), minlength=_n_ops()).astype(np.float64)


def op_counts_of_data(data) -> np.ndarray:
    """Op-class counts of a learning graph's PyG data (``op_index``)."""
    idx = data.op_index.numpy() if hasattr(data.op_index, "numpy") else np.asarray(data.op_index)
    return np.bincount(idx.astype(np.int64), minlength=_n_ops()).astype(np.float64)


def descriptor(summary, op_counts: np.ndarray) -> np.ndarray:
    """Batch-independent architecture descriptor: log1p of nodes, MACs / activation bytes /
    input elements per sample, parameters and the conv / dense / relu / attention / norm counts,
    then the square root of each op class's share of the nodes (Hellinger coordinates)."""
    b = max(1, summary.batch)
    agg = np.log1p(np.maximum(0.0, np.array([
        summary.nodes, summary.macs / b, summary.params, summary.activation_bytes / b,
        summary.input_elements / b, summary.conv, summary.dense, summary.relu,
        summary.attention, summary.norm], dtype=np.float64)))
    c = np.asarray(op_counts, dtype=np.float64)
    mix = np.sqrt(c / max(1.0, c.sum()))
    return np.concatenate([agg, mix])


def input_per_sample(summary) -> float:
    return float(summary.input_elements) / max(1, summary.batch)


def device_vector(dev) -> np.ndarray | None:
    """Log of a GPU's peak FP32 and FP16 FLOP/s, bandwidth, memory and SM count (``None`` for a
    device without those)."""
    fp32 = dev.peak_tflops("fp32")
    vals = [fp32, dev.peak_tflops("fp16") or fp32, dev.bandwidth_gbs, dev.memory_gb,
            dev.sm_count]
    if any(v is None or not v > 0 for v in vals):
        return None
    return np.log(np.asarray(vals, dtype=np.float64))


def _octaves_outside(x: float, lo: float, hi: float) -> float:
    if not (x > 0 and lo > 0 and hi > 0):
        return 0.0
    if x > hi:
        return math.log2(x / hi)
    if x < lo:
        return math.log2(lo / x)
    return 0.0


@dataclass
class OODReference:
    """What a model was trained on, as the OOD score reads it (see the module docstring)."""

    feat_mean: np.ndarray | None = None
    feat_std: np.ndarray | None = None
    components: np.ndarray | None = None  # [k, D]
    points: np.ndarray | None = None  # [N, k] training architectures, projected
    scale: float = 1.0  # median leave-one-out nearest-neighbour distance of the points
    ops: frozenset = frozenset()
    batch_range: tuple[float, float] | None = None
    input_range: tuple[float, float] | None = None
    devices: dict[str, list[float]] | None = None  # device-conditioned models: key → vector
    device_scale: float = 1.0

    # -- fitting ----------------------------------------------------------------------------
    @classmethod
    def fit(cls, descriptors: np.ndarray | None = None, op_counts: np.ndarray | None = None,
            batches=None, inputs=None, devices: dict[str, np.ndarray] | None = None,
            dims: int = PCA_DIMS) -> OODReference:
        ref = cls()
        if descriptors is not None and len(descriptors):
            X = np.unique(np.asarray(descriptors, dtype=np.float64), axis=0)
            na = 10  # the aggregates; the rest is the op mix
            mean = X.mean(axis=0)
            std = X.std(axis=0)
            std[:na] = np.where(std[:na] > 1e-6, std[:na], 1.0)
            std[na:] = 1.0 / OP_WEIGHT  # the mix keeps its geometry, weighted
            mean[na:] = 0.0
            Z = (X - mean) / std
            mu = Z.mean(axis=0)
            k = max(1, min(dims, Z.shape[0] - 1, Z.shape[1]))
            _, _, vt = np.linalg.svd(Z - mu, full_matrices=False)
            comp = vt[:k]
            # fold the centring into the mean: project (x - mean)/std - mu
            ref.feat_mean, ref.feat_std = mean + mu * std, std
            ref.components = comp
            ref.points = (Z - mu) @ comp.T
            ref.scale = _loo_scale(ref.points)
        if op_counts is not None and len(op_counts):
            ref.ops = frozenset(np.flatnonzero(np.asarray(op_counts).sum(axis=0) > 0).tolist())
        if batches is not None and len(batches):
            b = np.asarray(batches, dtype=np.float64)
            b = b[np.isfinite(b) & (b > 0)]
            if len(b):
                ref.batch_range = (float(b.min()), float(b.max()))
        if inputs is not None and len(inputs):
            x = np.asarray(inputs, dtype=np.float64)
            x = x[np.isfinite(x) & (x > 0)]
            if len(x):
                ref.input_range = (float(x.min()), float(x.max()))
        if devices:
            ref.devices = {k: [float(t) for t in v] for k, v in devices.items() if v is not None}
            V = np.asarray(list(ref.devices.values()))
            ref.device_scale = _loo_scale(V) if len(V) > 1 else 1.0
        return ref

    # -- scoring ----------------------------------------------------------------------------
    def project(self, desc: np.ndarray) -> np.ndarray:
        return ((np.asarray(desc, np.float64) - self.feat_mean) / self.feat_std) @ self.components.T

    def score(self, desc: np.ndarray | None = None, op_counts: np.ndarray | None = None,
              batch: float | None = None, input_elements: float | None = None,
              device: tuple[str, np.ndarray | None] | None = None,
              exclude_device: bool = False) -> tuple[float, list[str]]:
        """``(score, reasons)`` of one request (see the module docstring). ``device``:
        ``(key, vector)`` for a device-conditioned model; ``exclude_device``: measure the
        distance to the *other* training devices (leave-one-device-out calibration)."""
        s, reasons = 0.0, []
        if self.points is not None and desc is not None:
            z = self.project(desc)
            d = float(np.sqrt(((self.points - z) ** 2).sum(axis=1)).min()) / self.scale
            s += d
            if d > 2:
                reasons.append(f"architecture far from every trained one (nearest-neighbour "
                               f"distance {d:.1f}× the training set's typical spacing)")
        if self.ops and op_counts is not None:
            unseen = [i for i in np.flatnonzero(np.asarray(op_counts) > 0).tolist()
                      if i not in self.ops]
            if unseen:
                from perfcast import ops

                s += 1.0
                names = [ops.OPS[i] for i in unseen[:4]]
                reasons.append(f"op classes never seen in training: {', '.join(names)}"
                               + (f" (+{len(unseen) - 4} more)" if len(unseen) > 4 else ""))
        if self.batch_range and batch:
            o = _octaves_outside(float(batch), *self.batch_range)
            if o > 0:
                s += o
                reasons.append(f"batch {int(batch):,} outside the trained range "
                               f"{self.batch_range[0]:,.0f}–{self.batch_range[1]:,.0f} "
                               f"({o:.1f} octaves)")
        if self.input_range and input_elements:
            o = _octaves_outside(float(input_elements), *self.input_range)
            if o > 0:
                s += o
                reasons.append(f"input of {input_elements:,.0f} elements per sample outside "
                               f"the trained range {self.input_range[0]:,.0f}–"
                               f"{self.input_range[1]:,.0f} ({o:.1f} octaves)")
        if self.devices and device is not None:
            key, vec = device
            others = {k: v for k, v in self.devices.items() if not (exclude_device and k == key)}
            if vec is None:
                s += 3.0
                reasons.append(f"{key}: the registry lacks the specs the device distance needs")
            elif others and not (key in others and not exclude_device):
                dist = {k: float(np.linalg.norm(np.asarray(v) - vec)) for k, v in others.items()}
                near = min(dist, key=dist.get)
                d = dist[near] / self.device_scale
                s += d
                reasons.append(f"{key} not among the trained GPUs (nearest: {near}, distance "
                               f"{d:.1f}× their typical spacing)")
        return s, reasons

    # -- JSON -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        r = lambda a, n=5: None if a is None else np.round(np.asarray(a, np.float64), n).tolist()  # noqa: E731
        return {"feat_mean": r(self.feat_mean), "feat_std": r(self.feat_std),
                "components": r(self.components), "points": r(self.points, 4),
                "scale": self.scale, "ops": sorted(self.ops),
                "batch_range": list(self.batch_range) if self.batch_range else None,
                "input_range": list(self.input_range) if self.input_range else None,
                "devices": self.devices, "device_scale": self.device_scale}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OODReference:
        a = lambda k: None if d.get(k) is None else np.asarray(d[k], np.float64)  # noqa: E731
        return cls(feat_mean=a("feat_mean"), feat_std=a("feat_std"), components=a("components"),
                   points=a("points"), scale=float(d.get("scale") or 1.0),
                   ops=frozenset(d.get("ops") or ()),
                   batch_range=tuple(d["batch_range"]) if d.get("batch_range") else None,
                   input_range=tuple(d["input_range"]) if d.get("input_range") else None,
                   devices=d.get("devices"), device_scale=float(d.get("device_scale") or 1.0))


def _loo_scale(P: np.ndarray) -> float:
    """Median distance of each point to its nearest other point (1.0 when degenerate)."""
    P = np.asarray(P, np.float64)
    if len(P) < 2:
        return 1.0
    d2 = ((P[:, None, :] - P[None, :, :]) ** 2).sum(axis=2) if len(P) <= 3000 else None
    if d2 is None:  # pragma: no cover - not reached by the shipped sets
        return 1.0
    np.fill_diagonal(d2, np.inf)
    s = float(np.median(np.sqrt(d2.min(axis=1))))
    return s if s > 1e-9 else 1.0


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

    @classmethod
    def build(cls, key: str, residuals, scores=None, *, reference: OODReference | None = None,
              n_buckets: int = N_BUCKETS, min_bucket: int = MIN_BUCKET,
              meta: dict[str, Any] | None = None) -> Calibration:
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
                   meta=dict(meta or {}))

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
                "reference": self.reference.to_json() if self.reference else None}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Calibration:
        return cls(key=d["key"], residuals=[np.asarray(b, np.float64) for b in d["buckets"]],
                   edges=list(d.get("edges") or []),
                   reference=OODReference.from_json(d["reference"]) if d.get("reference")
                   else None, threshold=d.get("threshold"), max_score=d.get("max_score"),
                   meta=dict(d.get("meta") or {}))


def _ape(r: np.ndarray) -> np.ndarray:
    """APE of a prediction whose log residual is ``r``: |actual − ŷ| / actual = |1 − e^{−r}|."""
    return np.abs(1 - np.exp(-np.asarray(r, np.float64)))


def auroc(scores, positive) -> float | None:
    """Area under the ROC curve of ``scores`` for the boolean labels ``positive`` (ties count
    half); ``None`` without both classes."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(positive, bool)
    npos, nneg = int(y.sum()), int((~y).sum())
    if not npos or not nneg:
        return None
    from scipy.stats import rankdata

    ranks = rankdata(s)
    return float((ranks[y].sum() - npos * (npos + 1) / 2) / (npos * nneg))


#: The OOD warning flags at least this share of the calibration records.
MIN_FLAGGED = 0.10


def flag_threshold(scores, positive, min_share: float = MIN_FLAGGED) -> float | None:
    """The warning's threshold (flag ``score ≥ t``): among the thresholds that flag at least
    ``min_share`` of the records, the one whose flagged records most often have a large error
    (highest precision; the lowest such ``t`` on ties). ``None`` without both classes."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(positive, bool)
    if not y.any() or y.all() or not len(s):
        return None
    order = np.argsort(-s, kind="stable")
    ss, yy = s[order], y[order]
    hits = np.cumsum(yy)
    n = np.arange(1, len(s) + 1)
    best, best_t = -1.0, None
    for i in range(len(s)):
        if i + 1 < len(s) and ss[i + 1] == ss[i]:
            continue  # a threshold flags every record of its score
        if n[i] < min_share * len(s):
            continue
        prec = hits[i] / n[i]
        if prec >= best - 1e-12:
            best, best_t = prec, float(ss[i])
    return best_t


def youden_threshold(scores, positive) -> float | None:
    """The score threshold (flag ``score ≥ t``) maximizing TPR − FPR; ``None`` without both
    classes."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(positive, bool)
    if not y.any() or y.all():
        return None
    best, best_t = -1.0, None
    for t in np.unique(s):
        f = s >= t
        j = f[y].mean() - f[~y].mean()
        if j > best + 1e-12:
            best, best_t = j, float(t)
    return best_t


# -- the stored file ----------------------------------------------------------------------------

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


# -- attaching to a prediction ----------------------------------------------------------------

#: ``Answer.model_id`` of the GPU tensor-memory simulation (+ runtime overhead): not learned, but
#: calibrated like a model on the measured GPUMemNet runs.
SIMULATION_GPU = "simulation:gpu"


def request_features(req) -> dict[str, Any]:
    """What the OOD score reads of a routed request (:class:`perfcast.routing._Request`)."""
    counts = op_counts_of_graph(req.graph)
    return {"desc": descriptor(req.summary, counts), "op_counts": counts,
            "batch": float(req.w.batch_size or 1), "input_elements": input_per_sample(req.summary),
            "device": (req.device.key, device_vector(req.device) if req.device.is_gpu else None)}


def annotate(pred, route, coverage: float = DEFAULT_COVERAGE) -> None:
    """Fill ``pred``'s ``<key>_low`` / ``<key>_high``, ``coverage``, ``intervals`` and ``ood``
    from the calibrations of the models that answered (see the module docstring)."""
    if not 0 < coverage < 1:
        from perfcast.errors import PerfcastError

        raise PerfcastError(f"coverage must be between 0 and 1 (exclusive), got {coverage}")
    answers = route.answers if route is not None else {}
    req = getattr(route, "request", None)
    feats = None
    intervals: dict[str, Any] = {}
    ood_scores, ood_reasons, flagged, thresholds = [], [], False, []
    for key in INTERVAL_KEYS:
        ans = answers.get(key)
        value = getattr(pred, key, None)
        if ans is None or value is None:
            continue
        cal = find_calibration(getattr(ans, "model_id", None), key)
        if cal is None:
            why = ("a roofline bound, not a learned estimate" if ans.source == "roofline" else
                   "the tensor-memory simulation, what the CPU measurements record"
                   if ans.source == "simulation" and not getattr(ans, "model_id", None) else
                   "no calibration stored for the GPU tensor-memory simulation"
                   if ans.source == "simulation"
                   else "a predictor you saved: no held-out calibration" if ans.source == "user"
                   else f"no calibration stored for the {ans.predictor} model")
            intervals[key] = {"coverage": None, "note": f"{key}: no interval — {why}"}
            continue
        score, reasons = None, []
        if cal.reference is not None and req is not None:
            try:
                if feats is None:
                    feats = request_features(req)
                device = feats["device"] if cal.reference.devices else None
                score, reasons = cal.reference.score(feats["desc"], feats["op_counts"],
                                                     feats["batch"], feats["input_elements"],
                                                     device)
            except Exception as exc:  # noqa: BLE001 - the score refines; it never sinks a prediction
                score, reasons = None, []
                pred.notes.append(f"ood: no score for this request ({type(exc).__name__}); "
                                  f"the interval is the farthest bucket's")
        unscored = score is None and cal.reference is not None and req is not None
        q_lo, q_hi, bucket = cal.bounds(math.inf if unscored else score, coverage)
        if not (math.isfinite(q_lo) and math.isfinite(q_hi)):
            intervals[key] = {"coverage": None,
                              "note": f"{key}: no interval — {cal.n} calibration records are too "
                                      f"few for a {coverage:.0%} interval (ask a lower "
                                      f"--coverage)"}
            continue
        lo, hi = interval(float(value), q_lo, q_hi)
        lo = max(lo, _floor(ans, key, req))
        lo = min(lo, float(value))
        top = _ceiling(key, req, pred)
        if hi > top:
            hi = max(top, float(value))
            pred.notes.append(f"{key}: the upper bound is capped at {hi:,.4g}, what the GPU "
                              f"draws at most (min(power limit, TDP)) over the upper time bound")
        setattr(pred, f"{key}_low", lo)
        setattr(pred, f"{key}_high", hi)
        d = {"coverage": coverage, "low": lo, "high": hi, "bucket": bucket,
             "buckets": len(cal.residuals), "calibration_records": cal.n,
             "calibrated_on": cal.meta.get("calibrated_on")}
        if score is not None:
            d["ood_score"] = round(score, 3)
            if cal.max_score is not None and score > cal.max_score:
                d["note"] = (f"{key}: OOD score {score:.1f} is beyond every calibration record "
                             f"(≤ {cal.max_score:.1f}) — the interval is the widest calibrated "
                             f"one and may cover less than {coverage:.0%}")
            ood_scores.append(score)
            ood_reasons += [f"{key}: {r}" for r in reasons]
            if cal.threshold is not None:
                thresholds.append(cal.threshold)
                flagged = flagged or score >= cal.threshold
        intervals[key] = d
    pred.intervals = intervals
    pred.coverage = coverage if any(v.get("coverage") for v in intervals.values()) else None
    for v in intervals.values():
        if v.get("note"):
            pred.notes.append(v["note"])
    if ood_scores:
        pred.ood = {"score": round(max(ood_scores), 3), "reasons": ood_reasons,
                    "threshold": round(min(thresholds), 3) if thresholds else None,
                    "flagged": bool(flagged)}
    else:
        pred.ood = {"score": None, "reasons": [], "threshold": None, "flagged": False}
    if pred.fits and pred.memory_mb_high is not None and pred.capacity_mb is not None \
            and pred.memory_mb_high > pred.capacity_mb:
        pred.notes.append(f"fits: yes at the central estimate, but the {coverage:.0%} upper "
                          f"bound {pred.memory_mb_high:,.0f} MiB exceeds the "
                          f"{pred.capacity_mb:,.0f} MiB (fit / mig plan with it: --risk)")


def _floor(ans, key: str, req) -> float:
    """The physical floor a low bound must not cross (0 when unknown)."""
    if req is None:
        return 0.0
    try:
        if key == "time_ms":
            return float(req.time_floor() or 0.0)
        if key == "memory_mb":
            return float(req.memory_floor())
        if key == "energy_j" and req.device.is_gpu:
            # a step draws at least idle power for at least the roofline time
            from perfcast.energy import power_bounds

            idle = power_bounds(req.device)[0]
            t = req.time_floor()
            return float(idle) * float(t) / 1e3 if idle and t else 0.0
    except Exception:  # noqa: BLE001 - a floor is a refinement, never a failure
        return 0.0
    return 0.0


def _ceiling(key: str, req, pred) -> float:
    """The physical ceiling a high bound must not cross (infinite when unknown): for energy
    per step, the most the GPU may draw (min(power limit, TDP)) over the time interval's upper
    bound — the energy calibration (end-to-end Zeus epochs, data loading included) is wider
    than what the time interval allows."""
    t_hi = getattr(pred, "time_ms_high", None)
    if key != "energy_j" or req is None or not t_hi:
        return math.inf
    try:
        if not req.device.is_gpu:
            return math.inf
        from perfcast.energy import bounded_power

        return bounded_power(req.device, math.inf, req.power_limit_w) * float(t_hi) / 1e3
    except Exception:  # noqa: BLE001 - a ceiling is a refinement, never a failure
        return math.inf


def pick(pred, key: str, risk: str) -> float | None:
    """The value of ``key`` a decision plans with: ``safe`` the upper bound (the lower one for
    a throughput-like key), ``central`` the point, ``optimistic`` the lower bound; the point when
    no interval exists."""
    if risk not in RISKS:
        from perfcast.errors import unknown_choice

        raise unknown_choice("risk", risk, RISKS)
    v = getattr(pred, key, None)
    if risk == "central" or v is None:
        return v
    b = getattr(pred, f"{key}_{'high' if risk == 'safe' else 'low'}", None)
    return v if b is None else b


__all__ = [
    "CALIBRATION_FILE",
    "DEFAULT_COVERAGE",
    "INTERVAL_KEYS",
    "RISKS",
    "Calibration",
    "OODReference",
    "annotate",
    "auroc",
    "calibrations",
    "conformal_bounds",
    "descriptor",
    "device_vector",
    "find_calibration",
    "flag_threshold",
    "interval",
    "pick",
    "write_calibrations",
    "youden_threshold",
]
