"""What every predictor learns from: a :class:`FeatureSet` of records.

A record is one measured (or to-be-predicted) configuration: model × device × mode × precision ×
batch size. Records share graphs (one forward graph per model and input size, see
:mod:`perfcast.predictors.graphs`), so a feature set holds the unique graphs once
(``graphs`` — PyG ``Data``) and per record an index into them (``graph_index``), a static
vector (``static``, names in ``static_names``) and the targets ``y`` (``NaN`` = no label).

Targets and units: ``time_ms`` (per batch: latency or training step), ``memory_mb`` (MiB, peak),
``energy_j`` (J per batch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from perfcast import ops as _ops
from perfcast.errors import PerfcastError
from perfcast.features.encode import _DTYPE_BYTES
from perfcast.features.encode import FEATURE_LAYOUT_VERSION as GRAPH_LAYOUT
from perfcast.graph import ModelGraph

#: Targets the predictors know, in this order.
TARGETS: tuple[str, ...] = ("time_ms", "memory_mb", "energy_j")

#: Bump when a column of :data:`STATIC_NAMES` (or the graph layout) changes meaning or order.
FEATURE_LAYOUT_VERSION = f"{GRAPH_LAYOUT}-static2"

MODES = ("infer", "train")
PRECISIONS = ("fp32", "amp", "fp16", "bf16")
OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")

#: Static features of a record (graph aggregates rescaled to the record's batch; magnitudes
#: are log1p). ``memsim`` columns hold the tensor-memory simulation of the record's real
#: (training or inference) step when a predictor asks for it, else 0.
STATIC_NAMES: tuple[str, ...] = (
    # TraPPM: batch, nodes, edges, MACs, params, memory
    "log1p_batch", "log1p_nodes", "log1p_edges", "log1p_macs", "log1p_params",
    "log1p_memory_bytes",
    # DIPPM: MACs, batch (above), conv / dense / relu counts
    "log1p_conv_count", "log1p_dense_count", "log1p_relu_count",
    # extras
    "log1p_flops", "log1p_activation_bytes", "log1p_param_bytes", "log1p_input_elements",
    "log1p_attention_count", "log1p_norm_count", "log1p_macs_per_sample",
    "log1p_activation_bytes_per_sample", "log1p_max_node_activation_bytes",
    "mode=train", *(f"precision={p}" for p in PRECISIONS), *(f"optimizer={o}" for o in OPTIMIZERS),
    "log1p_memsim_mb", "has_memsim",
)
_S = {n: i for i, n in enumerate(STATIC_NAMES)}

#: Static features of the static-only baselines (the TraPPM / DIPPM lists, no graph learning).
BASELINE_STATIC = STATIC_NAMES


def _l(x: float) -> float:
    return math.log1p(max(0.0, float(x)))


@dataclass(frozen=True)
class GraphSummary:
    """Batch-independent aggregates of one (batch-:data:`REF_BATCH`) forward graph."""

    nodes: int
    edges: int
    macs: float
    flops: float
    params: float
    param_bytes: float
    activation_bytes: float
    max_node_bytes: float
    input_elements: float
    conv: int
    dense: int
    relu: int
    attention: int
    norm: int
    batch: int

    @classmethod
    def of(cls, g: ModelGraph) -> GraphSummary:
        counts = {c: 0 for c in ("conv", "dense", "attention", "norm")}
        relu = 0
        max_b = 0.0
        for nd in g.nodes:
            cat = _ops.category(nd.op)
            if cat in counts:
                counts[cat] += 1
            if nd.op in ("relu", "relu6"):
                relu += 1
            max_b = max(max_b, float(nd.output_bytes))
        inp = sum(math.prod(int(d) for d in s) for s in g.meta.input_shapes)
        return cls(nodes=g.num_nodes, edges=g.num_edges, macs=float(g.macs), flops=float(g.flops),
                   params=float(g.params), param_bytes=float(g.param_bytes),
                   activation_bytes=float(g.activation_bytes), max_node_bytes=max_b,
                   input_elements=float(inp), batch=int(g.meta.batch_size or 1), **counts,
                   relu=relu)


def static_features(s: GraphSummary, batch_size: int, mode: str, precision: str,
                    optimizer: str | None = None, memsim_mb: float | None = None) -> np.ndarray:
    """The :data:`STATIC_NAMES` vector of one record (float32)."""
    if batch_size is None or int(batch_size) <= 0:
        raise PerfcastError(f"batch size must be a positive integer, got {batch_size!r}")
    if mode not in MODES:
        raise PerfcastError(f"unknown mode {mode!r} (use {' or '.join(MODES)})")
    if precision not in PRECISIONS:
        raise PerfcastError(f"unknown precision {precision!r} (use {', '.join(PRECISIONS)})")
    k = float(batch_size) / max(1, s.batch)
    act = s.activation_bytes * k
    v = [_l(batch_size), _l(s.nodes), _l(s.edges), _l(s.macs * k), _l(s.params),
         _l(s.param_bytes + act), _l(s.conv), _l(s.dense), _l(s.relu), _l(s.flops * k), _l(act),
         _l(s.param_bytes), _l(s.input_elements * k), _l(s.attention), _l(s.norm),
         _l(s.macs / max(1, s.batch)), _l(s.activation_bytes / max(1, s.batch)),
         _l(s.max_node_bytes * k), float(mode == "train"),
         *(float(precision == p) for p in PRECISIONS),
         *(float(mode == "train" and optimizer == o) for o in OPTIMIZERS),
         _l(memsim_mb or 0.0), float(memsim_mb is not None)]
    return np.asarray(v, dtype=np.float32)


def graph_data(g: ModelGraph):
    """PyG ``Data`` of a learning graph: ``x`` (node matrix), ``edge_index``, ``edge_attr`` and,
    for the roofline, ``op_flops`` / ``op_bytes`` per node (FLOPs and bytes moved at the graph's
    batch, float64) and ``op_index`` (canonical op id)."""
    import torch

    from perfcast.features.pyg import to_pyg

    d = to_pyg(g)
    d.op_flops = torch.tensor([float(n.flops) for n in g.nodes], dtype=torch.float64)
    moved = []
    for n in g.nodes:
        inb = sum(math.prod(int(x) for x in s) * _DTYPE_BYTES.get(dt, 4)
                  for s, dt in zip(n.input_shapes, n.input_dtypes))
        moved.append(float(inb + n.output_bytes + n.param_bytes))
    d.op_bytes = torch.tensor(moved, dtype=torch.float64)
    d.op_index = torch.tensor([_ops.op_index(n.op) for n in g.nodes], dtype=torch.long)
    d.ref_batch = int(g.meta.batch_size or 1)
    del d.static  # record-level statics live in FeatureSet.static
    return d


@dataclass
class FeatureSet:
    """Records ready for learning (see module doc). ``rows`` keeps the record metadata
    (``model``, ``family``, ``device``, ``mode``, ``precision``, ``batch_size`` …)."""

    rows: pd.DataFrame
    static: np.ndarray  # [n, len(static_names)] float32
    graph_index: np.ndarray  # [n] int64 into graphs
    graphs: list  # unique PyG Data
    y: np.ndarray  # [n, len(target_names)] float64, NaN = unknown
    static_names: tuple[str, ...] = STATIC_NAMES
    target_names: tuple[str, ...] = TARGETS
    layout: str = FEATURE_LAYOUT_VERSION
    summaries: list = field(default_factory=list)  # GraphSummary per graph

    def __len__(self) -> int:
        return len(self.rows)

    def subset(self, idx: Sequence[int] | np.ndarray) -> FeatureSet:
        """Records ``idx`` (graphs are shared, not copied)."""
        idx = np.asarray(idx, dtype=np.int64)
        return FeatureSet(rows=self.rows.iloc[idx].reset_index(drop=True),
                          static=self.static[idx], graph_index=self.graph_index[idx],
                          graphs=self.graphs, y=self.y[idx], static_names=self.static_names,
                          target_names=self.target_names, layout=self.layout,
                          summaries=self.summaries)

    def target(self, name: str) -> np.ndarray:
        return self.y[:, self.target_names.index(name)]

    def labeled_targets(self) -> list[str]:
        """Targets with at least one label."""
        return [t for j, t in enumerate(self.target_names) if np.isfinite(self.y[:, j]).any()]

    def families(self) -> np.ndarray:
        return self.rows["family"].astype(str).to_numpy()


def build_feature_set(df: pd.DataFrame, graph_of: Callable[[dict], ModelGraph | None],
                      memsim_of: Callable[[dict], float | None] | None = None,
                      progress: Callable[[int, int], None] | None = None) -> FeatureSet:
    """Feature set of ``df``'s records (dataset schema). ``graph_of(record)`` returns the learning
    graph of a record or ``None`` (the record is dropped and counted in
    ``rows.attrs['dropped']``); ``memsim_of(record)`` returns the simulated tensor peak (MiB) or
    ``None``."""
    from perfcast.predictors.graphs import item_of

    keep, gidx, statics = [], [], []
    graphs: list = []
    summaries: list[GraphSummary] = []
    by_item: dict = {}
    dropped = 0
    recs = df.to_dict("records")
    for i, rec in enumerate(recs):
        if progress:
            progress(i, len(recs))
        it = item_of(rec)
        if it is None:
            dropped += 1
            continue
        if it not in by_item:
            g = graph_of(rec)
            if g is None:
                by_item[it] = None
            else:
                by_item[it] = len(graphs)
                graphs.append(graph_data(g))
                summaries.append(GraphSummary.of(g))
        j = by_item[it]
        if j is None:
            dropped += 1
            continue
        opt = rec.get("optimizer")
        opt = opt if isinstance(opt, str) else None
        mem = memsim_of(rec) if memsim_of else None
        statics.append(static_features(summaries[j], int(rec["batch_size"]), str(rec["mode"]),
                                       str(rec["precision"]), opt, mem))
        gidx.append(j)
        keep.append(i)
    rows = df.iloc[keep].reset_index(drop=True)
    y = np.full((len(rows), len(TARGETS)), np.nan)
    for j, t in enumerate(TARGETS):
        if t in rows.columns:
            y[:, j] = pd.to_numeric(rows[t], errors="coerce").to_numpy(dtype=float)
    y[~(y > 0)] = np.nan  # zero / negative labels are not measurements
    rows.attrs = {"dropped": dropped}
    return FeatureSet(rows=rows, static=np.asarray(statics, np.float32).reshape(-1, len(STATIC_NAMES)),
                      graph_index=np.asarray(gidx, np.int64), graphs=graphs, y=y,
                      summaries=summaries)
