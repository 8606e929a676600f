"""The models shipped inside the package (package data beside this module): one registry, one
loader, :func:`load_shipped`.

* ``manifest.json`` lists the per-device predictors and the device-conditioned ones: one entry
  per trained model with ``id``, ``device`` (:data:`ANY_GPU` for one answering every GPU, such
  as ``crossdevice-gpu``), ``mode``, ``precision``, ``targets``, ``predictor`` (registry name),
  ``path`` (directory beside the manifest), ``memsim`` (the model reads the tensor-memory
  simulation), ``trained_on``. Rebuilt from a checkout by ``perfcast train --recipe default
  --out perfcast/shipped``.
* :data:`ARTEFACTS` — the models outside the manifest, each read by its own class: the LLM
  generation models ``llm-latency`` and ``llm-power``, the prefill constants ``llm-prefill``
  (``perfcast train --recipe llm --out perfcast/shipped``), and the power model
  ``power-model`` of every step and LLM phase (``perfcast train --recipe power --out
  perfcast/shipped``; ``llm-phase-power`` names the same file).
* ``uncertainty.json`` — the calibrated intervals and OOD references of the shipped models (by
  entry ``id``; read by :mod:`perfcast.uncertainty`, located by :func:`shipped_file`), rebuilt
  by ``python benchmarks/uncertainty_report.py`` after the models change.

``$PERFCAST_SHIPPED_DIR`` replaces this directory (e.g. a ``perfcast train`` output without
``--out``, in ``<data home>/models/<recipe>``); the power model (either id) alone falls back to the
package's when that directory has none. This room is runtime: the research rooms (training,
evaluation, pretrain …) write these files, the prediction path only reads them, here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError, unknown_choice
from perfcast.paths import package_data

MANIFEST = "manifest.json"
#: ``device`` of an entry answering any GPU (a device-conditioned predictor such as
#: ``crossdevice``); ``mode`` / ``precision`` :data:`ANY` = every mode / precision.
ANY_GPU = "*gpu"
ANY = "*"
#: The calibrations of the shipped models (:mod:`perfcast.uncertainty`), beside the manifest.
CALIBRATION_FILE = "uncertainty.json"


@dataclass(frozen=True)
class Artefact:
    """A shipped model outside the manifest: its ``id``, ``path`` under the shipped directory,
    the ``kind`` of reader (:data:`READERS`) and what it answers. ``package_fallback``: read
    from the package when ``$PERFCAST_SHIPPED_DIR`` holds no such file."""

    id: str
    path: str
    kind: str
    what: str
    package_fallback: bool = False


#: The shipped models outside the manifest, by id.
ARTEFACTS: dict[str, Artefact] = {a.id: a for a in (
    Artefact("llm-latency", "llm-latency", "llm-generation",
             "LLM batch latency (perfcast.llm.model, trained on LLM-Inference-Bench)"),
    Artefact("llm-power", "llm-power", "llm-generation",
             "LLM serving power per GPU (perfcast.llm.model, trained on ML.ENERGY)"),
    Artefact("llm-prefill", "llm-prefill", "llm-prefill",
             "prefill operator and engine constants (perfcast.llm.prefill)"),
    Artefact("llm-phase-power", "power_model.json", "power-model",
             "power of the prefill and decode phases: the power model (perfcast.energy)",
             package_fallback=True),
    Artefact("power-model", "power_model.json", "power-model",
             "power of a training or inference step on a GPU (perfcast.energy)",
             package_fallback=True),
)}


def _read_predictor(path: str):
    from perfcast.predictors import load_predictor

    return load_predictor(path)


def _read_llm_generation(path: str):
    from perfcast.llm.model import LLMGenerationPredictor

    return LLMGenerationPredictor.load(path)


def _read_prefill(path: str):
    from perfcast.llm.prefill import PrefillConstants

    return PrefillConstants.load(path)


def _read_power_model(path: str):
    from perfcast.energy import PowerModel

    return PowerModel.load(path)


#: kind → the reader of a file or directory of that kind.
READERS = {"predictor": _read_predictor, "llm-generation": _read_llm_generation,
           "llm-prefill": _read_prefill, "power-model": _read_power_model}


def shipped_dir() -> Path:
    """``$PERFCAST_SHIPPED_DIR`` or the package's shipped directory (this one)."""
    env = os.environ.get("PERFCAST_SHIPPED_DIR")
    return Path(env) if env else package_data("shipped")


def shipped_file(name: str, root: Path | None = None) -> Path:
    """``name`` under ``root`` or :func:`shipped_dir` (e.g. :data:`CALIBRATION_FILE`)."""
    return (root or shipped_dir()) / name


def artefact_path(artefact_id: str) -> Path:
    """Where the shipped artefact ``artefact_id`` (:data:`ARTEFACTS`) is read from."""
    if artefact_id not in ARTEFACTS:
        raise unknown_choice("shipped artefact", artefact_id, sorted(ARTEFACTS))
    a = ARTEFACTS[artefact_id]
    path = shipped_dir() / a.path
    if a.package_fallback and os.environ.get("PERFCAST_SHIPPED_DIR") and not path.exists():
        return package_data("shipped", a.path)
    return path


def manifest(root: Path | None = None) -> list[dict[str, Any]]:
    """Entries of the shipped manifest (empty when nothing is shipped). Without ``root``, the
    user's own models (:func:`perfcast.paths.user_models_dir`, written by ``perfcast
    calibrate``) come first, each entry with its ``root``: a calibrated model answers before
    the shipped one of the same (device, mode, precision)."""
    if root is None:
        from perfcast.paths import user_models_dir

        user = user_models_dir()
        own = [{**e, "root": str(user)} for e in _read_manifest(user)] \
            if (user / MANIFEST).exists() else []
        return own + _read_manifest(shipped_dir())
    return _read_manifest(root)


def _read_manifest(root: Path) -> list[dict[str, Any]]:
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


def entry_path(entry: dict[str, Any], root: Path | None = None) -> Path:
    """The directory of a manifest entry (under its own ``root`` for a user's model)."""
    base = Path(entry["root"]) if entry.get("root") else (root or shipped_dir())
    return base / entry["path"]


@lru_cache(maxsize=64)
def _load(kind: str, path: str):
    return READERS[kind](path)


def load_entry(entry: dict[str, Any], root: Path | None = None):
    """The fitted predictor of a manifest entry (cached per process and directory)."""
    return _load("predictor", str(entry_path(entry, root)))


def load_shipped(model_id: str):
    """The shipped model ``model_id``, loaded once per process and file: an artefact of
    :data:`ARTEFACTS` (its own class) or an entry of the manifest (a fitted
    :class:`~perfcast.predictors.base.Predictor`; a user's calibrated model of that id first)."""
    if model_id in ARTEFACTS:
        return _load(ARTEFACTS[model_id].kind, str(artefact_path(model_id)))
    entries = manifest()
    for e in entries:
        if e["id"] == model_id:
            return load_entry(e)
    raise unknown_choice("shipped model", model_id,
                         sorted({*ARTEFACTS, *(e["id"] for e in entries)}))


__all__ = ["ANY", "ANY_GPU", "ARTEFACTS", "Artefact", "CALIBRATION_FILE", "MANIFEST", "READERS",
           "artefact_path", "coverage", "entry_path", "find", "find_any_gpu", "load_entry",
           "load_shipped", "manifest", "shipped_dir", "shipped_file"]
