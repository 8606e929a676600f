"""The predictors shipped inside the package (``perfcast/training/shipped/``, package data).

``manifest.json`` lists one entry per trained model: ``id``, ``device``, ``mode``,
``precision``, ``targets``, ``predictor`` (registry name), ``path`` (directory beside the
manifest), ``memsim`` (the model reads the tensor-memory simulation), ``trained_on``.
Rebuilt from a checkout by ``perfcast train --recipe default --out perfcast/training/shipped``
(see :mod:`perfcast.training.trainer`). Beside it, ``uncertainty.json`` holds the calibrated
intervals and OOD references of the shipped models (by entry ``id``; :mod:`perfcast.uncertainty`),
rebuilt by ``python benchmarks/uncertainty_report.py`` after the models change.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.paths import package_data

MANIFEST = "manifest.json"
#: ``device`` of an entry answering any GPU (a device-conditioned predictor such as
#: ``crossdevice``); ``mode`` / ``precision`` :data:`ANY` = every mode / precision.
ANY_GPU = "*gpu"
ANY = "*"


def shipped_dir() -> Path:
    """``$PERFCAST_SHIPPED_DIR`` or the package's ``shipped/`` directory."""
    env = os.environ.get("PERFCAST_SHIPPED_DIR")
    return Path(env) if env else package_data("training", "shipped")


def manifest(root: Path | None = None) -> list[dict[str, Any]]:
    """Entries of the shipped manifest (empty when nothing is shipped). Without ``root``, the
    user's own models (:func:`perfcast.paths.user_models_dir`, written by ``perfcast
    calibrate``) come first, each entry with its ``root``: a calibrated model answers before
    the shipped one of the same (device, mode, precision)."""
    if root is None:
        from perfcast.paths import user_models_dir

        user = user_models_dir()
        own = [{**e, "root": str(user)} for e in _read(user)] if (user / MANIFEST).exists() \
            else []
        return own + _read(shipped_dir())
    return _read(root)


def _read(root: Path) -> list[dict[str, Any]]:
    path = root / MANIFEST
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PerfcastError(f"{path}: unreadable manifest ({exc})") from None
    return list(doc.get("models", []))


def find(device: str, mode: str, precision: str, target: str,
         predictor: str | None = None, root: Path | None = None) -> dict[str, Any] | None:
    """The shipped entry answering ``target`` for (device, mode, precision) — the first listed
    (the recipe lists the evaluation's winner first) or the one of kind ``predictor``."""
    for e in manifest(root):
        if (e["device"], e["mode"], e["precision"]) != (device, mode, precision):
            continue
        if target not in e["targets"]:
            continue
        if predictor and e["predictor"] != predictor:
            continue
        return e
    return None


def find_any_gpu(target: str, predictor: str | None = None,
                 root: Path | None = None) -> dict[str, Any] | None:
    """The shipped entry answering ``target`` on any GPU (:data:`ANY_GPU`), or of kind
    ``predictor``; ``None`` when nothing device-conditioned is shipped."""
    for e in manifest(root):
        if e["device"] == ANY_GPU and target in e["targets"] and (
                not predictor or e["predictor"] == predictor):
            return e
    return None


def coverage(root: Path | None = None) -> list[tuple[str, str, str, str, str]]:
    """``(device, mode, precision, target, predictor)`` for every shipped model."""
    return [(e["device"], e["mode"], e["precision"], t, e["predictor"])
            for e in manifest(root) for t in e["targets"]]


@lru_cache(maxsize=64)
def _load(path: str):
    from perfcast.predictors import load_predictor

    return load_predictor(path)


def load_entry(entry: dict[str, Any], root: Path | None = None):
    """The fitted predictor of a manifest entry (cached per process)."""
    root = Path(entry["root"]) if entry.get("root") else (root or shipped_dir())
    return _load(str(root / entry["path"]))
