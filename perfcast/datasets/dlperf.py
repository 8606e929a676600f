"""Multi-GPU training measurements: DLPerf (Oneflow-Inc/DLPerf, Apache-2.0) on 1–32
Tesla V100-SXM2-16GB (8 per node, NVLink hybrid mesh inside a node, one 100 Gb/s InfiniBand EDR
adapter per node), and Vidur's collective-communication profiles (microsoft/vidur, MIT).

    load_megatron_gpt()     dlperf/megatron_gpt.csv     GPT pre-training, 18 layouts × 2 frameworks
    load_dp_scaling()       dlperf/dp_scaling.csv       data-parallel speed-up, 1–32 GPUs
    load_deepspeed_zero()   dlperf/deepspeed_zero.csv   ZeRO stage 0/1 memory per GPU
    load_vidur_network()    vidur/network/*.csv         all-reduce / send-recv latency
    load_dlperf_single_gpu()  dlperf/dp_scaling.csv     one V100's PyTorch training step, as
                                                        labeled records (dataset schema)

Files are read in place (``data_dir=``, else ``$PERFCAST_DATA``); values are never edited. Each
frame keeps the source columns and adds perfcast's names (``time_ms``, ``memory_mb`` in MiB,
``data_parallel`` …) so the evaluation (``benchmarks/distributed_eval.py``) reads one schema —
but for :func:`load_dlperf_single_gpu`, whose records are those of :mod:`perfcast.datasets`
(``df.attrs["report"]``, drops counted; see its docstring).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
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

MEGATRON_FILE = "dlperf/megatron_gpt.csv"
DP_SCALING_FILE = "dlperf/dp_scaling.csv"
ZERO_FILE = "dlperf/deepspeed_zero.csv"
NETWORK_DIR = "vidur/network"
#: The DLPerf cluster as a perfcast cluster (``--cluster``): V100-SXM2 servers of 8, NVLink 2
#: (six links × 25 GB/s per direction per GPU, a hybrid cube mesh), one 100 Gb/s EDR
#: InfiniBand adapter per node shared by its 8 GPUs (12.5 GB/s ÷ 8 per GPU).
DLPERF_CLUSTER = {"name": "DLPerf V100 cluster", "gpus_per_node": 8, "intra_node_gbs": 150.0,
                  "inter_node_gbs": 12.5 / 8,
                  "source": "Oneflow-Inc/DLPerf README (4 nodes × 8 V100-SXM2-16GB, NVLink "
                            "hybrid mesh, one InfiniBand EDR 100 Gb/s adapter per node); NVLink "
                            "2: 6 links × 25 GB/s per direction (NVIDIA V100 datasheet)"}
#: Vidur's network topologies as perfcast clusters: the nominal links of each machine.
VIDUR_CLUSTERS = {
    "a100_dgx": {"name": "Vidur A100 DGX", "gpus_per_node": 8, "intra_node_gbs": 300.0,
                 "inter_node_gbs": 25.0,
                 "source": "DGX A100: NVLink 3 through NVSwitch, 12 links × 25 GB/s per "
                           "direction; one 200 Gb/s HDR InfiniBand adapter per GPU (NVIDIA DGX "
                           "A100 datasheet)"},
    "a100_pairwise_nvlink": {"name": "Vidur A100 pairs", "gpus_per_node": 4,
                             "intra_node_gbs": 300.0, "inter_node_gbs": 25.0,
                             "source": "A100 pairs joined by NVLink bridges (600 GB/s "
                                       "bidirectional); other pairs over PCIe Gen4 x16 (32 GB/s "
                                       "per direction); network assumed as the DGX's"},
}
#: PCIe Gen4 x16 per direction (GB/s): the link a ring over more than a pair crosses in
#: ``a100_pairwise_nvlink``.
PCIE4_GBS = 32.0


def _source(path: Path, df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["source"] = path.name
    df["source_row"] = np.arange(len(df))
    return df


def load_megatron_gpt(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """``dlperf/megatron_gpt.csv``: one row per (framework, case); adds ``time_ms`` (=
    ``iteration_ms``), ``memory_mb`` (MiB, OneFlow rows only), ``micro_batch`` and
    ``recompute`` (``full``: activation checkpointing, as every case ran)."""
    path = data_file(resolve_data_dir(data_dir), MEGATRON_FILE)
    df = read_csv(path)
    require_columns(df, path, ("framework", "case", "data_parallel", "tensor_parallel",
                               "pipeline_parallel", "micro_batch_size", "global_batch_size",
                               "hidden_size", "num_attention_heads", "num_layers", "seq_len",
                               "vocab_size", "iteration_ms", "gpus_per_node", "total_gpus"))
    df = _source(path, df)
    df["time_ms"] = df["iteration_ms"].astype(float)
    df["memory_mb"] = pd.to_numeric(df.get("memory_mib"), errors="coerce")
    df["micro_batch"] = df["micro_batch_size"].astype(int)
    ckpt = df["activation_checkpointing"].astype(str).str.lower().str.startswith("true")
    df["recompute"] = np.where(ckpt, "full", "none")
    bad = df["data_parallel"] * df["tensor_parallel"] * df["pipeline_parallel"] \
        != df["total_gpus"]
    if bad.any():
        raise PerfcastError(f"{path.name}: D·T·P ≠ GPUs in rows {list(df.index[bad])}")
    return df


def load_dp_scaling(data_dir: str | os.PathLike | None = None,
                    row_kinds: tuple[str, ...] = ("result",)) -> pd.DataFrame:
    """``dlperf/dp_scaling.csv``, rows of ``row_kinds`` (default the per-framework results:
    medians of 5–7 runs), with ``series``: the rows of one scaling curve (framework, model,
    precision and its detail, XLA, DALI, other settings, batch per device, table) and
    ``speedup`` as the table gives it (samples/s at N GPUs ÷ at 1)."""
    path = data_file(resolve_data_dir(data_dir), DP_SCALING_FILE)
    df = read_csv(path)
    require_columns(df, path, ("framework", "model", "precision", "row_kind", "nodes",
                               "gpus_per_node", "total_gpus", "batch_size_per_device",
                               "samples_per_s", "speedup"))
    df = _source(path, df)
    df = df[df["row_kind"].isin(row_kinds)].copy()
    keys = ["framework", "model", "precision", "precision_detail", "xla", "dali",
            "other_settings", "batch_size_per_device", "table_heading"]
    df["series"] = df[keys].astype(object).fillna("").astype(str).agg(" | ".join, axis=1)
    return df.reset_index(drop=True)


def load_deepspeed_zero(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """``dlperf/deepspeed_zero.csv``: GPT-2 small memory per GPU under DeepSpeed ZeRO stage 0/1
    (``zero``) and OneFlow's optimizer placement (``zero`` 1 when on: it shards the optimizer
    state as ZeRO-1 does); ``memory_mb`` in MiB (nvidia-smi)."""
    path = data_file(resolve_data_dir(data_dir), ZERO_FILE)
    df = read_csv(path)
    require_columns(df, path, ("framework", "optimization_on", "nodes", "gpus_per_node",
                               "total_gpus", "batch_per_device", "gpu_mem_mib", "hidden_size",
                               "num_layers", "num_attention_heads", "seq_len"))
    df = _source(path, df)
    on = df["optimization_on"].astype(str).str.lower().isin(("true", "1", "yes"))
    df["zero"] = on.astype(int)
    df["memory_mb"] = df["gpu_mem_mib"].astype(float)
    df["vocab"] = df["vocab_size"].astype(str).map(_first_int).fillna(50257).astype(int)
    return df


def _first_int(text: str) -> float:
    m = re.match(r"\s*(\d+)", text)
    return float(m.group(1)) if m else np.nan


def load_vidur_network(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """``vidur/network/<topology>-<collective>.csv``: ``topology``, ``collective``
    (``all_reduce`` | ``send_recv``), ``gpus`` (``num_workers``), ``gpus_per_node`` (the
    devices of the group in one node: ``num_workers / gpus_per_node`` nodes), ``bytes`` (the
    message) and ``time_ms`` (the median of the profile; ``time_ms_mean``, ``time_ms_min``)."""
    root = resolve_data_dir(data_dir) / NETWORK_DIR
    files = sorted(root.glob("*-*.csv"))
    if not files:
        raise PerfcastError(f"no Vidur network profiles in {root}")
    parts = []
    for path in files:
        topology, collective = path.stem.rsplit("-", 1)
        df = read_csv(path)
        stat = f"time_stats.{collective}"
        require_columns(df, path, (f"{stat}.median", "num_workers", "size", "devices_per_node"))
        parts.append(_source(path, pd.DataFrame({
            "topology": topology, "collective": collective,
            "gpus": df["num_workers"].astype(int),
            "gpus_per_node": df["devices_per_node"].astype(int),
            "bytes": df["size"].astype(float),
            "time_ms": df[f"{stat}.median"].astype(float),
            "time_ms_mean": df[f"{stat}.mean"].astype(float),
            "time_ms_min": df[f"{stat}.min"].astype(float)})))
    out = pd.concat(parts, ignore_index=True)
    return out[out["time_ms"] > 0].reset_index(drop=True)


# --------------------------------------------------------------------------- one V100, as records
#: The GPU of every DLPerf row (data README: Tesla V100-SXM2-16GB) as a registry key.
DLPERF_DEVICE = "v100-16gb"
#: The frameworks whose single-GPU results become records: perfcast builds PyTorch graphs.
PYTORCH_FRAMEWORKS = ("PyTorch", "NGC PyTorch")
#: DLPerf's model name → (perfcast spec, family, input size per sample, needs a ``seq_len``).
#: torchvision's ``resnet50`` is ResNet-50 v1.5 (stride 2 in the 3×3 convolution of the first
#: block of a stage); BERT-Base pre-training is the shipped ``bert-base-uncased`` config, whose
#: ``BertForMaskedLM`` head scores every position (no pooler and next-sentence head: 2 matmuls
#: on one token per sequence, < 0.1 % of the step's FLOPs).
DLPERF_MODELS: dict[str, tuple[str, str, str | None, bool]] = {
    "ResNet-50 v1.5": ("torchvision:resnet50", "resnet", "3,224,224", False),
    "BERT-Base": ("hf:bert-base-uncased", "bert", None, True),
}
#: DLPerf's precision → perfcast's, as the rows name them: ``amp`` (ResNet: apex automatic mixed
#: precision, float16 where safe, as autocast does) and ``fp16`` (BERT: fp16 with a loss scale —
#: NVIDIA's BERT pre-training script of that time runs apex at opt level O2, half weights and
#: activations with float32 master weights, closer to perfcast's whole-model ``fp16`` than to
#: autocast).
DLPERF_PRECISIONS = {"fp32": "fp32", "amp": "amp", "fp16": "fp16"}
#: The optimizer of the training step where a row does not name it: the scripts DLPerf ran
#: (NVIDIA DeepLearningExamples ConvNets and pytorch/examples imagenet) both use
#: ``torch.optim.SGD`` with momentum — so ``assumed``.
DLPERF_ASSUMED_OPTIMIZER = {"resnet": "sgd-momentum"}
_DLPERF_UPSTREAM = "Oneflow-Inc/DLPerf (Apache-2.0)"


def _software(version: str) -> str | None:
    """``torch-1.6.0`` / ``torch-1.5.0a0+8f84ded/ngc-20.03`` from DLPerf's framework version."""
    torch = re.search(r"PyTorch\s+(\S+)", version)
    if torch is None:
        return None
    ngc = re.search(r"NGC\s+(\d+\.\d+)", version)
    return f"torch-{torch.group(1)}" + (f"/ngc-{ngc.group(1)}" if ngc else "")


