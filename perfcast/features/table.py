"""A light column table for the prediction path: numpy columns, no pandas.

A cached prediction builds a handful of records (one per batch of :data:`perfcast.routing.
BATCH_GRID`) and the kernels of their plans; importing pandas and building its frames cost more
than the arithmetic (``benchmarks/bench_cold_start.py``). :class:`Table` holds equal-length numpy arrays by name and
answers the part of ``pandas.DataFrame``'s interface the prediction code reads, **with the same
meaning**, so one function serves a pandas frame (training and evaluation, which keep pandas)
and a table (answering):

* ``len(t)``, ``t.columns``, ``name in t``, iteration over the column names, ``t.attrs``;
* ``t[name]`` — a :class:`Column` (a numpy array with ``to_numpy``, ``to_list``, ``unique``
  (first-appearance order, as ``pandas.unique``), ``nunique``, ``isna`` / ``notna`` /
  ``dropna`` / ``fillna`` / ``where``, ``iat`` / ``iloc``, ``map``, ``equals``);
  ``t[[names]]`` — a table of those columns;
* ``t[name] = value`` (a scalar is broadcast), ``assign``, ``drop(columns=…)``,
  ``rename(columns=…)``, ``copy``, ``reset_index(drop=True)`` (a table has no index: a copy);
* ``t.iloc[i]`` — row ``i`` as a :class:`Row` (a dict with ``to_dict``); ``t.iloc[rows]`` —
  a table of those rows (indices, a slice or a boolean mask);
* ``iterrows``, ``itertuples(index=False, name=None)``, ``to_dict("records")``,
  ``to_numpy(dtype)``, ``get(name, default)``, ``index`` (``0 … n−1``);
* :meth:`Table.from_records` builds a table as ``pandas.DataFrame(records)`` would (columns in
  order of first appearance; a value a record lacks is missing; numbers with a missing value
  become float64 with NaN; strings and ``None`` stay objects), :meth:`Table.concat` as
  ``pandas.concat(…, ignore_index=True)``, :meth:`to_pandas` gives the frame.

Missing values are ``None`` or NaN (:func:`isna`). Anything else of pandas (group-by, joins,
indexes) is not here: code on the prediction path does it with numpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np


def isna(value: Any) -> bool:
    """``pandas.isna`` of a scalar: ``None``, NaN (float or numpy) and ``pandas.NA`` / ``NaT``."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(value != value)
    return type(value).__name__ in ("NAType", "NaTType")


def notna(value: Any) -> bool:
    """``pandas.notna`` of a scalar."""
    return not isna(value)


def missing(values) -> np.ndarray:
    """``pandas.isna`` of an array: a boolean mask of the ``None`` / NaN entries."""
    return _na_mask(np.asarray(values))


