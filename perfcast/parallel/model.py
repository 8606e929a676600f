"""The time and memory of one training iteration of a traced transformer under a layout.

Per node of the traced block (:mod:`perfcast.parallel.blocks`), on the device's spec sheet::

    forward   t = max(F / (η_c·peak), bytes / (η_m·bandwidth)) + τ      (per kernel)
    backward  matrix products 2·F (input and weight gradients), 2× the bytes; FlashAttention
              2.5·F (it recomputes the scores: 5 products for the forward's 2)

``peak`` is the device's matrix peak at the precision for the layers' GEMMs (``η_c`` =
``gemm`` × the wave quantisation of the GEMM's 128×128 output tiles over the SMs) and the
attention (FlashAttention: ``η_c`` = ``attention``, its own fraction of the peak, × 2/3 on
Hopper — :data:`FLASH2_HOPPER_RATE`; eager attention's batched products: ``gemm``), its vector
peak for the rest; ``F`` and the bytes are the node's at the micro-batch, divided by T where
Megatron's split divides them. The attention kernel is the layout's ``flash_attention``
(:func:`fused_attention`: ``auto`` = FlashAttention where the GPU runs it, NVIDIA compute
capability ≥ 8.0 and AMD MI200 / MI300). FlashAttention keeps no S² scores and, in a causal
model (:func:`perfcast.parallel.blocks.is_causal`), computes the (n + 1) / 2n of the score
tiles on and below the diagonal (:func:`causal_fraction`); eager attention writes, soft-maxes
and reads back every score (11 bytes a score at 16 bits) and keeps 5 bytes of it for the
backward pass. An iteration of ``n = B / (D·m)`` micro-batches::

    stage s   t_f = L/P·(block_f + TP all-reduces) [+ embeddings on the first, head + loss
              on the last]; t_b likewise, + the forward again (full recomputation) or the
              attention core again (selective); + the activations' send / receive (P > 1:
              each tensor-parallel rank sends its copy, as Megatron-LM without its
              scatter / gather optimisation — what the DLPerf runs used)
    pipeline  n·max_s(t_f + t_b) + (Σ_s(t_f + t_b) − max_s) / v       (v: chunks per stage of
              the interleaved schedule, else 1: the bubble of 1F1B and GPipe)
    DP        ZeRO 0-2: the gradient all-reduce over D (ZeRO 1/2: reduce-scatter + all-gather,
              the same traffic), bucketed and overlapped with the last micro-batch's backward:
              exposed = max(one bucket, t_allreduce − ω·t_b)
              ZeRO-3 (FSDP FULL_SHARD), per micro-batch: the weights all-gathered for the
              forward and again for the backward, the gradients reduce-scattered, layer by
              layer while the previous layer computes: exposed = max(one layer's gather,
              2·t_allgather + t_reducescatter − ω_fsdp·t_micro-batch)
    optimizer the sharded state's bytes (ZeRO ≥ 1: ÷ D) at η_m·bandwidth

Collectives come from :mod:`perfcast.parallel.collectives`; ``network`` (when set) is the
achieved fraction of the inter-node bandwidth, in place of the collective model's (Vidur's
cloud network reached ~20 % of its nominal 200 Gb/s per GPU; an InfiniBand or RoCE cluster far
more). ``gemm``, ``attention``, ``memory``, ``τ``, ``ω``, ``ω_fsdp``, ``network`` and a fixed
per-iteration ``step_ms`` are the :class:`Efficiency` (with ``overlap_ddp`` and
``straggler_ddp``, PyTorch DDP's ω and the relative spread σ of replicas' steps — a synchronous
step waits for the slowest of D: × (1 + σ·√(2 ln D)) — for the data-parallel path of other
models): ``gemm``, ``attention``, ``memory`` and ``network`` fitted on DLPerf's Megatron-LM
runs (V100, 2021; their all-reduce ran after the backward pass, ω = 0) together with
llm-foundry's FSDP runs (A100 40 / 80 GB, 2023); ω is PyTorch DDP's bucketed overlap, fitted on
DLPerf's PyTorch data-parallel series; ω_fsdp = 1 (FSDP prefetches each layer's gather while
the previous layer computes) — ``benchmarks/distributed_eval.py``, shipped in
``parallel/efficiency.json``.

Memory per GPU (the fullest stage, the first): weights, gradients and optimizer state of its
``L/P`` layers (÷ T where split; ZeRO divides state, gradients, weights by D in turn) and its
share of the outside; ZeRO-3's gathered units (the layer computing and the one prefetched,
the gradients of the layer awaiting its reduce-scatter, the embeddings and head held whole);
the activations autograd saves per layer × layers × micro-batches in flight (1F1B: min(P, n)
on the first stage; GPipe: n; interleaved: P·(1 + (P−1)/(P·v))) — full recomputation keeps
each layer's input and one layer's activations, selective drops the attention core; + the
loss's logits on the last stage (a cross-entropy fused with its soft-max: the 16-bit logits
and their gradient, :data:`LOSS_BYTES_PER_LOGIT`); + the measured CUDA runtime overhead.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.parallel.blocks import ATTN, GEMM, MEM, POST, PRE, VIEW, NodeTable, TracedModel
from perfcast.parallel.cluster import Cluster
from perfcast.parallel.collectives import CollectiveModel
from perfcast.workload import INTERLEAVED_CHUNKS, Layout

MIB = 2.0 ** 20
#: GEMM output tile (rows × columns) of the wave quantisation.
TILE = 128
#: DDP's gradient bucket (bytes), as PyTorch DistributedDataParallel's default 25 MB.
BUCKET_BYTES = 25e6
#: Optimizer-state bytes per parameter beside the weights and gradients (16-bit training:
#: + the fp32 master copy).
STATE_BYTES = {"adam": 8.0, "adamw": 8.0, "sgd-momentum": 4.0, "sgd": 0.0, "none": 0.0}
#: Bytes per logit the loss holds at 16 bits: the logits kept for its backward pass and their
#: gradient (a cross-entropy fused with its soft-max; ×2 at fp32).
LOSS_BYTES_PER_LOGIT = 4.0
#: Bytes the optimizer step moves per parameter (reads and writes of weights, gradients,
#: state; + one read of the gradients for the norm).
STEP_BYTES = {"adam": 32.0, "adamw": 32.0, "sgd-momentum": 24.0, "sgd": 16.0, "none": 0.0}


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


def _act_bytes(precision: str) -> float:
    return 2.0 if precision in ("amp", "fp16", "bf16") else 4.0


def _weight_bytes(precision: str) -> float:
    return 2.0 if precision in ("fp16", "bf16") else 4.0


#: AMD GPUs FlashAttention-2 runs on (ROCm's CK backend): CDNA 2 (MI200: gfx90a) and CDNA 3
#: (MI300: gfx940-gfx942), by the ``compute_capability`` the registry gives AMD parts.
FLASH_AMD_TARGETS = ("gfx90a", "gfx940", "gfx941", "gfx942")
#: The query rows of one FlashAttention tile: a causal kernel skips the tiles above the
#: diagonal, so it computes (n + 1) / (2n) of the scores of n = ⌈S / 128⌉ tiles per row.
FLASH_TILE = 128


#: FlashAttention-2 issues Ampere's warp-level ``mma.sync`` instructions; on Hopper (NVIDIA
#: compute capability 9.x) they reach about 2/3 of the tensor cores' peak, which needs
#: ``wgmma`` (Shah et al., FlashAttention-3, 2024: "FlashAttention-2 achieves only 35 %
#: utilization on H100", against 50-73 % on A100 in Dao, FlashAttention-2, 2023). The GEMMs
#: are cuBLAS's, which issue ``wgmma`` there.
FLASH2_HOPPER_RATE = 2.0 / 3.0


def flash_rate(device) -> float:
    """The share of the matrix peak FlashAttention-2's instructions can reach on ``device``
    relative to Ampere (:data:`FLASH2_HOPPER_RATE` on Hopper, else 1)."""
    if str(getattr(device, "vendor", "") or "") != "NVIDIA":
        return 1.0
    try:
        cc = float(str(getattr(device, "compute_capability", None) or ""))
    except ValueError:
        return 1.0
    return FLASH2_HOPPER_RATE if 9.0 <= cc < 10.0 else 1.0


def flash_supported(device) -> bool:
    """Whether FlashAttention runs on ``device``: NVIDIA compute capability ≥ 8.0
    (FlashAttention-2: Ampere, Ada, Hopper, Blackwell) and AMD MI200 / MI300
    (:data:`FLASH_AMD_TARGETS`)."""
    vendor = str(getattr(device, "vendor", "") or "")
    cc = str(getattr(device, "compute_capability", None) or "").strip().lower()
    if vendor == "NVIDIA":
        try:
            return float(cc) >= 8.0
        except ValueError:
            return False
    if vendor == "AMD":
        arch = str(getattr(device, "architecture", "") or "")
        return cc in FLASH_AMD_TARGETS or any(t in arch for t in ("CDNA 2", "CDNA 3"))
    return False


def fused_attention(device, flash: str = "auto") -> bool:
    """The layout's ``flash_attention`` on ``device``: ``auto`` → :func:`flash_supported`;
    ``on`` where it is not supported is a one-line error naming the GPUs that run it."""
    ok = flash_supported(device)
    if flash == "auto":
        return ok
    if flash == "on" and not ok:
        cc = getattr(device, "compute_capability", None)
        raise PerfcastError(f"--flash-attention on: FlashAttention-2 runs on NVIDIA GPUs of "
                            f"compute capability ≥ 8.0 (A100, H100, L40S, RTX 30/40/50 …) and "
                            f"AMD MI200 / MI300; {getattr(device, 'key', device)} "
                            f"({getattr(device, 'vendor', '?')}"
                            f"{f', compute capability {cc}' if cc else ''}) does not — use "
                            f"--flash-attention off or auto")
    return flash == "on"


def attention_note(device, flash: str) -> str:
    """What ``notes`` say of the attention kernel chosen for ``device``."""
    fused = fused_attention(device, flash)
    why = {"auto": "auto: " + ("the GPU runs FlashAttention-2 (NVIDIA compute capability "
                               "≥ 8.0, AMD MI200 / MI300)" if fused else
                               "the GPU does not run FlashAttention-2 (it needs NVIDIA compute "
                               "capability ≥ 8.0 or AMD MI200 / MI300)"),
           "on": "--flash-attention on", "off": "--flash-attention off"}[flash]
    if fused:
        return (f"attention: FlashAttention ({why}) — no S² score matrix in memory; the "
                f"scores are recomputed in the backward pass (its matrix products 2.5× the "
                f"forward's); a causal model computes the (n + 1) / 2n of the score tiles on "
                f"and below the diagonal")
    return (f"attention: eager ({why}) — the S² scores are written, soft-maxed and read back "
            f"(11 bytes a score at 16 bits) and kept for the backward pass (5 bytes a score)")


def causal_fraction(seq: int) -> float:
    """The share of a causal attention's score tiles a FlashAttention kernel computes."""
    n = max(1, math.ceil(seq / FLASH_TILE))
    return (n + 1) / (2 * n)


