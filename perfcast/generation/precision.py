"""The precision a generation request is priced at: its weights' precision with its KV cache's
dtype (:func:`perfcast.llm.arch.priced_precision`), FP8 checked against the GPU, and the
precision the learned decode model answers for (the support rule: the measurements have no FP8
rows and no FP8 KV cache, so those are the 16-bit answer scaled by the arithmetic).
"""

from __future__ import annotations

import dataclasses

from perfcast.errors import PerfcastError
from perfcast.workload import Workload

#: Engines that refuse bfloat16 below NVIDIA compute capability 8.0 (vLLM: "Bfloat16 is only
#: supported on GPUs with compute capability of at least 8.0"; TensorRT-LLM's bf16 kernels
#: need Ampere).
BF16_CC8_ENGINES = ("vllm", "trt-llm")



def serving_precision(req: Workload, device, notes: list[str]) -> Workload:
    """``req`` with its precision replaced by the priced one (weights + KV cache dtype), for
    the arithmetic only (the answer keeps the request's); FP8 weights or an FP8 KV cache on a
    GPU without FP8 units is a one-line error; ``notes`` get what FP8 means here."""
    from perfcast.devices.fp8 import require_fp8
    from perfcast.llm.arch import priced_precision

    kv = req.kv_cache_dtype
    if "bf16" in (req.precision, kv) and req.engine in BF16_CC8_ENGINES:
        from perfcast.devices.derive import compute_capability, nvidia_before_ampere

        if nvidia_before_ampere(device):
            raise PerfcastError(f"{'--precision' if req.precision == 'bf16' else '--kv-cache-dtype'}"
                                f" bf16: {req.engine} runs bfloat16 on NVIDIA compute capability "
                                f"≥ 8.0 (Ampere and newer); {device.key} is "
                                f"{compute_capability(device)[0]} — use fp16")
    if req.precision == "fp8":
        peak, derived = require_fp8(device, "--precision fp8")
        notes.append(f"precision: fp8 = FP8 weights and activations (W8A8-FP8, vLLM "
                     f"--quantization fp8 / TensorRT-LLM FP8): 1 byte a weight (scales not "
                     f"counted), the GEMMs at the FP8 tensor peak ({peak:,.1f} TFLOPS on "
                     f"{device.key}), attention and the KV cache in 16 bits"
                     + ("" if kv == "fp8" else " (--kv-cache-dtype fp8 halves the cache)"))
        notes.extend(derived)
    if kv == "fp8":
        require_fp8(device, "--kv-cache-dtype fp8")
        notes.append("kv_cache_dtype: fp8 — vLLM's / TensorRT-LLM's FP8 KV cache, one byte an "
                     "element (half the 16-bit cache), dequantised in the attention kernel (its "
                     "cost not modelled)")
    key = priced_precision(req.precision, kv)
    if key == req.precision:
        return req
    return dataclasses.replace(req, precision=key)


def learned_precision(priced: str) -> str:
    """The precision the learned decode model answers for a priced one: the same, except FP8
    weights (fp16: their activations' type) and a KV cache dtype (the weights' precision) —
    the measurements hold neither, so the answer is that one's × the ratio of the arithmetic
    bounds (:func:`perfcast.generation.predict.predict_generation` says so in ``notes``)."""
    from perfcast.llm.arch import base_precision

    base = base_precision(priced)
    return "fp16" if base == "fp8" else base


__all__ = ["learned_precision", "serving_precision"]
