"""``llm-xgboost``, the LLM generation estimator — defined in :mod:`perfcast.llm.model` (the
``llm`` room, so that a generation prediction imports neither torch nor transformers) and
re-exported here beside the other predictors."""

from perfcast.llm.model import (
    ENGINE_FEATURES,
    ENGINE_PARAMS,
    ENGINES,
    GRAPH_FEATURES,
    HARDWARE_FEATURES,
    MODEL_FEATURES,
    MODES,
    PHYSICS_FEATURES,
    REQUEST_FEATURES,
    TARGETS,
    LLMGenerationPredictor,
    engine_parts,
    features,
)

__all__ = ["ENGINES", "ENGINE_FEATURES", "ENGINE_PARAMS", "GRAPH_FEATURES", "HARDWARE_FEATURES",
           "LLMGenerationPredictor", "MODEL_FEATURES", "MODES", "PHYSICS_FEATURES",
           "REQUEST_FEATURES", "TARGETS", "engine_parts", "features"]
