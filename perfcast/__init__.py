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
  :func:`predict`; :mod:`perfcast.decisions` — MIG, fit, cost, rank;
* :mod:`perfcast.store`, :mod:`perfcast.profiler` — measuring on the hardware you have;
  :mod:`perfcast.paths` — where everything is kept.

Each room imports only rooms below it (``scripts/check_layers.py``).
"""

from perfcast._version import __version__
from perfcast.api import Prediction, load_graph, predict
from perfcast.decisions import (CostEstimate, FitResult, MigAdvice, Ranking, estimate_cost,
                                max_batch_size, rank, recommend_mig)
from perfcast.errors import PerfcastError
from perfcast.graph import Edge, GraphMeta, ModelGraph, Node

__all__ = ["__version__", "load_graph", "predict", "Prediction", "recommend_mig", "MigAdvice",
           "max_batch_size", "FitResult", "estimate_cost", "CostEstimate", "rank", "Ranking",
           "PerfcastError", "ModelGraph", "Node", "Edge", "GraphMeta"]
