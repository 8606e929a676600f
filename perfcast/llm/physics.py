"""Lower bounds of LLM generation on a device, from the architecture's arithmetic: what no
serving engine can beat. A learned model (``perfcast.predictors.llm``) multiplies them by what
engines achieve.

A request batch of ``B`` sequences, ``I`` prompt tokens and ``O`` generated tokens each, on
``n`` devices in tensor parallelism (each holds ``1/n`` of the weights and the KV cache):

* **prefill** (one pass over ``B·I`` tokens): ``max(FLOPs / (n · peak), weights / (n · BW))``,
  FLOPs = ``B·I`` × 2 × active parameters + causal attention ``B · 4·L·H·d · I²/2``;
* **decode step** at context ``c`` (one token for each of ``B`` sequences):
  ``max(FLOPs / (n · peak), (weights touched + B · KV(c)) / (n · BW))`` — every step streams
  the weights its tokens use (for an MoE the experts ``B`` tokens touch) and every sequence's
  KV cache; summed over ``c = I … I+O−1`` (a sum of ``O`` terms, vectorised);
* **KV capacity**: when ``B`` sequences' final KV cache does not fit beside the weights in the
  devices' memory, the engine runs them in waves of the largest batch that fits (vLLM
  pre-empts; a static engine fails) — the bound is the sum over waves.

``peak`` is the device's dense tensor peak of the precision (fp16 for int8/int4 weight-only: the
matmuls run in 16-bit), ``BW`` its memory bandwidth. Communication (two all-reduces per layer
under tensor parallelism) is not in the bound: it is what the learned correction sees through
``tensor_parallel``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from perfcast.llm.arch import VLLM_BLOCK_TOKENS, LLMArch

#: Matmul precision of a serving precision (weight-only int8/int4 dequantize to 16-bit).
COMPUTE_PRECISION = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "amp": "fp16",
                     "int8": "fp16", "int4": "fp16"}
#: Fraction of device memory an engine may use for weights + KV cache (vLLM's default
#: ``gpu_memory_utilization``; the rest: CUDA context, activations, fragmentation).
MEMORY_UTILIZATION = 0.9


@dataclass(frozen=True)
class GenerationBound:
    """Bounds in seconds for the whole batch; ``waves`` > 1 when the KV cache forced the
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
    free = MEMORY_UTILIZATION * n_devices * float(device.memory_gb) * 1e9 \
        - arch.weight_bytes(precision)
    per_seq = arch.kv_cache_bytes(1, context, precision, block=block)
    return int(free // per_seq) if free > 0 else 0


def generation_bound(arch: LLMArch, device, *, batch: int, input_len: int, output_len: int,
                     n_devices: int = 1, precision: str = "fp16") -> GenerationBound:
    """The bounds of the module docstring for one request batch."""
    peak, bw = device_rates(device, precision)
    peak, bw = peak * n_devices, bw * n_devices
    wbytes = arch.params and arch.weight_bytes(precision) / arch.params  # bytes per parameter
    fit = max_concurrent(arch, device, n_devices, input_len + output_len, precision)
    conc = max(1, min(batch, fit)) if fit > 0 else batch  # weights do not fit: no capacity bound
    waves, last = divmod(batch, conc)
    sizes = [conc] * waves + ([last] if last else [])

    def one_wave(b: int) -> tuple[float, float, float, float]:
        # prefill
        tokens = b * input_len
        flops = tokens * arch.flops_per_token() \
            + b * arch.attention_flops(input_len, input_len / 2.0)
        prefill = max(flops / peak, arch.active_params(tokens) * wbytes / bw)
        # decode: contexts I … I+O−1
        ctx = input_len + np.arange(output_len, dtype=np.float64)
        kv_per_token = arch.kv_bytes_per_token(precision)
        if arch.windowed_layers and arch.sliding_window:
            full = (arch.layers - arch.windowed_layers) / arch.layers
            kv_ctx = full * ctx + (1 - full) * np.minimum(ctx, arch.sliding_window)
        else:
            kv_ctx = ctx
        step_flops = b * (arch.flops_per_token() + arch.attention_flops(1, 1.0) * ctx)
        step_bytes = arch.active_params(b) * wbytes + b * kv_per_token * kv_ctx
        t_c, t_m = step_flops / peak, step_bytes / bw
        steps = np.maximum(t_c, t_m)
        return prefill, float(steps.sum()), float(steps[0]), float((t_c >= t_m).mean())

    parts = [one_wave(b) for b in sizes]
    return GenerationBound(prefill_s=sum(p[0] for p in parts),
                           decode_s=sum(p[1] for p in parts), first_step_s=parts[0][2],
                           concurrent=conc, waves=len(sizes),
                           compute_bound_fraction=float(np.mean([p[3] for p in parts])))


__all__ = ["COMPUTE_PRECISION", "GenerationBound", "MEMORY_UTILIZATION", "device_rates",
           "generation_bound", "max_concurrent"]
