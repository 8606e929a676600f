"""Conversion of a :class:`~perfcast.graph.ModelGraph` to one ``torch_geometric.data.Data``."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Mapping

import torch

from perfcast.features.encode import GRAPH_LAYOUT_VERSION, edge_matrix, node_matrix
from perfcast.graph import ModelGraph

# Sub-packages ``import torch_geometric`` loads eagerly that perfcast never uses: ``datasets``
# pulls in ``torch_geometric.llm`` → transformers/requests (≈ 0.6 s of a cold ``perfcast
# predict``). They are installed as stand-ins that import the real package on first attribute
# access, so ``from torch_geometric.datasets import X`` in user code still works.
_DEFERRED = ("torch_geometric.datasets",)


class _DeferredPackage(types.ModuleType):
    """A ``sys.modules`` stand-in that imports the real package on first attribute access."""

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = importlib.import_module(name)
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, real)
        return getattr(real, attr)


def _is_torch_instance(obj, cls) -> bool:
    """``torch_geometric.isinstance.is_torch_instance`` without importing ``torch._dynamo``:
    a ``torch.compile``-d module (``torch._dynamo.OptimizedModule``) is checked by its original
    module; when ``torch._dynamo`` was never imported no object can be one."""
    dynamo = sys.modules.get("torch._dynamo")
    compiled = getattr(dynamo, "OptimizedModule", None) if dynamo is not None else None
    if compiled is not None and isinstance(obj, compiled):
        return isinstance(obj._orig_mod, cls)
    return isinstance(obj, cls)


def import_pyg():
    """``import torch_geometric`` without its unused eager sub-packages (see ``_DEFERRED``) and
    without ``torch._dynamo``: PyG imports it (≈ 1 s, most of a cold GNN prediction) only for
    ``torch_geometric.isinstance.is_torch_instance``, which gets the equivalent
    :func:`_is_torch_instance` (it imports nothing)."""
    if "torch_geometric" not in sys.modules:
        spec = importlib.util.find_spec("torch_geometric")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("torch_geometric is not installed (pip install torch_geometric)")
        root = list(spec.submodule_search_locations)[0]
        for name in _DEFERRED:
            if name not in sys.modules:
                stub = _DeferredPackage(name)
                stub.__path__ = [f"{root}/{name.rpartition('.')[2]}"]
                sys.modules[name] = stub
        if "torch_geometric.isinstance" not in sys.modules:
            iso = types.ModuleType("torch_geometric.isinstance")
            iso.__file__ = f"{root}/isinstance.py"
            iso.is_torch_instance = _is_torch_instance
            sys.modules["torch_geometric.isinstance"] = iso
    import warnings

    with warnings.catch_warnings():  # PyG's pooling modules call torch.jit.script at import
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.* is deprecated",
                                category=FutureWarning)
        import torch_geometric

    return torch_geometric


def to_pyg(graph: ModelGraph, device=None, y: Mapping[str, float] | None = None):
    """PyG ``Data`` with ``x``, ``edge_index``, ``edge_attr`` (DNNPerf's; the device bandwidth
    column from ``device`` when one is given), ``layout`` (the graph layout) and ``y`` ``[1, T]``
    plus ``y_names`` (when targets are given, e.g. ``{"time_ms": 12.3}``).
    Record-level static features live in :class:`~perfcast.features.records.FeatureSet`.
    """
    import_pyg()
    from torch_geometric.data import Data

    bandwidth = getattr(device, "bandwidth_gbs", None) if device is not None else None
    ei, ea = edge_matrix(graph, bandwidth)
    data = Data(x=torch.from_numpy(node_matrix(graph)), edge_index=torch.from_numpy(ei),
                edge_attr=torch.from_numpy(ea))
    data.model_id = graph.meta.model_id
    data.layout = GRAPH_LAYOUT_VERSION
    if y is not None:
        data.y = torch.tensor([[float(v) for v in y.values()]], dtype=torch.float32)
        data.y_names = list(y)
    return data
