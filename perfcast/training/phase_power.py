"""Fitting the phase power model (:class:`perfcast.llm.energy.PhasePower`) — ``perfcast train
--recipe llm --only phase-power``:

1. **ceiling** (:func:`zeus_ceiling`): the median activity ``(P₀ − idle) / (TDP − idle)`` of
   the Zeus traces' compute-bound training steps (compute utilisation ≥
   :data:`~perfcast.llm.energy.COMPUTE_BOUND_UTILISATION`) at their default (highest) power
   limit — what a compute-bound phase draws;
2. **a₀, a_mem, a_comp** (:func:`fit_phase_power`): least squares on the log of ML.ENERGY's
   average power per GPU (vLLM serving, A100 / H100), each row's power modelled as the
   time-weighted mix of its two phases (:func:`serving_phases`): per request, the server spends
   ``O × token time`` GPU-seconds (measured), of which the request's prefill
   (:func:`perfcast.llm.prefill.estimate_prefill`) and the rest decode steps of ``Avg BS``
   sequences. (Fitting on the Zeus steps as well — :func:`zeus_utilisation`, their training
   steps' utilisation at the default limit — is an option the evaluation reports; it doubles
   the error on a held-out serving GPU, so the shipped model takes only its ceiling from Zeus.)

ML.ENERGY does not publish its prompts' lengths. They are a property of its two workloads
(``chat``, ``code``), not of the hardware: :func:`fit_prompt_lengths` finds, per workload, the
mean prompt length whose prefill + decode steps (the prefill model and the learned decode
model) reproduce the measured token times best — one number per workload, said in
``trained_on``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def zeus_ceiling(zeus: pd.DataFrame | None = None) -> tuple[float, int]:
    """(median activity of the compute-bound Zeus steps at their default limit, how many)."""
    from perfcast.llm.energy import COMPUTE_BOUND_UTILISATION
    from perfcast.training.power import zeus_frame

    z = zeus if zeus is not None else zeus_frame()
    top = z[z["power_limit_w"] == z.groupby("config")["power_limit_w"].transform("max")]
    cb = top[10 ** top["log_compute_util"] >= COMPUTE_BOUND_UTILISATION]
    act = (cb["p0_w"] - cb["idle_w"]) / (cb["tdp_w"] - cb["idle_w"])
    return float(np.median(act)), int(len(cb))


#: Candidate mean prompt lengths of a workload (tokens).
PROMPT_GRID = np.unique(np.round(np.geomspace(16, 4096, 33)).astype(int))


def prefill_per_request(arch, device, *, precision: str, input_len: int, n_devices: int,
                        prefill_constants=None):
    """(GPU-seconds of one request's prefill on a vLLM server, prompts sharing its chunk; the
    :class:`~perfcast.llm.prefill.PrefillEstimate` of the shared pass, its prompts)."""
    from perfcast.llm.prefill import ENGINE_PREFILL, estimate_prefill
    from perfcast.shipped import load_shipped

    k = max(1, ENGINE_PREFILL["vllm"].chunk // max(1, input_len))
    pre = estimate_prefill(arch, device, engine="vllm", precision=precision, batch=k,
                           input_len=input_len, n_devices=n_devices,
                           constants=prefill_constants or load_shipped("llm-prefill"))
    return pre.seconds / k, pre, k


def decode_steps(frame: pd.DataFrame, prompt_len, latency_model=None, batch_col="batch_size"
                 ) -> np.ndarray:
    """Seconds of one decode step per row at ``batch_col`` running requests of ``prompt_len``
    prompt tokens (array) and the row's output length: the learned latency model's decode steps
    of a static batch (``latency_model``, default the shipped one) ÷ (output − 1)."""
    from perfcast.llm.model import features
    from perfcast.shipped import load_shipped

    lat = latency_model or load_shipped("llm-latency")
    o = frame["output_len"].round().clip(lower=2).astype(int).to_numpy()
    b = frame[batch_col].round().clip(lower=1).astype(int).to_numpy()
    rows = pd.DataFrame({"model": frame["model"].to_numpy(),
                         "device": frame["device"].to_numpy(),
                         "n_devices": frame["n_devices"].to_numpy(), "framework": "vllm",
                         "precision": frame["precision"].to_numpy(), "batch_size": b,
                         "concurrent": b, "input_len": np.asarray(prompt_len, int),
                         "output_len": o})
    _, info = lat.predict(features(rows, "latency_s"), parts=True)
    return np.asarray(info["decode_s"], float) / (o - 1)


def fit_prompt_lengths(frame: pd.DataFrame, latency_model=None, prefill_constants=None
                       ) -> dict[str, int]:
    """``{workload (subtask): mean prompt tokens}``: per workload, the prompt length of
    :data:`PROMPT_GRID` whose predictions are nearest the measurements — the token time
    (prefill per request ÷ output + decode step at the running batch ÷ the batch) and the
    TPOT (the decode step stretched by the prefills' share ``ρ`` of the server's time at the
    measured request rate, ``d / (1 − ρ)``): the sum of their median |log ratio|."""
    from perfcast.devices import get_device
    from perfcast.llm.arch import llm_arch

    out = {}
    for task, g in frame.groupby(frame["subtask"].fillna("all")):
        o = g["output_len"].to_numpy(float)
        b = g["batch_size"].to_numpy(float)
        y = np.log(g["token_time_s"].to_numpy(float))
        y_tpot = np.log(g["tpot_s"].to_numpy(float))
        lam = 1.0 / (g["token_time_s"].to_numpy(float) * o)  # requests/s (measured)
        best, best_err = int(PROMPT_GRID[0]), np.inf
        for i in PROMPT_GRID:
            pre = np.array([prefill_per_request(
                llm_arch(f"hf:{r.model}"), get_device(r.device), precision=r.precision,
                input_len=int(i), n_devices=int(r.n_devices),
                prefill_constants=prefill_constants)[0] for r in g.itertuples(index=False)])
            d = decode_steps(g, np.full(len(g), i), latency_model)
            rho = np.minimum(lam * pre, 0.98)
            err = float(np.median(np.abs(np.log(pre / o + d / b) - y))
                        + np.median(np.abs(np.log(d / (1 - rho)) - y_tpot)))
            if err < best_err:
                best, best_err = int(i), err
        out[str(task)] = best
    return out


def serving_phases(frame: pd.DataFrame, token_time_s=None, prefill_constants=None,
                   prompt_len=None) -> pd.DataFrame:
    """Per ML.ENERGY row (:func:`perfcast.datasets.llm.load_mlenergy`): the seconds per
    request in prefill (``t_pre``) and in decode (``t_dec``), the decode step (``step_s``) and
    each phase's memory / compute utilisation per GPU (``mu_pre, cu_pre, mu_dec, cu_dec``).
    ``token_time_s`` (default: the measured ``token_time_s``) is the server's seconds per
    output token; ``prompt_len`` the prompt tokens per row (default: the mean output)."""
    from perfcast.devices import get_device
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.energy import decode_step_work, utilisation

    tt = frame["token_time_s"].to_numpy(float) if token_time_s is None \
        else np.asarray(token_time_s, float)
    prompts = frame["output_len"].round().clip(lower=1).to_numpy() if prompt_len is None \
        else np.asarray(prompt_len)
    rows = []
    for j, r in enumerate(frame.itertuples(index=False)):
        arch = llm_arch(f"hf:{r.model}")
        dev = get_device(r.device)
        n = int(r.n_devices)
        o = float(r.output_len)
        i = max(1, int(prompts[j]))
        t_pre, pre, k = prefill_per_request(arch, dev, precision=r.precision, input_len=i,
                                            n_devices=n, prefill_constants=prefill_constants)
        s = o * tt[j]
        t_dec = max(s - t_pre, 0.2 * s)
        b = float(r.batch_size)
        step = b * t_dec / o
        f_d, m_d = decode_step_work(arch, batch=b, context=i + o / 2.0, precision=r.precision,
                                    n_devices=n)
        mu_d, cu_d = utilisation(f_d, m_d, step, dev, n)
        m_pre = pre.bytes / k + arch.kv_bytes_per_token(r.precision) * i
        mu_p, cu_p = utilisation(pre.flops / k, m_pre, t_pre, dev, n)
        rows.append({"t_pre": t_pre, "t_dec": t_dec, "step_s": step, "mu_pre": float(mu_p),
                     "cu_pre": float(cu_p), "mu_dec": float(mu_d), "cu_dec": float(cu_d),
                     "idle_w": None, "tdp_w": float(dev.tdp_w)})
    out = pd.DataFrame(rows, index=frame.index)
    from perfcast.energy import power_bounds

    out["idle_w"] = [power_bounds(get_device(d))[0] for d in frame["device"]]
    return out


def mixed_power(theta, ceiling: float, ph: pd.DataFrame) -> np.ndarray:
    """Average power per GPU (W) of each row of :func:`serving_phases` for ``a₀, a_mem,
    a_comp`` = ``theta``: the phases' powers weighted by their times."""
    from perfcast.llm.energy import PhasePower

    pp = PhasePower(a0=theta[0], a_mem=theta[1], a_comp=theta[2], ceiling=ceiling)
    idle, tdp = ph["idle_w"].to_numpy(float), ph["tdp_w"].to_numpy(float)
    p_pre = idle + (tdp - idle) * pp.activity(ph["mu_pre"], ph["cu_pre"])
    p_dec = idle + (tdp - idle) * pp.activity(ph["mu_dec"], ph["cu_dec"])
    t_pre, t_dec = ph["t_pre"].to_numpy(float), ph["t_dec"].to_numpy(float)
    return (p_pre * t_pre + p_dec * t_dec) / (t_pre + t_dec)


