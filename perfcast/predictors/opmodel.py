"""Operator model of one machine: a graph node's forward and backward time from its shapes.

Trained on operator benchmarks of the machine (:mod:`perfcast.profiler.opbench`, e.g.
``datasets/cpu/ops-t1.csv``): per op group (:data:`perfcast.ops.OP_GROUPS` — dense
convolution, depthwise / grouped convolution, GEMM, attention, normalisation, softmax, reduction,
pooling, copy, element-wise) an XGBoost regressor of ``log(time / work)`` where ``work`` is the
node's roofline time on the machine's measured peaks (``FLOPs / GFLOP/s + bytes / GB/s``): the
model learns an *efficiency* from the node's dimensions, so beyond the measured shapes the time
keeps growing with the work instead of going flat.

:func:`node_frame` turns ``(op, input shapes, output shapes, attrs, flops)`` tuples into the
feature frame; :class:`OpModel` fits and predicts ``fwd_ms`` / ``bwd_ms``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.features.table import Table, missing, unique
from perfcast.ops import OP_GROUPS as GROUPS

#: Numeric features of a node, in order.
FEATURES = ("log_flops", "log_bytes_in", "log_bytes_out", "log_work_ms", "x0", "x1", "x2", "x3",
            "x_rank", "w0", "w1", "w2", "groups", "stride", "kernel", "op_code", "n_inputs",
            "log_M", "log_N", "log_K")
OPS = sorted(GROUPS)


def _prod(s) -> float:
    return float(math.prod(int(d) for d in s)) if s else 1.0


def node_features(op: str, ins: list, outs: list, attrs: dict[str, Any], flops: float,
                  gflops: float, gbs: float) -> list[float]:
    """One row of :data:`FEATURES` (``gflops`` / ``gbs``: the machine's peaks)."""
    x = list(ins[0]) if ins else []
    w = list(ins[1]) if len(ins) > 1 else []
    b_in = 4.0 * sum(_prod(s) for s in ins)
    b_out = 4.0 * sum(_prod(s) for s in outs)
    work = float(flops) / (gflops * 1e9) * 1e3 + (b_in + b_out) / (gbs * 1e9) * 1e3
    xs = ([1.0] * (4 - len(x)) + [float(d) for d in x[-4:]]) if len(x) <= 4 else \
        [_prod(x[:-3])] + [float(d) for d in x[-3:]]
    ws = ([float(d) for d in w[:3]] + [1.0] * 3)[:3]
    k = attrs.get("kernel") or [1]
    s = attrs.get("stride") or [1]
    M = N = K = 1.0
    if op == "linear" and x and w:
        K, N = float(x[-1]), float(w[0])
        M = _prod(x) / max(K, 1.0)
    elif op in ("matmul", "bmm", "sdpa") and len(x) >= 2 and len(w) >= 2:
        M, K = float(x[-2]), float(x[-1])
        N = float(w[-1]) if op != "sdpa" else float(w[-2])
    elif op.startswith("conv") and len(x) == 4 and len(w) == 4 and outs:
        o = outs[0]
        M = float(o[0]) * float(o[2]) * float(o[3]) if len(o) == 4 else 1.0
        N, K = float(w[0]), float(w[1]) * float(w[2]) * float(w[3])
    return [math.log1p(float(flops)), math.log1p(b_in), math.log1p(b_out), math.log(work + 1e-9),
            *[math.log1p(v) for v in xs], float(len(x)), *[math.log1p(v) for v in ws],
            math.log1p(float(attrs.get("groups") or 1)), float(s[0] if isinstance(s, list) else s),
            float(k[0] if isinstance(k, list) else k), float(OPS.index(op) if op in OPS else -1),
            float(len(ins)), math.log1p(M), math.log1p(N), math.log1p(K)]


def node_frame(nodes, gflops: float, gbs: float) -> Table:
    """Feature table of ``nodes`` (``(op, ins, outs, attrs, flops, …)`` tuples) with ``op``,
    ``group`` (``None``: no operator model — views, data-dependent ops) and ``work_ms`` (a
    light :class:`~perfcast.features.table.Table`: no pandas to answer)."""
    rows, ops = [], []
    for n in nodes:
        op, ins, outs, attrs, flops = n[:5]
        rows.append(node_features(op, ins, outs, attrs, flops, gflops, gbs))
        ops.append(op)
    X = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))
    df = Table({f: X[:, j] for j, f in enumerate(FEATURES)}, length=len(rows))
    df["op"] = ops
    df["group"] = [GROUPS.get(o) for o in ops]
    df["work_ms"] = np.exp(df["log_work_ms"].to_numpy(float))
    return df


