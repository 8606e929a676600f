"""Conversion of a :class:`~perfcast.graph.ModelGraph` to one ``torch_geometric.data.Data``."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from perfcast.features.encode import FEATURE_LAYOUT_VERSION, edge_matrix, node_matrix, static_vector
from perfcast.graph import ModelGraph


def to_pyg(graph: ModelGraph, device=None, y: Mapping[str, float] | None = None):
    """PyG ``Data`` with ``x``, ``edge_index``, ``edge_attr``, ``static`` ``[1, S]``,
    ``device_x`` ``[1, D]`` (when a :class:`~perfcast.devices.Device` is given) and ``y``
    ``[1, T]`` plus ``y_names`` (when targets are given, e.g. ``{"time_ms": 12.3}``).
    """
    from torch_geometric.data import Data

    bandwidth = getattr(device, "bandwidth_gbs", None) if device is not None else None
    ei, ea = edge_matrix(graph, bandwidth)
    data = Data(x=torch.from_numpy(node_matrix(graph)), edge_index=torch.from_numpy(ei),
                edge_attr=torch.from_numpy(ea),
                static=torch.from_numpy(static_vector(graph)).unsqueeze(0))
    data.model_id = graph.meta.model_id
    data.layout = FEATURE_LAYOUT_VERSION
    if device is not None:
        from perfcast.features.device import device_vector

        data.device_x = torch.from_numpy(device_vector(device)).unsqueeze(0)
    if y is not None:
        data.y = torch.tensor([[float(v) for v in y.values()]], dtype=torch.float32)
        data.y_names = list(y)
    return data
