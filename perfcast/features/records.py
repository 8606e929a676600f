"""Record-level features: what every predictor learns from — a :class:`FeatureSet` of records.

A record is one measured (or to-be-predicted) configuration: a
:class:`~perfcast.workload.Workload` on a device. Like DIPPM and TraPPM (which learn training
step time and memory from a model's forward ONNX graph), the learned predictors read the
**forward** graph of the model — its *learning graph* (:func:`learning_workload`: inference,
fp32, batch :data:`REF_BATCH` = 1, a per-sample view of the work) — and receive the batch size,
mode, precision and optimizer as static features; batch-dependent static features (MACs, FLOPs,
activation bytes) are rescaled to the record's batch (:func:`static_features`). Measured here:
a training graph costs 8–24 s to build for a timm model against ~1 s for the forward graph, and
one forward graph per (model, input size) serves every batch, mode and precision — ~1,900
graphs for the 13,000 public records, and one graph per prediction whatever the batch (what
``perfcast fit`` needs).

Records share graphs, so a feature set holds the unique graphs once (``graphs`` — PyG ``Data``)
and per record an index into them (``graph_index``), a static vector (``static``, names in
``static_names``) and the targets ``y`` (``NaN`` = no label).

Targets and units: ``time_ms`` (per batch: latency or training step), ``memory_mb`` (MiB, peak),
``energy_j`` (J per batch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

import numpy as np

from perfcast import ops as _ops
from perfcast.errors import PerfcastError
from perfcast.features.encode import _DTYPE_BYTES, GRAPH_LAYOUT_VERSION
from perfcast.graph import ModelGraph
from perfcast.workload import DEFAULT_OPTIMIZER, PRECISIONS, Workload

if TYPE_CHECKING:  # pandas is imported where records are built for learning, never to answer
    import pandas as pd

    from perfcast.features.table import Table

#: Batch size every learning graph is built at.
REF_BATCH = 1

#: Targets the predictors know, in this order.
TARGETS: tuple[str, ...] = ("time_ms", "memory_mb", "energy_j")

#: Layout of a record's features (graph layout + :data:`STATIC_NAMES`): predictors store it with
#: their weights and refuse to load against another. Bump when a column of
#: :data:`STATIC_NAMES` (or the graph layout) changes meaning or order.
FEATURE_LAYOUT_VERSION = f"{GRAPH_LAYOUT_VERSION}-static2"

#: The optimizers with a one-hot static column (layout ``static2``). ``none`` (forward +
#: backward only) came later: like a record that does not say which optimizer, it sets none of
#: them — models that need to tell the two apart use their own features.
STEP_OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")

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
    "mode=train", *(f"precision={p}" for p in PRECISIONS),
    *(f"optimizer={o}" for o in STEP_OPTIMIZERS),
    "log1p_memsim_mb", "has_memsim",
)
_S = {n: i for i, n in enumerate(STATIC_NAMES)}

#: Static features of the static-only baselines (the TraPPM / DIPPM lists, no graph learning).
BASELINE_STATIC = STATIC_NAMES


def _l(x: float) -> float:
    return math.log1p(max(0.0, float(x)))


def learning_workload(w: Workload) -> Workload:
    """The workload whose graph the learned predictors read: the same model and input size or
    sequence length, forward (inference), fp32, batch :data:`REF_BATCH` (and the default
    optimizer, which an inference graph does not use: records of one model share it)."""
    return w.replace(batch_size=REF_BATCH, mode="infer", precision="fp32",
                     optimizer=DEFAULT_OPTIMIZER)


def plan_workloads(w: Workload) -> tuple[Workload, Workload]:
    """The two forward fp32 workloads (batch 2 and 3) a :class:`~perfcast.features.kernels.
    KernelPlan` of ``w``'s model and input is built from."""
    base = w.replace(mode="infer", precision="fp32", optimizer=DEFAULT_OPTIMIZER)
    return base.replace(batch_size=2), base.replace(batch_size=3)


def record_workload(rec) -> Workload | None:
    """The workload of a dataset record, or ``None`` when perfcast has none for it (no model,
    ``fp64``, an input perfcast cannot give the model)."""
    try:
        return Workload.from_record(rec)
    except PerfcastError:
        return None


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


