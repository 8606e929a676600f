"""perfcast's own measurements (``perfcast collect`` stores) as labeled datasets.

``load_measurements(store)`` turns any measurement store (SQLite file, SQLAlchemy URL, or an
exported ``.parquet`` / ``.csv``) into the common record schema; ``load_local_cpu()`` loads the
project's committed CPU dataset (``datasets/cpu/measurements.db`` in a repo checkout). Rows that
are not training examples are counted in the report: failed runs (OOM/timeout/error — kept in
the store as the OOM boundary) and re-measurements (``repeat > 0``, used for test-retest).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from perfcast.datasets._base import Drops, LoadReport, finalize, with_report
from perfcast.errors import PerfcastError

#: Where the project's own CPU dataset lives in a repository checkout.
LOCAL_CPU_DB = Path(__file__).resolve().parents[2] / "datasets" / "cpu" / "measurements.db"


def _read(source: str | os.PathLike) -> tuple[pd.DataFrame, str]:
    s = str(source)
    if "://" not in s:
        p = Path(s)
        if not p.exists():
            raise PerfcastError(f"measurement data not found: {p}")
        if p.suffix == ".parquet":
            return pd.read_parquet(p), p.name
        if p.suffix == ".csv":
            return pd.read_csv(p), p.name
    from perfcast.store import MeasurementStore

    store = MeasurementStore(s)
    try:
        return store.to_dataframe(), Path(s).name if "://" not in s else s
    finally:
        store.close()


def _family(spec: str) -> str | None:
    from perfcast.datasets.names import resolve_timm, resolve_torchvision

    kind, _, name = spec.partition(":")
    if kind == "timm":
        return resolve_timm(name).family
    if kind in ("torchvision", "tv"):
        return resolve_torchvision(name).family
    if kind == "hf":
        return "hf:" + name.split("/")[-1].split("-")[0].lower()
    return kind


def load_measurements(source: str | os.PathLike, *, include_repeats: bool = False) -> pd.DataFrame:
    """Records of a measurement store (``status == ok``, first measurements by default)."""
    raw, name = _read(source)
    rep = LoadReport(source=name, rows_in=len(raw), path=str(source))
    drops = Drops(raw.index)
    if "status" in raw.columns:
        for status in ("oom", "timeout", "failed"):
            drops.mark(raw["status"] == status, f"not a label: {status} run (kept in the store)")
    if not include_repeats and "repeat" in raw.columns:
        drops.mark(raw["repeat"].fillna(0) > 0, "re-measurement (repeat > 0; test-retest only)")
    drops.mark(raw["time_ms_median"].isna() & raw["peak_tensor_mb"].isna(), "no target value")
    kept = raw[drops.kept]
    rec = pd.DataFrame({
        "model": kept["model"], "family": [_family(m) for m in kept["model"]],
        "device": kept["device"], "mode": kept["mode"], "precision": kept["precision"],
        "batch_size": kept["batch_size"].astype("int64"), "input_size": kept["input_size"],
        "seq_len": kept["seq_len"], "time_ms": kept["time_ms_median"],
        "memory_mb": kept["peak_tensor_mb"], "energy_j": kept["energy_j"],
        "power_w": kept["power_w"], "censored": False, "num_gpus": 1, "source": name,
        "source_row": kept.index.astype("int64"), "raw_model": kept["model"],
        "optimizer": kept["optimizer"], "time_ms_mean": kept["time_ms_mean"],
        "time_ms_p10": kept["time_ms_p10"], "time_ms_p90": kept["time_ms_p90"],
        "memory_kind": "peak_live_tensor_bytes",
        "rss_increase_mb": kept["rss_increase_mb"], "threads": kept["threads"],
        "repeat": kept["repeat"], "graph_key_store": kept["graph_key"],
    })
    df = finalize(rec)
    rep.rows_out = len(df)
    rep.dropped = drops.counts()
    rep.describe(df)
    return with_report(df, rep)


def load_local_cpu(path: str | os.PathLike | None = None, *, include_repeats: bool = False) -> pd.DataFrame:
    """The project's own CPU dataset (measured with ``perfcast collect`` on the dev machine)."""
    src = Path(path) if path is not None else LOCAL_CPU_DB
    if not src.exists():
        raise PerfcastError(f"local CPU dataset not found at {src}: it ships in the repository "
                            f"(datasets/cpu/); pass path= to another store")
    return load_measurements(src, include_repeats=include_repeats)


__all__ = ["LOCAL_CPU_DB", "load_local_cpu", "load_measurements"]
