"""DNNPerf's input graph of one model configuration (:func:`configuration_graph`): perfcast's
node matrix at the record's batch plus the device's numbers per node, edge kind, bytes and
bandwidth per edge — for a training record the training graph derived from the forward graph."""

from __future__ import annotations

import math

import numpy as np

from perfcast import ops as _ops
from perfcast.errors import PerfcastError
from perfcast.features.encode import EDGE_FEATURES, NODE_FEATURES

DEVICE_FEATURES = ("log1p_peak_tflops", "log1p_memory_gb")
_C = {n: i for i, n in enumerate(NODE_FEATURES)}
_N_OPS = len(_ops.OPS)
_OPT_OP = {"sgd": "sgd_update", "sgd-momentum": "sgd_momentum_update", "adam": "adam_update",
           "adamw": "adamw_update"}
_STATE_TENSORS = {"sgd": 0, "sgd-momentum": 1, "adam": 2, "adamw": 2}
#: batch-proportional node columns (log1p of a magnitude)
_BATCH_COLS = [_C[c] for c in ("log1p_macs", "log1p_flops", "log1p_input_bytes",
                               "log1p_output_bytes")]


def _backward_op(op: str) -> str:
    """The vocabulary op a forward operator's gradient runs as (itself for matmul-like ops)."""
    ops = set(_ops.OPS)
    if f"{op}_backward" in ops:
        return f"{op}_backward"
    cat = _ops.category(op)
    for prefix, bwd in (("conv", "conv_backward"), ("max_pool", "max_pool_backward"),
                        ("avg_pool", "avg_pool_backward"), ("adaptive", "adaptive_pool_backward"),
                        ("upsample", "upsample_backward"), ("interpolate", "upsample_backward")):
        if op.startswith(prefix) and bwd in ops:
            return bwd
    if cat == "activation" and "activation_backward" in ops:
        return "activation_backward"
    if cat in ("shape", "memory", "reshape", "view") and "shape_backward" in ops:
        return "shape_backward"
    return op


_BWD_INDEX = np.array([_ops.op_index(_backward_op(o)) for o in _ops.OPS], dtype=np.int64)


#: node / edge columns that hold log1p of a magnitude (the device columns appended to the nodes
#: too): ``node_scale="raw"`` MinMax-scales their raw values, as DNNPerf does
_LOG_NODE = np.array([n.startswith("log1p_") for n in NODE_FEATURES] + [True] * len(DEVICE_FEATURES))
_LOG_EDGE = np.array([n.startswith("log1p_") for n in EDGE_FEATURES])


def _view(a: np.ndarray, logs: np.ndarray, scale: str) -> np.ndarray:
    """``a`` as the scaler sees it: as stored (``log``) or with the log1p columns back to raw
    magnitudes (``raw``; float32 holds ≤ 3e38)."""
    if scale == "log":
        return a
    a = a.astype(np.float32, copy=True)
    a[:, logs] = np.expm1(np.maximum(a[:, logs], 0.0))
    return a


def _e(v: np.ndarray) -> np.ndarray:
    return np.expm1(np.maximum(v.astype(np.float64), 0.0))


def _l(v: np.ndarray) -> np.ndarray:
    return np.log1p(np.maximum(v, 0.0)).astype(np.float32)


