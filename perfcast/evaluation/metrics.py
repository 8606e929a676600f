"""Accuracy metrics of a predictor on labeled records.

All take ``y`` (measured) and ``yhat`` (predicted) in the target's units. Records whose label is
missing (NaN) or not positive are skipped (they are not measurements); records whose prediction
is not finite are skipped too and counted in ``n_missing`` — a predictor that returns NaN is
visible in every report instead of silently scoring well.

============  ===============================================================================
``mape``      mean absolute percentage error, % (TraPPM Eq. 1, DNNPerf's MRE)
``rmse``      root mean square error, target units (ms, MiB, J)
``kendall``   Kendall τ-b between measured and predicted (ranking quality; ``scipy``)
``acc5``      % of predictions within 5 % relative error
``acc10``     % of predictions within 10 % relative error
============  ===============================================================================
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Metric columns in report order (``n`` / ``n_missing`` are counts).
METRICS: tuple[str, ...] = ("mape", "rmse", "kendall", "acc5", "acc10")
METRIC_LABELS = {"mape": "MAPE %", "rmse": "RMSE", "kendall": "Kendall τ", "acc5": "Acc(5%) %",
                 "acc10": "Acc(10%) %"}


def _clean(y, yhat) -> tuple[np.ndarray, np.ndarray, int]:
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    yhat = np.asarray(yhat, dtype=np.float64).reshape(-1)
    if y.shape != yhat.shape:
        raise ValueError(f"y and yhat differ in length ({len(y)} vs {len(yhat)})")
    labeled = np.isfinite(y) & (y > 0)
    ok = labeled & np.isfinite(yhat)
    return y[ok], yhat[ok], int((labeled & ~np.isfinite(yhat)).sum())


def mape(y, yhat) -> float:
    """Mean absolute percentage error (%)."""
    y, yhat, _ = _clean(y, yhat)
    return float(np.mean(np.abs(yhat - y) / y) * 100.0) if len(y) else float("nan")


def rmse(y, yhat) -> float:
    """Root mean square error (target units)."""
    y, yhat, _ = _clean(y, yhat)
    return float(np.sqrt(np.mean((yhat - y) ** 2))) if len(y) else float("nan")


def kendall_tau(y, yhat) -> float:
    """Kendall τ-b (NaN with fewer than two records or a constant side)."""
    from scipy.stats import kendalltau

    y, yhat, _ = _clean(y, yhat)
    if len(y) < 2 or np.all(y == y[0]) or np.all(yhat == yhat[0]):
        return float("nan")
    return float(kendalltau(y, yhat).statistic)


def acc_within(y, yhat, tol: float) -> float:
    """% of predictions whose relative error ``|yhat - y| / y`` is ≤ ``tol`` (0.05 = 5 %)."""
    y, yhat, _ = _clean(y, yhat)
    if not len(y):
        return float("nan")
    return float(np.mean(np.abs(yhat - y) / y <= tol + 1e-12) * 100.0)


def regression_metrics(y, yhat) -> dict[str, float]:
    """``{"n", "n_missing", "mape", "rmse", "kendall", "acc5", "acc10"}``."""
    yc, yhc, missing = _clean(y, yhat)
    return {"n": int(len(yc)), "n_missing": missing, "mape": mape(yc, yhc), "rmse": rmse(yc, yhc),
            "kendall": kendall_tau(yc, yhc), "acc5": acc_within(yc, yhc, 0.05),
            "acc10": acc_within(yc, yhc, 0.10)}


def metrics_by_group(y, yhat, groups: Sequence) -> dict[str, dict[str, float]]:
    """:func:`regression_metrics` per value of ``groups`` (e.g. the model family)."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    yhat = np.asarray(yhat, dtype=np.float64).reshape(-1)
    groups = np.asarray(groups, dtype=object).reshape(-1)
    return {str(g): regression_metrics(y[groups == g], yhat[groups == g])
            for g in sorted(set(groups.tolist()), key=str)}
