"""One traced transformer block priced on a device's spec sheet under a tensor-parallel split:
per node ``max(F / (η_c·peak), bytes / (η_m·bandwidth)) + τ``, backward products at 2·F,
FlashAttention where the GPU runs it (no S² scores, the causal half of the tiles), FP8 GEMMs with
their casts; the bytes per parameter of each precision (``docs/concepts/distributed.md``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.parallel.blocks import ATTN, GEMM, MEM, PRE, VIEW, NodeTable, TracedModel

if TYPE_CHECKING:  # pragma: no cover
    from perfcast.parallel.model import Efficiency

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