def _na_mask(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.isnan(a)
    if a.dtype.kind == "c":
        return np.isnan(a)
    if a.dtype == object:
        return np.fromiter((isna(v) for v in a), dtype=bool, count=len(a))
    return np.zeros(len(a), dtype=bool)


def unique(values) -> np.ndarray:
    """``pandas.unique``: the distinct values in order of first appearance (NaN once)."""
    a = np.asarray(values)
    seen: dict = {}
    nan = False
    for v in a.tolist():
        if isinstance(v, float) and v != v:
            if not nan:
                seen[("__nan__",)] = v
                nan = True
            continue
        seen.setdefault(v, v)
    out = list(seen.values())
    if a.dtype != object:
        return np.asarray(out, dtype=a.dtype)
    return _object_array(out)


def _object_array(values: Sequence) -> np.ndarray:
    """A 1-d object array of ``values`` (sequences among them stay elements)."""
    vals = values if isinstance(values, list) else list(values)
    if not any(issubclass(t, (np.ndarray, list, tuple)) for t in set(map(type, vals))):
        return np.array(vals, dtype=object).reshape(len(vals))
    out = np.empty(len(vals), dtype=object)
    for i, v in enumerate(vals):
        out[i] = v
    return out


class _Indexer:
    def __init__(self, fn) -> None:
        self._fn = fn

    def __getitem__(self, key):
        return self._fn(key)


class Column(np.ndarray):
    """One column of a :class:`Table`: a numpy array with the ``pandas.Series`` methods the
    prediction code reads (module docstring)."""

    def to_numpy(self, dtype=None, copy: bool = False) -> np.ndarray:
        out = np.asarray(self.view(np.ndarray), dtype=dtype)
        return out.copy() if copy and out is self else out

    def to_list(self) -> list:
        return self.view(np.ndarray).tolist()

    def unique(self) -> np.ndarray:
        return unique(self.view(np.ndarray))

    def dropna(self) -> Column:
        a = self.view(np.ndarray)
        return a[~_na_mask(a)].view(Column)

    def nunique(self) -> int:
        """Distinct values, missing ones not counted (``Series.nunique``)."""
        return len(unique(self.dropna().view(np.ndarray)))

    def isna(self) -> np.ndarray:
        return _na_mask(self.view(np.ndarray)).view(Column)

    def notna(self) -> np.ndarray:
        return (~_na_mask(self.view(np.ndarray))).view(Column)

    def fillna(self, value) -> Column:
        """Missing entries replaced by ``value`` (a scalar or an equal-length array); a float
        column filled with a non-number becomes an object column, as in pandas."""
        a = self.view(np.ndarray)
        na = _na_mask(a)
        if not na.any():
            return a.copy().view(Column)
        other = np.asarray(value)
        if other.ndim:
            pick = other[na]
            if a.dtype.kind in "fc" and pick.dtype.kind in "biuf":
                out = a.copy()
                out[na] = pick
                return out.view(Column)
            vals = a.tolist()
            for i, v in zip(np.flatnonzero(na).tolist(), pick.tolist()):
                vals[i] = v
            return _column(vals)
        if a.dtype.kind in "fc" and isinstance(value, (int, float, np.integer, np.floating)) \
                and not isinstance(value, bool):
            out = a.copy()
            out[na] = value
            return out.view(Column)
        vals = a.tolist()
        return _column([value if m else v for v, m in zip(vals, na.tolist())])

    def where(self, cond, other) -> Column:
        """``Series.where``: keep where ``cond`` holds, else ``other``."""
        cond = np.asarray(cond, dtype=bool)
        a = self.view(np.ndarray)
        if cond.all():
            return a.copy().view(Column)
        vals = a.tolist()
        oth = np.asarray(other)
        fill = [oth[i] if oth.ndim else other for i in range(len(vals))]
        return _column([v if c else f for v, c, f in zip(vals, cond, fill)])

    def map(self, mapping) -> Column:
        f = mapping.get if isinstance(mapping, Mapping) else mapping
        return _column([f(v) for v in self.view(np.ndarray).tolist()])

    def equals(self, other) -> bool:
        a, b = self.view(np.ndarray), np.asarray(other)
        if a.shape != b.shape:
            return False
        na, nb = _na_mask(a), _na_mask(b)
        return bool((na == nb).all() and all(x == y for x, y, m in
                                             zip(a.tolist(), b.tolist(), na) if not m))

    @property
    def iat(self):
        return _Indexer(lambda i: self.view(np.ndarray)[i])

    @property
    def iloc(self):
        return _Indexer(lambda i: self.view(np.ndarray)[i] if np.ndim(i) == 0 and
                        not isinstance(i, slice) else self.view(np.ndarray)[i].view(Column))


_BOOL = (bool, np.bool_)
_INT = (int, np.integer)
_FLOAT = (float, np.floating)


def _column(values) -> Column:
    """A column from a list (or array) of values, typed as pandas would type it: numbers (with
    ``None`` / NaN for missing) as float64, all-int or all-bool lists as int64 / bool, anything
    else (strings, ``None`` alone, arrays) as objects."""
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype != object:
        return values.view(Column)
    vals = values if isinstance(values, list) else list(values)
    types = set(map(type, vals))
    none = type(None) in types
    types.discard(type(None))
    if types and all(issubclass(t, _FLOAT) for t in types):  # floats (NaN) and None
        return np.array(vals, dtype=np.float64).view(Column)
    if types and all(issubclass(t, _INT) and not issubclass(t, _BOOL) for t in types):
        return np.array(vals, dtype=np.float64 if none else np.int64).view(Column)
    if types and all(issubclass(t, (_INT, _FLOAT)) and not issubclass(t, _BOOL)
                     for t in types):
        return np.array(vals, dtype=np.float64).view(Column)
    if types and not none and all(issubclass(t, _BOOL) for t in types):
        return np.array(vals, dtype=bool).view(Column)
    return _object_array(vals).view(Column)


def _as_column(value, n: int) -> Column:
    if isinstance(value, np.ndarray):
        a = value.reshape(-1) if value.ndim != 1 and value.size == n else value
        if a.ndim == 0:
            return _column([a.item()] * n)
        if len(a) != n:
            raise ValueError(f"column of length {len(a)} for a table of {n} rows")
        return a.view(Column) if a.dtype != object else _object_array(list(a)).view(Column)
    if isinstance(value, (str, bytes)) or value is None or np.isscalar(value):
        return _column([value] * n)
    if hasattr(value, "to_numpy"):  # a pandas Series
        return _as_column(value.to_numpy(), n)
    vals = list(value)
    if len(vals) != n:
        raise ValueError(f"column of length {len(vals)} for a table of {n} rows")
    return _column(vals)


class Row(dict):
    """One row of a :class:`Table` (``Table.iloc[i]``): a dict, with ``to_dict``."""

    def to_dict(self) -> dict:
        return dict(self)


class Table:
    """Columns of equal length by name (module docstring)."""

    def __init__(self, columns: Mapping[str, Any] | None = None, *, length: int | None = None):
        self._cols: dict[str, Column] = {}
        self.attrs: dict[str, Any] = {}
        cols = dict(columns or {})
        n = length
        for v in cols.values():
            if not (isinstance(v, (str, bytes)) or v is None or np.isscalar(v)):
                n = len(v) if n is None else n
                break
        self._n = int(n or 0)
        for k, v in cols.items():
            self._cols[str(k)] = _as_column(v, self._n)

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]],
                     columns: Sequence[str] | None = None) -> Table:
        """As ``pandas.DataFrame(records)``: columns in order of first appearance (or
        ``columns``), a value a record lacks is missing."""
        recs = list(records)
        names: dict[str, None] = dict.fromkeys(columns) if columns is not None else {}
        if columns is None:
            for r in recs:
                names.update(dict.fromkeys(r))
        return cls({k: _column([r.get(k) for r in recs]) for k in names}, length=len(recs))

    @classmethod
    def of(cls, frame) -> Table:
        """A table of a ``pandas.DataFrame`` (or another table: a copy)."""
        if isinstance(frame, Table):
            return frame.copy()
        return cls({c: frame[c].to_numpy() for c in frame.columns}, length=len(frame))

    @classmethod
    def concat(cls, tables: Sequence[Table]) -> Table:
        """As ``pandas.concat(tables, ignore_index=True)``: the union of the columns in order of
        first appearance, missing where a table lacks one."""
        tables = [t for t in tables]
        names: dict[str, None] = {}
        for t in tables:
            names.update(dict.fromkeys(t.columns))
        n = sum(len(t) for t in tables)
        out = {}
        for c in names:
            parts = [t._cols[c] if c in t._cols else None for t in tables]
            arrays = [p.view(np.ndarray) for p in parts if p is not None]
            if all(p is not None for p in parts) and len({a.dtype.kind for a in arrays}) == 1:
                out[c] = np.concatenate(arrays) if arrays else np.zeros(0)
            elif all(a.dtype.kind in "biuf" for a in arrays) and \
                    not any(a.dtype.kind == "b" for a in arrays):
                out[c] = np.concatenate([p.view(np.ndarray).astype(np.float64) if p is not None
                                         else np.full(len(t), np.nan)
                                         for p, t in zip(parts, tables)]) if tables \
                    else np.zeros(0)
            else:
                vals: list = []
                for p, t in zip(parts, tables):
                    vals.extend(p.view(np.ndarray).tolist() if p is not None
                                else [None] * len(t))
                out[c] = _column(vals)
        return cls(out, length=n)

    def to_pandas(self):
        import pandas as pd

        df = pd.DataFrame({c: (list(v) if v.dtype == object else v.view(np.ndarray))
                           for c, v in self._cols.items()}, index=range(self._n))
        df.attrs = dict(self.attrs)
        return df

    # -- shape ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    @property
    def columns(self) -> list[str]:
        return list(self._cols)

    @property
    def index(self) -> np.ndarray:
        return np.arange(self._n)

    def __contains__(self, name: object) -> bool:
        return name in self._cols

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._cols))

    def __repr__(self) -> str:
        return f"Table({self._n} rows: {', '.join(self._cols)})"

    # -- columns -------------------------------------------------------------------------------
    def __getitem__(self, key):
        if isinstance(key, str):
            try:
                return self._cols[key]
            except KeyError:
                raise KeyError(key) from None
        if isinstance(key, (list, tuple)):
            missing = [k for k in key if k not in self._cols]
            if missing:
                raise KeyError(missing)
            t = Table({k: self._cols[k] for k in key}, length=self._n)
            return t
        raise TypeError(f"a table is indexed by column names, not {type(key).__name__} "
                        f"(rows: .iloc)")

    def __setitem__(self, name: str, value) -> None:
        self._cols[str(name)] = _as_column(value, self._n)

    def get(self, name: str, default=None):
        return self._cols.get(name, default)

    def assign(self, **columns) -> Table:
        out = self.copy()
        for k, v in columns.items():
            out[k] = v
        return out

    def drop(self, columns: Iterable[str]) -> Table:
        cols = [columns] if isinstance(columns, str) else list(columns)
        missing = [c for c in cols if c not in self._cols]
        if missing:
            raise KeyError(missing)
        return Table({k: v for k, v in self._cols.items() if k not in cols}, length=self._n)

    def rename(self, columns: Mapping[str, str]) -> Table:
        return Table({columns.get(k, k): v for k, v in self._cols.items()}, length=self._n)

    def copy(self) -> Table:
        t = Table({k: v.copy() for k, v in self._cols.items()}, length=self._n)
        t.attrs = dict(self.attrs)
        return t

    def reset_index(self, drop: bool = True) -> Table:
        if not drop:
            raise ValueError("a table has no index to keep (reset_index(drop=True))")
        return self.copy()

    # -- rows ----------------------------------------------------------------------------------
    def _take(self, key):
        if isinstance(key, (int, np.integer)):
            i = int(key)
            if not -self._n <= i < self._n:
                raise IndexError(f"row {i} of a table of {self._n}")
            return Row({k: v.view(np.ndarray)[i] for k, v in self._cols.items()})
        if isinstance(key, slice):
            idx = np.arange(self._n)[key]
        else:
            idx = np.asarray(key)
            if idx.dtype == bool:
                idx = np.flatnonzero(idx)
            idx = idx.astype(np.int64, copy=False)
        return Table({k: v.view(np.ndarray)[idx] for k, v in self._cols.items()},
                     length=len(idx))

    @property
    def iloc(self):
        return _Indexer(self._take)

    def iterrows(self) -> Iterator[tuple[int, Row]]:
        for i in range(self._n):
            yield i, self._take(i)

    def itertuples(self, index: bool = True, name=None) -> Iterator[tuple]:
        if name is not None:
            raise ValueError("itertuples(name=None) only")
        cols = [v.view(np.ndarray).tolist() for v in self._cols.values()]
        for i in range(self._n):
            row = tuple(c[i] for c in cols)
            yield ((i, *row) if index else row)

    def to_dict(self, orient: str = "records") -> list[dict]:
        if orient != "records":
            raise ValueError("to_dict('records') only")
        cols = {k: v.view(np.ndarray).tolist() for k, v in self._cols.items()}
        return [{k: c[i] for k, c in cols.items()} for i in range(self._n)]

    def to_numpy(self, dtype=None) -> np.ndarray:
        if not self._cols:
            return np.zeros((self._n, 0), dtype=dtype or np.float64)
        return np.column_stack([np.asarray(v.view(np.ndarray), dtype=dtype)
                                for v in self._cols.values()])


__all__ = ["Column", "Row", "Table", "isna", "missing", "notna", "unique"]
