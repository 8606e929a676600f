"""One device's step (``--mode infer`` / ``train`` on one device): the request's graph, routed
(:func:`perfcast.routing.route`) to one answer per target — the engine
:mod:`perfcast.request.engines` calls for a single device, and the step the data-parallel path
repeats per replica. Its answer, :class:`Prediction`, is the ``details`` of an
:class:`~perfcast.request.estimate.Estimate`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.request.fields import MAX_RUNTIME_OVERHEAD_MB
from perfcast.workload import Workload

#: Batch size ``predict`` uses when none is given: 1 for inference, 32 for a training step,
#: 1 request for generation.
DEFAULT_BATCH = {"infer": 1, "train": 32, "generate": 1}


@dataclass
class Prediction:
    """One forecast. ``time_ms`` is per batch (latency or training step time, ms);
    ``throughput_samples_per_s`` = batch ÷ time; ``memory_mb`` is the peak device memory (MiB);
    ``energy_j`` is per batch (J) and ``power_w`` its mean power (W). ``capacity_mb`` is the
    device's memory (MiB; for ``cpu`` this machine's RAM, as the registry detected it) and
    ``fits`` whether ``memory_mb`` ≤ ``capacity_mb`` (``None`` when either is unknown). A value no
    predictor can give is ``None`` and ``notes`` says why. Every value is physically possible: one
    a predictor gave below a physical bound is raised to it, with a note (see
    :mod:`perfcast.routing`). ``predictor`` / ``trained_on`` map each target to the
    predictor that answered it and the data it learned from. ``route`` (not serialised) holds
    the structured :class:`~perfcast.routing.Route`: per target its source and the bounds
    applied — what the decisions read."""

    model: str
    device: str
    mode: str
    precision: str
    batch_size: int
    input_size: list[int] | None = None
    seq_len: int | None = None
    #: how fp32 matmuls and convolutions ran (:data:`perfcast.workload.TF32_MODES`)
    tf32: str = "default"
    time_ms: float | None = None
    throughput_samples_per_s: float | None = None
    memory_mb: float | None = None
    energy_j: float | None = None
    power_w: float | None = None
    #: the GPU power limit (W) energy_j / power_w (and time_ms, where it binds) are for: the
    #: device's TDP unless ``power_limit_w`` was given (``None``: no energy answer)
    power_limit_w: float | None = None
    capacity_mb: float | None = None
    fits: bool | None = None
    #: calibrated intervals (:mod:`perfcast.uncertainty`): ``<key>_low`` ≤ ``<key>`` ≤
    #: ``<key>_high`` at ``coverage`` (``None`` where no calibration exists; ``intervals`` says
    #: why, per key); ``ood``: ``{score, reasons, threshold, flagged}``
    time_ms_low: float | None = None
    time_ms_high: float | None = None
    memory_mb_low: float | None = None
    memory_mb_high: float | None = None
    energy_j_low: float | None = None
    energy_j_high: float | None = None
    coverage: float | None = None
    intervals: dict[str, Any] = field(default_factory=dict)
    ood: dict[str, Any] = field(default_factory=dict)
    predictor: dict[str, str] = field(default_factory=dict)
    trained_on: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    route: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        route, self.route = self.route, None  # not serialised, and never deep-copied (it
        try:  # holds the routed request: graph, a running simulation's process handle …)
            d = asdict(self)
        finally:
            self.route = route
        d.pop("route", None)
        return d


def with_defaults(w: Workload, dev) -> tuple[Workload, str | None]:
    """``w`` with what the request left open filled in: the precision the device's shipped
    models were measured in (and the note saying so; ``None`` when given) and
    :data:`DEFAULT_BATCH` for its mode (``generate``: :data:`perfcast.generation.DEFAULTS`)."""
    from perfcast import routing

    if w.generate:
        from perfcast.generation import resolve

        return resolve(w), None
    note = None
    if w.precision is None:
        precision, note = routing.shipped_precision(dev.key, w.mode)
        w = w.replace(precision=precision)
    if w.batch_size is None:
        w = w.replace(batch_size=DEFAULT_BATCH[w.mode])
    return w, note


def check_threads(threads: int | None) -> None:
    """A thread count is an integer in 1..4096 (or ``None``: the default)."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1 or threads > 4096):
        raise PerfcastError(f"threads must be an integer in 1..4096, got {threads!r}")