def static_features(s: GraphSummary, workload: Workload,
                    memsim_mb: float | None = None) -> np.ndarray:
    """The :data:`STATIC_NAMES` vector of one record (float32): the workload's batch, mode,
    precision and optimizer (one-hot; all zero when the record does not say which) with the
    graph's aggregates rescaled to that batch, and the simulated tensor peak when given."""
    batch_size, mode, precision = workload.batch_size, workload.mode, workload.precision
    if batch_size is None or precision is None:
        raise PerfcastError("static features need the workload's batch size and precision")
    optimizer = workload.train_optimizer
    k = float(batch_size) / max(1, s.batch)
    act = s.activation_bytes * k
    v = [_l(batch_size), _l(s.nodes), _l(s.edges), _l(s.macs * k), _l(s.params),
         _l(s.param_bytes + act), _l(s.conv), _l(s.dense), _l(s.relu), _l(s.flops * k), _l(act),
         _l(s.param_bytes), _l(s.input_elements * k), _l(s.attention), _l(s.norm),
         _l(s.macs / max(1, s.batch)), _l(s.activation_bytes / max(1, s.batch)),
         _l(s.max_node_bytes * k), float(mode == "train"),
         *(float(precision == p) for p in PRECISIONS),
         *(float(optimizer == o) for o in STEP_OPTIMIZERS),
         _l(memsim_mb or 0.0), float(memsim_mb is not None)]
    return np.asarray(v, dtype=np.float32)


def op_arrays(g: ModelGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node of a learning graph, for the roofline: FLOPs and bytes moved (inputs + output +
    parameters) at the graph's batch (float64) and the canonical op id (int64) — numpy only."""
    flops = np.array([float(n.flops) for n in g.nodes], dtype=np.float64)
    moved = []
    for n in g.nodes:
        inb = sum(math.prod(int(x) for x in s) * _DTYPE_BYTES.get(dt, 4)
                  for s, dt in zip(n.input_shapes, n.input_dtypes))
        moved.append(float(inb + n.output_bytes + n.param_bytes))
    return (flops, np.array(moved, dtype=np.float64),
            np.array([_ops.op_index(n.op) for n in g.nodes], dtype=np.int64))


def graph_data(g: ModelGraph):
    """PyG ``Data`` of a learning graph: ``x`` (node matrix), ``edge_index``, ``edge_attr`` and,
    for the roofline, ``op_flops`` / ``op_bytes`` per node (FLOPs and bytes moved at the graph's
    batch, float64) and ``op_index`` (canonical op id) — :func:`op_arrays`. For learning (torch
    models train on it); an answer reads the same matrices as :func:`graph_arrays`."""
    import torch

    from perfcast.features.pyg import to_pyg

    d = to_pyg(g)
    flops, moved, op_index = op_arrays(g)
    d.op_flops = torch.from_numpy(flops)
    d.op_bytes = torch.from_numpy(moved)
    d.op_index = torch.from_numpy(op_index)
    d.ref_batch = int(g.meta.batch_size or 1)
    return d


@dataclass
class GraphArrays:
    """A learning graph's matrices as numpy arrays — what :func:`graph_data` holds as torch
    tensors, under the same names, for the predictors answering without torch: ``x``
    ``[nodes, len(NODE_FEATURES)]`` float32, ``edge_index`` ``[2, edges]`` int64,
    ``edge_attr`` ``[edges, len(EDGE_FEATURES)]`` float32, ``op_flops`` / ``op_bytes`` per node
    (float64, at ``ref_batch``) and ``op_index`` (int64). Computed from the cached
    :class:`~perfcast.graph.ModelGraph` (a pass over its nodes; nothing else is cached)."""

    x: np.ndarray
    edge_index: np.ndarray
    edge_attr: np.ndarray
    op_flops: np.ndarray
    op_bytes: np.ndarray
    op_index: np.ndarray
    ref_batch: int
    model_id: str = ""
    layout: str = GRAPH_LAYOUT_VERSION

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])


def graph_arrays(g: ModelGraph) -> GraphArrays:
    """:class:`GraphArrays` of a learning graph (numpy only)."""
    from perfcast.features.encode import edge_matrix, node_matrix

    ei, ea = edge_matrix(g)
    flops, moved, op_index = op_arrays(g)
    return GraphArrays(x=node_matrix(g), edge_index=ei, edge_attr=ea, op_flops=flops,
                       op_bytes=moved, op_index=op_index, ref_batch=int(g.meta.batch_size or 1),
                       model_id=g.meta.model_id)


def as_numpy(v) -> np.ndarray:
    """A numpy view of a graph matrix: a numpy array as it is, a torch tensor through
    ``.numpy()`` (one reader for :class:`GraphArrays` and PyG ``Data``)."""
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "detach"):
        return v.detach().cpu().numpy()
    return np.asarray(v)


