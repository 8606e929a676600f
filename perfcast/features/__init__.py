"""Features — one system, two levels:

* graph level (:mod:`~perfcast.features.encode`, :mod:`~perfcast.features.pyg`): the node and
  edge matrices of a :class:`~perfcast.graph.ModelGraph` (layout :data:`GRAPH_LAYOUT_VERSION`)
  and the PyG ``Data`` holding them;
* record level (:mod:`~perfcast.features.records`): the static vector of a workload on its
  learning graph and the :class:`FeatureSet` predictors learn from (layout
  :data:`FEATURE_LAYOUT_VERSION`, stored with every trained predictor, which refuses to load
  against another).
"""

from perfcast.features.encode import (
    EDGE_FEATURES,
    GRAPH_LAYOUT_VERSION,
    NODE_FEATURES,
    TRAPPM_NODE_DIM,
    edge_matrix,
    node_matrix,
)
from perfcast.features.pyg import to_pyg
from perfcast.features.records import (
    FEATURE_LAYOUT_VERSION,
    REF_BATCH,
    STATIC_NAMES,
    TARGETS,
    FeatureSet,
    GraphSummary,
    build_feature_set,
    graph_data,
    learning_workload,
    static_features,
)

__all__ = ["EDGE_FEATURES", "FEATURE_LAYOUT_VERSION", "GRAPH_LAYOUT_VERSION", "NODE_FEATURES",
           "REF_BATCH", "STATIC_NAMES", "TARGETS", "TRAPPM_NODE_DIM", "FeatureSet", "GraphSummary",
           "build_feature_set", "edge_matrix", "graph_data", "learning_workload", "node_matrix",
           "static_features", "to_pyg"]
