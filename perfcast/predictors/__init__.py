"""Predictor registry (like timm's model registry).

``create_predictor("dippm", hidden=128)`` → an unfitted estimator; ``load_predictor(path)``
→ a fitted one from ``config.json`` + ``weights.safetensors``. Register new kinds with
:func:`register_predictor` (a decorator on a :class:`~perfcast.predictors.base.Predictor`
subclass).
"""

from __future__ import annotations

import importlib
from typing import Any

from perfcast.errors import unknown_choice
from perfcast.features.records import TARGETS, FeatureSet, build_feature_set
from perfcast.predictors.base import Predictor

_REGISTRY: dict[str, type[Predictor]] = {}
# modules that register the built-in predictors (imported lazily: torch_geometric, xgboost)
_BUILTIN_MODULES = ("perfcast.predictors.gnn", "perfcast.predictors.tabular",
                    "perfcast.predictors.roofline", "perfcast.predictors.memsim",
                    "perfcast.predictors.trappm", "perfcast.predictors.crossdevice",
                    "perfcast.predictors.kernelsum", "perfcast.predictors.dnnperf",
                    "perfcast.predictors.gnnllm")
_loaded = False


def register_predictor(cls: type[Predictor]) -> type[Predictor]:
    """Class decorator adding ``cls`` under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"predictor {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


def _ensure_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for mod in _BUILTIN_MODULES:
            importlib.import_module(mod)


def list_predictors() -> list[str]:
    _ensure_builtin()
    return sorted(_REGISTRY)


def get_predictor_class(name: str) -> type[Predictor]:
    _ensure_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise unknown_choice("predictor", name, sorted(_REGISTRY)) from None


def create_predictor(name: str, **params: Any) -> Predictor:
    """An unfitted predictor ``name`` with hyper-parameters ``params``."""
    return get_predictor_class(name)(**params)


def load_predictor(path) -> Predictor:
    """A fitted predictor saved with ``Predictor.save``."""
    return Predictor.load(path)


__all__ = ["Predictor", "FeatureSet", "TARGETS", "build_feature_set", "create_predictor",
           "get_predictor_class", "list_predictors", "load_predictor", "register_predictor"]
