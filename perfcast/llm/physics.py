"""The arithmetic of LLM generation on a device: the forward passes a request makes, their FLOPs
and bytes, and the lower bound no serving engine can beat. A learned model
(:mod:`perfcast.llm.model`) turns the same terms into a prediction.

A request batch of ``B`` sequences, ``I`` prompt tokens and ``O`` generated tokens each, is a
list of **forward passes** (:class:`Work`), each with its FLOPs ``F`` and the bytes ``M`` it
must move from device memory:

* **prefill**: one pass over the ``B·I`` prompt tokens (FLOPs = ``B·I`` × 2 × active
  parameters + causal attention ``B · 4·L·H·d · I²/2``; bytes = the weights those tokens
  touch).
  llama.cpp feeds the prompt of its ``B`` sequences in passes of ``u = min(n_batch,
  n_ubatch)`` tokens (``prompt_chunk``; LLM-Inference-Bench's llama.cpp "Batch Size" is
  ``n_batch`` with one sequence): ``⌈B·I / u⌉`` passes, each streaming the weights again;
* **decode**: ``O − 1`` passes (the prefill yields the first token) of one token per sequence
  at context ``c = I+1 … I+O−1``; each streams
  the weights its ``B`` tokens use (for an MoE the experts they touch) and every sequence's KV
  cache (``B · KV(c)``; windowed layers keep at most ``sliding_window`` tokens). The steps
  are represented by :data:`DECODE_SAMPLES` contexts, each counting for ``(O − 1) / samples``
  steps
  (F and M are linear in ``c``: the sum is exact up to the kink of the max below);
* **KV capacity**: when the batch's final KV cache does not fit beside the weights at
  :data:`MEMORY_UTILIZATION` of the devices' memory, the engine runs it in waves of the largest
  batch that fits (vLLM pre-empts; a static engine fails) — the passes of every wave are listed.

**Devices.** Under tensor parallelism (vLLM, TensorRT-LLM, DeepSpeed-MII, HF) ``n`` devices
each hold ``1/n`` of the weights and KV cache: rates add up (``n · peak``, ``n · BW``) and every
layer adds two all-reduces of the pass's activations (``tokens × hidden × 2`` bytes).
llama.cpp splits the *layers* across its devices (``--split-mode layer``, its default): a token
visits them one after another, so the rates are one device's whatever ``n`` (only memory
capacity adds up) — LLM-Inference-Bench's llama.cpp rows do not get faster with more GPUs.

**Lower bound** (:func:`generation_bound`): ``Σ passes max(F / (n·peak), M / (n·BW))``, with
``peak`` the device's dense tensor peak of the compute precision (fp16 for int8/int4
weight-only: the matmuls run in 16-bit) and ``BW`` its memory bandwidth. Communication and
per-pass overheads are not in the bound (they are what the learned model adds, see
:func:`all_reduce_s`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from perfcast.llm.arch import VLLM_BLOCK_TOKENS, WEIGHT_BYTES, LLMArch, base_precision

#: Matmul precision of a serving precision (weight-only int8/int4 dequantize to 16-bit).
COMPUTE_PRECISION = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "amp": "fp16",
                     "int8": "fp16", "int4": "fp16",
                     # llama.cpp's GGUF formats: quantized ones dequantise to FP16 for the GEMMs
                     "F32": "fp32", "F16": "fp16", "BF16": "bf16", "Q8_0": "fp16",
                     "Q6_K": "fp16", "Q5_K_M": "fp16", "Q4_K_M": "fp16", "Q4_0": "fp16",
                     # FP8 weights and activations: the GEMMs at the FP8 tensor peak
                     "fp8": "fp8"}
COMPUTE_PRECISION.update({k: COMPUTE_PRECISION[base_precision(k)] for k in WEIGHT_BYTES
                          if base_precision(k) != k})  # a KV dtype changes no GEMM
#: Fraction of device memory an engine may use for weights + KV cache (vLLM's default
#: ``gpu_memory_utilization``; the rest: CUDA context, activations, fragmentation).
MEMORY_UTILIZATION = 0.9
#: Decode contexts sampled to represent the ``O`` decode steps of a request.
DECODE_SAMPLES = 16
#: Engines that shard every layer across their devices (tensor parallelism).
TENSOR_PARALLEL_ENGINES = ("vllm", "trt-llm", "deepspeed-mii", "hf")
#: Engines that split the layers across their devices (a token visits them in turn).
LAYER_SPLIT_ENGINES = ("llama.cpp",)
#: In-node all-reduce on NVLink (NCCL), ``time = α + bytes / β(n)``: least-squares fit (log
#: space) of vidur's A100 DGX profile (``../shared/data/vidur/network/a100_dgx-all_reduce.csv``,
#: rank 0, devices_per_node = num_workers; 994 sizes each, 2 KiB – 512 MiB; log-RMSE 0.13 –
#: 0.19). α in s, β in bytes/s by worker count; more than 8 workers use the 8-worker β.
#: ``tests/test_llm.py`` refits it from the data.
ALL_REDUCE_ALPHA_S = 4.2e-5
ALL_REDUCE_BETA = {2: 170.3e9, 4: 106.4e9, 8: 86.6e9}


def all_reduce_s(message_bytes, n: int):
    """Seconds of one all-reduce of ``message_bytes`` over ``n`` devices (0 for one device):
    vidur's A100 NVLink profile (:data:`ALL_REDUCE_BETA`). A cost *shape* the learned model
    scales, not a bound: other interconnects are faster or slower."""
    if n <= 1:
        return np.zeros_like(np.asarray(message_bytes, dtype=float))
    keys = sorted(ALL_REDUCE_BETA)
    k = min(keys, key=lambda m: (abs(math.log2(m) - math.log2(n)), m))
    return ALL_REDUCE_ALPHA_S + np.asarray(message_bytes, dtype=float) / ALL_REDUCE_BETA[k]


@dataclass(frozen=True)
class Work:
    """The forward passes of one request batch (see the module docstring), vectorised: pass
    ``j`` stands for ``count[j]`` identical passes of ``flops[j]`` FLOPs moving ``bytes[j]``
    bytes (whole model, all devices) with all-reduce messages of ``message_bytes[j]``;
    ``decode[j]`` tells decode passes from prefill ones."""

    count: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    message_bytes: np.ndarray
    decode: np.ndarray
    layers: int
    rate_devices: int  # devices whose rates add up (1 under a layer split)
    tp: int  # devices that all-reduce every layer (1: none)
    concurrent: int  # sequences run at once
    waves: int

    @property
    def passes(self) -> float:
        return float(self.count.sum())

    def comm_s(self) -> float:
        """All-reduce seconds of the whole request on vidur's NVLink profile (2 per layer)."""
        if self.tp <= 1:
            return 0.0
        t = all_reduce_s(self.message_bytes, self.tp)
        return float((self.count * 2 * self.layers * t).sum())

    def times(self, peak: float, bw: float) -> tuple[np.ndarray, np.ndarray]:
        """Per represented pass: (compute seconds at ``peak``, memory seconds at ``bw``) over
        the devices whose rates add up."""
        n = self.rate_devices
        return self.flops / (n * peak), self.bytes / (n * bw)


