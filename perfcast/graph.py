"""``ModelGraph``: perfcast's intermediate representation of a model's computation graph.

Every frontend (ONNX, PyTorch, timm, torchvision, Hugging Face) produces one of these; every
feature encoder and predictor consumes it. Nodes are operators with a canonical op type from
:mod:`perfcast.ops`; edges carry tensors (bytes) and a kind (``forward`` / ``backward``).

Saved as a single ``.npz`` whose arrays are plain numbers plus one JSON document (uint8) —
loaded with ``allow_pickle=False``, never pickle.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfcast import ops as _ops
from perfcast.errors import PerfcastError

#: Version of the on-disk/IR format. Bump when fields or their meaning change.
GRAPH_FORMAT_VERSION = "1"

Shape = tuple[int, ...]

PHASES = ("forward", "backward", "optimizer")
EDGE_KINDS = ("forward", "backward")


@dataclass
class Node:
    """One operator.

    Units: ``flops`` and ``macs`` are counts for the whole batch; ``params`` is a count of
    learnable elements read by this op; ``param_bytes`` and ``output_bytes`` are bytes.
    """

    name: str
    op: str  # canonical op type (perfcast.ops.OPS)
    target: str  # original op name, e.g. "aten.convolution.default" or "Conv"
    input_shapes: list[Shape] = field(default_factory=list)
    input_dtypes: list[str] = field(default_factory=list)
    output_shapes: list[Shape] = field(default_factory=list)
    output_dtypes: list[str] = field(default_factory=list)
    flops: float = 0.0
    macs: float = 0.0
    params: int = 0
    param_bytes: int = 0
    output_bytes: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)
    phase: str = "forward"  # forward | backward | optimizer


@dataclass
class Edge:
    """A tensor delivered from node ``src`` to node ``dst`` (indices into ``nodes``)."""

    src: int
    dst: int
    bytes: int = 0
    kind: str = "forward"  # forward | backward


@dataclass
class GraphMeta:
    """What the graph is of. ``input_shapes`` are full shapes including the batch dim."""

    model_id: str
    batch_size: int
    input_shapes: list[Shape]
    mode: str = "infer"  # infer | train
    precision: str = "fp32"  # fp32 | amp | fp16 | bf16
    frontend: str = ""
    frontend_version: str = ""
    format_version: str = GRAPH_FORMAT_VERSION
    optimizer: str | None = None  # sgd | sgd-momentum | adam | adamw, train mode only
    unmapped_ops: list[str] = field(default_factory=list)
    total_params: int | None = None  # learnable parameters of the model (None: sum of nodes)
    total_param_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ModelGraph:
    """A directed computation graph: ``nodes``, ``edges`` and ``meta``."""

    def __init__(self, nodes: list[Node], edges: list[Edge], meta: GraphMeta):
        self.nodes = nodes
        self.edges = edges
        self.meta = meta

    # ------------------------------------------------------------------ summaries
    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return (f"ModelGraph({self.meta.model_id!r}, mode={self.meta.mode}, "
                f"batch={self.meta.batch_size}, nodes={len(self.nodes)}, edges={len(self.edges)})")

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    def op_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(n.op for n in self.nodes).items()))

    def phase_counts(self) -> dict[str, int]:
        return dict(Counter(n.phase for n in self.nodes))

    @property
    def flops(self) -> float:
        return float(sum(n.flops for n in self.nodes))

    @property
    def macs(self) -> float:
        return float(sum(n.macs for n in self.nodes))

    def forward_macs(self) -> float:
        return float(sum(n.macs for n in self.nodes if n.phase == "forward"))

    @property
    def params(self) -> int:
        if self.meta.total_params is not None:
            return int(self.meta.total_params)
        return int(sum(n.params for n in self.nodes if n.phase == "forward"))

    @property
    def param_bytes(self) -> int:
        if self.meta.total_param_bytes is not None:
            return int(self.meta.total_param_bytes)
        return int(sum(n.param_bytes for n in self.nodes if n.phase == "forward"))

    @property
    def activation_bytes(self) -> int:
        """Bytes of all tensors produced by forward operators that allocate (views excluded)."""
        return int(sum(n.output_bytes for n in self.nodes
                       if n.phase == "forward" and n.op not in _ops.VIEW_OPS))

    def summary(self) -> dict[str, Any]:
        """The numbers ``perfcast inspect --json`` prints (counts; MACs/FLOPs per batch; bytes)."""
        m = self.meta
        return {
            "model": m.model_id,
            "mode": m.mode,
            "precision": m.precision,
            "batch_size": m.batch_size,
            "input_shapes": [list(s) for s in m.input_shapes],
            "optimizer": m.optimizer,
            "frontend": m.frontend,
            "nodes": self.num_nodes,
            "edges": self.num_edges,
            "params": self.params,
            "macs": self.macs,
            "flops": self.flops,
            "forward_macs": self.forward_macs(),
            "activation_bytes": self.activation_bytes,
            "param_bytes": self.param_bytes,
            "op_counts": self.op_counts(),
            "phase_counts": self.phase_counts(),
            "unmapped_ops": list(m.unmapped_ops),
            "format_version": m.format_version,
        }

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        return {
            "meta": asdict(self.meta),
            "nodes": [asdict(n) for n in self.nodes],
            "edges": [[e.src, e.dst, e.bytes, e.kind] for e in self.edges],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelGraph:
        meta = GraphMeta(**d["meta"])
        meta.input_shapes = [tuple(s) for s in meta.input_shapes]
        nodes = []
        for nd in d["nodes"]:
            for k in ("input_shapes", "output_shapes"):
                nd[k] = [tuple(s) for s in nd[k]]
            nodes.append(Node(**nd))
        edges = [Edge(int(s), int(t), int(b), k) for s, t, b, k in d["edges"]]
        return cls(nodes, edges, meta)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the graph to ``path`` (``.npz``; numeric arrays + one JSON document).

        The write is atomic: a temporary file is renamed into place, so an interrupted save
        never leaves a half-written graph.
        """
        path = Path(path)
        doc = {"meta": asdict(self.meta),
               "nodes": [{k: v for k, v in asdict(n).items()
                          if k not in ("flops", "macs", "params", "param_bytes", "output_bytes")}
                         for n in self.nodes]}
        arrays = {
            "json": np.frombuffer(json.dumps(doc, separators=(",", ":")).encode(), dtype=np.uint8),
            "flops": np.array([n.flops for n in self.nodes], dtype=np.float64),
            "macs": np.array([n.macs for n in self.nodes], dtype=np.float64),
            "params": np.array([n.params for n in self.nodes], dtype=np.int64),
            "param_bytes": np.array([n.param_bytes for n in self.nodes], dtype=np.int64),
            "output_bytes": np.array([n.output_bytes for n in self.nodes], dtype=np.int64),
            "edge_index": np.array([[e.src, e.dst] for e in self.edges], dtype=np.int64).reshape(-1, 2),
            "edge_bytes": np.array([e.bytes for e in self.edges], dtype=np.int64),
            "edge_backward": np.array([e.kind == "backward" for e in self.edges], dtype=bool),
        }
        from perfcast.paths import write_file_atomically

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as f:  # a file object: numpy adds no second ".npz"
                np.savez_compressed(f, **arrays)

        write_file_atomically(path, write)  # fsync'ed on disk before the rename shows it
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> ModelGraph:
        path = Path(path)
        if not path.exists():
            raise PerfcastError(f"graph file not found: {path}")
        try:
            with np.load(path, allow_pickle=False) as z:
                doc = json.loads(z["json"].tobytes().decode())
                nums = {k: z[k] for k in ("flops", "macs", "params", "param_bytes", "output_bytes",
                                          "edge_index", "edge_bytes", "edge_backward")}
        except Exception as exc:
            raise PerfcastError(f"not a perfcast graph file: {path} "
                                f"({type(exc).__name__}: {exc})") from exc
        try:
            return cls._from_doc(doc, nums, path)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise PerfcastError(f"not a perfcast graph file: {path} "
                                f"({type(exc).__name__}: {exc})") from exc

    @classmethod
    def _from_doc(cls, doc: dict, nums: dict, path: Path) -> ModelGraph:
        meta = GraphMeta(**doc["meta"])
        if meta.format_version != GRAPH_FORMAT_VERSION:
            raise PerfcastError(f"graph file {path} has format {meta.format_version}, "
                                f"this perfcast reads {GRAPH_FORMAT_VERSION}; rebuild it")
        meta.input_shapes = [tuple(s) for s in meta.input_shapes]
        nodes = []
        for i, nd in enumerate(doc["nodes"]):
            nodes.append(Node(
                name=nd["name"], op=nd["op"], target=nd["target"],
                input_shapes=[tuple(s) for s in nd["input_shapes"]], input_dtypes=nd["input_dtypes"],
                output_shapes=[tuple(s) for s in nd["output_shapes"]], output_dtypes=nd["output_dtypes"],
                flops=float(nums["flops"][i]), macs=float(nums["macs"][i]),
                params=int(nums["params"][i]), param_bytes=int(nums["param_bytes"][i]),
                output_bytes=int(nums["output_bytes"][i]), attrs=nd["attrs"], phase=nd["phase"]))
        ei, eb, ebw = nums["edge_index"], nums["edge_bytes"], nums["edge_backward"]
        edges = [Edge(int(ei[k, 0]), int(ei[k, 1]), int(eb[k]), "backward" if ebw[k] else "forward")
                 for k in range(len(eb))]
        return cls(nodes, edges, meta)

    def validate(self) -> None:
        """Raise ``PerfcastError`` if the graph is malformed (bad op, phase or edge index)."""
        n = len(self.nodes)
        for i, node in enumerate(self.nodes):
            if node.op not in _ops.OP_INDEX:
                raise PerfcastError(f"node {i} ({node.name}) has unknown op {node.op!r}")
            if node.phase not in PHASES:
                raise PerfcastError(f"node {i} ({node.name}) has unknown phase {node.phase!r}")
        for e in self.edges:
            if not (0 <= e.src < n and 0 <= e.dst < n):
                raise PerfcastError(f"edge {e.src}->{e.dst} points outside the graph")
            if e.kind not in EDGE_KINDS:
                raise PerfcastError(f"edge {e.src}->{e.dst} has unknown kind {e.kind!r}")
