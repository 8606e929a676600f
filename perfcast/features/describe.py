"""Text views of a forward graph for the GNN+LLM predictor (thesis ch. 7; ``gnnllm``).

Everything here reads only what a PyG ``Data`` of :func:`perfcast.features.records.graph_data`
(or of :func:`perfcast.pretrain.dataset.load_corpus`) carries — the node matrix ``x`` in the
:data:`perfcast.features.encode.NODE_FEATURES` layout (op one-hot, log1p shapes / MACs /
params / FLOPs) and ``edge_index`` — so the same function describes a labeled record's graph
and an unlabeled corpus graph.

* :func:`summary` — the thesis' §7.7.3 "Summarise the graph" answer: node and edge counts, the
  batch size, GFLOPs, parameters, MACs and per-layer-type statistics (count, FLOPs, MACs,
  parameters per operator), most expensive operators first. Stage 2 (graph-text adaptation)
  learns to produce it from the graph token; Table 7.2's "high-level text" representation is
  it too.
* :func:`json_text` — Table 7.2's semi-structured representation: one JSON object per node
  (operator, output shape, MACs, parameters) and the edge list, compact separators.
* :func:`prompt` — the task prompt ("predict the inference time of this model on <device> at
  batch size <b> in <precision>"; "… training step time …"; "… peak training memory …").
"""

from __future__ import annotations

import json
import math

import numpy as np

from perfcast import ops as _ops
from perfcast.features.encode import NODE_FEATURES

_COL = {n: i for i, n in enumerate(NODE_FEATURES)}
_N_OPS = len(_ops.OPS)


def _num(v: float) -> str:
    """A magnitude in words, 3 significant digits (``12.1 billion``, ``335.6 thousand``)."""
    v = float(v)
    for div, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million"), (1e3, "thousand")):
        if abs(v) >= div:
            return f"{v / div:.1f} {word}"
    return f"{v:.0f}"


def _node_arrays(x) -> dict[str, np.ndarray]:
    x = np.asarray(x.float().numpy() if hasattr(x, "numpy") else x, dtype=np.float64)
    return {"op": x[:, :_N_OPS].argmax(1) if len(x) else np.zeros(0, int),
            "macs": np.expm1(x[:, _COL["log1p_macs"]]),
            "params": np.expm1(x[:, _COL["log1p_params"]]),
            "flops": np.expm1(x[:, _COL["log1p_flops"]]),
            "out": np.rint(np.expm1(x[:, [_COL[f"log1p_out_shape[{i}]"] for i in range(6)]]))}


def layer_stats(data) -> list[tuple[str, int, float, float, float]]:
    """``(op, count, flops, macs, params)`` per operator type, by FLOPs then count."""
    a = _node_arrays(data.x)
    out = []
    for k in np.unique(a["op"]).tolist():
        m = a["op"] == k
        out.append((_ops.OPS[k].replace("_", " "), int(m.sum()), float(a["flops"][m].sum()),
                    float(a["macs"][m].sum()), float(a["params"][m].sum())))
    return sorted(out, key=lambda r: (-r[2], -r[1], r[0]))


def summary(data, batch_size: int | None = None, max_layers: int = 12) -> str:
    """The "Summarise the graph" answer of thesis §7.7.3 for ``data`` (module doc); at most
    ``max_layers`` operator types (the most expensive)."""
    a = _node_arrays(data.x)
    n, e = int(data.x.shape[0]), int(data.edge_index.shape[1])
    head = (f"the graph contains {n} nodes and {e} edges. "
            + (f"the batch size is {int(batch_size)}. " if batch_size else "")
            + f"the graph has {a['flops'].sum() / 1e9:.2f} gflops, "
              f"{_num(a['params'].sum())} parameters, and {_num(a['macs'].sum())} macs.")
    lines = [head, "layer stats summary:"]
    for op, cnt, fl, mac, par in layer_stats(data)[:max_layers]:
        lines.append(f"layer: {op}, implemented: {cnt} times, flops: {_num(fl)}, "
                     f"macs: {_num(mac)}, parameters: {_num(par)}")
    return "\n".join(lines)


def json_text(data) -> str:
    """Table 7.2's semi-structured JSON of ``data`` (module doc)."""
    a = _node_arrays(data.x)
    nodes = []
    for i in range(int(data.x.shape[0])):
        shape = [int(v) for v in a["out"][i] if v > 0]
        nodes.append({"id": i, "op": _ops.OPS[int(a["op"][i])], "out": shape,
                      **({"macs": int(a["macs"][i])} if a["macs"][i] >= 1 else {}),
                      **({"params": int(a["params"][i])} if a["params"][i] >= 1 else {})})
    ei = np.asarray(data.edge_index)
    return json.dumps({"nodes": nodes, "edges": ei.T.tolist()}, separators=(",", ":"))


_MODE_WHAT = {("time_ms", "infer"): "the inference time", ("time_ms", "train"): "the training step time",
              ("memory_mb", "train"): "the peak training memory",
              ("memory_mb", "infer"): "the peak inference memory",
              ("energy_j", "infer"): "the inference energy", ("energy_j", "train"): "the training step energy"}


def prompt(target: str, mode: str, device: str, batch_size, precision: str) -> str:
    """The task prompt of one record (module doc); batch size and precision are in the text
    (the thesis puts the batch size in the text / graph)."""
    what = _MODE_WHAT.get((target, mode), f"the {target.replace('_', ' ')}")
    b = "" if batch_size is None or (isinstance(batch_size, float) and math.isnan(batch_size)) \
        else f" at batch size {int(batch_size)}"
    p = f" in {precision}" if precision else ""
    return f"predict {what} of this model on {device}{b}{p}"
