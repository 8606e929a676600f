"""LLM generation as a prediction: ``perfcast predict hf:ID --mode generate`` — a batch of
``B`` requests of ``I`` prompt tokens generating ``O`` tokens each, served by an engine on
``tensor_parallel`` devices.

* **graphs** — the request's FLOPs (``flops``) from the traced prefill graph at ``I`` tokens
  and the traced decode-step graph, linear in its KV-cache length, summed over the cache
  lengths ``I … I+O−2`` of the ``O − 1`` decode steps (:mod:`perfcast.llm.graphs`; no graph is
  traced at request time);
* **time to first token** — the prefill model (:mod:`perfcast.llm.prefill`): the prompt's
  passes at the engine's chunk priced operator by operator on the spec sheet (GEMMs through
  the Vidur-fitted operator constants, attention quadratic in the prompt, dequantisation of
  int4 / int8 / GGUF weights, engine overheads), ``ttft_ms`` with an interval from its
  held-out errors (``ttft_ms_low`` / ``ttft_ms_high`` at ``coverage``);
* **decode** — the shipped ``llm-latency`` model (:mod:`perfcast.shipped`): the request's
  arithmetic lower bound (:mod:`perfcast.llm.physics`) × a factor ≥ 1 learned from
  LLM-Inference-Bench, the device entering through its spec sheet (:mod:`perfcast.llm.model`);
  its decode steps ÷ ``O − 1`` are ``tpot_ms``. ``time_ms`` = ``ttft_ms`` + the decode steps
  (``--output-len 1`` is a prefill-only request);
* **memory** per device — weights and KV cache ÷ devices (vLLM: 16-token blocks) + the prefill's
  activation peak from the tensor simulation of the model's graph (:mod:`perfcast.llm.graphs`)
  + the measured runtime overhead; vLLM pre-allocates ``gpu_memory_utilization`` (0.9) of each
  GPU whatever the batch needs: ``memory_mb`` is then that reservation, ``memory_needed_mb``
  the need, and ``fits`` whether the need is within it;
* **energy** — Σ over the two phases of power × devices × time: each phase's power per device
  from its memory and compute utilisation (``llm-phase-power``, :class:`perfcast.llm.energy.
  PhasePower`: fitted on ML.ENERGY, capped at Zeus's compute-bound draw), bounded to
  ``[idle, TDP]`` (the one energy code path); per request, per output token and per 1,000
  output tokens, and by phase (``power_by_phase_w``, ``energy_by_phase_j``).

``throughput_tokens_per_s`` counts as LLM-Inference-Bench does: prompt and generated tokens of
the whole batch per second of its latency (``B·(I+O) / latency``); ``output_tokens_per_s`` only
the generated ones. ``--batch-size`` is concurrent requests (sequences) in every engine.
llama.cpp runs ``B`` sequences as its server does with ``-np B``: the ``B·I`` prompt tokens in
passes of ``min(n_batch, n_ubatch)`` tokens (``--n-batch`` / ``--n-ubatch``, its logical and
physical batch, default 2,048 / 512 as llama-bench), each decode step ``B`` tokens; the data
has llama.cpp rows of one sequence only, so its decode steps of ``B`` sequences are the learned
one-sequence answer × the arithmetic bound's ratio of ``B`` sequences to one (said in
``notes``). It takes GGUF formats (``int4`` / ``int8`` read as ``Q4_K_M`` / ``Q8_0``) and splits
layers across its devices.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast._memo import Memo
from perfcast.errors import PerfcastError
from perfcast.workload import (
    DEFAULT_ENGINE,
    ENGINES,
    GENERATE_PRECISIONS,
    LLAMA_CPP_N_BATCH,
    LLAMA_CPP_N_UBATCH,
    MAX_SIZE,
    Workload,
)

#: What a ``generate`` request leaves open defaults to (:func:`resolve`): one request (one
#: sequence, in every engine), fp16, vLLM.
DEFAULTS = {"engine": DEFAULT_ENGINE, "precision": "fp16", "batch_size": 1}
#: llama.cpp's logical and physical batch when not given: llama-bench's ``-b 2048 -ub 512``
#: (``n_ubatch`` is clamped to ``n_batch``, as llama.cpp does).
LLAMA_CPP_DEFAULTS = {"n_batch": LLAMA_CPP_N_BATCH, "n_ubatch": LLAMA_CPP_N_UBATCH}
#: What a serving precision means to llama.cpp: its GGUF format (int4 → the usual 4-bit
#: K-quant, int8 → Q8_0; :data:`perfcast.workload.GGUF_PRECISIONS`).
LLAMA_CPP_PRECISION = {"int4": "Q4_K_M", "int8": "Q8_0", "fp16": "F16", "bf16": "BF16",
                       "fp32": "F32"}
#: Serving precisions (declared with the other options in :mod:`perfcast.workload`).
PRECISIONS = GENERATE_PRECISIONS


def resolve(w: Workload) -> Workload:
    """The ``--mode generate`` workload ``w`` with :data:`DEFAULTS` filled in (a batch of 1,
    fp16; the engine is set by :meth:`Workload.of`); llama.cpp: ``n_batch`` 2,048, ``n_ubatch``
    ``min(512, n_batch)`` (:data:`LLAMA_CPP_DEFAULTS`) and its GGUF format for a generic
    precision (:data:`LLAMA_CPP_PRECISION`). Refuses another mode."""
    if not isinstance(w, Workload):
        raise PerfcastError(f"a generation request is a perfcast.workload.Workload (mode "
                            f"generate), not {type(w).__name__}")
    if w.mode != "generate":
        raise PerfcastError(f"LLM generation needs --mode generate, not --mode {w.mode}")
    engine = w.engine or DEFAULTS["engine"]
    changes = {k: DEFAULTS[k] for k in ("batch_size", "precision", "engine")
               if getattr(w, k) is None}
    if engine == "llama.cpp":
        prec = changes.get("precision", w.precision)
        if prec in LLAMA_CPP_PRECISION:
            changes["precision"] = LLAMA_CPP_PRECISION[prec]
        nb = w.n_batch if w.n_batch is not None else LLAMA_CPP_DEFAULTS["n_batch"]
        if w.n_batch is None:
            changes["n_batch"] = nb
        if w.n_ubatch is None:
            changes["n_ubatch"] = min(LLAMA_CPP_DEFAULTS["n_ubatch"], nb)
    return w.replace(**changes) if changes else w


def prompt_pass_tokens(req: Workload) -> int | None:
    """Tokens per prompt pass of a resolved request: llama.cpp's ``min(n_batch, n_ubatch)``;
    ``None`` for the other engines (their own chunking, :data:`perfcast.llm.prefill.
    ENGINE_PREFILL`)."""
    if req.engine != "llama.cpp":
        return None
    return min(req.n_batch or LLAMA_CPP_N_BATCH, req.n_ubatch or LLAMA_CPP_N_UBATCH)


def _llama_settings(req: Workload) -> dict[str, Any]:
    """The columns a llama.cpp request row carries for the learned model: ``n_batch`` and
    ``n_ubatch`` (``None`` for the other engines)."""
    llama = req.engine == "llama.cpp"
    return {"n_batch": req.n_batch if llama else None,
            "n_ubatch": req.n_ubatch if llama else None}


@dataclass
class GenerationPrediction:
    """A generation forecast of ``batch_size`` concurrent requests (``n_batch`` / ``n_ubatch``:
    llama.cpp's logical and physical batch, ``None`` for the other engines). Times in ms for
    the whole batch (``time_ms``), to the first
    token (``ttft_ms``, its ``coverage`` interval ``ttft_ms_low`` – ``ttft_ms_high``) and per
    output token (``tpot_ms``); ``prefill``: how the prompt was priced (passes, tokens per
    pass, prefill tokens/s, parts in ms, the GEMM peak); memory in MiB per device; energy in J
    for the batch (all devices), per request, per output token and per 1,000 output tokens,
    and by phase (``energy_by_phase_j``); power in W per device, mean and by phase
    (``power_by_phase_w``); ``flops`` of the whole batch from the traced prefill and
    decode-step graphs (:func:`perfcast.llm.graphs.request_graph_flops`)."""

    model: str
    device: str
    mode: str
    engine: str
    precision: str
    batch_size: int
    input_len: int
    output_len: int
    tensor_parallel: int
    n_batch: int | None = None
    n_ubatch: int | None = None
    time_ms: float | None = None
    ttft_ms: float | None = None
    ttft_ms_low: float | None = None
    ttft_ms_high: float | None = None
    coverage: float | None = None
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
    power_by_phase_w: dict[str, float] = field(default_factory=dict)
    energy_by_phase_j: dict[str, float] = field(default_factory=dict)
    prefill: dict[str, Any] = field(default_factory=dict)
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
    seqs = req.batch_size
    kv = arch.kv_cache_bytes(seqs, req.input_len + req.output_len, req.precision, block=block)
    if req.engine != "llama.cpp":  # fewer KV heads than devices: each one replicated
        kv *= kv_heads_per_device(arch, n) * n / arch.kv_heads
    # llama.cpp: one ubatch of ≤ min(n_batch, n_ubatch) tokens of all the sequences at a time
    ub = prompt_pass_tokens(req)
    tokens = min(seqs * req.input_len, ub) if ub else seqs * req.input_len
    act, _ = activation_peak_mb(arch, tokens, req.precision)
    return {"weights": arch.weight_bytes(req.precision) / n / mib, "kv_cache": kv / n / mib,
            "activations": act / n, "runtime": _runtime_overhead_mb()}


def _completed(device, precision: str, notes: list[str] | None = None):
    """``device`` with the spec fields its sheet left out derived by a stated rule
    (:func:`perfcast.devices.derive.complete`: a bf16 peak, the compute capability, the
    architecture year …); the derivations of the fields generation reads — the peak of the
    precision its GEMMs run in, the architecture year the power model reads — are appended to
    ``notes``."""
    from perfcast.devices.derive import complete, notes_for
    from perfcast.llm.physics import COMPUTE_PRECISION

    done = complete(device)[0]
    if notes is not None:
        comp = COMPUTE_PRECISION.get(precision, "fp16")
        notes.extend(notes_for(device, {f"peak_{comp}_tflops", "arch_year"}))
    return done


def _serving_dominance(x, a, precision: str) -> str | None:
    """Why GPU ``x`` serves no slower than GPU ``a`` (``None`` when it need not). Only within a
    vendor — the engines run other kernels on another vendor's GPUs (llama.cpp's HIP backend on
    an MI300X is slower than its CUDA one on the H100 the MI300X beats in every number) — and
    then when ``x`` is at least as good in every spec number (:func:`perfcast.anchors.dominates`)
    or in the two numbers that bound a decode step and a prefill: the memory bandwidth and the
    peak of the precision the GEMMs run in."""
    from perfcast.anchors import dominates
    from perfcast.devices.derive import complete
    from perfcast.llm.physics import COMPUTE_PRECISION

    cx, ca = complete(x)[0], complete(a)[0]
    vendor = str(cx.vendor or "").strip().lower()
    if not vendor or vendor != str(ca.vendor or "").strip().lower():
        return None
    if dominates(x, a):
        return "every spec number"
    prec = COMPUTE_PRECISION.get(precision, "fp16")
    pairs = ((cx.bandwidth_gbs, ca.bandwidth_gbs),
             (cx.peak_tflops(prec), ca.peak_tflops(prec)))
    if all(vx is not None and va is not None and float(vx) >= float(va) for vx, va in pairs):
        return f"memory bandwidth and {prec} peak"
    return None


def dominated_gpus(device, precision: str, need_mb: float | None = None,
                   share: float = 1.0) -> list[tuple[Any, str]]:
    """``(GPU, why)`` for every built-in GPU ``device`` serves no slower than
    (:func:`_serving_dominance`) and on which ``need_mb`` per device fits in ``share`` of the
    memory: a generation answer on ``device`` is capped at theirs, whatever a learned factor
    says between two GPUs (a newer GPU from its spec sheet is never slower than an older one
    it beats in what bounds the work)."""
    from perfcast.devices import device_origin, list_devices

    if not device.is_gpu:
        return []
    out = []
    for d in list_devices():
        if (not d.is_gpu or d.key == device.key or device_origin(d.key) != "built-in"
                or (need_mb is not None and (d.memory_mb or 0.0) * share < need_mb)):
            continue
        why = _serving_dominance(device, d, precision)
        if why:
            out.append((d, why))
    return out


def _dominated_if_unmeasured(lat, device, precision: str, need_mb: float | None = None,
                             share: float = 1.0) -> list[tuple[Any, str]]:
    """:func:`dominated_gpus` for a GPU the latency model has no measurements of (a spec sheet,
    a registry GPU outside the data); ``[]`` for a measured one, whose learned answer stands
    (capping it at another GPU's extrapolated answer made the measured rows worse)."""
    if device.key in set(lat.trained_on_.get("devices", [])):
        return []
    return dominated_gpus(device, precision, need_mb, share)


def _learned_decode_s(lat, rows, devices: dict):
    """Seconds of the decode steps the learned latency model gives each row of ``rows`` (one
    static batch each, its ``device`` a key of ``devices``)."""
    import numpy as np

    from perfcast.llm.model import features

    X = features(rows, "latency_s", devices=devices)
    t, info = lat.predict(X, parts=True)
    if info:
        return np.asarray(info["decode_s"], dtype=float)
    return np.asarray(t * X["log_decode_s"].map(math.exp).to_numpy() / X["bound_s"].to_numpy(),
                      dtype=float)


#: The first grid point of each dimension of the decode envelope (:func:`_decode_envelope`):
#: running sequences, prompt tokens, output tokens — shorter ones are answered as these.
_ENVELOPE_START = {"batch": 1, "input": 16, "output": 2}
#: Envelope grids kept per process (model, device, engine, precision, devices, grid): ``serve``
#: and the planner ask the same grids again.
_ENVELOPES = Memo(256)


def _ladder(start: int, x: int) -> list[int]:
    """Powers of two × ``start`` from ``start`` up to the first ≥ ``x``."""
    out = [start]
    while out[-1] < x:
        out.append(out[-1] * 2)
    return out


def _monotone(grid):
    """``grid`` made non-decreasing along every axis by a running maximum from below: a dip
    of the learned model (an answer faster than a smaller request's) is raised to the smaller
    request's answer (its cost in accuracy, held out: reports/llm/consistency.md)."""
    import numpy as np

    for axis in range(grid.ndim):
        grid = np.maximum.accumulate(grid, axis=axis)
    return grid


def _decode_envelope(lat, rows, device) -> Any:
    """Seconds of the decode steps of each row of ``rows`` (one request each, the same model,
    engine, precision and devices; ``batch_size`` / ``concurrent``, ``input_len``,
    ``output_len`` vary) on ``device``, non-decreasing in the running sequences, the prompt and
    the output length by construction: the learned model is evaluated on a fixed grid of powers
    of two (:data:`_ENVELOPE_START`), made monotone along each axis (:func:`_monotone`) and
    interpolated multilinearly — in log₂ of the sequences and the prompt, linearly in the
    output tokens (the decode steps add up). A grid value never depends on the request, so a
    larger request can only read larger values. llama.cpp's rows are one sequence each (the
    data has no other; :func:`_llama_sequences_ratio` scales to more): no batch axis, its
    ``n_batch`` / ``n_ubatch`` part of the grid's key."""
    import numpy as np

    from perfcast.features.table import Table

    first = rows.iloc[0]
    llama = first["framework"] == "llama.cpp"
    bs = rows["concurrent"].to_numpy(dtype=float)
    ins = rows["input_len"].to_numpy(dtype=float)
    outs = rows["output_len"].to_numpy(dtype=float)
    B = [1] if llama else _ladder(_ENVELOPE_START["batch"], int(bs.max()))
    I = _ladder(_ENVELOPE_START["input"], int(ins.max()))
    O = _ladder(_ENVELOPE_START["output"], int(outs.max()))
    knobs = (first.get("n_batch"), first.get("n_ubatch")) if llama else ()
    key = (str(first["model"]), device, str(first["framework"]), str(first["precision"]),
           int(first["n_devices"]), tuple(B), len(I), len(O), *map(str, knobs), id(lat))
    grid = _ENVELOPES.get(key)
    if grid is None:
        pts = [(b, i, o) for b in B for i in I for o in O]
        g = Table.from_records([{**first.to_dict(), "device": device.key,
                                "batch_size": b, "concurrent": b,
                                "input_len": i, "output_len": o} for b, i, o in pts])
        dec = _learned_decode_s(lat, g, {device.key: device})
        grid = _monotone(np.asarray(dec, dtype=float).reshape(len(B), len(I), len(O)))
        _ENVELOPES.put(key, grid)

    def cell(values, ladder, log: bool):
        """Index of each value's cell on ``ladder`` and its weight toward the upper point."""
        f = np.log2 if log else (lambda v: v)
        lo = f(np.asarray(ladder, dtype=float))
        x = np.clip(f(np.maximum(values, 1.0)), lo[0], lo[-1])
        if len(lo) == 1:
            return np.zeros(len(x), dtype=int), np.zeros_like(x)
        j = np.clip(np.searchsorted(lo, x, side="right") - 1, 0, len(lo) - 2)
        return j, (x - lo[j]) / (lo[j + 1] - lo[j])

    jb, wb = cell(bs, B, True) if not llama else (np.zeros(len(rows), dtype=int),
                                                   np.zeros(len(rows)))
    ji, wi = cell(ins, I, True)
    jo, wo = cell(outs, O, False)
    out = np.zeros(len(rows))
    for db in (0, 1):
        for di in (0, 1):
            for do in (0, 1):
                w = ((wb if db else 1 - wb) * (wi if di else 1 - wi) * (wo if do else 1 - wo))
                vb = np.minimum(jb + db, len(B) - 1)
                vi = np.minimum(ji + di, len(I) - 1)
                vo = np.minimum(jo + do, len(O) - 1)
                out += w * grid[vb, vi, vo]
    return out


def _dominance_capped(lat, rows, device, below: list) -> tuple[Any, tuple | None]:
    """Seconds of the decode steps of each row of ``rows`` on ``device``: the monotone
    envelope of the learned model (:func:`_decode_envelope`), capped at the envelope of any GPU
    of ``below`` (:func:`dominated_gpus`) that answers faster; and ``(GPU, why)`` of the one
    that capped. A GPU's whole grid is evaluated only when its learned answer at the grid
    point below the request is faster (its envelope is at least the smallest grid value of the
    request's cell, that corner's — pruning by it is exact)."""
    import numpy as np

    from perfcast.features.table import Table

    env = _decode_envelope(lat, rows, device)
    who = None
    if below:
        llama = rows["framework"].iloc[0] == "llama.cpp"
        corner = rows.copy()
        for col, dim in (("input_len", "input"), ("output_len", "output"),
                         *(() if llama else (("concurrent", "batch"),))):
            start = _ENVELOPE_START[dim]
            v = np.maximum(rows[col].to_numpy(dtype=float), start)
            corner[col] = (start * 2 ** np.floor(np.log2(v / start) + 1e-9)).astype(int)
        if not llama:
            corner["batch_size"] = corner["concurrent"]
        many = Table.concat([corner.assign(device=d.key) for d, _ in below])
        at = _learned_decode_s(lat, many, {d.key: d for d, _ in below}).reshape(len(below),
                                                                                len(rows))
        best = env
        for k in np.flatnonzero((at < env).any(axis=1)):
            other = _decode_envelope(lat, rows.assign(device=below[k][0].key), below[k][0])
            if (other < best).any():
                best, who = np.minimum(best, other), below[k]
        env = best
    return env, who


def _llama_sequences_ratio(arch, device, req: Workload, batches) -> Any:
    """For llama.cpp: the arithmetic bound of the decode steps of ``b`` concurrent sequences
    ÷ that of one sequence, for each ``b`` of ``batches`` (the weights are streamed once per
    step whatever ``b``; the KV cache and the FLOPs grow with it) — what scales the learned
    one-sequence answer, LLM-Inference-Bench having llama.cpp rows of one sequence only."""
    import numpy as np

    from perfcast.llm.physics import bound_of, request_work

    def decode_s(b: int) -> float:
        w = request_work(arch, device, batch=int(b), input_len=req.input_len,
                         output_len=req.output_len, n_devices=req.tensor_parallel,
                         precision=req.precision, engine=req.engine,
                         prompt_chunk=prompt_pass_tokens(req))
        return bound_of(w, device, req.precision).decode_s

    one = decode_s(1)
    return np.array([decode_s(b) / one if one > 0 else 1.0 for b in batches])


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
    out = GenerationPrediction(model=req.spec, device=device.key, mode="generate",
                               engine=req.engine, precision=req.precision,
                               batch_size=req.batch_size, input_len=req.input_len,
                               output_len=req.output_len, tensor_parallel=req.tensor_parallel,
                               n_batch=req.n_batch, n_ubatch=req.n_ubatch)
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
    row = Table.from_records([{"model": req.model.name, "device": device.key,
                              "n_devices": req.tensor_parallel, "framework": req.engine,
                              "precision": req.precision, "batch_size": learned_seqs,
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
                                     "(TDP − idle) × activity of the phase's memory and "
                                     "compute utilisation (llm-phase-power: ML.ENERGY, ceiling "
                                     "from Zeus), bounded by perfcast.energy")
        out.trained_on["energy_j"] = pp.trained_on
        out.notes.append(
            f"energy: prefill {p_pre:,.0f} W per device for {ttft * 1e3:,.1f} ms"
            + (f", decode {p_dec:,.0f} W for {dec * 1e3:,.0f} ms" if p_dec is not None else "")
            + f"; power between idle {idle:,.0f} W ({idle_src}) and TDP {tdp:,.0f} W"
            + (f"; llama.cpp's layer split keeps one of the {req.tensor_parallel} devices busy "
               f"at a time while generating, the others idle" if llama
               and req.tensor_parallel > 1 else ""))
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


def decode_step_seconds(req: Workload, device, batches) -> list[float]:
    """Seconds of one decode step of ``req`` (its lengths, engine, precision, devices) at each
    number of running sequences in ``batches``: the decode steps the learned model gives a
    static batch of that many requests, ÷ (output − 1) — ``tpot_ms`` of
    :func:`predict_generation` for every batch in one call of the model (what the serving
    planner, :mod:`perfcast.decisions.serving`, interpolates). llama.cpp: the learned
    one-sequence answer × the arithmetic bound's ratio of ``b`` sequences to one
    (:func:`_llama_sequences_ratio`)."""
    from perfcast.features.table import Table
    from perfcast.llm.arch import llm_arch
    from perfcast.shipped import load_shipped

    req = resolve(req)
    req.require_lengths()
    device = _completed(device, req.precision)
    if req.output_len < 2:
        raise PerfcastError("a decode step needs --output-len ≥ 2")
    llama = req.engine == "llama.cpp"
    batches = [int(b) for b in batches]
    rows = Table.from_records([{"model": req.model.name, "device": device.key,
                               "n_devices": req.tensor_parallel, "framework": req.engine,
                               "precision": req.precision, "batch_size": 1 if llama else b,
                               "concurrent": 1 if llama else b, "input_len": req.input_len,
                               "output_len": req.output_len, **_llama_settings(req)}
                              for b in batches])
    lat = load_shipped("llm-latency")
    dec, _ = _dominance_capped(lat, rows, device,
                               _dominated_if_unmeasured(lat, device, req.precision))
    if llama:
        dec = dec * _llama_sequences_ratio(llm_arch(req.spec), device, req, batches)
    return [float(v) / (req.output_len - 1) for v in dec]


WEIGHT_NOTE = {"int8": "1 byte + an fp16 scale per 128 weights",
               "int4": "½ byte + an fp16 scale per group of 128 weights (GPTQ / AWQ layout)"}


def _gguf_note(precision: str) -> str:
    from perfcast.llm.arch import GGUF_BITS

    return (f"{GGUF_BITS[precision]:.2f} bits per weight, llama.cpp's file average for "
            f"{precision}")


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
    request fits."""
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


__all__ = ["DEFAULTS", "ENGINES", "GenerationPrediction", "LLAMA_CPP_DEFAULTS",
           "LLAMA_CPP_PRECISION", "PRECISIONS", "decode_step_seconds", "max_generation_batch",
           "max_generation_context", "memory_per_device", "predict_generation",
           "prompt_pass_tokens", "resolve"]
