"""LLM generation as a prediction: ``perfcast predict hf:ID --mode generate`` — a batch of
``B`` requests of ``I`` prompt tokens generating ``O`` tokens each, served by an engine on
``tensor_parallel`` devices.

* **time** — the shipped ``llm-latency`` model (:mod:`perfcast.training.llm`): the request's
  arithmetic bound (:mod:`perfcast.llm.physics`) × a factor learned from LLM-Inference-Bench;
  ``ttft_ms`` and ``tpot_ms`` apportion it by the bound's prefill / decode parts (the data
  measures whole requests only, said so in ``notes``);
* **memory** per device — weights ÷ TP + KV cache ÷ TP (vLLM: 16-token blocks) + activations of
  the prefill + the measured runtime overhead; vLLM pre-allocates ``gpu_memory_utilization``
  (0.9) of the card whatever the model needs: ``memory_mb`` is then that reservation and
  ``memory_needed_mb`` the need;
* **energy** — the shipped ``llm-power`` model (ML.ENERGY: average power per GPU while serving,
  ≤ TDP) × devices × time; per output token and per request.

``throughput_tokens_per_s`` counts as LLM-Inference-Bench does: prompt and generated tokens of
the whole batch per second of its latency (``B·(I+O) / latency``); ``output_tokens_per_s`` only
the generated ones.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError, unknown_choice
from perfcast.workload import MAX_SIZE

ENGINES = ("vllm", "trt-llm", "llama.cpp", "deepspeed-mii", "hf")
PRECISIONS = ("fp16", "bf16", "fp32", "int8", "int4")
DEFAULTS = {"framework": "vllm", "precision": "fp16", "batch_size": 1}


@dataclass(frozen=True)
class GenerationRequest:
    """One generation request batch, validated in :meth:`validate` (exit 2 on bad input)."""

    model: str  # hf:ID or hf:path/config.json
    input_len: int
    output_len: int
    batch_size: int = 1
    framework: str = "vllm"
    tensor_parallel: int = 1
    precision: str = "fp16"

    def validate(self) -> None:
        if not self.model.startswith("hf:"):
            raise PerfcastError(f"--mode generate serves Hugging Face decoder LLMs (hf:ID or "
                                f"hf:path/config.json), not {self.model!r}")
        for name, v in (("--input-len", self.input_len), ("--output-len", self.output_len),
                        ("--batch-size", self.batch_size),
                        ("--tensor-parallel", self.tensor_parallel)):
            if v is None and name in ("--input-len", "--output-len"):
                raise PerfcastError(f"--mode generate needs {name} (tokens)")
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise PerfcastError(f"{name} must be a positive integer, got {v!r}")
            if v > MAX_SIZE:
                raise PerfcastError(f"{name} must be ≤ {MAX_SIZE:,}, got {v:,}")
        if self.tensor_parallel > 64:
            raise PerfcastError(f"--tensor-parallel must be ≤ 64, got {self.tensor_parallel}")
        if self.framework not in ENGINES:
            raise unknown_choice("framework", self.framework, ENGINES)
        if self.precision not in PRECISIONS:
            raise unknown_choice("generation precision", self.precision, PRECISIONS)


@dataclass
class GenerationPrediction:
    """A generation forecast. Times in ms for the whole batch (``time_ms``), to the first
    token (``ttft_ms``) and per output token (``tpot_ms``); memory in MiB per device; energy in
    J for the batch (all devices) and per output token; power in W per device."""

    model: str
    device: str
    mode: str
    framework: str
    precision: str
    batch_size: int
    input_len: int
    output_len: int
    tensor_parallel: int
    time_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    throughput_tokens_per_s: float | None = None
    output_tokens_per_s: float | None = None
    memory_mb: float | None = None
    memory_needed_mb: float | None = None
    memory_breakdown_mb: dict[str, float] = field(default_factory=dict)
    capacity_mb: float | None = None
    fits: bool | None = None
    energy_j: float | None = None
    energy_per_token_j: float | None = None
    power_w: float | None = None
    bound_ms: float | None = None
    predictor: dict[str, str] = field(default_factory=dict)
    trained_on: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def memory_per_device(arch, req: GenerationRequest) -> dict[str, float]:
    """MiB per device: weights, KV cache (vLLM: whole 16-token blocks), prefill activations
    (the widest tensors of a layer over the batch's prompt tokens + the last position's
    logits in fp32), runtime (the measured CUDA context and library overhead)."""
    from perfcast.llm.arch import KV_BYTES, VLLM_BLOCK_TOKENS
    from perfcast.memory.overhead import runtime_overhead_mb

    tp, mib = req.tensor_parallel, 2.0 ** 20
    block = VLLM_BLOCK_TOKENS if req.framework == "vllm" else None
    seqs = 1 if req.framework == "llama.cpp" else req.batch_size
    kv = arch.kv_cache_bytes(seqs, req.input_len + req.output_len, req.precision, block=block)
    act_bytes = KV_BYTES[req.precision]
    tokens = seqs * req.input_len
    width = max(2 * arch.intermediate, 4 * arch.hidden)
    act = tokens * width * act_bytes / tp + seqs * arch.vocab * 4
    return {"weights": arch.weight_bytes(req.precision) / tp / mib, "kv_cache": kv / tp / mib,
            "activations": act / mib, "runtime": float(runtime_overhead_mb())}


def predict_generation(req: GenerationRequest, device) -> GenerationPrediction:
    """Forecast ``req`` on ``device`` (a :class:`~perfcast.devices.Device`)."""
    import pandas as pd

    from perfcast.llm.arch import check_generation, llm_arch
    from perfcast.llm.physics import MEMORY_UTILIZATION, generation_bound
    from perfcast.predictors.llm import features
    from perfcast.training.llm import load_llm_model

    req.validate()
    if not device.is_gpu:
        raise PerfcastError(f"--mode generate predicts GPU serving; {device.key} is a CPU")
    arch = llm_arch(req.model)
    check_generation(arch, req.input_len, req.output_len, req.tensor_parallel, req.precision)
    out = GenerationPrediction(model=req.model, device=device.key, mode="generate",
                               framework=req.framework, precision=req.precision,
                               batch_size=req.batch_size, input_len=req.input_len,
                               output_len=req.output_len, tensor_parallel=req.tensor_parallel)
    seqs = 1 if req.framework == "llama.cpp" else req.batch_size
    if req.framework == "llama.cpp":
        out.notes.append("llama.cpp serves one sequence: --batch-size is its prompt chunk "
                         "(n_batch), as in LLM-Inference-Bench")
    # memory
    parts = memory_per_device(arch, req)
    need = sum(parts.values())
    cap = float(device.memory_gb) * 1e9 / 2 ** 20
    out.memory_breakdown_mb = {k: round(v, 1) for k, v in parts.items()}
    out.memory_needed_mb, out.capacity_mb = need, cap
    out.fits = need <= cap
    out.memory_mb = need
    if req.framework == "vllm":
        out.memory_mb = max(need, MEMORY_UTILIZATION * cap)
        out.notes.append(f"memory_mb: vLLM pre-allocates gpu_memory_utilization "
                         f"{MEMORY_UTILIZATION} of each GPU for weights + KV cache "
                         f"({out.memory_mb:,.0f} MiB); memory_needed_mb is what this batch uses")
    out.predictor["memory_mb"] = "arithmetic (weights + KV cache + activations + runtime)"
    # time
    row = pd.DataFrame([{"model": arch.model_id, "device": device.key,
                         "n_devices": req.tensor_parallel, "framework": req.framework,
                         "precision": req.precision, "batch_size": req.batch_size,
                         "concurrent": seqs, "input_len": req.input_len,
                         "output_len": req.output_len}])
    row["model"] = req.model[3:]  # llm_arch(f"hf:{model}") resolves paths and ids alike
    X = features(row, "latency_s")
    lat = load_llm_model("latency_s")
    t = float(lat.predict(X)[0])
    g = generation_bound(arch, device, batch=seqs, input_len=req.input_len,
                         output_len=req.output_len, n_devices=req.tensor_parallel,
                         precision=req.precision)
    factor = t / g.total_s
    out.time_ms, out.bound_ms = t * 1e3, g.total_s * 1e3
    out.ttft_ms = factor * g.prefill_s * 1e3
    out.tpot_ms = factor * g.decode_s / req.output_len * 1e3
    out.throughput_tokens_per_s = seqs * (req.input_len + req.output_len) / t
    out.output_tokens_per_s = seqs * req.output_len / t
    out.predictor["time_ms"] = "llm-xgboost (bound × learned factor)"
    out.trained_on["time_ms"] = lat.trained_on_
    out.notes.append(f"time_ms: {factor:.2f}× the arithmetic bound ({out.bound_ms:,.0f} ms: "
                     f"weights + KV cache streamed per decode step, FLOPs at peak); ttft_ms / "
                     f"tpot_ms split it as the bound's prefill and decode parts (the data "
                     f"measures whole requests)")
    if g.waves > 1:
        out.notes.append(f"the KV cache of {seqs} sequences does not fit beside the weights: "
                         f"they run in {g.waves} waves of ≤ {g.concurrent}")
    seen = set(lat.trained_on_.get("devices", []))
    if device.key not in seen:
        out.notes.append(f"time_ms: {device.key} is not among the measured accelerators "
                         f"({', '.join(sorted(seen))}): its specs enter through the bound "
                         f"(leave-one-hardware-out 15–17 % on NVIDIA, ≈ 40 % on AMD / Intel, "
                         f"reports/llm/)")
    if req.precision in ("int8", "int4"):
        out.notes.append(f"{req.precision}: weight-only quantization — memory exact; time "
                         f"extrapolated by the bound (no quantized rows in the data)")
    # energy: power (≤ TDP) × devices × time
    if device.tdp_w:
        Xp = features(row.assign(batch_size=seqs), "tpot_s")
        pw = load_llm_model("power_per_device_w")
        p = float(pw.predict(Xp)[0])
        out.power_w = p
        out.energy_j = p * req.tensor_parallel * t
        out.energy_per_token_j = out.energy_j / (seqs * req.output_len)
        out.predictor["energy_j"] = "llm-xgboost power (fraction of TDP) × devices × time"
        out.trained_on["energy_j"] = pw.trained_on_
    else:
        out.notes.append(f"energy_j: {device.key} has no TDP in its spec")
    if not out.fits:
        out.notes.append(f"does not fit: {need:,.0f} MiB needed per device, {cap:,.0f} MiB "
                         f"on {device.key} (raise --tensor-parallel or lower the batch / "
                         f"context / precision)")
    if not math.isfinite(out.time_ms):
        raise PerfcastError("the prediction overflowed; check the request sizes")
    return out


def max_generation_batch(req: GenerationRequest, device, limit: int = 65536
                         ) -> tuple[int, GenerationPrediction | None]:
    """Largest batch (concurrent requests of ``req``'s lengths) whose memory need per device
    fits ``device`` — for vLLM the weights and KV cache within its ``gpu_memory_utilization``
    share, otherwise the whole need within the device (memory is monotone in the batch:
    bisection on the arithmetic, then one full prediction at the answer). ``(0, None)`` when
    not even one request fits."""
    import dataclasses

    from perfcast.llm.arch import check_generation, llm_arch
    from perfcast.llm.physics import MEMORY_UTILIZATION

    req.validate()
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise PerfcastError(f"--limit must be a positive integer, got {limit!r}")
    arch = llm_arch(req.model)
    check_generation(arch, req.input_len, req.output_len, req.tensor_parallel, req.precision)
    cap = float(device.memory_gb) * 1e9 / 2 ** 20

    def fits(b: int) -> bool:
        parts = memory_per_device(arch, dataclasses.replace(req, batch_size=b))
        if req.framework == "vllm":
            return parts["weights"] + parts["kv_cache"] <= MEMORY_UTILIZATION * cap
        return sum(parts.values()) <= cap

    if not fits(1):
        return 0, None
    lo, hi = 1, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo, predict_generation(dataclasses.replace(req, batch_size=lo), device)


__all__ = ["DEFAULTS", "ENGINES", "GenerationPrediction", "GenerationRequest", "PRECISIONS",
           "max_generation_batch", "memory_per_device", "predict_generation"]