@dataclass(frozen=True)
class GenerationBound:
    """Lower bounds in seconds for the whole batch; ``waves`` > 1 when the KV cache forced the
    batch to run in waves of ``concurrent`` sequences."""

    prefill_s: float
    decode_s: float
    first_step_s: float  # the first decode step (per-token time at the start)
    concurrent: int
    waves: int
    compute_bound_fraction: float  # of the decode steps, the share limited by FLOPs

    @property
    def total_s(self) -> float:
        return self.prefill_s + self.decode_s

    def to_dict(self) -> dict:
        return {**asdict(self), "total_s": self.total_s}


def device_rates(device, precision: str) -> tuple[float, float]:
    """(peak FLOP/s, bandwidth bytes/s) of one device for a serving precision."""
    comp = COMPUTE_PRECISION[precision]
    peak = device.peak_tflops(comp) or device.peak_tflops("fp16") or device.peak_fp32_tflops
    return float(peak) * 1e12, float(device.bandwidth_gbs) * 1e9


def max_concurrent(arch: LLMArch, device, n_devices: int, context: int, precision: str,
                   block: int | None = VLLM_BLOCK_TOKENS) -> int:
    """Largest number of sequences of ``context`` tokens whose KV cache fits beside the weights
    in ``n_devices`` devices at :data:`MEMORY_UTILIZATION` (0: the weights alone do not fit)."""
    free = MEMORY_UTILIZATION * n_devices * float(device.memory_mb) * 2 ** 20 \
        - arch.weight_bytes(precision)
    per_seq = arch.kv_cache_bytes(1, context, precision, block=block)
    return int(free // per_seq) if free > 0 else 0


def _kv_context(arch: LLMArch, ctx: np.ndarray) -> np.ndarray:
    """Tokens of KV cache read per layer-average at context ``ctx`` (windowed layers cap it)."""
    if arch.windowed_layers and arch.sliding_window:
        full = (arch.layers - arch.windowed_layers) / arch.layers
        return full * ctx + (1 - full) * np.minimum(ctx, arch.sliding_window)
    return ctx


def request_work(arch: LLMArch, device, *, batch: int, input_len: int, output_len: int,
                 n_devices: int = 1, precision: str = "fp16", engine: str = "vllm",
                 prompt_chunk: int | None = None) -> Work:
    """The forward passes of a request batch (module docstring). ``batch`` is the number of
    sequences; ``prompt_chunk`` the tokens per prefill pass of all of them together (llama.cpp's
    ``min(n_batch, n_ubatch)``; ``None``: the whole prompts in one pass)."""
    layer_split = engine in LAYER_SPLIT_ENGINES
    wbytes = arch.params and arch.weight_bytes(precision) / arch.params  # bytes per parameter
    kv_tok = arch.kv_bytes_per_token(precision)
    fit = max_concurrent(arch, device, n_devices, input_len + output_len, precision)
    conc = max(1, min(batch, fit)) if fit > 0 else batch  # weights do not fit: no capacity bound
    full, last = divmod(batch, conc)
    sizes = [(conc, full)] + ([(last, 1)] if last else [])
    steps = output_len - 1  # the prefill pass yields the first token
    k = max(1, min(DECODE_SAMPLES, steps))
    ctx = input_len + 1 + (np.arange(k, dtype=np.float64) + 0.5) * steps / k
    kv_ctx = _kv_context(arch, ctx)
    parts = []
    for b, times in sizes:
        # prefill: the b·I prompt tokens in ⌈b·I / chunk⌉ passes of ≤ chunk tokens, each
        # streaming the weights; FLOPs split evenly
        tokens = b * input_len
        chunk = min(tokens, prompt_chunk) if prompt_chunk else tokens
        npass = math.ceil(tokens / chunk)
        f_pre = tokens * arch.flops_per_token() \
            + b * arch.attention_flops(input_len, input_len / 2.0)
        m_pre = arch.active_params(chunk) * wbytes + b * kv_tok * input_len / 2.0 \
            * (npass > 1)
        parts.append((np.array([times * npass]), np.array([f_pre / npass]), np.array([m_pre]),
                      np.array([chunk * arch.hidden * 2.0]), np.array([False])))
        if steps <= 0:
            continue
        # decode: O − 1 steps, represented by k contexts
        f_dec = b * (arch.flops_per_token() + arch.attention_flops(1, 1.0) * ctx)
        m_dec = arch.active_params(b) * wbytes + b * kv_tok * kv_ctx
        parts.append((np.full(k, times * steps / k), f_dec, m_dec,
                      np.full(k, b * arch.hidden * 2.0), np.ones(k, bool)))
    cat = [np.concatenate([p[i] for p in parts]) for i in range(5)]
    return Work(count=cat[0], flops=cat[1], bytes=cat[2], message_bytes=cat[3], decode=cat[4],
                layers=arch.layers, rate_devices=1 if layer_split else n_devices,
                tp=1 if layer_split else n_devices, concurrent=conc,
                waves=full + (1 if last else 0))


def bound_of(work: Work, device, precision: str) -> GenerationBound:
    """:class:`GenerationBound` of ``work`` on ``device``."""
    peak, bw = device_rates(device, precision)
    t_c, t_m = work.times(peak, bw)
    step = np.maximum(t_c, t_m)
    dec = work.decode
    first = int(np.argmax(dec)) if dec.any() else 0
    cb = float((work.count[dec] * (t_c[dec] >= t_m[dec])).sum() / max(work.count[dec].sum(), 1))
    return GenerationBound(prefill_s=float((work.count * step)[~dec].sum()),
                           decode_s=float((work.count * step)[dec].sum()),
                           first_step_s=float(step[first]), concurrent=work.concurrent,
                           waves=work.waves, compute_bound_fraction=cb)


def generation_bound(arch: LLMArch, device, *, batch: int, input_len: int, output_len: int,
                     n_devices: int = 1, precision: str = "fp16", engine: str = "vllm",
                     prompt_chunk: int | None = None) -> GenerationBound:
    """The lower bound of the module docstring for one request batch."""
    w = request_work(arch, device, batch=batch, input_len=input_len, output_len=output_len,
                     n_devices=n_devices, precision=precision, engine=engine,
                     prompt_chunk=prompt_chunk)
    return bound_of(w, device, precision)


__all__ = ["ALL_REDUCE_ALPHA_S", "ALL_REDUCE_BETA", "COMPUTE_PRECISION", "DECODE_SAMPLES",
           "GenerationBound", "LAYER_SPLIT_ENGINES", "MEMORY_UTILIZATION",
           "TENSOR_PARALLEL_ENGINES", "Work", "all_reduce_s", "bound_of", "device_rates",
           "generation_bound", "max_concurrent", "request_work"]
