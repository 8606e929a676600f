"""The time and memory of one training iteration of a traced transformer under a layout.

Each node of the traced block (:mod:`perfcast.parallel.blocks`) is priced on the device's spec
sheet by :mod:`perfcast.parallel.pricing`; here the layout puts the stages, micro-batches,
collectives (:mod:`perfcast.parallel.collectives`), context and expert parallelism, the
optimizer step and the memory per GPU together (:func:`estimate`). The whole model, term by
term, with the sources of its fitted efficiencies: ``docs/concepts/distributed.md``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from perfcast.parallel.blocks import TracedModel
from perfcast.parallel.cluster import Cluster
from perfcast.parallel.collectives import CollectiveModel
from perfcast.workload import INTERLEAVED_CHUNKS, Layout
from perfcast.parallel.pricing import (  # the block's pricing; re-exported here
    BUCKET_BYTES,
    FP8_CAST_GRAD_BYTES,
    FP8_CAST_INPUT_BYTES,
    FP8_CAST_LAUNCHES_BWD,
    FP8_CAST_LAUNCHES_FWD,
    FP8_CAST_WEIGHT_BYTES,
    FP8_WEIGHT_COPY_BYTES,
    HALF_PRECISIONS,
    HALF_WEIGHTS,
    LOSS_BYTES_PER_LOGIT,
    MIB,
    STATE_BYTES,
    STEP_BYTES,
    TILE,
    Parts,
    Priced,
    _act_bytes,
    _state_bytes,
    _weight_bytes,
    attention_note,
    causal_fraction,
    flash_rate,
    flash_supported,
    fused_attention,
    parts,
    price,
)

@dataclass(frozen=True)
class Efficiency:
    """The fitted parameters of the time model (see the module docstring)."""

    gemm: float = 0.6
    attention: float | None = None
    memory: float = 0.6
    launch_us: float = 8.0
    overlap: float = 1.0
    overlap_ddp: float = 1.0
    straggler_ddp: float = 0.0
    overlap_fsdp: float = 1.0
    network: float | None = None
    step_ms: float = 0.0
    trained_on: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Efficiency:
        names = [f for f in cls.__dataclass_fields__]
        return cls(**{k: v for k, v in doc.items() if k in names})


@lru_cache(maxsize=1)
def shipped_efficiency() -> Efficiency:
    """The efficiencies shipped with perfcast (``parallel/efficiency.json``)."""
    from perfcast.paths import package_data

    path = package_data("parallel", "efficiency.json")
    if not path.is_file():
        return Efficiency(trained_on={"note": "defaults: the fit was never run"})
    return Efficiency.from_dict(json.loads(path.read_text()))


# --------------------------------------------------------------------------------- layout
@dataclass
class Estimate:
    """One layout's iteration: ``time_ms`` and its ``breakdown_ms`` (compute, recompute,
    communication per kind exposed, pipeline bubble, optimizer, overhead — they sum to the
    time), ``memory_breakdown_mb`` per GPU (the fullest stage) and its sum ``memory_mb``,
    ``model_flops`` of one iteration (forward + backward, no recomputation, all GPUs) and the
    per-GPU work the power model reads (``gpu_flops``, ``gpu_bytes``, ``gpu_kernels``)."""

    layout: Layout
    micro_batches: int
    time_ms: float
    breakdown_ms: dict[str, float]
    memory_mb: float
    memory_breakdown_mb: dict[str, float]
    model_flops: float
    gpu_flops: float
    gpu_bytes: float
    gpu_kernels: float
    notes: list[str] = field(default_factory=list)


def _per_node(n: int, cluster: Cluster) -> int:
    return max(1, min(n, cluster.gpus_per_node))


def group_per_node(size: int, stride: int, cluster: Cluster) -> int:
    """GPUs of one node in a group of ``size`` GPUs whose ranks are ``stride`` apart
    (Megatron's order: tensor-parallel ranks adjacent, then data-parallel, then pipeline)."""
    if stride >= cluster.gpus_per_node:
        return 1
    return max(1, min(size, cluster.gpus_per_node // stride))


def estimate(tm: TracedModel, layout: Layout, *, batch: int, micro_batch: int,
             precision: str, optimizer: str | None, device, cluster: Cluster,
             eff: Efficiency, coll: CollectiveModel, runtime_mb: float,
             prices: Parts | None = None, grad_bytes: float | None = None) -> Estimate:
    """The :class:`Estimate` of ``layout`` with micro-batch ``micro_batch`` for a global
    ``batch`` of ``tm``'s sequences (the layout is assumed valid:
    :meth:`~perfcast.workload.Workload.check_layout`). ``prices``: :func:`parts` at the
    layout's T, the micro-batch and its attention kernel, when already computed;
    ``grad_bytes``: the gradients' element size in their reduction (default: the weights' —
    2 at fp16 / bf16, else 4; FSDP's ``reduce_dtype`` fp32 under bf16 compute is 4)."""
    T, P, D, m = layout.tensor, layout.pipeline, layout.data, micro_batch
    C, E = getattr(layout, "context", 1), getattr(layout, "expert", 1)
    L, s, h = tm.shape.layers, tm.seq_len, tm.shape.hidden
    s_loc = s / C  # the tokens of a sequence each GPU of a context-parallel group holds
    n_mb = batch // (D * m)
    fused = fused_attention(device, getattr(layout, "flash_attention", "auto"))
    pr = prices or parts(tm, T, m, precision, device, eff, fused=fused, context=C, expert=E)
    a_b = _act_bytes(precision)
    opt = optimizer or "none"
    coll_eff = coll if eff.network is None else replace(coll, eta_inter=eff.network, eta_p2p_inter=eff.network)
    lps = L // P
    v = INTERLEAVED_CHUNKS if layout.schedule == "interleaved" else 1

    def ar(nbytes: float, n: int, per_node: int) -> float:
        return coll_eff.time_ms("all_reduce", nbytes, n, per_node, cluster)

    # tensor parallel: the block's all-reduces (forward; as many in the backward)
    kT = group_per_node(T, 1, cluster)
    tp_block = 0.0
    if T > 1 and pr.b_n_allreduce:
        size = pr.b_allreduce / pr.b_n_allreduce * a_b
        tp_block = pr.b_n_allreduce * ar(size, T, kT)
    tp_pre = ar(pr.pre_allreduce * a_b, T, kT) if T > 1 and pr.pre_allreduce else 0.0
    # the head's input-gradient all-reduce and the loss's three small ones
    tp_post = (ar(m * s_loc * h * a_b, T, kT) + 3 * ar(m * s_loc * 4.0, T, kT)) if T > 1 else 0.0
    # context parallelism (ring attention, Megatron / Transformer Engine's p2p): per layer, C − 1
    # steps each sending the local K and V block to the next GPU of the ring while attending
    # to the block received — a step's transfer hidden behind 1/C of the attention core
    # (forward); the backward passes K, V and their gradients (twice the bytes) behind 1/C of
    # the core's backward
    cp_f = cp_b = 0.0
    if C > 1:
        hd = tm.shape.head_dim or h // max(tm.shape.heads, 1)
        kv = m * s_loc * 2 * tm.shape.kv_heads * hd / T * a_b
        hop = 2 if T * C <= cluster.gpus_per_node else 1  # the ring inside a node or across
        cp_f = (C - 1) * max(0.0, coll_eff.time_ms("send_recv", kv, 2, hop, cluster)
                             - pr.b_core / C)
        cp_b = (C - 1) * max(0.0, coll_eff.time_ms("send_recv", 2 * kv, 2, hop, cluster)
                             - pr.b_core_bwd / C)
    # expert parallelism: per MoE layer the tokens dispatched to their top-k experts' GPUs and
    # the results combined back — two all-to-alls in the forward, two in the backward, over the
    # E GPUs (ranks T apart), not overlapped; uniform routing (each GPU keeps 1/E)
    ep_layer = 0.0
    if E > 1 and pr.b_expert_params > 0:
        k = tm.shape.experts_per_token or 1
        ep_layer = 2 * coll_eff.all_to_all_ms(m * s_loc / T * k * h * a_b, E,
                                              group_per_node(E, T, cluster), cluster)
    # recomputation
    if layout.recompute == "full":
        rc_block, rc_tp = pr.b_fwd, tp_block
    elif layout.recompute == "selective":
        rc_block, rc_tp = pr.b_core, 0.0
    else:
        rc_block, rc_tp = 0.0, 0.0
    # the loss over the (vocabulary-split) logits: softmax + gradient, fp32
    V = tm.shape.vocab or 0
    bw = float(device.bandwidth_gbs) * 1e9 * eff.memory
    loss_f = 3 * m * s_loc * V / T * 4.0 / bw * 1e3 if V else 0.0
    # pipeline send / receive of one micro-batch's activations: every tensor-parallel rank
    # sends its (replicated) copy to its peer of the next stage — no scatter / gather
    pp = 0.0
    if P > 1:
        pp_inter = T * C * D >= cluster.gpus_per_node
        pp = v * coll_eff.time_ms("send_recv", m * s_loc * h * a_b, 2, 1 if pp_inter else 2,
                                  cluster)
    stages = []
    for st in range(P):
        comp_f = lps * pr.b_fwd
        comp_b = lps * pr.b_bwd
        tp_f, tp_b = lps * tp_block, lps * tp_block
        rc = lps * rc_block
        rct = lps * rc_tp
        if st == 0:
            comp_f += pr.pre_fwd
            comp_b += pr.pre_bwd
            tp_f += tp_pre
        if st == P - 1:
            comp_f += pr.post_fwd + loss_f
            comp_b += pr.post_bwd + loss_f
            tp_b += tp_post
        p2p = pp * (2 if 0 < st < P - 1 else 1) if P > 1 else 0.0
        # the ring runs again when the attention is recomputed; the all-to-alls when the
        # whole layer is
        cp = lps * (cp_f + cp_b + (cp_f if layout.recompute != "none" else 0.0))
        ep = lps * ep_layer * (3 if layout.recompute == "full" else 2)
        cp_bwd = lps * (cp_b + (cp_f if layout.recompute != "none" else 0.0))
        ep_bwd = lps * ep_layer * (2 if layout.recompute == "full" else 1)
        stages.append({"compute": comp_f + comp_b, "recompute": rc, "tp": tp_f + tp_b + rct,
                       "pp": p2p, "cp": cp, "ep": ep,
                       "b": comp_b + rc + tp_b + rct + cp_bwd + ep_bwd})
    tot = [x["compute"] + x["recompute"] + x["tp"] + x["pp"] + x["cp"] + x["ep"]
           for x in stages]
    smax = int(np.argmax(tot))
    crit = stages[smax]
    t_pipe = n_mb * tot[smax] + (sum(tot) - tot[smax]) / v
    bubble = t_pipe - n_mb * tot[smax]
    # parameters per GPU on the fullest stage (by memory: the first, holding the embedding)
    dup = float(tm.one.params.sum()) - float(tm.one.total_params)  # a tied head's weights
    post_params = pr.post_params
    if P == 1 and dup > 0:  # one copy of a tied embedding / head (vocabulary-split)
        post_params = max(0.0, pr.post_params - dup / T)
    stage_params = [lps * pr.b_params + (pr.pre_params if st == 0 else 0.0)
                    + (post_params if st == P - 1 else 0.0) for st in range(P)]
    p_gpu = max(stage_params)
    # the weights are replicated over the D·C GPUs of the data-parallel × context-parallel
    # group (their gradients reduced, ZeRO's shards split over it); expert parallelism holds
    # 1/E of the experts per GPU (÷ E in the prices), replicated over D·C / E GPUs
    Dg, De = D * C, max(1, D * C // E)
    e_gpu = lps * pr.b_expert_params if E > 1 else 0.0
    d_gpu = p_gpu - e_gpu
    kDe = group_per_node(De, T * E, cluster)
    # data parallel: gradient all-reduce (ZeRO 1/2: reduce-scatter + all-gather), once per
    # iteration, bucketed and overlapped with the last micro-batch's backward pass
    g_b = float(grad_bytes) if grad_bytes else _weight_bytes(precision)
    kD = group_per_node(Dg, T, cluster)
    dp = dp_exposed = z3 = 0.0
    if Dg > 1 and layout.zero < 3:
        dp = ar(d_gpu * g_b, Dg, kD) + ar(e_gpu * g_b, De, kDe)
        bucket = ar(min(BUCKET_BYTES, p_gpu * g_b), Dg, kD)
        dp_exposed = max(bucket, dp - eff.overlap * crit["b"])
    elif Dg > 1:
        # ZeRO-3 / FSDP FULL_SHARD, per micro-batch: the weights all-gathered for the forward
        # and again for the backward, the gradients reduce-scattered — one collective per
        # layer, prefetched while the previous layer computes (ω_fsdp of the micro-batch's
        # compute hides them); the first layer's gather is never hidden
        wb = _weight_bytes(precision)
        ag = coll_eff.time_ms("all_gather", d_gpu * wb, Dg, kD, cluster) + \
            coll_eff.time_ms("all_gather", e_gpu * wb, De, kDe, cluster)
        rs = coll_eff.time_ms("reduce_scatter", d_gpu * g_b, Dg, kD, cluster) + \
            coll_eff.time_ms("reduce_scatter", e_gpu * g_b, De, kDe, cluster)
        comm = 2 * ag + rs
        t_mb = tot[smax]
        z3 = n_mb * max(ag / max(lps, 1), comm - eff.overlap_fsdp * t_mb)
    # optimizer step over the (ZeRO-sharded) state
    shard = Dg if layout.zero >= 1 else 1
    shard_e = De if layout.zero >= 1 else 1
    t_opt = (d_gpu / shard + e_gpu / shard_e) * STEP_BYTES.get(opt, 0.0) / bw * 1e3 \
        * (0.5 if precision == "bf16-pure" else 1.0)
    time = t_pipe + dp_exposed + z3 + t_opt + eff.step_ms
    breakdown = {"compute": n_mb * crit["compute"], "recompute": n_mb * crit["recompute"],
                 "tensor_parallel_allreduce": n_mb * crit["tp"],
                 "pipeline_send_recv": n_mb * crit["pp"], "pipeline_bubble": bubble,
                 "data_parallel_allreduce": dp_exposed, "zero3_allgather": z3,
                 "optimizer": t_opt, "overhead": eff.step_ms}
    if C > 1:
        breakdown["context_parallel_p2p"] = n_mb * crit["cp"]
    if E > 1:
        breakdown["expert_parallel_alltoall"] = n_mb * crit["ep"]
    # memory per GPU (the first stage: embedding and the most micro-batches in flight)
    w_b = _weight_bytes(precision)
    state = _state_bytes(precision, opt)
    z = layout.zero

    def held(params: float, per: float, stage: int) -> float:
        """Bytes per GPU of ``params`` (its experts ``e_gpu`` sharded over De, the rest over
        Dg) at ``per`` bytes each, ZeRO sharding from ``stage`` on."""
        if z < stage:
            return params * per
        return ((params - e_gpu) / Dg + e_gpu / De) * per

    weights = held(p_gpu, w_b, 3)
    grads = held(p_gpu, g_b, 2)
    states = held(p_gpu, state, 1)
    if layout.schedule == "gpipe":
        inflight = n_mb
    elif P > 1:
        inflight = min(P, n_mb) * ((1 + (P - 1) / (P * v)) if v > 1 else 1.0)
    else:
        inflight = 1
    layer_in = m * s_loc * h * a_b
    if layout.recompute == "full":
        act = inflight * lps * layer_in + pr.b_saved
    elif layout.recompute == "selective":
        act = inflight * lps * (pr.b_saved - pr.b_core_saved) + pr.b_core_saved
    else:
        act = inflight * lps * pr.b_saved
    # the loss fused with its soft-max over the (vocabulary-split) logits, as training stacks
    # run it (Megatron's vocabulary-parallel and OneFlow's sparse soft-max cross-entropy,
    # llm-foundry's fused_crossentropy): the 16-bit logits kept for the backward pass and
    # their gradient — no fp32 copies
    logits = (m * s_loc * V / T * LOSS_BYTES_PER_LOGIT * a_b / 2) if V and P == 1 else 0.0
    act += inflight * layer_in  # the embedding output
    mem = {"weights": weights / MIB, "gradients": grads / MIB, "optimizer_state": states / MIB,
           "activations": act / MIB, "logits": logits / MIB, "runtime": runtime_mb}
    if z >= 3 and Dg > 1:
        # FSDP's gathered units: the layer computing and the one prefetched (weights), the
        # layer whose gradients wait for their reduce-scatter, and the outside (embeddings,
        # head) held whole from the forward to the end of the backward
        unit = pr.b_params - (pr.b_expert_params if E > 1 and De == 1 else 0.0)
        mem["zero3_buffers"] = (2 * unit * w_b + unit * g_b
                                + (pr.pre_params + post_params) * w_b) / MIB
    if precision == "fp8":
        # the FP8 copies of the blocks' GEMM weights: FSDP / ZeRO-3 makes them for its two
        # gathered units only, otherwise every layer of the stage keeps them (TE caches them
        # over the micro-batches of an iteration)
        n_units = 2 if z >= 3 and Dg > 1 else lps
        mem["fp8_weight_copies"] = n_units * pr.b_params * FP8_WEIGHT_COPY_BYTES / MIB
    if P > 1:  # the last stage: its logits instead of the first stage's deeper pipeline
        last = dict(mem)
        last_params = stage_params[-1]
        last["weights"] = held(last_params, w_b, 3) / MIB
        last["gradients"] = held(last_params, g_b, 2) / MIB
        last["optimizer_state"] = held(last_params, state, 1) / MIB
        full = lps * (layer_in if layout.recompute == "full" else pr.b_saved)
        last["activations"] = (full + (pr.b_saved if layout.recompute == "full" else 0.0)) \
            / MIB
        last["logits"] = m * s_loc * V / T * LOSS_BYTES_PER_LOGIT * a_b / 2 / MIB if V else 0.0
        if sum(last.values()) > sum(mem.values()):
            mem = last
    # per-GPU work of the iteration (the power model's features)
    flops_gpu = 3 * pr.model_flops * n_mb / (T * P) * (
        1 + (1 / 3 if layout.recompute == "full" else 0.0))
    bytes_gpu = (2 * p_gpu * w_b + act) * n_mb * 3 + p_gpu * STEP_BYTES.get(opt, 0.0) / shard
    kernels = float(tm.two.launches.sum() - tm.one.launches.sum()) * lps * 3 * n_mb
    return Estimate(layout=replace(layout, micro_batch=m), micro_batches=n_mb, time_ms=time,
                    breakdown_ms=breakdown, memory_mb=float(sum(mem.values())),
                    memory_breakdown_mb=mem, model_flops=3 * pr.model_flops * C * batch / m,
                    gpu_flops=flops_gpu, gpu_bytes=bytes_gpu, gpu_kernels=kernels)


def micro_batch_choices(batch: int, data: int, limit: int = 64) -> list[int]:
    """The micro-batches a replica can split its ``batch / data`` samples into (divisors, at
    most ``limit``)."""
    per = batch // data
    return [d for d in range(1, min(per, limit) + 1) if per % d == 0]


__all__ = [  # the layout's estimate, and the block's pricing (perfcast.parallel.pricing) re-exported
    "BUCKET_BYTES", "Efficiency", "Estimate", "FP8_CAST_GRAD_BYTES", "FP8_CAST_INPUT_BYTES",
    "FP8_CAST_LAUNCHES_BWD", "FP8_CAST_LAUNCHES_FWD", "FP8_CAST_WEIGHT_BYTES",
    "FP8_WEIGHT_COPY_BYTES", "HALF_PRECISIONS", "HALF_WEIGHTS", "LOSS_BYTES_PER_LOGIT", "MIB",
    "Parts", "Priced", "STATE_BYTES", "STEP_BYTES", "TILE", "attention_note", "causal_fraction",
    "estimate", "flash_rate", "flash_supported", "fused_attention", "group_per_node",
    "micro_batch_choices", "parts", "price", "shipped_efficiency"]
