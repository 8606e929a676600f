"""The batch rule: time per batch and throughput never fall as the batch grows, on a curve over
:data:`~perfcast.routing.answer.BATCH_GRID`, and reading it between grid points."""

from __future__ import annotations

import weakref


#: Learned answers on :data:`BATCH_GRID`: per predictor (held weakly: a saved predictor loaded
#: for one request goes with it), by (target, request with the batch aside, device, threads).
_GRID_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: :meth:`_Request.curve` results, keyed as :data:`_GRID_CACHE`.
_CURVE_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def monotone_curve(batches, values):
    """The batch rule on a curve of times over ascending ``batches``: **throughput never falls**
    — a batch is never slower per sample than a smaller one, which it could run as chunks of
    that size (``log t − log b`` capped by its running minimum from the smallest batch up) —
    and then **time per batch never falls** (``log t`` raised to its running maximum; this keeps
    the first rule). Small batches keep their answers; only a larger batch that would break a
    rule moves. NaN points are left out and filled by log-log interpolation. A curve that
    already obeys the rule is returned unchanged."""
    import numpy as np

    b = np.asarray(batches, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v) & (v > 0)
    if ok.sum() < 2:
        return v.copy()
    x, y = np.log(b[ok]), np.log(v[ok])
    z = np.maximum.accumulate(np.minimum.accumulate(y - x) + x)
    out = np.full_like(v, np.nan)
    out[ok] = np.where(np.abs(z - y) <= 1e-12, v[ok], np.exp(z))  # unmoved points exactly
    if not ok.all():
        out[~ok] = np.exp(np.interp(np.log(b[~ok]), x, z))
    return out


def curve_at(batches, values, batch: float) -> float:
    """A curve of :func:`monotone_curve` at ``batch``: log-log interpolation between its points
    (so the batch rule holds between them), linear in the batch beyond the last."""
    import math

    import numpy as np

    b = np.asarray(batches, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v) & (v > 0)
    if not ok.any():
        return float("nan")
    hit = np.flatnonzero(ok & (b == float(batch)))
    if len(hit):  # a grid batch: its value exactly
        return float(v[hit[0]])
    x, y = np.log(b[ok]), np.log(v[ok])
    lb = math.log(max(float(batch), 1.0))
    if lb >= x[-1]:
        return float(math.exp(y[-1] + (lb - x[-1])))
    if lb <= x[0]:
        return float(math.exp(y[0]))
    return float(math.exp(np.interp(lb, x, y)))
