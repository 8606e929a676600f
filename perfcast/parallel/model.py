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

Context parallelism (C GPUs per sequence, ring attention as Megatron-LM / Transformer
Engine's ``p2p``): the block is priced at ``m / C`` of the traced sequence (every node linear in
its tokens; attention: S/C queries against all S keys, causal tiles balanced over the ring by
the two-chunks-per-GPU split); per layer C − 1 ring steps each send the local K, V
(``2·m·S/C·kv_heads·head_dim / T`` elements) to the next GPU while 1/C of the attention core
runs — exposed ``(C − 1)·max(0, t_step − t_core / C)``; the backward sends K, V and their
gradients (2× the bytes) behind 1/C of the core's backward; recomputing the attention runs
the ring again. Expert parallelism (E GPUs of the D·C per MoE layer): the expert GEMMs'
weights ÷ E (their work per GPU unchanged: uniform top-k routing — every GPU receives as
many token-expert pairs as it sends, no capacity limit, no dropped tokens); per MoE layer two
all-to-alls forward (dispatch, combine) and two backward of ``m·S/C / T · k · hidden``
elements per GPU (with T > 1 the tensor-parallel ranks split the tokens, as Megatron's MoE
runs with sequence parallelism), not overlapped
(:meth:`~perfcast.parallel.collectives.CollectiveModel.all_to_all_ms`). The dense weights are
replicated over the D·C GPUs (gradients reduced and ZeRO-sharded over them), the experts
over D·C / E.

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


#: Precisions whose activations are 16-bit (``fp8``: everything but the GEMMs runs in bf16).
HALF_PRECISIONS = ("amp", "fp16", "bf16", "bf16-pure", "fp8")
#: Precisions whose working weights and gradients are 16-bit. ``bf16`` (FSDP's
#: ``MixedPrecision(param_dtype=bf16)``, Megatron's ``--bf16``) and ``fp8`` keep an fp32
#: master copy beside them (:func:`_state_bytes`); ``bf16-pure`` none, its optimizer state in
#: bf16 too.
HALF_WEIGHTS = ("fp16", "bf16", "bf16-pure", "fp8")
#: FP8 training (Transformer Engine's recipe; torchao float8 alike), per GEMM: the forward
#: casts its bf16 input to FP8 (read 2 bytes, write 1 an element; the amax taken in the same
#: pass) and its bf16 weight to FP8 and its transpose (read 2, write 2); the backward casts the
#: output gradient to FP8 and its transpose (read 2, write 2) — memory-bound kernels at
#: η_m·bandwidth. The scaling (amax history, scale update): one more launch per GEMM per pass.
FP8_CAST_INPUT_BYTES, FP8_CAST_WEIGHT_BYTES, FP8_CAST_GRAD_BYTES = 3.0, 4.0, 4.0
FP8_CAST_LAUNCHES_FWD, FP8_CAST_LAUNCHES_BWD = 3, 2
#: Bytes per GEMM weight of the FP8 copies a layer holds (TE: the FP8 weight and its
#: transpose, one byte each).
FP8_WEIGHT_COPY_BYTES = 2.0


def _act_bytes(precision: str) -> float:
    return 2.0 if precision in HALF_PRECISIONS else 4.0


def _weight_bytes(precision: str) -> float:
    return 2.0 if precision in HALF_WEIGHTS else 4.0


def _state_bytes(precision: str, optimizer: str) -> float:
    """Optimizer-state bytes per parameter beside weights and gradients: the optimizer's
    (halved in bf16 for ``bf16-pure``) + the fp32 master copy of fp16 / bf16 / fp8 training."""
    opt = STATE_BYTES.get(optimizer, 0.0)
    if precision == "bf16-pure":
        return opt / 2.0
    master = 4.0 if precision in ("fp16", "bf16", "fp8") and optimizer != "none" else 0.0
    return opt + master


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
    """The matrix peak (FLOP/s) of the precision's 16/32-bit products (``fp8``: its attention
    and other products run in bf16; its GEMMs' FP8 peak is :func:`price`'s)."""
    p = {"amp": "fp16", "fp16": "fp16", "bf16": "bf16", "bf16-pure": "bf16",
         "fp8": "bf16"}.get(precision, "fp32")
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
    expert_params: np.ndarray | None = None


