"""The zoo's builders for ``timm:``, ``torchvision:``, ``module:callable`` specs and in-process
``nn.Module`` objects (image and any-tensor models)."""

from __future__ import annotations

import difflib
import importlib

from perfcast.errors import ModelSpecError, PerfcastError
from perfcast.workload import Workload
from perfcast.zoo import BuiltModel, finish, image_inputs, on_meta, register_builder

DEFAULT_IMAGE = (3, 224, 224)


# --------------------------------------------------------------------------- timm
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
    close = difflib.get_close_matches(name, timm.list_models(), n=4, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ModelSpecError(f"unknown timm model {name!r}{hint} (list them with timm.list_models())")


def _timm_default(resolved: str) -> tuple[int, ...]:
    import timm

    cfg = timm.models.get_pretrained_cfg(resolved.split(".")[0])
    return tuple(getattr(cfg, "input_size", None) or DEFAULT_IMAGE) if cfg else DEFAULT_IMAGE


def create_timm_model(name: str, input_size: tuple[int, ...] | None = None):
    """Random-init timm model (current name) and its per-sample input shape.

    Models with a fixed token grid (ViT, DeiT, Swin, LeViT…) are created with ``img_size`` when
    the requested input differs from their default; others take any input size. Call inside
    ``torch.device("meta")`` for a model without weights.
    """
    import timm

    resolved = resolve_timm_name(name)
    default = _timm_default(resolved)
    shape = tuple(input_size) if input_size is not None else default
    if tuple(shape[1:]) != tuple(default[1:]):
        try:
            return timm.create_model(resolved, pretrained=False, img_size=tuple(shape[1:])), shape
        except TypeError:
            pass  # the architecture takes any input size
    return timm.create_model(resolved, pretrained=False), shape


def _build_timm(w: Workload, device: str) -> BuiltModel:
    resolved = resolve_timm_name(w.model.name)
    model, shape = on_meta(lambda: create_timm_model(resolved, w.input_size),
                           f"timm model {resolved}", device)
    return finish(model, image_inputs(w, shape, device), f"timm:{resolved}", shape, device)


def _timm_input(w: Workload) -> tuple[int, ...]:
    return w.input_size or _timm_default(resolve_timm_name(w.model.name))


# --------------------------------------------------------------------------- torchvision
def _check_torchvision(name: str) -> None:
    import torchvision

    try:
        torchvision.models.get_model_builder(name)
    except ValueError:
        close = difflib.get_close_matches(name, torchvision.models.list_models(), n=4)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ModelSpecError(f"unknown torchvision model {name!r}{hint}") from None


def _torchvision_input(w: Workload) -> tuple[int, ...]:
    return w.input_size or ((3, 299, 299) if w.model.name.startswith("inception") else DEFAULT_IMAGE)


def _build_torchvision(w: Workload, device: str) -> BuiltModel:
    import torchvision

    name = w.model.name
    _check_torchvision(name)
    kwargs: dict = {"weights": None}
    if name.startswith("inception") or name == "googlenet":
        kwargs.update(init_weights=False, aux_logits=False)
    model = on_meta(lambda: torchvision.models.get_model(name, **kwargs),
                    f"torchvision model {name}", device)
    shape = _torchvision_input(w)
    return finish(model, image_inputs(w, shape, device), f"torchvision:{name}", shape, device)


# --------------------------------------------------------------------------- callables, objects
def _build_callable(w: Workload, device: str) -> BuiltModel:
    from torch import nn

    spec = w.model.name
    mod_name, _, attr = spec.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ModelSpecError(f"cannot import {mod_name!r} for model spec {spec!r}: {exc}") from None
    fn = getattr(mod, attr, None)
    if fn is None:
        raise ModelSpecError(f"module {mod_name!r} has no attribute {attr!r}")
    try:
        model = fn if isinstance(fn, nn.Module) else on_meta(fn, spec, device)
    except SystemExit as exc:  # a callable that exits is no model builder (exit 0 said nothing)
        raise ModelSpecError(f"{spec} exited (SystemExit {exc.code!r}) instead of returning a "
                             f"torch.nn.Module") from None
    if not isinstance(model, nn.Module):
        raise ModelSpecError(f"{spec} returned {type(model).__name__}, not a torch.nn.Module")
    shape = w.input_size or DEFAULT_IMAGE
    return finish(model, image_inputs(w, shape, device), spec, shape, device)


def _build_object(w: Workload, device: str) -> BuiltModel:
    """An in-process module: its ``example_inputs``, else empty/random inputs of
    ``input_size``."""
    import torch

    model, args = w.model.module, w.model.example_inputs
    if args is None:
        if w.input_size is None:
            raise PerfcastError("give example_inputs or input_size for an nn.Module")
        args = image_inputs(w, w.input_size, device)
    first = args[0] if args else None
    shape = tuple(first.shape[1:]) if isinstance(first, torch.Tensor) and first.dim() else ()
    return finish(model, tuple(args), w.model.text, shape, device)


def _object_input(w: Workload) -> tuple[int, ...] | None:
    import torch

    if w.input_size is not None:
        return w.input_size
    args = w.model.example_inputs or ()
    first = args[0] if args else None
    return tuple(first.shape[1:]) if isinstance(first, torch.Tensor) and first.dim() else None


register_builder("timm", _build_timm, _timm_input)
register_builder("torchvision", _build_torchvision, _torchvision_input)
register_builder("module", _build_callable, lambda w: w.input_size or DEFAULT_IMAGE)
register_builder("nn.Module", _build_object, _object_input)
