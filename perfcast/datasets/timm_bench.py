"""timm ``benchmark.py`` results (``timm-benchmarks/benchmark-*.csv``).

Everything about a file's setup comes from its name,
``benchmark-<mode>-<precision>-<layout>-pt<torch>-<cuda|cpu>-<device>[-dynamo].csv``:
mode (``infer``/``train``), precision (``amp`` = float16 autocast), torch/CUDA versions (the
``software`` column, e.g. ``torch-2.4/cu124`` — the two RTX 4090 files differ only there),
device, and ``-dynamo`` = ``torch.compile`` (``compiled`` column). Rows: ``model``,
``<mode>_img_size`` (square side, 3 channels), ``<mode>_batch_size`` (batch actually run, timm
auto-reduces it on OOM), ``<mode>_step_time`` (ms per batch -> ``time_ms``). timm's own
``param_count`` (M), ``infer_gmacs`` (GMACs/sample) and ``infer_macts`` (M activations/sample)
are kept as ``ref_params_m`` / ``ref_gmacs`` / ``ref_macts_m``. The train step is forward +
backward + SGD (timm's ``opt='sgd'``, i.e. momentum 0.9 -> ``optimizer='sgd-momentum'``).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from perfcast.datasets._base import (
    Drops,
    drop_duplicates,
    LoadReport,
    empty_frame,
    finalize,
    positive_int,
    positive_number,
    read_csv,
    require_columns,
    resolve_data_dir,
    with_report,
)
from perfcast.datasets.names import resolve_timm
from perfcast.errors import PerfcastError

SUBDIR = "timm-benchmarks"

_NAME_RE = re.compile(
    r"^benchmark-(?P<mode>infer|train)-(?P<precision>[a-z0-9_]+)-(?P<layout>nchw|nhwc)"
    r"-pt(?P<torch>\d+)-(?P<backend>cu\d+|cpu|rocm\d*|mps)-(?P<device>.+?)(?P<dynamo>-dynamo)?$")

_DEVICE_ALIASES = {"4090": "rtx4090", "3090": "rtx3090", "2080ti": "rtx2080ti", "a100": "a100-40gb"}
_PRECISIONS = {"amp": "amp", "fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "amp_bf16": "bf16"}


def _torch_version(digits: str) -> str:
    """``112`` -> ``1.12``, ``240`` -> ``2.4``, ``291`` -> ``2.9.1`` (timm's file naming)."""
    major, rest = digits[0], digits[1:]
    if major == "1":
        return f"1.{rest}" if rest else "1"
    minor, patch = rest[:1], rest[1:]
    ver = f"{major}.{minor}" if minor else major
    return f"{ver}.{patch}" if patch and patch != "0" else ver


def parse_file_name(stem: str) -> dict | None:
    """Setup described by a timm benchmark file name; ``None`` when it does not follow the pattern."""
    m = _NAME_RE.match(stem)
    if not m:
        return None
    from perfcast.devices import get_device

    tok = m["device"].lower()
    key = _DEVICE_ALIASES.get(tok, tok.replace("_", "-"))
    try:
        device = get_device(key).key
    except PerfcastError:
        device = None
    software = f"torch-{_torch_version(m['torch'])}/{m['backend']}"
    if m["layout"] == "nhwc":
        software += "/channels_last"
    return {"mode": m["mode"], "precision": _PRECISIONS.get(m["precision"]), "raw_precision": m["precision"],
            "device": device, "device_token": m["device"], "software": software,
            "compiled": bool(m["dynamo"])}


def timm_files(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The ``benchmark-*.csv`` files under ``<data_dir>/timm-benchmarks``."""
    folder = resolve_data_dir(data_dir) / SUBDIR
    files = sorted(folder.glob("benchmark-*.csv")) if folder.is_dir() else []
    if not files:
        raise PerfcastError(f"no timm benchmark files (benchmark-*.csv) in {folder}; set "
                            f"PERFCAST_DATA to the shared data directory or pass data_dir=")
    return files


def _select(files: list[Path], which: str | Iterable[str]) -> list[Path]:
    if isinstance(which, str):
        which = [which]
    out: list[Path] = []
    for w in which:
        if w == "all":
            hits = files
        else:
            w = w[:-4] if w.endswith(".csv") else w
            hits = [f for f in files if f.stem == w] or [f for f in files if fnmatch.fnmatch(f.stem, w)]
        if not hits:
            raise PerfcastError(f"no timm benchmark file matches {w!r}; have: "
                                f"{', '.join(f.stem for f in files)}")
        out.extend(h for h in hits if h not in out)
    return out


def load_timm_file(path: Path) -> pd.DataFrame:
    """One ``benchmark-*.csv`` file as schema records (``df.attrs['report']``)."""
    raw = read_csv(path)
    report = LoadReport(source=path.name, rows_in=len(raw), path=str(path))
    drops = Drops(raw.index)
    setup = parse_file_name(path.stem)
    if setup is None:
        drops.mark(True, "file name does not follow benchmark-<mode>-<precision>-<layout>-pt<torch>-"
                         "<backend>-<device>.csv")
        return _done(raw, drops, report, empty_frame())
    p = setup["mode"]
    require_columns(raw, path, ["model", f"{p}_img_size", f"{p}_batch_size", f"{p}_step_time"])
    if setup["device"] is None:
        drops.mark(True, f"device {setup['device_token']!r} (from the file name) not in perfcast's "
                         f"device registry")
    if setup["precision"] is None:
        drops.mark(True, f"precision {setup['raw_precision']!r} (from the file name) not supported")

    names = raw["model"].astype(object).where(raw["model"].notna(), None)
    names = names.map(lambda s: str(s).strip() if s is not None else None)
    drops.mark(names.isna() | (names == ""), "missing model name")
    step = positive_number(raw[f"{p}_step_time"])
    drops.mark(step.isna(), f"missing target value ({p}_step_time missing or not > 0)")
    batch = positive_int(raw[f"{p}_batch_size"])
    drops.mark(batch.isna(), f"missing or invalid batch size ({p}_batch_size)")
    size = positive_int(raw[f"{p}_img_size"])
    drops.mark(size.isna(), f"missing or invalid image size ({p}_img_size)")

    resolved = {n: resolve_timm(n) for n in names.dropna().unique() if n}
    drops.mark_each(names.map(lambda n: resolved[n].reason if n in resolved else None))

    keep = drops.kept
    if not keep.any():
        return _done(raw, drops, report, empty_frame())
    res = names[keep].map(resolved.__getitem__)
    rec = pd.DataFrame(index=raw.index[keep])
    rec["model"] = res.map(lambda r: r.spec)
    rec["family"] = res.map(lambda r: r.family)
    rec["device"] = setup["device"]
    rec["mode"] = p
    rec["precision"] = setup["precision"]
    rec["batch_size"] = batch[keep].astype("int64")
    rec["input_size"] = size[keep].map(lambda s: f"3,{int(s)},{int(s)}")
    rec["time_ms"] = step[keep]
    rec["num_gpus"] = 1
    rec["source"] = path.name
    rec["source_row"] = rec.index.astype("int64")
    rec["raw_model"] = names[keep]
    rec["arch"] = res.map(lambda r: r.arch)
    rec["renamed"] = res.map(lambda r: r.renamed)
    rec["software"] = setup["software"]
    rec["compiled"] = setup["compiled"]
    rec["optimizer"] = "sgd-momentum" if p == "train" else None
    for src, dst in (("param_count", "ref_params_m"), ("infer_gmacs", "ref_gmacs"),
                     ("infer_macts", "ref_macts_m")):
        if src in raw.columns:
            rec[dst] = pd.to_numeric(raw.loc[keep, src], errors="coerce")

    rec = drop_duplicates(rec, drops, ["model", "input_size", "batch_size"],
                          "same resolved model, image size and batch")
    if int(rec["renamed"].sum()):
        report.flags["pre-1.0 timm name mapped through timm's deprecated-name table"] = int(rec["renamed"].sum())
    if setup["compiled"] and len(rec):
        report.flags["torch.compile'd (dynamo) inference"] = len(rec)
    return _done(raw, drops, report, finalize(rec))


def _done(raw: pd.DataFrame, drops: Drops, report: LoadReport, frame: pd.DataFrame) -> pd.DataFrame:
    report.dropped = drops.counts()
    if "model" in raw.columns:
        report.examples = drops.examples(raw["model"])
    report.rows_out = len(frame)
    report.describe(frame)
    return with_report(frame, report)


def load_timm_benchmarks(which: str | Iterable[str] = "all",
                         data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """timm benchmark files as labeled records.

    ``which``: ``"all"``, a file stem / name (``"benchmark-train-amp-nchw-pt112-cu113-rtx3090"``),
    a glob on the stem (``"*infer*"``) or a list of those. ``df.attrs["report"]`` is a
    :class:`LoadReport` whose ``parts`` are the per-file reports.
    """
    files = _select(timm_files(data_dir), which)
    frames = [load_timm_file(f) for f in files]
    parts = [f.attrs["report"] for f in frames]
    for f in frames:
        f.attrs = {}
    df = finalize(pd.concat(frames, ignore_index=True)) if frames else empty_frame()
    report = LoadReport.combine(SUBDIR, parts, df)
    return with_report(df, report)
