"""The graph store: the learning graph of every labeled record, built once and kept on disk.

A record's learning graph is the forward fp32 graph of its model and input size at batch 1
(:func:`perfcast.features.records.learning_workload`, where the convention is explained). The
store (:func:`perfcast.paths.graph_store_dir`) is a graph corpus directory (``graphs/<key>.npz``
+ ``index.csv``, :mod:`perfcast.store.corpus`), so building it is resumable and parallel.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from perfcast.errors import PerfcastError
from perfcast.features.records import learning_workload, record_workload
from perfcast.graph import ModelGraph
from perfcast.paths import graph_store_dir
from perfcast.workload import Workload


def learning_items(df: pd.DataFrame) -> list[tuple[Workload, str] | None]:
    """Per record of ``df``: ``(learning workload, family)``, or ``None`` when perfcast has no
    workload for the record."""
    memo: dict[tuple, tuple[Workload, str] | None] = {}
    out = []
    cols = [c for c in ("model", "batch_size", "input_size", "seq_len", "mode", "precision",
                        "optimizer", "family") if c in df.columns]
    for row in df[cols].itertuples(index=False, name=None):
        t = tuple(None if (not isinstance(v, str) and pd.isna(v)) else v for v in row)
        if t not in memo:
            rec = dict(zip(cols, t))
            w = record_workload(rec)
            memo[t] = None if w is None else (learning_workload(w), str(rec.get("family") or ""))
        out.append(memo[t])
    return out


def ensure_graphs(items: list[tuple[Workload, str]], workers: int = 2, timeout_s: int = 300,
                  out_dir: str | os.PathLike | None = None,
                  progress: Callable[[int, int, dict | None], None] | None = None) -> dict[str, int]:
    """Build the graphs of ``(workload, family)`` items not yet in the store (resumable)."""
    from perfcast.store.corpus import CorpusItem, build_corpus

    unique = dict.fromkeys(w for w, _ in items)  # one graph per workload, first family wins
    family = {}
    for w, fam in items:
        family.setdefault(w, fam)
    return build_corpus([CorpusItem(w, family[w]) for w in unique], out_dir or graph_store_dir(),
                        workers=workers, timeout_s=timeout_s, progress=progress)


def load_stored_graph(workload: Workload,
                      out_dir: str | os.PathLike | None = None) -> ModelGraph | None:
    """The stored graph of ``workload``, or ``None`` when it was not built (or failed)."""
    try:
        key = workload.key()
    except PerfcastError:
        return None
    p = Path(out_dir or graph_store_dir()) / "graphs" / f"{key}.npz"
    if not p.exists():
        return None
    try:
        return ModelGraph.load(p)
    except PerfcastError:
        return None


__all__ = ["ensure_graphs", "learning_items", "load_stored_graph"]
