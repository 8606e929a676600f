"""The light table of the prediction path (:mod:`perfcast.features.table`) means what pandas
means — the same answers from a ``pandas.DataFrame`` (training) and a table (answering) — and
the group arithmetic that replaced pandas' group-by gives its numbers bit for bit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcast.features.table import Table, unique

RECORDS = [
    {"op": "linear", "B": 1, "M": 8, "kernel_class": "gemm", "dtype_bytes": 2, "x": 1.5},
    {"op": "stream", "kernel_class": "stream", "dtype_bytes": 2, "stream_bytes": 64.0, "x": None},
    {"op": "addu", "B": 3, "H": 16, "kernel_class": "elementwise", "dtype_bytes": 2, "x": 2.0,
     "flag": True},
    {"op": None, "B": 3, "kernel_class": "gemm", "dtype_bytes": 4, "x": float("nan")},
]


def _same(t: Table, df: pd.DataFrame) -> None:
    assert list(t.columns) == list(df.columns) and len(t) == len(df)
    for c in df.columns:
        a, b = t[c].to_numpy(), df[c].to_numpy()
        assert t[c].isna().tolist() == df[c].isna().tolist(), c
        ok = ~df[c].isna().to_numpy()
        assert a[ok].tolist() == b[ok].tolist(), c
        if df[c].dtype.kind in "biuf":
            assert a.dtype == b.dtype, (c, a.dtype, b.dtype)


def test_records_concat_and_columns_mean_what_pandas_means():
    t, df = Table.from_records(RECORDS), pd.DataFrame(RECORDS)
    _same(t, df)
    _same(Table.concat([t, t.iloc[[0, 2]]]), pd.concat([df, df.iloc[[0, 2]]], ignore_index=True))
    _same(Table.concat([t[["op", "B"]], t[["B", "x"]]]),
          pd.concat([df[["op", "B"]], df[["B", "x"]]], ignore_index=True))
    assert t["x"].fillna(0.0).tolist() == df["x"].fillna(0.0).tolist()
    assert t["op"].fillna("none").tolist() == df["op"].fillna("none").tolist()
    assert t["op"].where(t["op"].notna(), "infer").astype(str).tolist() == \
        df["op"].where(df["op"].notna(), "infer").astype(str).tolist()
    assert t["kernel_class"].unique().tolist() == list(pd.unique(df["kernel_class"]))
    assert unique(np.array([2.0, np.nan, 1.0, 2.0, np.nan])).tolist()[::2] == [2.0, 1.0]
    assert t["B"].nunique() == df["B"].nunique()
    assert t.iloc[1].get("op") == df.iloc[1].get("op") and np.isnan(t.iloc[1]["x"])
    assert t.to_dict("records")[0]["M"] == 8 and t.rename(columns={"op": "o"}).columns[0] == "o"
    assert np.array_equal(t[["B", "dtype_bytes"]].to_numpy(float),
                          df[["B", "dtype_bytes"]].to_numpy(float), equal_nan=True)
    _same(Table.of(df), df)
    _same(Table.of(df).to_pandas(), df)


def test_group_codes_and_sums_are_pandas_bit_for_bit():
    from perfcast.predictors.crossdevice.composition import _group_codes
    from perfcast.predictors.kernelsum import group_sums

    rng = np.random.default_rng(0)
    n = 3000
    df = pd.DataFrame({"a": rng.integers(0, 5, n).astype(float), "b": rng.choice(["x", "y"], n),
                       "c": rng.integers(0, 3, n)})
    df.loc[rng.random(n) < 0.1, "a"] = np.nan
    want = df.groupby(["a", "b", "c"], dropna=False, sort=False).ngroup().to_numpy()
    assert np.array_equal(_group_codes(Table.of(df), ["a", "b", "c"]), want)
    labels = rng.integers(0, 40, n)
    values = rng.lognormal(0, 5, n) * rng.choice([1.0, 1e9, 1e-3], n)
    theirs = pd.DataFrame({"l": labels, "v": values}).groupby("l")["v"].sum()
    assert np.array_equal(group_sums(labels, values, 40)[theirs.index.to_numpy()],
                          theirs.to_numpy())
