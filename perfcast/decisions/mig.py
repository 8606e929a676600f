"""MIG advice: the smallest Multi-Instance-GPU profile a model fits in (DIPPM §3.5).

DIPPM's rule: the memory predicted on the full GPU is an upper bound of the memory on any slice
(measured in its Fig. 3), so the answer is the smallest profile whose usable memory exceeds it.
perfcast adds an error margin, optionally a latency SLO (the full-GPU time scaled by the slice's
share of SMs), and lists every other profile that fits as an alternative.

Profile tables: ``data/mig_profiles.json`` (override with ``$PERFCAST_MIG_PROFILES``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.paths import package_data

_DATA = package_data("decisions", "data", "mig_profiles.json")
GIB_MB = 1024.0  # MiB per GiB
#: Fraction of the nominal size assumed usable when NVIDIA's listing is not on file (H200).
NOMINAL_USABLE = 0.95


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile. ``usable_mb``: memory the instance's processes can use (MiB);
    ``compute_fraction``: its share of the GPU's SMs."""

    name: str
    compute_slices: int
    memory_slices: int
    usable_mb: float
    usable_is_estimate: bool
    max_instances: int
    sm: int | None
    media_extensions: bool
    standard: bool

    @property
    def compute_fraction(self) -> float:
        return self.compute_slices / 7.0


@lru_cache(maxsize=4)
def _tables(path: str | None) -> dict[str, Any]:
    p = Path(path) if path else _DATA
    try:
        return json.loads(p.read_text())["tables"]
    except (OSError, ValueError, KeyError) as exc:
        raise PerfcastError(f"cannot read MIG profile table {p}: {exc}") from None


def mig_devices() -> list[str]:
    """Device keys that have MIG profiles."""
    return sorted(k for t in _tables(os.environ.get("PERFCAST_MIG_PROFILES")).values()
                  for k in t["devices"])


def mig_profiles(device: str) -> list[MigProfile]:
    """Profiles of ``device`` (a registry key such as ``a100-40gb``), smallest first."""
    from perfcast.devices import get_device

    dev = get_device(device)
    for table in _tables(os.environ.get("PERFCAST_MIG_PROFILES")).values():
        if dev.key in table["devices"]:
            out = []
            for p in table["profiles"]:
                gib = p.get("usable_gib")
                est = gib is None
                if est:  # nominal size from the name, e.g. 1g.18gb → 18
                    gib = float(p["name"].split(".")[1].split("gb")[0]) * NOMINAL_USABLE
                out.append(MigProfile(
                    name=p["name"], compute_slices=int(p["compute_slices"]),
                    memory_slices=int(p["memory_slices"]), usable_mb=float(gib) * GIB_MB,
                    usable_is_estimate=est, max_instances=int(p["max_instances"]),
                    sm=p.get("sm"), media_extensions=bool(p.get("media_extensions")),
                    standard=bool(p.get("standard"))))
            return sorted(out, key=lambda q: (q.compute_slices, q.memory_slices,
                                              q.media_extensions))
    raise PerfcastError(f"{dev.key} has no MIG profiles (MIG GPUs: {', '.join(mig_devices())})")


@dataclass
class MigAdvice:
    """``profile``: the recommended profile (``None`` when nothing fits); ``memory_mb``: the
    predicted peak device memory (MiB, as ``perfcast.predict`` gives it); ``required_mb`` =
    memory × (1 + margin); ``usable_mb``/``headroom_mb`` of the recommended profile (MiB);
    ``time_ms``: predicted time per batch on the full GPU, ``slice_time_ms`` on the profile
    (scaled by its SM share); ``alternatives``: the other profiles that fit."""

    model: str
    device: str
    mode: str
    precision: str
    batch_size: int
    profile: str | None
    memory_mb: float | None
    required_mb: float | None
    usable_mb: float | None
    headroom_mb: float | None
    margin: float
    time_ms: float | None = None
    slice_time_ms: float | None = None
    latency_slo_ms: float | None = None
    profiles: str = "standard"
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    #: the memory planned with (``memory_mb``) is, by ``risk``, the calibrated interval's upper
    #: bound (``safe``), the point estimate ``memory_mb_central`` (``central``) or the lower
    #: bound (``optimistic``); ``memory_mb_low`` / ``memory_mb_high`` at ``coverage`` (``None``:
    #: no calibration, the point is planned with)
    risk: str = "safe"
    memory_mb_central: float | None = None
    memory_mb_low: float | None = None
    memory_mb_high: float | None = None
    coverage: float | None = None
    predictor: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def slice_time_ms(time_ms: float | None, profile: MigProfile, device) -> float | None:
    """Full-GPU time scaled to the profile's SMs (compute-bound scaling; ms)."""
    if time_ms is None:
        return None
    full_sm = device.sm_count
    if profile.sm and full_sm:
        return time_ms * full_sm / profile.sm
    return time_ms / profile.compute_fraction


