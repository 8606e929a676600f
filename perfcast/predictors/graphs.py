"""Learning graphs: one forward (inference, fp32) graph per model and input size, at batch 1.

Like DIPPM and TraPPM (which learn training step time and memory from a model's forward ONNX
graph), the learned predictors read the *forward* graph of the model and receive the mode,
precision, optimizer and batch size as static features. Two reasons, measured here: a training
graph (AOTAutograd joint graph + optimizer) costs 8–24 s to build for a timm model against
~1 s for the forward graph, and one forward graph per (model, input size) serves every mode,
precision and batch size — ~1,900 graphs for the 13,000 public records instead of ~4,500 slow
ones. A record's graph depends on its batch only through sizes (activations scale with it,
parameters do not), so the graph is built at :data:`REF_BATCH` = 1 (a per-sample view of the
work) and the batch-dependent static features are rescaled to the record's batch
(:func:`perfcast.predictors.features.static_features`). The same convention holds at prediction
time, so one graph answers every batch size, mode and precision (what ``perfcast fit`` needs).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from perfcast.errors import PerfcastError
from perfcast.frontends import PRECISIONS, GraphRequest, parse_input_size

#: Batch size every learning graph is built at.
REF_BATCH = 1


@dataclass(frozen=True)
class GraphItem:
    """One model and input size; its learning graph is the fp32 forward graph at
    :data:`REF_BATCH`."""

    model: str
    family: str = field(compare=False)
    input_size: str | None
    seq_len: int | None
    batch_size: int = REF_BATCH
    mode: str = "infer"
    precision: str = "fp32"

    def request(self) -> GraphRequest:
        return GraphRequest(spec=self.model, batch_size=self.batch_size,
                            input_size=parse_input_size(self.input_size), seq_len=self.seq_len,
                            mode="infer", precision="fp32")


def _clean(v):
    return None if v is None or (not isinstance(v, str) and pd.isna(v)) else v


def item_of(row) -> GraphItem | None:
    """The :class:`GraphItem` of a dataset record, or ``None`` when perfcast has no graph for it
    (fp64 records: perfcast's features know fp32/amp/fp16/bf16 only; no model)."""
    model = _clean(row.get("model"))
    precision = _clean(row.get("precision")) or "fp32"
    if not model or precision not in PRECISIONS:
        return None
    seq = _clean(row.get("seq_len"))
    return GraphItem(model=str(model), family=str(_clean(row.get("family")) or ""),
                     input_size=_clean(row.get("input_size")),
                     seq_len=int(seq) if seq is not None else None)


def graph_store_dir() -> Path:
    """Where learning graphs live: ``$PERFCAST_GRAPH_STORE`` or ``<cache>/../labeled``."""
    env = os.environ.get("PERFCAST_GRAPH_STORE")
    if env:
        return Path(env)
    from perfcast.cache import cache_dir

    return cache_dir().parent / "labeled"


def attach_items(df: pd.DataFrame) -> pd.DataFrame:
    """Copy of ``df`` with ``graph_item`` (object column; ``None`` where no graph exists) and
    ``graph_key`` (the cache key of the reference-batch request)."""
    from perfcast.cache import cache_key

    out = df.copy()
    items, keys = [], []
    memo: dict[GraphItem, str] = {}
    for row in out.to_dict("records"):
        it = item_of(row)
        items.append(it)
        if it is None:
            keys.append(None)
            continue
        if it not in memo:
            try:
                memo[it] = cache_key(it.request())
            except PerfcastError:
                memo[it] = None
        keys.append(memo[it])
    out["graph_item"] = pd.Series(items, index=out.index, dtype=object)
    out["graph_key"] = pd.Series(keys, index=out.index, dtype=object)
    return out


def ensure_graphs(items: list[GraphItem], workers: int = 2, timeout_s: int = 300,
                  out_dir: str | os.PathLike | None = None,
                  progress: Callable[[int, int, dict | None], None] | None = None) -> dict[str, int]:
    """Build the graphs of ``items`` that are not yet in the graph store (resumable)."""
    from perfcast.store.corpus import build_corpus

    return build_corpus(list(dict.fromkeys(i for i in items if i is not None)),
                        out_dir or graph_store_dir(), workers=workers, timeout_s=timeout_s,
                        progress=progress)


def load_graph_for(key: str, out_dir: str | os.PathLike | None = None):
    """The stored graph ``key`` or ``None`` when it was not built (or failed)."""
    from perfcast.graph import ModelGraph

    p = Path(out_dir or graph_store_dir()) / "graphs" / f"{key}.npz"
    if not p.exists():
        return None
    return ModelGraph.load(p)
