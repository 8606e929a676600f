"""perfcast's own measurements (``perfcast collect`` stores) as labeled datasets.

``load_measurements(store)`` turns any measurement store (SQLite file, SQLAlchemy URL, or an
exported ``.parquet`` / ``.csv``) into the common record schema; ``load_local_cpu()`` loads the
project's CPU dataset at :func:`~perfcast.paths.local_cpu_db`
(``$PERFCAST_DATASETS/cpu/measurements.db``; a repository checkout has it in ``datasets/cpu/``, so
set ``PERFCAST_DATASETS=datasets``). Rows that are not training examples are counted in the
report: failed runs (OOM/timeout/error — kept in the store as the OOM boundary) and
re-measurements (``repeat > 0``, used for test-retest).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from perfcast.datasets._base import Drops, LoadReport, finalize, with_report
from perfcast.errors import PerfcastError
from perfcast.paths import DATASETS_ENV, local_cpu_db
from perfcast.store.db import display_url


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

    store = MeasurementStore(s, readonly=True)  # a loader changes nothing (no migration)
    try:  # a URL is named with its password masked
        return store.to_dataframe(), Path(s).name if "://" not in s else store.target
    finally:
        store.close()


def family_of(spec: str) -> str | None:
    """The family a model spec is counted in (timm module, torchvision family, ``hf:<stem>``, or
    the spec kind)."""
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
    rep = LoadReport(source=name, rows_in=len(raw), path=display_url(source))
    drops = Drops(raw.index)
    if "status" in raw.columns:
        for status in ("oom", "timeout", "failed"):
            drops.mark(raw["status"] == status, f"not a label: {status} run (kept in the store)")
    if not include_repeats and "repeat" in raw.columns:
        drops.mark(raw["repeat"].fillna(0) > 0, "re-measurement (repeat > 0; test-retest only)")
    drops.mark(raw["time_ms_median"].isna() & raw["peak_tensor_mb"].isna(), "no target value")
    kept = raw[drops.kept]
    rec = pd.DataFrame({
        "model": kept["model"], "family": [family_of(m) for m in kept["model"]],
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
    src = Path(path) if path is not None else local_cpu_db()
    if not src.exists():
        raise PerfcastError(f"local CPU dataset not found at {src}: set {DATASETS_ENV} to the "
                            f"folder of perfcast's datasets (datasets/ in the repository; the "
                            f"documentation's Files and environment page) or pass path= to "
                            f"another store")
    return load_measurements(src, include_repeats=include_repeats)


__all__ = ["load_local_cpu", "load_measurements", "local_cpu_db"]


REQUIRED_COLUMNS = ("model", "device", "mode", "precision", "batch_size")


def load_labeled(path: str | os.PathLike) -> pd.DataFrame:
    """Labeled records from a measurement store (``.db`` / SQLAlchemy URL / store export) or a
    CSV/Parquet in the dataset schema (columns ``model, device, mode, precision, batch_size`` and
    at least one of ``time_ms`` (ms per batch), ``memory_mb`` (MiB), ``energy_j`` (J))."""
    s = str(path)
    p = Path(s)
    if "://" not in s and not p.exists():
        raise PerfcastError(f"training data not found: {p}")
    if p.suffix in (".csv", ".parquet"):
        try:
            raw = pd.read_csv(p) if p.suffix == ".csv" else pd.read_parquet(p)
        except Exception as exc:  # noqa: BLE001 - any parse failure is a bad file
            raise PerfcastError(f"{p}: unreadable ({type(exc).__name__}: {exc})") from None
        if "time_ms_median" not in raw.columns:
            missing = [c for c in REQUIRED_COLUMNS if c not in raw.columns]
            if missing:
                raise PerfcastError(f"{p}: missing column(s) {', '.join(missing)} (need "
                                    f"{', '.join(REQUIRED_COLUMNS)} and a target)")
            if not {"time_ms", "memory_mb", "energy_j"} & set(raw.columns):
                raise PerfcastError(f"{p}: no target column (time_ms, memory_mb or energy_j)")
            df = raw.copy()
            if "family" not in df.columns:
                df["family"] = [family_of(str(m)) or str(m) for m in df["model"]]
            for c in ("input_size", "seq_len", "optimizer", "time_ms", "memory_mb", "energy_j"):
                if c not in df.columns:
                    df[c] = None
            df["source"] = p.name
            return df
    return load_measurements(s)
