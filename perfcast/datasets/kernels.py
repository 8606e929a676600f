"""NeuSight's operator-level kernel latencies (``neusight/ops/``): sitar-lab/NeuSight, the ASPLOS'25
artifact (MIT). PyTorch 2.1, CUDA 12.1, fp32; one row = one operator on one GPU with its
dimensions and the measured latency in ms.

``load_kernels("train")`` reads ``neusight/ops/train/<op>/<GPU>.csv`` (five GPUs per op: P4,
P100, T4, V100, A100-40GB; conv: A100-80GB instead of A100-40GB); ``load_kernels("test")`` reads
``neusight/ops/test/*.csv``, NeuSight's test sets (larger dimensions than training, and L4 and
A100-80GB rows). The test files overlap: ``vec.csv`` and ``habitat.csv`` are the same rows,
``elem.csv`` + ``ln.csv`` + ``softmax.csv``; every file is kept (``source`` tells them apart) and
the report flags the rows another file repeats — select by ``source`` before pooling.

Columns of the frame (one per row):

==================  ==========================================================================
``op``              the CSV's ``OPName`` (``bmm``, ``linear``, ``conv``, ``ln``, ``softmax``,
                    ``add`` … :data:`perfcast.predictors.kernels.OP_CLASS`)
``kernel_class``    ``gemm`` | ``conv`` | ``norm`` | ``softmax`` | ``elementwise``
dims                ``B, M, N, K`` (GEMMs; ``linear`` has ``B = 1``); conv ``B, Input_Channel,
                    Output_Channel, Kernel_Szie`` (sic) ``, Input_Size, Stride, Padding``; the
                    others ``B, H``. float64, NaN where the class has no such dimension
``device``          the CSV's ``Device`` name (``Tesla T4`` …)
``device_key``      perfcast registry key (:data:`DEVICE_KEYS`, the one mapping table)
``latency_ms``      the measured latency (ms)
``kernel_name``     the launched kernel NeuSight recorded — a measured *output*, never a
                    model input (unknown for a GPU nobody ran)
``source``          file relative to the data directory; ``source_row`` its 0-based data row
==================  ==========================================================================

``df.attrs["report"]`` is a :class:`~perfcast.datasets.LoadReport` (``.parts`` per file): rows
dropped for an unknown op or device, a missing/invalid latency or dimension, or as a repeat of
an earlier row of the same file (same op, device and dimensions).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.datasets._base import (
    Drops,
    LoadReport,
    positive_number,
    read_csv,
    require_columns,
    resolve_data_dir,
    with_report,
)
from perfcast.errors import PerfcastError, unknown_choice
from perfcast.predictors.kernels import CLASS_DIMS, OP_CLASS

OPS_DIR = "neusight/ops"
SPLITS = ("train", "test")

#: The CSV's ``Device`` names → perfcast registry keys (the one place to change the mapping).
DEVICE_KEYS: dict[str, str] = {
    "Tesla P4": "p4",
    "Tesla P100-PCIE-16GB": "p100-16gb-pcie",
    "Tesla T4": "t4",
    "Tesla V100-PCIE-32GB": "v100-32gb-pcie",
    "NVIDIA A100-PCIE-40GB": "a100-40gb-pcie",
    "NVIDIA A100 80GB PCIe": "a100-80gb-pcie",
    "NVIDIA L4": "l4",
}

#: Every dimension column of the frame, in order.
DIM_COLUMNS: tuple[str, ...] = ("B", "M", "N", "K", "H", "Input_Channel", "Output_Channel",
                                "Kernel_Szie", "Input_Size", "Stride", "Padding")
COLUMNS: tuple[str, ...] = ("op", "kernel_class", *DIM_COLUMNS, "device", "device_key",
                            "latency_ms", "kernel_name", "source", "source_row")
#: Dimensions that may be 0.
_MAY_BE_ZERO = frozenset({"Padding"})
UPSTREAM = "sitar-lab/NeuSight (ASPLOS'25 artifact), neusight/ops"


def kernel_files(split: str = "train", data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The CSV files of a split, sorted."""
    if split not in SPLITS:
        raise unknown_choice("kernel split", split, SPLITS)
    root = resolve_data_dir(data_dir) / OPS_DIR / split
    pattern = "*/*.csv" if split == "train" else "*.csv"
    files = sorted(root.glob(pattern))
    if not files:
        raise PerfcastError(f"no kernel measurements under {root} (set PERFCAST_DATA to the "
                            f"shared data folder, or pass data_dir=)")
    return files


