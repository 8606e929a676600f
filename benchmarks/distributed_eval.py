"""The evaluation of distributed training — collectives, Megatron layouts, FSDP on current
clusters, data-parallel scaling and throughput, ZeRO memory, speed — and the fit of the shipped
parameters.

    .venv/bin/python benchmarks/distributed_eval.py            # everything (~40 min)
    .venv/bin/python benchmarks/distributed_eval.py --no-ship  # evaluate, keep the shipped files
    .venv/bin/python benchmarks/distributed_eval.py --quick --skip-throughput --skip-speed

Writes ``reports/distributed/README.md`` and its tables (``collectives.csv``,
``megatron_loco.csv``, ``train_scale_eval.csv``, ``dp_scaling_eval.csv``,
``cnn_throughput.csv``, ``zero_memory.csv``, ``speed.json``) and, unless ``--no-ship``, the
parameters perfcast ships, each fitted on *all* rows of its data:
``perfcast/parallel/collectives.json`` (Vidur's A100 DGX profiles) and
``perfcast/parallel/efficiency.json`` (DLPerf's Megatron-LM runs and llm-foundry's FSDP runs
together; ``overlap_ddp`` / ``straggler_ddp`` from DLPerf's PyTorch data-parallel scaling).
Every number in the report is out of sample:

1. **collectives** — leave-one-configuration-out on Vidur's A100 DGX profiles (a configuration:
   collective × GPUs × GPUs per node; fitted on messages ≥ 64 KiB — the range training sends;
   smaller ones are launch noise), then the model fitted on all of them applied to the other
   topologies (A100 NVLink pairs, their 4-GPU PCIe ring, A40 pairs);
2. **Megatron layouts** — leave-one-case-out on ``dlperf/megatron_gpt.csv``, per framework
   (Megatron-LM, OneFlow: different software, fitted apart): the efficiencies of
   :mod:`perfcast.parallel.fit` on 17 cases, the 18th predicted; and for Megatron-LM the
   shipped recipe (the other 17 with every llm-foundry run);
3. **current clusters** — llm-foundry's MPT runs (``train-scale/llm_foundry_a100.csv``): leave
   one model size out and leave one GPU type out, the joint fit on the rest (with DLPerf)
   beside a flat-MFU rule fitted on the same rows; memory: every run must fit;
4. **data-parallel scaling** — per series of ``dlperf/dp_scaling.csv`` (framework, model,
   precision, batch per GPU …), the speed-up from 1 to N GPUs predicted from the series'
   measured 1-GPU step (the compute) + the exposed gradient all-reduce + the wait for the
   slowest replica; ω and σ fitted (robust loss) on the framework's *other* series, and for
   PyTorch DDP on the other PyTorch series, before (squared loss) and after;
5. **data-parallel throughput** — the whole ``perfcast predict`` answer (single-GPU step
   included) on DLPerf's 1-32 V100 rows and the torchvision benchmark's 1-4 GPU rows;
6. **ZeRO memory** — GPT-2 small under DeepSpeed ZeRO 0/1 and OneFlow's optimizer placement:
   memory per GPU predicted by the layout model, raw and with a framework constant (allocator
   reserve, communication buffers) fitted leave-one-row-out on the framework's other rows;
7. **speed** — the 1-trillion-parameter GPT on 3,072 GPUs (fresh process, empty caches, wall
   time and peak RSS) and ``perfcast plan`` over every layout of GPT-3 175B on 1,024 GPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "reports" / "distributed"
CONFIGS = REPO / "benchmarks" / "configs"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
COMMAND = ".venv/bin/python benchmarks/distributed_eval.py"
#: Messages below this are left out of the collectives fit (launch noise).
MIN_FIT_BYTES = 64 * 1024


def _mape(pred, meas) -> float:
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    return float(np.mean(np.abs(pred / meas - 1)) * 100)


def _md(df: pd.DataFrame, floatfmt: str = ".1f") -> str:
    """A GitHub markdown table (floats with ``floatfmt``, thousands separated)."""
    def cell(v) -> str:
        if isinstance(v, (float, np.floating)):
            return "—" if not np.isfinite(v) else format(float(v), "," + floatfmt)
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            return f"{int(v):,}"
        return str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |"
            for row in df.itertuples(index=False, name=None)]
    return "\n".join([head, rule, *body])


# ------------------------------------------------------------------------------- 1 collectives
def collectives(ship: bool) -> tuple[dict, str, object]:
    from perfcast.datasets.dlperf import PCIE4_GBS, VIDUR_CLUSTERS, load_vidur_network
    from perfcast.parallel import collectives as C
    from perfcast.parallel.cluster import Cluster

    rows = load_vidur_network()
    clusters = {k: Cluster.from_dict(v) for k, v in VIDUR_CLUSTERS.items()}
    # a ring of 4 over NVLink pairs crosses PCIe; A40 pairs measured at PCIe-like speed
    clusters[("a100_pairwise_nvlink", 4)] = replace(clusters["a100_pairwise_nvlink"],
                                                   intra_node_gbs=PCIE4_GBS)
    clusters["a40_pairwise_nvlink"] = Cluster(gpus_per_node=8, intra_node_gbs=PCIE4_GBS,
                                              inter_node_gbs=25.0, name="A40 pairs")
    dgx = rows[rows.topology == "a100_dgx"]
    fit_rows = dgx[dgx.bytes >= MIN_FIT_BYTES]
    groups = ["collective", "gpus", "gpus_per_node"]
    out = []

    def row(key, held, pred, fit, topology="a100_dgx"):
        big = (held.bytes >= 2**20).to_numpy()
        return {"topology": topology, "collective": key[0], "gpus": key[1],
                "gpus_per_node": key[2], "nodes": key[1] // key[2], "points": len(held),
                "mape_ge_1MiB_%": _mape(pred[big], held.time_ms[big]),
                "mape_ge_64KiB_%": _mape(pred, held.time_ms), "fit": fit}

    # (a) held-out message sizes: five folds of every configuration's sizes
    fold = (fit_rows.groupby(groups).cumcount() % 5).to_numpy()
    pred = np.empty(len(fit_rows))
    for k in range(5):
        m = C.fit(fit_rows[fold != k], clusters)
        pred[fold == k] = C.predict_rows(m, fit_rows[fold == k], clusters)
    for key, idx in fit_rows.groupby(groups).indices.items():
        out.append(row(key, fit_rows.iloc[idx], pred[idx], "held-out sizes (5 folds)"))
    # (b) a configuration never seen: fitted on the others (all-reduce configurations only:
    # each send / recv configuration is the only one of its link, whose η_p2p it alone fixes)
    for key, held in fit_rows[fit_rows.collective == "all_reduce"].groupby(groups):
        m = C.fit(fit_rows.drop(held.index), clusters)
        out.append(row(key, held, C.predict_rows(m, held, clusters), "leave-one-config-out"))
    # (d) what an α–β curve can do at all: each configuration fitted alone on all its sizes
    from scipy.optimize import least_squares

    for key, g in fit_rows.groupby(groups):
        S, t = g.bytes.to_numpy() / 1e6, g.time_ms.to_numpy()
        r = least_squares(lambda x: np.log(np.exp(x[0]) + S / np.exp(x[1])) - np.log(t),
                          [np.log(0.05), np.log(10.0)])
        out.append(row(key, g, np.exp(r.x[0]) + S / np.exp(r.x[1]),
                       "oracle: this configuration alone, in sample"))
    full = C.fit(fit_rows, clusters, trained_on={
        "data": "vidur/network/a100_dgx-{all_reduce,send_recv}.csv (microsoft/vidur, MIT)",
        "messages": f">= {MIN_FIT_BYTES} bytes", "command": COMMAND,
        "evaluation": "reports/distributed/README.md"})
    other = rows[(rows.topology != "a100_dgx") & (rows.gpus_per_node > 1)
                 & (rows.bytes >= MIN_FIT_BYTES)]
    for key, g in other.groupby(["topology", *groups]):
        out.append(row(key[1:], g, C.predict_rows(full, g, clusters), "transfer (all DGX)",
                       key[0]))
    df = pd.DataFrame(out)
    df.to_csv(OUT / "collectives.csv", index=False)
    if ship:
        from perfcast.paths import package_data

        (package_data("parallel") / "collectives.json").write_text(
            json.dumps(full.to_dict(), indent=1, sort_keys=True) + "\n")
    def mean(fit, nodes=None):
        d = df[df.fit == fit]
        if nodes == 1:
            d = d[d.nodes == 1]
        elif nodes == 2:
            d = d[d.nodes > 1]
        return float(d["mape_ge_1MiB_%"].mean())

    summary = {"oracle_mape_ge_1MiB_%": mean("oracle: this configuration alone, in sample"),
               "oracle_inter_mape_ge_1MiB_%": mean("oracle: this configuration alone, in sample",
                                                   2),
               "sizes_mape_ge_1MiB_%": mean("held-out sizes (5 folds)"),
               "sizes_intra_mape_ge_1MiB_%": mean("held-out sizes (5 folds)", 1),
               "sizes_inter_mape_ge_1MiB_%": mean("held-out sizes (5 folds)", 2),
               "loco_mape_ge_1MiB_%": mean("leave-one-config-out"),
               "loco_intra_mape_ge_1MiB_%": mean("leave-one-config-out", 1),
               "loco_inter_mape_ge_1MiB_%": mean("leave-one-config-out", 2),
               "params": {k: round(float(getattr(full, k)), 4) for k in C.PARAMS}}
    text = (f"Fitted on messages ≥ 64 KiB of Vidur's A100 DGX profiles (nine configurations: "
            f"collective × GPUs × GPUs per node). Three tests: (a) held-out message sizes — "
            f"five folds over every configuration's sizes; (b) an all-reduce configuration "
            f"never seen — fitted on the other eight (a send / recv configuration is the only "
            f"one of its link: it alone fixes that link's η_p2p); (c) the model fitted on all nine applied to the other "
            f"machines (their nominal links: NVLink bridge 300 GB/s, PCIe Gen4 32 GB/s); and (d) "
            f"the floor of any α–β curve: each configuration fitted alone, in sample — where "
            f"even that misses, the profile is not a latency plus a bandwidth (NCCL's protocol "
            f"and algorithm switches, an erratic network). MAPE per configuration:\n\n{_md(df)}\n\nShipped parameters (all A100 DGX "
            f"configurations): "
            + ", ".join(f"`{k}` {v:g}" for k, v in summary["params"].items()) + "\n")
    return summary, text, full


# ------------------------------------------------------------------------------- 2 megatron
def _gpt_config(h: int, a: int, L: int, vocab: int, seq: int, folder: Path) -> str:
    path = folder / f"gpt_h{h}_a{a}_l{L}_v{vocab}_s{seq}.json"
    if not path.exists():
        path.write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
                                    "n_embd": h, "n_head": a, "n_layer": L, "n_positions": seq,
                                    "vocab_size": vocab, "activation_function": "gelu_new"}))
    return f"hf:{path}"


def megatron_cases(folder: Path):
    from perfcast.datasets.dlperf import DLPERF_CLUSTER, load_megatron_gpt
    from perfcast.devices import get_device
    from perfcast.parallel.blocks import trace
    from perfcast.parallel.cluster import Cluster
    from perfcast.parallel.fit import Case
    from perfcast.workload import Layout

    df = load_megatron_gpt()
    cl = Cluster.from_dict(DLPERF_CLUSTER)
    dev = get_device("v100-16gb")
    traced: dict = {}
    cases: dict[str, list] = {}
    for r in df.itertuples():
        key = (int(r.hidden_size), int(r.num_attention_heads), int(r.num_layers),
               int(r.vocab_size), int(r.seq_len))
        if key not in traced:
            traced[key] = trace(_gpt_config(*key, folder), key[4])
        lay = Layout(data=int(r.data_parallel), tensor=int(r.tensor_parallel),
                     pipeline=int(r.pipeline_parallel), micro_batch=int(r.micro_batch),
                     recompute=r.recompute)
        # Megatron-LM (2021) all-reduces the gradients after the backward pass: ω = 0;
        # OneFlow's overlap is fitted
        cases.setdefault(r.framework, []).append(
            Case(name=r.case, traced=traced[key], layout=lay, batch=int(r.global_batch_size),
                 precision="fp16", optimizer="adam", device=dev, cluster=cl,
                 time_ms=float(r.time_ms),
                 memory_mb=None if pd.isna(r.memory_mb) else float(r.memory_mb),
                 overlap=0.0 if r.framework == "megatron-lm" else None))
    return df, cases


def megatron(coll, mdf: pd.DataFrame, cases: dict, ts_cases: list | None,
             shipped) -> tuple[dict, str]:
    """Leave one case out per framework: the efficiencies fitted on the framework's other 17
    cases alone (DLPerf alone, as the model's own test) and, for Megatron-LM, the shipped
    fit's recipe — its other 17 cases together with every llm-foundry run (``ts_cases``;
    ``None``: skipped)."""
    from perfcast.parallel.fit import FREE, fit_efficiency, predict_cases
    from perfcast.parallel.predict import runtime_overhead_mb

    group = dict(zip(mdf["case"], mdf["group"]))
    rows = []
    rt = runtime_overhead_mb()
    for fw, cs in cases.items():
        free = {**FREE, "overlap": (0.0, 1.0)} if cs[0].overlap is None else FREE
        for i, c in enumerate(cs):
            eff = fit_efficiency(cs[:i] + cs[i + 1:], coll, free=free)
            e = predict_cases([c], eff, coll, rt)[0]
            joint = None
            if fw == "megatron-lm" and ts_cases is not None:
                ej = fit_joint(cs[:i] + cs[i + 1:], ts_cases, coll)
                joint = predict_cases([c], ej, coll, rt)[0].time_ms
            rows.append({"framework": fw, "kind": group[c.name], "case": c.name,
                         "gpus": c.layout.gpus, "measured_ms": c.time_ms,
                         "predicted_ms": e.time_ms,
                         "error_%": 100 * (e.time_ms / c.time_ms - 1),
                         "joint_predicted_ms": joint,
                         "joint_error_%": None if joint is None else
                         100 * (joint / c.time_ms - 1),
                         "measured_mib": c.memory_mb, "predicted_mib": e.memory_mb,
                         "gemm": eff.gemm, "memory": eff.memory, "overlap": eff.overlap,
                         "network": eff.network})
    df_out = pd.DataFrame(rows)
    df_out.to_csv(OUT / "megatron_loco.csv", index=False)
    df_out["abs"] = df_out["error_%"].abs()
    by_kind = df_out.groupby(["framework", "kind"]).agg(
        cases=("case", "size"), mape_pct=("abs", "mean"), worst_pct=("abs", "max")).reset_index()
    by_fw = df_out.groupby("framework").agg(cases=("case", "size"), mape_pct=("abs", "mean"),
                                            median_pct=("abs", "median")).reset_index()
    joint = df_out.dropna(subset=["joint_predicted_ms"])
    joint_err = float(joint["joint_error_%"].abs().mean()) if len(joint) else None
    mem = df_out.dropna(subset=["measured_mib"]).copy()
    by_case = {c.name: c for c in cases.get("oneflow", [])}
    mem["before_mib"] = _old_memory([by_case[n] for n in mem.case], shipped, coll, rt)
    mem_err = _mape(mem.predicted_mib, mem.measured_mib) if len(mem) else None
    mem_before = _mape(mem.before_mib, mem.measured_mib) if len(mem) else None
    summary = {"mape_%": {r.framework: r.mape_pct for r in by_fw.itertuples()},
               "median_%": {r.framework: r.median_pct for r in by_fw.itertuples()},
               "joint_loco_megatron_lm_mape_%": joint_err,
               "oneflow_memory_mape_%": mem_err, "oneflow_memory_before_mape_%": mem_before,
               "shipped": {k: getattr(shipped, k) for k in ("gemm", "attention", "memory",
                                                             "overlap", "overlap_fsdp",
                                                             "overlap_ddp", "straggler_ddp",
                                                             "network")}}
    show = df_out[["framework", "kind", "case", "gpus", "measured_ms", "predicted_ms",
                   "error_%", "joint_predicted_ms", "joint_error_%"]]
    text = (f"Per framework, each case predicted by the efficiencies fitted on the other 17 "
            f"alone (gemm, memory, network; see `perfcast/parallel/fit.py`; Megatron-LM's "
            f"data-parallel all-reduce is not overlapped — in 2021 it ran after the backward "
            f"pass, ω = 0 — OneFlow's ω is fitted):\n\n"
            f"{_md(by_fw)}\n\nThe shipped recipe — the other 17 Megatron-LM cases *together "
            f"with* llm-foundry's 139 FSDP runs (section 3) — on each Megatron-LM case: "
            + (f"{joint_err:.1f} % MAPE (`joint_*` columns)." if joint_err is not None else
               "(skipped: --quick).")
            + f"\n\nBy parallel kind:\n\n{_md(by_kind)}\n\nEvery case:\n\n"
            f"{_md(show)}\n\nMemory per GPU (OneFlow rows; the layout model, no fitting: "
            f"weights, gradients, fp32 master and Adam state, activations, the loss's logits, "
            f"CUDA runtime): MAPE {mem_err:.1f} % (before, with the loss's fp32 copies — 16-bit "
            f"logits + 8 bytes a logit: {mem_before:.1f} %).\n\n"
            f"{_md(mem[['case', 'measured_mib', 'predicted_mib', 'before_mib']], '.0f')}\n")
    return summary, text


# ------------------------------------------------------------------------------- 2b train-scale
#: The joint fit's robust loss (scale in log units): llm-foundry's table has runs its
#: framework slowed for reasons outside the model (an 8-GPU MPT-30B at 98 % of its memory,
#: MPT-760M at sequences 512 / 1,024 below its own 2,048 rows).
JOINT_LOSS, JOINT_SCALE = "soft_l1", 0.05


def train_scale_cases(folder: Path):
    """llm-foundry's 139 MPT configurations as fit cases (FSDP = ZeRO-3 over every GPU, the
    table's micro-batch and checkpointing, bf16 compute with fp32 sharded state and AdamW,
    the gradients reduced in fp32 under ``amp_bf16`` and bf16 under ``PURE``)."""
    from perfcast.datasets.train_scale import LLM_FOUNDRY_CLUSTER, config_spec, load_llm_foundry
    from perfcast.devices import get_device
    from perfcast.parallel.blocks import trace
    from perfcast.parallel.cluster import Cluster
    from perfcast.parallel.fit import Case
    from perfcast.workload import Layout

    df = load_llm_foundry()
    cl = Cluster.from_dict(LLM_FOUNDRY_CLUSTER)
    traced: dict = {}
    cases = []
    for r in df.itertuples():
        spec = config_spec(r, folder)
        if spec not in traced:
            traced[spec] = trace(spec, int(r.seq_len))
        lay = Layout(data=int(r.data_parallel), micro_batch=int(r.micro_batch),
                     zero=int(r.zero), recompute=r.recompute)
        cases.append(Case(name=f"{r.model} {r.device} s{r.seq_len} g{r.gpus} m{r.micro_batch}",
                          traced=traced[spec], layout=lay, batch=int(r.global_batch),
                          precision=r.perfcast_precision, optimizer="adamw",
                          device=get_device(r.device), cluster=cl, time_ms=float(r.time_ms),
                          grad_bytes=float(r.grad_reduce_bytes)))
    return df, cases


def fit_joint(dl_cases: list, ts_cases: list, coll, trained_on: dict | None = None):
    """The efficiencies fitted on DLPerf's Megatron-LM runs and llm-foundry's FSDP runs
    together (:data:`perfcast.parallel.fit.FREE_JOINT`, the robust :data:`JOINT_LOSS`), each
    dataset given half the weight."""
    from perfcast.parallel.fit import FREE_JOINT, fit_efficiency

    cases = list(dl_cases) + list(ts_cases)
    w = [0.5 / max(len(dl_cases), 1)] * len(dl_cases) + [0.5 / max(len(ts_cases), 1)] * \
        len(ts_cases)
    w = list(np.asarray(w) * len(cases))
    return fit_efficiency(cases, coll, free=FREE_JOINT, weights=w, loss=JOINT_LOSS,
                          f_scale=JOINT_SCALE, trained_on=trained_on)


def _flat_mfu(df: pd.DataFrame):
    """FLOPs per token of llm-foundry's MFU (6·params + 12·layers·d_model·seq: the attention
    without the causal halving) and each row's MFU over the bf16 peak."""
    from perfcast.devices import get_device

    fpt = (6 * df.params.astype(float) + 12 * df.n_layers * df.d_model * df.seq_len).to_numpy()
    peak = np.array([get_device(d).peak_bf16_tflops * 1e12 for d in df.device])
    return fpt, peak, df.tokens_per_gpu_s.to_numpy() * fpt / peak


