"""Model-name resolution for the public datasets: timm (with pre-1.0 names) and torchvision.

Results are cached per process; nothing here builds a model.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class Resolved:
    """A source model name resolved to a perfcast spec (or the reason it could not be)."""

    raw: str
    spec: str | None = None  # "timm:<name>[.<tag>]" / "torchvision:<name>"
    arch: str | None = None  # architecture without pretrained tag
    family: str | None = None  # module the builder lives in (leave-family-out unit)
    renamed: bool = False  # mapped through timm's deprecated-name table
    reason: str | None = None  # why it could not be resolved
    default_input_size: tuple[int, ...] | None = None


@functools.lru_cache(maxsize=None)
def _timm_deprecations() -> dict[str, str | None]:
    from timm import models

    getter = getattr(models, "get_deprecated_models", None)
    if getter is not None:
        return dict(getter())
    from timm.models import _registry  # older timm: {module: {old: new}}

    out: dict[str, str | None] = {}
    for mapping in getattr(_registry, "_module_to_deprecated_models", {}).values():
        out.update(mapping)
    return out


def _timm_version() -> str:
    import timm

    return timm.__version__


def _timm_family(arch: str) -> str | None:
    from timm import models
    from timm.models import _registry

    module = getattr(_registry, "_model_to_module", {}).get(arch)
    if module:
        return module
    try:
        return models.model_entrypoint(arch).__module__.rsplit(".", 1)[-1]
    except Exception:  # noqa: BLE001 - unknown arch: no family
        return None


def _timm_default_input(name: str) -> tuple[int, ...] | None:
    from timm import models

    try:
        cfg = models.get_pretrained_cfg(name)
    except Exception:  # noqa: BLE001
        cfg = None
    size = getattr(cfg, "input_size", None) if cfg is not None else None
    return tuple(int(d) for d in size) if size else None


@functools.lru_cache(maxsize=None)
def resolve_timm(raw: str) -> Resolved:
    """Resolve a timm name as found in a benchmark file.

    Pre-1.0 names (``tv_resnet50``, ``convnext_tiny_in22ft1k`` ...) are mapped through timm's
    deprecated-name table to the current ``arch.tag`` name (the tag keeps the pretrained config,
    e.g. the 21k-class head of ``*_in21k`` models); other names go through
    :func:`perfcast.zoo.resolve_timm_name`.
    """
    from timm import models

    from perfcast.errors import PerfcastError
    from perfcast.zoo import resolve_timm_name

    name = str(raw).strip()
    deprecated = _timm_deprecations()
    renamed = False
    if name in deprecated:
        target = deprecated[name]
        if not target:
            return Resolved(raw, reason="timm name removed upstream (deprecated with no replacement)")
        resolved, renamed = target, True
    else:
        try:
            resolved = resolve_timm_name(name)
        except (PerfcastError, TypeError, KeyError):
            return Resolved(raw, reason=f"timm name not resolvable (pre-1.0 or removed name without "
                                        f"a mapping in timm {_timm_version()})")
    arch = models.get_arch_name(resolved) if hasattr(models, "get_arch_name") else resolved.split(".")[0]
    if not models.is_model(arch):
        return Resolved(raw, reason=f"timm name maps to {resolved!r}, which timm "
                                    f"{_timm_version()} cannot build")
    return Resolved(raw, spec=f"timm:{resolved}", arch=arch, family=_timm_family(arch),
                    renamed=renamed, default_input_size=_timm_default_input(resolved))


@functools.lru_cache(maxsize=None)
def _torchvision_models() -> frozenset[str]:
    import torchvision

    return frozenset(torchvision.models.list_models())


@functools.lru_cache(maxsize=None)
def resolve_torchvision(raw: str) -> Resolved:
    """Resolve a torchvision classification-model name (family = builder module name)."""
    import torchvision

    name = str(raw).strip()
    if name not in _torchvision_models():
        return Resolved(raw, reason=f"torchvision model not in this torchvision ({torchvision.__version__})")
    builder = torchvision.models.get_model_builder(name)
    family = builder.__module__.rsplit(".", 1)[-1]
    return Resolved(raw, spec=f"torchvision:{name}", arch=name, family=family)
