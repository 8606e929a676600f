"""The shipped power model (:mod:`perfcast.energy`), trained on every power measurement:
the Zeus training traces and ML.ENERGY v2's vLLM serving runs (per phase).

    perfcast train --recipe power --out perfcast/shipped     # rebuild the shipped file

(without ``--out`` into ``<data home>/models/power``; use it through ``PERFCAST_SHIPPED_DIR``).
Fixed and deterministic: the same data give the same file.

* **Zeus** (:func:`zeus_frame`): each row one (GPU, workload, batch, optimizer, power limit);
  its *configuration* is the row without the limit; the row at the configuration's highest
  limit (TDP) gives the unconstrained power ``P₀`` and step time ``T₀``, the step's FLOPs and
  bytes come from the workload's perfcast graph.
* **ML.ENERGY v2** (:func:`serving_frame`): each row a vLLM server at its max batch; its
  measured power per GPU is the time-weighted mix of the request's prefill and the decode
  steps (:func:`perfcast.training.phase_power.serving_phases`: the prefill model's time and
  work, the decode step's work at the running batch, the measured token time; the workloads'
  unpublished prompt lengths fitted on the token times).

Each kind of work (:data:`perfcast.energy.KINDS`) has its coefficients fitted on its own
measurements only, each by least squares (:func:`fit_power_model`):

1. **graph steps** on the Zeus rows at the default limit (:func:`fit_step`): the logistic
   activity ``(P₀ − idle) / (TDP − idle)`` over :data:`~perfcast.energy.FEATURES` at the
   measured ``T₀`` (relative error of the power, L2 penalty :data:`RIDGE`), then per
   architecture family a shift of the intercept shrunk towards 0 (penalty :data:`SHRINK`);
2. **serving phases** on the ML.ENERGY v2 rows (:func:`fit_coefficients`): ``u₀`` and the
   pooled ``static, c_tensor, c_memory`` on the log of every row's power, then per family the
   same, shrunk towards the pooled ones (:data:`SHRINK`); no serving row runs on CUDA cores,
   so ``c_compute`` is set to ``c_tensor``;
3. the **limit response** ``k``, ``c`` on every Zeus row: ``P(L) / P₀`` from ``L / P₀``
   (measured ``P₀``), and the **slowdown** ``γ``, ``β``: ``log T(L)/T₀ = γ·(ln(P₀ / P(L)))^β``.

Both kinds in one fit (the serving form on Zeus and ML.ENERGY together, as issue 42's first
model did) is still :func:`fit_coefficients` ``(zeus, serving)``; it is not shipped: held out,
it predicted a training GPU's power worse, and far worse with a predicted step time
(``benchmarks/power_model_kinds.py``, reports/energy/power_model_kinds.md).

``benchmarks/energy_report.py`` evaluates it leave-one-GPU-out, leave-one-workload-out and
leave-one-source-out.
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
    ``tdp_w``, ``idle_w``, the step's ``flops`` / ``bytes`` / ``kernels``, the
    :data:`~perfcast.energy.FEATURES` at ``t0_ms`` and the linear ``compute_util`` /
    ``memory_util`` at ``t0_ms`` (the serving form's, for :func:`fit_coefficients` on Zeus)."""
    from perfcast.datasets.zeus import load_zeus
    from perfcast.devices import get_device
    from perfcast.energy import (FEATURES, power_bounds, step_features, step_work,
                                 utilisations)

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
        cu, mu = utilisations(fl, by, r.t0_ms / 1e3, dev, ZEUS_PRECISION)
        rows.append([tdp, idle, fl, by, kn, *feats, cu, mu, 0.0])
    extra = pd.DataFrame(rows, columns=["tdp_w", "idle_w", "flops", "bytes", "kernels",
                                        *FEATURES, "compute_util", "memory_util",
                                        "tensor_precision"], index=df.index)
    return pd.concat([df, extra], axis=1)


def _optimizer(name: str) -> str:
    """The traces' optimizer as the roofline counts its states (adadelta keeps two, as Adam)."""
    return {"adadelta": "adam"}.get(name, name)