def _tokens(df: pd.DataFrame, idx, time_ms) -> np.ndarray:
    d = df.iloc[idx]
    return d.global_batch.to_numpy() * d.seq_len.to_numpy() / np.asarray(time_ms) * 1e3 / \
        d.gpus.to_numpy()


@contextlib.contextmanager
def _previous_loss_memory():
    """The previous memory model's loss: PyTorch's ``cross_entropy`` on 16-bit logits keeps
    fp32 copies — 2 + 8 bytes a logit (:data:`perfcast.parallel.model.LOSS_BYTES_PER_LOGIT`
    at 16 bits; every run compared here is 16-bit)."""
    from perfcast.parallel import model as pm

    kept = pm.LOSS_BYTES_PER_LOGIT
    pm.LOSS_BYTES_PER_LOGIT = 10.0
    try:
        yield
    finally:
        pm.LOSS_BYTES_PER_LOGIT = kept


def _old_memory(cases: list, eff, coll, rt: float) -> np.ndarray:
    """The previous memory model's answers (MiB): the loss's fp32 copies, no FSDP unit
    buffers."""
    from perfcast.parallel.fit import predict_cases

    with _previous_loss_memory():
        est = predict_cases(cases, eff, coll, rt)
    return np.array([e.memory_mb - e.memory_breakdown_mb.get("zero3_buffers", 0.0)
                     for e in est])


