"""Which fit should answer a graph step's power, and which an LLM serving phase's: the power
model's fits compared per held-out GPU — written to ``reports/energy/power_model_kinds.md``
(+ ``power_model_kinds.json``):

    .venv/bin/python benchmarks/power_model_kinds.py        # ≈ 1 min on 2 cores

Graph steps (the Zeus training GPUs, each held out in turn; its family is then unseen):

* **logistic, Zeus only** — the activity model of commit 4bbe8d5 (logistic in the log
  utilisations, intensity and batch: :data:`perfcast.energy.FEATURES`), fitted on the other
  GPUs' Zeus steps: what ``fit_power_model`` ships for the ``step`` kind (its per-family
  intercept shifts do not answer an unseen family);
* **serving form, Zeus + ML.ENERGY** — ``idle + TDP·(static + c·h(cu) + c_mem·h(mu))`` fitted
  on the other GPUs' Zeus steps and every ML.ENERGY row at once (commits 6c7e6fe / 722161c);
* **serving form, Zeus only** — the same form, the other GPUs' Zeus steps only;
* **nested choice** — per held-out GPU, the fit among the three with the lowest mean of the
  inner leave-one-GPU-out errors (power at the default limit with the measured time and with
  perfcast's predicted time) on the *other three* GPUs; the held-out GPU never chooses.

each judged (a) at the measured step time (power at the default limit), (b) end to end with
perfcast's predicted step time (``perfcast.predict``, as ``energy_report.py --end-to-end``):
power at the default limit and energy per epoch. Serving phases (c): ML.ENERGY v2 power per GPU
held out, the serving form fitted on the other GPU's serving rows only (shipped) or on them
and every Zeus row (before), the workloads' prompt lengths fitted on the other GPU.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(REPO.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(REPO / "datasets"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from perfcast.training.power import (_h, fit_coefficients, fit_step,  # noqa: E402
                                     predict_serving, serving_frame, zeus_frame)

OUT = REPO / "reports" / "energy"
COMMAND = ".venv/bin/python benchmarks/power_model_kinds.py"
FITS = ("logistic, Zeus only", "serving form, Zeus + ML.ENERGY", "serving form, Zeus only")


def _top_with_predicted_time(z: pd.DataFrame) -> pd.DataFrame:
    from perfcast.api import predict
    from perfcast.devices import get_device
    from perfcast.energy import step_features, utilisations

    top = z[z["power_limit_w"] == z.groupby("config")["power_limit_w"].transform("max")] \
        .copy().reset_index(drop=True)
    t_pred = {}
    for (spec, inp, dev, b), _ in top.groupby(["model", "input_size", "device", "batch_size"]):
        p = predict(spec, device=dev, batch_size=int(b), mode="train", precision="fp32",
                    input_size=inp, optimizer="adam")
        t_pred[(spec, dev, b)] = p.time_ms
    top["pred_t0_ms"] = [t_pred[(m, d, b)] for m, d, b in
                         zip(top["model"], top["device"], top["batch_size"])]
    feats, cu, mu = [], [], []
    for r in top.itertuples(index=False):
        dev = get_device(r.device)
        feats.append(step_features(r.flops, r.bytes, r.kernels, r.pred_t0_ms / 1e3, dev, "fp32",
                                   int(r.batch_size)))
        u = utilisations(r.flops, r.bytes, r.pred_t0_ms / 1e3, dev, "fp32")
        cu.append(u[0])
        mu.append(u[1])
    top.attrs["pred_feats"] = np.asarray(feats)
    top["pred_cu"], top["pred_mu"] = cu, mu
    return top


def _predictor(kind: str, z_tr: pd.DataFrame, sv: pd.DataFrame):
    """``f(rows, predicted: bool) -> W`` at the default limit for one fit on ``z_tr``."""
    from perfcast.energy import FEATURES

    if kind == FITS[0]:
        coef, mean, scale, _ = fit_step(z_tr)

        def f(te, predicted):
            X = te.attrs["pred_feats"] if predicted else te[list(FEATURES)].to_numpy(float)
            a = 1 / (1 + np.exp(-(coef[0] + ((X - mean) / np.asarray(scale)) @ coef[1:])))
            idle = te["idle_w"].to_numpy(float)
            return idle + a * (te["tdp_w"].to_numpy(float) - idle)
        return f
    u0, th, _ = fit_coefficients(z_tr, sv if kind == FITS[1] else None)

    def g(te, predicted):
        cu = te["pred_cu" if predicted else "compute_util"].to_numpy(float)
        mu = te["pred_mu" if predicted else "memory_util"].to_numpy(float)
        idle, tdp = te["idle_w"].to_numpy(float), te["tdp_w"].to_numpy(float)
        h = _h(u0)  # Zeus is FP32: c_compute
        return np.clip(idle + tdp * (th[0] + th[1] * h(cu) + th[3] * h(mu)), idle, tdp)
    return g


def _sub(top: pd.DataFrame, mask) -> pd.DataFrame:
    out = top[mask].copy()
    out.attrs["pred_feats"] = top.attrs["pred_feats"][np.asarray(mask)]
    return out


def _errors(f, te: pd.DataFrame) -> dict[str, float]:
    pm, pp = f(te, False), f(te, True)
    y = te["p0_w"].to_numpy(float)
    e_meas = te["energy_per_epoch_j"].to_numpy(float)
    e_pred = pp * te["pred_t0_ms"].to_numpy(float) / 1e3 * te["steps_per_epoch"].to_numpy(float)
    return {"power, measured time %": float(np.mean(np.abs(pm / y - 1)) * 100),
            "power, predicted time %": float(np.mean(np.abs(pp / y - 1)) * 100),
            "energy, predicted time %": float(np.mean(np.abs(e_pred / e_meas - 1)) * 100)}


def _logo(top: pd.DataFrame, z: pd.DataFrame, sv: pd.DataFrame, kind: str
          ) -> dict[str, dict[str, float]]:
    out = {}
    for g in sorted(top["gpu"].unique()):
        f = _predictor(kind, z[z["gpu"] != g], sv)
        out[g] = _errors(f, _sub(top, top["gpu"] == g))
    return out


def md(rows: list[dict]) -> str:
    cols = list(rows[0])
    f = (lambda v: f"{v:.1f}" if isinstance(v, float) else str(v))
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(f(r[c]) for c in cols) + " |" for r in rows])


def _serving_logo(sv_all: pd.DataFrame, z: pd.DataFrame) -> list[dict]:
    """ML.ENERGY v2 power per GPU held out: the serving form on the other GPU's serving rows
    only, or on them and every Zeus row."""
    from perfcast.energy import PowerModel
    from perfcast.shipped import load_shipped
    from perfcast.training.phase_power import fit_prompt_lengths

    sys.path.insert(0, str(REPO / "benchmarks"))
    from power_model_eval import SRC_COLS

    consts = load_shipped("llm-prefill")
    rows = []
    for g in sorted(sv_all["device"].unique()):
        prompts = fit_prompt_lengths(sv_all[sv_all["device"] != g], prefill_constants=consts)
        sv = serving_frame(sv_all[[c for c in sv_all.columns if c in SRC_COLS]],
                           prefill_constants=consts, prompts=prompts)
        tr, te = sv[sv["device"] != g], sv[sv["device"] == g]
        r = {"held-out GPU": g, "rows": len(te)}
        for name, zz in (("ML.ENERGY only (shipped) %", None), ("Zeus + ML.ENERGY (before) %", z)):
            u0, pooled, fams = fit_coefficients(zz, tr)
            m = PowerModel(families=fams, pooled=pooled, u0=u0, step_coef=[0.0], step_mean=[],
                           step_scale=[], step_families={}, k=1, c=1, gamma=0, beta=1,
                           trained_on={})
            p = predict_serving(m, te)
            r[name] = float(np.mean(np.abs(p["pred_power_w"] / p["power_per_device_w"] - 1))
                            * 100)
        rows.append(r)
    return rows


def main() -> int:
    z = zeus_frame()
    sv = serving_frame()
    top = _top_with_predicted_time(z)
    gpus = sorted(top["gpu"].unique())
    res = {k: _logo(top, z, sv, k) for k in FITS}
    # nested: each held-out GPU's fit chosen on the other three GPUs' inner leave-one-out
    nested, choice = {}, {}
    for g in gpus:
        zi, ti = z[z["gpu"] != g], _sub(top, top["gpu"] != g)
        inner = {}
        for k in FITS:
            e = _logo(ti, zi, sv, k)
            inner[k] = float(np.mean([(v["power, measured time %"] + v["power, predicted time %"])
                                      / 2 for v in e.values()]))
        best = min(inner, key=inner.get)
        choice[g] = {"chosen": best, "inner": inner}
        nested[g] = res[best][g]
    res["nested choice"] = nested
    rows = []
    for k, per in res.items():
        for g in gpus:
            rows.append({"fit": k, "held-out GPU": g, **per[g]})
        rows.append({"fit": k, "held-out GPU": "mean of GPUs",
                     **{c: float(np.mean([per[g][c] for g in gpus])) for c in per[gpus[0]]}})
    ch = [{"held-out GPU": g, "chosen fit": c["chosen"],
           **{f"inner: {k} %": v for k, v in c["inner"].items()}} for g, c in choice.items()]
    srows = _serving_logo(sv, z)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "power_model_kinds.json").write_text(json.dumps(
        {"command": COMMAND, "steps": rows, "nested": choice, "serving": srows}, indent=1)
        + "\n")
    text = f"""## Which fit answers which kind of work (graph steps vs LLM serving phases)