def _empty() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series([], dtype=object) for c in COLUMNS})
    for c in (*DIM_COLUMNS, "latency_ms"):
        df[c] = df[c].astype("float64")
    df["source_row"] = df["source_row"].astype("int64")
    return df


def _load_file(path: Path, relative: str) -> tuple[pd.DataFrame, LoadReport]:
    raw = read_csv(path)
    require_columns(raw, path, ["OPName", "Latency", "Device"])
    report = LoadReport(source=relative, rows_in=len(raw), path=str(path))
    drops = Drops(raw.index)
    op = raw["OPName"].astype(object).map(lambda s: str(s).strip() if pd.notna(s) else "")
    drops.mark_each(op.map(lambda o: None if o in OP_CLASS else f"unknown operator {o!r}"))
    dev = raw["Device"].astype(object).map(lambda s: str(s).strip() if pd.notna(s) else "")
    from perfcast.datasets.neusight import registry_key

    keys = {d: registry_key(d, DEVICE_KEYS) for d in dev.unique()}
    drops.mark_each(dev.map(lambda d: None if keys[d] else
                            f"device {d!r} not in the kernel device table / registry"))
    lat = positive_number(raw["Latency"])
    drops.mark(lat.isna(), "missing target value (Latency missing or not > 0)")
    kclass = op.map(OP_CLASS)
    dims = pd.DataFrame(index=raw.index)
    for name in DIM_COLUMNS:
        dims[name] = pd.to_numeric(raw[name], errors="coerce").astype("float64") \
            if name in raw.columns else np.nan
    for kc, needed in CLASS_DIMS.items():
        rows = kclass == kc
        if not rows.any():
            continue
        for name in needed:
            v = dims[name]
            lo_ok = (v >= 0) if name in _MAY_BE_ZERO else (v > 0)
            bad = rows & ~(np.isfinite(v) & lo_ok & (v == np.floor(v)))
            drops.mark(bad, f"missing or invalid dimension {name}")
        for name in set(DIM_COLUMNS) - set(needed):  # not this class's: NaN
            dims.loc[rows, name] = np.nan
    out = pd.DataFrame(index=raw.index)
    out["op"] = op
    out["kernel_class"] = kclass
    for name in DIM_COLUMNS:
        out[name] = dims[name]
    out["device"] = dev
    out["device_key"] = dev.map(keys)
    out["latency_ms"] = lat
    out["kernel_name"] = raw["Kernel Name"].astype(object) if "Kernel Name" in raw.columns \
        else None
    out["source"] = relative
    out["source_row"] = raw.index.astype("int64")
    keep = drops.kept
    out = out[keep]
    dup = out.duplicated(["op", "device", *DIM_COLUMNS], keep="first")
    if dup.any():
        drops.mark(dup.reindex(raw.index, fill_value=False),
                   "duplicate row (same op, device and dimensions as an earlier row of the file)")
        out = out[~dup]
    report.dropped = drops.counts()
    report.examples = drops.examples(op + " on " + dev)
    report.rows_out = len(out)
    report.devices = sorted(out["device_key"].unique().tolist())
    return out, report


def load_kernels(split: str = "train", data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """NeuSight's kernel latencies of ``split`` (``"train"`` or ``"test"``) as one frame over
    all ops (columns in the module doc); ``df.attrs["report"]`` counts every dropped row."""
    root = resolve_data_dir(data_dir)
    frames, parts = [], []
    for path in kernel_files(split, root):
        relative = path.relative_to(root).as_posix()
        frame, rep = _load_file(path, relative)
        frames.append(frame)
        parts.append(rep)
    df = pd.concat(frames, ignore_index=True) if frames else _empty()
    df = df[list(COLUMNS)].reset_index(drop=True)
    report = LoadReport.combine(f"{OPS_DIR}/{split}", parts)
    report.devices = sorted(df["device_key"].unique().tolist())
    if split == "test" and len(df):
        key = ["op", "device", *DIM_COLUMNS]
        repeated = df.duplicated(key, keep=False) & \
            (df.groupby(key, dropna=False)["source"].transform("nunique") > 1)
        for rep in parts:
            n = int(repeated[df["source"] == rep.source].sum())
            if n:
                rep.flags["row also in another test file (vec.csv = habitat.csv = elem + ln + "
                          "softmax): select by source before pooling"] = n
        report = LoadReport.combine(f"{OPS_DIR}/{split}", parts)
        report.devices = sorted(df["device_key"].unique().tolist())
    return with_report(df, report)


__all__ = ["COLUMNS", "DEVICE_KEYS", "DIM_COLUMNS", "OPS_DIR", "kernel_files", "load_kernels"]
