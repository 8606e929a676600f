"""``roofline`` — an analytical, label-free step-time estimate from the graph and the device
datasheet (thesis ch. 3: ``attainable FLOP/s = min(peak FLOP/s, bandwidth × arithmetic
intensity)``, applied operator by operator).

For one record (model graph at batch ``ref_batch``, record batch ``b``, ``k = b / ref_batch``)::

    t_fwd = Σ_nodes max(FLOPs_i·k / (peak·eff), bytes_i / (bandwidth·eff))
            bytes_i = act_bytes_i·k·a + param_bytes_i·w          (parameters do not scale with b;
                      act_bytes_i = activation inputs + output, weights counted once)
    infer:  time = t_fwd                          + n_kernels · launch
    train:  time = train_factor · t_fwd + t_opt   + (train_factor · n_kernels + n_opt) · launch
            t_opt = params · e · (3 + 2·states) / (bandwidth·eff)

* ``peak`` is :meth:`Device.peak_tflops` at the record's precision: ``fp32`` uses the FP32 (non
  tensor-core) peak — PyTorch's default for matmuls; ``amp`` / ``fp16`` / ``bf16`` use the
  half-precision tensor-core peak. ``a`` (activation byte factor) is ½ for amp/fp16/bf16, ``w``
  (parameter byte factor) is ½ for fp16 / bf16-pure and bf16 inference (amp and bf16 training
  keep FP32 master weights, ``w = 1``: :func:`half_weights`).
* ``train_factor`` (default 3): backward ≈ 2× the forward FLOPs and bytes (grad-input and
  grad-weight), so a training step ≈ 3× the forward pass, kernel launches included.
* Optimizer: an element-wise, memory-bound update reading parameter + gradient, writing the
  parameter (3 accesses) and reading + writing each state (``states``: sgd 0, sgd-momentum 1,
  adam/adamw 2) at ``e`` bytes per element (4; 2 for pure fp16 / bf16-pure). Unknown optimizer →
  ``sgd-momentum`` (the ``perfcast collect`` default). On GPUs PyTorch's multi-tensor
  (``foreach``) update needs a handful of launches (counted 0); on CPUs one per parameter tensor
  (``n_opt`` = nodes holding parameters).
* ``launch``: per-kernel overhead (``launch_us_gpu`` = 5 µs: CUDA launch + PyTorch eager
  dispatch; ``launch_us_cpu`` = 1 µs: dispatch of an in-process CPU op). View ops
  (:data:`perfcast.ops.VIEW_OPS`), constants and (in inference) dropout launch no kernel and move
  no bytes.
* ``efficiency`` (default 1 = the pure roofline, a lower bound): fraction of peak compute and
  bandwidth reachable; it scales both roofs, not the launch overhead.
* CPUs: the peak is scaled by ``threads / cores`` when the record says how many threads ran
  (``rows["threads"]``). A device without a known peak gives NaN; a device without a known
  bandwidth (the detected local CPU) gets the compute roof only (an infinite memory roof), so the
  estimate stays a lower bound.

It never reads labels: ``fit`` only records the target list (``time_ms``), so it predicts for
devices nobody measured. :func:`roofline_time_ms` is the same estimate for one configuration,
usable without a predictor. :func:`time_lower_bound_ms` is the strict floor below it (only work
that cannot be avoided) that :mod:`perfcast.routing` keeps every predicted time above.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfcast import ops as _ops
from perfcast.errors import PerfcastError
from perfcast.features.records import FeatureSet
from perfcast.predictors import register_predictor
from perfcast.predictors.base import Predictor

#: Training step ≈ forward + backward (≈ 2× forward).
TRAIN_FACTOR = 3.0
#: Optimizer state tensors per parameter.
OPTIMIZER_STATES = {"sgd": 0, "sgd-momentum": 1, "adam": 2, "adamw": 2}
DEFAULT_OPTIMIZER = "sgd-momentum"
HALF_PRECISIONS = ("amp", "fp16", "bf16", "bf16-pure", "fp8")


def half_weights(precision: str, mode: str) -> bool:
    """Whether the weights (and in training the gradients and optimizer state) are 16-bit:
    fp16 and bf16-pure; bf16 in inference only (bf16 training is autocast with fp32 master
    weights, like amp)."""
    return precision in ("fp16", "bf16-pure") or (precision == "bf16" and mode != "train")
#: Ops that launch no kernel and move no bytes.
NO_KERNEL_OPS = frozenset(_ops.VIEW_OPS | {"constant", "shape_of"})
DEFAULT_LAUNCH_US = {"gpu": 5.0, "cpu": 1.0}

#: GraphCost per graph object (the graph weakly held): a graph kept in memory is costed once.
_COST_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

_NO_KERNEL_IDX = np.array(sorted(_ops.op_index(o) for o in NO_KERNEL_OPS), dtype=np.int64)
_DROPOUT_IDX = _ops.op_index("dropout")


@dataclass(frozen=True)
class GraphCost:
    """Per-node roofline inputs of one learning graph (at its ``ref_batch``)."""

    flops: np.ndarray  # [kernels] FLOPs
    act_bytes: np.ndarray  # [kernels] activation bytes moved (scale with batch)
    param_bytes: np.ndarray  # [kernels] parameter bytes read (batch-independent)
    is_dropout: np.ndarray  # [kernels] bool
    ref_batch: int
    params: float  # parameter elements
    param_bytes_total: float
    param_nodes: int

    @classmethod
    def of(cls, graph_data, summary=None) -> GraphCost:
        """From a learning graph's PyG ``Data`` (:func:`perfcast.features.records.graph_data`)
        or its numpy :class:`~perfcast.features.records.GraphArrays`."""
        from perfcast.features.records import as_numpy

        return cls._of(as_numpy(graph_data.op_flops), as_numpy(graph_data.op_bytes),
                       as_numpy(graph_data.op_index), as_numpy(graph_data.x),
                       getattr(graph_data, "ref_batch", None), summary)

    @classmethod
    def of_graph(cls, graph, summary=None) -> GraphCost:
        """From the learning :class:`~perfcast.graph.ModelGraph` itself — the same numbers as
        :meth:`of` on its ``graph_data``, without torch."""
        from perfcast.features.encode import node_matrix
        from perfcast.features.records import op_arrays

        key = summary  # (a frozen dataclass: equal by value)
        memo = _COST_MEMO.get(graph)
        if memo is not None and memo[0] == key:  # the same graph object asked again (kept
            return memo[1]                       # warm by perfcast.cache.keep_warm)
        flops, moved, op_idx = op_arrays(graph)
        cost = cls._of(flops, moved, op_idx, node_matrix(graph),
                       int(graph.meta.batch_size or 1), summary)
        try:
            _COST_MEMO[graph] = (key, cost)
        except TypeError:  # not weak-referenceable
            pass
        return cost

    @classmethod
    def _of(cls, flops, moved, op_idx, x, ref_batch, summary) -> GraphCost:
        from perfcast.features.encode import NODE_FEATURES

        flops = np.asarray(flops).astype(np.float64)
        moved = np.asarray(moved).astype(np.float64)
        op_idx = np.asarray(op_idx)
        # per-node parameter and input bytes: the node matrix keeps their log1p
        x = np.asarray(x).astype(np.float64)
        pbytes = np.expm1(x[:, NODE_FEATURES.index("log1p_param_bytes")])
        inbytes = np.expm1(x[:, NODE_FEATURES.index("log1p_input_bytes")])
        pbytes = np.clip(np.minimum(pbytes, moved), 0.0, None)
        # op_bytes = inputs + output + params, and the torch frontend lists weight tensors among
        # a node's inputs: count them once, as batch-independent parameter bytes
        w_in = (pbytes > 0) & (inbytes >= pbytes * (1 - 1e-5))
        act = np.clip(moved - pbytes - np.where(w_in, pbytes, 0.0), 0.0, None)
        keep = ~np.isin(op_idx, _NO_KERNEL_IDX)
        ref = int(ref_batch or getattr(summary, "batch", 1) or 1)
        total_pb = float(summary.param_bytes) if summary is not None else float(pbytes.sum())
        params = float(summary.params) if summary is not None else total_pb / 4.0
        return cls(flops=flops[keep], act_bytes=act[keep], param_bytes=pbytes[keep],
                   is_dropout=(op_idx == _DROPOUT_IDX)[keep], ref_batch=max(1, ref),
                   params=params, param_bytes_total=total_pb,
                   param_nodes=int((pbytes > 0).sum()))


def _device(device):
    """The device (a key or a :class:`~perfcast.devices.Device`) with the spec fields its
    sheet leaves out derived by a stated rule (:func:`perfcast.devices.derive.complete`)."""
    from perfcast.devices import Device, get_device
    from perfcast.devices.derive import complete

    return complete(device if isinstance(device, Device) else get_device(str(device)))[0]


def _finite_pos(v) -> float | None:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def cost_time_ms(cost: GraphCost, batch: int, mode: str, precision: str, device, *,
                 optimizer: str | None = None, threads: int | None = None,
                 launch_us: float | None = None, efficiency: float = 1.0,
                 train_factor: float = TRAIN_FACTOR) -> float:
    """Roofline time (ms per batch) of a precomputed :class:`GraphCost` (see module doc).
    NaN when the device has no peak for ``precision``."""
    dev = _device(device)
    precision = str(precision or "fp32")
    peak = _finite_pos(dev.peak_tflops(precision))
    eff = _finite_pos(efficiency)
    if peak is None or eff is None:
        return float("nan")
    if dev.kind == "cpu" and dev.cores and _finite_pos(threads):
        peak *= min(float(threads), float(dev.cores)) / float(dev.cores)
    flops_s = peak * 1e12 * eff
    bw = _finite_pos(dev.bandwidth_gbs)
    bytes_s = bw * 1e9 * eff if bw is not None else math.inf
    k = float(batch) / cost.ref_batch
    half = precision in HALF_PRECISIONS
    a = 0.5 if half else 1.0
    w = 0.5 if half_weights(precision, mode) else 1.0
    train = mode == "train"
    sel = slice(None) if train else ~cost.is_dropout
    t_node = np.maximum(cost.flops[sel] * k / flops_s,
                        (cost.act_bytes[sel] * k * a + cost.param_bytes[sel] * w) / bytes_s)
    t = float(t_node.sum())
    kernels = float(t_node.size)
    if launch_us is None:
        launch_us = DEFAULT_LAUNCH_US.get(dev.kind, 5.0)
    if train:
        opt = optimizer if isinstance(optimizer, str) and optimizer in OPTIMIZER_STATES \
            else DEFAULT_OPTIMIZER
        e = 2.0 if half_weights(precision, mode) else 4.0
        t = train_factor * t + cost.params * e * (3 + 2 * OPTIMIZER_STATES[opt]) / bytes_s
        kernels = train_factor * kernels + (cost.param_nodes if dev.kind == "cpu" else 0)
    return (t + kernels * float(launch_us) * 1e-6) * 1e3


#: Precisions whose kernels a run at the key precision may use (the lower bound takes the fastest
#: peak among them): fp32 convolutions and matmuls may run on TF32 tensor cores (cuDNN's default
#: on Ampere and later) or, on AMD CDNA, FP32 matrix cores; amp autocasts to fp16 or bf16.
BOUND_PRECISIONS = {"fp32": ("fp32", "fp32_matrix", "tf32"),
                    "amp": ("fp32", "fp32_matrix", "tf32", "fp16", "bf16"),
                    "fp16": ("fp32", "fp16"), "bf16": ("fp32", "bf16"),
                    "bf16-pure": ("fp32", "bf16"), "fp8": ("fp32", "bf16", "fp8")}
#: Allowance on the compute roof of :func:`time_lower_bound_ms`: fast convolution algorithms
#: (Winograd, FFT) do fewer multiplications than the direct FLOP count and GPUs boost above the
#: datasheet clock. Measured: VGG-19 on an RTX 2080 Ti (fp32) ran at 0.91× the direct FLOPs ÷
#: peak; with 0.8 the bound held on all 4,770 public + local runs perfcast has graphs for
#: (smallest measured ÷ bound: 1.14).
BOUND_COMPUTE_ALLOWANCE = 0.8


def best_peak_tflops(device, precision: str) -> float | None:
    """The fastest datasheet peak (TFLOPS) a run at ``precision`` can use (see
    :data:`BOUND_PRECISIONS`); ``None`` when the device has none."""
    dev = _device(device)
    peaks = [_finite_pos(dev.peak_tflops(p))
             for p in BOUND_PRECISIONS.get(str(precision or "fp32"), ("fp32",))]
    peaks = [p for p in peaks if p is not None]
    return max(peaks) if peaks else None


def time_lower_bound_ms(cost: GraphCost, batch: int, mode: str, precision: str, device, *,
                        optimizer: str | None = None, threads: int | None = None) -> float:
    """A physical lower bound on the time (ms per batch) of one configuration — what no
    prediction may undercut. Unlike :func:`cost_time_ms` (Σ per-kernel max of the two roofs,
    every activation read from and written to DRAM: measured runs beat it by up to 2.3× where
    kernels fuse or activations stay in cache) it counts only work that cannot be avoided:

    * compute: the forward FLOPs (×2 in training: every layer's backward computes at least its
      input or its weight gradient, each as many FLOPs as its forward) ÷ the fastest peak of the
      precision (:func:`best_peak_tflops`; on a CPU scaled by ``threads / cores``), times
      :data:`BOUND_COMPUTE_ALLOWANCE`;
    * memory: every parameter byte read once (in training also its gradient written and each
      optimizer state read: ``params · e · (2 + states)``), less what the last-level cache
      (``l2_mb``) can hold between steps, ÷ bandwidth (0 when the bandwidth is unknown);
    * launches: one per kernel (forward kernels, in training also one weight-gradient kernel
      per parameter-holding node) at :data:`DEFAULT_LAUNCH_US`. A GPU runs kernels while the
      host launches the next ones, so there the bound is max(compute, memory, launches); a CPU
      runs each op where it is dispatched: max(compute, memory) + launches.
    """
    dev = _device(device)
    precision = str(precision or "fp32")
    k = float(batch) / cost.ref_batch
    train = mode == "train"
    sel = slice(None) if train else ~cost.is_dropout
    flops = float(cost.flops[sel].sum()) * k * (2.0 if train else 1.0)
    peak = best_peak_tflops(dev, precision)
    t_compute = 0.0
    if peak is not None:
        if dev.kind == "cpu" and dev.cores and _finite_pos(threads):
            peak *= min(float(threads), float(dev.cores)) / float(dev.cores)
        t_compute = flops * BOUND_COMPUTE_ALLOWANCE / (peak * 1e12)
    half = half_weights(precision, mode)
    if train:
        opt = optimizer if isinstance(optimizer, str) and optimizer in OPTIMIZER_STATES \
            else DEFAULT_OPTIMIZER
        touched = cost.params * (2.0 if half else 4.0) * (2 + OPTIMIZER_STATES[opt])
    else:
        touched = cost.param_bytes_total * (0.5 if half else 1.0)
    bw = _finite_pos(dev.bandwidth_gbs)
    cache = (_finite_pos(dev.l2_mb) or 0.0) * 1e6
    t_memory = max(0.0, touched - cache) / (bw * 1e9) if bw is not None else 0.0
    kernels = float(np.count_nonzero(~cost.is_dropout) if not train
                    else cost.flops.size + cost.param_nodes)
    t_launch = kernels * DEFAULT_LAUNCH_US.get(dev.kind, 5.0) * 1e-6
    if dev.kind == "gpu":
        return max(t_compute, t_memory, t_launch) * 1e3
    return (max(t_compute, t_memory) + t_launch) * 1e3


def roofline_time_ms(graph_data, summary, batch: int, mode: str, precision: str, device, *,
                     optimizer: str | None = None, threads: int | None = None,
                     launch_us: float | None = None, efficiency: float = 1.0,
                     train_factor: float = TRAIN_FACTOR) -> float:
    """Roofline time (ms per batch) of one configuration: ``graph_data`` a learning graph
    (:func:`perfcast.features.records.graph_data`), ``summary`` its
    :class:`~perfcast.features.records.GraphSummary` (or ``None``), ``device`` a key or a
    :class:`~perfcast.devices.Device`. NaN when the device has no peak; raises
    :class:`~perfcast.errors.PerfcastError` for an unknown device key or bad arguments."""
    if batch is None or int(batch) <= 0:
        raise PerfcastError(f"batch size must be a positive integer, got {batch!r}")
    if mode not in ("infer", "train"):
        raise PerfcastError(f"unknown mode {mode!r} (use infer or train)")
    return cost_time_ms(GraphCost.of(graph_data, summary), int(batch), mode, precision, device,
                        optimizer=optimizer, threads=threads, launch_us=launch_us,
                        efficiency=efficiency, train_factor=train_factor)


@register_predictor
class RooflinePredictor(Predictor):
    """Analytical step time from graph FLOPs/bytes and the device's peak numbers (module doc).
    Learns nothing; predicts ``time_ms`` only."""

    name = "roofline"
    supported_targets = ("time_ms",)
    learns = False
    extrapolates = True
    state_format = "numpy"  # no weights; numpy arithmetic (no torch to answer)

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {"efficiency": 1.0, "launch_us_gpu": DEFAULT_LAUNCH_US["gpu"],
                "launch_us_cpu": DEFAULT_LAUNCH_US["cpu"], "train_factor": TRAIN_FACTOR}

    def fit(self, train: FeatureSet, valid: FeatureSet | None = None, *,
            targets: list[str] | None = None, progress=None) -> Predictor:
        """No learning: records the target list (``time_ms``); labels are not needed."""
        return super().fit(train, valid, targets=list(targets or self.supported_targets),
                           progress=progress)

    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        if progress:
            progress(1, 1)

    def _predict(self, data: FeatureSet) -> np.ndarray:
        rows = data.rows
        n = len(data)
        out = np.full((n, len(self.targets_)), np.nan)
        if "time_ms" not in self.targets_:
            return out
        col = self.targets_.index("time_ms")
        p = self.get_params()
        costs: dict[int, GraphCost] = {}
        devices: dict[str, Any] = {}
        opt = rows["optimizer"].tolist() if "optimizer" in rows.columns else [None] * n
        thr = rows["threads"].tolist() if "threads" in rows.columns else [None] * n
        tf32 = rows["tf32"].tolist() if "tf32" in rows.columns else ["default"] * n
        for i, (dkey, mode, prec, b, gi) in enumerate(zip(
                rows["device"].tolist(), rows["mode"].tolist(), rows["precision"].tolist(),
                rows["batch_size"].tolist(), data.graph_index.tolist())):
            key = str(dkey)
            if key not in devices:
                try:
                    devices[key] = _device(key)
                except PerfcastError:
                    devices[key] = None
            dev = devices[key]
            if dev is None:
                continue
            if gi not in costs:
                summ = data.summaries[gi] if gi < len(data.summaries) else None
                costs[gi] = GraphCost.of(data.graphs[gi], summ)
            launch = p["launch_us_gpu"] if dev.kind == "gpu" else p["launch_us_cpu"]
            if prec == "fp32" and tf32[i] == "on" and dev.kind == "gpu" and dev.peak_tf32_tflops:
                prec = "tf32"  # --tf32 on: the matmuls and convolutions that carry the FLOPs
            try:
                out[i, col] = cost_time_ms(costs[gi], int(b), str(mode), str(prec), dev,
                                           optimizer=opt[i], threads=thr[i], launch_us=launch,
                                           efficiency=p["efficiency"],
                                           train_factor=p["train_factor"])
            except PerfcastError:  # e.g. a precision the device table does not know
                pass
        return out


__all__ = ["BOUND_COMPUTE_ALLOWANCE", "BOUND_PRECISIONS", "GraphCost", "RooflinePredictor",
           "best_peak_tflops", "cost_time_ms", "half_weights", "roofline_time_ms",
           "time_lower_bound_ms"]