def frame_from_bench(bench, gflops: float, gbs: float):
    """:func:`node_frame` of an operator-benchmark CSV (``op, in_shapes, out_shapes, attrs,
    flops, fwd_ms, bwd_ms``) as a ``pandas.DataFrame`` (what :meth:`OpModel.fit` reads)."""
    import pandas as pd

    nodes = [(r.op, json.loads(r.in_shapes), json.loads(r.out_shapes), json.loads(r.attrs),
              float(r.flops)) for r in bench.itertuples()]
    out = node_frame(nodes, gflops, gbs).to_pandas()
    out["fwd_ms"] = bench["fwd_ms"].to_numpy(float)
    out["bwd_ms"] = pd.to_numeric(bench.get("bwd_ms"), errors="coerce").to_numpy(float) \
        if "bwd_ms" in bench else np.nan
    return out


class OpModel:
    """Per op group: XGBoost of ``log(ms / work_ms)`` forward and backward (see the module
    docstring). ``boosters_[(group, "fwd"|"bwd")]``."""

    def __init__(self, rounds: int = 200, depth: int = 5) -> None:
        self.rounds, self.depth = rounds, depth

    def fit(self, frame) -> OpModel:
        import xgboost as xgb

        self.boosters_: dict[tuple[str, str], Any] = {}
        self.counts_: dict[str, int] = {}
        for (g, part) in frame.groupby("group"):
            for target in ("fwd", "bwd"):
                y = part[f"{target}_ms"].to_numpy(float)
                ok = np.isfinite(y) & (y > 0)
                if ok.sum() < 5:
                    continue
                X = part.loc[ok, list(FEATURES)].to_numpy(float)
                r = np.log(y[ok] / part.loc[ok, "work_ms"].to_numpy(float))
                self.boosters_[(g, target)] = xgb.train(
                    {"max_depth": self.depth, "eta": 0.05, "subsample": 0.8, "nthread": 2,
                     "seed": 0, "min_child_weight": 2}, xgb.DMatrix(X, label=r), self.rounds)
            self.counts_[str(g)] = len(part)
        if not self.boosters_:
            raise PerfcastError("operator model: no op group with ≥ 5 measured nodes")
        return self

    def predict(self, frame) -> tuple[np.ndarray, np.ndarray]:
        """``(fwd_ms, bwd_ms)`` per row of a :func:`node_frame` table (or frame); NaN for
        groups without a model."""
        fwd, bwd = np.full(len(frame), np.nan), np.full(len(frame), np.nan)
        groups = frame["group"].to_numpy()
        work = frame["work_ms"].to_numpy(float)
        for g in unique(groups[~missing(groups)]):
            idx = np.flatnonzero(groups == g)
            X = frame.iloc[idx][list(FEATURES)].to_numpy(float)
            for target, out in (("fwd", fwd), ("bwd", bwd)):
                b = self.boosters_.get((g, target))
                if b is not None:  # an xgboost.Booster or a numpy TreeEnsemble
                    out[idx] = work[idx] * np.exp(b.inplace_predict(X))
        return fwd, bwd

    # -- state (raw boosters as bytes, inside the predictor that owns the model) ----------------
    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        tensors = {f"op.{g}.{t}": np.frombuffer(bytes(b.save_raw("ubj")), dtype=np.uint8).copy()
                   for (g, t), b in self.boosters_.items()}
        return tensors, {"rounds": self.rounds, "depth": self.depth, "counts": self.counts_,
                         "features": list(FEATURES), "ops": OPS}

    @classmethod
    def from_state(cls, tensors: dict[str, Any], state: dict[str, Any]) -> OpModel:
        from perfcast.trees import load_booster

        if list(state.get("features", [])) != list(FEATURES) or list(state.get("ops", [])) != OPS:
            raise PerfcastError("operator model saved with other features; retrain it")
        m = cls(state["rounds"], state["depth"])
        m.counts_ = dict(state.get("counts", {}))
        m.boosters_ = {}
        for key, raw in tensors.items():
            if key.startswith("op."):
                _, g, t = key.split(".")
                raw = raw.numpy() if hasattr(raw, "numpy") else raw
                m.boosters_[(g, t)] = load_booster(np.asarray(raw, dtype=np.uint8))
        return m


__all__ = ["FEATURES", "OpModel", "frame_from_bench", "node_features", "node_frame"]
