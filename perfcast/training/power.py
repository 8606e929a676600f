"""The shipped power model (:mod:`perfcast.energy`), trained on the Zeus traces.

    perfcast train --recipe power --out perfcast/shipped     # rebuild the shipped file

(without ``--out`` into ``<data home>/models/power``; use it through ``PERFCAST_SHIPPED_DIR``).
Fixed and deterministic: the same traces give the same file, byte for byte.

Each trace row is one (GPU, workload, batch, optimizer, power limit). Its *configuration* is the
row without the limit; the row at the configuration's highest limit (the GPU's maximum = its
TDP) gives the unconstrained power ``P₀`` and time ``T₀``. The three parts of
:class:`~perfcast.energy.PowerModel` are fitted in turn, each by least squares:

1. **activity** — on the highest-limit rows: ``(P₀ − idle) / (TDP − idle)`` from the step's
   :func:`~perfcast.energy.step_features` at the measured ``T₀`` (a logistic model, L2
   penalty :data:`RIDGE`; the step's FLOPs and bytes from the workload's perfcast graph);
2. **limit response** ``k``, ``c`` — on every row: ``P(L) / P₀`` from ``L / P₀`` (measured
   ``P₀``);
3. **slowdown** ``γ``, ``β`` — on every row: ``log T(L)/T₀ = γ·(ln(P₀ / P(L)))^β`` from the
   modelled ``P(L)`` and the measured ``P₀``.

:func:`zeus_frame` is the table all of this reads (also what ``benchmarks/energy_report.py``
evaluates leave-one-GPU-out and leave-one-workload-out).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: L2 penalty on the standardised activity coefficients.
RIDGE = 1e-3
COMMAND = "perfcast train --recipe power --out perfcast/shipped"
#: Precision the Zeus workloads trained at (their code: fp32 PyTorch, no autocast).
ZEUS_PRECISION = "fp32"


def _costs(frame: pd.DataFrame, use_cache: bool = True) -> dict[str, Any]:
    """Roofline cost (:class:`~perfcast.predictors.roofline.GraphCost`) of each workload."""
    from perfcast.cache import get_graph
    from perfcast.features.records import GraphSummary, graph_data, learning_workload
    from perfcast.predictors.roofline import GraphCost
    from perfcast.workload import Workload

    out = {}
    for spec, inp in frame[["model", "input_size"]].drop_duplicates().itertuples(index=False):
        w = Workload.of(spec, batch_size=8, mode="train",
                        input_size=tuple(int(x) for x in inp.split(",")))
        g = get_graph(learning_workload(w), use_cache=use_cache)
        out[spec] = GraphCost.of(graph_data(g), GraphSummary.of(g))
    return out


def zeus_frame(data_dir=None, use_cache: bool = True) -> pd.DataFrame:
    """:func:`~perfcast.datasets.zeus.load_zeus` + per row: ``config`` (the row without its
    limit), ``p0_w`` / ``t0_ms`` (power and step time at the configuration's highest limit),
    ``tdp_w``, ``idle_w``, the step's ``flops`` / ``bytes`` / ``kernels`` and the
    :data:`~perfcast.energy.FEATURES` at ``t0_ms``."""
    from perfcast.datasets.zeus import load_zeus
    from perfcast.devices import get_device
    from perfcast.energy import FEATURES, power_bounds, step_features, step_work

    df = load_zeus(data_dir)
    costs = _costs(df, use_cache)
    df["config"] = (df["gpu"] + "|" + df["workload"] + "|" + df["batch_size"].astype(str) + "|"
                    + df["optimizer"])
    top = df.loc[df.groupby("config")["power_limit_w"].idxmax(), ["config", "power_w", "time_ms"]]
    df = df.merge(top.rename(columns={"power_w": "p0_w", "time_ms": "t0_ms"}), on="config")
    rows = []
    for r in df.itertuples(index=False):
        dev = get_device(r.device)
        idle, tdp, _ = power_bounds(dev)
        fl, by, kn = step_work(costs[r.model], int(r.batch_size), "train", ZEUS_PRECISION,
                               _optimizer(r.optimizer))
        feats = step_features(fl, by, kn, r.t0_ms / 1e3, dev, ZEUS_PRECISION, int(r.batch_size))
        rows.append([tdp, idle, fl, by, kn, *feats])
    extra = pd.DataFrame(rows, columns=["tdp_w", "idle_w", "flops", "bytes", "kernels",
                                        *FEATURES], index=df.index)
    return pd.concat([df, extra], axis=1)


def _optimizer(name: str) -> str:
    """The traces' optimizer as the roofline counts its states (adadelta keeps two, as Adam)."""
    return {"adadelta": "adam"}.get(name, name)


# --------------------------------------------------------------------------- fitting
def fit_power_model(frame: pd.DataFrame):
    """A :class:`~perfcast.energy.PowerModel` fitted on ``frame`` (rows of :func:`zeus_frame`)."""
    from scipy.optimize import least_squares

    from perfcast.energy import FEATURES, PowerModel

    top = frame[frame["power_limit_w"] == frame.groupby("config")["power_limit_w"]
                .transform("max")]
    X = top[list(FEATURES)].to_numpy(np.float64)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale == 0] = 1.0
    Z = (X - mean) / scale
    y = ((top["p0_w"] - top["idle_w"]) / (top["tdp_w"] - top["idle_w"])).to_numpy()
    span = (top["tdp_w"] - top["idle_w"]).to_numpy()
    p0 = top["p0_w"].to_numpy()

    def res_a(theta):
        z = theta[0] + Z @ theta[1:]
        a = 1.0 / (1.0 + np.exp(-z))
        # relative error of the power itself
        return np.concatenate([(top["idle_w"].to_numpy() + a * span - p0) / p0,
                               math.sqrt(RIDGE) * theta[1:]])

    theta = least_squares(res_a, np.zeros(Z.shape[1] + 1), method="lm").x
    # limit response on every row, from the measured P0
    P0, L, P = (frame[c].to_numpy(np.float64) for c in ("p0_w", "power_limit_w", "power_w"))
    idle, tdp = frame["idle_w"].to_numpy(), frame["tdp_w"].to_numpy()

    Ld = frame.groupby("config")["power_limit_w"].transform("max").to_numpy(np.float64)

    def soft(x, k):
        return (1.0 + np.maximum(x, 1e-9) ** -k) ** (-1.0 / k)

    def p_at(k, c):  # as PowerModel.at_limit, the default limit = the config's highest
        p = P0 * soft(c * L / P0, k) / soft(c * Ld / P0, k)
        return np.minimum(P0, np.clip(p, idle, np.minimum(L, tdp)))

    def res_l(v):
        return (p_at(v[0], v[1]) - P) / P

    k, c = least_squares(res_l, [6.0, 1.0], bounds=([1.0, 0.7], [50.0, 1.2])).x
    # slowdown on every row, from the modelled P(L)
    pl = p_at(k, c)
    tr = (frame["time_ms"] / frame["t0_ms"]).to_numpy()

    def res_t(v):
        g, b = v
        pred = g * np.log(P0 / np.minimum(pl, P0)) ** b
        return pred - np.log(tr)

    g, b = least_squares(res_t, [1.0, 2.0], bounds=([0.0, 1.0], [10.0, 4.0])).x
    return PowerModel(coef=[float(x) for x in theta], mean=[float(x) for x in mean],
                      scale=[float(x) for x in scale], k=float(k), c=float(c), gamma=float(g),
                      beta=float(b), trained_on={})