def zeus_utilisation(zeus: pd.DataFrame | None = None) -> pd.DataFrame:
    """The Zeus configurations at their default (highest) power limit: memory and compute
    utilisation of their training step (compute against the peak of the precision they ran
    at, capped at 1), idle, TDP and the measured power ``p0_w``."""
    from perfcast.training.power import zeus_frame

    z = zeus if zeus is not None else zeus_frame()
    top = z[z["power_limit_w"] == z.groupby("config")["power_limit_w"].transform("max")]
    return pd.DataFrame({"mu": np.minimum(10 ** top["log_memory_util"], 1.0),
                         "cu": np.minimum(10 ** top["log_compute_util"], 1.0),
                         "idle_w": top["idle_w"], "tdp_w": top["tdp_w"], "p0_w": top["p0_w"]})


def fit_phase_power(ph: pd.DataFrame, power_w, ceiling: float,
                    zeus: pd.DataFrame | None = None) -> list[float]:
    """``[a₀, a_mem, a_comp]`` fitted on rows of :func:`serving_phases` and their measured
    power per GPU, and on the Zeus steps of :func:`zeus_utilisation` when given (their power
    at the default limit): least squares on the log power, every row weighing the same."""
    from scipy.optimize import least_squares

    from perfcast.llm.energy import PhasePower

    y = np.log(np.asarray(power_w, float))

    def resid(z):
        r = np.log(mixed_power(z, ceiling, ph)) - y
        if zeus is None or not len(zeus):
            return r
        pp = PhasePower(a0=z[0], a_mem=z[1], a_comp=z[2], ceiling=ceiling)
        idle, tdp = zeus["idle_w"].to_numpy(float), zeus["tdp_w"].to_numpy(float)
        pz = idle + (tdp - idle) * pp.activity(zeus["mu"], zeus["cu"])
        return np.concatenate([r, np.log(pz / zeus["p0_w"].to_numpy(float))])

    r = least_squares(resid, np.array([0.1, 1.0, 1.0]), bounds=([-0.5, 0.0, 0.0],
                                                                 [1.0, 10.0, 20.0]))
    return [float(v) for v in r.x]


