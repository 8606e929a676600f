"""The serving side of the power model's fit (:mod:`perfcast.training.power`): ML.ENERGY v2's
vLLM runs split into their phases.

ML.ENERGY measures a server's average power per GPU; :func:`serving_phases` splits each
request's GPU-seconds (``O × token time``) into its prefill (:func:`perfcast.llm.prefill.
estimate_prefill`) and decode steps of ``Avg BS`` sequences, with each phase's memory and
compute utilisation per GPU — the rows the one power model (:class:`perfcast.energy.
PowerModel`) is fitted on, beside the Zeus training steps.

ML.ENERGY does not publish its prompts' lengths. They are a property of its two workloads
(``chat``, ``code``), not of the hardware: :func:`fit_prompt_lengths` finds, per workload, the
mean prompt length whose prefill + decode steps (the prefill model and the learned decode
model) reproduce the measured token times best — one number per workload, said in
``trained_on``.

``perfcast train --recipe llm --only phase-power`` rebuilds the power model
(:func:`train_phase_power`: the same file as ``perfcast train --recipe power``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


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


def train_phase_power(out_root: str | Path) -> dict[str, Any]:
    """The power model (:func:`perfcast.training.power.train_power`) written to
    ``<out_root>/power_model.json``: the phases' power is the power model's."""
    from perfcast.training.power import train_power

    return train_power(out_root)


__all__ = ["PROMPT_GRID", "decode_steps", "fit_prompt_lengths", "prefill_per_request",
           "serving_phases", "train_phase_power"]
