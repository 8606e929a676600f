"""NeuSight's whole-model labels (``neusight/labels.csv``) and its peers' predictions
(``neusight/peer_predictions.csv``): sitar-lab/NeuSight, the ASPLOS'25 artifact (MIT).

End-to-end latency per batch of transformer models (BERT-large, GPT-2 large, GPT-3 XL / 2.7B,
OPT-1.3B, Switch) measured with PyTorch, fp32, on one device as PyTorch sees it (an MI250 is two
devices: the ``mi250`` row is one GCD). Columns ``device, model, mode, seq_len, batch_size,
variant, e2e_latency_ms, fw_latency_ms, bw_latency_ms`` become records of the common schema
(:mod:`perfcast.datasets`):

===================  ==========================================================================
``device``           :data:`DEVICE_KEYS` (NeuSight's device name → perfcast registry key)
``model``            ``hf:<data dir>/neusight/model_configs/<name>.json``: the Hugging Face
                     config NeuSight ships, as a path under the *resolved* data directory
                     (:func:`~perfcast.datasets.resolve_data_dir`, i.e. ``$PERFCAST_DATA`` or
                     ``data_dir=``) — so it is built when loading, on this machine, and is what
                     :meth:`~perfcast.workload.Workload.key` needs to find the file. The
                     machine-independent name is the ``model_config`` column
                     (``neusight/model_configs/<name>.json``, relative to the data directory)
                     and ``raw_model`` (NeuSight's name, e.g. ``bert_large``)
``family``           :data:`FAMILIES` by name prefix: ``bert``, ``gpt2``, ``gpt3``, ``opt``,
                     ``switch`` (NeuSight's GPT-3 configs are GPT-2 architectures at GPT-3 sizes)
``mode``             ``inf`` → ``infer``; ``train`` → ``train`` with ``optimizer = "none"``:
                     NeuSight's training label is forward + backward *without* an optimizer
                     step (``e2e_latency_ms`` = ``fw_latency_ms`` + ``bw_latency_ms`` on every
                     row)
``precision``        ``fp32``; ``input_size`` None; ``seq_len`` tokens per sample
``time_ms``          ``e2e_latency_ms`` (ms per batch)
===================  ==========================================================================

Kept as extra columns: ``fw_latency_ms``, ``bw_latency_ms`` (0 for inference), ``variant``
(``""`` for every example), ``model_config``, ``raw_device``.

Rows with a non-empty ``variant`` are not single-device, unfused PyTorch runs — ``fusion``
(fused kernels), ``dp4`` / ``tp4`` / ``pp4_1`` (4-GPU data / tensor / pipeline parallel) — and
are dropped, counted per variant in the report; so are rows whose model has no config in
``neusight/model_configs`` (e.g. ``switch4``).

:func:`load_neusight_peers` reads the peers' published predictions (``neusight``, ``habitat``,
``micro``, ``roofline``) with the same mapping and joins each to the measured label of the same
configuration (:data:`CONFIG_KEY`: device key, model, mode, seq_len, batch_size, variant), so a
caller compares row for row::

    peers = load_neusight_peers()
    wide = peers.pivot_table(index=list(CONFIG_KEY), columns="predictor", values="time_ms")
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from perfcast.datasets._base import (
    Drops,
    LoadReport,
    data_file,
    drop_duplicates,
    empty_frame,
    finalize,
    positive_int,
    positive_number,
    read_csv,
    require_columns,
    resolve_data_dir,
    with_report,
)
from perfcast.errors import PerfcastError

SUBDIR = "neusight"
LABELS = f"{SUBDIR}/labels.csv"
PEERS = f"{SUBDIR}/peer_predictions.csv"
CONFIG_DIR = f"{SUBDIR}/model_configs"

#: NeuSight's device names (its ``device_configs`` file stems) → perfcast device keys.
DEVICE_KEYS: dict[str, str] = {
    "NVIDIA_A100-PCIE-40GB": "a100-40gb-pcie",
    "NVIDIA_A100_80GB_PCIe": "a100-80gb-pcie",
    "NVIDIA_A100-SXM4-40GB": "a100-40gb",
    "NVIDIA_H100_80GB_HBM3": "h100-sxm",
    "NVIDIA_L4": "l4",
    "Tesla_T4": "t4",
    "Tesla_P4": "p4",
    "Tesla_P100-PCIE-16GB": "p100-16gb-pcie",
    "Tesla_V100-PCIE-32GB": "v100-32gb-pcie",
    "AMD_Instinct_MI100": "mi100",
    "AMD_Instinct_MI210": "mi210",
    "AMD_Instinct_MI250": "mi250",  # one GCD = one PyTorch device (see the registry row)
}

#: Architecture families, by prefix of NeuSight's model name (longest prefix first).
FAMILIES: tuple[tuple[str, str], ...] = (
    ("bert", "bert"), ("gpt2", "gpt2"), ("gpt3", "gpt3"), ("opt", "opt"), ("switch", "switch"))

MODES = {"inf": "infer", "train": "train"}
#: The optimizer of NeuSight's "train" rows: forward + backward, no optimizer step.
TRAIN_OPTIMIZER = "none"

#: What a non-empty ``variant`` is (why such a row is not an example).
VARIANTS = {"fusion": "fused kernels", "dp4": "4-GPU data parallel",
            "tp4": "4-GPU tensor parallel", "pp4_1": "4-GPU pipeline parallel"}

#: The configuration a label and a peer prediction share.
CONFIG_KEY: tuple[str, ...] = ("device", "model", "mode", "seq_len", "batch_size", "variant")

_CONFIG_COLUMNS = ["device", "model", "mode", "seq_len", "batch_size", "variant"]
UPSTREAM = "sitar-lab/NeuSight (ASPLOS'25 artifact)"


def family_of(name: str) -> str | None:
    """The architecture family of a NeuSight model name (``gpt3_xl`` → ``gpt3``)."""
    low = name.lower()
    for prefix, family in FAMILIES:
        if low.startswith(prefix):
            return family
    return None


def model_spec(data_dir: Path, name: str) -> str:
    """``hf:<data dir>/neusight/model_configs/<name>.json`` under the resolved data directory."""
    return f"hf:{data_dir / CONFIG_DIR / f'{name}.json'}"


def registry_key(raw: str, table: dict[str, str] | None = None) -> str | None:
    """The perfcast registry key of a device name in a dataset (through ``table``, default
    :data:`DEVICE_KEYS`); ``None`` when unmapped or not in the registry."""
    from perfcast.devices import get_device

    key = (DEVICE_KEYS if table is None else table).get(raw)
    if key is None:
        return None
    try:
        return get_device(key).key
    except PerfcastError:
        return None


def _text(series: pd.Series) -> pd.Series:
    return series.astype(object).map(lambda s: str(s).strip() if pd.notna(s) else "")


def _parse(raw: pd.DataFrame, data_dir: Path, drops: Drops, *, drop_variants: bool) -> pd.DataFrame:
    """The configuration columns of NeuSight rows (labels or peers), marking bad rows in
    ``drops``; returns the mapped columns for every row (NaN/None where a drop applies)."""
    out = pd.DataFrame(index=raw.index)
    variant = _text(raw["variant"])
    if drop_variants:
        drops.mark_each(variant.map(lambda v: None if not v else
                                    f"variant {v!r} ({VARIANTS.get(v, 'not single-device')}): not "
                                    f"a single-device unfused PyTorch run"))
    dev_raw = _text(raw["device"])
    devices = {d: registry_key(d) for d in dev_raw.unique()}
    drops.mark_each(dev_raw.map(lambda d: None if devices[d] else
                                f"device {d!r} not in perfcast's device registry"))
    mode_raw = _text(raw["mode"])
    drops.mark_each(mode_raw.map(lambda m: None if m in MODES else f"unknown mode {m!r}"))
    names = _text(raw["model"])
    drops.mark(names == "", "missing model name")
    configs = {n: (data_dir / CONFIG_DIR / f"{n}.json").is_file() for n in names.unique() if n}
    drops.mark_each(names.map(lambda n: None if not n or configs.get(n) else
                              f"no model config {CONFIG_DIR}/{n}.json"))
    drops.mark_each(names.map(lambda n: None if not n or family_of(n) else
                              f"unknown model family of {n!r}"))
    batch = positive_int(raw["batch_size"])
    drops.mark(batch.isna(), "missing or invalid batch_size")
    seq = positive_int(raw["seq_len"])
    drops.mark(seq.isna(), "missing or invalid seq_len")

    out["device"] = dev_raw.map(devices)
    out["model"] = names.map(lambda n: model_spec(data_dir, n) if configs.get(n) else None)
    out["family"] = names.map(lambda n: family_of(n) if n else None)
    out["mode"] = mode_raw.map(MODES)
    out["optimizer"] = pd.Series([TRAIN_OPTIMIZER if m == "train" else None for m in out["mode"]],
                                 index=out.index, dtype=object)
    out["precision"] = "fp32"
    out["batch_size"] = batch
    out["seq_len"] = seq
    out["variant"] = variant
    out["raw_model"] = names
    out["raw_device"] = dev_raw
    out["model_config"] = names.map(lambda n: f"{CONFIG_DIR}/{n}.json" if n else None)
    return out


def _read(data_dir: Path, relative: str, columns: list[str]) -> tuple[pd.DataFrame, Path]:
    path = data_file(data_dir, relative)
    raw = read_csv(path)
    require_columns(raw, path, columns)
    raw["variant"] = raw["variant"].astype(object).where(raw["variant"].notna(), "")
    return raw, path


_LABEL_COLUMNS = ["device", "model", "mode", "seq_len", "batch_size", "variant", "e2e_latency_ms",
                  "fw_latency_ms", "bw_latency_ms"]


def load_neusight(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """NeuSight's whole-model labels as records of the common schema (single-device, unfused
    PyTorch rows only); ``df.attrs["report"]`` counts every dropped row by reason."""
    root = resolve_data_dir(data_dir)
    raw, path = _read(root, LABELS, _LABEL_COLUMNS)
    report = LoadReport(source=LABELS, rows_in=len(raw), path=str(path))
    drops = Drops(raw.index)
    cfg = _parse(raw, root, drops, drop_variants=True)
    e2e = positive_number(raw["e2e_latency_ms"])
    drops.mark(e2e.isna(), "missing target value (e2e_latency_ms missing or not > 0)")

    keep = drops.kept
    if not keep.any():
        return _done(report, drops, cfg, empty_frame())
    rec = cfg[keep].copy()
    rec["batch_size"] = rec["batch_size"].astype("int64")
    rec["seq_len"] = rec["seq_len"].astype("int64")
    rec["input_size"] = None
    rec["time_ms"] = e2e[keep]
    rec["fw_latency_ms"] = pd.to_numeric(raw.loc[keep, "fw_latency_ms"], errors="coerce")
    rec["bw_latency_ms"] = pd.to_numeric(raw.loc[keep, "bw_latency_ms"], errors="coerce")
    rec["source"] = LABELS
    rec["source_row"] = rec.index.astype("int64")
    rec["arch"] = rec["raw_model"]
    rec["upstream_source"] = UPSTREAM
    rec = drop_duplicates(rec, drops, _CONFIG_COLUMNS,
                          "same device, model, mode, seq_len, batch and variant")
    frame = finalize(rec)
    n_train = int((frame["mode"] == "train").sum())
    if n_train:
        report.flags["train = forward + backward without an optimizer step (optimizer 'none')"] = n_train
    n_amd = int(frame["raw_device"].str.startswith("AMD").sum())
    if n_amd:
        report.flags["AMD Instinct GPU (ROCm)"] = n_amd
    return _done(report, drops, cfg, frame)


def _done(report: LoadReport, drops: Drops, cfg: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    report.dropped = drops.counts()
    report.examples = drops.examples(cfg["raw_device"] + " " + cfg["raw_model"])
    report.rows_out = len(frame)
    report.describe(frame)
    return with_report(frame, report)


_PEER_COLUMNS = ["device", "predictor", "model", "mode", "seq_len", "batch_size", "variant",
                 "e2e_latency_ms"]


def load_neusight_peers(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """The peers' published end-to-end predictions (``peer_predictions.csv``), one row per
    (configuration, predictor), mapped like :func:`load_neusight` (variant rows are kept: the
    ``variant`` column is part of the configuration) and joined to the measured label of the
    same :data:`CONFIG_KEY`.

    Columns: the configuration (``device``, ``model``, ``family``, ``mode``, ``optimizer``,
    ``precision``, ``batch_size``, ``seq_len``, ``variant``), ``predictor``, ``time_ms`` (the
    peer's prediction, ms per batch), ``label_time_ms`` (measured ``e2e_latency_ms``; NaN when
    ``labels.csv`` lacks the configuration), ``label_row`` (its row in ``labels.csv``, -1 when
    none), ``in_examples`` (that label is one of :func:`load_neusight`'s records), ``raw_device``,
    ``raw_model``, ``model_config``, ``source``, ``source_row``. ``df.attrs["report"]``.
    """
    root = resolve_data_dir(data_dir)
    raw, path = _read(root, PEERS, _PEER_COLUMNS)
    report = LoadReport(source=PEERS, rows_in=len(raw), path=str(path))
    drops = Drops(raw.index)
    cfg = _parse(raw, root, drops, drop_variants=False)
    predictor = _text(raw["predictor"])
    drops.mark(predictor == "", "missing predictor name")
    pred = positive_number(raw["e2e_latency_ms"])
    drops.mark(pred.isna(), "missing prediction (e2e_latency_ms missing or not > 0)")
    keep = drops.kept
    rec = cfg[keep].copy()
    rec["predictor"] = predictor[keep]
    rec["time_ms"] = pred[keep]
    rec["source"] = PEERS
    rec["source_row"] = rec.index.astype("int64")
    rec = _dedupe_peers(rec, drops)

    labels = _label_table(root)
    rec = rec.merge(labels, how="left", on=_CONFIG_COLUMNS, validate="many_to_one")
    rec["label_row"] = rec["label_row"].fillna(-1).astype("int64")
    rec["in_examples"] = rec["in_examples"].fillna(False).astype(bool)
    cols = ["device", "model", "family", "mode", "optimizer", "precision", "batch_size", "seq_len",
            "variant", "predictor", "time_ms", "label_time_ms", "label_row", "in_examples",
            "raw_device", "raw_model", "model_config", "source", "source_row"]
    out = rec[cols].reset_index(drop=True)
    if len(out):
        out["batch_size"] = out["batch_size"].astype("int64")
        out["seq_len"] = out["seq_len"].astype("int64")
    unlabeled = int(out["label_time_ms"].isna().sum())
    if unlabeled:
        report.flags["no measured label for the configuration in labels.csv"] = unlabeled
    report.dropped = drops.counts()
    report.examples = drops.examples(cfg["raw_device"] + " " + cfg["raw_model"])
    report.rows_out = len(out)
    report.devices = sorted(out["device"].dropna().unique().tolist())
    report.n_models = int(out["model"].nunique())
    report.n_families = int(out["family"].nunique())
    return with_report(out, report)


def _dedupe_peers(rec: pd.DataFrame, drops: Drops) -> pd.DataFrame:
    dup = rec.duplicated([*_CONFIG_COLUMNS, "predictor"], keep="first")
    if dup.any():
        drops.mark(dup.reindex(drops.reason.index, fill_value=False),
                   "duplicate row (same configuration and predictor as an earlier row)")
    return rec[~dup]


def _label_table(root: Path) -> pd.DataFrame:
    """Every parsable labels.csv row (variant rows included) keyed by configuration:
    ``label_time_ms``, ``label_row``, ``in_examples``."""
    raw, _ = _read(root, LABELS, _LABEL_COLUMNS)
    drops = Drops(raw.index)
    cfg = _parse(raw, root, drops, drop_variants=False)
    e2e = positive_number(raw["e2e_latency_ms"])
    drops.mark(e2e.isna(), "missing target value")
    ok = drops.kept
    table = cfg.loc[ok, _CONFIG_COLUMNS].copy()
    table["label_time_ms"] = e2e[ok]
    table["label_row"] = table.index.astype("int64")
    table = table[~table.duplicated(_CONFIG_COLUMNS, keep="first")]
    examples = set(load_neusight(root)["source_row"].tolist())
    table["in_examples"] = table["label_row"].isin(examples)
    return table.reset_index(drop=True)


__all__ = ["CONFIG_KEY", "DEVICE_KEYS", "FAMILIES", "LABELS", "PEERS", "family_of",
           "load_neusight", "load_neusight_peers", "model_spec"]
