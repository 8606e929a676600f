"""Frontends: turn a model spec into a :class:`~perfcast.graph.ModelGraph`.

A spec is one of::

    path/to/model.onnx          ONNX file (external data supported)
    timm:resnet50  | resnet50   timm model (random init on the meta device)
    torchvision:resnet18        torchvision model
    hf:gpt2 | hf:path/config.json   Hugging Face architecture from its config, no weights
    my.module:make_model        a callable returning an nn.Module

Frontends are registered by prefix (:func:`register_frontend`), so later issues can add more.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perfcast.errors import ModelSpecError, PerfcastError
from perfcast.graph import ModelGraph

MODES = ("infer", "train")
PRECISIONS = ("fp32", "amp", "fp16", "bf16")
OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")


@dataclass(frozen=True)
class GraphRequest:
    """Everything that determines a graph (and its cache key)."""

    spec: str
    batch_size: int | None = None  # None: 1, or the ONNX file's own fixed batch
    input_size: tuple[int, ...] | None = None  # per-sample shape, e.g. (3, 224, 224)
    seq_len: int | None = None
    mode: str = "infer"
    precision: str = "fp32"
    optimizer: str = "sgd-momentum"
    extra: tuple = field(default_factory=tuple)

    def validate(self) -> None:
        if self.batch_size is not None and (not isinstance(self.batch_size, int)
                                            or isinstance(self.batch_size, bool)
                                            or self.batch_size <= 0):
            raise PerfcastError(f"batch size must be a positive integer, got {self.batch_size}")
        if self.mode not in MODES:
            raise PerfcastError(f"unknown mode {self.mode!r}: use infer or train")
        if self.precision not in PRECISIONS:
            raise PerfcastError(f"unknown precision {self.precision!r}: use {', '.join(PRECISIONS)}")
        if self.optimizer not in OPTIMIZERS:
            raise PerfcastError(f"unknown optimizer {self.optimizer!r}: use {', '.join(OPTIMIZERS)}")
        if self.input_size is not None and (not self.input_size
                                            or any(int(d) <= 0 for d in self.input_size)):
            raise PerfcastError(f"input size must be positive dimensions like 3,224,224, "
                                f"got {self.input_size}")
        if self.seq_len is not None and self.seq_len <= 0:
            raise PerfcastError(f"sequence length must be positive, got {self.seq_len}")


Loader = Callable[[str, GraphRequest], ModelGraph]
_FRONTENDS: dict[str, Loader] = {}


def register_frontend(prefix: str, loader: Loader) -> None:
    """Register ``loader(rest_of_spec, request)`` for specs ``"<prefix>:..."``."""
    _FRONTENDS[prefix] = loader


def frontend_names() -> list[str]:
    return sorted(_FRONTENDS)


def parse_input_size(text: str | None) -> tuple[int, ...] | None:
    """``"3,224,224"`` → ``(3, 224, 224)``; a single ``"224"`` → ``(3, 224, 224)``."""
    if text is None or text == "":
        return None
    try:
        dims = tuple(int(x) for x in str(text).replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise PerfcastError(f"bad input size {text!r}: use C,H,W like 3,224,224") from None
    if len(dims) == 1:
        dims = (3, dims[0], dims[0])
    if not dims or any(d <= 0 for d in dims):
        raise PerfcastError(f"bad input size {text!r}: every dimension must be positive")
    return dims


def split_spec(spec: str) -> tuple[str, str]:
    """Return ``(frontend, rest)`` for a model spec, without building anything."""
    spec = spec.strip()
    if not spec:
        raise ModelSpecError("empty model spec: give a timm name, an .onnx file, hf:<id>, ...")
    if ":" in spec:
        prefix, rest = spec.split(":", 1)
        if prefix in _FRONTENDS:
            return prefix, rest
    path = Path(spec)
    if spec.lower().endswith(".onnx") or path.is_file():
        if not path.exists():
            raise ModelSpecError(f"file not found: {spec}")
        return "onnx", spec
    if "/" in spec or "\\" in spec:
        raise ModelSpecError(f"file not found: {spec} (for a Hugging Face model write hf:{spec})")
    if ":" in spec:
        return "module", spec  # module.path:callable
    return "timm", spec


def build_graph(req: GraphRequest) -> ModelGraph:
    """Build (never from cache) the graph for ``req``."""
    req.validate()
    kind, rest = split_spec(req.spec)
    return _FRONTENDS[kind](rest, req)


# --------------------------------------------------------------------------- built-in loaders
def _vision_input(req: GraphRequest, default: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(req.input_size) if req.input_size is not None else tuple(default)


def _trace(model, args, req: GraphRequest, model_id: str, frontend: str) -> ModelGraph:
    from perfcast.frontends.torch_frontend import graph_from_module

    return graph_from_module(model, args, model_id=model_id, batch_size=req.batch_size or 1,
                             mode=req.mode, precision=req.precision, optimizer=req.optimizer,
                             frontend=frontend)


def _meta_input(req: GraphRequest, shape: tuple[int, ...]):
    import torch

    return torch.empty((req.batch_size or 1, *shape), device="meta")


def _build_on_meta(factory: Callable[[], object], what: str):
    """Build a model on the meta device (no weights); fall back to CPU init if that fails."""
    import torch

    try:
        with torch.device("meta"):
            return factory()
    except (KeyboardInterrupt, ModelSpecError):
        raise
    except Exception:  # noqa: BLE001 - some models compute in __init__; retry for real
        try:
            return factory()
        except Exception as exc:  # noqa: BLE001
            raise ModelSpecError(f"could not build {what}: {type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0][:200] if str(exc) else ''}") from exc


def resolve_timm_name(name: str) -> str:
    """Current timm name for ``name`` (follows timm's deprecated-name mapping)."""
    import timm

    try:
        deprecated = dict(timm.models.get_deprecated_models())  # {old name: current name}
    except Exception:  # noqa: BLE001 - older/newer timm without the helper
        deprecated = {}
    if deprecated.get(name):
        return str(deprecated[name])
    if timm.is_model(name):
        return name
    if "." in name and timm.is_model(name.split(".", 1)[0]):
        return name
    import difflib

    close = difflib.get_close_matches(name, timm.list_models(), n=4, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ModelSpecError(f"unknown timm model {name!r}{hint} (list them with timm.list_models())")


def create_timm_model(name: str, input_size: tuple[int, ...] | None = None):
    """Random-init timm model (current name) and its per-sample input shape.

    Models with a fixed token grid (ViT, DeiT, Swin, LeViT…) are created with ``img_size`` when
    the requested input differs from their default; others take any input size. Call inside
    ``torch.device("meta")`` for a model without weights.
    """
    import timm

    resolved = resolve_timm_name(name)
    cfg = timm.models.get_pretrained_cfg(resolved.split(".")[0])
    default = tuple(getattr(cfg, "input_size", None) or (3, 224, 224)) if cfg else (3, 224, 224)
    shape = tuple(input_size) if input_size is not None else default
    if tuple(shape[1:]) != tuple(default[1:]):
        try:
            return timm.create_model(resolved, pretrained=False, img_size=tuple(shape[1:])), shape
        except TypeError:
            pass  # the architecture takes any input size
    return timm.create_model(resolved, pretrained=False), shape


def timm_graphs_for_batches(name: str, input_size: tuple[int, ...] | None,
                            batch_sizes: list[int], precision: str = "fp32") -> dict[int, ModelGraph]:
    """Inference graphs of a timm model at several batch sizes (≥ 2) from one symbolic-batch
    trace — equal to ``build_graph`` per batch (the corpus builder's fast path). Raises
    :class:`TraceError` when the model specialises on the batch size."""
    import torch

    from perfcast.frontends.torch_frontend import graphs_for_batches

    resolved, model, shape = _timm_on_meta(name, input_size)
    x = torch.empty((max(batch_sizes), *shape), device="meta")
    return graphs_for_batches(model, (x,), batch_sizes, model_id=f"timm:{resolved}",
                              mode="infer", precision=precision, frontend="timm")


def _timm_on_meta(name: str, input_size: tuple[int, ...] | None):
    """``(current name, model without weights, per-sample input shape)`` of a timm model."""
    resolved = resolve_timm_name(name)
    model, shape = _build_on_meta(lambda: create_timm_model(resolved, input_size),
                                  f"timm model {resolved}")
    return resolved, model, shape


def _load_timm(name: str, req: GraphRequest) -> ModelGraph:
    resolved, model, shape = _timm_on_meta(name, req.input_size)
    return _trace(model, (_meta_input(req, shape),), req, f"timm:{resolved}", "timm")


def _load_torchvision(name: str, req: GraphRequest) -> ModelGraph:
    import torchvision

    try:
        torchvision.models.get_model_builder(name)
    except ValueError:
        names = torchvision.models.list_models()
        import difflib
        close = difflib.get_close_matches(name, names, n=4)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ModelSpecError(f"unknown torchvision model {name!r}{hint}") from None
    kwargs = {"weights": None}
    if name.startswith("inception") or name == "googlenet":
        kwargs["init_weights"] = False
        kwargs["aux_logits"] = False
    model = _build_on_meta(lambda: torchvision.models.get_model(name, **kwargs),
                           f"torchvision model {name}")
    default = (3, 299, 299) if name.startswith("inception") else (3, 224, 224)
    shape = _vision_input(req, default)
    return _trace(model, (_meta_input(req, shape),), req, f"torchvision:{name}", "torchvision")


def _load_module(spec: str, req: GraphRequest) -> ModelGraph:
    from torch import nn

    mod_name, _, attr = spec.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ModelSpecError(f"cannot import {mod_name!r} for model spec {spec!r}: {exc}") from None
    fn = getattr(mod, attr, None)
    if fn is None:
        raise ModelSpecError(f"module {mod_name!r} has no attribute {attr!r}")
    model = fn if isinstance(fn, nn.Module) else _build_on_meta(fn, spec)
    if not isinstance(model, nn.Module):
        raise ModelSpecError(f"{spec} returned {type(model).__name__}, not a torch.nn.Module")
    shape = _vision_input(req, (3, 224, 224))
    return _trace(model, (_meta_input(req, shape),), req, spec, "module")


def _load_onnx(path: str, req: GraphRequest) -> ModelGraph:
    from perfcast.frontends.onnx_frontend import graph_from_onnx

    if req.mode != "infer":
        raise PerfcastError("ONNX files hold inference graphs only; use --mode infer "
                            "(or give the PyTorch model for a training graph)")
    return graph_from_onnx(path, batch_size=req.batch_size, precision=req.precision)


def _load_hf(spec: str, req: GraphRequest) -> ModelGraph:
    from perfcast.frontends.hf import load_hf

    wrapper, args, model_id = load_hf(spec, req.batch_size or 1, req.seq_len, req.mode)
    return _trace(wrapper, args, req, model_id, "hf")


register_frontend("timm", _load_timm)
register_frontend("torchvision", _load_torchvision)
register_frontend("tv", _load_torchvision)
register_frontend("hf", _load_hf)
register_frontend("onnx", _load_onnx)
register_frontend("module", _load_module)
