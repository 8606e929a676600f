"""The model zoo: one builder from a :class:`~perfcast.workload.Workload` to an ``nn.Module`` and
its example inputs — for graph extraction, the memory simulation and the profiler alike.

``build_model(workload, device="meta")`` returns a :class:`BuiltModel`:

* ``device="meta"`` (graphs, simulation): no weights — the module is created under
  ``torch.device("meta")`` (a model that computes in ``__init__`` is initialised on the CPU
  instead, with a note) and the inputs are ``torch.empty`` meta tensors;
* any real device (``"cpu"``, ``"cuda"``; the profiler): random-init weights (timm
  ``pretrained=False``, torchvision ``weights=None``, transformers ``from_config``) moved to the
  device, random inputs (``randn`` images, ``randint`` token ids).

Builders are registered per spec kind (:func:`register_builder`), as frontends are; the default
per-sample input of a model is known without building it (:func:`default_input_size`), so a
workload's defaults can be resolved cheaply (:func:`resolve_input`). Models never load weights.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perfcast.errors import ModelSpecError, PerfcastError, reraise_interrupt
from perfcast.workload import Workload


@dataclass
class BuiltModel:
    """A workload's model: ``module`` (in train/eval mode as the workload says), ``args``
    (example inputs, batch first), ``model_id`` (canonical: ``timm:<current name>``,
    ``torchvision:<name>``, ``hf:<id>``, the callable's spec, the class name), ``input_shape``
    (per-sample shape of the first input: ``(C, H, W)`` or ``(seq_len,)``) and ``notes``."""

    module: Any
    args: tuple
    model_id: str
    input_shape: tuple[int, ...]
    notes: list[str] = field(default_factory=list)


Builder = Callable[[Workload, str], BuiltModel]
DefaultInput = Callable[[Workload], "tuple[int, ...] | None"]
_BUILDERS: dict[str, tuple[Builder, DefaultInput]] = {}


def register_builder(kind: str, builder: Builder, default_input: DefaultInput) -> None:
    """Register ``builder(workload, device) -> BuiltModel`` and ``default_input(workload)``
    (per-sample input shape when the workload gives none) for spec kind ``kind``."""
    _BUILDERS[kind] = (builder, default_input)


def _entry(workload: Workload) -> tuple[Builder, DefaultInput]:
    kind = workload.model.kind
    if kind not in _BUILDERS:
        if kind == "onnx" or workload.model.framework != "pytorch":
            what = "an ONNX file" if kind == "onnx" else f"a {workload.model.framework} model"
            raise PerfcastError(f"{workload.spec}: {what} is a graph, not a PyTorch model — "
                                f"give the PyTorch model (timm:, torchvision:, hf: or "
                                f"module:callable) for this")
        raise PerfcastError(f"no model builder for {kind}: specs")
    return _BUILDERS[kind]


def build_model(workload: Workload, device: str = "meta") -> BuiltModel:
    """The workload's model and example inputs on ``device`` (see the module docstring). Batch
    ``None`` builds batch 1. Raises :class:`ModelSpecError` for an unknown or unbuildable
    model."""
    built = _entry(workload)[0](workload, device)
    built.module.train(workload.train)
    if device == "meta" and any(p.device.type != "meta" for p in built.module.parameters()):
        built.notes.append("the model could not be built on meta; it was initialised on CPU "
                           "first")
    return built


def default_input_size(workload: Workload) -> tuple[int, ...] | None:
    """Per-sample input shape the model takes when the workload gives none (without building
    it): an image model's default ``(C, H, W)``, ``(seq_len,)`` for text models."""
    return _entry(workload)[1](workload)


def resolve_input(workload: Workload) -> Workload:
    """The workload with its default input size filled in (image and tensor models; text models
    keep ``seq_len`` as given — ``None`` is their documented default)."""
    if workload.input_size is not None or workload.model.inputs not in ("image", "tensor"):
        return workload
    shape = default_input_size(workload)
    return workload.replace(input_size=shape) if shape else workload


#: The library each spec kind's models come from (imported by :func:`import_library`).
LIBRARIES = {"timm": "timm", "torchvision": "torchvision", "hf": "transformers"}


def import_library(workload: Workload) -> None:
    """Import the model library the workload needs (before forking a child that builds the
    model too, or before measuring memory, so the import is not counted)."""
    import importlib

    lib = LIBRARIES.get(workload.model.kind)
    if lib:
        try:
            importlib.import_module(lib)
        except ImportError:
            pass  # the builder reports it


# --------------------------------------------------------------------------- shared helpers
def on_meta(factory: Callable[[], Any], what: str, device: str = "meta"):
    """``factory()`` under ``torch.device("meta")`` (no weights) — or, when that fails (a model
    computing in ``__init__``) or ``device`` is real, a normal random-init build."""
    import torch

    if device == "meta":
        try:
            with torch.device("meta"):
                return factory()
        except (KeyboardInterrupt, ModelSpecError):
            raise
        except Exception:  # noqa: BLE001 - some models compute in __init__; retry for real
            pass
    try:
        return factory()
    except (KeyboardInterrupt, ModelSpecError):
        raise
    except Exception as exc:  # noqa: BLE001
        reraise_interrupt(exc)
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise ModelSpecError(f"could not build {what}: {type(exc).__name__}: {first}") from exc


def image_inputs(workload: Workload, shape: tuple[int, ...], device: str) -> tuple:
    """One float batch of per-sample ``shape``: empty on meta, ``randn`` on a real device."""
    import torch

    full = (workload.batch_size or 1, *shape)
    if device == "meta":
        return (torch.empty(full, device="meta"),)
    return (torch.randn(full).to(device),)


def finish(module, args: tuple, model_id: str, shape: tuple[int, ...], device: str,
           notes: list[str] | None = None) -> BuiltModel:
    """Move a real model to ``device`` and wrap it up."""
    if device != "meta":
        module = module.to(device)
    return BuiltModel(module, tuple(args), model_id, tuple(int(d) for d in shape),
                      list(notes or []))


from perfcast.zoo import hf as _hf  # noqa: E402, F401  (registers the hf: builder)
from perfcast.zoo import keras_apps as _keras_apps  # noqa: E402, F401  (keras: names, inputs)
from perfcast.zoo import paddle_vision as _paddle_vision  # noqa: E402, F401  (paddle: likewise)
from perfcast.zoo import vision as _vision  # noqa: E402, F401  (timm:, torchvision:, module:, objects)
from perfcast.zoo.vision import create_timm_model, resolve_timm_name  # noqa: E402

__all__ = ["LIBRARIES", "BuiltModel", "build_model", "create_timm_model", "default_input_size",
           "import_library",
           "register_builder", "resolve_input", "resolve_timm_name"]