# --------------------------------------------------------------------------- fitting
#: Penalty pulling a family's coefficients towards the pooled ones (per coefficient, in units
#: of the mean squared log error of one source).
SHRINK = 0.05
#: Bounds of ``static, c_compute, c_memory`` (fractions of TDP).
COEF_BOUNDS = ([0.0, 0.0, 0.0, 0.0], [1.0, 1.5, 1.5, 1.5])


def serving_frame(mlenergy: pd.DataFrame | None = None, prefill_constants=None,
                  latency_model=None, prompts: dict[str, int] | None = None) -> pd.DataFrame:
    """ML.ENERGY v2 (:func:`perfcast.datasets.llm.load_mlenergy`) + per row its phases
    (:func:`perfcast.training.phase_power.serving_phases` at the measured token time, the
    workloads' prompt lengths fitted by :func:`~perfcast.training.phase_power.
    fit_prompt_lengths` unless given: ``prompt_len``) and ``family``."""
    from perfcast.datasets.llm import load_mlenergy
    from perfcast.devices import get_device
    from perfcast.energy import family_of
    from perfcast.shipped import load_shipped
    from perfcast.training.phase_power import fit_prompt_lengths, serving_phases

    me = load_mlenergy() if mlenergy is None else mlenergy
    consts = prefill_constants or load_shipped("llm-prefill")
    if prompts is None:
        prompts = fit_prompt_lengths(me, latency_model=latency_model, prefill_constants=consts)
    plen = me["subtask"].fillna("all").map(prompts).to_numpy()
    ph = serving_phases(me, prefill_constants=consts, prompt_len=plen)
    out = pd.concat([me, ph.drop(columns=["idle_w", "tdp_w"])], axis=1)
    out["idle_w"], out["tdp_w"] = ph["idle_w"].astype(float), ph["tdp_w"].astype(float)
    out["prompt_len"] = plen
    out["family"] = [family_of(get_device(d)) for d in me["device"]]
    out.attrs["prompts"] = dict(prompts)
    return out


def _zeus_top(zeus: pd.DataFrame) -> pd.DataFrame:
    """The Zeus configurations at their default (highest) limit, with ``cu`` / ``mu`` and
    ``family``."""
    from perfcast.devices import get_device
    from perfcast.energy import family_of

    top = zeus[zeus["power_limit_w"] == zeus.groupby("config")["power_limit_w"]
               .transform("max")].copy()
    top["cu"] = top["compute_util"].to_numpy(float)
    top["mu"] = top["memory_util"].to_numpy(float)
    top["tensor"] = top["tensor_precision"].to_numpy(float) > 0
    top["family"] = [family_of(get_device(d)) for d in top["device"]]
    return top


def _power(idle, tdp, theta, h, cu, mu, tensor):
    c = np.where(tensor, theta[2], theta[1])
    return np.clip(idle + tdp * (theta[0] + c * h(cu) + theta[3] * h(mu)), idle, tdp)


def _h(u0: float):
    return lambda u: np.log1p(np.clip(u, 0, 1) / u0) / math.log1p(1.0 / u0)


def serving_power(theta, u0: float, sv: pd.DataFrame) -> tuple[np.ndarray, np.ndarray,
                                                               np.ndarray]:
    """(mixed power, prefill power, decode power) per GPU (W) of rows of
    :func:`serving_frame` for one family's ``theta``."""
    h = _h(u0)
    idle, tdp = sv["idle_w"].to_numpy(float), sv["tdp_w"].to_numpy(float)
    p_pre = _power(idle, tdp, theta, h, sv["cu_pre"].to_numpy(float),
                   sv["mu_pre"].to_numpy(float), True)
    p_dec = _power(idle, tdp, theta, h, sv["cu_dec"].to_numpy(float),
                   sv["mu_dec"].to_numpy(float), True)
    t_pre, t_dec = sv["t_pre"].to_numpy(float), sv["t_dec"].to_numpy(float)
    return (p_pre * t_pre + p_dec * t_dec) / (t_pre + t_dec), p_pre, p_dec


