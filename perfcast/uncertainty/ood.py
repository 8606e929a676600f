"""The out-of-distribution score of a request for the model answering it: the distance of its architecture descriptor to the nearest training architecture (in the training set's own nearest-neighbour units), unseen op classes, the octaves by which batch and input lie outside the trained range, and for a device-conditioned model the GPU's distance to the nearest training GPU; flagged at a threshold calibrated on held-out records."""

from __future__ import annotations


import math
from dataclasses import dataclass


from typing import Any
import numpy as np





#: Coverage of the intervals when none is asked for.
DEFAULT_COVERAGE = 0.9
#: Keys that get ``<key>_low`` / ``<key>_high`` on a :class:`~perfcast.api.Prediction`.
INTERVAL_KEYS: tuple[str, ...] = ("time_ms", "memory_mb", "energy_j")
FORMAT = "2"  # 2: calibrations may carry "adaptive" (intervals by regime)
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

    def parts(self, desc: np.ndarray | None = None, op_counts: np.ndarray | None = None,
              batch: float | None = None, input_elements: float | None = None,
              device: tuple[str, np.ndarray | None] | None = None,
              exclude_device: bool = False, reasons: list[str] | None = None) -> dict[str, float]:
        """The parts of :meth:`score` (``arch``: nearest-neighbour distance in the training
        set's spacing; ``new_ops``: 1 with op classes never trained on; ``batch_oct`` /
        ``input_oct``: octaves outside the trained range; ``device_dist``: the GPU's distance to the
        nearest training GPU, 0 for a trained one), appending their reasons to ``reasons``."""
        reasons = [] if reasons is None else reasons
        out = {"arch": 0.0, "new_ops": 0.0, "batch_oct": 0.0, "input_oct": 0.0, "device_dist": 0.0}
        if self.points is not None and desc is not None:
            z = self.project(desc)
            d = float(np.sqrt(((self.points - z) ** 2).sum(axis=1)).min()) / self.scale
            out["arch"] = d
            if d > 2:
                reasons.append(f"architecture far from every trained one (nearest-neighbour "
                               f"distance {d:.1f}× the training set's typical spacing)")
        if self.ops and op_counts is not None:
            unseen = [i for i in np.flatnonzero(np.asarray(op_counts) > 0).tolist()
                      if i not in self.ops]
            if unseen:
                from perfcast import ops

                out["new_ops"] = 1.0
                names = [ops.OPS[i] for i in unseen[:4]]
                reasons.append(f"op classes never seen in training: {', '.join(names)}"
                               + (f" (+{len(unseen) - 4} more)" if len(unseen) > 4 else ""))
        if self.batch_range and batch:
            o = _octaves_outside(float(batch), *self.batch_range)
            if o > 0:
                out["batch_oct"] = o
                reasons.append(f"batch {int(batch):,} outside the trained range "
                               f"{self.batch_range[0]:,.0f}–{self.batch_range[1]:,.0f} "
                               f"({o:.1f} octaves)")
        if self.input_range and input_elements:
            o = _octaves_outside(float(input_elements), *self.input_range)
            if o > 0:
                out["input_oct"] = o
                reasons.append(f"input of {input_elements:,.0f} elements per sample outside "
                               f"the trained range {self.input_range[0]:,.0f}–"
                               f"{self.input_range[1]:,.0f} ({o:.1f} octaves)")
        if self.devices and device is not None:
            key, vec = device
            others = {k: v for k, v in self.devices.items() if not (exclude_device and k == key)}
            if vec is None:
                out["device_dist"] = 3.0
                reasons.append(f"{key}: the registry lacks the specs the device distance needs")
            elif others and not (key in others and not exclude_device):
                dist = {k: float(np.linalg.norm(np.asarray(v) - vec)) for k, v in others.items()}
                near = min(dist, key=dist.get)
                d = dist[near] / self.device_scale
                out["device_dist"] = d
                reasons.append(f"{key} not among the trained GPUs (nearest: {near}, distance "
                               f"{d:.1f}× their typical spacing)")
        return out

    def score(self, desc: np.ndarray | None = None, op_counts: np.ndarray | None = None,
              batch: float | None = None, input_elements: float | None = None,
              device: tuple[str, np.ndarray | None] | None = None,
              exclude_device: bool = False) -> tuple[float, list[str]]:
        """``(score, reasons)`` of one request: the sum of :meth:`parts`. ``device``:
        ``(key, vector)`` for a device-conditioned model; ``exclude_device``: measure the
        distance to the *other* training devices (leave-one-device-out calibration)."""
        reasons: list[str] = []
        p = self.parts(desc, op_counts, batch, input_elements, device, exclude_device, reasons)
        return float(sum(p.values())), reasons

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