def price(tab: NodeTable, T: int, m: float, precision: str, device, eff: Efficiency, *,
          fused: bool | None = None, causal: bool = False, seq: int = 0,
          expert: int = 1) -> Priced:
    """Per-node forward / backward milliseconds of ``tab`` at micro-batch ``m`` under T-way
    tensor parallelism on ``device`` (see the module docstring). ``fused``: the attention runs
    as FlashAttention (``None``: :func:`flash_supported`); ``causal`` with ``seq`` tokens: it
    computes :func:`causal_fraction` of its scores. ``m`` may be a fraction: context
    parallelism over C GPUs prices a table traced at the whole sequence at ``m / C`` — every
    node's work is linear in its tokens, and the attention's too (each GPU's S/C queries
    against all S keys: S²/C scores). ``expert``: E-way expert parallelism divides the expert
    GEMMs' weights (their work stays: uniform routing brings each GPU as many tokens as it
    sends)."""
    if fused is None:
        fused = flash_supported(device)
    inv = 1.0 / T
    dv = lambda mask: np.where(mask, inv, 1.0)  # noqa: E731
    a_b, w_b = _act_bytes(precision), _weight_bytes(precision)
    F = tab.flops * m * dv(tab.div_flops)
    act = (tab.act_in * dv(tab.in_div) + tab.act_out * dv(tab.out_div)) * m * a_b
    xp = tab.expert_mask()
    e_div = np.where(xp, 1.0 / max(int(expert), 1), 1.0)
    wts = tab.weights * dv(tab.div_weights) * e_div * w_b
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
    if precision == "fp8":
        fwd, bwd = _fp8_gemms(tab, fwd, bwd, F_run, t_m, launch, dv, e_div, m, eta, device,
                              bw, eff)
    # eager attention also keeps its soft-maxed scores and dropout mask: 5 bytes a score
    saved = tab.saved * dv(tab.saved_div) * m * a_b + extra / 11.0 * 5.0
    params = tab.params * dv(tab.div_weights) * e_div
    return Priced(fwd=fwd, bwd=bwd, saved=saved, params=params, allreduce=tab.allreduce * m,
                  flops=tab.flops * m, expert_params=np.where(xp, params, 0.0))


def _fp8_gemms(tab, fwd, bwd, F, t_m, launch, dv, e_div, m, eta, device, bw, eff):
    """FP8 training's GEMM times: the product at the FP8 peak (η the same as bf16's) + the
    casts and scaling (:data:`FP8_CAST_INPUT_BYTES` …); a GEMM too small to gain stays in bf16,
    as torchao float8's ``auto_filter_for_recipe`` leaves it (so no GEMM is slower in FP8)."""
    from perfcast.devices.fp8 import fp8_peak_tflops

    f8, _ = fp8_peak_tflops(device)
    if not f8:
        return fwd, bwd
    gemm = tab.cls == GEMM
    t_c8 = F / (float(f8) * 1e12 * eta) * 1e3
    a_in = tab.act_in * dv(tab.in_div) * m
    a_out = tab.act_out * dv(tab.out_div) * m
    w_el = tab.weights * dv(tab.div_weights) * e_div
    cast_f = (a_in * FP8_CAST_INPUT_BYTES + w_el * FP8_CAST_WEIGHT_BYTES) / bw * 1e3 \
        + FP8_CAST_LAUNCHES_FWD * eff.launch_us / 1e3
    cast_b = a_out * FP8_CAST_GRAD_BYTES / bw * 1e3 + FP8_CAST_LAUNCHES_BWD * eff.launch_us / 1e3
    f8_fwd = np.maximum(t_c8, t_m) + launch + cast_f
    f8_bwd = np.maximum(2.0 * t_c8, 2.0 * t_m) + launch + cast_b
    use = gemm & (f8_fwd + f8_bwd < fwd + bwd)
    return np.where(use, f8_fwd, fwd), np.where(use, f8_bwd, bwd)


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
    #: the block's backward ms of the attention core; its expert parameters per GPU (÷ T·E)
    b_core_bwd: float = 0.0
    b_expert_params: float = 0.0


def parts(tm: TracedModel, T: int, m: float, precision: str, device, eff: Efficiency, *,
          fused: bool | None = None, context: int = 1, expert: int = 1) -> Parts:
    """:class:`Parts` of ``tm`` at (T, m); ``fused``: FlashAttention (``None``: where the GPU
    runs it); ``context``: the C GPUs of context parallelism (each prices ``m / C`` of the
    traced sequence, :func:`price`); ``expert``: E-way expert parallelism."""
    p1, p2 = (price(t, T, m / max(int(context), 1), precision, device, eff, fused=fused,
                    causal=tm.causal, seq=tm.seq_len, expert=expert) for t in (tm.one, tm.two))
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
                 post_params=out_params - pre_params, model_flops=model_flops,
                 b_core_bwd=diff(p1.bwd, p2.bwd, c1, c2),
                 b_expert_params=diff(p1.expert_params, p2.expert_params))


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


__all__ = ["BUCKET_BYTES", "Efficiency", "Estimate", "Parts", "Priced", "estimate",
           "group_per_node", "micro_batch_choices", "parts", "price", "shipped_efficiency"]
