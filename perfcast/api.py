"""Python API. ``perfcast.load_graph`` mirrors ``perfcast inspect``, ``perfcast.predict``
``perfcast predict``.

Both take a model (spec string or ``nn.Module``) and the workload's options — or a ready
:class:`~perfcast.workload.Workload` — parse them once into a ``Workload`` and hand it down:
``predict`` resolves the device's defaults (batch, precision), gets the learning graph and asks
:func:`perfcast.routing.route` for one answer per target.
"""

from __future__ import annotations

from typing import Any

from perfcast.errors import PerfcastError
from perfcast.graph import ModelGraph
from perfcast.request.single import (  # noqa: F401  (the names the API always had)
    DEFAULT_BATCH,
    Prediction,
    check_threads,
    predict_workload,
    with_defaults,
)
from perfcast.workload import LAYOUT_KEYWORDS, OPTIMIZER_NOT_GIVEN, Workload


def as_workload(model: Any, *, batch_size: int | None = None, input_size: Any = None,
                seq_len: int | None = None, mode: str = "infer", precision: str | None = "fp32",
                optimizer: Any = OPTIMIZER_NOT_GIVEN,
                example_inputs: tuple | None = None, **options: Any) -> Workload:
    """``model`` if it is a :class:`Workload` (the other options must be left at their
    defaults), else ``Workload.of(model, ...)`` — ``options``: the generation fields
    (``input_len``, ``output_len``, ``engine``; llama.cpp's ``n_batch``, ``n_ubatch``) and the
    layout (``layout`` or
    ``data_parallel``, ``tensor_parallel``, ``pipeline_parallel``, ``micro_batch_size``,
    ``recompute``, ``zero``, ``schedule``). The ``optimizer`` not given is the model's source's
    (:func:`perfcast.workload.default_optimizer`: AdamW for ``hf:`` training, else SGD with
    momentum)."""
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
                     "n_ubatch", "kv_cache_dtype", "layout", "tf32", *LAYOUT_KEYWORDS)
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
               mode: str = "infer", precision: str = "fp32",
               optimizer: Any = OPTIMIZER_NOT_GIVEN,
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

def predict(model: Any, *, device: str, overlap_simulation: bool = False, **options: Any):
    """Forecast time, throughput, memory and energy of ``model`` on ``device`` — what
    ``perfcast predict`` answers, for every mode and layout: an
    :class:`~perfcast.request.estimate.Estimate` (its ``kind``: ``single``, ``parallel`` or
    ``generation``; the mode's own fields under ``details``, readable as attributes).

    ``model``: a spec string (``timm:resnet50``, ``hf:gpt2``, ``path/model.onnx``,
    ``keras:ResNet50`` …), an ``nn.Module`` with ``example_inputs`` or ``input_size``, a Keras
    model, a ``paddle.nn.Layer`` or a JAX function with ``example_inputs``, or a
    :class:`Workload`. ``options``: the options of ``perfcast predict`` by their names — every
    field of :data:`perfcast.request.fields.FIELDS` ``predict`` takes (``batch_size``,
    ``mode``, ``precision``, ``input_len``, ``data_parallel``, ``predictor``, ``coverage``,
    ``power_limit_w`` …; ``layout`` takes a :class:`~perfcast.workload.Layout`), validated by
    :meth:`perfcast.request.Request.validate`; the docs' CLI reference lists each with its
    help, unit, choices and modes. ``overlap_simulation``: when the graph is not cached yet,
    run the memory simulation in a forked child meanwhile (the CLI does: a fresh process).
    """
    from perfcast.request.engines import estimate

    return estimate(request_of("predict", model, device=device, **options),
                    overlap_simulation=overlap_simulation)


def request_of(command: str, model: Any, **options: Any):
    """The :class:`~perfcast.request.Request` of ``command`` for ``model`` and its options
    (:meth:`~perfcast.request.Request.build`)."""
    from perfcast.request import Request

    return Request.build(command, model, **options)


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
