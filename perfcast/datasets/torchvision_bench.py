"""ryujaehun/pytorch-gpu-benchmark: torchvision models on TITAN Xp / TITAN RTX / RTX 2080 Ti.

Random-init torchvision models, 224x224 input, 12 images per GPU, 50 timed iterations;
``median_ms`` -> ``time_ms`` (per iteration, i.e. per global batch), ``mean_ms`` / ``p10_ms`` /
``p90_ms`` -> ``time_ms_mean`` / ``time_ms_p10`` / ``time_ms_p90``. Precision ``half`` ->
``fp16`` (the whole model in float16, not autocast), ``float`` -> ``fp32``, ``double`` -> ``fp64``
(kept as examples, but perfcast builds no fp64 graph: :func:`~perfcast.datasets.record_workload`
refuses them). ``num_gpus`` 2-4 rows are data parallel: ``batch_size`` stays the per-GPU batch
(what one device runs, the graph to join), ``global_batch_size`` = 12 x ``num_gpus``. They are
kept; filter on ``num_gpus == 1`` for single-device training. The optimizer of the train step is
not documented (``optimizer`` None, listed in ``assumed``); software: torch 1.4-1.7 era,
not recorded per row (``software`` None); ``upstream_source`` keeps the original results path.
"""

from __future__ import annotations

import os

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
from perfcast.datasets.names import resolve_torchvision
from perfcast.errors import PerfcastError

FILE = "pytorch-gpu-benchmark-torchvision.csv"
INPUT_SIZE = "3,224,224"

GPU_KEYS = {"TITAN Xp": "titan-xp", "TITAN RTX": "titan-rtx", "GeForce RTX 2080 Ti": "rtx2080ti"}
PRECISIONS = {"half": "fp16", "float": "fp32", "single": "fp32", "double": "fp64"}
MODES = {"inference": "infer", "infer": "infer", "train": "train", "training": "train"}


def _device_key(gpu: str) -> str | None:
    from perfcast.devices import get_device

    key = GPU_KEYS.get(gpu)
    if key is None:
        key = gpu.lower().replace("geforce", "").replace("nvidia", "").strip().replace(" ", "")
    try:
        return get_device(key).key
    except PerfcastError:
        return None


def load_torchvision_benchmark(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """The torchvision benchmark as labeled records; ``df.attrs["report"]``."""
    path = data_file(resolve_data_dir(data_dir), FILE)
    raw = read_csv(path)
    require_columns(raw, path, ["gpu", "num_gpus", "precision", "mode", "model",
                                "batch_size_per_gpu", "median_ms"])
    report = LoadReport(source=path.name, rows_in=len(raw), path=str(path))
    drops = Drops(raw.index)

    gpu = raw["gpu"].astype(object).map(lambda s: str(s).strip() if pd.notna(s) else "")
    devices = {g: _device_key(g) for g in gpu.unique()}
    dev = gpu.map(devices)
    drops.mark_each(gpu.map(lambda g: None if devices[g] else
                            f"GPU {g!r} not in perfcast's device registry"))
    prec_raw = raw["precision"].astype(object).map(lambda s: str(s).strip().lower() if pd.notna(s) else "")
    drops.mark_each(prec_raw.map(lambda s: None if s in PRECISIONS else f"unknown precision {s!r}"))
    mode_raw = raw["mode"].astype(object).map(lambda s: str(s).strip().lower() if pd.notna(s) else "")
    drops.mark_each(mode_raw.map(lambda s: None if s in MODES else f"unknown mode {s!r}"))
    names = raw["model"].astype(object).map(lambda s: str(s).strip() if pd.notna(s) else None)
    drops.mark(names.isna() | (names == ""), "missing model name")
    median = positive_number(raw["median_ms"])
    drops.mark(median.isna(), "missing target value (median_ms missing or not > 0)")
    batch = positive_int(raw["batch_size_per_gpu"])
    drops.mark(batch.isna(), "missing or invalid batch size (batch_size_per_gpu)")
    ngpu = positive_int(raw["num_gpus"])
    drops.mark(ngpu.isna(), "missing or invalid num_gpus")
    resolved = {n: resolve_torchvision(n) for n in names.dropna().unique() if n}
    drops.mark_each(names.map(lambda n: resolved[n].reason if n in resolved else None))

    keep = drops.kept
    if not keep.any():
        return _empty(raw, drops, report, names)
    res = names[keep].map(resolved.__getitem__)
    rec = pd.DataFrame(index=raw.index[keep])
    rec["model"] = res.map(lambda r: r.spec)
    rec["family"] = res.map(lambda r: r.family)
    rec["device"] = dev[keep]
    rec["mode"] = mode_raw[keep].map(MODES)
    rec["precision"] = prec_raw[keep].map(PRECISIONS)
    rec["batch_size"] = batch[keep].astype("int64")
    rec["input_size"] = INPUT_SIZE
    rec["time_ms"] = median[keep]
    rec["num_gpus"] = ngpu[keep].astype("int64")
    rec["global_batch_size"] = rec["batch_size"] * rec["num_gpus"]
    rec["source"] = path.name
    rec["source_row"] = rec.index.astype("int64")
    rec["raw_model"] = names[keep]
    rec["arch"] = res.map(lambda r: r.arch)
    for src, dst in (("mean_ms", "time_ms_mean"), ("p10_ms", "time_ms_p10"), ("p90_ms", "time_ms_p90")):
        if src in raw.columns:
            rec[dst] = pd.to_numeric(raw.loc[keep, src], errors="coerce")
    rec["assumed"] = rec["mode"].map(lambda m: "optimizer" if m == "train" else None)
    if "source" in raw.columns:
        rec["upstream_source"] = raw.loc[keep, "source"]

    rec = drop_duplicates(rec, drops, ["device", "num_gpus", "precision", "mode", "model", "batch_size"],
                          "same GPU, GPU count, precision, mode, model and batch")

    multi = int((rec["num_gpus"] > 1).sum())
    if multi:
        report.flags["multi-GPU data parallel (num_gpus > 1; batch_size is per GPU)"] = multi
    fp64 = int((rec["precision"] == "fp64").sum())
    if fp64:
        report.flags["fp64 (no perfcast graph for this precision)"] = fp64
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
