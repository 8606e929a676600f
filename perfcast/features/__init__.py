"""Feature encoders: node matrix, edge matrix, static vector, device vector, PyG ``Data``.

The layout is versioned (:data:`FEATURE_LAYOUT_VERSION`); predictors store it with their
weights and refuse to load against a different layout.
"""

from perfcast.features.encode import (
    EDGE_FEATURES,
    FEATURE_LAYOUT_VERSION,
    NODE_FEATURES,
    STATIC_FEATURES,
    TRAPPM_NODE_DIM,
    edge_matrix,
    node_matrix,
    static_vector,
)
from perfcast.features.pyg import to_pyg

__all__ = ["EDGE_FEATURES", "FEATURE_LAYOUT_VERSION", "NODE_FEATURES", "STATIC_FEATURES",
           "TRAPPM_NODE_DIM", "edge_matrix", "node_matrix", "static_vector", "to_pyg"]
