"""The batch rule: time per batch and throughput never fall as the batch grows — the closest
such curve over :data:`~perfcast.routing.answer.BATCH_GRID` in log time (weighted isotonic
regression, alternating projections), and reading it between grid points."""

from __future__ import annotations

import weakref


#: Learned answers on :data:`BATCH_GRID`: per predictor (held weakly: a saved predictor loaded
#: for one request goes with it), by (target, request with the batch aside, device, threads).
_GRID_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: :meth:`_Request.curve` results, keyed as :data:`_GRID_CACHE`.
_CURVE_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _pava(y, w):
    """Weighted isotonic (non-decreasing) regression of ``y`` (pool-adjacent-violators)."""
    import numpy as np

    vals, wts, cnt = [], [], []
    for yi, wi in zip(y, w):
        vals.append(float(yi))
        wts.append(float(wi))
        cnt.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            tw = wts[-2] + wts[-1]
            v = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / tw
            c = cnt[-2] + cnt[-1]
            vals[-2:], wts[-2:], cnt[-2:] = [v], [tw], [c]
    return np.repeat(vals, cnt)


def monotone_curve(batches, values, weights=None, iterations: int = 200):
    """The batch rule on a curve of times over ascending ``batches``: the closest curve (least
    squares in log time, ``weights`` per point) along which **time per batch never falls and
    throughput never falls** as the batch grows — ``log t`` non-decreasing and ``log t − log b``
    non-increasing (Dykstra's alternating projections onto the two isotonic sets). NaN points
    are left out and filled by interpolation. A curve that already obeys the rule is returned
    unchanged."""
    import numpy as np

    b = np.asarray(batches, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v) & (v > 0)
    if ok.sum() < 2:
        return v.copy()
    x, y = np.log(b[ok]), np.log(v[ok])
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=np.float64)[ok]
    z = y.copy()
    if not (np.all(np.diff(z) >= -1e-12) and np.all(np.diff(z - x) <= 1e-12)):
        p = np.zeros_like(z)
        q = np.zeros_like(z)
        for _ in range(iterations):
            a = _pava(z + p, w)
            p = z + p - a
            c = x - _pava(-(a + q - x), w)
            q = a + q - c
            if np.max(np.abs(c - z)) < 1e-10:
                z = c
                break
            z = c
        # the last projection is onto the throughput set; clean round-off in the time set
        z = np.maximum.accumulate(z)
        z = np.minimum(z, np.minimum.accumulate(z - x) + x)
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