def train_scale(coll, dl_cases, df, cases, dl_only, shipped) -> tuple[dict, str]:
    """Leave one model size out and leave one GPU type out on llm-foundry's table: the joint
    fit on the training folds (DLPerf's 18 Megatron-LM runs always in) against a flat-MFU rule
    fitted on the same training rows; the efficiencies of DLPerf alone (the previous fit);
    memory: every configuration ran, so every one must fit."""
    from perfcast.parallel.fit import predict_cases
    from perfcast.parallel.predict import runtime_overhead_mb

    meas = df.tokens_per_gpu_s.to_numpy()
    fpt, peak, mfu = _flat_mfu(df)
    folds = [("model size", m, np.where(df.model == m)[0]) for m in df.model.unique()]
    folds += [("GPU type", g, np.where(df.device == g)[0]) for g in sorted(df.device.unique())]
    pred = {k: np.full(len(df), np.nan) for k in ("model size", "GPU type")}
    flat = {k: np.full(len(df), np.nan) for k in ("model size", "GPU type")}
    fold_rows = []
    for kind, name, test in folds:
        train = np.setdiff1d(np.arange(len(df)), test)
        e = fit_joint(dl_cases, [cases[i] for i in train], coll)
        t = [x.time_ms for x in predict_cases([cases[i] for i in test], e, coll)]
        pred[kind][test] = _tokens(df, test, t)
        m = float(np.exp(np.mean(np.log(mfu[train]))))
        flat[kind][test] = m * peak[test] / fpt[test]
        fold_rows.append({"held out": kind, "fold": name, "rows": len(test),
                          "perfcast_mape_pct": _mape(pred[kind][test], meas[test]),
                          "flat_mfu_mape_pct": _mape(flat[kind][test], meas[test]),
                          "flat_mfu_fitted": m, "gemm": e.gemm, "attention": e.attention,
                          "memory": e.memory, "overlap_fsdp": e.overlap_fsdp,
                          "network": e.network})
        print(f"  train-scale {kind} {name}: {fold_rows[-1]['perfcast_mape_pct']:.1f} % vs "
              f"flat {fold_rows[-1]['flat_mfu_mape_pct']:.1f} %", flush=True)
    folds_df = pd.DataFrame(fold_rows)
    rt = runtime_overhead_mb()
    est = predict_cases(cases, shipped, coll, rt)
    old_est = predict_cases(cases, dl_only, coll, rt)
    cap = np.array([c.device.memory_mb for c in cases])
    mem = np.array([e.memory_mb for e in est])
    old_mem = _old_memory(cases, shipped, coll, rt)
    rows = df[["model", "device", "seq_len", "gpus", "micro_batch", "grad_accum", "recompute",
               "mp_mode", "tokens_per_gpu_s"]].copy()
    rows["mfu_%"] = mfu * 100
    rows["lomso_predicted"] = pred["model size"]
    rows["logto_predicted"] = pred["GPU type"]
    rows["flat_lomso"] = flat["model size"]
    rows["flat_logto"] = flat["GPU type"]
    rows["dlperf_only_predicted"] = _tokens(df, np.arange(len(df)), [e.time_ms for e in old_est])
    rows["shipped_in_sample"] = _tokens(df, np.arange(len(df)), [e.time_ms for e in est])
    rows["memory_mib"] = mem
    rows["memory_before_mib"] = old_mem
    rows["capacity_mib"] = cap
    rows.to_csv(OUT / "train_scale_eval.csv", index=False)
    err = lambda c: 100 * (rows[c] / rows.tokens_per_gpu_s - 1)  # noqa: E731
    by = []
    for key in ("model", "device", "seq_len", "gpus"):
        g = rows.assign(a=err("lomso_predicted").abs(), b=err("flat_lomso").abs(),
                        c=err("logto_predicted").abs(), d=err("flat_logto").abs())
        by.append(g.groupby(key).agg(rows=("a", "size"), perfcast_lomso=("a", "mean"),
                                     flat_lomso=("b", "mean"), perfcast_logto=("c", "mean"),
                                     flat_logto=("d", "mean")).reset_index()
                  .rename(columns={key: "group"}).assign(by=key))
    by_df = pd.concat(by)[["by", "group", "rows", "perfcast_lomso", "flat_lomso",
                           "perfcast_logto", "flat_logto"]]
    summary = {
        "lomso_mape_%": _mape(rows.lomso_predicted, meas),
        "lomso_flat_mfu_mape_%": _mape(rows.flat_lomso, meas),
        "logto_mape_%": _mape(rows.logto_predicted, meas),
        "logto_flat_mfu_mape_%": _mape(rows.flat_logto, meas),
        "dlperf_only_mape_%": _mape(rows.dlperf_only_predicted, meas),
        "shipped_in_sample_mape_%": _mape(rows.shipped_in_sample, meas),
        "fits_after": int((mem <= cap).sum()), "fits_before": int((old_mem <= cap).sum()),
        "rows": len(rows), "max_memory_fraction": float(np.max(mem / cap)),
        "flat_mfu_all_rows": float(np.exp(np.mean(np.log(mfu))))}
    text = (f"llm-foundry's table (`train-scale/llm_foundry_a100.csv`, {len(rows)} "
            f"configurations: MPT 125M-70B under FSDP FULL_SHARD = ZeRO-3, 8-128 A100 40 / 80 "
            f"GB, sequences 512-65,536, FlashAttention; read by "
            f"`perfcast.datasets.train_scale`). Each row is predicted by the efficiencies "
            f"fitted without it — on DLPerf's 18 Megatron-LM runs and the other rows, each "
            f"dataset half the weight, robust loss ({JOINT_LOSS}, scale {JOINT_SCALE} in log) — "
            f"as `perfcast predict hf:mpt.json --mode train --precision bf16 --data-parallel "
            f"GPUS --zero 3 --micro-batch-size M --recompute full|none` answers it on the "
            f"table's cluster (8 GPUs a node on NVSwitch, 1,600 Gb/s RoCE a node). Beside it, "
            f"the flat-MFU rule *tokens/s = MFU × peak ÷ (6·params + 12·layers·d·seq)* with "
            f"one MFU fitted (geometric mean) on the same training rows. MAPE of tokens/s per "
            f"GPU:\n\n| held out | perfcast | flat-MFU rule |\n|---|---|---|\n"
            f"| one model size (9 folds) | {summary['lomso_mape_%']:.1f} % | "
            f"{summary['lomso_flat_mfu_mape_%']:.1f} % |\n"
            f"| one GPU type (A100-40GB / A100-80GB) | {summary['logto_mape_%']:.1f} % | "
            f"{summary['logto_flat_mfu_mape_%']:.1f} % |\n"
            f"| (before: efficiencies fitted on DLPerf alone, V100s 2021) | "
            f"{summary['dlperf_only_mape_%']:.1f} % | |\n"
            f"| (shipped fit, in sample) | {summary['shipped_in_sample_mape_%']:.1f} % | |\n\n"
            f"Per fold:\n\n{_md(folds_df, '.3g')}\n\nBy group (MAPE %):\n\n"
            f"{_md(by_df)}\n\n**Memory**: every configuration ran, so each must be "
            f"predicted to fit. Before (the loss's fp32 copies: 16-bit logits + 8 bytes a "
            f"logit; no FSDP unit buffers): {summary['fits_before']} of {len(rows)} fit; after "
            f"(a loss fused with its soft-max — llm-foundry's default `fused_crossentropy` — "
            f"keeps the 16-bit logits and their gradient, 4 bytes a logit; FSDP's gathered "
            f"units counted; no S² scores under FlashAttention): {summary['fits_after']} of "
            f"{len(rows)}, the fullest at {summary['max_memory_fraction']:.0%} of its GPU. "
            f"Per row: `train_scale_eval.csv`.\n")
    return summary, text


