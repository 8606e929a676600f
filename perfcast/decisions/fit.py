"""The largest batch that fits: search over batch size with the memory prediction, in every
mode (:func:`fit_request`).

* ``--mode infer`` / ``train`` on one device: the largest batch whose predicted memory
  × (1 + margin) ≤ usable memory (full GPU or a MIG slice; for ``cpu`` this machine's RAM).
  The predicate is the one ``perfcast predict`` answers, so the answer is consistent with
  ``predict`` by construction: batch ``max_batch_size`` fits (its prediction's ``fits`` is
  true) and ``max_batch_size + 1`` does not. The predictions it reads are physically bounded
  (:mod:`perfcast.routing`: memory ≥ weights + inputs, ≥ the simulated tensors), so a batch
  whose tensors cannot exist is never answered.
* a layout over GPUs (``--data-parallel`` …): the largest global batch the layout holds with
  each replica running its share at once (no gradient accumulation: micro-batch = batch / D;
  with ``--schedule interleaved`` P micro-batches), memory per GPU against the GPU's.
* ``--mode generate``: the most concurrent requests of ``--input-len`` + ``--output-len``
  tokens whose weights + KV cache + activations fit, or without ``--input-len`` the longest
  prompt ``--batch-size`` requests can hold (:mod:`perfcast.decisions.fit_generation`).

The search brackets the boundary from a linear fit through two batches (memory is close to
affine in the batch), then bisects; a learned memory model need not be monotone, the bracket
invariant holds anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfcast.decisions.common import device_of, request_for, result_dict
from perfcast.errors import PerfcastError
from perfcast.routing import MEMORY_LOWER_BOUND

#: :class:`FitResult` fields of a layout or of ``--mode generate`` only (left out of the JSON
#: of an answer that has none).
MODE_FIELDS = ("gpus", "layout", "engine", "tensor_parallel", "n_batch", "n_ubatch",
               "input_len", "output_len", "batch_size", "max_input_len", "max_context_tokens",
               "limited_by", "prediction")


@dataclass
class FitResult:
    """``max_batch_size``: largest batch whose predicted peak × (1 + margin) ≤ ``capacity_mb``
    (MiB; ``None`` when not even batch 1 fits; with a layout the global batch, memory per GPU;
    ``--mode generate``: concurrent requests, 0 when not one fits); ``memory_mb`` its
    predicted device memory and ``next_memory_mb`` that of the batch above (MiB); ``time_ms``
    per batch and ``throughput_samples_per_s`` at ``max_batch_size``; ``evaluations``:
    predictions made.

    A layout adds ``gpus`` and ``layout`` (with the micro-batch). ``--mode generate`` adds
    ``engine``, ``tensor_parallel`` (llama.cpp: ``n_batch`` / ``n_ubatch``), ``input_len`` /
    ``output_len`` and ``prediction`` (the generation forecast at the answer); without
    ``--input-len`` the answer is the prompt instead: ``max_input_len`` (tokens),
    ``max_context_tokens`` (+ the output) for ``batch_size`` requests and ``limited_by``
    (``memory`` or ``max_positions``, the model's own limit)."""

    model: str
    device: str
    mode: str
    precision: str
    max_batch_size: int | None
    memory_mb: float | None
    next_memory_mb: float | None
    capacity_mb: float
    margin: float
    time_ms: float | None = None
    throughput_samples_per_s: float | None = None
    mig_profile: str | None = None
    evaluations: int = 0
    #: which memory the search planned with (:data:`perfcast.uncertainty.RISKS`): ``safe`` the
    #: calibrated interval's upper bound, ``central`` the point, ``optimistic`` the lower
    #: bound; ``planned_memory_mb`` that value at ``max_batch_size``, ``memory_mb_low`` /
    #: ``memory_mb_high`` its interval at ``coverage`` (``None``: no calibration — the point
    #: is planned with, and a note says so)
    risk: str = "safe"
    planned_memory_mb: float | None = None
    memory_mb_low: float | None = None
    memory_mb_high: float | None = None
    coverage: float | None = None
    predictor: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    gpus: int | None = None
    layout: dict[str, Any] | None = None
    engine: str | None = None
    tensor_parallel: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    batch_size: int | None = None
    max_input_len: int | None = None
    max_context_tokens: int | None = None
    limited_by: str | None = None
    prediction: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return result_dict(self, MODE_FIELDS)


def max_batch_size(model: Any, *, device: str, mode: str = "train",
                   precision: str | None = None, margin: float | None = None,
                   mig_profile: str | None = None, overhead_mb: float | None = None,
                   limit: int = 1 << 16, risk: str = "safe", **options: Any) -> FitResult:
    """Largest batch of ``model`` that fits on ``device`` (or its MIG slice ``mig_profile``) —
    ``perfcast fit``, every mode (module docstring).

    ``margin``: relative safety margin on the predicted memory (default 0.1 = 10 %; ``--mode
    generate``: none unless given); ``overhead_mb``: override the runtime overhead added to
    simulated memory; ``limit``: largest batch searched; ``risk``: plan with the calibrated
    interval's upper memory bound (``safe``, default), the point estimate (``central``) or the
    lower bound (``optimistic``). ``options``: the other options of ``perfcast fit`` by field
    name (``input_size``, ``seq_len``, ``optimizer``, ``predictor``, ``example_inputs``, a
    layout's ``data_parallel`` …, generation's ``input_len``, ``output_len``, ``engine`` …).
    """
    req = request_for("fit", model, device=device, mode=mode, precision=precision,
                      margin=margin, mig_profile=mig_profile, runtime_overhead_mb=overhead_mb,
                      limit=limit, risk=risk, **options)
    return fit_request(req)


def fit_request(req) -> FitResult:
    """The answer of ``perfcast fit`` to the validated request ``req`` (module docstring)."""
    if req.mode == "generate":
        from perfcast.decisions.fit_generation import fit_generation

        return fit_generation(req)
    if "batch_size" in req.given:
        raise PerfcastError("perfcast fit searches the batch; --batch-size does not apply to "
                            f"--mode {req.mode} (drop it; --limit sets the largest batch tried)")
    dev = device_of(req)
    mig_profile = req.value("mig_profile")
    profile = None
    if mig_profile:
        if req.workload is not None and req.workload.distributed:
            raise PerfcastError("--mig-profile is a slice of one GPU; it does not apply to a "
                                "layout over GPUs")
        from perfcast.decisions.mig import mig_profiles

        by_name = {p.name: p for p in mig_profiles(dev.key)}
        if mig_profile not in by_name:
            raise PerfcastError(f"unknown MIG profile {mig_profile!r} for {dev.key} "
                                f"(use {', '.join(by_name)})")
        profile = by_name[mig_profile]
        capacity = profile.usable_mb
    elif dev.memory_mb:
        capacity = dev.memory_mb
    else:
        raise PerfcastError(f"the device registry has no memory size for {dev.key}")
    return _fit_graph(req, dev, capacity, profile)


def _variants(req):
    """``(batch_of(k), variant(k), k_max)``: the batch and request of the k-th candidate —
    one device: batch k; a layout: the global batch D · (micro-batches) · k with micro-batch
    k (no gradient accumulation; interleaved: P micro-batches)."""
    limit = req.value("limit")
    w = req.workload
    if not w.distributed:
        return (lambda k: k), (lambda k: req.replace(batch_size=k)), limit
    lay = w.layout
    step = lay.data * (lay.pipeline if lay.schedule == "interleaved" else 1)
    if limit < step:
        raise PerfcastError(f"--limit {limit:,} is below the smallest global batch of the "
                            f"layout ({step:,}: one sample per micro-batch of each of the "
                            f"{lay.data} replicas)")
    return ((lambda k: step * k),
            (lambda k: req.replace(batch_size=step * k, micro_batch_size=k)), limit // step)


def _fit_graph(req, dev, capacity: float, profile) -> FitResult:
    """One device's (or a layout's) largest batch (module docstring)."""
    from perfcast.request.engines import estimate
    from perfcast.uncertainty import pick

    margin, risk, mig_profile = req.value("margin"), req.value("risk"), req.value("mig_profile")
    batch_of, variant, limit = _variants(req)
    layout = req.workload.distributed
    cache: dict[int, tuple[float, Any]] = {}

    def mem(k: int) -> float:
        if k not in cache:
            p = estimate(variant(k))
            if p.memory_mb is None:
                why = (p.route.answers["memory_mb"].notes if p.kind == "single" else p.notes)
                raise PerfcastError(f"no memory prediction for {p.model} on {dev.key} "
                                    f"{req.mode}: " + "; ".join(why))
            cache[k] = (pick(p, "memory_mb", risk), p)
        return cache[k][0]

    def fits(k: int) -> bool:
        return mem(k) * (1 + margin) <= capacity

    if not fits(1):
        lo, hi = 0, 1
    else:
        lo, hi = 1, None
        if limit > 1:
            probe = min(8, limit)
            if fits(probe):
                lo = probe
            else:
                hi = probe
        if hi is None:  # affine guess of the boundary from batches 1 and lo
            slope = (mem(lo) - mem(1)) / max(lo - 1, 1)
            guess = lo * 2 if slope <= 0 else int((capacity / (1 + margin) - mem(1)) / slope) + 1
            guess = min(limit, max(lo + 1, guess))
            while hi is None and lo < limit:
                if fits(guess):
                    lo = guess
                    if guess >= limit:
                        break
                    guess = min(limit, max(guess + 1, int(guess * 1.25)))
                else:
                    hi = guess  # bracketed: bisection below
        while hi is not None and hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid
    notes: list[str] = []
    best = cache.get(lo)
    p_ref = (best or cache[1])[1]
    label, precision = p_ref.model, p_ref.precision
    where = f"{dev.key}{' ' + mig_profile if mig_profile else ''}"
    if best is not None:
        notes.extend(n for n in p_ref.notes if not n.startswith(("energy_j", "power_w")))
    elif layout:
        notes.append(f"a global batch of {batch_of(1):,} needs {mem(1) * (1 + margin):,.0f} MiB "
                     f"per GPU with the margin; {where} has {capacity:,.0f} MiB")
        # what needs it (--finetune answers say their memory breakdown; the optimizer not
        # given, its state)
        notes.extend(n for n in p_ref.notes
                     if n.startswith(("memory per GPU (MiB)", "optimizer:")))
    else:
        notes.append(f"batch 1 needs {mem(1) * (1 + margin):,.0f} MiB with the margin; "
                     f"{where} has {capacity:,.0f} MiB")
        notes.extend(n for n in p_ref.notes if n.startswith("optimizer:"))
    if hi is None:
        notes.append(f"batch {batch_of(limit):,} (the search limit) still fits")
    if best is not None and best[1].kind == "single":
        _overhead_note(best[1], dev, margin, notes)
    out = FitResult(
        model=label, device=dev.key, mode=req.mode, precision=precision or "fp32",
        max_batch_size=batch_of(lo) or None, memory_mb=best[1].memory_mb if best else None,
        next_memory_mb=cache[hi][1].memory_mb if hi is not None and hi in cache else None,
        capacity_mb=capacity, margin=margin, mig_profile=mig_profile,
        evaluations=len(cache), predictor=dict(p_ref.predictor), notes=notes)
    out.risk, out.planned_memory_mb = risk, best[0] if best else None
    low, high = getattr(p_ref, "memory_mb_low", None), getattr(p_ref, "memory_mb_high", None)
    out.memory_mb_low, out.memory_mb_high = low, high
    out.coverage = p_ref.coverage if high is not None else None
    if risk != "central":
        if high is None:
            notes.append(f"risk {risk}: no calibrated memory interval for this answer "
                         f"({p_ref.predictor.get('memory_mb', 'no model')}) — planned with the "
                         f"point estimate")
        else:
            notes.append(f"risk {risk}: planned with the {p_ref.coverage:.0%} interval's "
                         f"{'upper' if risk == 'safe' else 'lower'} memory bound "
                         f"(--risk central: the point estimate)")
    if layout:
        out.gpus, out.layout = p_ref.gpus, dict(p_ref.layout)
        notes.append("a layout's largest global batch: each replica runs its share at once "
                     "(micro-batch = batch / D, no gradient accumulation), memory per GPU")
    if best is not None:
        p = best[1]
        out.time_ms = p.time_ms
        if p.time_ms and profile is not None:
            from perfcast.decisions.mig import slice_time_ms

            out.time_ms = slice_time_ms(p.time_ms, profile, dev)
            notes.append(f"time scaled from the full GPU to {mig_profile}'s SMs")
        if out.time_ms:
            out.throughput_samples_per_s = batch_of(lo) / out.time_ms * 1e3
    return out


def _overhead_note(p, dev, margin: float, notes: list[str]) -> None:
    """On a GPU, where memory rests on the simulated tensors: how the runtime overhead grew
    with the batch on measured models (a CPU has none: its simulated tensors are what it
    measures)."""
    mem_answer = p.route.answers["memory_mb"]
    if dev.is_gpu and (mem_answer.source == "simulation"
                       or MEMORY_LOWER_BOUND in mem_answer.bounds):
        from perfcast.memory.overhead import runtime_overhead

        rec = runtime_overhead()
        notes.append(
            f"max_batch_size rests on the simulated tensors + runtime overhead; on "
            f"{rec['growth_models']} measured models memory grew per added sample by "
            f"{rec['growth_ratio_p50']:.2f}× the simulated tensors (median; IQR "
            f"{rec['growth_ratio_p25']:.2f}–{rec['growth_ratio_p75']:.2f}) — for a safe answer "
            f"use --margin {max(margin, round(rec['growth_ratio_p75'] - 1, 2)):.2f}")


__all__ = ["FitResult", "fit_request", "max_batch_size"]
