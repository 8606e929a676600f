"""Frontends: a :class:`~perfcast.workload.Workload`'s computation graph
(:class:`~perfcast.graph.ModelGraph`).

PyTorch models (every spec kind with a :mod:`perfcast.zoo` builder — ``timm:``,
``torchvision:``, ``hf:``, ``module:callable``, in-process modules) are built on the meta device
by the zoo and traced by :mod:`perfcast.frontends.torch_frontend`; ONNX files are read by
:mod:`perfcast.frontends.onnx`; TensorFlow / Keras, PaddlePaddle and JAX models are exported to
ONNX by their frameworks' exporters and then read the same way (:mod:`perfcast.frontends.exported`,
optional extras). Other frontends register by spec kind
(:func:`register_frontend`, after :func:`perfcast.workload.register_spec_kind`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from perfcast.errors import PerfcastError
from perfcast.graph import ModelGraph
from perfcast.workload import DEFAULT_OPTIMIZER, Workload

Loader = Callable[[Workload], ModelGraph]
_FRONTENDS: dict[str, Loader] = {}


def register_frontend(kind: str, loader: Loader) -> None:
    """Register ``loader(workload) -> ModelGraph`` for the spec kind ``kind``."""
    _FRONTENDS[kind] = loader


def frontend_names() -> list[str]:
    return sorted(_FRONTENDS)


def build_graph(workload: Workload) -> ModelGraph:
    """Build (never from cache — see :func:`perfcast.cache.get_graph`) the workload's graph."""
    workload.validate()
    if workload.precision is None:
        raise PerfcastError("choose a precision to build a graph")
    loader = _FRONTENDS.get(workload.model.kind, _trace_torch)
    return loader(workload)


def build_graphs(workload: Workload, batch_sizes: Iterable[int]) -> dict[int, ModelGraph]:
    """Inference graphs of a PyTorch model at several batch sizes (≥ 2) from one
    symbolic-batch trace — equal to :func:`build_graph` per batch (the corpus builder's fast
    path). Raises :class:`~perfcast.errors.TraceError` when the model specialises on the
    batch size."""
    from perfcast.frontends.torch_frontend import graphs_for_batches
    from perfcast.zoo import build_model

    sizes = sorted({int(b) for b in batch_sizes})
    built = build_model(workload.replace(batch_size=max(sizes)), "meta")
    return graphs_for_batches(built.module, built.args, sizes, model_id=built.model_id,
                              mode=workload.mode, precision=workload.precision,
                              optimizer=workload.optimizer or DEFAULT_OPTIMIZER,
                             frontend=_frontend_name(workload))


def _frontend_name(workload: Workload) -> str:
    kind = workload.model.kind
    return "torch" if kind == "nn.Module" else kind


def _trace_torch(workload: Workload) -> ModelGraph:
    from perfcast.frontends.torch_frontend import graph_from_module
    from perfcast.zoo import build_model

    built = build_model(workload, "meta")
    first = built.args[0] if built.args else None
    batch = workload.batch_size or (int(first.shape[0]) if getattr(first, "dim", None)
                                    and first.dim() else 1)
    return graph_from_module(built.module, built.args, model_id=built.model_id,
                             batch_size=batch, mode=workload.mode, precision=workload.precision,
                             optimizer=workload.optimizer or DEFAULT_OPTIMIZER,
                             frontend=_frontend_name(workload))


def _load_onnx(workload: Workload) -> ModelGraph:
    from perfcast.frontends.onnx import graph_from_onnx

    if workload.mode != "infer":
        raise PerfcastError("ONNX files hold inference graphs only; use --mode infer "
                            "(or give the PyTorch model for a training graph)")
    return graph_from_onnx(workload.model.name, batch_size=workload.batch_size,
                           precision=workload.precision, input_size=workload.input_size,
                           seq_len=workload.seq_len)


def _load_exported(workload: Workload) -> ModelGraph:
    from perfcast.frontends.exported import load_workload

    return load_workload(workload)


register_frontend("onnx", _load_onnx)
# TensorFlow / Keras, PaddlePaddle and JAX through their ONNX exporters (optional extras)
for _kind in ("keras", "tensorflow", "keras.Model", "paddle", "pdmodel", "paddle.Layer", "jax",
              "jax.function"):
    register_frontend(_kind, _load_exported)

__all__ = ["build_graph", "build_graphs", "frontend_names", "register_frontend"]
