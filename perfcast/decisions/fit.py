"""The largest batch that fits: search over batch size with the memory prediction.

The predicate is the one ``perfcast predict`` answers — predicted device memory × (1 + margin)
≤ usable memory (full GPU or a MIG slice; for ``cpu`` this machine's RAM) — so the answer is
consistent with ``predict`` by construction: batch ``max_batch_size`` fits (its prediction's
``fits`` is true) and ``max_batch_size + 1`` does not. The predictions it reads are physically
bounded (:mod:`perfcast.routing`: memory ≥ weights + inputs, ≥ the simulated tensors), so a
batch whose tensors cannot exist is never answered. The search
brackets the boundary from a linear fit through two batches (memory is close to affine in the
batch), then bisects; a learned memory model need not be monotone, the bracket invariant holds
anyway.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.routing import MEMORY_LOWER_BOUND


@dataclass
class FitResult:
    """``max_batch_size``: largest batch whose predicted peak × (1 + margin) ≤ ``capacity_mb``
    (MiB; ``None`` when not even batch 1 fits); ``memory_mb`` its predicted device memory and
    ``next_memory_mb`` that of the batch above (MiB); ``time_ms`` per batch and
    ``throughput_samples_per_s`` at ``max_batch_size``; ``evaluations``: predictions made."""

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def max_batch_size(model: Any, *, device: str, mode: str = "train",
                   precision: str | None = None, margin: float = 0.1,
                   mig_profile: str | None = None, overhead_mb: float | None = None,
                   limit: int = 1 << 16, risk: str = "safe", **predict_kwargs: Any) -> FitResult:
    """Largest batch of ``model`` that fits on ``device`` (or its MIG slice ``mig_profile``).

    ``margin``: relative safety margin on the predicted memory (0.1 = 10 %); ``overhead_mb``:
    override the runtime overhead added to simulated memory; ``limit``: largest batch searched;
    ``risk``: plan with the calibrated interval's upper memory bound (``safe``, default), the
    point estimate (``central``) or the lower bound (``optimistic``).
    ``predict_kwargs`` go to :func:`perfcast.predict` (``input_size``, ``seq_len``,
    ``optimizer``, ``predictor``, ``example_inputs``).
    """
    from perfcast.api import parse_request, predict_workload
    from perfcast.devices import get_device
    from perfcast.uncertainty import RISKS, pick

    if risk not in RISKS:
        from perfcast.errors import unknown_choice

        raise unknown_choice("risk", risk, RISKS)
    dev = get_device(device)
    if margin < 0:
        raise PerfcastError(f"margin must be ≥ 0, got {margin}")
    if limit < 1:
        raise PerfcastError(f"limit must be ≥ 1, got {limit}")
    profile = None
    if mig_profile:
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

    cache: dict[int, tuple[float, Any]] = {}
    w, opts = parse_request(model, mode=mode, precision=precision, **predict_kwargs)
    opts["runtime_overhead_mb"] = overhead_mb

    def mem(b: int) -> float:
        if b not in cache:
            p = predict_workload(w.replace(batch_size=b), dev, **opts)
            if p.memory_mb is None:
                raise PerfcastError(f"no memory prediction for {p.model} on {dev.key} {mode}: "
                                    + "; ".join(p.route.answers["memory_mb"].notes))
            cache[b] = (pick(p, "memory_mb", risk), p)
        return cache[b][0]

    def fits(b: int) -> bool:
        return mem(b) * (1 + margin) <= capacity

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
    label = w.spec
    best = cache.get(lo)
    if best is not None:
        p = best[1]
        label, precision = p.model, p.precision
        notes.extend(n for n in p.notes if not n.startswith(("energy_j", "power_w")))
    else:
        p0 = cache[1][1]
        label, precision = p0.model, p0.precision
        notes.append(f"batch 1 needs {mem(1) * (1 + margin):,.0f} MiB with the margin; "
                     f"{dev.key}{' ' + mig_profile if mig_profile else ''} has "
                     f"{capacity:,.0f} MiB")
    if hi is None:
        notes.append(f"batch {limit:,} (the search limit) still fits")
    mem_answer = best[1].route.answers["memory_mb"] if best is not None else None
    if mem_answer is not None and dev.is_gpu and (mem_answer.source == "simulation"
                                                  or MEMORY_LOWER_BOUND in mem_answer.bounds):
        # the GPU runtime overhead's growth with the batch (a CPU has none: its simulated
        # tensors are what it measures)
        from perfcast.memory.overhead import runtime_overhead

        rec = runtime_overhead()
        notes.append(
            f"max_batch_size rests on the simulated tensors + runtime overhead; on "
            f"{rec['growth_models']} measured models memory grew per added sample by "
            f"{rec['growth_ratio_p50']:.2f}× the simulated tensors (median; IQR "
            f"{rec['growth_ratio_p25']:.2f}–{rec['growth_ratio_p75']:.2f}) — for a safe answer "
            f"use --margin {max(margin, round(rec['growth_ratio_p75'] - 1, 2)):.2f}")
    out = FitResult(
        model=label, device=dev.key, mode=mode, precision=precision or "fp32",
        max_batch_size=lo or None, memory_mb=best[1].memory_mb if best else None,
        next_memory_mb=cache[hi][1].memory_mb if hi is not None and hi in cache else None,
        capacity_mb=capacity, margin=margin, mig_profile=mig_profile,
        evaluations=len(cache),
        predictor=dict((best or cache[1])[1].predictor), notes=notes)
    p_ref = (best or cache[1])[1]
    out.risk, out.planned_memory_mb = risk, best[0] if best else None
    out.memory_mb_low, out.memory_mb_high = p_ref.memory_mb_low, p_ref.memory_mb_high
    out.coverage = p_ref.coverage if p_ref.memory_mb_high is not None else None
    if risk != "central":
        if p_ref.memory_mb_high is None:
            notes.append(f"risk {risk}: no calibrated memory interval for this answer "
                         f"({p_ref.predictor.get('memory_mb', 'no model')}) — planned with the "
                         f"point estimate")
        else:
            notes.append(f"risk {risk}: planned with the {p_ref.coverage:.0%} interval's "
                         f"{'upper' if risk == 'safe' else 'lower'} memory bound "
                         f"(--risk central: the point estimate)")
    if best is not None:
        p = best[1]
        out.time_ms = p.time_ms
        if p.time_ms and profile is not None:
            from perfcast.decisions.mig import slice_time_ms

            out.time_ms = slice_time_ms(p.time_ms, profile, dev)
            notes.append(f"time scaled from the full GPU to {mig_profile}'s SMs")
        if out.time_ms:
            out.throughput_samples_per_s = lo / out.time_ms * 1e3
    return out