# ------------------------------------------------------------------------------- 3 dp scaling
def _params() -> dict[str, float]:
    import perfcast

    g1 = perfcast.load_graph("timm:resnet50", batch_size=1)
    g2 = perfcast.load_graph("hf:bert-base-uncased", batch_size=1, seq_len=128)
    return {"ResNet": float(g1.params), "BERT": float(g2.params)}


#: The robust loss of the data-parallel fit: soft-L1 on the log speed-up, linear beyond 3 %
#: (the spread of DLPerf's medians of 5-7 runs), so a series an input pipeline throttles (the
#: PyTorch run with 8 DataLoader workers: 3.49x on 8 GPUs of one node, 6.83x on 16) moves the
#: fit as one outlier, not as the rule.
DP_LOSS, DP_SCALE = "soft_l1", 0.03
PYTORCH = ("NGC PyTorch", "PyTorch")


def dp_series(coll, network: float) -> list[dict]:
    """DLPerf's data-parallel series (framework, model, precision, batch per GPU, …) with the
    1-GPU step, the all-reduce and one bucket's time at each N > 1 and the measured speed-ups."""
    from perfcast.datasets.dlperf import DLPERF_CLUSTER, load_dp_scaling
    from perfcast.parallel.cluster import Cluster
    from perfcast.parallel.model import BUCKET_BYTES, group_per_node

    df = load_dp_scaling()
    cl = Cluster.from_dict(DLPERF_CLUSTER)
    coll = replace(coll, eta_inter=network)
    params = _params()
    ser = []
    for sid, g in df.groupby("series"):
        one = g[g.total_gpus == 1]
        if one.empty or len(g) < 2:
            continue
        t1 = float(one.batch_size_per_device.iloc[0]) / float(one.samples_per_s.median()) * 1e3
        fw = g.framework.iloc[0]
        half = g.precision.iloc[0] != "fp32"
        # PyTorch's AMP keeps fp32 gradients, which DDP all-reduces; the others reduce fp16
        grad_bytes = 4.0 if (not half or fw in PYTORCH) else 2.0
        n_params = params["ResNet"] if g.model.iloc[0].startswith("ResNet") else params["BERT"]
        pts = g[g.total_gpus > 1]
        ar = np.array([coll.time_ms("all_reduce", n_params * grad_bytes, int(n),
                                    group_per_node(int(n), 1, cl), cl)
                       for n in pts.total_gpus])
        bucket = np.array([coll.time_ms("all_reduce", BUCKET_BYTES, int(n),
                                        group_per_node(int(n), 1, cl), cl)
                           for n in pts.total_gpus])
        ser.append({"series": sid, "framework": fw, "model": g.model.iloc[0].split(" ")[0],
                    "precision": g.precision.iloc[0],
                    "batch": int(g.batch_size_per_device.iloc[0]),
                    "t1": t1, "n": pts.total_gpus.to_numpy(int), "ar": ar, "bucket": bucket,
                    "speedup": pts.speedup.to_numpy(float)})
    return ser


def dp_predict(s: dict, omega: float, sigma: float = 0.0) -> np.ndarray:
    """The speed-ups of series ``s``: N·t₁ / (t₁·(1 + σ·√(2 ln N)) + exposed all-reduce) —
    the data-parallel path of :func:`perfcast.parallel.predict.predict_parallel`."""
    exposed = np.maximum(s["bucket"], s["ar"] - omega * s["t1"] * 2 / 3)
    # synchronous SGD waits for the slowest replica: the expected maximum of N step times
    # of relative spread σ is ≈ (1 + σ·√(2 ln N)) × the step
    wait = 1 + sigma * np.sqrt(2 * np.log(s["n"]))
    return s["n"] * s["t1"] / (s["t1"] * wait + exposed)


def dp_fit(train: list[dict], robust: bool = True) -> tuple[float, float]:
    """(ω, σ) over ``train``: the robust least squares of :data:`DP_LOSS` (``robust``), or
    the earlier squared log error on a 21 × 41 grid."""
    if not robust:
        best = None
        for o in np.linspace(0, 1, 21):
            for sg in np.linspace(0, 0.2, 41):
                loss = sum(np.sum(np.log(dp_predict(t, o, sg) / t["speedup"]) ** 2)
                           for t in train)
                if best is None or loss < best[0]:
                    best = (loss, float(o), float(sg))
        return best[1], best[2]
    from scipy.optimize import least_squares

    def resid(x):
        return np.concatenate([np.log(dp_predict(t, x[0], x[1]) / t["speedup"])
                               for t in train])

    best = None
    for x0 in ([0.5, 0.05], [0.9, 0.01], [0.1, 0.1]):  # ω, σ: not convex in ω
        r = least_squares(resid, x0, bounds=([0.0, 0.0], [1.0, 0.3]), loss=DP_LOSS,
                          f_scale=DP_SCALE)
        if best is None or r.cost < best.cost:
            best = r
    return float(best.x[0]), float(best.x[1])


def dp_scaling(coll, network: float) -> tuple[dict, str, tuple[float, float]]:
    ser = dp_series(coll, network)
    rows = []
    for robust in (False, True):
        for i, s in enumerate(ser):
            same = [t for j, t in enumerate(ser) if j != i and t["framework"] == s["framework"]]
            train = same or [t for j, t in enumerate(ser) if j != i]
            omega, sigma = dp_fit(train, robust)
            pred = dp_predict(s, omega, sigma)
            # the PyTorch DDP parameters perfcast ships: fitted on the PyTorch series only
            py = [t for j, t in enumerate(ser) if j != i and t["framework"] in PYTORCH]
            for n, m, p in zip(s["n"], s["speedup"], pred):
                rows.append({"fit": "robust" if robust else "squared (before)",
                             "framework": s["framework"], "model": s["model"],
                             "precision": s["precision"], "batch_per_gpu": s["batch"],
                             "series": s["series"], "gpus": n, "measured_speedup": m,
                             "predicted_speedup": p, "error_%": 100 * (p / m - 1),
                             "omega": omega, "sigma": sigma,
                             "fitted_on": "same framework" if same else "other frameworks"})
            if s["framework"] in PYTORCH:
                o2, s2 = dp_fit(py, robust)
                for n, m, p in zip(s["n"], s["speedup"], dp_predict(s, o2, s2)):
                    rows.append({"fit": ("robust" if robust else "squared (before)")
                                 + ", PyTorch series", "framework": s["framework"],
                                 "model": s["model"], "precision": s["precision"],
                                 "batch_per_gpu": s["batch"], "series": s["series"],
                                 "gpus": n, "measured_speedup": m, "predicted_speedup": p,
                                 "error_%": 100 * (p / m - 1), "omega": o2, "sigma": s2,
                                 "fitted_on": "the other PyTorch series"})
    out = pd.DataFrame(rows)
    out.to_csv(OUT / "dp_scaling_eval.csv", index=False)
    out["abs"] = out["error_%"].abs()
    py_ser = [s for s in ser if s["framework"] in PYTORCH]
    before = dp_fit(py_ser, robust=False)
    overlap_ddp, sigma_ddp = dp_fit(py_ser)
    rob = out[out.fit == "robust"]
    by = rob.groupby(["framework", "model", "precision"]).agg(
        points=("gpus", "size"), mape_pct=("abs", "mean"), worst_pct=("abs", "max")).reset_index()
    at32 = rob[rob.gpus == 32].groupby(["framework", "model", "precision"]).agg(
        measured=("measured_speedup", "median"), predicted=("predicted_speedup", "median"),
        ).reset_index()
    # leave one PyTorch series out, both fits: every series, and without the two whose
    # one-node speed-up an input pipeline caps (8 workers per process)
    loso = out[out.fit.str.endswith("PyTorch series")]
    host = loso.series.str.contains("workers=8;")
    cmp_rows = []
    for fit in ("squared (before), PyTorch series", "robust, PyTorch series"):
        d = loso[loso.fit == fit]
        h = host[loso.fit == fit]
        cmp_rows.append({"fit (ω, σ on the other PyTorch series)": fit.split(",")[0],
                         "series": d.series.nunique(), "points": len(d),
                         "mape_pct": d["abs"].mean(),
                         "mape_pct_without_8_worker_series": d[~h]["abs"].mean(),
                         "mape_pct_within_a_node": d[d.gpus <= 8]["abs"].mean(),
                         "mape_pct_across_nodes": d[d.gpus > 8]["abs"].mean()})
    cmp_df = pd.DataFrame(cmp_rows)
    per_series = loso.groupby(["fit", "framework", "model", "precision", "batch_per_gpu",
                               "series"]).agg(
        points=("gpus", "size"), mape_pct=("abs", "mean"), worst_pct=("abs", "max")
    ).reset_index()
    per_series["series"] = per_series.series.str.replace(r"\s*\|\s*", " | ", regex=True)
    per_series = per_series.pivot_table(
        index=["framework", "model", "precision", "batch_per_gpu", "series"], columns="fit",
        values="mape_pct").reset_index()
    per_series.columns = [str(c) for c in per_series.columns]
    per_series["series"] = per_series.series.map(_short_series)
    summary = {"mape_%": float(rob["abs"].mean()), "median_%": float(rob["abs"].median()),
               "mape_before_%": float(out[out.fit == "squared (before)"]["abs"].mean()),
               "series": len(ser), "points": int(len(rob)),
               "overlap_ddp": overlap_ddp, "sigma_ddp": sigma_ddp,
               "overlap_ddp_before": before[0], "sigma_ddp_before": before[1],
               "pytorch_loso": cmp_rows,
               "mape_by_framework_%": rob.groupby("framework")["abs"].mean().round(1).to_dict()}
    speed8 = 8 / (1 + sigma_ddp * np.sqrt(2 * np.log(8)))
    ngc8 = [float(x) for t in py_ser if t["framework"] == "NGC PyTorch"
            and t["model"].startswith("ResNet") for n, x in zip(t["n"], t["speedup"]) if n == 8]
    capped = next(t for t in py_ser if "workers=8;" in t["series"] and "DataLoader" in t["series"])
    cap_at = {int(n): float(x) for n, x in zip(capped["n"], capped["speedup"])}
    text = (f"{len(ser)} series, {len(rob)} speed-ups (N > 1). The overlap ω and the replicas' "
            f"spread σ are fitted by a robust loss ({DP_LOSS}, scale {DP_SCALE} in log: "
            f"squared below 3 %, linear beyond) — before, by the squared log error, the series "
            f"an input pipeline caps (PyTorch with 8 DataLoader workers per process: "
            f"{cap_at.get(8, float('nan')):.2f}x on 8 GPUs of one node, "
            f"{cap_at.get(16, float('nan')):.2f}x on 16) pulled σ up to {before[1]:.3f}.\n\n"
            f"**PyTorch DDP** (what `perfcast predict … --data-parallel N` models): each "
            f"NGC PyTorch / PyTorch series predicted by ω, σ fitted on the other PyTorch "
            f"series:\n\n{_md(cmp_df)}\n\nPer series (MAPE %, leave one series out):\n\n"
            f"{_md(per_series)}\n\nShipped (all {len(py_ser)} PyTorch series): ω "
            f"{overlap_ddp:.2f}, σ {sigma_ddp:.3f} (before: ω {before[0]:.2f}, σ "
            f"{before[1]:.3f}) — the wait for the slowest of 8 replicas on one node "
            f"{sigma_ddp * np.sqrt(2 * np.log(8)):.1%} of the step (before "
            f"{before[1] * np.sqrt(2 * np.log(8)):.1%}), a compute-bound 8-GPU speed-up of at "
            f"most {speed8:.2f}x (NGC PyTorch ResNet-50 on 8 V100s measured "
            f"{min(ngc8):.2f}-{max(ngc8):.2f}x).\n\n"
            f"**Every framework**, each series predicted by ω, σ fitted on its framework's other "
            f"series (robust; before: {summary['mape_before_%']:.1f} % MAPE): "
            f"{summary['mape_%']:.1f} % MAPE, median {summary['median_%']:.1f} %.\n\n"
            f"{_md(by)}\n\nSpeed-up at 32 GPUs (medians over the series):\n\n"
            f"{_md(at32, '.2f')}\n")
    return summary, text, (overlap_ddp, sigma_ddp)


