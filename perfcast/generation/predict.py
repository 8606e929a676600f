"""One generation request answered: time to first token, decode, memory and energy per phase."""

from __future__ import annotations

import math

from perfcast.errors import PerfcastError
from perfcast.workload import ENGINES, LLAMA_CPP_N_BATCH, LLAMA_CPP_N_UBATCH, Workload
from perfcast.generation.settings import (
    WEIGHT_NOTE,
    _gguf_note,
    _llama_settings,
    prompt_pass_tokens,
    resolve,
)
from perfcast.generation.result import GenerationPrediction
from perfcast.generation.memory import memory_per_device
from perfcast.generation.decode import (
    _completed,
    _dominance_capped,
    _dominated_if_unmeasured,
    _llama_sequences_ratio,
)


def predict_generation(req: Workload, device) -> GenerationPrediction:
    """Forecast the ``--mode generate`` workload ``req`` (defaults: :func:`resolve`) on
    ``device`` (a :class:`~perfcast.devices.Device`)."""
    from perfcast.features.table import Table
    from perfcast.llm.arch import WEIGHT_BYTES, llm_arch
    from perfcast.llm.energy import decode_step_work, energy_j, power_bounds, utilisation
    from perfcast.llm.graphs import activation_peak_mb, request_graph_flops
    from perfcast.llm.physics import COMPUTE_PRECISION, MEMORY_UTILIZATION, bound_of, request_work
    from perfcast.llm.prefill import ENGINE_PREFILL, _vendor, estimate_prefill
    from perfcast.shipped import load_shipped

    asked = req.precision if isinstance(req, Workload) else None
    req = resolve(req)
    req.require_lengths()
    if not device.is_gpu:
        raise PerfcastError(f"--mode generate predicts GPU serving; {device.key} is a CPU")
    arch = llm_arch(req.spec)
    req.check_serving(arch)
    from perfcast.generation.memory import check_expert_parallel, expert_placement_note

    check_expert_parallel(arch, req)
    out = GenerationPrediction(model=req.spec, device=device.key, mode="generate",
                               engine=req.engine, precision=req.precision,
                               batch_size=req.batch_size, input_len=req.input_len,
                               output_len=req.output_len, tensor_parallel=req.tensor_parallel,
                               n_batch=req.n_batch, n_ubatch=req.n_ubatch)
    from perfcast.generation.precision import learned_precision, serving_precision

    req = serving_precision(req, device, out.notes)  # weights + KV cache dtype, FP8 checked
    device = _completed(device, req.precision, out.notes)
    llama = req.engine == "llama.cpp"
    seqs = req.batch_size
    chunk = prompt_pass_tokens(req)
    if llama:
        out.notes.append(
            f"llama.cpp: {seqs:,} concurrent sequence(s) (--batch-size; llama-server -np "
            f"{seqs}); n_batch {req.n_batch:,} / n_ubatch {req.n_ubatch:,} (--n-batch / "
            f"--n-ubatch; llama-bench's defaults {LLAMA_CPP_N_BATCH:,} / {LLAMA_CPP_N_UBATCH}, "
            f"n_ubatch clamped to n_batch): the "
            f"{seqs * req.input_len:,} prompt tokens run in passes of min(n_batch, n_ubatch) = "
            f"{chunk:,} tokens, each decode step {seqs:,} token(s); with several devices it "
            f"splits the layers (one device's bandwidth per generated token, memory adds up)")
    # memory
    placed = expert_placement_note(arch, req)
    if placed:
        out.notes.append(placed)
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
    # time: the decode steps from the learned model (bound × learned factor, llm-xgboost),
    # the prefill from its own model (perfcast.llm.prefill)
    # (llama.cpp: the learned model answers one sequence — the data has no other —, scaled to
    # the request's sequences by the arithmetic bound below)
    learned_seqs = 1 if llama else seqs
    learned_p = learned_precision(req.precision)
    row = Table.from_records([{"model": req.model.name, "device": device.key,
                              "n_devices": req.tensor_parallel, "framework": req.engine,
                              "precision": learned_p, "batch_size": learned_seqs,
                              "concurrent": learned_seqs, "input_len": req.input_len,
                              "output_len": req.output_len, **_llama_settings(req)}])
    lat = load_shipped("llm-latency")
    below = _dominated_if_unmeasured(lat, device, req.precision, need,
                                     MEMORY_UTILIZATION if req.engine == "vllm" else 1.0)
    dec_arr, capped_by = _dominance_capped(lat, row, device, below)
    work = request_work(arch, device, batch=seqs, input_len=req.input_len,
                        output_len=req.output_len, n_devices=req.tensor_parallel,
                        precision=req.precision, engine=req.engine, prompt_chunk=chunk)
    g = bound_of(work, device, req.precision)
    dec_learned = float(dec_arr[0])
    if learned_p != req.precision:  # the support rule: no measured row of this precision
        g16 = bound_of(request_work(arch, device, batch=seqs, input_len=req.input_len,
                                    output_len=req.output_len, n_devices=req.tensor_parallel,
                                    precision=learned_p, engine=req.engine,
                                    prompt_chunk=chunk), device, learned_p)
        saved = g16.decode_s - g.decode_s
        out.notes.append(f"time_ms: no measurement has {out.precision}"
                         + (f" with an {req.kv_cache_dtype} KV cache" if req.kv_cache_dtype
                            else "")
                         + f" — the decode steps are the learned {learned_p} answer "
                         f"({dec_learned * 1e3:,.0f} ms) less what the arithmetic bound saves "
                         f"({saved * 1e3:,.0f} ms: fewer weight / KV-cache bytes streamed per "
                         f"step at peak bandwidth, FLOPs at the GEMMs' peak); the time the "
                         f"learned model adds above its bound (launches, scheduling, "
                         f"efficiency) is kept as measured at {learned_p}")
        dec_learned = max(dec_learned - saved, g.decode_s)
    if llama and seqs > 1 and req.output_len > 1:
        ratio = float(_llama_sequences_ratio(arch, device, req, [seqs])[0])
        out.notes.append(f"time_ms: LLM-Inference-Bench has llama.cpp rows of one sequence "
                         f"only — the decode steps of {seqs:,} sequences are the learned "
                         f"one-sequence answer ({dec_learned * 1e3:,.0f} ms) × {ratio:.3f}, "
                         f"the ratio of their arithmetic bounds ({seqs:,} sequences ÷ one: the "
                         f"weights streamed once per step, the KV cache and FLOPs × {seqs:,})")
        dec_learned *= ratio
    k = load_shipped("llm-prefill")
    pre_kw = dict(engine=req.engine, precision=req.precision, batch=seqs,
                  input_len=req.input_len, n_devices=req.tensor_parallel, chunk=chunk,
                  constants=k)
    pre = estimate_prefill(arch, device, **pre_kw)
    ttft = pre.seconds
    pre_below = min(((estimate_prefill(arch, d, **pre_kw).seconds, d.key, why)
                     for d, why in below), default=None)
    if pre_below is not None and pre_below[0] < ttft:
        out.notes.append(f"ttft_ms: {ttft * 1e3:,.4g} ms would be slower than on "
                         f"{pre_below[1]} ({pre_below[0] * 1e3:,.4g} ms), and {device.key} is "
                         f"at least as good as {pre_below[1]} ({pre_below[2]}) — capped at it")
        ttft = pre_below[0]
    if capped_by is not None and req.output_len > 1:
        out.notes.append(f"time_ms: the learned decode steps would be slower than on "
                         f"{capped_by[0].key}, and {device.key} is at least as good as "
                         f"{capped_by[0].key} ({capped_by[1]}) — capped at its answer")
    dec = dec_learned if req.output_len > 1 else 0.0
    t = max(ttft + dec, g.total_s)
    out.time_ms, out.bound_ms = t * 1e3, g.total_s * 1e3
    out.ttft_ms = ttft * 1e3
    (q_lo, q_hi), q_key = k.interval_for(req.engine, _vendor(device))
    out.ttft_ms_low, out.ttft_ms_high = ttft * 1e3 * math.exp(q_lo), ttft * 1e3 * math.exp(q_hi)
    out.coverage = k.coverage
    out.tpot_ms = dec / (req.output_len - 1) * 1e3 if req.output_len > 1 else None
    out.throughput_tokens_per_s = seqs * (req.input_len + req.output_len) / t
    out.output_tokens_per_s = seqs * req.output_len / t
    out.prefill = {"passes": pre.passes, "tokens_per_pass": pre.chunk,
                   **({"n_batch": req.n_batch, "n_ubatch": req.n_ubatch} if llama else {}),
                   "prefill_tokens_per_s": seqs * req.input_len / ttft,
                   "parts_ms": {n: round(v * 1e3, 3) for n, v in pre.parts.items() if v},
                   "compute_bound_share": round(pre.compute_bound, 3),
                   "peak_tflops": round(pre.peak / 1e12, 1),
                   "overheads_from": pre.overheads_from}
    out.predictor["time_ms"] = ("llm-xgboost for the decode steps (arithmetic bound × "
                                "learned factor ≥ 1: engine model ⊗ residual booster) + the "
                                "prefill model (ttft_ms)")
    out.predictor["ttft_ms"] = ("prefill model: operators on the spec sheet (Vidur-fitted "
                                "GEMM and memory-bound constants) + attention + "
                                "dequantisation + engine overheads (perfcast.llm.prefill)")
    out.trained_on["time_ms"] = lat.trained_on_
    out.trained_on["ttft_ms"] = k.trained_on
    eng = ENGINE_PREFILL[req.engine]
    shown = {n: v * 1e3 for n, v in pre.parts.items() if v >= 0.01 * ttft}
    out.notes.append(
        f"ttft_ms: prefill priced on its own — {pre.passes:,} pass(es) of ≤ {pre.chunk:,} "
        f"tokens ({eng.source}); "
        + ", ".join(f"{n.replace('_', ' ')} {v:,.1f} ms" for n, v in shown.items())
        + f"; GEMMs at {pre.peak / 1e12:,.1f} TFLOP/s peak through the operator model "
        f"({pre.compute_bound:.0%} of their time compute-bound); engine overheads from "
        f"{pre.overheads_from}; {k.coverage:.0%} interval from the held-out errors "
        f"({'the ' + q_key + ' prompt processing and ' if q_key != '*' else ''}Vidur's "
        f"operators with each GPU held out, reports/llm/serving.md)")
    out.notes.extend(f"ttft_ms: {n}" for n in pre.notes)
    if req.output_len > 1:
        out.notes.append(f"time_ms = ttft_ms + the decode steps: {dec_learned / g.decode_s:.2f}× "
                         f"their arithmetic bound (weights + KV cache streamed per step at peak "
                         f"bandwidth), the share the learned model (trained on whole requests of "
                         f"LLM-Inference-Bench) gives them; tpot_ms = the decode steps ÷ "
                         f"(output − 1)")
    else:
        out.notes.append("--output-len 1: a prefill-only request (the prefill yields the first "
                         "token): time_ms = ttft_ms")
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
    if asked is not None and asked != req.precision and req.engine == "llama.cpp":
        out.notes.append(f"--precision {asked} on llama.cpp: priced as GGUF {req.precision} "
                         f"({WEIGHT_BYTES[req.precision] * 8:.2f} bits per weight; give a GGUF "
                         f"name — Q4_K_M, Q4_0, Q5_K_M, Q6_K, Q8_0, F16 — for another)")
    if WEIGHT_BYTES[req.precision] < 2.0 and COMPUTE_PRECISION[req.precision] == "fp16":
        out.notes.append(f"{req.precision}: weight-only quantization — memory exact (weights "
                         f"{WEIGHT_NOTE.get(req.precision) or _gguf_note(req.precision)}); "
                         f"decode time EXTRAPOLATED: the bound streams the smaller weights, the "
                         f"learned factor is the 16-bit one (the data has no quantized rows: "
                         f"LLM-Inference-Bench names no precision and its llama.cpp rows run "
                         f"at fp16 speed, reports/llm/); prefill priced with the engine's "
                         f"dequantisation (ttft_ms)")
    # energy: Σ phase power × devices × phase time (perfcast.llm.energy)
    idle, tdp, idle_src = power_bounds(device)
    if tdp:
        pp = load_shipped("llm-phase-power")
        n = req.tensor_parallel
        n_rate = 1 if llama else n  # decode over a layer split: one device at a time
        mu_p, cu_p = utilisation(pre.flops, pre.bytes + arch.kv_bytes_per_token(req.precision)
                                 * seqs * req.input_len, ttft, device, n)
        p_pre = pp.power(device, float(mu_p), float(cu_p))
        e_pre = energy_j(p_pre, n, ttft)  # every device busy (llama.cpp: pipelined ubatches)
        e_dec, p_dec = 0.0, None
        if dec > 0:
            step = dec / (req.output_len - 1)
            f_d, m_d = decode_step_work(arch, batch=seqs,
                                        context=req.input_len + req.output_len / 2.0,
                                        precision=req.precision,
                                        n_devices=1 if llama else req.tensor_parallel)
            mu_d, cu_d = utilisation(f_d, m_d, step, device, n_rate)
            p_dec = pp.power(device, float(mu_d), float(cu_d))
            e_dec = energy_j(p_dec, n_rate, dec) + energy_j(idle, req.tensor_parallel - n_rate,
                                                            dec)
        out.power_by_phase_w = {"prefill": p_pre,
                                **({"decode": p_dec} if p_dec is not None else {})}
        out.energy_by_phase_j = {"prefill": e_pre, **({"decode": e_dec} if dec > 0 else {})}
        out.energy_j = e_pre + e_dec
        out.power_w = out.energy_j / (req.tensor_parallel * t)
        out.energy_per_token_j = out.energy_j / (seqs * req.output_len)
        out.energy_per_request_j = out.energy_j / seqs
        out.energy_per_1k_tokens_j = out.energy_per_token_j * 1000
        out.predictor["energy_j"] = ("Σ phase power × devices × phase time: power = idle + "
                                     "TDP × (static + c·h(compute util) + c_memory·h(memory "
                                     "util)) of each phase (power-model), between idle and TDP")
        out.trained_on["energy_j"] = pp.trained_on
        out.notes.append(
            f"energy: prefill {p_pre:,.0f} W per device for {ttft * 1e3:,.1f} ms"
            + (f", decode {p_dec:,.0f} W for {dec * 1e3:,.0f} ms" if p_dec is not None else "")
            + f"; power between idle {idle:,.0f} W ({idle_src}) and TDP {tdp:,.0f} W"
            + (f"; llama.cpp's layer split keeps one of the {req.tensor_parallel} devices busy "
               f"at a time while generating, the others idle" if llama
               and req.tensor_parallel > 1 else ""))
        out.notes.append(f"energy_j: {pp.note(device)}")
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
