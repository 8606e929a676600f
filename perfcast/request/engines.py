"""The engine of each mode: how a :class:`~perfcast.request.Request` is completed (``resolve``:
the defaults it left open) and answered (``estimate`` → :class:`~perfcast.request.estimate.
Estimate`). One registry, :func:`register_engine`; :func:`engine_for` picks the first whose
``applies`` holds, :func:`estimate` runs it — what ``perfcast.predict``, every decision and
every surface call.

* ``generation`` — ``--mode generate``: :func:`perfcast.generation.predict_generation`;
* ``parallel`` — a training step over several GPUs (a :class:`~perfcast.workload.Layout`):
  :func:`perfcast.parallel.predict_parallel`, each replica's step by the ``single`` engine;
* ``single`` — one device's step: :func:`perfcast.request.single.predict_workload`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from perfcast.errors import PerfcastError
from perfcast.request.estimate import Estimate
from perfcast.request.request import Request


@dataclass(frozen=True)
class Engine:
    """``name``; ``applies(request)``; ``resolve(request)`` → the request with its mode's
    defaults filled in; ``estimate(request)`` → the engine's own answer (the estimate's
    details)."""

    name: str
    applies: Callable[[Request], bool]
    resolve: Callable[[Request], Request]
    estimate: Callable[..., object]


_ENGINES: list[Engine] = []


def register_engine(engine: Engine) -> Engine:
    """Add an engine (a later registration of the same name replaces it)."""
    _ENGINES[:] = [e for e in _ENGINES if e.name != engine.name] + [engine]
    return engine


def engines() -> list[Engine]:
    return list(_ENGINES)


def engine_for(request: Request) -> Engine:
    for e in _ENGINES:
        if e.applies(request):
            return e
    raise PerfcastError(f"no engine answers {request.mode} requests of this kind")


def _device(request: Request):
    from perfcast.devices import get_device

    if request.device is None:
        raise PerfcastError(f"perfcast {request.command} needs --device")
    dev = get_device(request.device)
    if request.options.threads is not None and dev.is_gpu:
        # --threads sets torch's CPU threads of a CPU device's run; on a GPU it changes nothing
        raise PerfcastError(f"--threads sets the threads of a CPU device's run; {dev.key} is a "
                            f"GPU (drop --threads, or use --device cpu)")
    return dev


def estimate(request: Request, **run) -> Estimate:
    """The answer to ``request`` from its mode's engine (``run``: how this process runs it —
    ``overlap_simulation``)."""
    if request.workload is None:
        raise PerfcastError(f"perfcast {request.command} needs a model")
    e = engine_for(request)
    return Estimate.of(e.estimate(e.resolve(request), **run))


# ------------------------------------------------------------------------------- the engines
def _single_estimate(r: Request, overlap_simulation: bool = False):
    from perfcast.request.single import predict_workload

    o = r.options
    if o.cluster is not None:
        raise PerfcastError("--cluster describes the GPUs of a parallel training step; give "
                            "--data-parallel, --tensor-parallel or --pipeline-parallel")
    return predict_workload(r.workload, _device(r), predictor=o.predictor,
                            use_cache=o.use_cache, overlap_simulation=overlap_simulation,
                            runtime_overhead_mb=o.runtime_overhead_mb, threads=o.threads,
                            coverage=o.coverage, power_limit_w=o.power_limit_w)


def _parallel_estimate(r: Request, **_run):
    from perfcast.parallel import predict_parallel
    from perfcast.request.single import predict_workload

    o = r.options
    dev = _device(r)

    def single(w1):
        return predict_workload(w1, dev, predictor=o.predictor, use_cache=o.use_cache,
                                runtime_overhead_mb=o.runtime_overhead_mb, threads=o.threads,
                                coverage=o.coverage, power_limit_w=o.power_limit_w)

    return predict_parallel(r.workload, dev, cluster=o.cluster, use_cache=o.use_cache,
                            power_limit_w=o.power_limit_w, single=single)


def _generation_estimate(r: Request, **_run):
    from perfcast.generation import predict_generation

    r.workload.require_lengths()
    return predict_generation(r.workload, _device(r))


def _same(r: Request) -> Request:
    return r


register_engine(Engine("generation", lambda r: r.mode == "generate", _same,
                       _generation_estimate))
register_engine(Engine("parallel", lambda r: r.workload is not None and r.workload.distributed,
                       _same, _parallel_estimate))
register_engine(Engine("single", lambda r: True, _same, _single_estimate))

__all__ = ["Engine", "engine_for", "engines", "estimate", "register_engine"]