def _short_series(sid: str) -> str:
    """The settings that tell a framework's series apart (precision detail, data loader,
    workers), without the table heading."""
    parts = [p.strip() for p in sid.split("|")]
    keep = [p for p in parts[3:7] if p and p.lower() not in ("nan", "no")]
    return "; ".join(keep) or "—"


# ------------------------------------------------------------------------------- 3b throughput
def _throughput_row(spec: str, device: str, precision: str, batch: int, n: int, optimizer,
                    cluster=None, seq_len=None) -> tuple[float | None, str]:
    """(samples/s, the time predictor or the error) of ``perfcast predict`` for ``n`` GPUs of
    ``batch`` samples each (``--data-parallel n`` when n > 1)."""
    import perfcast
    from perfcast.errors import PerfcastError

    kw = dict(device=device, mode="train", precision=precision, optimizer=optimizer,
              seq_len=seq_len)
    try:
        if n > 1:
            p = perfcast.predict(spec, batch_size=batch * n, data_parallel=n, cluster=cluster,
                                 **kw)
        else:
            p = perfcast.predict(spec, batch_size=batch, **kw)
    except PerfcastError as exc:
        return None, f"error: {exc}"
    return batch * n / p.time_ms * 1e3, str((p.predictor or {}).get("time_ms", ""))[:60]


def cnn_throughput() -> tuple[dict, str]:
    """Data-parallel training throughput, the whole ``perfcast predict`` answer (the per-GPU
    step included), against every multi-GPU measurement in the data: DLPerf's ResNet-50 and
    BERT-base on 1-32 V100s (every framework's results; perfcast models PyTorch DDP) and the
    torchvision benchmark's 1-4 GPU rows (batch 12 per GPU, ``torch.nn.DataParallel``)."""
    from perfcast.datasets import load_torchvision_benchmark
    from perfcast.datasets.dlperf import DLPERF_CLUSTER, load_dp_scaling

    rows = []
    dl = load_dp_scaling()
    cache: dict = {}
    for r in dl.itertuples():
        bert = str(r.model).startswith("BERT")
        prec = "fp32" if r.precision == "fp32" else "amp"
        key = (bert, prec, int(r.batch_size_per_device), int(r.total_gpus))
        if key not in cache:
            cache[key] = _throughput_row(
                "hf:bert-base-uncased" if bert else "timm:resnet50", "v100-16gb", prec,
                key[2], key[3], "adamw" if bert else "sgd-momentum",
                cluster=DLPERF_CLUSTER, seq_len=128 if bert else None)
        pred, how = cache[key]
        one_key = (*key[:3], 1)
        if one_key not in cache:
            cache[one_key] = _throughput_row(
                "hf:bert-base-uncased" if bert else "timm:resnet50", "v100-16gb", prec,
                key[2], 1, "adamw" if bert else "sgd-momentum", seq_len=128 if bert else None)
        p1 = cache[one_key][0]
        rows.append({"source": "dlperf/dp_scaling.csv", "framework": r.framework,
                     "model": "BERT-base" if bert else "ResNet-50", "device": "v100-16gb",
                     "precision": prec, "batch_per_gpu": key[2], "gpus": key[3],
                     "measured_samples_per_s": float(r.samples_per_s),
                     "predicted_samples_per_s": pred, "predictor": how,
                     "measured_speedup": float(r.speedup),
                     "predicted_speedup": pred / p1 if pred and p1 else None})
    tv = load_torchvision_benchmark()
    tv = tv[(tv["mode"] == "train") & tv["precision"].isin(["fp32", "fp16"])]
    for r in tv.itertuples():
        n, b = int(r.num_gpus), int(r.batch_size)
        pred, how = _throughput_row(r.model, r.device, r.precision, b, n, None)
        rows.append({"source": "pytorch-gpu-benchmark-torchvision.csv",
                     "framework": "PyTorch DataParallel" if n > 1 else "PyTorch",
                     "model": r.model.split(":")[-1], "device": r.device,
                     "precision": r.precision, "batch_per_gpu": b, "gpus": n,
                     "measured_samples_per_s": b * n / float(r.time_ms) * 1e3,
                     "predicted_samples_per_s": pred, "predictor": how})
    out = pd.DataFrame(rows)
    out["error_%"] = 100 * (out.predicted_samples_per_s / out.measured_samples_per_s - 1)
    out.to_csv(OUT / "cnn_throughput.csv", index=False)
    ok = out.dropna(subset=["predicted_samples_per_s"]).copy()
    ok["abs"] = ok["error_%"].abs()
    ok["kind"] = np.where(ok.model == "BERT-base", "BERT-base (transformer)", "CNN")
    ok["gpus_band"] = np.where(ok.gpus == 1, "1", np.where(ok.gpus <= 8, "2-8", "16-32"))
    py = ok.framework.isin(PYTORCH)
    ok["speedup_abs"] = (100 * (ok.predicted_speedup / ok.measured_speedup - 1)).abs()
    dl_tab = ok[ok.source.str.startswith("dlperf")].groupby(
        ["kind", "framework", "precision", "gpus_band"]).agg(
        points=("abs", "size"), mape_pct=("abs", "mean"),
        median_signed_pct=("error_%", "median"),
        speedup_mape_pct=("speedup_abs", "mean")).reset_index()
    tvr = ok[ok.source.str.startswith("pytorch-gpu")]
    tv_tab = tvr.groupby(["device", "precision", "gpus"]).agg(
        points=("abs", "size"), mape_pct=("abs", "mean"),
        median_signed_pct=("error_%", "median")).reset_index()
    # what DataParallel costs: its measured time over the DDP answer, at the same per-GPU step
    one = tvr[tvr.gpus == 1].set_index(["model", "device", "precision"])
    multi = tvr[tvr.gpus > 1].copy()
    idx = list(zip(multi.model, multi.device, multi.precision))
    m1 = one.reindex(idx)
    multi["measured_speedup"] = multi.measured_samples_per_s.to_numpy() / \
        m1.measured_samples_per_s.to_numpy()
    multi["ddp_speedup"] = multi.predicted_samples_per_s.to_numpy() / \
        m1.predicted_samples_per_s.to_numpy()
    sp = multi.groupby("gpus").agg(models=("model", "size"),
                                   measured_dataparallel_speedup=("measured_speedup", "median"),
                                   predicted_ddp_speedup=("ddp_speedup", "median")).reset_index()
    cnn_dl = ok[(ok.kind == "CNN") & ok.source.str.startswith("dlperf") & (ok.gpus > 1)]
    summary = {
        "dlperf_cnn_pytorch_multi_gpu_mape_%": float(cnn_dl[cnn_dl.framework.isin(PYTORCH)]
                                                    ["abs"].mean()),
        "dlperf_cnn_pytorch_2_8_gpus_mape_%": float(
            cnn_dl[cnn_dl.framework.isin(PYTORCH) & (cnn_dl.gpus <= 8)]["abs"].mean()),
        "dlperf_cnn_pytorch_2_8_gpus_amp_mape_%": float(
            cnn_dl[cnn_dl.framework.isin(PYTORCH) & (cnn_dl.gpus <= 8)
                   & (cnn_dl.precision == "amp")]["abs"].mean()),
        "dlperf_cnn_pytorch_2_8_gpus_fp32_mape_%": float(
            cnn_dl[cnn_dl.framework.isin(PYTORCH) & (cnn_dl.gpus <= 8)
                   & (cnn_dl.precision == "fp32")]["abs"].mean()),
        "dlperf_cnn_pytorch_speedup_mape_%": float(
            cnn_dl[cnn_dl.framework.isin(PYTORCH)]["speedup_abs"].mean()),
        "dlperf_cnn_pytorch_1_gpu_mape_%": float(ok[(ok.kind == "CNN") & py & (ok.gpus == 1)
                                                    & ok.source.str.startswith("dlperf")]
                                                 ["abs"].mean()),
        "dlperf_cnn_all_frameworks_multi_gpu_mape_%": float(cnn_dl["abs"].mean()),
        "torchvision_multi_gpu_mape_%": float(tvr[tvr.gpus > 1]["abs"].mean()),
        "torchvision_multi_gpu_median_signed_%": float(tvr[tvr.gpus > 1]["error_%"].median()),
        "torchvision_1_gpu_mape_%": float(tvr[tvr.gpus == 1]["abs"].mean()),
        "errors": int(out.predicted_samples_per_s.isna().sum())}
    text = (f"The whole answer of `perfcast predict MODEL --mode train --batch-size B·N "
            f"--data-parallel N` (N = 1: without a layout), the per-GPU step included, against "
            f"every multi-GPU measurement in the data (`cnn_throughput.csv`).\n\n"
            f"**DLPerf** (ResNet-50 v1.5 and BERT-base, sequence 128, on 1-32 V100-SXM2-16GB, "
            f"the DLPerf cluster; fp16 rows predicted as `amp`; ResNet-50 with SGD + momentum, "
            f"BERT with AdamW). perfcast models PyTorch (DDP): the other frameworks are context, "
            f"their software differs. MAPE of samples/s, and of the speed-up over perfcast's own "
            f"1-GPU answer (what the layout adds, the single-GPU error divided out):\n\n"
            f"{_md(dl_tab)}\n\n"
            f"**torchvision benchmark** (32 CNNs, batch 12 per GPU, fp32 and fp16, TITAN Xp, "
            f"TITAN RTX, RTX 2080 Ti on 1-4 GPUs; the registry's PCIe workstation as the "
            f"cluster). Its multi-GPU rows ran `torch.nn.DataParallel` — one process, one Python "
            f"thread per GPU launching every kernel under the interpreter lock, the weights "
            f"broadcast from GPU 0 and the gradients reduced onto it over PCIe every step, the "
            f"outputs gathered on GPU 0 — not DDP, which `--data-parallel` means. MAPE of "
            f"samples/s (signed median: + = perfcast faster):\n\n{_md(tv_tab)}\n\n"
            f"Speed-up over the same model's 1-GPU run (medians over the models): what "
            f"DataParallel measured and what DDP is predicted to reach:\n\n{_md(sp, '.2f')}\n")
    return summary, text


