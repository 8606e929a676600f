"""LLM generation as a prediction: ``perfcast predict hf:ID --mode generate`` — a batch of
``B`` requests of ``I`` prompt tokens generating ``O`` tokens each, served by an engine on
``tensor_parallel`` devices.

* **graphs** — the request's FLOPs (``flops``) from the traced prefill graph at ``I`` tokens
  and the traced decode-step graph, linear in its KV-cache length, summed over the cache
  lengths ``I … I+O−2`` of the ``O − 1`` decode steps (:mod:`perfcast.llm.graphs`; no graph is
  traced at request time);
* **time** — the shipped ``llm-latency`` model (:mod:`perfcast.training.llm`): the request's
  arithmetic lower bound (:mod:`perfcast.llm.physics`: the passes' FLOPs at peak, weights and
  KV cache at peak bandwidth) × a factor ≥ 1 learned from LLM-Inference-Bench, the device
  entering through its spec sheet (:mod:`perfcast.llm.model`). ``ttft_ms`` is the prefill pass
  and ``tpot_ms`` the decode steps ÷ ``O − 1``, as the engine model apportions the time (the
  data measures whole requests only, said so in ``notes``);
* **memory** per device — weights and KV cache ÷ devices (vLLM: 16-token blocks) + the prefill's
  activation peak from the tensor simulation of the model's graph (:mod:`perfcast.llm.graphs`)
  + the measured runtime overhead; vLLM pre-allocates ``gpu_memory_utilization`` (0.9) of each
  GPU whatever the batch needs: ``memory_mb`` is then that reservation, ``memory_needed_mb``
  the need, and ``fits`` whether the need is within it;
* **energy** — power per device from the shipped ``llm-power`` model (ML.ENERGY), bounded to
  ``[idle, TDP]``, × devices × time (:mod:`perfcast.llm.energy`, the one energy code path);
  per request, per output token and per 1,000 output tokens.

``throughput_tokens_per_s`` counts as LLM-Inference-Bench does: prompt and generated tokens of
the whole batch per second of its latency (``B·(I+O) / latency``); ``output_tokens_per_s`` only
the generated ones. llama.cpp serves one sequence (``--batch-size`` is its prompt chunk,
``n_batch``) and splits layers across its devices.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.workload import DEFAULT_ENGINE, ENGINES, GENERATE_PRECISIONS, MAX_SIZE, Workload

#: What a ``generate`` request leaves open defaults to (:func:`resolve`).
DEFAULTS = {"engine": DEFAULT_ENGINE, "precision": "fp16", "batch_size": 1}
#: Serving precisions (declared with the other options in :mod:`perfcast.workload`).
PRECISIONS = GENERATE_PRECISIONS


def resolve(w: Workload) -> Workload:
    """The ``--mode generate`` workload ``w`` with :data:`DEFAULTS` filled in (a batch of 1,
    fp16; the engine is set by :meth:`Workload.of`); refuses another mode."""
    if not isinstance(w, Workload):
        raise PerfcastError(f"a generation request is a perfcast.workload.Workload (mode "
                            f"generate), not {type(w).__name__}")
    if w.mode != "generate":
        raise PerfcastError(f"LLM generation needs --mode generate, not --mode {w.mode}")
    changes = {k: DEFAULTS[k] for k in ("batch_size", "precision", "engine")
               if getattr(w, k) is None}
    return w.replace(**changes) if changes else w


@dataclass
class GenerationPrediction:
    """A generation forecast. Times in ms for the whole batch (``time_ms``), to the first
    token (``ttft_ms``) and per output token (``tpot_ms``); memory in MiB per device; energy in
    J for the batch (all devices), per request, per output token and per 1,000 output tokens;
    power in W per device; ``flops`` of the whole batch from the traced prefill and decode-step
    graphs (:func:`perfcast.llm.graphs.request_graph_flops`)."""

    model: str
    device: str
    mode: str
    engine: str
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
    energy_per_request_j: float | None = None
    energy_per_1k_tokens_j: float | None = None
    power_w: float | None = None
    bound_ms: float | None = None
    flops: float | None = None
    predictor: dict[str, str] = field(default_factory=dict)
    trained_on: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _runtime_overhead_mb() -> float:
    """The measured CUDA context + library overhead (``memory/runtime_overhead.json``, read
    without importing the memory simulation and torch)."""
    import json

    from perfcast.paths import package_data

    doc = json.loads(package_data("memory", "runtime_overhead.json").read_text())
    return float(doc["runtime_overhead_mb"])


def memory_per_device(arch, req: Workload) -> dict[str, float]:
    """MiB per device: weights and KV cache (vLLM: whole 16-token blocks) split over the
    devices (tensor parallelism shards every layer, llama.cpp's layer split gives each device
    its layers: both ``1/n``; with fewer KV heads than devices, tensor parallelism replicates
    them, :func:`~perfcast.llm.arch.kv_heads_per_device`), the prefill's activation peak (the
    tensor simulation of the model's prefill graph, :mod:`perfcast.llm.graphs`, at the batch's prompt tokens; a
    closed form when the model was never simulated) and the runtime (measured CUDA context and
    library overhead)."""
    from perfcast.llm.arch import VLLM_BLOCK_TOKENS, kv_heads_per_device
    from perfcast.llm.graphs import activation_peak_mb

    n, mib = req.tensor_parallel, 2.0 ** 20
    block = VLLM_BLOCK_TOKENS if req.engine == "vllm" else None
    seqs = 1 if req.engine == "llama.cpp" else req.batch_size
    kv = arch.kv_cache_bytes(seqs, req.input_len + req.output_len, req.precision, block=block)
    if req.engine != "llama.cpp":  # fewer KV heads than devices: each one replicated
        kv *= kv_heads_per_device(arch, n) * n / arch.kv_heads
    chunk = min(req.input_len, req.batch_size) if req.engine == "llama.cpp" \
        else req.input_len
    act, _ = activation_peak_mb(arch, seqs * chunk, req.precision)
    return {"weights": arch.weight_bytes(req.precision) / n / mib, "kv_cache": kv / n / mib,
            "activations": act / n, "runtime": _runtime_overhead_mb()}


def predict_generation(req: Workload, device) -> GenerationPrediction:
    """Forecast the ``--mode generate`` workload ``req`` (defaults: :func:`resolve`) on
    ``device`` (a :class:`~perfcast.devices.Device`)."""
    import pandas as pd

    from perfcast.llm.arch import llm_arch
    from perfcast.llm.energy import bounded_power, energy_j, power_bounds
    from perfcast.llm.graphs import activation_peak_mb, request_graph_flops
    from perfcast.llm.model import features
    from perfcast.llm.physics import MEMORY_UTILIZATION, bound_of, request_work
    from perfcast.training.llm import load_llm_model

    req = resolve(req)
    req.require_lengths()
    if not device.is_gpu:
        raise PerfcastError(f"--mode generate predicts GPU serving; {device.key} is a CPU")
    arch = llm_arch(req.spec)
    req.check_serving(arch)
    out = GenerationPrediction(model=req.spec, device=device.key, mode="generate",
                               engine=req.engine, precision=req.precision,
                               batch_size=req.batch_size, input_len=req.input_len,
                               output_len=req.output_len, tensor_parallel=req.tensor_parallel)
    llama = req.engine == "llama.cpp"
    seqs = 1 if llama else req.batch_size
    if llama:
        out.notes.append("llama.cpp serves one sequence: --batch-size is its prompt chunk "
                         "(n_batch), as in LLM-Inference-Bench; with several devices it splits "
                         "the layers (one device's bandwidth per token, memory adds up)")
    # memory
    parts = memory_per_device(arch, req)
    need = sum(parts.values())
    cap = float(device.memory_mb)
    out.memory_breakdown_mb = {k: round(v, 1) for k, v in parts.items()}
    out.memory_needed_mb, out.capacity_mb = need, cap
    out.fits = need <= cap
    out.memory_mb = need
    if req.engine == "vllm":
        out.fits = need <= MEMORY_UTILIZATION * cap  # vLLM profiles it all within its share
        out.memory_mb = max(need, MEMORY_UTILIZATION * cap)
        out.notes.append(f"memory_mb: vLLM pre-allocates gpu_memory_utilization "
                         f"{MEMORY_UTILIZATION} of each GPU ({MEMORY_UTILIZATION} × "
                         f"{cap:,.0f} MiB = {MEMORY_UTILIZATION * cap:,.0f} MiB) for weights "
                         f"+ KV cache whatever the batch needs, so that is what the GPU shows; "
                         f"memory_needed_mb ({need:,.0f} MiB) is what this batch uses")
    out.flops, flops_src = request_graph_flops(arch, seqs, req.input_len, req.output_len)
    out.predictor["flops"] = flops_src
    _, act_src = activation_peak_mb(arch, 1, req.precision)
    out.predictor["memory_mb"] = (f"arithmetic (weights + KV cache + runtime) + activations "
                                  f"from {act_src}")
    # time: bound × learned factor (llm-xgboost)
    row = pd.DataFrame([{"model": req.model.name, "device": device.key,
                         "n_devices": req.tensor_parallel, "framework": req.engine,
                         "precision": req.precision, "batch_size": req.batch_size,
                         "concurrent": seqs, "input_len": req.input_len,
                         "output_len": req.output_len}])
    lat = load_llm_model("latency_s")
    X = features(row, "latency_s", devices={device.key: device})
    t_arr, info = lat.predict(X, parts=True)
    t = float(t_arr[0])
    g = bound_of(request_work(arch, device, batch=seqs, input_len=req.input_len,
                              output_len=req.output_len, n_devices=req.tensor_parallel,
                              precision=req.precision, engine=req.engine,
                              prompt_chunk=req.batch_size if llama else None),
                 device, req.precision)
    out.time_ms, out.bound_ms = t * 1e3, g.total_s * 1e3
    if info:
        pre, dec = float(info["prefill_s"][0]), float(info["decode_s"][0])
    else:  # split as the bound splits
        pre, dec = t * g.prefill_s / g.total_s, t * g.decode_s / g.total_s
    out.ttft_ms = pre * 1e3
    out.tpot_ms = dec / (req.output_len - 1) * 1e3 if req.output_len > 1 else None
    out.throughput_tokens_per_s = seqs * (req.input_len + req.output_len) / t
    out.output_tokens_per_s = seqs * req.output_len / t
    out.predictor["time_ms"] = ("llm-xgboost (arithmetic bound × learned factor ≥ 1: engine "
                                "model ⊗ residual booster)")
    out.trained_on["time_ms"] = lat.trained_on_
    out.notes.append(f"time_ms: {t / g.total_s:.2f}× the arithmetic bound ({out.bound_ms:,.0f} "
                     f"ms: weights + KV cache streamed per pass at peak bandwidth, FLOPs at "
                     f"peak); ttft_ms = the prefill pass, tpot_ms = the decode steps ÷ "
                     f"(output − 1), as the engine model apportions them (the data measures "
                     f"whole requests)")
    if g.waves > 1:
        out.notes.append(f"the KV cache of {seqs} sequences does not fit beside the weights: "
                         f"they run in {g.waves} waves of ≤ {g.concurrent}")
    seen = set(lat.trained_on_.get("devices", []))
    if device.key not in seen:
        out.notes.append(f"time_ms: {device.key} is not among the measured accelerators "
                         f"({', '.join(sorted(seen))}): it enters through its spec sheet "
                         f"(peak FLOP/s, bandwidth, vendor) — leave-one-hardware-out error in "
                         f"reports/llm/")
    if req.engine not in set(lat.trained_on_.get("engines", ENGINES)):
        out.notes.append(f"time_ms: no {req.engine} measurement in the data; its engine "
                         f"model is borrowed from vLLM on the same vendor (extrapolated)")
    if req.precision in ("int8", "int4"):
        out.notes.append(f"{req.precision}: weight-only quantization — memory exact (weights "
                         f"{WEIGHT_NOTE[req.precision]}); time EXTRAPOLATED: the bound streams "
                         f"the smaller weights, the learned factor is the 16-bit one (the data "
                         f"has no quantized rows: LLM-Inference-Bench names no precision and "
                         f"its llama.cpp rows run at fp16 speed, reports/llm/)")
    # energy: power ∈ [idle, TDP] × devices × time (perfcast.llm.energy)
    idle, tdp, idle_src = power_bounds(device)
    if tdp:
        Xp = features(row.assign(batch_size=seqs), "tpot_s", devices={device.key: device})
        pw = load_llm_model("power_per_device_w")
        p = bounded_power(device, float(pw.predict(Xp)[0]))
        out.power_w = p
        out.energy_j = energy_j(p, req.tensor_parallel, t)
        out.energy_per_token_j = out.energy_j / (seqs * req.output_len)
        out.energy_per_request_j = out.energy_j / seqs
        out.energy_per_1k_tokens_j = out.energy_per_token_j * 1000
        out.predictor["energy_j"] = ("power (llm-xgboost, fraction of TDP, bounded between "
                                     "idle and TDP by perfcast.energy, the one energy code "
                                     "path) × devices × time_ms")
        out.trained_on["energy_j"] = pw.trained_on_
        out.notes.append(f"energy: power bounded between idle {idle:,.0f} W ({idle_src}) and "
                         f"TDP {tdp:,.0f} W per device")
    else:
        out.notes.append(f"energy_j: {device.key} has no TDP in its spec")
    if not out.fits:
        room = MEMORY_UTILIZATION * cap if req.engine == "vllm" else cap
        out.notes.append(f"does not fit at once: {need:,.0f} MiB needed per device, "
                         f"{room:,.0f} MiB usable on {device.key} (raise --tensor-parallel or "
                         f"lower the batch / context / precision)")
    if not math.isfinite(out.time_ms):
        raise PerfcastError("the prediction overflowed; check the request sizes")
    return out


WEIGHT_NOTE = {"int8": "1 byte + an fp16 scale per 128 weights",
               "int4": "½ byte + an fp16 scale per group of 128 weights (GPTQ / AWQ layout)"}


def _fits_fn(arch, req: Workload, device):
    """``fits(request) -> bool``: the memory need per device (weights, KV cache, activations,
    runtime) within the device — for vLLM within its ``gpu_memory_utilization`` share, which
    is where vLLM profiles all of it before sizing the KV cache."""
    from perfcast.llm.physics import MEMORY_UTILIZATION

    cap = float(device.memory_mb)

    def fits(r: Workload) -> bool:
        need = sum(memory_per_device(arch, r).values())
        return need <= (MEMORY_UTILIZATION * cap if r.engine == "vllm" else cap)

    return fits


def _largest(ok, lo: int, hi: int) -> int:
    """Largest ``v`` in ``[lo, hi]`` with ``ok(v)`` for a monotone ``ok`` (``ok(lo)`` true)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def max_generation_batch(req: Workload, device, limit: int = 65536
                         ) -> tuple[int, GenerationPrediction | None]:
    """Largest batch (concurrent requests of ``req``'s lengths) whose memory need per device
    fits ``device`` (see :func:`_fits_fn`; memory is monotone in the batch: bisection on the
    arithmetic, then one full prediction at the answer). ``(0, None)`` when not even one
    request fits. llama.cpp serves one sequence: its answer is 1 or 0."""
    import dataclasses

    from perfcast.llm.arch import llm_arch

    req = resolve(req)
    req.require_lengths()
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise PerfcastError(f"--limit must be a positive integer, got {limit!r}")
    arch = llm_arch(req.spec)
    req.check_serving(arch)
    fits = _fits_fn(arch, req, device)
    if not fits(dataclasses.replace(req, batch_size=1)):
        return 0, None
    if req.engine == "llama.cpp":
        return 1, predict_generation(req.replace(batch_size=1), device)
    b = _largest(lambda v: fits(dataclasses.replace(req, batch_size=v)), 1, limit)
    return b, predict_generation(req.replace(batch_size=b), device)