def choose_profile(memory_mb: float, profiles: list[MigProfile], *, margin: float = 0.1,
                   time_ms: float | None = None, latency_slo_ms: float | None = None,
                   device=None, all_profiles: bool = False
                   ) -> tuple[MigProfile | None, list[tuple[MigProfile, str | None]]]:
    """DIPPM's rule: the first profile (smallest first) whose usable memory exceeds
    ``memory_mb × (1 + margin)`` and, with an SLO, whose scaled time meets it. Returns the choice
    and every candidate with ``None`` (fits) or the reason it was rejected."""
    if margin < 0:
        raise PerfcastError(f"margin must be ≥ 0, got {margin}")
    need = memory_mb * (1.0 + margin)
    chosen, verdicts = None, []
    for p in profiles:
        reason = None
        if p.usable_mb < need:
            reason = f"memory: needs {need:,.0f} MiB, has {p.usable_mb:,.0f}"
        elif latency_slo_ms is not None and time_ms is not None:
            t = slice_time_ms(time_ms, p, device) if device is not None else \
                time_ms / p.compute_fraction
            if t > latency_slo_ms:
                reason = f"latency: {t:,.1f} ms > SLO {latency_slo_ms:,.1f} ms"
        verdicts.append((p, reason))
        if reason is None and chosen is None and (all_profiles or p.standard):
            chosen = p
    return chosen, verdicts


def recommend_mig(model: Any, *, device: str = "a100-40gb", batch_size: int | None = None,
                  mode: str = "infer", precision: str | None = None,
                  latency_slo_ms: float | None = None, margin: float | None = None,
                  all_profiles: bool = False, overhead_mb: float | None = None,
                  memory_mb: float | None = None, risk: str = "safe",
                  **options: Any) -> MigAdvice:
    """Recommend a MIG profile for ``model`` on ``device`` (A100, H100, H200) — ``perfcast
    mig``, ``--mode infer``, ``train`` or ``generate`` (:func:`mig_request`).

    Memory comes from :func:`perfcast.predict` (``memory_mb=`` overrides it, e.g. with a measured
    value); ``margin``: relative error margin added to the memory (default 0.1 = 10 %;
    ``--mode generate``: none unless given); ``latency_slo_ms``: also require the slice's
    scaled time per batch to meet it; ``all_profiles``: choose among every profile (default:
    the standard even partitions DIPPM uses — the others are listed as alternatives);
    ``risk``: plan with the predicted memory's calibrated upper bound (``safe``), point
    (``central``) or lower bound (``optimistic``). ``options``: the other options of
    ``perfcast mig`` by field name (``input_size``, ``seq_len``, ``optimizer``,
    ``predictor``, ``example_inputs``; generation's ``input_len``, ``output_len``,
    ``engine`` …).
    """
    from perfcast.decisions.common import request_for

    return mig_request(request_for(
        "mig", model, device=device, batch_size=batch_size, mode=mode, precision=precision,
        latency_slo_ms=latency_slo_ms, margin=margin, all_profiles=all_profiles,
        runtime_overhead_mb=overhead_mb, memory_mb=memory_mb, risk=risk, **options))


