"""Join dataset records to perfcast graphs: the :class:`~perfcast.workload.Workload` each record
was measured on (:meth:`Workload.from_record`), and cheap graph keys."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from perfcast.errors import PerfcastError
from perfcast.workload import Workload


def record_workload(row: Mapping | pd.Series) -> Workload:
    """The workload a record was measured on (its own batch, mode, precision and optimizer —
    not the learning graph's). Raises :class:`PerfcastError` when perfcast has none (e.g.
    ``fp64``)."""
    return Workload.from_record(row)


_KEY_COLUMNS = ("model", "batch_size", "input_size", "seq_len", "mode", "precision", "optimizer")


def attach_graph_keys(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with ``graph_key`` (:meth:`Workload.key` of the record's own workload;
    NA when the record cannot be joined, e.g. fp64). Builds no graph."""
    out = df.copy()
    cols = [c for c in _KEY_COLUMNS if c in out.columns]
    keys: dict[tuple, str | None] = {}

    def key_of(row) -> str | None:
        t = tuple(None if (not isinstance(v, str) and pd.isna(v)) else v for v in row)
        if t not in keys:
            try:
                keys[t] = record_workload(dict(zip(cols, t))).key()
            except PerfcastError:
                keys[t] = None
        return keys[t]

    values = [key_of(r) for r in out[cols].itertuples(index=False, name=None)] if len(out) else []
    out["graph_key"] = pd.Series(values, index=out.index, dtype=object)
    return out