def max_generation_context(req: Workload, device
                           ) -> tuple[int, str, GenerationPrediction | None]:
    """Largest prompt (``input_len``) that ``req.batch_size`` requests generating
    ``req.output_len`` tokens each (default 1) can hold on ``device``: ``(input_len,
    limited_by, prediction)`` with ``limited_by`` ``"memory"`` or ``"max_positions"`` (the
    model's own limit); ``(0, "memory", None)`` when not even a 1-token prompt fits."""
    import dataclasses

    from perfcast.llm.arch import llm_arch

    req = resolve(req)
    if req.output_len is None:
        req = req.replace(output_len=1)
    arch = llm_arch(req.spec)
    top = (arch.max_positions or MAX_SIZE) - req.output_len
    if top < 1:
        raise PerfcastError(f"{arch.model_id} holds at most {arch.max_positions:,} positions; "
                            f"--output-len {req.output_len:,} leaves no room for a prompt")
    top = min(top, MAX_SIZE)
    req.check_serving(arch, input_len=1)
    fits = _fits_fn(arch, req, device)
    if not fits(dataclasses.replace(req, input_len=1)):
        return 0, "memory", None
    i = _largest(lambda v: fits(dataclasses.replace(req, input_len=v)), 1, top)
    limited = "max_positions" if i == top and arch.max_positions else "memory"
    return i, limited, predict_generation(req.replace(input_len=i), device)


__all__ = ["DEFAULTS", "ENGINES", "GenerationPrediction", "PRECISIONS", "max_generation_batch",
           "max_generation_context", "memory_per_device", "predict_generation", "resolve"]