`{COMMAND}` (≈ 1 min). Per held-out GPU (its family unseen: the pooled fit answers), MAPE %
of the power at the default limit (TDP) of the Zeus training steps: (a) at the measured step
time, (b) with perfcast's predicted step time (`perfcast.predict`, as
`energy_report.py --end-to-end`), and the energy per epoch with the predicted time (its error
is mostly the time's). The logistic fit is the 4bbe8d5 model's, and the `step` kind shipped
now; the serving form on Zeus + ML.ENERGY is the 6c7e6fe / 722161c one.

{md(rows)}

Nested choice (the fit with the lowest mean inner leave-one-GPU-out error, measured and
predicted time, on the other three GPUs):

{md(ch)}

Serving phases (ML.ENERGY v2, power per GPU with the measured token time, the GPU held out;
the serving form, prompt lengths fitted on the other GPU):

{md(srows)}

Why the logistic fit holds up with a predicted time: perfcast's predicted step of the Zeus
workloads is off by up to 20× (DeepSpeech2 and NCF are predicted 5-10 % of their measured
time: the data loader and Python are not in the graph). The serving form's `h(u)` saturates
near u₀ ≈ 0.07 of the linear utilisation, so a step predicted 10× too short reads as a busy GPU
and its power goes to TDP (the P100's 146 %); the logistic of *log* utilisations moves by a
power of the factor, and its intensity and batch features do not move at all.
"""
    (OUT / "power_model_kinds.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
