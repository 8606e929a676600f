"""perfcast: forecast deep-learning model performance on hardware before running there.

One object flows: **model spec → Workload → model (zoo) → ModelGraph (frontends, cache) →
features → predictor → Route → Prediction → decision**.

* :mod:`perfcast.workload` — the request (model spec, batch, input size / sequence length, mode,
  precision, optimizer), parsed and validated once;
* :mod:`perfcast.zoo` — the one builder of a workload's ``nn.Module`` and inputs;
* :mod:`perfcast.frontends`, :mod:`perfcast.cache` — its :class:`ModelGraph`;
* :mod:`perfcast.features` — node/edge matrices, static features, ``FeatureSet``;
* :mod:`perfcast.memory` — the tensor-memory simulation;
* :mod:`perfcast.predictors` — the estimators; :mod:`perfcast.training` — recipes and the
  shipped models; :mod:`perfcast.labeled`, :mod:`perfcast.datasets`,
  :mod:`perfcast.evaluation` — learning data and honest evaluation;
* :mod:`perfcast.routing` — which predictor answers each target; :mod:`perfcast.api` —
  :func:`predict`; :mod:`perfcast.parallel` — training over many GPUs;
  :mod:`perfcast.decisions` — MIG, fit, cost, rank, plan;
* :mod:`perfcast.store`, :mod:`perfcast.profiler` — measuring on the hardware you have;
  :mod:`perfcast.paths` — where everything is kept.

Each room imports only rooms below it (``scripts/check_layers.py``).
"""

from perfcast._version import __version__

#: Public names → the module defining them, imported on first use (PEP 562), so that
#: ``import perfcast.faces.cli`` stays light: the command line installs its signal handlers before
#: torch and the predictors load (a Ctrl-C during start-up is then one line, not a traceback).
_LAZY = {
    "Prediction": "perfcast.api", "load_graph": "perfcast.api", "predict": "perfcast.api",
    "CostEstimate": "perfcast.decisions", "FitResult": "perfcast.decisions",
    "MigAdvice": "perfcast.decisions", "Ranking": "perfcast.decisions",
    "estimate_cost": "perfcast.decisions", "max_batch_size": "perfcast.decisions",
    "rank": "perfcast.decisions", "recommend_mig": "perfcast.decisions",
    "PowerLimitChoice": "perfcast.decisions", "choose_power_limit": "perfcast.decisions",
    "Plan": "perfcast.decisions", "plan": "perfcast.decisions",
    "PerfcastError": "perfcast.errors",
    "Edge": "perfcast.graph", "GraphMeta": "perfcast.graph", "ModelGraph": "perfcast.graph",
    "Node": "perfcast.graph",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'perfcast' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["__version__", "load_graph", "predict", "Prediction", "recommend_mig", "MigAdvice",
           "max_batch_size", "FitResult", "estimate_cost", "CostEstimate", "rank", "Ranking",
           "choose_power_limit", "PowerLimitChoice", "plan", "Plan",
           "PerfcastError", "ModelGraph", "Node", "Edge", "GraphMeta"]