def _registry_key(key: str) -> str | None:
    from perfcast.devices import get_device

    try:
        return get_device(key).key
    except PerfcastError:
        return None


def _optimizer(family: str, implementation: str) -> tuple[str | None, bool]:
    """The training optimizer and whether it is assumed: BERT rows name theirs in
    ``implementation`` ("FusedLAMB replaced by FusedAdam": apex's FusedAdam → ``adam``, priced
    like ``adamw``: four passes over the parameters); ResNet rows do not
    (:data:`DLPERF_ASSUMED_OPTIMIZER`)."""
    if re.search(r"\bFusedAdam\b", implementation):
        return "adam", False
    return DLPERF_ASSUMED_OPTIMIZER.get(family), True


def load_dlperf_single_gpu(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """DLPerf's single-GPU PyTorch training throughput (``dlperf/dp_scaling.csv``) as labeled
    records of :mod:`perfcast.datasets`; ``df.attrs["report"]`` counts every dropped row.

    Kept: rows with ``row_kind == "result"`` (medians of 5 runs of ~100 iterations after warm-up,
    as DLPerf tabulates per framework; the ``single_run`` and ``cross_framework_summary`` rows
    repeat them), ``total_gpus == 1``, framework ``PyTorch`` or ``NGC PyTorch``, a model of
    :data:`DLPERF_MODELS`: ResNet-50 v1.5 (fp32 batch 128, AMP batch 256, ImageNet 224×224
    crops) and BERT-Base pre-training (sequence 128; fp32 batch 32 / 48, fp16 batch 64 / 96),
    each on one Tesla V100-SXM2-16GB (:data:`DLPERF_DEVICE`, CUDA 10.2, NGC 20.03 or PyTorch 1.6
    bare metal: ``software``).

    ``time_ms`` (ms per training step: forward, backward, optimizer) is derived as
    ``batch_size_per_device / samples_per_s × 1000``; ``samples_per_s`` is kept. ``optimizer``:
    BERT's from the row (apex FusedAdam → ``adam``); ResNet's ``sgd-momentum``, what both
    scripts run, listed in ``assumed`` with ``input_size`` (224×224: the scripts' training crop,
    not in the rows). Rows fed by ``torch.utils.data.DataLoader`` are dropped: their host-side
    loading bounds the step (the same run is slower with 8 loader workers than with 48), where
    every other source times synthetic input; DALI-fed rows are kept and flagged. Static and
    dynamic loss scaling are separate rows of the same workload (``precision_detail``), both
    kept. Extra columns: ``framework``, ``implementation``, ``precision_detail``,
    ``input_pipeline`` (the ``dali`` column), ``other_settings``, ``samples_per_s``;
    ``upstream_source`` cites the DLPerf README and line.
    """
    path = data_file(resolve_data_dir(data_dir), DP_SCALING_FILE)
    raw = read_csv(path)
    require_columns(raw, path, ("framework", "framework_version", "implementation",
                                "source_readme", "source_line", "row_kind", "model", "seq_len",
                                "precision", "precision_detail", "dali", "other_settings",
                                "total_gpus", "batch_size_per_device", "samples_per_s"))
    report = LoadReport(source=DP_SCALING_FILE, rows_in=len(raw), path=str(path))
    drops = Drops(raw.index)

    def text(col: str) -> pd.Series:
        return raw[col].astype(object).map(lambda s: str(s).strip() if pd.notna(s) else "")

    kind, framework, model = text("row_kind"), text("framework"), text("model")
    drops.mark_each(kind.map(lambda k: None if k == "result" else
                             f"row_kind {k!r}: not a per-framework result (a summary or a single "
                             f"run repeating one)"))
    drops.mark_each(framework.map(lambda f: None if f in PYTORCH_FRAMEWORKS else
                                  f"framework {f!r}: perfcast builds PyTorch graphs"))
    gpus = positive_int(raw["total_gpus"])
    drops.mark(gpus.isna(), "missing or invalid total_gpus")
    drops.mark(gpus.fillna(1) != 1,
               "data parallel over more than one GPU (load_dp_scaling reads the scaling)")
    drops.mark_each(model.map(lambda m: None if m in DLPERF_MODELS else
                              f"model {m!r} has no perfcast spec here"))
    prec_raw = text("precision").str.lower()
    drops.mark_each(prec_raw.map(lambda p: None if p in DLPERF_PRECISIONS else
                                 f"unknown precision {p!r}"))
    dali = text("dali")
    drops.mark(dali.str.contains("DataLoader", regex=False),
               "fed by torch.utils.data.DataLoader: host data loading bounds the step (other "
               "sources time synthetic input)")
    batch = positive_int(raw["batch_size_per_device"])
    drops.mark(batch.isna(), "missing or invalid batch_size_per_device")
    rate = positive_number(raw["samples_per_s"])
    drops.mark(rate.isna(), "missing target value (samples_per_s missing or not > 0)")
    seq = positive_int(raw["seq_len"])
    drops.mark(model.map(lambda m: DLPERF_MODELS.get(m, ("", "", None, False))[3]) & seq.isna(),
               "missing sequence length (seq_len) of a text model")
    device = _registry_key(DLPERF_DEVICE)
    if device is None:
        drops.mark(pd.Series(True, index=raw.index),
                   f"device {DLPERF_DEVICE!r} not in perfcast's device registry")

    keep = drops.kept
    labels = framework + " " + model
    if not keep.any():
        return _single_gpu_done(report, drops, labels, empty_frame())
    spec = model[keep].map(DLPERF_MODELS.__getitem__)
    impl = text("implementation")[keep]
    rec = pd.DataFrame(index=raw.index[keep])
    rec["model"] = spec.map(lambda s: s[0])
    rec["family"] = spec.map(lambda s: s[1])
    rec["device"] = device
    rec["mode"] = "train"
    rec["precision"] = prec_raw[keep].map(DLPERF_PRECISIONS)
    rec["batch_size"] = batch[keep].astype("int64")
    rec["input_size"] = spec.map(lambda s: s[2])
    rec["seq_len"] = pd.array([int(v) if s[3] else pd.NA for v, s in
                               zip(seq[keep].fillna(0), spec)], dtype="Int64")
    rec["time_ms"] = rec["batch_size"] / rate[keep] * 1000.0
    rec["num_gpus"] = 1
    rec["global_batch_size"] = rec["batch_size"]
    rec["source"] = DP_SCALING_FILE
    rec["source_row"] = rec.index.astype("int64")
    rec["raw_model"] = model[keep]
    rec["arch"] = rec["model"].str.split(":", n=1).str[1]
    rec["software"] = text("framework_version")[keep].map(_software)
    opt = [_optimizer(f, i) for f, i in zip(rec["family"], impl)]
    rec["optimizer"] = [o for o, _ in opt]
    rec["assumed"] = [",".join([*(["input_size"] if s[2] else []),
                                *(["optimizer"] if assumed else [])]) or None
                      for (_, assumed), s in zip(opt, spec)]
    rec["framework"] = framework[keep]
    rec["implementation"] = impl
    rec["precision_detail"] = text("precision_detail")[keep]
    rec["input_pipeline"] = dali[keep]
    rec["other_settings"] = text("other_settings")[keep]
    rec["samples_per_s"] = rate[keep]
    rec["upstream_source"] = (f"{_DLPERF_UPSTREAM} " + text("source_readme")[keep] + ":"
                              + text("source_line")[keep])
    rec = drop_duplicates(rec, drops, ["device", "model", "precision", "batch_size", "seq_len",
                                       "software", "implementation", "precision_detail",
                                       "input_pipeline", "other_settings"],
                          "same framework, implementation, precision, batch and settings")
    frame = finalize(rec)
    fed = int(frame["input_pipeline"].str.startswith("yes").sum())
    if fed:
        report.flags["input from DALI (an ImageNet pipeline, not synthetic)"] = fed
    guessed = int(frame["assumed"].fillna("").str.contains("optimizer").sum())
    if guessed:
        report.flags["optimizer not in the row: SGD with momentum, what the scripts run "
                     "(assumed)"] = guessed
    return _single_gpu_done(report, drops, labels, frame)


def _single_gpu_done(report: LoadReport, drops: Drops, labels: pd.Series,
                     frame: pd.DataFrame) -> pd.DataFrame:
    report.dropped = drops.counts()
    report.examples = drops.examples(labels)
    report.rows_out = len(frame)
    report.describe(frame)
    return with_report(frame, report)


__all__ = ["DLPERF_CLUSTER", "DLPERF_DEVICE", "DLPERF_MODELS", "PCIE4_GBS", "VIDUR_CLUSTERS",
           "load_deepspeed_zero", "load_dlperf_single_gpu", "load_dp_scaling",
           "load_megatron_gpt", "load_vidur_network"]
