"""perfcast: forecast deep-learning model performance on hardware before running there."""

from perfcast._version import __version__
from perfcast.api import Prediction, load_graph, predict
from perfcast.errors import PerfcastError
from perfcast.graph import Edge, GraphMeta, ModelGraph, Node

__all__ = ["__version__", "load_graph", "predict", "Prediction", "PerfcastError", "ModelGraph", "Node", "Edge", "GraphMeta"]
