"""Feature sets from dataset frames: each record's learning graph from the graph store (built
when missing) and, on request, its tensor-memory simulation from the persistent cache."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from perfcast.errors import PerfcastError
from perfcast.features.kernels import KernelPlan
from perfcast.features.records import FeatureSet, build_feature_set, plan_workloads
from perfcast.labeled.graph_store import (
    ensure_graphs,
    learning_items,
    load_stored_graph,
)
from perfcast.workload import Workload


def feature_set(df: pd.DataFrame, *, build_missing: bool = True, workers: int = 2,
                memsim: bool = False, memsim_compute: bool = True, plans: bool = False,
                progress: Callable[[str, int, int], None] | None = None) -> FeatureSet:
    """Feature set of ``df``'s records (see :func:`~perfcast.features.records.build_feature_set`).
    Graphs come from the graph store; missing ones are built first (resumable) when
    ``build_missing``. With ``memsim`` every record gets its tensor-memory simulation (cached;
    ``memsim_compute=False``: cached values only). With ``plans`` every graph gets its
    :class:`~perfcast.features.kernels.KernelPlan` (from the forward graphs at batch 2 and 3,
    built into the store too)."""
    if build_missing:
        items = [i for i in learning_items(df) if i is not None]
        if plans:
            items += [(pw, fam) for lw, fam in items for pw in plan_workloads(lw)]
        ensure_graphs(items, workers=workers,
                      progress=(lambda i, n, _r: progress("graphs", i, n)) if progress else None)
    graphs: dict[Workload, object] = {}

    def graph_of(lw: Workload):
        if lw not in graphs:
            graphs[lw] = load_stored_graph(lw)
        return graphs[lw]

    memsim_of = None
    if memsim:
        from perfcast.memory.cache import MemsimCache

        cache = MemsimCache()

        def memsim_of(w: Workload) -> float | None:
            return cache.get(w, compute=memsim_compute)

    def plan_of(lw: Workload):
        g2, g3 = (load_stored_graph(pw) for pw in plan_workloads(lw))
        if g2 is None or g3 is None:
            return None
        try:
            return KernelPlan.from_graphs(g2, g3)
        except PerfcastError:
            return None

    return build_feature_set(df, graph_of, memsim_of,
                             progress=(lambda i, n: progress("features", i, n)) if progress
                             else None, plan_of=plan_of if plans else None)


__all__ = ["feature_set"]
