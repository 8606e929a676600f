"""Join dataset records to perfcast graphs: a :class:`GraphRequest` per record, cheap cache keys."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from perfcast.errors import PerfcastError
from perfcast.frontends import OPTIMIZERS, PRECISIONS, GraphRequest, parse_input_size


def _get(row, key, default=None):
    try:
        value = row[key]
    except (KeyError, IndexError):
        return default
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return default
    return value


def graph_request(row: Mapping | pd.Series) -> GraphRequest:
    """The :class:`GraphRequest` whose graph a record was measured on.

    Uses ``model``, ``batch_size`` (per device), ``input_size``, ``seq_len``, ``mode``,
    ``precision`` and, for training, ``optimizer``. Raises :class:`PerfcastError` when perfcast
    cannot build that graph (e.g. ``fp64``).
    """
    spec = _get(row, "model")
    if not spec:
        raise PerfcastError("record has no model spec")
    precision = _get(row, "precision", "fp32")
    if precision not in PRECISIONS:
        raise PerfcastError(f"{spec}: precision {precision!r} has no perfcast graph "
                            f"(graphs are built for {', '.join(PRECISIONS)})")
    mode = _get(row, "mode", "infer")
    batch = _get(row, "batch_size")
    seq = _get(row, "seq_len")
    optimizer = _get(row, "optimizer")
    if mode != "train" or optimizer not in OPTIMIZERS:
        optimizer = GraphRequest.optimizer  # the dataclass default
    req = GraphRequest(spec=str(spec), batch_size=int(batch) if batch is not None else None,
                       input_size=parse_input_size(_get(row, "input_size")),
                       seq_len=int(seq) if seq is not None else None, mode=str(mode),
                       precision=str(precision), optimizer=optimizer)
    req.validate()
    return req


_KEY_COLUMNS = ("model", "batch_size", "input_size", "seq_len", "mode", "precision", "optimizer")


def attach_graph_keys(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with ``graph_key`` (:func:`perfcast.cache.cache_key`; NA when the record
    cannot be joined, e.g. fp64). Builds no graph."""
    from perfcast.cache import cache_key

    out = df.copy()
    cols = [c for c in _KEY_COLUMNS if c in out.columns]
    keys: dict[tuple, str | None] = {}

    def key_of(row) -> str | None:
        t = tuple(None if (not isinstance(v, str) and pd.isna(v)) else v for v in row)
        if t not in keys:
            try:
                keys[t] = cache_key(graph_request(dict(zip(cols, t))))
            except PerfcastError:
                keys[t] = None
        return keys[t]

    values = [key_of(r) for r in out[cols].itertuples(index=False, name=None)] if len(out) else []
    out["graph_key"] = pd.Series(values, index=out.index, dtype=object)
    return out