def _matrix_peak(device, precision: str) -> float:
    p = {"amp": "fp16", "fp16": "fp16", "bf16": "bf16"}.get(precision, "fp32")
    v = device.peak_tflops(p) or device.peak_fp32_tflops
    return float(v) * 1e12


# --------------------------------------------------------------------------------- pricing
@dataclass
class Priced:
    """Milliseconds and bytes of one table at (T, m): per node ``fwd`` / ``bwd`` times,
    ``core`` (forward of the attention core), ``saved`` bytes (activations kept), ``params``
    per GPU, ``allreduce`` elements and ``n_allreduce`` (row-parallel outputs), ``flops`` of
    the forward (whole model, not divided)."""

    fwd: np.ndarray
    bwd: np.ndarray
    saved: np.ndarray
    params: np.ndarray
    allreduce: np.ndarray
    flops: np.ndarray


def price(tab: NodeTable, T: int, m: int, precision: str, device, eff: Efficiency, *,
          fused: bool | None = None, causal: bool = False, seq: int = 0) -> Priced:
    """Per-node forward / backward milliseconds of ``tab`` at micro-batch ``m`` under T-way
    tensor parallelism on ``device`` (see the module docstring). ``fused``: the attention runs
    as FlashAttention (``None``: :func:`flash_supported`); ``causal`` with ``seq`` tokens: it
    computes :func:`causal_fraction` of its scores."""
    if fused is None:
        fused = flash_supported(device)
    inv = 1.0 / T
    dv = lambda mask: np.where(mask, inv, 1.0)  # noqa: E731
    a_b, w_b = _act_bytes(precision), _weight_bytes(precision)
    F = tab.flops * m * dv(tab.div_flops)
    act = (tab.act_in * dv(tab.in_div) + tab.act_out * dv(tab.out_div)) * m * a_b
    wts = tab.weights * dv(tab.div_weights) * w_b
    peak_m = _matrix_peak(device, precision)
    peak_v = float(device.peak_fp32_tflops) * 1e12
    bw = float(device.bandwidth_gbs) * 1e9 * eff.memory
    sms = float(device.sm_count or 100)
    sdpa = np.array([o == "sdpa" for o in tab.op])
    # wave quantisation of a GEMM's output tiles
    N = np.where(tab.out_div, tab.n_dim * inv, tab.n_dim)
    tiles = np.ceil(np.maximum(tab.m_dim * m, 1) / TILE) * np.ceil(np.maximum(N, 1) / TILE)
    wave = tiles / (np.ceil(tiles / sms) * sms)
    # FlashAttention: its own fraction of the matrix peak (``attention``); eager attention's
    # batched products run as GEMMs
    att = eff.gemm if (eff.attention is None or not fused) else \
        eff.attention * flash_rate(device)
    eta = np.where(tab.cls == GEMM, eff.gemm * wave,
                   np.where(sdpa, att, np.where(tab.cls == ATTN, eff.gemm, 1.0)))
    peak = np.where((tab.cls == GEMM) | (tab.cls == ATTN), peak_m * eta, peak_v)
    launch = tab.launches * eff.launch_us / 1e3
    # a causal FlashAttention kernel skips the score tiles above the diagonal
    F_run = np.where(sdpa, F * (causal_fraction(seq) if (fused and causal and seq) else 1.0),
                     F)
    t_c = F_run / peak * 1e3
    # eager attention: the score matrix is written, soft-maxed, dropped out and read back —
    # 11 bytes per score at 16 bits (Korthikanti et al.'s 5·a·s/h activation term, moved)
    extra = tab.scores * m * dv(tab.div_flops) * (0.0 if fused else 11.0)
    t_m = (act + wts + extra * a_b / 2) / bw * 1e3
    fwd = np.where(tab.cls == VIEW, 0.0, np.maximum(t_c, t_m)) + launch
    # backward: 2× a product's FLOPs (input and weight gradients); FlashAttention recomputes
    # the scores, 5 products for the forward's 2 (2.5×); eager attention keeps them (2×)
    bf = np.where(sdpa, 2.5 if fused else 2.0, np.where(tab.cls == MEM, 1.0, 2.0))
    bwd = np.where(tab.cls == VIEW, 0.0, np.maximum(bf * t_c, 2.0 * t_m)) + launch
    # eager attention also keeps its soft-maxed scores and dropout mask: 5 bytes a score
    saved = tab.saved * dv(tab.saved_div) * m * a_b + extra / 11.0 * 5.0
    return Priced(fwd=fwd, bwd=bwd, saved=saved,
                  params=tab.params * dv(tab.div_weights), allreduce=tab.allreduce * m,
                  flops=tab.flops * m)