def train_phase_power(out_root: str | Path) -> dict[str, Any]:
    """Fit :class:`~perfcast.llm.energy.PhasePower` on all of ML.ENERGY v2 (and the Zeus
    ceiling) and write ``<out_root>/llm-phase-power/config.json``."""
    import hashlib

    from perfcast.datasets.llm import load_mlenergy
    from perfcast.llm.energy import SHIPPED_NAME, PhasePower
    from perfcast.paths import public_data_dir

    from perfcast.llm.prefill import SHIPPED_NAME as PREFILL, PrefillConstants
    from perfcast.shipped import load_shipped

    t0 = time.perf_counter()
    ceiling, n_zeus = zeus_ceiling()
    me = load_mlenergy()
    fresh = Path(out_root) / PREFILL
    consts = PrefillConstants.load(fresh) if (fresh / "config.json").is_file() \
        else load_shipped(PREFILL)
    prompts = fit_prompt_lengths(me, prefill_constants=consts)
    ph = serving_phases(me, prefill_constants=consts,
                        prompt_len=me["subtask"].fillna("all").map(prompts).to_numpy())
    a0, am, ac = fit_phase_power(ph, me["power_per_device_w"], ceiling)
    raw = (public_data_dir() / "mlenergy-leaderboard-v2.csv").read_bytes()
    pp = PhasePower(a0=a0, a_mem=am, a_comp=ac, ceiling=ceiling, trained_on={
        "ceiling": {"source": "zeus-power (Zeus NSDI'23 traces)",
                    "compute_bound_steps": n_zeus,
                    "rule": "median (P0 - idle) / (TDP - idle) of the configurations whose "
                            "compute utilisation at the default limit is >= 0.3"},
        "coefficients": {"source": "mlenergy-v2 (vLLM serving: both phases mixed); the Zeus "
                                   "training steps set the ceiling only (fitting on them too "
                                   "doubles the held-out error: reports/llm/serving.md)",
                         "file": "mlenergy-leaderboard-v2.csv",
                         "sha256": hashlib.sha256(raw).hexdigest(), "records": int(len(me)),
                         "devices": sorted(me["device"].unique().tolist()),
                         "prompt_tokens_by_workload": prompts,
                         "prompt_lengths": "not published by ML.ENERGY: fitted per workload "
                                           "(fit_prompt_lengths) on the measured token times"},
        "evaluation": "reports/llm/serving.md",
        "command": "perfcast train --recipe llm --only phase-power --out perfcast/shipped"})
    path = pp.save(Path(out_root) / SHIPPED_NAME)
    return {"path": str(path.parent), "records": int(len(me)),
            "seconds": round(time.perf_counter() - t0, 1)}


__all__ = ["PROMPT_GRID", "zeus_utilisation", "decode_steps", "fit_phase_power", "fit_prompt_lengths",
           "prefill_per_request", "mixed_power", "serving_phases", "train_phase_power",
           "zeus_ceiling"]
