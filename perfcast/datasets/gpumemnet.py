"""GPUMemNet peak training memory of timm models on one A100 40 GB.

Source columns: ``model`` (timm name), ``batch_size``, ``max_gpu_memory_mib`` (nvidia-smi peak,
so CUDA context + cuDNN workspaces + the caching allocator's reserve are included) and
``faketensor_estimate_mb`` (the authors' FakeTensor estimate, an analytical peer to beat — kept
as a column, never a label; its unit is the authors' "MB", taken as is).

Assumptions (the source does not document them; the README says "timm training defaults are the
likely setup: 224 px or the model's default size, fp32, SGD"): device ``a100-40gb``, mode
``train``, precision ``fp32``, optimizer ``sgd-momentum`` (timm's ``sgd``), input size = the
model's default pretrained-config size (224 for most, 384 for ``*_384`` ...: the data supports
this — e.g. ``beit_base_patch16_384`` needs 1.7x the memory of ``..._224`` at batch 8, and timm's
fixed-size ViTs cannot run at another size). The ``assumed`` column lists these fields.

Censoring: a reading >= 40,000 MiB is saturated/OOM, so the true need is >= capacity
(``censored=True``, ``censor_at_mb=40000``, ``censor_reason="reading >= 40000 MiB"``). Peak
memory does not shrink when the batch grows, so every larger batch of a model that was censored
at a smaller batch is censored too (``"larger batch than a censored run"``) — whatever its
reading, which is then a failed run's leftover, not a bound.

Failed runs: a reading below ``collapse_ratio`` (default 0.5) of the same model's reading at a
smaller batch is a run that died early (e.g. ``beit_base_patch16_384``: 28,523 MiB at 64 then
3,125 MiB at 128); those rows are dropped (``drop_failed=False`` keeps them, ``suspect=True``).
Milder drops (below 90 % of a smaller batch's reading) are kept with ``suspect=True``.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from perfcast.datasets._base import (
    Drops,
    drop_duplicates,
    empty_frame,
    LoadReport,
    data_file,
    finalize,
    positive_int,
    positive_number,
    read_csv,
    require_columns,
    resolve_data_dir,
    with_report,
)
from perfcast.datasets.names import resolve_timm

FILE = "gpumemnet-timm-train-memory-a100.csv"
DEVICE = "a100-40gb"
CENSOR_MIB = 40000.0
SUSPECT_RATIO = 0.9

R_CENSORED = "reading >= 40000 MiB"
R_IMPLIED = "larger batch than a censored run of the same model"


def load_gpumemnet(data_dir: str | os.PathLike | None = None, *, drop_failed: bool = True,
                   collapse_ratio: float = 0.5) -> pd.DataFrame:
    """GPUMemNet rows as labeled records (``memory_mb`` in MiB); ``df.attrs["report"]``."""
    path = data_file(resolve_data_dir(data_dir), FILE)
    raw = read_csv(path)
    require_columns(raw, path, ["model", "batch_size", "max_gpu_memory_mib"])
    report = LoadReport(source=path.name, rows_in=len(raw), path=str(path))
    drops = Drops(raw.index)

    names = raw["model"].astype(object).map(lambda s: str(s).strip() if pd.notna(s) else None)
    drops.mark(names.isna() | (names == ""), "missing model name")
    mem = positive_number(raw["max_gpu_memory_mib"])
    drops.mark(mem.isna(), "missing target value (max_gpu_memory_mib missing or not > 0)")
    batch = positive_int(raw["batch_size"])
    drops.mark(batch.isna(), "missing or invalid batch size")
    resolved = {n: resolve_timm(n) for n in names.dropna().unique() if n}
    drops.mark_each(names.map(lambda n: resolved[n].reason if n in resolved else None))

    keep = drops.kept
    if not keep.any():
        return _empty(raw, drops, report, names)
    res = names[keep].map(resolved.__getitem__)
    rec = pd.DataFrame(index=raw.index[keep])
    rec["model"] = res.map(lambda r: r.spec)
    rec["family"] = res.map(lambda r: r.family)
    rec["device"] = DEVICE
    rec["mode"] = "train"
    rec["precision"] = "fp32"
    rec["batch_size"] = batch[keep].astype("int64")
    sizes = res.map(lambda r: r.default_input_size)
    rec["input_size"] = sizes.map(lambda s: ",".join(map(str, s)) if s else "3,224,224")
    rec["memory_mb"] = mem[keep]
    rec["num_gpus"] = 1
    rec["source"] = path.name
    rec["source_row"] = rec.index.astype("int64")
    rec["raw_model"] = names[keep]
    rec["arch"] = res.map(lambda r: r.arch)
    rec["renamed"] = res.map(lambda r: r.renamed)
    rec["optimizer"] = "sgd-momentum"
    rec["memory_kind"] = "nvml_used"
    rec["assumed"] = "input_size,precision,optimizer"
    if "faketensor_estimate_mb" in raw.columns:
        rec["faketensor_estimate_mb"] = pd.to_numeric(raw.loc[keep, "faketensor_estimate_mb"],
                                                      errors="coerce")

    rec = drop_duplicates(rec, drops, ["model", "batch_size"], "same resolved model and batch")

    # --- censoring and failed runs, per model in batch order
    rec = rec.sort_values(["model", "batch_size"], kind="stable")
    g = rec.groupby("model", sort=False)
    direct = rec["memory_mb"] >= CENSOR_MIB
    first_cens = rec["batch_size"].where(direct).groupby(rec["model"]).transform("min")
    implied = ~direct & (rec["batch_size"] > first_cens)
    censored = direct | implied
    prev_max = g["memory_mb"].transform(lambda s: s.cummax().shift(1))
    ratio = rec["memory_mb"] / prev_max
    collapsed = ~censored & (ratio < collapse_ratio)
    suspect = ~censored & (ratio < SUSPECT_RATIO)

    rec["censored"] = censored
    rec["censor_reason"] = np.where(direct, R_CENSORED, np.where(implied, R_IMPLIED, None))
    rec["censor_at_mb"] = np.where(censored, CENSOR_MIB, np.nan)
    rec["suspect"] = suspect
    if drop_failed:
        drops.mark(collapsed.reindex(raw.index, fill_value=False),
                   f"failed run: reading < {collapse_ratio:.0%} of the same model's reading at a "
                   f"smaller batch (and not censored)")
        rec = rec[~collapsed]
    rec = rec.sort_index()

    report.flags[f"censored: {R_CENSORED}"] = int((rec["censor_reason"] == R_CENSORED).sum())
    report.flags[f"censored: {R_IMPLIED} (reading is not a bound)"] = int(
        (rec["censor_reason"] == R_IMPLIED).sum())
    report.flags[f"suspect: reading < {SUSPECT_RATIO:.0%} of a smaller batch's reading"] = int(
        rec["suspect"].sum())
    report.flags = {k: v for k, v in report.flags.items() if v}
    frame = finalize(rec)
    report.dropped = drops.counts()
    report.examples = drops.examples(names)
    report.rows_out = len(frame)
    report.describe(frame)
    return with_report(frame, report)


def _empty(raw: pd.DataFrame, drops: Drops, report: LoadReport, names: pd.Series) -> pd.DataFrame:
    report.dropped = drops.counts()
    report.examples = drops.examples(names)
    report.rows_out = 0
    return with_report(empty_frame(), report)