def configuration_graph(x: np.ndarray, edge_index: np.ndarray, edge_attr: np.ndarray, *,
                        ref_batch: int, batch: int, train: bool, half: bool,
                        optimizer: str | None, device_cols: tuple[float, float],
                        bandwidth: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The raw (unnormalised) ``(x, edge_index, edge_attr)`` of one configuration (DNNPerf
    §III-C, Tables I–II; one graph per *model configuration*, the record's batch):

    * nodes — perfcast's node matrix (:data:`~perfcast.features.encode.NODE_FEATURES`: operator
      one-hot h^t, hyper-parameters h^p (kernel, stride, groups, heads, dtype), tensor sizes h^d
      (input / output / weight bytes, shapes), FLOPs h^c) with the batch-dependent columns
      rescaled from the graph's reference batch to ``batch``, plus the device h^r
      (``device_cols``: log peak TFLOPS at the record's precision and log memory capacity, GB);
    * edges — kind e^t (forward / backward), delivered tensor bytes e^d, device ``bandwidth``
      e^r.

    With ``train``, DNNPerf's training graph: the forward graph, one backward node per forward
    node (the vocabulary's ``*_backward`` op where there is one, phase = backward, FLOPs × 2 for
    weighted operators — dX and dW — else × 1, reading the output gradient and the saved
    input), one optimizer-update node per weighted operator (``optimizer``; FLOPs from
    :func:`perfcast.flops.cost`), and edges: forward data flow (kind forward), gradients along
    the reversed data flow, saved activations from each forward producer to the backward node
    that reads them, each output to its own backward node, each weight gradient to its update
    (kind backward). It is derived from the forward graph perfcast stores for every record (as
    :mod:`perfcast.features.kernels` does for the kernel plan) instead of traced, which is far
    cheaper. Inference records use the forward graph ("exclude operators involved in
    backpropagation", §VI-A)."""
    from perfcast.flops import cost

    x = x.astype(np.float32, copy=True)
    ea = edge_attr.astype(np.float32, copy=True)
    k = float(batch) / float(max(1, ref_batch))
    if k != 1.0:
        for c in _BATCH_COLS:
            x[:, c] = _l(_e(x[:, c]) * k)
        for pre in ("log1p_in_shape[0]", "log1p_out_shape[0]"):
            c = _C[pre]
            is_batch = np.isclose(_e(x[:, c]), ref_batch)
            x[is_batch, c] = math.log1p(batch)
        ea[:, 2] = _l(_e(ea[:, 2]) * k)
    x[:, _C["log1p_memory_bytes"]] = _l(_e(x[:, _C["log1p_output_bytes"]])
                                        + _e(x[:, _C["log1p_param_bytes"]]))
    if half:  # AMP / fp16 / bf16: compute in half precision
        fp = x[:, _C["dtype=fp32"]] > 0.5
        x[fp, _C["dtype=fp32"]] = 0.0
        x[fp, _C["dtype=half"]] = 1.0
    ei = edge_index.astype(np.int64)
    if train:
        x, ei, ea = _training_graph(x, ei, ea, optimizer, cost)
    n = x.shape[0]
    x = np.concatenate([x, np.tile(np.asarray(device_cols, np.float32), (n, 1))], axis=1)
    ea[:, EDGE_FEATURES.index("log1p_device_bandwidth_gbs")] = math.log1p(max(bandwidth, 0.0))
    return x, ei, ea


def _training_graph(x, ei, ea, optimizer, cost):
    n = x.shape[0]
    src, dst = ei[0], ei[1]
    fwd_flag, bwd_flag = _C["phase=forward"], _C["phase=backward"]
    # backward nodes
    xb = x.copy()
    op = x[:, :_N_OPS].argmax(1)
    xb[:, :_N_OPS] = 0.0
    xb[np.arange(n), _BWD_INDEX[op]] = 1.0
    xb[:, fwd_flag], xb[:, bwd_flag] = 0.0, 1.0
    weighted = x[:, _C["log1p_param_bytes"]] > 0
    mult = np.where(weighted, 2.0, 1.0)
    for c in ("log1p_flops", "log1p_macs"):
        xb[:, _C[c]] = _l(_e(x[:, _C[c]]) * mult)
    in_b, out_b, par_b = (_e(x[:, _C[c]]) for c in ("log1p_input_bytes", "log1p_output_bytes",
                                                    "log1p_param_bytes"))
    xb[:, _C["log1p_input_bytes"]] = _l(in_b + out_b)   # output gradient + saved input
    xb[:, _C["log1p_output_bytes"]] = _l(in_b)          # input gradient
    xb[:, _C["log1p_memory_bytes"]] = _l(in_b + par_b)  # input and weight gradients
    for i in range(6):
        xb[:, _C[f"log1p_in_shape[{i}]"]] = x[:, _C[f"log1p_out_shape[{i}]"]]
        xb[:, _C[f"log1p_out_shape[{i}]"]] = x[:, _C[f"log1p_in_shape[{i}]"]]
    # optimizer updates, one per weighted operator
    widx = np.flatnonzero(weighted)
    opt = optimizer if optimizer in _OPT_OP else "sgd"
    xo = np.zeros((len(widx), x.shape[1]), np.float32)
    if len(widx):
        xo[np.arange(len(widx)), _ops.op_index(_OPT_OP[opt])] = 1.0
        xo[:, _C["phase=optimizer"]] = 1.0
        xo[:, _C["dtype=fp32"]] = 1.0  # master weights
        params = _e(x[widx, _C["log1p_params"]])
        state = _STATE_TENSORS[opt]
        per = np.array([cost(_OPT_OP[opt], [(1,), (1,)], [(1,)], {"state_tensors": state})[0]],
                       np.float64)
        xo[:, _C["log1p_params"]] = x[widx, _C["log1p_params"]]
        xo[:, _C["log1p_flops"]] = _l(params * per[0])
        xo[:, _C["log1p_param_bytes"]] = x[widx, _C["log1p_param_bytes"]]
        xo[:, _C["log1p_input_bytes"]] = _l(par_b[widx] * 2)
        xo[:, _C["log1p_output_bytes"]] = x[widx, _C["log1p_param_bytes"]]
        xo[:, _C["log1p_memory_bytes"]] = _l(par_b[widx] * (1 + state))
        xo[:, _C["log1p_in_shape[0]"]] = xo[:, _C["log1p_out_shape[0]"]] = _l(params)
    xs = np.concatenate([x, xb, xo], axis=0)
    # edges
    fwd_e = np.array([1.0, 0.0], np.float32)
    bwd_e = np.array([0.0, 1.0], np.float32)
    byte = ea[:, 2:3]
    pad = ea[:, 3:]

    def attrs(kind, b, p):
        return np.concatenate([np.tile(kind, (len(b), 1)), b, p], axis=1)

    out_deg = np.bincount(src, minlength=n) if len(src) else np.zeros(n, np.int64)
    sinks = np.flatnonzero(out_deg == 0)
    sink_b = x[sinks, _C["log1p_output_bytes"]][:, None]
    opt_b = x[widx, _C["log1p_param_bytes"]][:, None]
    zeros = lambda m: np.zeros((m, ea.shape[1] - 3), np.float32)  # noqa: E731
    ei_all = np.concatenate([
        ei,                                        # forward data flow
        np.stack([dst + n, src + n]),              # gradients, reversed
        np.stack([src, dst + n]),                  # saved activations → backward reader
        np.stack([sinks, sinks + n]),              # loss gradient into each output's backward
        np.stack([widx + n, 2 * n + np.arange(len(widx))]),  # weight gradient → update
    ], axis=1)
    ea_all = np.concatenate([
        attrs(fwd_e, byte, pad), attrs(bwd_e, byte, pad), attrs(bwd_e, byte, pad),
        attrs(bwd_e, sink_b, zeros(len(sinks))), attrs(bwd_e, opt_b, zeros(len(widx))),
    ], axis=0).astype(np.float32)
    return xs, ei_all.astype(np.int64), ea_all


def _device_info(key: str, precision: str) -> tuple[tuple[float, float], float, str | None]:
    """``((log1p peak TFLOPS, log1p memory GB), bandwidth GB/s, problem)`` of a record's device."""
    from perfcast.devices import get_device
    from perfcast.predictors.roofline import best_peak_tflops

    try:
        dev = get_device(str(key))
    except PerfcastError as exc:
        return (0.0, 0.0), 0.0, str(exc)
    peak = best_peak_tflops(dev, precision) or dev.peak_fp32_tflops or 0.0
    return ((math.log1p(peak), math.log1p(dev.memory_gb or 0.0)),
            float(dev.bandwidth_gbs or 0.0), None)