def _residuals(theta, u0, top, sv):
    out = []
    if top is not None and len(top):
        p = _power(top["idle_w"].to_numpy(float), top["tdp_w"].to_numpy(float), theta, _h(u0),
                   top["cu"].to_numpy(float), top["mu"].to_numpy(float),
                   top["tensor"].to_numpy(bool))
        out.append(np.log(p / top["p0_w"].to_numpy(float)) / math.sqrt(len(top)))
    if sv is not None and len(sv):
        p = serving_power(theta, u0, sv)[0]
        out.append(np.log(p / sv["power_per_device_w"].to_numpy(float)) / math.sqrt(len(sv)))
    return np.concatenate(out)


def fit_coefficients(zeus: pd.DataFrame | None, serving: pd.DataFrame | None
                     ) -> tuple[float, list[float], dict[str, list[float]]]:
    """``(u₀, pooled, {family: coefficients})`` fitted on Zeus rows (:func:`zeus_frame`) and
    serving rows (:func:`serving_frame`), either may be ``None``."""
    from scipy.optimize import least_squares

    top = _zeus_top(zeus) if zeus is not None and len(zeus) else None
    sv = serving if serving is not None and len(serving) else None

    def res_pool(v):
        return _residuals(v[1:], math.exp(v[0]), top, sv)

    lo, hi = COEF_BOUNDS
    v = least_squares(res_pool, [math.log(0.1), 0.15, 0.5, 0.5, 0.3],
                      bounds=([math.log(1e-3), *lo], [math.log(1e3), *hi])).x
    u0, pooled = float(math.exp(v[0])), [float(x) for x in v[1:]]
    fams = sorted(set(top["family"] if top is not None else ())
                  | set(sv["family"] if sv is not None else ()))
    families = {}
    for f in fams:
        t_f = top[top["family"] == f] if top is not None else None
        s_f = sv[sv["family"] == f] if sv is not None else None

        def res_f(th, t_f=t_f, s_f=s_f):
            return np.concatenate([_residuals(th, u0, t_f, s_f),
                                   math.sqrt(SHRINK) * (np.asarray(th) - pooled)])

        th = least_squares(res_f, pooled, bounds=COEF_BOUNDS).x
        families[f] = [float(x) for x in th]
    if top is None:  # no CUDA-core row: c_compute is not measured, the tensor one answers
        pooled[1] = pooled[2]
        for th in families.values():
            th[1] = th[2]
    return u0, pooled, families


def fit_limit_response(frame: pd.DataFrame) -> tuple[float, float, float, float]:
    """``(k, c, γ, β)`` of the limit response and the slowdown on every Zeus row."""
    from scipy.optimize import least_squares

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
    pl = p_at(k, c)
    tr = (frame["time_ms"] / frame["t0_ms"]).to_numpy()

    def res_t(v):
        g, b = v
        return g * np.log(P0 / np.minimum(pl, P0)) ** b - np.log(tr)

    g, b = least_squares(res_t, [1.0, 2.0], bounds=([0.0, 1.0], [10.0, 4.0])).x
    return float(k), float(c), float(g), float(b)


def _top(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["power_limit_w"] == frame.groupby("config")["power_limit_w"]
                 .transform("max")]


def fit_step(frame: pd.DataFrame) -> tuple[list[float], list[float], list[float],
                                           dict[str, float]]:
    """``(coef, mean, scale, {family: intercept shift})`` of the graph steps' activity model
    on Zeus rows ``frame`` (:func:`zeus_frame`) at their default limit."""
    from scipy.optimize import least_squares

    from perfcast.devices import get_device
    from perfcast.energy import FEATURES, family_of

    top = _top(frame)
    X = top[list(FEATURES)].to_numpy(np.float64)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale == 0] = 1.0
    Z = (X - mean) / scale
    idle, p0 = top["idle_w"].to_numpy(float), top["p0_w"].to_numpy(float)
    span = top["tdp_w"].to_numpy(float) - idle

    def rel(z, idx):  # relative error of the power itself
        return (idle[idx] + span[idx] / (1.0 + np.exp(-z)) - p0[idx]) / p0[idx]

    every = np.arange(len(top))

    def res_a(theta):
        return np.concatenate([rel(theta[0] + Z @ theta[1:], every),
                               math.sqrt(RIDGE) * theta[1:]])

    theta = least_squares(res_a, np.zeros(Z.shape[1] + 1), method="lm").x
    z0 = theta[0] + Z @ theta[1:]
    fam = np.array([family_of(get_device(d)) for d in top["device"]])
    # a family's shift, in the pooled fit's units: mean squared relative error per row
    n = math.sqrt(len(top))
    shifts = {}
    for f in sorted(set(fam)):
        idx = np.where(fam == f)[0]

        def res_f(v, idx=idx):
            return np.concatenate([rel(z0[idx] + v[0], idx) / n,
                                   [math.sqrt(SHRINK) * v[0]]])

        shifts[str(f)] = float(least_squares(res_f, [0.0]).x[0])
    return ([float(x) for x in theta], [float(x) for x in mean], [float(x) for x in scale],
            shifts)


