"""Where a learned model may be believed: the batches and model sizes it was fitted on.

A learned per-device model (a tree ensemble, a GNN…) answers any request, but only the ones
near its training records mean anything: the timm benchmarks measured each model at the largest
batch that fits, so an RTX 3090 training model asked about ResNet-50 at batch 1 — eight octaves
below any ResNet-sized record — answers 268 ms, 40× a real step. :class:`Support` records the
training records in the coordinates a step's time depends on most — ``log2`` of the batch, of
the MACs per sample (the model's work at its input size) and of the activation bytes per sample
(its memory traffic, and what decided the batch those benchmarks could run) — and measures how
far a request is from the nearest of them, in octaves:

* within :attr:`Support.inside_octaves` the learned answer is used as it is;
* beyond :attr:`Support.inside_octaves` + :attr:`Support.fade_octaves` it is not used at all —
  the physics base on the same device answers (routing: :mod:`perfcast.routing`);
* between, the learned model's log residual over the base fades linearly (:meth:`Support.weight`).

The benchmarks ran each model at one batch, so a learned model knows where a model departs from
physics (at its *home* batch, the one nearest the records), not how its time scales with the
batch: routing reads the residual there and carries it along the physics base's batch scaling,
fading with the batch distance from home (:meth:`Support.home`).

A model trained on one mode and precision (every shipped per-device model) is out of support for
any other, and one trained on timm / torchvision image models for an ``hf:`` transformer or an
ONNX file (:meth:`Support.covers`: the spec kinds of its records). Saved with the predictor (``config.json``'s ``support``,
:mod:`perfcast.predictors.base`); a model saved before supports existed has none and is used as
it is (with a note).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Spec kinds that name a model zoo of one domain (image models, transformers): a request of one
#: of them is outside the support of a model that learned from none of its kind.
ZOO_KINDS = ("timm", "torchvision", "hf")
#: Version of the saved support (``config.json`` → ``support.version``).
SUPPORT_VERSION = 2
#: Octaves from the nearest training record within which the learned answer is used as it is.
INSIDE_OCTAVES = 1.0
#: Octaves over which the learned residual fades to zero beyond :data:`INSIDE_OCTAVES`.
FADE_OCTAVES = 2.0


@dataclass(frozen=True)
class Support:
    """The training records of a learned model as ``points`` (``[n, 3]``: log2 batch, log2
    MACs per sample, log2 activation bytes per sample — distinct rows), the ``modes`` and ``precisions`` they cover, their ranges
    (``batch_min`` … ``batch_max``, ``macs_min`` … ``macs_max`` MACs per sample), the spec
    ``kinds`` of their models and the record count. :meth:`weight` of a request is 1 inside, 0 far outside."""

    points: np.ndarray = field(repr=False)
    modes: tuple[str, ...]
    precisions: tuple[str, ...]
    #: spec kinds of the records' models (``timm``, ``torchvision``, ``hf`` …; empty: unknown)
    kinds: tuple[str, ...]
    batch_min: int
    batch_max: int
    macs_min: float
    macs_max: float
    records: int
    inside_octaves: float = INSIDE_OCTAVES
    fade_octaves: float = FADE_OCTAVES

    # ------------------------------------------------------------------------- construction
    @classmethod
    def of(cls, batch, macs_per_sample, activation_per_sample, modes, precisions,
           models=()) -> Support | None:
        """From per-record batches, MACs and activation bytes per sample (records without
        one are left out), their modes, precisions and model specs (``timm:resnet50`` …: their
        kinds are kept); ``None`` without any usable record."""
        b = np.asarray(batch, dtype=np.float64)
        m = np.asarray(macs_per_sample, dtype=np.float64)
        a = np.asarray(activation_per_sample, dtype=np.float64)
        ok = np.isfinite(b) & (b >= 1) & np.isfinite(m) & (m > 0) & np.isfinite(a) & (a > 0)
        if not ok.any():
            return None
        pts = np.unique(np.round(np.column_stack([np.log2(b[ok]), np.log2(m[ok]),
                                                  np.log2(a[ok])]), 2), axis=0)
        kinds = {_kind(str(x)) for x in models if x}
        return cls(points=pts, modes=tuple(sorted({str(x) for x in modes if x})),
                   precisions=tuple(sorted({str(x) for x in precisions if x})),
                   kinds=tuple(sorted(k for k in kinds if k)),
                   batch_min=int(b[ok].min()), batch_max=int(b[ok].max()),
                   macs_min=float(m[ok].min()), macs_max=float(m[ok].max()),
                   records=int(ok.sum()))

    @classmethod
    def of_feature_sets(cls, *sets) -> Support | None:
        """The support of the labeled records of :class:`~perfcast.features.records.FeatureSet`
        s (``None`` entries skipped; ``None`` when no record has a graph summary and a batch)."""
        batch, macs, act, modes, precisions, models = [], [], [], [], [], []
        for fs in sets:
            if fs is None or not getattr(fs, "summaries", None) or "batch_size" not in fs.rows:
                continue
            labeled = np.isfinite(fs.y).any(axis=1) if fs.y.size else np.ones(len(fs), bool)
            idx = np.flatnonzero(labeled)
            summ = fs.summaries
            for i in idx:
                m, a = size_of(summ[fs.graph_index[i]])
                macs.append(m)
                act.append(a)
            rows = fs.rows.iloc[idx]
            batch += list(rows["batch_size"].to_numpy(np.float64))
            modes += list(rows["mode"]) if "mode" in rows else []
            precisions += list(rows["precision"]) if "precision" in rows else []
            models += list(rows["model"]) if "model" in rows else []
        return cls.of(batch, macs, act, modes, precisions, models) if batch else None

    # ----------------------------------------------------------------------------- reading
    def covers(self, mode: str | None, precision: str | None, kind: str | None = None) -> bool:
        """Whether the records include ``mode``, ``precision`` and, for a model of a zoo
        (:data:`ZOO_KINDS`: a transformer of ``hf`` is no timm image model), its spec ``kind``
        (unknown ones, files and in-process modules: yes — their graphs decide)."""
        return (not self.modes or mode is None or str(mode) in self.modes) and \
            (not self.precisions or precision is None or str(precision) in self.precisions) \
            and (not self.kinds or kind not in ZOO_KINDS or str(kind) in self.kinds)

    def _d2(self, batch, size) -> np.ndarray:
        b = np.log2(np.maximum(np.asarray(batch, dtype=np.float64), 1.0))
        m, a = (math.log2(max(float(x), 1e-30)) for x in size)
        return ((b[..., None] - self.points[:, 0]) ** 2 + (m - self.points[:, 1]) ** 2
                + (a - self.points[:, 2]) ** 2)

    def distance(self, batch, size) -> np.ndarray:
        """Octaves from each batch of a model of ``size`` (:func:`size_of`: MACs and activation
        bytes per sample) to the nearest training record (Euclidean in the log2 coordinates)."""
        return np.sqrt(self._d2(batch, size).min(axis=-1))

    def nearest(self, batch: float, size) -> tuple[int, float]:
        """``(batch, MACs per sample)`` of the training record nearest to the request."""
        i = int(np.argmin(self._d2([batch], size)[0]))
        return int(round(2 ** self.points[i, 0])), float(2 ** self.points[i, 1])

    def weight(self, batch, size, mode: str | None = None,
               precision: str | None = None, kind: str | None = None) -> np.ndarray:
        """How much of the learned answer to keep at each batch (1 inside the support, fading
        linearly to 0 over :attr:`fade_octaves`; 0 for a mode, precision or kind of model it
        never saw)."""
        if not self.covers(mode, precision, kind):
            return np.zeros(np.shape(batch))
        d = self.distance(batch, size)
        return np.clip(1.0 - (d - self.inside_octaves) / self.fade_octaves, 0.0, 1.0)

    def home(self, batches, size, mode: str | None = None, precision: str | None = None,
             kind: str | None = None) -> tuple[int | None, np.ndarray]:
        """Where a learned model knows a request's model, and how far that carries:
        ``(home, weights)`` over ascending ``batches`` — ``home`` the index of the batch
        nearest to the training records (``None`` when none is within reach: every weight 0),
        ``weights`` its :meth:`weight` × a fade in the batch distance from it (1 within
        :attr:`inside_octaves`, 0 beyond :attr:`inside_octaves` + :attr:`fade_octaves`).

        The learned model's residual over the physics base is read at ``home`` only and carried
        to the other batches by these weights: the public benchmarks ran each model at one batch
        (the largest that fit), so a learned model knows how a model departs from physics there,
        not how its time scales with the batch — the physics base's scaling is used for that."""
        b = np.asarray(batches, dtype=np.float64)
        w = self.weight(b, size, mode, precision, kind)
        if not np.any(w > 0):
            return None, np.zeros_like(b)
        h = int(np.argmin(self.distance(b, size)))
        octaves = np.abs(np.log2(b / b[h]))
        fade = np.clip(1.0 - (octaves - self.inside_octaves) / self.fade_octaves, 0.0, 1.0)
        return h, w[h] * fade

    def describe(self) -> str:
        """One phrase for notes: the record count and ranges."""
        return (f"{self.records:,} records, batch {self.batch_min:,}–{self.batch_max:,}, "
                f"{self.macs_min / 1e9:,.3g}–{self.macs_max / 1e9:,.3g} GMACs per sample"
                + (f", {'/'.join(self.kinds)} models" if self.kinds else "")
                + (f", {'/'.join(self.modes)}" if self.modes else "")
                + (f" {'/'.join(self.precisions)}" if self.precisions else ""))

    # ----------------------------------------------------------------------------- files
    def to_json(self) -> dict[str, Any]:
        return {"version": SUPPORT_VERSION, "modes": list(self.modes), "kinds": list(self.kinds),
                "precisions": list(self.precisions), "batch_min": self.batch_min,
                "batch_max": self.batch_max, "macs_min": self.macs_min,
                "macs_max": self.macs_max, "records": self.records,
                "inside_octaves": self.inside_octaves, "fade_octaves": self.fade_octaves,
                # one line: "log2 batch, log2 MACs, log2 activation bytes" per record, rows
                # separated by ";" (0.01 octave ≈ 0.7 % is finer than any record differs)
                "points": ";".join(",".join(f"{x:.2f}" for x in row) for row in self.points)}

    @classmethod
    def from_json(cls, doc: dict[str, Any] | None) -> Support | None:
        if not doc:
            return None
        from perfcast.errors import PerfcastError

        if int(doc.get("version", 0)) != SUPPORT_VERSION:
            raise PerfcastError(f"a predictor's support has version {doc.get('version')!r}; "
                                f"this perfcast reads {SUPPORT_VERSION} — retrain it")
        pts = doc["points"]
        if isinstance(pts, str):
            pts = [[float(x) for x in row.split(",")] for row in pts.split(";") if row]
        return cls(points=np.asarray(pts, dtype=np.float64).reshape(-1, 3),
                   modes=tuple(doc.get("modes", ())), precisions=tuple(doc.get("precisions", ())),
                   kinds=tuple(doc.get("kinds", ())),
                   batch_min=int(doc["batch_min"]), batch_max=int(doc["batch_max"]),
                   macs_min=float(doc["macs_min"]), macs_max=float(doc["macs_max"]),
                   records=int(doc["records"]),
                   inside_octaves=float(doc.get("inside_octaves", INSIDE_OCTAVES)),
                   fade_octaves=float(doc.get("fade_octaves", FADE_OCTAVES)))


def size_of(summary) -> tuple[float, float]:
    """``(MACs, activation bytes)`` per sample of a graph's
    :class:`~perfcast.features.records.GraphSummary` (NaN for ``None``)."""
    if summary is None:
        return float("nan"), float("nan")
    n = max(1, int(summary.batch))
    return float(summary.macs) / n, float(summary.activation_bytes) / n


def _kind(spec: str) -> str:
    """The spec kind of a model spec string (``timm:resnet50`` → ``timm``; a file → ``file``)."""
    head, sep, _ = spec.partition(":")
    return head if sep and "/" not in head and "." not in head else "file"


__all__ = ["FADE_OCTAVES", "INSIDE_OCTAVES", "SUPPORT_VERSION", "ZOO_KINDS", "Support", "size_of"]
