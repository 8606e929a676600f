"""The shipped LLM generation models (``perfcast train --recipe llm``): one
:class:`~perfcast.predictors.llm.LLMGenerationPredictor` per target, each in the formulation with
the lowest leave-one-hardware-out error on the NVIDIA GPUs in ``reports/llm/`` (the split of a
user with a new GPU):

* ``llm-latency``: LLM-Inference-Bench batch latency, ``blend`` (bound × learned factor ≥ 1:
  the engine model with its booster ⊗ the residual booster with vendor + ridge point);
* ``llm-power``: ML.ENERGY average power per GPU as a fraction of TDP (``direct``, specs),
  bounded to ``[idle, TDP]`` where it is used (:mod:`perfcast.llm.energy`).

Each is trained on every row of its source (the loaders' documented drops aside) and saved as
``<out>/llm-<target>/`` (``config.json`` + ``model.safetensors``). The shipped ones are rebuilt,
byte for byte (fixed seeds), from a checkout with::

    perfcast train --recipe llm --out perfcast/shipped

(without ``--out`` into ``<data home>/models/llm``, used through ``PERFCAST_SHIPPED_DIR``, as
every recipe). ``trained_on`` names the source file, its SHA-256 and this command. The
prediction path reads them through :func:`perfcast.shipped.load_shipped` (``llm-latency``, …).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

#: target → (source loader name, predictor parameters, directory name)
LLM_MODELS = {
    "latency_s": ("llm-inference-bench", {"target_mode": "blend", "hardware": "vendor"},
                  "llm-latency"),
    "power_per_device_w": ("mlenergy-v2", {"target_mode": "direct", "hardware": "specs"},
                           "llm-power"),
}


#: The parts ``perfcast train --recipe llm --only …`` can rebuild: the two learned models of
#: :data:`LLM_MODELS`, the prefill constants (:mod:`perfcast.training.prefill`) and the phase
#: power model (:mod:`perfcast.training.phase_power`, after the prefill it reads).
LLM_PARTS = ("latency", "power", "prefill", "phase-power")


def train_llm(out_root: str | Path | None = None, only: list[str] | None = None
              ) -> dict[str, Any]:
    """Fit and save the models of :data:`LLM_MODELS`, the prefill constants and the phase
    power model (``only``: some of :data:`LLM_PARTS`); returns where and on how many rows."""
    from perfcast.errors import unknown_choice

    for part in only or ():
        if part not in LLM_PARTS:
            raise unknown_choice("--only part of --recipe llm", part, LLM_PARTS)
    parts = list(only or LLM_PARTS)
    import hashlib

    from perfcast.datasets.llm import load_llm_bench, load_mlenergy
    from perfcast.llm.model import LLMGenerationPredictor, features
    from perfcast.paths import public_data_dir
    from perfcast.training.trainer import default_recipe_dir

    root = Path(out_root) if out_root else default_recipe_dir("llm")
    t0 = time.perf_counter()
    frames = {"llm-inference-bench": load_llm_bench, "mlenergy-v2": load_mlenergy}
    files = {"llm-inference-bench": "llm-inference-bench.csv",
             "mlenergy-v2": "mlenergy-leaderboard-v2.csv"}
    out = {}
    for target, (source, params, name) in LLM_MODELS.items():
        if {"latency_s": "latency", "power_per_device_w": "power"}[target] not in parts:
            continue
        df = frames[source]()
        X = features(df, "latency_s" if target == "latency_s" else "tpot_s")
        m = LLMGenerationPredictor(target=target, **params).fit(X, df[target].to_numpy())
        raw = (public_data_dir() / files[source]).read_bytes()
        m.trained_on_ = {"source": source, "file": files[source],
                         "sha256": hashlib.sha256(raw).hexdigest(), "records": len(df),
                         "devices": sorted(df["device"].unique().tolist()),
                         "models": int(df["model"].nunique()),
                         "engines": sorted(df["framework"].unique().tolist()),
                         "evaluation": "reports/llm/README.md",
                         "command": "perfcast train --recipe llm --out perfcast/shipped"}
        m.save(root / name)
        out[name] = {"records": len(df), "path": str(root / name)}
    if "prefill" in parts:
        from perfcast.training.prefill import train_prefill

        res = train_prefill(root)
        out["llm-prefill"] = {"records": res["records"], "path": res["path"]}
    if "phase-power" in parts:
        from perfcast.training.phase_power import train_phase_power

        res = train_phase_power(root)
        out["llm-phase-power"] = {"records": res["records"], "path": res["path"]}
    return {"models": out, "seconds": round(time.perf_counter() - t0, 1)}


__all__ = ["LLM_MODELS", "LLM_PARTS", "train_llm"]