def fit_power_model(frame: pd.DataFrame | None, serving: pd.DataFrame | None = None,
                    limit_frame: pd.DataFrame | None = None, serving_with_zeus: bool = False):
    """A :class:`~perfcast.energy.PowerModel`: the graph steps' coefficients fitted on Zeus
    rows ``frame`` (:func:`zeus_frame`; ``None``: ``limit_frame``'s), the serving phases' on
    serving rows ``serving`` (:func:`serving_frame`) only — ``None``: the serving form fitted
    on ``frame``'s training steps instead (the leave-one-source-out of the reports) —, the
    limit response on ``limit_frame`` (default ``frame``: Zeus rows are the only ones under a
    power limit). ``serving_with_zeus``: the serving kind fitted on ``frame``'s Zeus steps
    and ``serving`` together (the first fit of issue 42, kept for the reports' comparison)."""
    from perfcast.energy import PowerModel

    lf = frame if limit_frame is None else limit_frame
    zf = frame if frame is not None else lf
    coef, mean, scale, shifts = fit_step(zf)
    if serving is not None and len(serving):
        u0, pooled, families = fit_coefficients(zf if serving_with_zeus else None, serving)
    else:
        u0, pooled, families = fit_coefficients(zf, None)
    k, c, g, b = fit_limit_response(lf)
    return PowerModel(families=families, pooled=pooled, u0=u0, step_coef=coef,
                      step_mean=mean, step_scale=scale, step_families=shifts, k=k, c=c,
                      gamma=g, beta=b, trained_on={})


def predict_frame(model, frame: pd.DataFrame, t0_ms=None) -> pd.DataFrame:
    """Per Zeus row of ``frame``: ``pred_p0_w`` (unconstrained, the graph-step fit at the
    row's :data:`~perfcast.energy.FEATURES` at ``t0_ms`` — measured unless given),
    ``pred_power_w`` at the row's limit, ``pred_slowdown``,
    ``pred_time_ms`` (``t0_ms`` × slowdown) and ``pred_energy_per_epoch_j`` (power × time per
    step × steps)."""
    from perfcast.devices import get_device
    from perfcast.energy import step_features

    out = frame.copy()
    t0 = frame["t0_ms"].to_numpy() if t0_ms is None else np.asarray(t0_ms, dtype=np.float64)
    top = frame.groupby("config")["power_limit_w"].transform("max")
    p0, p, sd = [], [], []
    for r, t_i, dflt in zip(frame.itertuples(index=False), t0, top):
        dev = get_device(r.device)
        feats = step_features(r.flops, r.bytes, r.kernels, t_i / 1e3, dev, ZEUS_PRECISION,
                              int(r.batch_size))
        p0_i = model.unconstrained_power(feats, dev)
        pi = model.at_limit(p0_i, float(r.power_limit_w), dev, float(dflt))
        p0.append(p0_i)
        p.append(pi)
        sd.append(model.slowdown(p0_i, pi, dev))
    out["pred_p0_w"], out["pred_power_w"], out["pred_slowdown"] = p0, p, sd
    out["pred_time_ms"] = t0 * np.asarray(sd)
    out["pred_energy_per_epoch_j"] = (out["pred_power_w"] * out["pred_time_ms"] / 1e3
                                      * out["steps_per_epoch"])
    return out


