"""perfcast: forecast deep-learning model performance on hardware before running there."""

from perfcast._version import __version__
from perfcast.api import Prediction, load_graph, predict
from perfcast.decisions import (CostEstimate, FitResult, MigAdvice, Ranking, estimate_cost,
                                max_batch_size, rank, recommend_mig)
from perfcast.errors import PerfcastError
from perfcast.graph import Edge, GraphMeta, ModelGraph, Node

__all__ = ["__version__", "load_graph", "predict", "Prediction", "recommend_mig", "MigAdvice",
           "max_batch_size", "FitResult", "estimate_cost", "CostEstimate", "rank", "Ranking",
           "PerfcastError", "ModelGraph", "Node", "Edge", "GraphMeta"]
