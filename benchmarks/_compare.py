"""One predictor's evaluation beside the others' on the same test records (reports of issue #19).

``perfcast evaluate`` writes ``<root>/<task>/<split>/predictions.csv`` (one row per test record,
predictor, fold and seed). A new predictor is often run on fewer seeds than the predictors in
``reports/eval``: :func:`same_records` keeps the other predictors' rows of the seeds it ran and
refuses (warns and leaves out) a predictor whose test records differ, so every row of a table
scores the same records.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
#: predictor → report root of its runs on the shared tasks
OTHERS = {"dippm": ROOT / "reports" / "eval", "nnlqp": ROOT / "reports" / "eval",
          "mlp": ROOT / "reports" / "eval", "xgboost": ROOT / "reports" / "eval",
          "trappm": ROOT / "reports" / "trappm" / "eval",
          "dnnperf": ROOT / "reports" / "dnnperf" / "eval"}


def preds(root: Path, task: str, split: str, name: str | None) -> pd.DataFrame | None:
    """Rows of ``name`` (all predictors: ``None``) in a report's predictions.csv, or ``None``."""
    f = Path(root) / task / split / "predictions.csv"
    if not f.exists():
        return None
    df = pd.read_csv(f)
    return df[df["predictor"] == name] if name else df


def scores(df: pd.DataFrame, scale: float = 1.0) -> dict[str, float]:
    """MAPE (pooled), family-averaged MAPE, median APE, Acc(10 %) (%) and RMSE (× ``scale``)."""
    a, p = df["actual"].to_numpy(float), df["predicted"].to_numpy(float)
    ape = np.abs(p - a) / a
    fam = df.assign(ape=ape).groupby("family")["ape"].mean()
    return {"records": len(df), "mape": 100 * ape.mean(), "fam_mape": 100 * fam.mean(),
            "median_ape": 100 * float(np.median(ape)), "acc10": 100 * float((ape <= 0.10).mean()),
            "rmse": float(np.sqrt(np.mean(((p - a) * scale) ** 2)))}


def _key(df: pd.DataFrame) -> set:
    return set(zip(df["seed"], df["fold"], df["record"]))


def same_records(ours: pd.DataFrame, task: str, split: str, others: dict[str, Path] | None = None,
                 scale: float = 1.0) -> list[tuple[str, dict[str, float]]]:
    """``[(predictor, scores)]`` of the ``others`` (default :data:`OTHERS`) on exactly the test
    records of ``ours`` (its seeds), sorted by MAPE; ``ours``' own predictor is not repeated."""
    seeds = set(ours["seed"])
    keys = _key(ours)
    own = set(ours["predictor"])
    rows = []
    for name, root in (others or OTHERS).items():
        if name in own:
            continue
        df = preds(root, task, split, name)
        if df is None or df.empty:
            continue
        df = df[df["seed"].isin(seeds)]
        if _key(df) != keys:
            print(f"warning: {name} {task}/{split}: other test records than "
                  f"{'/'.join(sorted(own))}'s — left out", file=sys.stderr)
            continue
        rows.append((name, scores(df, scale)))
    return sorted(rows, key=lambda r: r[1]["mape"])
