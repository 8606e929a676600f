"""The batch rule: time per batch and throughput never fall as the batch grows, on a curve over
:data:`~perfcast.routing.answer.BATCH_GRID` (by chunks for a physics model, by support-weighted
least squares for a learned one), and reading it between grid points."""

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
    """The batch rule on a curve of times over ascending ``batches``: time per batch never falls
    and throughput never falls as the batch grows (``log t`` non-decreasing, ``log t − log b``
    non-increasing). Which points move depends on what the curve is:

    * ``weights`` ``None`` — a physics model's curve (every batch priced alike): **by chunks**. A
      batch slower per sample than a smaller one is capped at that smaller batch's rate (it could
      run as chunks of it: ``log t − log b`` capped by its running minimum from the smallest
      batch up), then a time that falls is raised to the smaller batch's (running maximum,
      which keeps the first rule). Small batches keep their answers.
    * ``weights`` given — a learned model read inside its support and faded to the physics base
      outside it: the closest curve obeying both rules (least squares in log time, weighted by
      the support, Dykstra's alternating projections onto the two isotonic sets), so the points
      the model learned move least.

    NaN points are left out and filled by log-log interpolation. A curve that already obeys the
    rule is returned unchanged."""
    import numpy as np

    b = np.asarray(batches, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v) & (v > 0)
    if ok.sum() < 2:
        return v.copy()
    x, y = np.log(b[ok]), np.log(v[ok])
    if weights is None:
        z = np.maximum.accumulate(np.minimum.accumulate(y - x) + x)
    else:
        w = np.asarray(weights, dtype=np.float64)[ok]
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
