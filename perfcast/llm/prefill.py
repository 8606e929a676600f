"""Prefill (prompt processing) as its own model: the time from a batch's prompts to their first
tokens — ``ttft_ms`` — priced operator by operator, per serving engine.

A prompt of ``I`` tokens is processed in **passes** of at most the engine's chunk
(:data:`ENGINE_PREFILL`): vLLM chunks prefill at ``max_num_batched_tokens`` tokens (several
short prompts share a pass), TensorRT-LLM runs the whole context up to ``max_num_tokens``,
DeepSpeed-FastGen splits and fuses at its token budget, llama.cpp feeds ``min(n_batch,
n_ubatch)`` tokens at a time (``--n-batch`` / ``--n-ubatch``, default 2,048 / 512; the
``--batch-size`` sequences' prompts share the passes), Hugging Face the whole prompt. Each pass is priced from its operators on the device's spec sheet (peak FLOP/s,
bandwidth), every layer alike:

* **GEMMs** (QKV, output, MLP up/gate and down projections, ÷ the tensor-parallel devices;
  an MoE's experts at the tokens each one receives) — the **operator model**:
  ``τ + ((c/η)^p + (m/β)^p)^(1/p)`` with ``c`` the FLOPs ÷ the peak of the units that run it and
  ``m`` the operand bytes ÷ the bandwidth, a smooth maximum of the two roofline terms; ``τ, η,
  β, p`` fitted on Vidur's prefill and decode GEMM profiles (A100 and A40,
  :func:`perfcast.training.prefill.fit_operators`);
* **attention**, quadratic in the prompt (``4·H·d`` FLOPs per query and context token, causal:
  the context grows along the prompt): engines with **FlashAttention** (vLLM, TensorRT-LLM's
  fused MHA, DeepSpeed's blocked flash kernels, PyTorch SDPA) run it as one GEMM-like operator
  that reads Q, K, V once; llama.cpp without ``-fa`` (its default) multiplies ``K·Qᵀ`` and
  ``softmax·V`` as two batched GEMMs and moves the ``H × u × context`` score matrix through
  memory (f32 write, softmax read/write, f16 conversion, read: 20 bytes per score);
* **memory-bound operators** (2 norms, rotary embedding, gated activation, 2 residual adds;
  llama.cpp keeps f32 activations and converts every GEMM's input and output to and from f16)
  — ``τ + bytes / (η_mem · bandwidth)``, fitted on Vidur's element-wise and norm profiles;
* **weight dequantisation** for the quantized formats: llama.cpp dequantises a quantized
  matrix to FP16 before its cuBLAS GEMM when a ubatch has more than 32 tokens
  (``MMQ_MAX_BATCH_SIZE``; its quantized kernels below) — a pass over the weights reading the
  quantized bytes and writing two bytes per weight, each ubatch; vLLM / TensorRT-LLM's
  weight-only int4/int8 GEMMs (Marlin, AWQ, GPTQ, W4A16) dequantise inside the kernel, at the
  FP16 tensor rate, reading the smaller weights; Hugging Face (bitsandbytes) dequantises each
  matrix to FP16 every forward;
* **the LM head** for the last token of each prompt (what sampling needs);
* **tensor parallelism**: two all-reduces per layer of the pass's activations (vidur's NVLink
  profile, :func:`perfcast.llm.physics.all_reduce_s`); llama.cpp's layer split instead
  **pipelines** the ubatches through its devices (measured: prompt passes take ≈ 1/n of one
  device's time with n devices, while generation does not speed up);
* **engine overheads** per pass: ``t_pass + t_layer · layers`` (scheduling, graph building,
  kernel launches, sampling): llama.cpp's fitted on the prompt-only differences of
  LLM-Inference-Bench (rows that differ only in ``n_batch``: the generated tokens cancel), the
  other engines' the per-pass overheads of the ``llm-latency`` engine model.

FP16 GEMMs run on the tensor cores at the spec's FP16 peak (FP32 accumulation); llama.cpp's
cuBLAS path computes in FP16 (``CUBLAS_COMPUTE_16F``), which GeForce cards run at twice their
FP32-accumulate rate (their spec sheet's FP16 figure) — used when the device's name says
GeForce, and stated in the notes.

The constants live in ``llm-prefill/config.json`` of the shipped models
(``perfcast train --recipe llm --only prefill``; read by
``perfcast.shipped.load_shipped("llm-prefill")``); their held-out errors (Vidur's operators
leave-one-GPU-out, llama.cpp's prompt times leave-one-hardware-out) are in ``reports/llm/``
and give ``ttft_ms``'s interval.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.llm.arch import LLMArch, kv_heads_per_device
from perfcast.workload import LLAMA_CPP_N_BATCH, LLAMA_CPP_N_UBATCH

#: Format of ``llm-prefill/config.json``.
FORMAT = "perfcast-llm-prefill/1"
#: Directory of the shipped constants (``perfcast.shipped.load_shipped("llm-prefill")``).
SHIPPED_NAME = "llm-prefill"
CONFIG_FILE = "config.json"
#: llama.cpp multiplies quantized weights with its own kernels up to this many tokens
#: (``MMQ_MAX_BATCH_SIZE``); above it, it dequantises to FP16 and calls cuBLAS.
LLAMA_CPP_MMQ_MAX_TOKENS = 32
#: llama.cpp's default physical batch (``n_ubatch``) and logical batch (``n_batch``), declared
#: with the options in :mod:`perfcast.workload`.
LLAMA_CPP_UBATCH = LLAMA_CPP_N_UBATCH
LLAMA_CPP_NBATCH = LLAMA_CPP_N_BATCH
#: Bytes a materialised attention score moves through memory (llama.cpp without flash
#: attention): f32 write by the K·Qᵀ GEMM, f32 read + write by softmax, f32 read + f16 write by
#: the conversion to the second GEMM's input, f16 read by it.
SCORE_BYTES = 4 + 8 + 6 + 2


@dataclass(frozen=True)
class EnginePrefill:
    """How an engine runs prefill: ``chunk`` tokens per pass (``None``: the whole batch's
    prompts at once), ``attention`` (``flash`` or ``materialized``), ``dequant`` of weight-only
    quantized formats (``fused``: inside the GEMM; ``to-fp16``: a separate pass per forward;
    ``to-fp16-above-mmq``: llama.cpp's), ``act_bytes`` of its activations, ``fp16_accumulate``
    (its FP16 GEMMs accumulate in FP16), ``layer_split`` (llama.cpp: devices hold layers and
    pipeline the ubatches) and ``source`` (where the defaults come from)."""

    name: str
    chunk: int | None
    attention: str
    dequant: str
    act_bytes: int = 2
    fp16_accumulate: bool = False
    layer_split: bool = False
    source: str = ""


ENGINE_PREFILL: dict[str, EnginePrefill] = {
    "vllm": EnginePrefill(
        "vllm", 2048, "flash", "fused",
        source="vLLM: chunked prefill at max_num_batched_tokens = 2048 (the OpenAI server's "
               "default), FlashAttention, Marlin/AWQ/GPTQ kernels dequantise in the GEMM"),
    "trt-llm": EnginePrefill(
        "trt-llm", 8192, "flash", "fused",
        source="TensorRT-LLM: the context phase up to max_num_tokens = 8192 in one pass, fused "
               "multi-head attention, W4A16 / W8A16 GEMM plugins"),
    "deepspeed-mii": EnginePrefill(
        "deepspeed-mii", 768, "flash", "fused",
        source="DeepSpeed-FastGen: Dynamic SplitFuse at its 768-token budget "
               "(max_ragged_batch_size), blocked flash attention"),
    "hf": EnginePrefill(
        "hf", None, "flash", "to-fp16",
        source="Hugging Face transformers: the whole prompt in one forward, SDPA attention, "
               "bitsandbytes dequantises each matrix to FP16"),
    "llama.cpp": EnginePrefill(
        "llama.cpp", LLAMA_CPP_UBATCH, "materialized", "to-fp16-above-mmq", act_bytes=4,
        fp16_accumulate=True, layer_split=True,
        source="llama.cpp: passes of min(n_batch, n_ubatch) tokens (default 512), "
               "attention without -fa (its default), quantized weights dequantised to FP16 for cuBLAS above 32 "
               "tokens, f32 activations, cuBLAS in FP16 (CUBLAS_COMPUTE_16F), layer split "
               "pipelining the ubatches"),
}


@dataclass(frozen=True)
class PrefillConstants:
    """The fitted numbers (see the module docstring): ``gemm`` ``{tau_s, eta, beta, p}``,
    ``memop`` ``{tau_s, eta}``, ``engines`` ``{"engine|vendor" or "engine": {b, t_pass_s,
    t_layer_s, pipeline}}`` (``b`` ≥ 1 scales the GEMMs' memory term: how far the engine's own
    streaming kernels are from the profiled ones; ``pipeline``: the speed-up share of each
    extra layer-split device), ``interval`` ``{"engine|vendor" or "*": [q_low, q_high]}`` (quantiles
    of the held-out log ratio measured / predicted at ``coverage``) and ``trained_on``."""

    gemm: dict[str, float]
    memop: dict[str, float]
    engines: dict[str, dict[str, float]] = field(default_factory=dict)
    interval: dict[str, list[float]] = field(default_factory=dict)
    coverage: float = 0.9
    trained_on: dict[str, Any] = field(default_factory=dict)

    def engine(self, engine: str, vendor: str) -> tuple[dict[str, float], str]:
        """(overheads, which entry) of ``engine`` on ``vendor``: its own, else the engine's
        pooled one, else ``{}`` (the caller's fallback)."""
        for key in (f"{engine}|{vendor}", engine):
            if key in self.engines:
                return self.engines[key], key
        return {}, ""

    def interval_for(self, engine: str, vendor: str) -> tuple[list[float], str]:
        """(``[q_low, q_high]``, which entry) of the held-out log-ratio quantiles for
        ``engine`` on ``vendor`` (its own, else the operators' ``*``)."""
        for key in (f"{engine}|{vendor}", "*"):
            if key in self.interval:
                return list(self.interval[key]), key
        return [0.0, 0.0], "none"

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    def save(self, folder: str | Path) -> Path:
        from perfcast.paths import write_file_atomically

        path = Path(folder) / CONFIG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_file_atomically(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PrefillConstants:
        if d.get("format") != FORMAT:
            raise PerfcastError(f"not a {FORMAT} file (retrain with perfcast train --recipe llm "
                                f"--only prefill)")
        return cls(gemm=dict(d["gemm"]), memop=dict(d["memop"]),
                   engines={k: dict(v) for k, v in d.get("engines", {}).items()},
                   interval={k: list(v) for k, v in d.get("interval", {}).items()},
                   coverage=float(d.get("coverage", 0.9)), trained_on=d.get("trained_on", {}))

    @classmethod
    def load(cls, folder: str | Path) -> PrefillConstants:
        path = Path(folder) / CONFIG_FILE
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PerfcastError(f"cannot read the prefill constants {path}: {exc}") from None


# --------------------------------------------------------------------------- operators
def gemm_s(flops, nbytes, peak: float, bw: float, k: dict[str, float], b: float = 1.0):
    """Seconds of GEMM-like operators (arrays): ``τ + ((c/η)^p + (b·m/β)^p)^(1/p)``."""
    c = np.asarray(flops, dtype=float) / (peak * k["eta"])
    m = b * np.asarray(nbytes, dtype=float) / (bw * k["beta"])
    p = k["p"]
    return k["tau_s"] + (c ** p + m ** p) ** (1.0 / p)


def memop_s(nbytes, bw: float, k: dict[str, float]):
    """Seconds of memory-bound operators (arrays): ``τ + bytes / (η · bandwidth)``."""
    return k["tau_s"] + np.asarray(nbytes, dtype=float) / (bw * k["eta"])


def is_geforce(device) -> bool:
    """A GeForce (consumer) NVIDIA card: its spec sheet's FP16 tensor figure is the
    FP32-accumulate rate, and FP16 accumulation runs twice as fast."""
    return "geforce" in f"{getattr(device, 'name', '')}".lower()


def gemm_peak(device, compute_precision: str, fp16_accumulate: bool) -> tuple[float, str | None]:
    """(FLOP/s of a GEMM at ``compute_precision`` on ``device``, a note when not the spec's
    figure as is)."""
    peak = device.peak_tflops(compute_precision) or device.peak_tflops("fp16") \
        or device.peak_fp32_tflops
    if not peak:
        raise PerfcastError(f"{device.key} has no peak FLOP/s in its spec (peak_fp16_tflops): "
                            f"add it to price prefill")
    peak = float(peak) * 1e12
    if fp16_accumulate and compute_precision == "fp16" and is_geforce(device):
        return 2.0 * peak, (f"{device.key} is a GeForce card: its FP16 tensor peak "
                            f"{peak / 1e12:,.1f} TFLOP/s is with FP32 accumulation, and the "
                            f"engine's FP16-accumulate GEMMs run at twice that "
                            f"({2 * peak / 1e12:,.1f})")
    return peak, None


# --------------------------------------------------------------------------- the passes
def passes(batch: int, input_len: int, chunk: int | None) -> dict[str, np.ndarray]:
    """The prefill passes of ``batch`` prompts of ``input_len`` tokens with at most ``chunk``
    tokens per pass (``None``: all at once), one entry per distinct pass: ``count`` (how many
    such passes), ``tokens``, ``attention`` (Σ over its tokens of the positions each attends
    to: the causal attention's work), ``kv_read`` (cached K/V tokens the pass reads) and
    ``finished`` (prompts whose last token is in the pass)."""
    i = int(input_len)
    total = batch * i
    c = total if not chunk else min(int(chunk), total)
    if c >= i:  # whole prompts share a pass: k per pass
        k = max(1, c // i)
        full, rest = divmod(batch, k)
        seqs = [s for s, m in ((k, full), (rest, 1 if rest else 0)) if m]
        cnt = [m for m in (full, 1 if rest else 0) if m]
        s_ = np.array(seqs, float)
        return {"count": np.array(cnt, float), "tokens": s_ * i,
                "attention": s_ * i * (i + 1) / 2.0, "kv_read": s_ * i, "finished": s_}
    # each prompt in chunks of c tokens, its context growing
    n = math.ceil(i / c)
    start = np.arange(n, dtype=float) * c
    toks = np.minimum(c, i - start)
    fin = np.zeros(n)
    fin[-1] = 1.0
    return {"count": np.full(n, float(batch)), "tokens": toks,
            "attention": toks * start + toks * (toks + 1) / 2.0, "kv_read": start + toks,
            "finished": fin}


@dataclass
class PrefillEstimate:
    """A prefill forecast: ``seconds`` for the batch's prompts, by ``parts`` (s: gemm,
    attention, memops, dequant, lm_head, comm, overhead — before the layer-split pipelining),
    ``passes`` and ``chunk`` tokens per pass, the ``flops`` and weight/KV ``bytes`` moved, the
    share of GEMM time limited by FLOPs (``compute_bound``), the per-device ``peak`` FLOP/s and
    ``notes`` saying how it was priced."""

    seconds: float
    parts: dict[str, float]
    passes: int
    chunk: int
    flops: float
    bytes: float
    compute_bound: float
    peak: float
    engine: str
    overheads_from: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _vendor(device) -> str:
    v = str(getattr(device, "vendor", "") or "").lower()
    return next((k for k in ("nvidia", "amd", "intel") if k in v), v or "unknown")


def estimate_prefill(arch: LLMArch, device, *, engine: str, precision: str, batch: int,
                     input_len: int, n_devices: int = 1, chunk: int | None = None,
                     constants: PrefillConstants,
                     overheads: dict[str, float] | None = None) -> PrefillEstimate:
    """Forecast the prefill of ``batch`` prompts of ``input_len`` tokens served by ``engine``
    at ``precision`` on ``n_devices`` × ``device`` (tensor parallel, or llama.cpp's layer
    split). ``chunk``: tokens per pass (default the engine's, :data:`ENGINE_PREFILL`);
    ``constants``: the fitted constants (the shipped ones:
    ``perfcast.shipped.load_shipped("llm-prefill")``); ``overheads`` (``t_pass_s``,
    ``t_layer_s``) replace the engine's fitted per-pass overheads."""
    from perfcast.llm.arch import KV_BYTES, WEIGHT_BYTES
    from perfcast.llm.physics import COMPUTE_PRECISION, all_reduce_s

    if engine not in ENGINE_PREFILL:
        raise PerfcastError(f"no prefill model for engine {engine!r}")
    eng = ENGINE_PREFILL[engine]
    k = constants
    n = max(1, int(n_devices))
    tp = 1 if eng.layer_split else n
    comp = COMPUTE_PRECISION[precision]
    peak, peak_note = gemm_peak(device, comp, eng.fp16_accumulate)
    bw = float(device.bandwidth_gbs) * 1e9
    if not bw:
        raise PerfcastError(f"{device.key} has no memory bandwidth in its spec (bandwidth_gbs)")
    notes: list[str] = []
    if peak_note:
        notes.append(peak_note)
    u = chunk if chunk is not None else eng.chunk
    ps = passes(batch, input_len, u)
    cnt, toks, att, fin = ps["count"], ps["tokens"], ps["attention"], ps["finished"]
    per_pass_chunk = int(toks.max())

    # ---- per-layer shapes on one device (tensor parallel: heads and MLP split tp ways)
    h, d, L = arch.hidden, arch.head_dim, arch.layers
    q_heads = arch.heads / tp
    kv_heads = kv_heads_per_device(arch, tp) if tp > 1 else arch.kv_heads
    wq = WEIGHT_BYTES[precision]  # bytes per weight as stored
    act = eng.act_bytes
    kvb = KV_BYTES[precision]
    quantized = wq < 2.0 - 1e-9 and comp == "fp16"
    # weight matrices of one layer, per device: (rows N, inner K, count)
    dense_mlp = arch.intermediate if not arch.moe else 0
    mats = [(q_heads * d + 2 * kv_heads * d, h, 1.0), (h, q_heads * d, 1.0)]
    if dense_mlp:
        gated = _gated(arch)
        mats += [((2 if gated else 1) * dense_mlp / tp, h, 1.0), (h, dense_mlp / tp, 1.0)]
    # the GEMMs of every pass (vectorised over passes)
    t_gemm = np.zeros_like(toks)
    t_deq = np.zeros_like(toks)
    flops = np.zeros_like(toks)
    wbytes = np.zeros_like(toks)
    comp_share = []
    eng_over, over_key = _overheads(k, engine, device, overheads)
    b_mem = float(eng_over.get("b", 1.0))

    def add_gemm(m_tokens, N, K, count):
        """GEMMs ``[m_tokens, K] × [K, N]``, ``count`` of them per pass (may vary by pass)."""
        nonlocal t_gemm, t_deq, flops, wbytes
        f = 2.0 * m_tokens * N * K
        big = m_tokens > LLAMA_CPP_MMQ_MAX_TOKENS
        if quantized and eng.dequant == "to-fp16-above-mmq":
            w_b, need = np.where(big, 2.0, wq), big  # dequantised copy read by cuBLAS
        elif quantized and eng.dequant == "to-fp16":
            w_b, need = 2.0, np.ones_like(m_tokens, bool)
        else:
            w_b, need = wq, np.zeros_like(m_tokens, bool)
        byt = w_b * N * K + act * m_tokens * K + 2.0 * m_tokens * N
        t = gemm_s(f, byt, peak, bw, k.gemm, b_mem)
        t_gemm = t_gemm + count * t
        flops = flops + count * f
        wbytes = wbytes + count * wq * N * K
        c_s = f / (peak * k.gemm["eta"])
        m_s = b_mem * byt / (bw * k.gemm["beta"])
        comp_share.append((count * t, c_s >= m_s))
        if need.any():  # a pass over the weights: read the quantized bytes, write FP16
            t_deq = t_deq + count * memop_s((wq + 2.0) * N * K, bw, k.memop) * need

    for N, K, c in mats:
        add_gemm(toks, N, K, c * L)
    if arch.moe:  # routed experts: each gets tokens·k/E of them; the touched ones are read
        e, kk = arch.experts, arch.experts_per_token
        f_e = arch.intermediate / tp
        per_exp = np.maximum(toks * kk / e, 1.0)
        touched = e * (1.0 - (1.0 - kk / e) ** np.maximum(toks, 1.0))
        add_gemm(per_exp, (2 if _gated(arch) else 1) * f_e, h, touched * L)
        add_gemm(per_exp, h, f_e, touched * L)
        add_gemm(toks, e, h, 1.0 * L)  # the router
    # ---- attention (per device: its heads), quadratic in the prompt
    f_att = 4.0 * q_heads * d * att
    if arch.windowed_layers and arch.sliding_window:  # windowed layers attend ≤ window tokens
        share = (L - arch.windowed_layers) / L
        capped = 4.0 * q_heads * d * toks * np.minimum(att / np.maximum(toks, 1.0),
                                                       arch.sliding_window)
        f_att = share * f_att + (1 - share) * np.minimum(capped, f_att)
    kv_bytes = 2.0 * ps["kv_read"] * kv_heads * d * kvb
    if eng.attention == "flash":  # one fused operator: Q read, O written, K and V read once
        t_att = gemm_s(f_att, 2.0 * toks * q_heads * d * 2 + kv_bytes, peak, bw, k.gemm) * L
    else:  # K·Qᵀ and softmax·V as batched GEMMs, the score matrix through memory
        t_att = (2 * gemm_s(f_att / 2, kv_bytes / 2 + 2.0 * toks * q_heads * d * 2, peak, bw,
                            k.gemm)
                 + memop_s(SCORE_BYTES * q_heads * att, bw, k.memop)) * L
    flops = flops + f_att * L
    # ---- memory-bound operators of a layer: 2 norms, rotary, activation, 2 residual adds
    ab = float(act)
    f_mlp = (arch.intermediate if not arch.moe else arch.intermediate * arch.experts_per_token)
    f_mlp = f_mlp / tp
    mem_ops = [2 * ab * toks * h, 2 * ab * toks * h,  # norms: read + write
               2 * ab * toks * (q_heads + kv_heads) * d,  # rotary on q and k
               3 * ab * toks * f_mlp,  # gated activation: read 2, write 1
               3 * ab * toks * h, 3 * ab * toks * h,  # residual adds
               2.0 * toks * kv_heads * d * kvb]  # K and V written to the cache
    if act == 4:  # f32 activations: each GEMM's input to f16 and its output back
        for N, K, c in mats:
            mem_ops.append(c * toks * K * (4 + 2))
            mem_ops.append(c * toks * N * (2 + 4))
    t_mem = sum(memop_s(b, bw, k.memop) for b in mem_ops) * L
    # ---- LM head: the last token of each prompt that finishes in the pass
    t_head = gemm_s(2.0 * fin * arch.vocab * h / tp, 2.0 * arch.vocab * h / tp + 2 * fin * h,
                    peak, bw, k.gemm, b_mem) * (fin > 0)
    flops = flops + 2.0 * fin * arch.vocab * h
    # ---- tensor parallelism: two all-reduces per layer of the pass's activations
    t_comm = (2 * L * all_reduce_s(toks * h * 2.0, tp)) if tp > 1 else np.zeros_like(toks)
    # ---- engine overheads per pass
    t_over = np.full_like(toks, float(eng_over.get("t_pass_s", 0.0))
                          + float(eng_over.get("t_layer_s", 0.0)) * L)
    per_pass = t_gemm + t_deq + t_att + t_mem + t_head + t_comm + t_over
    parts = {"gemm": float((cnt * t_gemm).sum()), "attention": float((cnt * t_att).sum()),
             "memops": float((cnt * t_mem).sum()), "dequant": float((cnt * t_deq).sum()),
             "lm_head": float((cnt * t_head).sum()), "comm": float((cnt * t_comm).sum()),
             "overhead": float((cnt * t_over).sum())}
    total = float((cnt * per_pass).sum())
    npass = int(cnt.sum())
    if eng.layer_split and n > 1:
        # the layers are split: a pass visits the devices in turn; consecutive ubatches
        # pipeline through them (llama.cpp's pipeline parallelism)
        e_pp = float(eng_over.get("pipeline", 0.0))
        speedup = 1.0 + e_pp * (min(n, npass) - 1)
        total /= speedup
        notes.append(f"llama.cpp splits the layers over {n} devices and pipelines its "
                     f"{npass} prompt pass(es) through them: {speedup:.2f}× one device's "
                     f"prompt speed (pipeline efficiency {e_pp:.2f} per extra device, fitted "
                     f"on LLM-Inference-Bench)")
    cb = sum(float((cnt * t * cbm).sum()) for t, cbm in comp_share)
    gs = sum(float((cnt * t).sum()) for t, _ in comp_share)
    if quantized and eng.dequant == "to-fp16-above-mmq":
        big = per_pass_chunk > LLAMA_CPP_MMQ_MAX_TOKENS
        notes.append(f"{precision}: "
                     + ("each ubatch of > 32 tokens dequantises the weights to FP16 for cuBLAS "
                        f"({parts['dequant'] * 1e3:,.1f} ms in all)" if big else
                        "ubatches of ≤ 32 tokens run llama.cpp's quantized kernels (no "
                        "dequantisation pass)"))
    elif quantized and eng.dequant == "fused":
        notes.append(f"{precision}: weight-only quantized GEMMs dequantise in the kernel at "
                     f"the FP16 tensor rate, reading the smaller weights")
    elif quantized:
        notes.append(f"{precision}: each matrix dequantised to FP16 every forward "
                     f"({parts['dequant'] * 1e3:,.1f} ms in all)")
    return PrefillEstimate(
        seconds=total, parts=parts, passes=npass, chunk=per_pass_chunk,
        flops=float((cnt * flops).sum()) * tp, bytes=float((cnt * wbytes).sum()) * tp,
        compute_bound=cb / gs if gs else 0.0, peak=peak, engine=engine,
        overheads_from=over_key, notes=notes)


def _gated(arch: LLMArch) -> bool:
    """Whether the MLP is gated (SwiGLU / GeGLU: up and gate projections): the families whose
    configs say so by their type; GPT-style (gpt2, gpt_neox, opt, bloom, falcon, phi,
    starcoder2, gpt_bigcode) are not."""
    return arch.model_type not in ("gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "phi",
                                   "starcoder2", "gpt_bigcode", "mpt")


def _overheads(k: PrefillConstants, engine: str, device, given: dict[str, float] | None
               ) -> tuple[dict[str, float], str]:
    """The engine's per-pass overheads: ``given``, else the constants' ``engine|vendor`` /
    ``engine`` entry (llama.cpp's fitted on its prompt-only rows; the others' the per-pass
    ``t0`` and per-layer ``t1`` of the ``llm-latency`` engine model, copied in when the
    constants are trained), else none."""
    if given is not None:
        return dict(given), "given"
    own, key = k.engine(engine, _vendor(device))
    if own:
        return own, f"prefill constants {key}" + (
            " (the llm-latency engine model's per-pass overheads)" if engine != "llama.cpp"
            else " (fitted on LLM-Inference-Bench's prompt-only rows)")
    return {}, "none (no overheads on file for this engine)"


__all__ = ["ENGINE_PREFILL", "EnginePrefill", "FORMAT", "LLAMA_CPP_MMQ_MAX_TOKENS",
           "LLAMA_CPP_NBATCH", "LLAMA_CPP_UBATCH", "PrefillConstants", "PrefillEstimate",
           "SCORE_BYTES", "estimate_prefill", "gemm_peak", "gemm_s", "is_geforce",
           "memop_s", "passes"]
