"""The shipped LLM generation models (``perfcast train --recipe llm``): one
:class:`~perfcast.predictors.llm.LLMGenerationPredictor` per target, each in the formulation that
won leave-one-hardware-out in ``reports/llm/`` (the split of a user with new hardware):

* ``llm-latency``: LLM-Inference-Bench batch latency, ``residual`` (bound × learned factor),
  hardware as vendor + ridge point — 29 % pooled LOHO (NVIDIA 15–17 %) vs 75 % for the thesis'
  direct formulation;
* ``llm-power``: ML.ENERGY average power per GPU as a fraction of TDP (``direct``, specs).

Each is trained on every row of its source and saved under ``shipped_dir()/llm-<target>/``.
"""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path
from typing import Any

#: target → (source loader name, predictor parameters, directory name)
LLM_MODELS = {
    "latency_s": ("llm-inference-bench", {"target_mode": "residual", "hardware": "vendor"},
                  "llm-latency"),
    "power_per_device_w": ("mlenergy-v2", {"target_mode": "direct", "hardware": "specs"},
                           "llm-power"),
}


def train_llm(out_root: str | Path | None = None) -> dict[str, Any]:
    """Fit and save the models of :data:`LLM_MODELS`; returns where and on how many rows."""
    from perfcast.datasets.llm import load_llm_bench, load_mlenergy
    from perfcast.predictors.llm import LLMGenerationPredictor, features
    from perfcast.training.shipped import shipped_dir

    root = Path(out_root) if out_root else shipped_dir()
    t0 = time.perf_counter()
    frames = {"llm-inference-bench": load_llm_bench, "mlenergy-v2": load_mlenergy}
    out = {}
    for target, (source, params, name) in LLM_MODELS.items():
        df = frames[source]()
        X = features(df, "latency_s" if target == "latency_s" else "tpot_s")
        m = LLMGenerationPredictor(target=target, **params).fit(X, df[target].to_numpy())
        m.trained_on_ = {"source": source, "records": len(df),
                         "devices": sorted(df["device"].unique().tolist()),
                         "models": int(df["model"].nunique()),
                         "evaluation": "reports/llm/README.md"}
        m.save(root / name)
        out[name] = {"records": len(df), "path": str(root / name)}
    return {"models": out, "seconds": round(time.perf_counter() - t0, 1)}


def load_llm_model(target: str):
    """The shipped model of ``target`` (:data:`LLM_MODELS`), loaded once per process and
    directory."""
    from perfcast.training.shipped import shipped_dir

    return _load(str(shipped_dir() / LLM_MODELS[target][2]))


@lru_cache(maxsize=8)
def _load(path: str):
    from perfcast.predictors.llm import LLMGenerationPredictor

    return LLMGenerationPredictor.load(path)


__all__ = ["LLM_MODELS", "load_llm_model", "train_llm"]
