"""Python API. ``perfcast.load_graph`` mirrors ``perfcast inspect``, ``perfcast.predict``
``perfcast predict``.

Both take a model (spec string or ``nn.Module``) and the workload's options — or a ready
:class:`~perfcast.workload.Workload` — parse them once into a ``Workload`` and hand it down:
``predict`` resolves the device's defaults (batch, precision), gets the learning graph and asks
:func:`perfcast.routing.route` for one answer per target.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.graph import ModelGraph
from perfcast.workload import DEFAULT_OPTIMIZER, LAYOUT_KEYWORDS, Workload


def as_workload(model: Any, *, batch_size: int | None = None, input_size: Any = None,
                seq_len: int | None = None, mode: str = "infer", precision: str | None = "fp32",
                optimizer: str = DEFAULT_OPTIMIZER,
                example_inputs: tuple | None = None, **options: Any) -> Workload:
    """``model`` if it is a :class:`Workload` (the other options must be left at their
    defaults), else ``Workload.of(model, ...)`` — ``options``: the generation fields
    (``input_len``, ``output_len``, ``engine``; llama.cpp's ``n_batch``, ``n_ubatch``) and the
    layout (``layout`` or
    ``data_parallel``, ``tensor_parallel``, ``pipeline_parallel``, ``micro_batch_size``,
    ``recompute``, ``zero``, ``schedule``)."""
    if isinstance(model, Workload):
        given = {"batch_size": batch_size, "input_size": input_size, "seq_len": seq_len,
                 "example_inputs": example_inputs, **options}
        if any(v is not None for v in given.values()):
            raise PerfcastError("give the options in the Workload, not beside it: "
                                + ", ".join(k for k, v in given.items() if v is not None))
        return model
    options = {k: v for k, v in options.items() if v is not None}
    return Workload.of(model, batch_size=batch_size, input_size=input_size, seq_len=seq_len,
                       mode=mode, precision=precision, optimizer=optimizer,
                       example_inputs=example_inputs, **options)


#: Keywords of :func:`predict` that describe the workload, and those that choose how to predict.
WORKLOAD_KEYWORDS = ("batch_size", "input_size", "seq_len", "mode", "precision", "optimizer",
                     "example_inputs", "input_len", "output_len", "engine", "n_batch",
                     "n_ubatch", "layout", "tf32", *LAYOUT_KEYWORDS)
PREDICT_OPTIONS = ("predictor", "use_cache", "overlap_simulation", "runtime_overhead_mb",
                   "threads", "coverage", "power_limit_w", "cluster")


def parse_request(model: Any, **kwargs: Any) -> tuple[Workload, dict[str, Any]]:
    """Split :func:`predict`'s keywords into the :class:`Workload` (parsed and validated once;
    ``precision`` defaults to ``None`` = each device's measured one) and the prediction options
    (``predictor``, ``use_cache``, ``overlap_simulation``, ``runtime_overhead_mb`` …) — what
    the decisions do once before predicting many batches or devices."""
    unknown = sorted(set(kwargs) - set(WORKLOAD_KEYWORDS) - set(PREDICT_OPTIONS))
    if unknown:
        raise PerfcastError(f"unknown keyword(s) {', '.join(unknown)} (workload: "
                            f"{', '.join(WORKLOAD_KEYWORDS)}; options: "
                            f"{', '.join(PREDICT_OPTIONS)})")
    spec = {k: kwargs[k] for k in WORKLOAD_KEYWORDS if k in kwargs}
    spec.setdefault("precision", None)
    return as_workload(model, **spec), {k: kwargs[k] for k in PREDICT_OPTIONS if k in kwargs}


def load_graph(model: Any, *, batch_size: int | None = None,
               input_size: tuple[int, ...] | str | None = None, seq_len: int | None = None,
               mode: str = "infer", precision: str = "fp32", optimizer: str = DEFAULT_OPTIMIZER,
               example_inputs: tuple | None = None, use_cache: bool = True) -> ModelGraph:
    """Computation graph of ``model``: a spec string (``timm:resnet50``, ``hf:gpt2``, ``model.onnx`` …), an ``nn.Module`` or a
    :class:`Workload` — or, with the framework's extra, a Keras model, a ``paddle.nn.Layer``
    or a JAX function (see :meth:`perfcast.workload.ModelSpec.of_object`).

    For an ``nn.Module`` give ``example_inputs`` (meta tensors are best: nothing is computed) or
    an ``input_size`` (per sample, e.g. ``(3, 224, 224)``); module graphs are not cached. A
    ``paddle.nn.Layer`` and a JAX function need ``example_inputs`` too (their shapes only).
    """
    from perfcast.cache import get_graph

    w = as_workload(model, batch_size=batch_size, input_size=input_size, seq_len=seq_len,
                    mode=mode, precision=precision, optimizer=optimizer,
                    example_inputs=example_inputs)
    return get_graph(w, use_cache=use_cache)


# --------------------------------------------------------------------------------------------
# predict
# --------------------------------------------------------------------------------------------

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


def predict(model: Any, *, device: str, batch_size: int | None = None,
            input_size: tuple[int, ...] | str | None = None, seq_len: int | None = None,
            mode: str = "infer", precision: str | None = None, optimizer: str = DEFAULT_OPTIMIZER,
            predictor: str | None = None, example_inputs: tuple | None = None,
            use_cache: bool = True, overlap_simulation: bool = False,
            runtime_overhead_mb: float | None = None, threads: int | None = None,
            coverage: float = 0.9, power_limit_w: float | None = None,
            input_len: int | None = None, output_len: int | None = None,
            engine: str | None = None, cluster: Any = None, tf32: str | None = None,
            n_batch: int | None = None, n_ubatch: int | None = None, **layout: Any):
    """Forecast time, memory and energy of ``model`` on ``device`` — what ``perfcast predict``
    answers, for every mode.

    ``model``: a spec string (``timm:resnet50``, ``hf:gpt2``, ``path/model.onnx``,
    ``keras:ResNet50`` …), an ``nn.Module`` with ``example_inputs`` or ``input_size``, a Keras
    model, a ``paddle.nn.Layer`` or a JAX function with ``example_inputs``, or a
    :class:`Workload`.
    ``mode``: ``infer`` / ``train`` (a :class:`Prediction`) or ``generate`` (an ``hf:`` LLM
    serving ``batch_size`` concurrent requests of ``input_len`` → ``output_len`` tokens with
    ``engine`` on ``tensor_parallel`` devices: a :class:`~perfcast.generation.
    GenerationPrediction`; ``n_batch`` / ``n_ubatch``: llama.cpp's logical and physical batch,
    tokens — default 2,048 / 512 as llama-bench).
    ``layout`` keywords (``data_parallel``, ``tensor_parallel``, ``pipeline_parallel``,
    ``micro_batch_size``, ``recompute``, ``zero``, ``schedule``) spread a training step over
    GPUs (``batch_size`` is then the global batch; ``cluster``: a
    :class:`~perfcast.parallel.Cluster`, a cluster JSON file or ``None`` for the device's
    defaults): a :class:`~perfcast.parallel.ParallelPrediction`.
    ``predictor``: a registry name to pick among the shipped models (e.g. ``xgboost``, ``dippm``,
    ``roofline``) or the directory of a saved predictor (``perfcast train`` output).
    ``precision=None``: the precision perfcast has measurements for on that device and mode when
    there is exactly one (e.g. ``amp`` for the RTX 3090 training data), else ``fp32`` — a note
    says which was used (``generate``: fp16). GPUs without labeled data of their own are
    answered by ``crossdevice`` (their spec sheet), memory without a learned model by the
    tensor-memory simulation, and ``notes`` say so.
    ``runtime_overhead_mb``: GPU memory beyond live tensors added to simulated memory (default:
    the median measured on real runs, see :mod:`perfcast.memory.overhead`; 0 = tensors only).
    ``threads``: CPU threads the model runs with (CPU devices; default: this machine's usable
    cores as the registry detects them for ``cpu``, unset for other CPUs).
    ``overlap_simulation``: when the graph is not cached yet, run the memory simulation in a
    forked child process meanwhile (the CLI does: a fresh process; ≈ 1 s off a cold start).
    ``coverage``: of the calibrated intervals ``<key>_low`` / ``<key>_high`` (see
    :mod:`perfcast.uncertainty`).
    ``power_limit_w``: the GPU's power limit (W, within its range; default its TDP): energy and
    power at that limit, and the time where the limit binds (:mod:`perfcast.energy`).
    ``tf32``: how fp32 matmuls and convolutions run on GPUs with TF32 units
    (:data:`perfcast.workload.TF32_MODES`; default PyTorch's: convolutions TF32, matmuls FP32).
    """
    from perfcast.devices import get_device

    dev = get_device(device)
    w = as_workload(model, batch_size=batch_size, input_size=input_size, seq_len=seq_len,
                    mode=mode, precision=precision, optimizer=optimizer,
                    example_inputs=example_inputs, input_len=input_len, output_len=output_len,
                    engine=engine, tf32=tf32, n_batch=n_batch, n_ubatch=n_ubatch, **layout)
    return predict_request(w, dev, predictor=predictor, use_cache=use_cache,
                           overlap_simulation=overlap_simulation,
                           runtime_overhead_mb=runtime_overhead_mb, threads=threads,
                           coverage=coverage, power_limit_w=power_limit_w, cluster=cluster)


def predict_request(w: Workload, dev, *, cluster: Any = None, **options: Any):
    """The answer to a parsed workload of any mode on a :class:`~perfcast.devices.Device`:
    :func:`perfcast.generation.predict_generation` for ``generate``,
    :func:`perfcast.parallel.predict_parallel` for a training step over several GPUs, else
    :func:`predict_workload`. ``options``: those of :func:`predict_workload` (the generation
    and parallel paths refuse the ones that do not apply to them)."""
    given = {k: v for k, v in options.items() if v is not None and v is not False
             and k in ("predictor", "runtime_overhead_mb", "threads", "power_limit_w")}
    if w.generate:
        if given or cluster is not None:
            raise PerfcastError(f"{', '.join([*given, *(['cluster'] if cluster else [])])} do "
                                f"not apply to --mode generate")
        from perfcast.generation import predict_generation

        return predict_generation(w, dev)
    if w.distributed:
        from perfcast.parallel import predict_parallel

        single = {k: v for k, v in options.items() if k not in ("overlap_simulation",)}
        return predict_parallel(
            w, dev, cluster=cluster, use_cache=options.get("use_cache", True),
            power_limit_w=options.get("power_limit_w"),
            single=lambda w1: predict_workload(w1, dev, **single))
    if cluster is not None:
        raise PerfcastError("--cluster describes the GPUs of a parallel training step; give "
                            "--data-parallel, --tensor-parallel or --pipeline-parallel")
    return predict_workload(w, dev, **options)


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
    if runtime_overhead_mb is not None and not runtime_overhead_mb >= 0:
        raise PerfcastError(f"runtime overhead must be ≥ 0 MiB, got {runtime_overhead_mb}")
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


__all__ = [
    "DEFAULT_BATCH",
    "PREDICT_OPTIONS",
    "WORKLOAD_KEYWORDS",
    "Prediction",
    "as_workload",
    "check_threads",
    "load_graph",
    "parse_request",
    "predict",
    "predict_request",
    "predict_workload",
    "with_defaults",
]
