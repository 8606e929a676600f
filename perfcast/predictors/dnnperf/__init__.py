"""DNNPerf (Gao et al., ICSE-SEIP 2023): the Attention-based Node-Edge Encoder over a model
configuration's (training) graph, as the ``dnnperf`` predictor. Its accuracy and every
deviation from the paper are in ``reports/dnnperf/`` (BENCHMARKS.md).

Modules: :mod:`~perfcast.predictors.dnnperf.graph` (the configuration graph),
:mod:`~perfcast.predictors.dnnperf.network` (the ANEE network) and
:mod:`~perfcast.predictors.dnnperf.predictor` (:class:`DNNPerf`)."""

from __future__ import annotations

from perfcast.predictors.dnnperf.graph import DEVICE_FEATURES, configuration_graph
from perfcast.predictors.dnnperf.predictor import ROUNDS, DNNPerf

__all__ = ["DEVICE_FEATURES", "DNNPerf", "ROUNDS", "configuration_graph"]
