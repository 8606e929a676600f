"""A record's kernels as one table (:func:`kernel_frame`, from its kernel plan) and the dispatch
queue that composes their GPU times into the record's time (:func:`queue_time`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfcast.features.kernels import Kernel, kernel_row
from perfcast.features.records import FeatureSet
from perfcast.features.table import Table


def kernel_frame(fs: FeatureSet) -> tuple[Table, list[int]]:
    """Every kernel of every record (``record`` column, in launch order within a record; the
    record's ``device_key``, ``precision`` and ``tf32``) as one
    :class:`~perfcast.features.table.Table` — records without a plan are skipped (their index
    is returned). Records of one plan, mode, precision, optimizer and device are lowered
    together (:meth:`~perfcast.features.kernels.KernelPlan.kernel_table`)."""
    missing, groups = [], {}
    rows = fs.rows
    mode = rows["mode"].where(rows["mode"].notna(), "infer").astype(str).to_numpy() \
        if "mode" in rows else np.full(len(fs), "infer")
    opts = rows["optimizer"].to_numpy() if "optimizer" in rows else np.full(len(fs), None)
    tf32 = rows["tf32"].where(rows["tf32"].notna(), "default").astype(str).to_numpy() \
        if "tf32" in rows else np.full(len(fs), "default")
    for i in range(len(fs)):
        plan_i = fs.graph_index[i] if fs.plans else None
        if plan_i is None or fs.plans[plan_i] is None:
            missing.append(i)
            continue
        opt = opts[i] if isinstance(opts[i], str) else None
        key = (plan_i, mode[i] or "infer", str(rows["precision"].iat[i]), opt,
               str(rows["device"].iat[i]), tf32[i])
        groups.setdefault(key, []).append(i)
    frames = []
    for (plan_i, md, prec, opt, dev, t32), idx in groups.items():
        batches = [int(rows["batch_size"].iat[i]) for i in idx]
        t = fs.plans[plan_i].kernel_table(batches, mode=md, precision=prec, optimizer=opt)
        t["record"] = np.asarray(idx)[t["item"].to_numpy()]
        t["device_key"], t["precision"], t["tf32"] = dev, prec, t32
        frames.append(t.drop(columns=["batch", "item"]))
    if not frames:
        return Table(), missing
    return Table.concat(frames), missing


def _group_codes(t, cols: list[str]) -> np.ndarray:
    """The group number of each row of ``t`` by the values of ``cols``, groups numbered in
    order of first appearance, a missing value (NaN / ``None``) equal to another — what
    ``DataFrame.groupby(cols, dropna=False, sort=False).ngroup()`` gives."""
    from perfcast.features.table import missing

    n = len(t)
    parts = []
    for c in cols:
        v = t[c].to_numpy()
        na = missing(v)
        vals = v.tolist()
        if na.any():
            vals = [None if m else x for x, m in zip(vals, na.tolist())]
        parts.append(vals)
    seen: dict[tuple, int] = {}
    codes = np.empty(n, dtype=np.int64)
    for i, key in enumerate(zip(*parts) if parts else [()] * n):
        codes[i] = seen.setdefault(key, len(seen))
    return codes


def _kernel_row(k: Kernel, record: int, device: str, precision: str,
                tf32: str = "default") -> dict[str, Any]:
    return {"record": record, "device_key": device, "precision": precision, "tf32": tf32,
            **kernel_row(k)}


def queue_time(pos: np.ndarray, suffix: np.ndarray, starts: np.ndarray, h: np.ndarray,
               s: np.ndarray) -> np.ndarray:
    """``T = max_j (j·h + s·S_j)`` per record — eager PyTorch: the host dispatches kernel ``j``
    at ``j·h`` (``h`` per kernel and mode, fitted), the GPU runs the kernels in order as soon as
    each is dispatched; a launch-bound model is ``n·h``, a GPU-bound one ``s·Σ t``, and
    everything between is the queue. ``pos`` the kernel's index within its record,
    ``suffix`` ``S_j`` (GPU ms from kernel ``j`` to the record's end), ``starts`` the first row
    of each record (rows grouped by record), ``h`` / ``s`` per record."""
    rec = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(pos))))
    val = pos * h[rec] + s[rec] * suffix
    return np.maximum.reduceat(val, starts) if len(val) else np.zeros(0)


def _scale_for(pos, suffix, starts, h, y) -> np.ndarray:
    """The ``s`` with ``T(s) = y`` per record (the queue is increasing and piecewise linear in
    ``s``): ``min_j (y − j·h) / S_j``; a record slower than its dispatch alone allows a tiny
    ``s`` (the GPU time hides in the dispatch)."""
    rec = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(pos))))
    with np.errstate(divide="ignore", invalid="ignore"):
        cand = np.where(suffix > 0, (y[rec] - pos * h[rec]) / suffix, np.inf)
    s = np.minimum.reduceat(cand, starts)
    return np.clip(s, 1e-3, 1e3)
