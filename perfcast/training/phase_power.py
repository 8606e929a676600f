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
   sequences. ML.ENERGY does not publish its prompts' lengths: the prompt is taken as long as
   the mean output (the stand-in :mod:`perfcast.llm.model` uses too), said in ``trained_on``.
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


def serving_phases(frame: pd.DataFrame, token_time_s=None, prefill_constants=None
                   ) -> pd.DataFrame:
    """Per ML.ENERGY row (:func:`perfcast.datasets.llm.load_mlenergy`): the seconds per
    request in prefill (``t_pre``) and in decode (``t_dec``), the decode step (``step_s``) and
    each phase's memory / compute utilisation per GPU (``mu_pre, cu_pre, mu_dec, cu_dec``).
    ``token_time_s`` (default: the measured ``token_time_s``) is the server's seconds per
    output token."""
    from perfcast.devices import get_device
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.energy import decode_step_work, utilisation
    from perfcast.llm.prefill import ENGINE_PREFILL, estimate_prefill

    tt = frame["token_time_s"].to_numpy(float) if token_time_s is None \
        else np.asarray(token_time_s, float)
    rows = []
    for j, r in enumerate(frame.itertuples(index=False)):
        arch = llm_arch(f"hf:{r.model}")
        dev = get_device(r.device)
        n = int(r.n_devices)
        o = float(r.output_len)
        i = max(1, int(round(o)))  # the stand-in prompt
        chunk = ENGINE_PREFILL["vllm"].chunk
        k = max(1, chunk // i)
        pre = estimate_prefill(arch, dev, engine="vllm", precision=r.precision, batch=k,
                               input_len=i, n_devices=n, constants=prefill_constants)
        t_pre = pre.seconds / k
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


def fit_phase_power(ph: pd.DataFrame, power_w, ceiling: float) -> list[float]:
    """``[a₀, a_mem, a_comp]`` fitted on rows of :func:`serving_phases` and their measured
    power per GPU (least squares on the log power)."""
    from scipy.optimize import least_squares

    y = np.log(np.asarray(power_w, float))
    r = least_squares(lambda z: np.log(mixed_power(z, ceiling, ph)) - y,
                      np.array([0.1, 1.0, 1.0]), bounds=([-0.5, 0.0, 0.0], [1.0, 10.0, 20.0]))
    return [float(v) for v in r.x]


def train_phase_power(out_root: str | Path) -> dict[str, Any]:
    """Fit :class:`~perfcast.llm.energy.PhasePower` on all of ML.ENERGY v2 (and the Zeus
    ceiling) and write ``<out_root>/llm-phase-power/config.json``."""
    import hashlib

    from perfcast.datasets.llm import load_mlenergy
    from perfcast.llm.energy import SHIPPED_NAME, PhasePower
    from perfcast.paths import public_data_dir

    from perfcast.llm.prefill import SHIPPED_NAME as PREFILL, PrefillConstants, load_constants

    t0 = time.perf_counter()
    ceiling, n_zeus = zeus_ceiling()
    me = load_mlenergy()
    fresh = Path(out_root) / PREFILL
    consts = PrefillConstants.load(fresh) if (fresh / "config.json").is_file() \
        else load_constants()
    ph = serving_phases(me, prefill_constants=consts)
    a0, am, ac = fit_phase_power(ph, me["power_per_device_w"], ceiling)
    raw = (public_data_dir() / "mlenergy-leaderboard-v2.csv").read_bytes()
    pp = PhasePower(a0=a0, a_mem=am, a_comp=ac, ceiling=ceiling, trained_on={
        "ceiling": {"source": "zeus-power (Zeus NSDI'23 traces)",
                    "compute_bound_steps": n_zeus,
                    "rule": "median (P0 - idle) / (TDP - idle) of the configurations whose "
                            "compute utilisation at the default limit is >= 0.3"},
        "coefficients": {"source": "mlenergy-v2", "file": "mlenergy-leaderboard-v2.csv",
                         "sha256": hashlib.sha256(raw).hexdigest(), "records": int(len(me)),
                         "devices": sorted(me["device"].unique().tolist()),
                         "assumed": "prompt length = mean output length (not published)"},
        "evaluation": "reports/llm/serving.md",
        "command": "perfcast train --recipe llm --only phase-power --out "
                   "perfcast/training/shipped"})
    path = pp.save(Path(out_root) / SHIPPED_NAME)
    return {"path": str(path.parent), "records": int(len(me)),
            "seconds": round(time.perf_counter() - t0, 1)}


__all__ = ["fit_phase_power", "mixed_power", "serving_phases", "train_phase_power",
           "zeus_ceiling"]
