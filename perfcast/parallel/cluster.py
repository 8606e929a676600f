"""The GPUs a parallel training step runs on: :class:`Cluster` — GPUs per node, the per-GPU
unidirectional bandwidth inside a node (NVLink / NVSwitch / xGMI / PCIe) and across nodes (the
network share of one GPU), and optional latencies.

``--cluster FILE.json`` gives one (:meth:`Cluster.load`); without it the device's registry row
gives the defaults (:meth:`Cluster.of_device`: SXM / OAM parts in 8-GPU NVLink servers, PCIe
cards over PCIe, the source in the row's ``interconnect``), said in the prediction's notes.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError, unknown_keys

#: Numbers a cluster file may give and their unit (for messages).
_NUMBERS = {"intra_node_gbs": "GB/s", "inter_node_gbs": "GB/s",
            "intra_node_latency_us": "µs", "inter_node_latency_us": "µs"}


@dataclass(frozen=True)
class Cluster:
    """``gpus_per_node`` GPUs per server; ``intra_node_gbs`` / ``inter_node_gbs`` — per-GPU
    unidirectional bandwidth (GB/s, 1e9 bytes/s) to the GPUs of its node and to other nodes
    (a node's network bandwidth ÷ its GPUs); ``intra_node_latency_us`` /
    ``inter_node_latency_us`` — the latency of one step of a collective (µs; ``None``: the
    values fitted on Vidur's profiles, :mod:`perfcast.parallel.collectives`); ``name`` and
    ``source`` say where the numbers come from."""

    gpus_per_node: int
    intra_node_gbs: float
    inter_node_gbs: float
    intra_node_latency_us: float | None = None
    inter_node_latency_us: float | None = None
    name: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        g = self.gpus_per_node
        if isinstance(g, bool) or not isinstance(g, (int, float)) or g < 1 \
                or (isinstance(g, float) and not g.is_integer()) or g > 1024:
            raise PerfcastError(f"cluster: gpus_per_node must be a whole number in 1..1024, "
                                f"got {g!r}")
        object.__setattr__(self, "gpus_per_node", int(g))
        for name, unit in _NUMBERS.items():
            v = getattr(self, name)
            if v is None and name.endswith("latency_us"):
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v <= 0:
                raise PerfcastError(f"cluster: {name} must be a number > 0 ({unit}), got {v!r}")
            object.__setattr__(self, name, float(v))
        for name in ("name", "source"):
            if not isinstance(getattr(self, name), str):
                raise PerfcastError(f"cluster: {name} must be a string")

    @classmethod
    def from_dict(cls, doc: Any, origin: str = "cluster") -> Cluster:
        if not isinstance(doc, dict):
            raise PerfcastError(f"{origin}: a cluster is one JSON object with gpus_per_node, "
                                f"intra_node_gbs, inter_node_gbs (and optional "
                                f"intra_node_latency_us, inter_node_latency_us, name, source)")
        names = [f.name for f in dataclasses.fields(cls)]
        hints = unknown_keys(doc, names)
        if hints:
            raise PerfcastError(f"{origin}: unknown field(s) {hints} (a cluster has "
                                f"{', '.join(names)})")
        missing = [k for k in ("gpus_per_node", "intra_node_gbs", "inter_node_gbs")
                   if doc.get(k) is None]
        if missing:
            raise PerfcastError(f"{origin}: missing {', '.join(missing)}")
        try:
            return cls(**doc)
        except PerfcastError as exc:
            raise PerfcastError(f"{origin}: {str(exc).removeprefix('cluster: ')}") from None

    @classmethod
    def load(cls, path: str | Path) -> Cluster:
        """Read and validate a cluster JSON file (exit 2 naming the file and the field)."""
        from perfcast.paths import read_json_file

        c = cls.from_dict(read_json_file(path, "cluster file"), origin=str(path))
        return c if c.name else dataclasses.replace(c, name=Path(path).expanduser().stem)

    @classmethod
    def of_device(cls, device) -> Cluster:
        """The default servers of ``device`` (a :class:`~perfcast.devices.Device`) from its
        registry row (``gpus_per_node``, ``intra_node_gbs``, ``inter_node_gbs``,
        ``interconnect``)."""
        vals = (device.gpus_per_node, device.intra_node_gbs, device.inter_node_gbs)
        if any(v is None for v in vals):
            raise PerfcastError(f"{device.key} has no interconnect defaults in the registry "
                                f"(gpus_per_node, intra_node_gbs, inter_node_gbs); give "
                                f"--cluster FILE.json")
        return cls(gpus_per_node=int(device.gpus_per_node),
                   intra_node_gbs=float(device.intra_node_gbs),
                   inter_node_gbs=float(device.inter_node_gbs),
                   name=f"{device.key} servers (registry defaults)",
                   source=device.interconnect or "")

    @classmethod
    def resolve(cls, cluster: Any, device) -> Cluster:
        """``cluster`` as a :class:`Cluster`: one already, a dict, a file path, or ``None``
        (the device's defaults)."""
        if cluster is None:
            return cls.of_device(device)
        if isinstance(cluster, Cluster):
            return cluster
        if isinstance(cluster, dict):
            return cls.from_dict(cluster)
        if isinstance(cluster, (str, Path)):
            return cls.load(cluster)
        raise PerfcastError(f"cluster must be a Cluster, a dict or a JSON file, not "
                            f"{type(cluster).__name__}")

    def nodes(self, gpus: int) -> int:
        return max(1, math.ceil(gpus / self.gpus_per_node))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        return (f"{self.name or 'cluster'}: {self.gpus_per_node} GPUs per node, "
                f"{self.intra_node_gbs:g} GB/s inside a node, {self.inter_node_gbs:g} GB/s per "
                f"GPU across nodes")


__all__ = ["Cluster"]