# ------------------------------------------------------------------------------- 4 ZeRO
def zero_memory(coll, eff, folder: Path, ts: dict) -> tuple[dict, str]:
    from perfcast.datasets.dlperf import DLPERF_CLUSTER, load_deepspeed_zero
    from perfcast.devices import get_device
    from perfcast.parallel.blocks import trace
    from perfcast.parallel.cluster import Cluster
    from perfcast.parallel.model import estimate
    from perfcast.parallel.predict import runtime_overhead_mb
    from perfcast.workload import Layout

    df = load_deepspeed_zero()
    cl = Cluster.from_dict(DLPERF_CLUSTER)
    dev = get_device("v100-16gb")
    rt = runtime_overhead_mb()
    rows = []
    for r in df.itertuples():
        tm = trace(_gpt_config(int(r.hidden_size), int(r.num_attention_heads),
                               int(r.num_layers), int(r.vocab), int(r.seq_len), folder),
                   int(r.seq_len))
        d, m = int(r.total_gpus), int(r.batch_per_device)
        lay = Layout(data=d, micro_batch=m, zero=int(r.zero))
        kw = dict(batch=d * m, micro_batch=m, precision="fp16", optimizer="adam", device=dev,
                  cluster=cl, eff=eff, coll=coll, runtime_mb=rt)
        e = estimate(tm, lay, **kw)
        with _previous_loss_memory():
            before = estimate(tm, lay, **kw).memory_mb
        rows.append({"framework": r.framework, "test": r.test_id, "gpus": d,
                     "batch_per_gpu": m, "zero": int(r.zero), "measured_mib": r.memory_mb,
                     "raw_predicted_mib": e.memory_mb, "raw_before_mib": before,
                     **{f"{k}_mib": v for k, v in e.memory_breakdown_mb.items()}})
    out = pd.DataFrame(rows)
    # a framework constant (allocator reserve, communication buffers), leave-one-row-out
    cal = []
    for i, r in out.iterrows():
        others = out[(out.framework == r.framework) & (out.index != i)]
        c = float((others.measured_mib - others.raw_predicted_mib).mean())
        cal.append(r.raw_predicted_mib + c)
    out["calibrated_mib"] = cal
    out["raw_error_%"] = 100 * (out.raw_predicted_mib / out.measured_mib - 1)
    out["calibrated_error_%"] = 100 * (out.calibrated_mib / out.measured_mib - 1)
    out.to_csv(OUT / "zero_memory.csv", index=False)
    # what ZeRO-1 saves: the pair of runs that differ only in the stage
    pairs = []
    for (fw, d, m), g in out.groupby(["framework", "gpus", "batch_per_gpu"]):
        if set(g.zero) == {0, 1}:
            a, b = g[g.zero == 0].iloc[0], g[g.zero == 1].iloc[0]
            pairs.append({"framework": fw, "gpus": d, "batch_per_gpu": m,
                          "measured_saving_mib": a.measured_mib - b.measured_mib,
                          "predicted_saving_mib": a.raw_predicted_mib - b.raw_predicted_mib})
    pairs = pd.DataFrame(pairs)
    cal_b = []
    for i, r in out.iterrows():
        others = out[(out.framework == r.framework) & (out.index != i)]
        cal_b.append(r.raw_before_mib + float((others.measured_mib - others.raw_before_mib)
                                              .mean()))
    out["calibrated_before_mib"] = cal_b
    summary = {"calibrated_mape_%": _mape(out.calibrated_mib, out.measured_mib),
               "raw_mape_%": _mape(out.raw_predicted_mib, out.measured_mib),
               "calibrated_before_mape_%": _mape(out.calibrated_before_mib, out.measured_mib),
               "raw_before_mape_%": _mape(out.raw_before_mib, out.measured_mib),
               "deepspeed_calibrated_mape_%": _mape(
                   out[out.framework == "deepspeed"].calibrated_mib,
                   out[out.framework == "deepspeed"].measured_mib)}
    show = out[["framework", "test", "gpus", "batch_per_gpu", "zero", "measured_mib",
                "raw_predicted_mib", "calibrated_mib", "raw_error_%", "calibrated_error_%"]]
    text = (f"GPT-2 small (768 × 12, sequence 1,024, fp16 + Adam), memory per GPU. Raw: the "
            f"layout model alone (MAPE {summary['raw_mape_%']:.1f} %); calibrated: + the mean "
            f"residual of the framework's *other* rows (allocator reserve, communication "
            f"buffers; MAPE {summary['calibrated_mape_%']:.1f} %, DeepSpeed "
            f"{summary['deepspeed_calibrated_mape_%']:.1f} %). Before — the loss's fp32 copies "
            f"counted (16-bit logits + 8 bytes a logit, PyTorch's plain `cross_entropy`): raw "
            f"{summary['raw_before_mape_%']:.1f} %, calibrated "
            f"{summary['calibrated_before_mape_%']:.1f} %; these 2021 runs (Megatron-DeepSpeed's "
            f"and OneFlow's GPT-2) kept more per logit than llm-foundry's fused loss, which the "
            f"current model assumes (section 3: with the fp32 copies "
            f"{ts['rows'] - ts['fits_before']} of its {ts['rows']} runs would not fit).\n\n{_md(show)}\n\nWhat sharding "
            f"the optimizer state saves (stage 1 − stage 0, the same runs otherwise):\n\n"
            f"{_md(pairs, '.0f')}\n")
    return summary, text


# ------------------------------------------------------------------------------- 5 speed
def _timed(cmd: list[str], env: dict) -> dict:
    code = ("import resource, subprocess, sys, time, json\n"
            "t = time.perf_counter()\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "dt = time.perf_counter() - t\n"
            "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
            "print(json.dumps({'rc': r.returncode, 'wall_s': dt, 'max_rss_mib': rss,"
            " 'out': r.stdout[-20000:], 'err': r.stderr[-2000:]}))\n")
    r = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True,
                       env=env, cwd=REPO)
    return json.loads(r.stdout.strip().splitlines()[-1])


