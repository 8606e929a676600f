"""Trace the prefill and decode-step graphs of the shipped decoder LLMs and simulate their memory,
and write what ``--mode generate`` reads from them to ``perfcast/llm/graph_summaries.json``:

    .venv/bin/python benchmarks/llm_graphs.py [MODEL ...]   # ≈ 40 min on 1 core, all models

Per model:

* the **prefill graph** (batch 1, ``hf:`` frontend, SDPA attention, no KV cache) is traced at
  128 and 256 tokens and its tensor memory simulated (inference, fp16) at the same lengths.
  FLOPs of a prefill of ``T`` tokens are ``α·T + β·T²`` (linear layers + causal attention) and
  the activation peak ``c + d·T``: two lengths determine both exactly, so no request ever traces
  a graph (``perfcast.llm.graphs`` evaluates them at any length);
* the **decode-step graph** — one new token per sequence attending a KV cache of ``c`` tokens,
  the cache handed to the model as a transformers ``DynamicCache`` built from ``[1, kv_heads, c,
  head_dim]`` tensors — is traced at :data:`DECODE_LENGTHS` cache lengths (those within the
  model's positions). Its FLOPs are linear in ``c`` (the layers once, attention over ``c``
  keys): the least-squares line through the traces gives a decode step at any cache length, and
  a request's ``O − 1`` steps at ``I … I+O−2`` are summed from it — ``O`` graphs are never
  traced. The third length checks the line (``decode_linearity_error`` ≤ 1e-6 relative).

The graphs stay in perfcast's graph cache (prefill ones), where ``benchmarks/llm_report.py``
reads them for the GNN baseline. ``--decode-only`` adds the decode traces to models already
summarised.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

OUT = REPO / "perfcast" / "llm" / "graph_summaries.json"
LENGTHS = (128, 256)
DECODE_LENGTHS = (128, 512, 1024)


def _decode_module(model, config):
    import torch
    from transformers import DynamicCache

    from perfcast.zoo.hf import _main_output

    text = getattr(config, "text_config", None) or config

    class Decode(torch.nn.Module):
        """``forward(input_ids [B, 1], k_0, v_0, k_1, v_1, …)``: one decode step of ``model``
        over a KV cache given as per-layer tensors ``[B, kv_heads, c, head_dim]``."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, *kv):
            cache = DynamicCache(config=text)
            for i in range(len(kv) // 2):
                cache.update(kv[2 * i], kv[2 * i + 1], i)
            out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True)
            return _main_output(out)

    return Decode()


def summarize_decode(model_id: str) -> dict:
    """The decode-step graph at :data:`DECODE_LENGTHS` cache lengths: FLOPs, nodes, edges and
    the line ``decode_alpha + decode_beta · c`` through them."""
    import numpy as np
    import torch

    from perfcast.frontends.torch_frontend import graph_from_module
    from perfcast.llm.arch import llm_arch
    from perfcast.zoo.hf import build_hf_model, resolve_hf_config

    t0 = time.perf_counter()
    arch = llm_arch(f"hf:{model_id}")
    top = (arch.max_positions or 10 ** 9) - 1
    lengths = [c for c in DECODE_LENGTHS if c <= top]
    row: dict = {"decode_lengths": lengths}
    for c in lengths:
        config, _ = resolve_hf_config(model_id)
        model = build_hf_model(config, "infer")
        kv = [torch.empty(1, arch.kv_heads, c, arch.head_dim, device="meta")
              for _ in range(2 * arch.layers)]
        ids = torch.zeros(1, 1, dtype=torch.long, device="meta")
        g = graph_from_module(_decode_module(model, config), (ids, *kv),
                              model_id=f"{model_id} decode@{c}")
        row.setdefault("decode_flops", []).append(float(g.flops))
        row.setdefault("decode_nodes", []).append(len(g.nodes))
        row.setdefault("decode_edges", []).append(int(g.num_edges))
    c, f = np.array(lengths, float), np.array(row["decode_flops"])
    beta, alpha = np.polyfit(c, f, 1)
    row["decode_alpha"], row["decode_beta"] = float(alpha), float(beta)
    row["decode_linearity_error"] = float(np.max(np.abs(alpha + beta * c - f) / f))
    row["decode_seconds"] = round(time.perf_counter() - t0, 1)
    return row


def decoder_ids() -> list[str]:
    """Shipped configs that are decoder LLMs (``llm_arch`` accepts them)."""
    from perfcast.llm.arch import llm_arch
    from perfcast.zoo.hf import shipped_model_ids

    out = []
    for m in shipped_model_ids():
        try:
            a = llm_arch(f"hf:{m}")
        except Exception:  # noqa: BLE001 - encoders, encoder-decoders
            continue
        if a.model_type not in ("bert", "roberta", "distilbert", "deberta-v2", "t5") \
                and not m.startswith("llava"):  # vision-language: not served as text here
            out.append(m)
    return out


def summarize(model_id: str) -> dict:
    import perfcast
    from perfcast.memory import simulate_memory

    t0 = time.perf_counter()
    row: dict = {"lengths": list(LENGTHS)}
    for t in LENGTHS:
        g = perfcast.load_graph(f"hf:{model_id}", batch_size=1, seq_len=t)
        row.setdefault("flops", []).append(float(g.flops))
        row.setdefault("nodes", []).append(len(g.nodes))
        row.setdefault("edges", []).append(int(g.num_edges))
        try:
            m = simulate_memory(f"hf:{model_id}", batch_size=1, seq_len=t, mode="infer",
                                precision="fp16")
        except Exception:  # noqa: BLE001 - MoE grouped_mm: no fp16 fake kernel on CPU
            m = simulate_memory(f"hf:{model_id}", batch_size=1, seq_len=t, mode="infer",
                                precision="bf16")  # same bytes as fp16
            row["simulated_precision"] = "bf16 (fp16 grouped GEMM cannot be faked on CPU)"
        row.setdefault("activation_peak_mb", []).append(float(m.activation_peak_mb))
        row.setdefault("tensor_peak_mb", []).append(float(m.tensor_peak_mb))
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def main(argv: list[str]) -> None:
    from perfcast.paths import write_file_atomically

    decode_only = "--decode-only" in argv
    argv = [a for a in argv if a != "--decode-only"]
    data = json.loads(OUT.read_text()) if OUT.is_file() else {"models": {}}
    data["_comment"] = ("Prefill graphs (at 'lengths' tokens) and decode-step graphs (one token "
                        "over a KV cache of 'decode_lengths' tokens) of shipped decoder LLMs "
                        "traced by perfcast (batch 1, hf: frontend), and the prefill's simulated "
                        "tensor memory (inference, fp16); written by benchmarks/llm_graphs.py.")
    ids = argv or decoder_ids()
    for m in ids:
        row = data["models"].get(m)
        if row is not None and "decode_flops" in row and not argv:
            continue
        print(m, file=sys.stderr, flush=True)
        try:
            if row is None or (argv and not decode_only):
                if decode_only:
                    continue
                row = summarize(m)
            row.update(summarize_decode(m))
        except Exception as exc:  # noqa: BLE001 - record and go on
            print(f"  failed: {exc}", file=sys.stderr, flush=True)
            continue
        data["models"][m] = row
        write_file_atomically(OUT, json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(OUT)


if __name__ == "__main__":
    main(sys.argv[1:])