def predict_serving(model, sv: pd.DataFrame) -> pd.DataFrame:
    """Per serving row of ``sv`` (:func:`serving_frame`, its phases at whatever token time they
    were computed with): ``pred_prefill_w``, ``pred_decode_w`` and the time-weighted
    ``pred_power_w`` per GPU, from the model's coefficients of the row's device (its family's,
    else the pooled ones)."""
    from perfcast.devices import get_device

    out = sv.copy()
    mix, pre, dec = np.zeros(len(sv)), np.zeros(len(sv)), np.zeros(len(sv))
    for key, idx in sv.groupby("device").indices.items():
        theta = model.coefficients(get_device(key))[0]
        mix[idx], pre[idx], dec[idx] = serving_power(theta, model.u0, sv.iloc[idx])
    out["pred_power_w"], out["pred_prefill_w"], out["pred_decode_w"] = mix, pre, dec
    return out


def train_power(out_root: str | Path | None = None, data_dir=None) -> dict[str, Any]:
    """Fit on every Zeus trace row and every ML.ENERGY v2 serving row and save
    ``power_model.json`` under ``out_root`` (default ``<data home>/models/power``)."""
    import time

    from perfcast.datasets.zeus import FILES
    from perfcast.datasets._base import resolve_data_dir
    from perfcast.paths import public_data_dir
    from perfcast.training.trainer import default_recipe_dir

    t = time.perf_counter()
    root = Path(out_root) if out_root else default_recipe_dir("power")
    frame = zeus_frame(data_dir)
    sv = serving_frame()
    m = fit_power_model(frame, sv)
    base = resolve_data_dir(data_dir)
    raw = (public_data_dir() / "mlenergy-leaderboard-v2.csv").read_bytes()
    from perfcast.devices import get_device
    from perfcast.energy import family_of

    fam_dev: dict[str, list[str]] = {}
    for d in sorted({*frame["device"], *sv["device"]}):
        fam_dev.setdefault(family_of(get_device(d)), []).append(d)
    m.trained_on = {
        "source": ["zeus-power (Zeus NSDI'23 traces, ml-energy/zeus): training steps at "
                   "every power limit",
                   "mlenergy-v2 (ML.ENERGY leaderboard v2, vLLM 0.5.4): serving, prefill and "
                   "decode mixed by their predicted times"],
        "kinds": {"step": "Zeus training steps (A40, V100 PCIe, P100 PCIe, Quadro RTX 6000; "
                          "FP32) at their default limit",
                  "serving": "ML.ENERGY v2 vLLM serving runs (A100 40GB, H100 SXM; 16-bit), "
                             "prefill and decode mixed by their times",
                  "limit response": "every Zeus row (the only source under a power limit)"},
        "files": {**{Path(f).name: hashlib.sha256((base / f).read_bytes()).hexdigest()
                     for f in FILES.values()},
                  "mlenergy-leaderboard-v2.csv": hashlib.sha256(raw).hexdigest()},
        "records": {"zeus": int(len(frame)), "mlenergy-v2": int(len(sv))},
        "configurations": int(frame["config"].nunique()),
        "devices": sorted({*frame["device"], *sv["device"]}),
        "families": dict(sorted(fam_dev.items())),
        "workloads": sorted(frame["workload"].unique().tolist()),
        "prompt_tokens_by_workload": sv.attrs.get("prompts", {}),
        "prompt_lengths": "not published by ML.ENERGY: fitted per workload "
                          "(perfcast.training.phase_power.fit_prompt_lengths) on the measured "
                          "token times",
        "unseen_family": "the pooled coefficients",
        "shrink": SHRINK,
        "evaluation": "reports/energy/README.md, reports/llm/serving.md", "command": COMMAND}
    path = m.save(root)
    return {"path": str(path), "records": len(frame) + len(sv),
            "seconds": round(time.perf_counter() - t, 1)}


__all__ = ["COEF_BOUNDS", "COMMAND", "SHRINK", "fit_coefficients", "fit_limit_response",
           "fit_power_model", "fit_step", "predict_frame", "predict_serving", "serving_frame",
           "serving_power", "train_power", "zeus_frame"]