def mig_request(req) -> MigAdvice:
    """The answer of ``perfcast mig`` to the validated request ``req`` (module docstring): the
    request's memory on the full GPU (:func:`perfcast.request.engines.estimate`; ``--mode
    generate``: the serving memory per device, within vLLM's ``gpu_memory_utilization`` share
    of the slice) against each profile's usable memory."""
    from perfcast.api import DEFAULT_BATCH
    from perfcast.decisions.common import device_of, given_or
    from perfcast.request.engines import estimate
    from perfcast.uncertainty import pick

    dev = device_of(req)
    profiles = mig_profiles(dev.key)
    v = req.value
    mode, generate = req.mode, req.mode == "generate"
    latency_slo_ms, all_profiles, memory_mb = (v("latency_slo_ms"), v("all_profiles"),
                                               v("memory_mb"))
    margin = float(given_or(req, "margin", 0.0)) if generate else v("margin")
    risk = "central" if generate else v("risk")
    notes: list[str] = []
    band: dict[str, Any] = {}
    precision, batch_size = v("precision"), v("batch_size")
    label = req.workload.spec if req.workload is not None else "given memory"
    time_ms = None
    predictor: dict[str, str] = {}
    memory_notes: list[str] = []
    if memory_mb is None or (latency_slo_ms is not None and req.workload is not None):
        if req.workload is None:
            raise PerfcastError("give a model (or --memory-mb for a known peak)")
        pred = estimate(req)
        memory_notes = (pred.route.answers["memory_mb"].notes if pred.kind == "single"
                        else [n for n in pred.notes if n.startswith("memory")])
        precision, batch_size, label = pred.precision, pred.batch_size, pred.model
        time_ms, predictor = pred.time_ms, dict(pred.predictor)
        skip = ("energy",) if generate else ("energy_j", "power_w")
        notes.extend(n for n in pred.notes if not n.startswith(skip))
        if memory_mb is None and generate:
            memory_mb = _serving_memory(pred, notes, band)
        elif memory_mb is None:
            memory_mb = pick(pred, "memory_mb", risk)
            band = {"memory_mb_central": pred.memory_mb, "memory_mb_low": pred.memory_mb_low,
                    "memory_mb_high": pred.memory_mb_high,
                    "coverage": pred.coverage if pred.memory_mb_high is not None else None}
            if risk != "central" and pred.memory_mb is not None:
                notes.append(
                    f"risk {risk}: planned with the {pred.coverage:.0%} interval's "
                    f"{'upper' if risk == 'safe' else 'lower'} memory bound "
                    f"{memory_mb:,.0f} MiB (point {pred.memory_mb:,.0f}; --risk central: the "
                    f"point)" if pred.memory_mb_high is not None else
                    f"risk {risk}: no calibrated memory interval for this answer — planned "
                    f"with the point estimate")
        else:
            predictor["memory_mb"] = "given"
    else:
        predictor["memory_mb"] = "given"
    if memory_mb is None:
        raise PerfcastError(f"no memory prediction for {label} on {dev.key}: "
                            + "; ".join(memory_notes))
    chosen, verdicts = choose_profile(memory_mb, profiles, margin=margin, time_ms=time_ms,
                                      latency_slo_ms=latency_slo_ms, device=dev,
                                      all_profiles=all_profiles)
    if latency_slo_ms is not None and time_ms is None:
        notes.append("latency SLO not checked: no time prediction")
    if any(p.usable_is_estimate for p in profiles):
        notes.append(f"usable memory of {dev.key} profiles is an estimate "
                     f"({NOMINAL_USABLE:.0%} of the nominal size; no nvidia-smi listing on file)")

    def row(p: MigProfile, reason: str | None) -> dict[str, Any]:
        return {"profile": p.name, "usable_mb": round(p.usable_mb, 1),
                "headroom_mb": round(p.usable_mb - memory_mb, 1),
                "slice_time_ms": slice_time_ms(time_ms, p, dev), "standard": p.standard,
                "compute_slices": p.compute_slices,
                "max_instances": p.max_instances, **({"reason": reason} if reason else {})}

    out = MigAdvice(
        model=label, device=dev.key, mode=mode, precision=precision or "fp32",
        batch_size=int(batch_size or DEFAULT_BATCH.get(mode, 1)),
        profile=chosen.name if chosen else None, memory_mb=float(memory_mb),
        required_mb=float(memory_mb) * (1 + margin),
        usable_mb=chosen.usable_mb if chosen else None,
        headroom_mb=chosen.usable_mb - memory_mb if chosen else None, margin=margin,
        time_ms=time_ms,
        slice_time_ms=slice_time_ms(time_ms, chosen, dev) if chosen else None,
        latency_slo_ms=latency_slo_ms, profiles="all" if all_profiles else "standard",
        alternatives=[row(p, None) for p, r in verdicts if r is None and p is not chosen],
        rejected=[row(p, r) for p, r in verdicts if r is not None],
        predictor=predictor, notes=notes, risk=risk, **band)
    if chosen is None:
        out.notes.append(f"no {dev.key} MIG profile fits {memory_mb * (1 + margin):,.0f} MiB"
                         + (f" within {latency_slo_ms:g} ms" if latency_slo_ms else "")
                         + " — use a full GPU with more memory, a smaller batch, or lower "
                           "precision")
    elif out.alternatives and not all_profiles:
        smaller = [a["profile"] for a in out.alternatives
                   if not a["standard"] and a["compute_slices"] < chosen.compute_slices]
        if smaller:
            out.notes.append(f"{', '.join(smaller)} also fit with fewer compute slices "
                             f"(non-standard profiles; --all-profiles to choose among them)")
    return out


def _serving_memory(pred, notes: list[str], band: dict[str, Any]) -> float:
    """The memory a slice must have for a generation request: its need per device (weights +
    KV cache + activations + runtime) — for vLLM ÷ its ``gpu_memory_utilization`` share, the
    part of the slice it sizes all of that in."""
    from perfcast.llm.physics import MEMORY_UTILIZATION

    need = float(pred.memory_needed_mb)
    band["memory_mb_central"] = need
    if pred.details.engine != "vllm":
        return need
    notes.append(f"memory_mb: vLLM sizes weights + KV cache within gpu_memory_utilization "
                 f"{MEMORY_UTILIZATION} of the slice: {need:,.0f} MiB needed ÷ "
                 f"{MEMORY_UTILIZATION} = {need / MEMORY_UTILIZATION:,.0f} MiB of usable memory")
    return need / MEMORY_UTILIZATION


__all__ = ["MigAdvice", "MigProfile", "choose_profile", "mig_devices", "mig_profiles",
           "mig_request", "recommend_mig", "slice_time_ms"]