def speed() -> tuple[dict, str]:
    env = {**os.environ}
    res = {}
    one_t = ["predict", f"hf:{CONFIGS / 'gpt_1t.json'}", "--mode", "train", "--device",
             "a100-80gb", "--precision", "fp16", "--optimizer", "adam", "--batch-size", "3072",
             "--seq-len", "2048", "--data-parallel", "6", "--tensor-parallel", "8",
             "--pipeline-parallel", "64", "--micro-batch-size", "1", "--recompute", "full",
             "--json"]
    plan = ["plan", f"hf:{CONFIGS / 'gpt3_175b.json'}", "--gpus", "1024", "--device",
            "a100-80gb", "--precision", "fp16", "--optimizer", "adam", "--batch-size", "1536",
            "--seq-len", "2048", "--json", "--top", "5"]
    for name, args in (("gpt_1t_3072_gpus", one_t), ("plan_gpt3_175b_1024_gpus", plan)):
        with tempfile.TemporaryDirectory() as tmp:
            env["PERFCAST_CACHE_DIR"] = str(Path(tmp) / "graphs")
            cold = _timed([sys.executable, "-m", "perfcast", *args], env)
            warm = _timed([sys.executable, "-m", "perfcast", *args], env)
        if cold["rc"] != 0:
            raise SystemExit(f"{name} failed: {cold['err']}")
        d = json.loads(cold["out"])
        res[name] = {"command": "perfcast " + " ".join(a if " " not in a else repr(a)
                                                       for a in args).replace(str(REPO) + "/", ""),
                     "cold_wall_s": round(cold["wall_s"], 2), "warm_wall_s": round(warm["wall_s"], 2),
                     "cold_max_rss_mib": round(cold["max_rss_mib"]),
                     "warm_max_rss_mib": round(warm["max_rss_mib"])}
        if name.startswith("gpt_1t"):
            res[name].update(time_ms=d["time_ms"], mfu=d["mfu"], memory_mb=d["memory_mb"],
                             fits=d["fits"], tokens_per_s=d["tokens_per_s"])
        else:
            res[name].update(layouts=d["evaluated"], fitting=d["fitting"],
                             elapsed_in_process_s=d["elapsed_s"], winner=d["winner"])
    res["load_average_1min"] = round(os.getloadavg()[0], 2)
    res["cpus"] = os.cpu_count()
    (OUT / "speed.json").write_text(json.dumps(res, indent=1) + "\n")
    a, b = res["gpt_1t_3072_gpus"], res["plan_gpt3_175b_1024_gpus"]
    text = (f"| request | cold wall (s) | warm wall (s) | peak RSS cold (MiB) |\n|---|---|---|---|\n"
            f"| 1-trillion-parameter GPT (128 × 25,600, 160 heads) on 3,072 A100s, T=8 P=64 D=6 "
            f"| {a['cold_wall_s']:.1f} | {a['warm_wall_s']:.1f} | {a['cold_max_rss_mib']:,} |\n"
            f"| `plan` GPT-3 175B on 1,024 A100s ({b['layouts']:,} layouts) | "
            f"{b['cold_wall_s']:.1f} | {b['warm_wall_s']:.1f} | {b['cold_max_rss_mib']:,} |\n\n"
            f"Goals: < 30 s and < 4 GB for the first, < 60 s for the second. Cold: a fresh "
            f"process with empty caches (the two one- and two-layer graphs traced on the meta "
            f"device); warm: again with the cache. Load average {res['load_average_1min']} on "
            f"{res['cpus']} CPUs. The 1T prediction: {a['time_ms'] / 1e3:,.1f} s per iteration "
            f"({a['tokens_per_s']:,.0f} tokens/s, MFU {a['mfu']:.0%}; Megatron-LM reports 52 % "
            f"on this layout, counting the recomputed forward pass — its 96·B·s·l·h²(…) is 4/3 "
            f"of the model FLOPs, so 39 % MFU; a number not used anywhere in the fit), "
            f"{a['memory_mb']:,.0f} MiB "
            f"per GPU. Commands:\n\n```\n{a['command']}\n{b['command']}\n```\n")
    return res, text


# ------------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-ship", action="store_true",
                    help="evaluate only; leave perfcast/parallel/*.json as they are")
    ap.add_argument("--skip-speed", action="store_true", help="leave out the timing runs")
    ap.add_argument("--skip-throughput", action="store_true",
                    help="leave out the whole-answer throughput check (~800 predictions)")
    ap.add_argument("--quick", action="store_true",
                    help="leave out the shipped recipe's leave-one-case-out on Megatron-LM "
                         "(18 joint fits)")
    args = ap.parse_args()
    ship = not args.no_ship
    OUT.mkdir(parents=True, exist_ok=True)
    prev = {}
    if (OUT / "summary.json").is_file():
        prev = json.loads((OUT / "summary.json").read_text()).get("texts", {})
    folder = Path(tempfile.mkdtemp(prefix="perfcast-gpt-configs-"))
    t0 = time.perf_counter()

    def say(what: str) -> None:
        print(f"{what} ({time.perf_counter() - t0:.0f} s)", flush=True)

    s1, t1, coll = collectives(ship)
    say(f"collectives: {s1['sizes_mape_ge_1MiB_%']:.1f} % / {s1['loco_mape_ge_1MiB_%']:.1f} %")
    from perfcast.parallel.fit import fit_efficiency
    from perfcast.parallel.model import shipped_efficiency

    mdf, mcases = megatron_cases(folder)
    ts_df, ts_cases = train_scale_cases(folder)
    dl_only = fit_efficiency(mcases["megatron-lm"], coll)
    joint = fit_joint(mcases["megatron-lm"], ts_cases, coll, trained_on={
        "data": "dlperf/megatron_gpt.csv, framework megatron-lm (Oneflow-Inc/DLPerf, "
                "Apache-2.0): 18 GPT layouts on 1-32 V100-SXM2-16GB; "
                "train-scale/llm_foundry_a100.csv (mosaicml/llm-foundry, Apache-2.0): 139 MPT "
                "FSDP runs on 8-128 A100 40/80GB",
        "fit": f"each dataset half the weight, {JOINT_LOSS} (scale {JOINT_SCALE} in log)",
        "command": COMMAND, "evaluation": "reports/distributed/README.md",
        "overlap_ddp_from": f"dlperf/dp_scaling.csv, NGC PyTorch and PyTorch series "
                            f"({DP_LOSS}, scale {DP_SCALE} in log)"})
    say(f"joint fit: {joint}")
    s3, t3, ddp = dp_scaling(coll, joint.network)
    say(f"dp scaling: {s3['mape_%']:.1f} %")
    # the data-parallel all-reduce of today's stacks (PyTorch DDP, Megatron-Core's overlapped
    # gradient reduce) is bucketed and overlapped: the transformer path takes DDP's ω too
    shipped = replace(joint, overlap=ddp[0], overlap_ddp=ddp[0], straggler_ddp=ddp[1])
    if ship:
        from perfcast.paths import package_data

        (package_data("parallel") / "efficiency.json").write_text(
            json.dumps(shipped.to_dict(), indent=1, sort_keys=True) + "\n")
        shipped_efficiency.cache_clear()
    s6, t6 = train_scale(coll, mcases["megatron-lm"], ts_df, ts_cases, dl_only, shipped)
    say(f"train-scale: {s6['lomso_mape_%']:.1f} % / {s6['logto_mape_%']:.1f} %")
    s2, t2 = megatron(coll, mdf, mcases, None if args.quick else ts_cases, shipped)
    say(f"megatron: {s2['mape_%']}")
    s4, t4 = zero_memory(coll, shipped, folder, s6)
    say(f"zero: {s4['calibrated_mape_%']:.1f} %")
    if args.skip_throughput:
        s7, t7 = {}, prev.get("throughput", "(skipped: --skip-throughput)\n")
    else:
        s7, t7 = cnn_throughput()
        say(f"throughput: {s7}")
    s5, t5 = ({}, prev.get("speed", "(skipped: --skip-speed)\n")) if args.skip_speed \
        else speed()
    texts = {"collectives": t1, "megatron": t2, "dp_scaling": t3, "zero_memory": t4,
             "speed": t5, "train_scale": t6, "throughput": t7}
    summary = {"collectives": s1, "megatron": s2, "dp_scaling": s3, "zero_memory": s4,
               "train_scale": s6, "throughput": s7, "speed": s5,
               "elapsed_s": round(time.perf_counter() - t0, 1), "texts": texts}
    if args.skip_throughput or args.skip_speed:
        old = json.loads((OUT / "summary.json").read_text()) \
            if (OUT / "summary.json").is_file() else {}
        for k, skipped in (("throughput", args.skip_throughput), ("speed", args.skip_speed)):
            if skipped and old.get(k):
                summary[k] = old[k]
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
    write_readme(summary, texts)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("speed", "texts")},
                     indent=1, default=float))
    return 0