@dataclass
class Parts:
    """Sums over one block (``b_*``), the first stage's outside (``pre_*``) and the last
    stage's (``post_*``): forward / backward / attention-core ms, saved activation bytes,
    parameters per GPU, all-reduced elements and their count (per block), forward FLOPs of the
    whole model (per micro-batch, undivided)."""

    b_fwd: float
    b_bwd: float
    b_core: float
    b_saved: float
    b_core_saved: float
    b_params: float
    b_allreduce: float
    b_n_allreduce: int
    pre_fwd: float
    pre_bwd: float
    pre_params: float
    pre_allreduce: float
    post_fwd: float
    post_bwd: float
    post_params: float
    model_flops: float


def parts(tm: TracedModel, T: int, m: int, precision: str, device, eff: Efficiency, *,
          fused: bool | None = None) -> Parts:
    """:class:`Parts` of ``tm`` at (T, m); ``fused``: FlashAttention (``None``: where the GPU
    runs it)."""
    p1, p2 = (price(t, T, m, precision, device, eff, fused=fused, causal=tm.causal,
                    seq=tm.seq_len) for t in (tm.one, tm.two))
    one, two = tm.one, tm.two

    def diff(a, b, mask1=None, mask2=None):
        return float(b[mask2].sum() if mask2 is not None else b.sum()) - \
            float(a[mask1].sum() if mask1 is not None else a.sum())

    c1, c2 = one.core, two.core
    b_fwd, b_bwd = diff(p1.fwd, p2.fwd), diff(p1.bwd, p2.bwd)
    pre = tm.part == PRE if tm.part is not None else np.zeros(len(one.op), bool)
    out_fwd, out_bwd = float(p1.fwd.sum()) - b_fwd, float(p1.bwd.sum()) - b_bwd
    out_params = float(p1.params.sum()) - diff(p1.params, p2.params)
    pre_fwd, pre_bwd = float(p1.fwd[pre].sum()), float(p1.bwd[pre].sum())
    pre_params = float(p1.params[pre].sum())
    pre_ar = float(p1.allreduce[pre].sum())
    n_ar = int(((two.cls == GEMM) & (two.allreduce > 0)).sum()
               - ((one.cls == GEMM) & (one.allreduce > 0)).sum())
    model_flops = float(p1.flops.sum()) + (tm.shape.layers - 1) * diff(p1.flops, p2.flops)
    return Parts(b_fwd=b_fwd, b_bwd=b_bwd, b_core=diff(p1.fwd, p2.fwd, c1, c2),
                 b_saved=diff(p1.saved, p2.saved), b_core_saved=diff(p1.saved, p2.saved, c1, c2),
                 b_params=diff(p1.params, p2.params),
                 b_allreduce=diff(p1.allreduce, p2.allreduce) - 0.0, b_n_allreduce=max(n_ar, 0),
                 pre_fwd=pre_fwd, pre_bwd=pre_bwd, pre_params=pre_params, pre_allreduce=pre_ar,
                 post_fwd=out_fwd - pre_fwd, post_bwd=out_bwd - pre_bwd,
                 post_params=out_params - pre_params, model_flops=model_flops)


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
    L, s, h = tm.shape.layers, tm.seq_len, tm.shape.hidden
    n_mb = batch // (D * m)
    fused = fused_attention(device, getattr(layout, "flash_attention", "auto"))
    pr = prices or parts(tm, T, m, precision, device, eff, fused=fused)
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
    tp_post = (ar(m * s * h * a_b, T, kT) + 3 * ar(m * s * 4.0, T, kT)) if T > 1 else 0.0
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
    loss_f = 3 * m * s * V / T * 4.0 / bw * 1e3 if V else 0.0
    # pipeline send / receive of one micro-batch's activations: every tensor-parallel rank
    # sends its (replicated) copy to its peer of the next stage — no scatter / gather
    pp = 0.0
    if P > 1:
        pp_inter = T * D >= cluster.gpus_per_node
        pp = v * coll_eff.time_ms("send_recv", m * s * h * a_b, 2, 1 if pp_inter else 2,
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
        stages.append({"compute": comp_f + comp_b, "recompute": rc, "tp": tp_f + tp_b + rct,
                       "pp": p2p, "b": comp_b + rc + tp_b + rct})
    tot = [x["compute"] + x["recompute"] + x["tp"] + x["pp"] for x in stages]
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
    # data parallel: gradient all-reduce (ZeRO 1/2: reduce-scatter + all-gather), once per
    # iteration, bucketed and overlapped with the last micro-batch's backward pass
    g_b = float(grad_bytes) if grad_bytes else (2.0 if precision in ("fp16", "bf16") else 4.0)
    kD = group_per_node(D, T, cluster)
    dp = dp_exposed = z3 = 0.0
    if D > 1 and layout.zero < 3:
        dp = ar(p_gpu * g_b, D, kD)
        bucket = ar(min(BUCKET_BYTES, p_gpu * g_b), D, kD)
        dp_exposed = max(bucket, dp - eff.overlap * crit["b"])
    elif D > 1:
        # ZeRO-3 / FSDP FULL_SHARD, per micro-batch: the weights all-gathered for the forward
        # and again for the backward, the gradients reduce-scattered — one collective per
        # layer, prefetched while the previous layer computes (ω_fsdp of the micro-batch's
        # compute hides them); the first layer's gather is never hidden
        ag = coll_eff.time_ms("all_gather", p_gpu * _weight_bytes(precision), D, kD, cluster)
        rs = coll_eff.time_ms("reduce_scatter", p_gpu * g_b, D, kD, cluster)
        comm = 2 * ag + rs
        t_mb = tot[smax]
        z3 = n_mb * max(ag / max(lps, 1), comm - eff.overlap_fsdp * t_mb)
    # optimizer step over the (ZeRO-sharded) state
    shard = D if layout.zero >= 1 else 1
    t_opt = p_gpu / shard * STEP_BYTES.get(opt, 0.0) / bw * 1e3
    time = t_pipe + dp_exposed + z3 + t_opt + eff.step_ms
    breakdown = {"compute": n_mb * crit["compute"], "recompute": n_mb * crit["recompute"],
                 "tensor_parallel_allreduce": n_mb * crit["tp"],
                 "pipeline_send_recv": n_mb * crit["pp"], "pipeline_bubble": bubble,
                 "data_parallel_allreduce": dp_exposed, "zero3_allgather": z3,
                 "optimizer": t_opt, "overhead": eff.step_ms}
    # memory per GPU (the first stage: embedding and the most micro-batches in flight)
    w_b = _weight_bytes(precision)
    master = 4.0 if precision in ("fp16", "bf16") and opt != "none" else 0.0
    state = STATE_BYTES.get(opt, 0.0) + master
    z = layout.zero
    weights = p_gpu * w_b / (D if z >= 3 else 1)
    grads = p_gpu * g_b / (D if z >= 2 else 1)
    states = p_gpu * state / (D if z >= 1 else 1)
    if layout.schedule == "gpipe":
        inflight = n_mb
    elif P > 1:
        inflight = min(P, n_mb) * ((1 + (P - 1) / (P * v)) if v > 1 else 1.0)
    else:
        inflight = 1
    layer_in = m * s * h * a_b
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
    logits = (m * s * V / T * LOSS_BYTES_PER_LOGIT * a_b / 2) if V and P == 1 else 0.0
    act += inflight * layer_in  # the embedding output
    mem = {"weights": weights / MIB, "gradients": grads / MIB, "optimizer_state": states / MIB,
           "activations": act / MIB, "logits": logits / MIB, "runtime": runtime_mb}
    if z >= 3 and D > 1:
        # FSDP's gathered units: the layer computing and the one prefetched (weights), the
        # layer whose gradients wait for their reduce-scatter, and the outside (embeddings,
        # head) held whole from the forward to the end of the backward
        unit = pr.b_params
        mem["zero3_buffers"] = (2 * unit * w_b + unit * g_b
                                + (pr.pre_params + post_params) * w_b) / MIB
    if P > 1:  # the last stage: its logits instead of the first stage's deeper pipeline
        last = dict(mem)
        last_params = stage_params[-1]
        last["weights"] = last_params * w_b / (D if z >= 3 else 1) / MIB
        last["gradients"] = last_params * g_b / (D if z >= 2 else 1) / MIB
        last["optimizer_state"] = last_params * state / (D if z >= 1 else 1) / MIB
        full = lps * (layer_in if layout.recompute == "full" else pr.b_saved)
        last["activations"] = (full + (pr.b_saved if layout.recompute == "full" else 0.0)) \
            / MIB
        last["logits"] = m * s * V / T * LOSS_BYTES_PER_LOGIT * a_b / 2 / MIB if V else 0.0
        if sum(last.values()) > sum(mem.values()):
            mem = last
    # per-GPU work of the iteration (the power model's features)
    flops_gpu = 3 * pr.model_flops * n_mb / (T * P) * (
        1 + (1 / 3 if layout.recompute == "full" else 0.0))
    bytes_gpu = (2 * p_gpu * w_b + act) * n_mb * 3 + p_gpu * STEP_BYTES.get(opt, 0.0) / shard
    kernels = float(tm.two.launches.sum() - tm.one.launches.sum()) * lps * 3 * n_mb
    return Estimate(layout=replace(layout, micro_batch=m), micro_batches=n_mb, time_ms=time,
                    breakdown_ms=breakdown, memory_mb=float(sum(mem.values())),
                    memory_breakdown_mb=mem, model_flops=3 * pr.model_flops * batch / m,
                    gpu_flops=flops_gpu, gpu_bytes=bytes_gpu, gpu_kernels=kernels)


def micro_batch_choices(batch: int, data: int, limit: int = 64) -> list[int]:
    """The micro-batches a replica can split its ``batch / data`` samples into (divisors, at
    most ``limit``)."""
    per = batch // data
    return [d for d in range(1, min(per, limit) + 1) if per % d == 0]


__all__ = ["BUCKET_BYTES", "Efficiency", "Estimate", "Parts", "Priced", "estimate",
           "group_per_node", "micro_batch_choices", "parts", "price", "shipped_efficiency"]
