"""Graph-level features of a :class:`~perfcast.graph.ModelGraph` (numpy, float32).

Node matrix — TraPPM's layout first (one-hot op ‖ input shape[6] ‖ output shape[6] ‖ MACs ‖
params ‖ memory; 113 values for a 98-op vocabulary, here ``len(OPS) + 15``), then DNNPerf's
extras (FLOPs, tensor bytes, hyper-parameters, phase, dtype). Edge matrix — DNNPerf's (kind,
tensor bytes, device bandwidth). Magnitudes are ``log1p``. The record-level static vector
(TraPPM ∪ DIPPM, rescaled to the record's batch) is :func:`perfcast.features.records.
static_features`.
"""

from __future__ import annotations

import math

import numpy as np

from perfcast import ops as _ops
from perfcast.graph import ModelGraph

#: Layout of the node and edge matrices. Bump when any column below changes meaning or order.
GRAPH_LAYOUT_VERSION = f"1-ops{len(_ops.OPS)}"

_SHAPE_DIMS = 6
TRAPPM_NODE_DIM = len(_ops.OPS) + 2 * _SHAPE_DIMS + 3

NODE_FEATURES: tuple[str, ...] = (
    *(f"op={o}" for o in _ops.OPS),
    *(f"log1p_in_shape[{i}]" for i in range(_SHAPE_DIMS)),
    *(f"log1p_out_shape[{i}]" for i in range(_SHAPE_DIMS)),
    "log1p_macs", "log1p_params", "log1p_memory_bytes",
    # DNNPerf extras
    "log1p_flops", "log1p_input_bytes", "log1p_output_bytes", "log1p_param_bytes",
    "kernel_h", "kernel_w", "kernel_d", "stride", "log1p_groups", "log1p_heads",
    "phase=forward", "phase=backward", "phase=optimizer",
    "dtype=fp32", "dtype=half", "dtype=int",
)
EDGE_FEATURES: tuple[str, ...] = ("kind=forward", "kind=backward", "log1p_tensor_bytes",
                                  "log1p_device_bandwidth_gbs")
_DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
                "int16": 2, "int8": 1, "uint8": 1, "bool": 1}


def _l(x: float) -> float:
    return math.log1p(max(0.0, float(x)))


def _shape6(shape) -> list[float]:
    dims = [_l(d) for d in list(shape)[:_SHAPE_DIMS]]
    return dims + [0.0] * (_SHAPE_DIMS - len(dims))


def _numel(shape) -> int:
    return int(math.prod(int(d) for d in shape)) if shape else 1


def node_matrix(graph: ModelGraph) -> np.ndarray:
    """``[num_nodes, len(NODE_FEATURES)]`` float32 matrix."""
    n_ops = len(_ops.OPS)
    x = np.zeros((len(graph.nodes), len(NODE_FEATURES)), dtype=np.float32)
    base = n_ops
    for i, nd in enumerate(graph.nodes):
        x[i, _ops.op_index(nd.op)] = 1.0
        ins = nd.input_shapes[0] if nd.input_shapes else ()
        outs = nd.output_shapes[0] if nd.output_shapes else ()
        in_bytes = sum(_numel(s) * _DTYPE_BYTES.get(d, 4)
                       for s, d in zip(nd.input_shapes, nd.input_dtypes))
        k = list(nd.attrs.get("kernel") or [])
        stride = nd.attrs.get("stride") or [0]
        stride0 = stride[0] if isinstance(stride, (list, tuple)) and stride else stride
        dtype = nd.output_dtypes[0] if nd.output_dtypes else "float32"
        row = [*_shape6(ins), *_shape6(outs), _l(nd.macs), _l(nd.params),
               _l(nd.output_bytes + nd.param_bytes),
               _l(nd.flops), _l(in_bytes), _l(nd.output_bytes), _l(nd.param_bytes),
               float(k[0]) if len(k) > 0 else 0.0, float(k[1]) if len(k) > 1 else 0.0,
               float(k[2]) if len(k) > 2 else 0.0,
               float(stride0) if isinstance(stride0, (int, float)) else 0.0,
               _l(nd.attrs.get("groups", 0) or 0), _l(nd.attrs.get("heads", 0) or 0),
               float(nd.phase == "forward"), float(nd.phase == "backward"),
               float(nd.phase == "optimizer"),
               float(dtype in ("float32", "float64")), float(dtype in ("float16", "bfloat16")),
               float(not dtype.startswith(("float", "bfloat")))]
        x[i, base:] = row
    return x


def edge_matrix(graph: ModelGraph, bandwidth_gbs: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(edge_index [2, E] int64, edge_attr [E, len(EDGE_FEATURES)] float32)``."""
    ei = np.array([[e.src for e in graph.edges], [e.dst for e in graph.edges]],
                  dtype=np.int64).reshape(2, -1)
    bw = _l(bandwidth_gbs or 0.0)
    ea = np.array([[float(e.kind == "forward"), float(e.kind == "backward"), _l(e.bytes), bw]
                   for e in graph.edges], dtype=np.float32).reshape(-1, len(EDGE_FEATURES))
    return ei, ea