def write_readme(s: dict, t: dict) -> None:
    m = s["megatron"]["mape_%"]
    ts, dp, cnn = s["train_scale"], s["dp_scaling"], s.get("throughput") or {}
    py = {r["fit (ω, σ on the other PyTorch series)"]: r for r in dp["pytorch_loso"]}
    before, after = py.get("squared (before)", {}), py.get("robust", {})
    nan = float("nan")
    text = f"""# Distributed training

Regenerate: `{COMMAND}` (fits the shipped parameters too; `--no-ship` to evaluate only;
`--skip-throughput`, `--skip-speed` and `--quick` leave out the slow parts, keeping their last
tables). `bench.json` and `corpus_earlier_series.json` in this folder belong to an earlier,
unrelated feature (the distributed graph corpus with Ray).

What is predicted: one training iteration over GPUs — `perfcast predict MODEL --mode train
--data-parallel D --tensor-parallel T --pipeline-parallel P --zero Z --flash-attention auto …`
— by the per-layer arithmetic of one traced block with Megatron's splits
(`perfcast/parallel/`), NCCL's collectives as an α–β model, the pipeline bubble of the
schedule, the bucketed overlap of the gradient all-reduce, ZeRO / FSDP's sharding and its
per-layer gathers, FlashAttention (no S² scores, recomputed in the backward pass, causal tiles
skipped); memory per GPU from the same layout. Models that are not `hf:` transformers (CNNs …)
get data parallelism — PyTorch DDP — on the single-GPU answer. `perfcast plan` ranks every
layout.

## Headline (every number out of sample)

| what | data | error | goal |
|---|---|---|---|
| LLM pre-training on current clusters, tokens/s per GPU, one model size held out | train-scale/llm_foundry_a100.csv (FSDP, 8-128 A100) | {ts['lomso_mape_%']:.1f} % MAPE (flat-MFU rule on the same folds {ts['lomso_flat_mfu_mape_%']:.1f} %) | below the rule |
| the same, one GPU type held out (A100-40GB ↔ 80GB) | train-scale | {ts['logto_mape_%']:.1f} % MAPE (flat-MFU rule {ts['logto_flat_mfu_mape_%']:.1f} %) | below the rule |
| train-scale configurations predicted to fit (they all ran) | train-scale | {ts['fits_after']} of {ts['rows']} (before: {ts['fits_before']}) | all |
| Megatron layouts, iteration time (leave one case out, DLPerf alone) | dlperf/megatron_gpt.csv, Megatron-LM | {m.get('megatron-lm', nan):.1f} % MAPE (median {s['megatron']['median_%'].get('megatron-lm', nan):.1f} %; the shipped joint recipe {s['megatron'].get('joint_loco_megatron_lm_mape_%') or nan:.1f} %) | ≤ 10 % |
| the same, OneFlow | dlperf/megatron_gpt.csv, OneFlow | {m.get('oneflow', nan):.1f} % MAPE (median {s['megatron']['median_%'].get('oneflow', nan):.1f} %) | ≤ 10 % |
| PyTorch DDP speed-up 1 → N GPUs, one series held out | dlperf/dp_scaling.csv, NGC PyTorch + PyTorch | {after.get('mape_pct', nan):.1f} % MAPE (before {before.get('mape_pct', nan):.1f} %) | |
| data-parallel speed-up, every framework | dlperf/dp_scaling.csv, {dp['series']} series | {dp['mape_%']:.1f} % MAPE (before {dp['mape_before_%']:.1f} %) | ≤ 8 % |
| CNN data-parallel throughput, whole answer, PyTorch, 2-8 V100s | dlperf/dp_scaling.csv | {cnn.get('dlperf_cnn_pytorch_2_8_gpus_mape_%', nan):.1f} % MAPE (amp {cnn.get('dlperf_cnn_pytorch_2_8_gpus_amp_mape_%', nan):.1f} %, fp32 {cnn.get('dlperf_cnn_pytorch_2_8_gpus_fp32_mape_%', nan):.1f} %; the 1-GPU answer alone {cnn.get('dlperf_cnn_pytorch_1_gpu_mape_%', nan):.1f} %; the speed-up over it, 2-32 GPUs, {cnn.get('dlperf_cnn_pytorch_speedup_mape_%', nan):.1f} %) | ≤ 20 % |
| the same, torchvision benchmark, 2-4 GPUs (measured with `nn.DataParallel`, predicted as DDP) | pytorch-gpu-benchmark-torchvision.csv | {cnn.get('torchvision_multi_gpu_mape_%', nan):.1f} % MAPE (median {cnn.get('torchvision_multi_gpu_median_signed_%', nan):+.0f} %: DDP is faster; 1 GPU {cnn.get('torchvision_1_gpu_mape_%', nan):.1f} %) | |
| ZeRO memory per GPU | dlperf/deepspeed_zero.csv | {s['zero_memory']['calibrated_mape_%']:.1f} % MAPE (raw layout model {s['zero_memory']['raw_mape_%']:.1f} %) | ≤ 5 % |
| collectives ≥ 1 MiB, held-out sizes | vidur/network A100 DGX | {s['collectives']['sizes_mape_ge_1MiB_%']:.1f} % MAPE (inside a node {s['collectives']['sizes_intra_mape_ge_1MiB_%']:.1f} %, across nodes {s['collectives']['sizes_inter_mape_ge_1MiB_%']:.1f} %) | ≤ 10 % |
| (what any α–β curve fitted to one configuration alone leaves, in sample) | vidur/network A100 DGX | {s['collectives']['oracle_mape_ge_1MiB_%']:.1f} % (across nodes {s['collectives']['oracle_inter_mape_ge_1MiB_%']:.1f} %) | |
| collectives ≥ 1 MiB, a configuration never seen | vidur/network A100 DGX | {s['collectives']['loco_mape_ge_1MiB_%']:.1f} % MAPE (inside a node {s['collectives']['loco_intra_mape_ge_1MiB_%']:.1f} %, across nodes {s['collectives']['loco_inter_mape_ge_1MiB_%']:.1f} %) | |

Shipped efficiencies (`perfcast/parallel/efficiency.json`, fitted on DLPerf's Megatron-LM runs
and llm-foundry's runs together): """ + ", ".join(
        f"`{k}` {v:.3g}" for k, v in s["megatron"]["shipped"].items() if v is not None) + f"""

## 1. Collectives (α–β, NCCL ring and tree)

{t['collectives']}
## 2. Megatron layouts (`dlperf/megatron_gpt.csv`)

{t['megatron']}
## 3. Current clusters: FSDP on A100s (`train-scale/llm_foundry_a100.csv`)

{t['train_scale']}
## 4. Data-parallel scaling (`dlperf/dp_scaling.csv`)

The compute of a series is its own measured 1-GPU step (the single-GPU part is judged in
`reports/crossdevice/` and in section 5); what is predicted is what the layout adds: the
gradient all-reduce (α–β on the DLPerf cluster: NVLink inside a node, one 100 Gb/s adapter per
node, the network efficiency of the shipped fit), its bucketed overlap ω with the backward
pass (⅔ of the step) and the wait for the slowest replica, σ·√(2 ln N) of the step.

{t['dp_scaling']}
## 5. Data-parallel throughput, the whole answer (DLPerf, torchvision benchmark)

{t['throughput']}
`--data-parallel N` means PyTorch DistributedDataParallel: one process per GPU, NCCL
all-reduce of gradient buckets overlapped with the backward pass. `torch.nn.DataParallel` is
not modelled: PyTorch's documentation recommends DDP over it even on one machine, and its
costs (every replica's kernels launched from one Python process, the weights broadcast and the
gradients reduced through GPU 0 each step) would be fitted on this one benchmark's three
2018-2019 GPUs alone. A `DataParallel` option is warranted only with measurements beyond these
(it is what a script without `torchrun` gets — Hugging Face's Trainer wraps a model in it when
started with plain `python` on several GPUs); until then the table above is the size of the
gap: perfcast's DDP answer is an upper bound on what DataParallel reaches.

## 6. ZeRO memory per GPU (`dlperf/deepspeed_zero.csv`)

{t['zero_memory']}
## 7. Speed

{t['speed']}
## Where the model is weakest

- **GPUs with no multi-GPU measurement (H100, B200, MI300X …).** The efficiencies are
  fractions of the spec sheet's peaks and bandwidth fitted on V100s (2021) and A100s (2023).
  FlashAttention-2 on Hopper is priced at 2/3 of its A100 fraction of the peak (its
  `mma.sync` instructions reach about 2/3 of Hopper's tensor peak, which needs `wgmma`:
  FlashAttention-3, Shah et al. 2024, measure FlashAttention-2 at 35 % of H100's peak against
  50-73 % on A100); the GEMMs keep their fitted fraction (cuBLAS issues `wgmma`). A Hopper GPU
  that sustains a lower clock under load than its datasheet peak assumes is predicted too
  fast by that ratio.
- **Runs a framework slows for reasons outside the model.** In llm-foundry's table (its own
  MFU, `train_scale_eval.csv`): the 8-GPU MPT-30B at sequence 8,192 runs at 39 % MFU where its
  4,096 row runs at 51 % (98 % of its memory in use by the model's count: allocator retries
  near a full GPU); MPT-760M on A100-80GB at sequences 512 / 1,024 at 45-48 % where its 2,048
  row runs at 57 %; MPT-1B on 32 A100-40GB at 45 % where 16 and 64 GPUs run at 55-56 %;
  MPT-13B on 8 A100-40GB (16 micro-batches a step) at 44 % where 16-128 GPUs run at 52-53 %.
  The robust fit treats them as outliers; they stay in the error.
- **A100-40GB vs 80GB.** MPT-13B with checkpointing runs at 52-60 % MFU on A100-80GB and at
  most 53 % on A100-40GB, beyond what bandwidth explains; the two tables may come from
  different software versions (the source does not say). Leaving one GPU type out shows it.
- **Tensor parallelism across nodes and pipeline layouts.** The worst Megatron cases are
  `MP_1x32x1` (T = 32 over 4 nodes) and the pipeline layouts on 4 nodes (see the table).
- **Small messages.** Below 1 MiB NCCL switches protocols (LL, LL128, Simple); the α–β model
  is fitted above 64 KiB and its error there is larger (the `mape_ge_64KiB_%` column).
- **Memory.** The layout model counts weights, gradients, state, the activations autograd
  saves (fused element-wise chains), the loss's logits (a fused cross-entropy: 16-bit logits
  and their gradient), FSDP's gathered units and the CUDA runtime; the allocator's reserve and
  a framework's communication buffers are not modelled — the raw ZeRO error above shows their
  size. A plain PyTorch `cross_entropy` keeps fp32 copies of the logits (+8 bytes a logit).
- **Scope.** Tensor and pipeline parallelism need an `hf:` transformer whose layers are alike
  (decoders and encoders; a mixture of experts splits its experts like dense layers, router
  left whole — not expert parallelism); encoder-decoder models and other models (timm,
  torchvision, ONNX) get data parallelism (DDP), through the single-GPU predictor.
"""
    (OUT / "README.md").write_text(text)


if __name__ == "__main__":
    sys.exit(main())
