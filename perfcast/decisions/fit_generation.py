"""``perfcast fit --mode generate``: the most concurrent requests of the given lengths whose
memory fits a device (``--input-len`` given), or the longest prompt ``--batch-size`` requests
can hold (no ``--input-len``).

Memory per device is the serving arithmetic (weights + KV cache + activations + runtime,
:func:`perfcast.generation.memory_per_device`) — monotone in the batch and the prompt, so the
search is a bisection on it — within the device, and for vLLM within its
``gpu_memory_utilization`` share (where vLLM sizes all of it). ``--margin`` multiplies the need
when given (the engine's share is the margin otherwise). The forecast at the answer comes from
the generation engine (:func:`perfcast.request.engines.estimate`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from perfcast.decisions.common import device_of, given_or
from perfcast.errors import PerfcastError


def _largest(ok, lo: int, hi: int) -> int:
    """Largest ``v`` in ``[lo, hi]`` with ``ok(v)`` for a monotone ``ok`` (``ok(lo)`` true)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def fit_generation(req):
    """The :class:`~perfcast.decisions.fit.FitResult` of a ``--mode generate`` request (module
    docstring)."""
    from perfcast.decisions.fit import FitResult
    from perfcast.generation import memory_per_device, resolve
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.physics import MEMORY_UTILIZATION
    from perfcast.request.engines import estimate
    from perfcast.workload import MAX_SIZE

    batch_given, input_len = "batch_size" in req.given, req.value("input_len")
    if input_len is not None and batch_given:
        raise PerfcastError("give --input-len (the largest batch is searched) or --batch-size "
                            "(the longest prompt is searched, with --output-len), not both")
    if input_len is not None and req.value("output_len") is None:
        raise PerfcastError("--mode generate needs --output-len (tokens)")
    dev = device_of(req)
    if not dev.is_gpu:
        raise PerfcastError(f"--mode generate predicts GPU serving; {dev.key} is a CPU")
    if not dev.memory_mb:
        raise PerfcastError(f"the device registry has no memory size for {dev.key}")
    margin = float(given_or(req, "margin", 0.0))
    w = resolve(req.workload)
    if w.output_len is None:
        w = w.replace(output_len=1)
    arch = llm_arch(w.spec)
    share = MEMORY_UTILIZATION if w.engine == "vllm" else 1.0
    room = share * float(dev.memory_mb)

    def need(r) -> float:
        return sum(memory_per_device(arch, r).values())

    def fits(r) -> bool:
        return need(r) * (1 + margin) <= room

    notes: list[str] = []
    out: dict[str, Any] = {}
    if input_len is not None:  # the most requests of these lengths
        w.check_serving(arch)
        limit = req.value("limit")
        b = _largest(lambda v: fits(replace(w, batch_size=v)), 1, limit) \
            if fits(replace(w, batch_size=1)) else 0
        at = req.replace(batch_size=b) if b else None
        out.update(max_batch_size=b, input_len=w.input_len, output_len=w.output_len)
        what = f"{b:,} requests of {w.input_len:,} + {w.output_len:,} tokens" if b else \
            f"not one request of {w.input_len:,} + {w.output_len:,} tokens"
        if b == limit:
            notes.append(f"batch {limit:,} (the search limit) still fits")
        search = (b, b + 1, "batch_size")
    else:  # the longest prompt
        top = (arch.max_positions or MAX_SIZE) - w.output_len
        if top < 1:
            raise PerfcastError(f"{arch.model_id} holds at most {arch.max_positions:,} "
                                f"positions; --output-len {w.output_len:,} leaves no room for a "
                                f"prompt")
        top = min(top, MAX_SIZE)
        w.check_serving(arch, input_len=1)
        i = _largest(lambda v: fits(replace(w, input_len=v)), 1, top) \
            if fits(replace(w, input_len=1)) else 0
        limited = "max_positions" if i and i == top and arch.max_positions else "memory"
        at = req.replace(input_len=i, output_len=w.output_len) if i else None
        out.update(max_input_len=i, max_context_tokens=i + w.output_len if i else 0,
                   limited_by=limited, batch_size=w.batch_size, output_len=w.output_len)
        what = (f"prompts of {i:,} tokens (+ {w.output_len:,} generated) for {w.batch_size:,} "
                f"request(s), limited by {limited.replace('_', ' ')}" if i else
                f"not a 1-token prompt for {w.batch_size:,} request(s)")
        search = (i, i + 1, "input_len")
    p = estimate(at) if at is not None else None
    v, nxt, key = search
    next_mb = need(replace(w, **{key: nxt})) if v and nxt <= MAX_SIZE else None
    notes.append(f"fits {what} on {w.tensor_parallel}× {dev.key} ({w.engine}): the memory per "
                 f"device (weights + KV cache + activations + runtime)"
                 + (f" × {1 + margin:g} (--margin)" if margin else "")
                 + f" ≤ {room:,.0f} MiB"
                 + (f" (vLLM's gpu_memory_utilization {MEMORY_UTILIZATION} of "
                    f"{float(dev.memory_mb):,.0f} MiB)" if share < 1 else ""))
    if p is not None:
        notes.extend(n for n in p.notes if not n.startswith(("energy", "memory_mb")))
    llama = w.engine == "llama.cpp"
    res = FitResult(
        model=w.spec, device=dev.key, mode="generate", precision=w.precision,
        max_batch_size=out.pop("max_batch_size", None),
        memory_mb=p.memory_needed_mb if p is not None else None, next_memory_mb=next_mb,
        capacity_mb=room, margin=margin, evaluations=1 if p is not None else 0,
        time_ms=p.time_ms if p is not None else None, risk="central",
        planned_memory_mb=p.memory_needed_mb if p is not None else None,
        predictor=dict(p.predictor) if p is not None else {}, notes=notes,
        engine=w.engine, tensor_parallel=w.tensor_parallel,
        n_batch=w.n_batch if llama else None, n_ubatch=w.n_ubatch if llama else None,
        prediction=p.to_dict() if p is not None else None, **out)
    if p is not None and p.time_ms:
        res.throughput_samples_per_s = p.batch_size / p.time_ms * 1e3
    return res


__all__ = ["fit_generation"]