def predict_workload(w: Workload, dev, *, predictor: str | None = None, use_cache: bool = True,
                     overlap_simulation: bool = False,
                     runtime_overhead_mb: float | None = None,
                     threads: int | None = None, coverage: float = 0.9,
                     power_limit_w: float | None = None) -> Prediction:
    """:func:`predict` for a parsed workload on a :class:`~perfcast.devices.Device` (what the
    decisions call for every batch or device they try)."""
    from perfcast import routing

    if w.generate:
        raise PerfcastError("this covers --mode infer and train; LLM generation is answered by "
                            "perfcast predict, fit and cost --mode generate")
    if w.distributed:
        raise PerfcastError(f"this covers one device's step; a training step over "
                            f"{w.gpus:,} GPUs ({w.layout}) is answered by perfcast predict and "
                            f"plan")
    if predictor and not routing.looks_like_path(predictor):
        routing.check_predictor_name(predictor)  # before any graph is built
    w, precision_note = with_defaults(w, dev)
    from perfcast.request.precision import adjust, routed_workload

    asked, routed = w, routed_workload(w)  # bf16-pure / fp8: routed as bf16, then physics
    if routed is not None:
        if w.precision == "fp8":
            from perfcast.devices.fp8 import require_fp8

            require_fp8(dev)  # before any graph is built
        w = routed
    if runtime_overhead_mb is not None and not 0 <= runtime_overhead_mb <= MAX_RUNTIME_OVERHEAD_MB:
        raise PerfcastError(f"runtime overhead must be in 0..{MAX_RUNTIME_OVERHEAD_MB:,} MiB, "
                            f"got {runtime_overhead_mb}")
    check_threads(threads)
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float)) \
            or not 0 < coverage < 1:
        raise PerfcastError(f"coverage must be a fraction between 0 and 1 (e.g. 0.9), "
                            f"got {coverage!r}")
    if power_limit_w is not None:  # before any graph is built
        from perfcast.energy import check_power_limit

        check_power_limit(dev, power_limit_w)
    sim_job = _start_simulation(w) if overlap_simulation and use_cache else None
    try:
        from perfcast.cache import get_graph

        graph = get_graph(routing.graph_workload(w), use_cache=use_cache)
        r = routing.route(w, dev, graph=graph, predictor=predictor, use_cache=use_cache,
                          sim_job=sim_job, overhead_mb=runtime_overhead_mb, threads=threads,
                          precision_note=precision_note, power_limit_w=power_limit_w)
    finally:
        if sim_job is not None:
            sim_job.cancel()
    out = Prediction(model=w.spec, device=dev.key, mode=w.mode, precision=w.precision,
                     batch_size=w.batch_size, input_size=r.input_size, seq_len=w.seq_len,
                     tf32=w.tf32, notes=r.notes, route=r, power_limit_w=r.power_limit_w)
    for target, ans in r.answers.items():
        setattr(out, target, ans.value)
        if ans.predictor is not None:
            out.predictor[target] = ans.predictor
        if ans.trained_on is not None:
            out.trained_on[target] = ans.trained_on
    if out.time_ms:
        out.throughput_samples_per_s = w.batch_size / out.time_ms * 1e3
    out.capacity_mb = dev.memory_mb
    if out.memory_mb is not None and out.capacity_mb is not None:
        out.fits = bool(out.memory_mb <= out.capacity_mb)
        if not out.fits:
            where = "this machine's RAM" if dev.detected else f"the {dev.key}'s memory"
            out.notes.append(f"fits: no — {out.memory_mb:,.0f} MiB predicted, "
                             f"{out.capacity_mb:,.0f} MiB in {where}")
    if out.fits is False and out.time_ms is not None:
        out.notes.append(f"time_ms: hypothetical — the run cannot execute on {dev.key} (its "
                         f"memory does not fit), so no one can measure this time; it is what "
                         f"the device would take with enough memory")
    from perfcast.uncertainty import annotate

    annotate(out, r, coverage)
    if routed is not None:
        adjust(out, asked, routed, dev, graph, use_cache)
    elif w.mode == "train":
        from perfcast.devices.fp8 import training_precision_notes

        out.notes[:0] = training_precision_notes(w.precision, dev) + w.optimizer_notes()
    from perfcast.devices.fp8 import bf16_units_note

    note = bf16_units_note(w.precision, dev)
    if note:
        out.notes.insert(0, note)
    if w.model.kind == "hf" and w.seq_len:
        from perfcast.llm.arch import positions_note

        note = positions_note(w.spec, int(w.seq_len))
        if note:
            out.notes.insert(0, note)
    if out.energy_j and out.time_ms:
        out.power_w = out.energy_j / (out.time_ms / 1e3)
    else:
        out.notes.append("power_w: needs an energy prediction")
    return out


def _start_simulation(w: Workload):
    """A :class:`~perfcast.memory.cache.SimulationJob` for ``w`` when its learning graph is not
    cached yet (the simulation then overlaps the graph's extraction), else ``None``."""
    from perfcast import routing
    from perfcast.cache import cache_path

    if not routing.simulation_applies(w):
        return None
    try:
        if cache_path(routing.graph_workload(w)).exists():
            return None
        from perfcast.zoo import import_library, resolve_input

        import_library(w)  # once, before forking: parent and child both need it
        job_workload = resolve_input(w)
    except (PerfcastError, OSError):
        return None  # the normal path reports the problem
    from perfcast.memory.cache import SimulationJob

    return SimulationJob.start(job_workload)


__all__ = ["DEFAULT_BATCH", "Prediction", "check_threads", "predict_workload", "with_defaults"]
