"""``memsim``: the tensor-memory simulation alone as a memory predictor (a baseline).

Predicts ``memory_mb`` = the simulated peak of live tensor bytes of the record's step
(:func:`perfcast.memory.simulate_memory`, carried in the ``log1p_memsim_mb`` static feature when
the feature set is built with ``memsim=True``). It learns nothing: the gap it leaves (CUDA
context, allocator reserve, workspaces — ≈ 2–3.5 GB on GPUMemNet's A100 runs) is what a learned
predictor must add. Records without a simulation are predicted NaN.
"""

from __future__ import annotations

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.predictors import register_predictor
from perfcast.predictors.base import Predictor
from perfcast.features.records import FeatureSet


@register_predictor
class MemsimPredictor(Predictor):
    name = "memsim"
    supported_targets = ("memory_mb",)
    learns = False
    uses_graphs = False
    state_format = "numpy"  # no weights (no torch to answer)

    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        for col in ("log1p_memsim_mb", "has_memsim"):
            if col not in train.static_names:
                raise PerfcastError(f"memsim: the feature set has no {col!r} column")
        if not (train.static[:, train.static_names.index("has_memsim")] > 0).any():
            raise PerfcastError("memsim: the feature set carries no memory simulation (build it "
                                "with feature_set(..., memsim=True))")

    def _predict(self, data: FeatureSet) -> np.ndarray:
        sim = np.expm1(data.static[:, data.static_names.index("log1p_memsim_mb")].astype(np.float64))
        has = data.static[:, data.static_names.index("has_memsim")] > 0
        return np.where(has, sim, np.nan)[:, None]