def predict_frame(model, frame: pd.DataFrame, t0_ms=None) -> pd.DataFrame:
    """Per row of ``frame``: ``pred_p0_w`` (unconstrained), ``pred_power_w`` at the row's limit,
    ``pred_slowdown``, ``pred_time_ms`` (``t0_ms`` — measured unless given — × slowdown) and
    ``pred_energy_per_epoch_j`` (power × time per step × steps)."""
    from perfcast.devices import get_device
    from perfcast.energy import FEATURES

    out = frame.copy()
    t0 = frame["t0_ms"].to_numpy() if t0_ms is None else np.asarray(t0_ms, dtype=np.float64)
    a = model.activity(frame[list(FEATURES)].to_numpy(np.float64))
    p0 = frame["idle_w"].to_numpy() + a * (frame["tdp_w"] - frame["idle_w"]).to_numpy()
    p, sd = [], []
    top = frame.groupby("config")["power_limit_w"].transform("max")
    for dev_key, p0_i, lim, dflt in zip(frame["device"], p0, frame["power_limit_w"], top):
        dev = get_device(dev_key)
        pi = model.at_limit(float(p0_i), float(lim), dev, float(dflt))
        p.append(pi)
        sd.append(model.slowdown(float(p0_i), pi, dev))
    out["pred_p0_w"], out["pred_power_w"], out["pred_slowdown"] = p0, p, sd
    out["pred_time_ms"] = t0 * np.asarray(sd)
    out["pred_energy_per_epoch_j"] = (out["pred_power_w"] * out["pred_time_ms"] / 1e3
                                      * out["steps_per_epoch"])
    return out


def train_power(out_root: str | Path | None = None, data_dir=None) -> dict[str, Any]:
    """Fit on every trace row and save ``power_model.json`` under ``out_root`` (default
    ``<data home>/models/power``)."""
    import time

    from perfcast.datasets.zeus import FILES
    from perfcast.datasets._base import resolve_data_dir
    from perfcast.training.trainer import default_recipe_dir

    t = time.perf_counter()
    root = Path(out_root) if out_root else default_recipe_dir("power")
    frame = zeus_frame(data_dir)
    m = fit_power_model(frame)
    base = resolve_data_dir(data_dir)
    m.trained_on = {"source": ["zeus-power (Zeus NSDI'23 traces, ml-energy/zeus)"],
                    "families": int(frame["workload"].nunique()),
                    "files": {Path(f).name: hashlib.sha256((base / f).read_bytes()).hexdigest()
                              for f in FILES.values()},
                    "records": int(len(frame)), "configurations": int(frame["config"].nunique()),
                    "devices": sorted(frame["device"].unique().tolist()),
                    "workloads": sorted(frame["workload"].unique().tolist()),
                    "evaluation": "reports/energy/README.md", "command": COMMAND}
    path = m.save(root)
    return {"path": str(path), "records": len(frame), "seconds": round(time.perf_counter() - t, 1)}


__all__ = ["COMMAND", "fit_power_model", "predict_frame", "train_power", "zeus_frame"]
