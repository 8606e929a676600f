"""Multi-GPU training measurements: DLPerf (Oneflow-Inc/DLPerf, Apache-2.0) on 1–32
Tesla V100-SXM2-16GB (8 per node, NVLink hybrid mesh inside a node, one 100 Gb/s InfiniBand EDR
adapter per node), and Vidur's collective-communication profiles (microsoft/vidur, MIT).

    load_megatron_gpt()     dlperf/megatron_gpt.csv     GPT pre-training, 18 layouts × 2 frameworks
    load_dp_scaling()       dlperf/dp_scaling.csv       data-parallel speed-up, 1–32 GPUs
    load_deepspeed_zero()   dlperf/deepspeed_zero.csv   ZeRO stage 0/1 memory per GPU
    load_vidur_network()    vidur/network/*.csv         all-reduce / send-recv latency

Files are read in place (``data_dir=``, else ``$PERFCAST_DATA``); values are never edited. Each
frame keeps the source columns and adds perfcast's names (``time_ms``, ``memory_mb`` in MiB,
``data_parallel`` …) so the evaluation (``benchmarks/distributed_eval.py``) reads one schema.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.datasets._base import data_file, read_csv, require_columns, resolve_data_dir
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


__all__ = ["DLPERF_CLUSTER", "PCIE4_GBS", "VIDUR_CLUSTERS", "load_deepspeed_zero",
           "load_dp_scaling", "load_megatron_gpt", "load_vidur_network"]