@dataclass
class FeatureSet:
    """Records ready for learning (see module doc). ``rows`` keeps the record metadata
    (``model``, ``family``, ``device``, ``mode``, ``precision``, ``batch_size`` …): a
    ``pandas.DataFrame`` when built for learning (:func:`build_feature_set`), a light
    :class:`~perfcast.features.table.Table` with the same columns when routing builds a
    request's records (no pandas to answer). ``graphs``: PyG ``Data`` for learning,
    :class:`GraphArrays` to answer — the same matrices under the same names."""

    rows: pd.DataFrame | Table
    static: np.ndarray  # [n, len(static_names)] float32
    graph_index: np.ndarray  # [n] int64 into graphs
    graphs: list  # unique PyG Data or GraphArrays
    y: np.ndarray  # [n, len(target_names)] float64, NaN = unknown
    static_names: tuple[str, ...] = STATIC_NAMES
    target_names: tuple[str, ...] = TARGETS
    layout: str = FEATURE_LAYOUT_VERSION
    summaries: list = field(default_factory=list)  # GraphSummary per graph
    #: KernelPlan per graph (or None) when a predictor prices kernels (``uses_plans``)
    plans: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def subset(self, idx: Sequence[int] | np.ndarray) -> FeatureSet:
        """Records ``idx`` (graphs are shared, not copied)."""
        idx = np.asarray(idx, dtype=np.int64)
        return FeatureSet(rows=self.rows.iloc[idx].reset_index(drop=True),
                          static=self.static[idx], graph_index=self.graph_index[idx],
                          graphs=self.graphs, y=self.y[idx], static_names=self.static_names,
                          target_names=self.target_names, layout=self.layout,
                          summaries=self.summaries, plans=self.plans)

    def target(self, name: str) -> np.ndarray:
        return self.y[:, self.target_names.index(name)]

    def labeled_targets(self) -> list[str]:
        """Targets with at least one label."""
        return [t for j, t in enumerate(self.target_names) if np.isfinite(self.y[:, j]).any()]

    def families(self) -> np.ndarray:
        return self.rows["family"].astype(str).to_numpy()


def build_feature_set(df: pd.DataFrame, graph_of: Callable[[Workload], ModelGraph | None],
                      memsim_of: Callable[[Workload], float | None] | None = None,
                      progress: Callable[[int, int], None] | None = None,
                      plan_of: Callable[[Workload], object] | None = None) -> FeatureSet:
    """Feature set of ``df``'s records (dataset schema). ``graph_of(learning workload)`` returns
    the learning graph of a record or ``None`` (the record is dropped and counted in
    ``rows.attrs['dropped']``, as records without a workload are); ``memsim_of(workload)``
    returns the simulated tensor peak (MiB) of the record's own workload or ``None``;
    ``plan_of(learning workload)`` its :class:`~perfcast.features.kernels.KernelPlan` (or
    ``None``) for predictors that price kernels. ``rows`` gains ``graph_key``, the key of the
    learning graph each record used."""
    import pandas as pd

    keep, gidx, statics, keys = [], [], [], []
    graphs: list = []
    summaries: list[GraphSummary] = []
    plans: list = []
    by_graph: dict[Workload, int | None] = {}
    dropped = 0
    recs = df.to_dict("records")
    for i, rec in enumerate(recs):
        if progress:
            progress(i, len(recs))
        w = record_workload(rec)
        if w is None:
            dropped += 1
            continue
        lw = learning_workload(w)
        if lw not in by_graph:
            g = graph_of(lw)
            if g is None:
                by_graph[lw] = None
            else:
                by_graph[lw] = len(graphs)
                graphs.append(graph_data(g))
                summaries.append(GraphSummary.of(g))
                if plan_of is not None:
                    plans.append(plan_of(lw))
        j = by_graph[lw]
        if j is None:
            dropped += 1
            continue
        mem = memsim_of(w) if memsim_of else None
        statics.append(static_features(summaries[j], w, mem))
        gidx.append(j)
        keep.append(i)
        keys.append(lw.key() if lw.model.cacheable else None)
    rows = df.iloc[keep].reset_index(drop=True)
    rows["graph_key"] = pd.Series(keys, index=rows.index, dtype=object)
    y = np.full((len(rows), len(TARGETS)), np.nan)
    for j, t in enumerate(TARGETS):
        if t in rows.columns:
            y[:, j] = pd.to_numeric(rows[t], errors="coerce").to_numpy(dtype=float)
    y[~(y > 0)] = np.nan  # zero / negative labels are not measurements
    rows.attrs = {"dropped": dropped}
    return FeatureSet(rows=rows, static=np.asarray(statics, np.float32).reshape(-1, len(STATIC_NAMES)),
                      graph_index=np.asarray(gidx, np.int64), graphs=graphs, y=y,
                      summaries=summaries, plans=plans)
