"""Features — one system, two levels:

* graph level (:mod:`~perfcast.features.encode`, :mod:`~perfcast.features.pyg`): the node and
  edge matrices of a :class:`~perfcast.graph.ModelGraph` (layout :data:`GRAPH_LAYOUT_VERSION`)
  and the PyG ``Data`` holding them;
* record level (:mod:`~perfcast.features.records`): the static vector of a workload on its
  learning graph and the :class:`FeatureSet` predictors learn from (layout
  :data:`FEATURE_LAYOUT_VERSION`, stored with every trained predictor, which refuses to load
  against another).
"""

import importlib

#: Public names → the module defining them, imported on first use (PEP 562): the graph-level
#: encoders are numpy only, while ``to_pyg`` needs torch / torch_geometric and learning's feature
#: sets pandas — a cached prediction (numpy :class:`GraphArrays`, a light :class:`Table` of
#: records) loads neither.
_LAZY = {
    **dict.fromkeys(("EDGE_FEATURES", "GRAPH_LAYOUT_VERSION", "NODE_FEATURES", "TRAPPM_NODE_DIM",
                     "edge_matrix", "node_matrix"), "perfcast.features.encode"),
    "to_pyg": "perfcast.features.pyg",
    **dict.fromkeys(("FEATURE_LAYOUT_VERSION", "REF_BATCH", "STATIC_NAMES", "TARGETS",
                     "FeatureSet", "GraphSummary", "build_feature_set", "graph_data",
                     "learning_workload", "static_features", "GraphArrays", "graph_arrays"),
                  "perfcast.features.records"),
    "Table": "perfcast.features.table",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'perfcast.features' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["EDGE_FEATURES", "FEATURE_LAYOUT_VERSION", "GRAPH_LAYOUT_VERSION", "NODE_FEATURES",
           "REF_BATCH", "STATIC_NAMES", "TARGETS", "TRAPPM_NODE_DIM", "FeatureSet", "GraphArrays",
           "GraphSummary", "Table", "build_feature_set", "edge_matrix", "graph_arrays",
           "graph_data", "learning_workload", "node_matrix", "static_features", "to_pyg"]
