"""LLM pre-training throughput on current clusters: MosaicML llm-foundry's benchmark table
(mosaicml/llm-foundry, Apache-2.0, ``scripts/train/benchmarking/README.md``) — MPT models of
125M–70B parameters pre-trained with PyTorch FSDP (Composer) on A100 40 GB and A100 80 GB, 8 GPUs
per node on NVSwitch, 1,600 Gb/s RoCE between nodes, FlashAttention, 8–128 GPUs.

    load_llm_foundry()   train-scale/llm_foundry_a100.csv   one row per configuration

Files are read in place (``data_dir=``, else ``$PERFCAST_DATA``); values are never edited. The
frame keeps the source columns and adds perfcast's names, as :mod:`perfcast.datasets.dlperf`
does, so ``benchmarks/distributed_eval.py`` reads one schema:

* ``device`` — the perfcast device key (``a100-40gb`` / ``a100-80gb``: SXM4 parts);
* ``data_parallel`` (= ``gpus``: FSDP shards over every GPU, no tensor or pipeline split),
  ``zero`` (``FULL_SHARD`` = 3, ``SHARD_GRAD_OP`` = 2), ``recompute`` (``full`` when
  ``activation_checkpointing``, else ``none``), ``micro_batch``;
* ``perfcast_precision`` — ``bf16``: both ``amp_bf16`` (FSDP ``DEFAULT``) and ``bf16`` (FSDP
  ``PURE``) compute in bf16 and keep fp32 sharded parameters and AdamW state (FSDP's flat
  parameters stay fp32; ``param_dtype`` is what they are gathered in) — perfcast's parallel
  ``bf16`` (2-byte weights and gradients in flight, fp32 master and state);
  ``grad_reduce_bytes`` — the gradient reduce-scatter's element size (``DEFAULT``: fp32, 4;
  ``PURE``: bf16, 2);
* ``time_ms`` — one optimizer step: ``global_batch × seq_len / tokens_per_s`` (the table's
  rounded throughput); ``tokens_per_gpu_s`` — ``tokens_per_s / gpus``.

:func:`mpt_config` gives a model's Hugging Face config (no hub download): a GPT-2 layout —
learned position embeddings of ``seq_len``, pre-norm blocks, MLP 4·d with GELU, tied
vocabulary head — which is MPT's benchmark architecture; its parameter count equals the
table's ``params`` (the benchmark's MPT kept its biases' places in the count: the GPT-2 config
with biases reproduces it exactly). :func:`config_spec` writes it to a folder and returns the
``hf:`` spec.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfcast.datasets._base import data_file, read_csv, require_columns, resolve_data_dir
from perfcast.errors import PerfcastError

LLM_FOUNDRY_FILE = "train-scale/llm_foundry_a100.csv"
#: The benchmark's clusters as a perfcast cluster (``--cluster``): 8 A100-SXM4 per node on
#: NVSwitch (NVLink 3: 12 links × 25 GB/s per direction), 1,600 Gb/s RoCE per node between
#: nodes (the table's section headings) = 200 GB/s ÷ 8 GPUs = 25 GB/s per GPU.
LLM_FOUNDRY_CLUSTER = {"name": "MosaicML A100 cluster", "gpus_per_node": 8,
                       "intra_node_gbs": 300.0, "inter_node_gbs": 1600 / 8 / 8,
                       "source": "mosaicml/llm-foundry scripts/train/benchmarking/README.md "
                                 "(A100 40GB / 80GB with 1600 Gbps node-node interconnect "
                                 "(RoCE), 8 GPUs per node); NVLink 3 through NVSwitch: 12 "
                                 "links × 25 GB/s per direction (NVIDIA A100 datasheet)"}
#: The table's GPU names → perfcast device keys.
DEVICES = {"a100_40gb": "a100-40gb", "a100_80gb": "a100-80gb"}
#: FSDP sharding strategies → ZeRO stages.
SHARDING = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0}


def load_llm_foundry(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """``train-scale/llm_foundry_a100.csv``: one row per configuration, with the columns of the
    module docstring added (``device``, ``data_parallel``, ``zero``, ``recompute``,
    ``micro_batch``, ``perfcast_precision``, ``grad_reduce_bytes``, ``time_ms``,
    ``tokens_per_gpu_s``, ``source``, ``source_row``)."""
    path = data_file(resolve_data_dir(data_dir), LLM_FOUNDRY_FILE)
    df = read_csv(path)
    require_columns(df, path, ("model", "d_model", "n_heads", "n_layers", "vocab", "seq_len",
                               "gpus", "gpu", "precision", "mp_mode", "sharding",
                               "activation_checkpointing", "micro_batch", "grad_accum",
                               "global_batch", "tokens_per_s", "params"))
    df = df.copy()
    df["source"] = path.name
    df["source_row"] = np.arange(len(df))
    unknown = sorted(set(df["gpu"]) - set(DEVICES))
    if unknown:
        raise PerfcastError(f"{path.name}: unknown gpu {unknown} (known: {sorted(DEVICES)})")
    bad = sorted(set(df["sharding"]) - set(SHARDING))
    if bad:
        raise PerfcastError(f"{path.name}: unknown sharding {bad} (known: {sorted(SHARDING)})")
    df["device"] = df["gpu"].map(DEVICES)
    df["data_parallel"] = df["gpus"].astype(int)
    df["zero"] = df["sharding"].map(SHARDING).astype(int)
    ckpt = df["activation_checkpointing"].astype(str).str.lower().isin(("true", "1", "yes"))
    df["recompute"] = np.where(ckpt, "full", "none")
    df["micro_batch"] = df["micro_batch"].astype(int)
    df["perfcast_precision"] = "bf16"
    df["grad_reduce_bytes"] = np.where(df["mp_mode"].astype(str).str.upper() == "PURE", 2, 4)
    df["time_ms"] = (df["global_batch"].astype(float) * df["seq_len"].astype(float)
                     / df["tokens_per_s"].astype(float) * 1e3)
    df["tokens_per_gpu_s"] = df["tokens_per_s"].astype(float) / df["gpus"].astype(float)
    return df.reset_index(drop=True)


def mpt_config(row: Any) -> dict[str, Any]:
    """The Hugging Face config (a dict) of the row's MPT model: GPT-2's layout at its
    ``d_model``, ``n_heads``, ``n_layers``, ``vocab`` and a position table of ``seq_len``."""
    get = row.get if isinstance(row, dict) else (lambda k: getattr(row, k))
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
            "n_embd": int(get("d_model")), "n_head": int(get("n_heads")),
            "n_layer": int(get("n_layers")), "n_positions": int(get("seq_len")),
            "vocab_size": int(get("vocab")), "activation_function": "gelu_new",
            "_name_or_path": f"{get('model')} (llm-foundry MPT, seq {int(get('seq_len'))})"}


def config_spec(row: Any, folder: str | os.PathLike) -> str:
    """Write :func:`mpt_config` of ``row`` into ``folder`` (once) and return its ``hf:`` spec."""
    cfg = mpt_config(row)
    path = Path(folder) / (f"mpt_d{cfg['n_embd']}_h{cfg['n_head']}_l{cfg['n_layer']}"
                           f"_v{cfg['vocab_size']}_s{cfg['n_positions']}.json")
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cfg, sort_keys=True))
    return f"hf:{path}"


__all__ = ["DEVICES", "LLM_FOUNDRY_CLUSTER", "LLM_FOUNDRY_FILE", "SHARDING", "config_spec",
           "load_llm_foundry", "mpt_config"]
