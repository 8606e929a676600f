"""Labeled records → learning data: the graph store of their learning graphs
(:mod:`~perfcast.labeled.graph_store`) and feature sets of dataset frames
(:mod:`~perfcast.labeled.frames`). The layer between the datasets and the evaluation/training."""

from perfcast.labeled.frames import feature_set
from perfcast.labeled.graph_store import (
    ensure_graphs,
    learning_items,
    load_stored_graph,
)

__all__ = ["ensure_graphs", "feature_set", "learning_items", "load_stored_graph"]
