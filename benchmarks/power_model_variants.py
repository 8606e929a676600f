"""Variants of the power model's fit (:mod:`perfcast.training.power`) held out on the Zeus
training GPUs, chosen by a *nested* leave-one-GPU-out — written to
``reports/energy/power_model_variants.md``:

    .venv/bin/python benchmarks/power_model_variants.py        # ≈ 1 min on 2 cores

Each variant refits ``u₀`` and the pooled ``static, c_compute, c_tensor, c_memory`` on the
training GPUs' Zeus steps at the default limit and every ML.ENERGY v2 serving row (as the
shipped fit) and predicts the held-out GPU's power at its default limit (its family unseen:
the pooled coefficients). Variants: the loss (log ratio as shipped, or relative error), the
weight of the Zeus rows against the serving rows (0.3, 1, 3), and an extra static term for
training steps (host and data-loader gaps). **Nested**: for each held-out GPU the variant is
the one with the lowest leave-one-GPU-out error on the *other three* GPUs; the held-out GPU
never chooses.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(REPO.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(REPO / "datasets"))

from perfcast.training.power import (COEF_BOUNDS, _h, _zeus_top,  # noqa: E402
                                     serving_frame, serving_power, zeus_frame)

OUT = REPO / "reports" / "energy" / "power_model_variants.md"
VARIANTS = [dict(loss=lo, w_zeus=w, train_static=s) for lo, w, s in
            itertools.product(("log", "relative"), (0.3, 1.0, 3.0), (False, True))]


def _zeus_power(v, top, train_static):
    u0, th = math.exp(v[0]), v[1:5]
    st = v[5] if train_static else 0.0
    h = _h(u0)
    c = np.where(top["tensor"].to_numpy(bool), th[2], th[1])
    idle, tdp = top["idle_w"].to_numpy(float), top["tdp_w"].to_numpy(float)
    return np.clip(idle + tdp * (th[0] + st + c * h(top["cu"].to_numpy(float))
                                 + th[3] * h(top["mu"].to_numpy(float))), idle, tdp)


def fit(top, sv, loss, w_zeus, train_static):
    from scipy.optimize import least_squares

    def err(p, y):
        return np.log(p / y) if loss == "log" else p / y - 1.0

    def res(v):
        pz = _zeus_power(v, top, train_static)
        ps = serving_power(v[1:5], math.exp(v[0]), sv)[0]
        return np.concatenate([
            math.sqrt(w_zeus) * err(pz, top["p0_w"].to_numpy(float)) / math.sqrt(len(top)),
            err(ps, sv["power_per_device_w"].to_numpy(float)) / math.sqrt(len(sv))])

    lo, hi = COEF_BOUNDS
    x0 = [math.log(0.1), 0.15, 0.5, 0.5, 0.3] + ([0.0] if train_static else [])
    lb = [math.log(1e-3), *lo] + ([-0.5] if train_static else [])
    ub = [math.log(1e3), *hi] + ([0.5] if train_static else [])
    return least_squares(res, x0, bounds=(lb, ub)).x


def heldout(top, sv, gpu, **kw) -> float:
    v = fit(top[top["device"] != gpu], sv, **kw)
    te = top[top["device"] == gpu]
    return float(np.mean(np.abs(_zeus_power(v, te, kw["train_static"]) / te["p0_w"] - 1)) * 100)


def _fit_own(top):
    """The shipped form fitted on Zeus rows only (log loss)."""
    from scipy.optimize import least_squares

    lo, hi = COEF_BOUNDS

    def res(v):
        return np.log(_zeus_power(v, top, False) / top["p0_w"].to_numpy(float))

    return least_squares(res, [math.log(0.1), 0.15, 0.5, 0.5, 0.3],
                         bounds=([math.log(1e-3), *lo], [math.log(1e3), *hi])).x


def _ratios(top, sv, gpus) -> str:
    """Markdown: median predicted / measured power at TDP per workload and held-out GPU."""
    cols = {}
    for g in gpus:
        v = fit(top[top["device"] != g], sv, "log", 1.0, False)
        te = top[top["device"] == g]
        cols[g] = (te.assign(r=_zeus_power(v, te, False) / te["p0_w"])
                   .groupby("workload")["r"].median())
    wls = sorted(set().union(*[c.index for c in cols.values()]))
    lines = ["| workload | " + " | ".join(gpus) + " |", "|---|" + "---|" * len(gpus)]
    lines += [f"| {w} | " + " | ".join(f"{cols[g].get(w, float('nan')):.2f}" for g in gpus)
              + " |" for w in wls]
    return "\n".join(lines)


def main() -> int:
    top, sv = _zeus_top(zeus_frame()), serving_frame()
    gpus = sorted(top["device"].unique())
    grid = {i: {g: heldout(top, sv, g, **kw) for g in gpus} for i, kw in enumerate(VARIANTS)}
    lines = ["| variant | " + " | ".join(gpus) + " | mean |", "|---|" + "---|" * (len(gpus) + 1)]
    for i, kw in enumerate(VARIANTS):
        r = grid[i]
        lines.append(f"| {kw['loss']}, Zeus weight {kw['w_zeus']:g}"
                     f"{', training static' if kw['train_static'] else ''} | "
                     + " | ".join(f"{r[g]:.1f}" for g in gpus) + f" | {np.mean(list(r.values())):.1f} |")
    nested = []
    for g in gpus:
        rest = top[top["device"] != g]
        inner = [np.mean([heldout(rest, sv, h, **kw) for h in gpus if h != g]) for kw in VARIANTS]
        best = int(np.argmin(inner))
        nested.append(f"| {g} | {VARIANTS[best]} | {inner[best]:.1f} | {grid[best][g]:.1f} |")
    # the floor of the form: each GPU fitted on its own Zeus rows only (in sample, no serving)
    own = {}
    for g in gpus:
        te = top[top["device"] == g]
        v = _fit_own(te)
        own[g] = float(np.mean(np.abs(_zeus_power(v, te, False) / te["p0_w"] - 1)) * 100)
    by_wl = _ratios(top, sv, gpus)
    m = top.assign(f=top["p0_w"] / top["tdp_w"]).pivot_table(index="workload", columns="device",
                                                             values="f", aggfunc="median")
    meas = "\n".join(["| workload | " + " | ".join(gpus) + " |", "|---|" + "---|" * len(gpus)]
                     + [f"| {w} | " + " | ".join(f"{m.loc[w, g]:.2f}" for g in gpus) + " |"
                        for w in m.index])
    text = f"""## Variants of the power model's fit, nested leave-one-GPU-out (Zeus, default limit)

`.venv/bin/python benchmarks/power_model_variants.py`. MAPE % of the power at the default
limit (TDP) of the held-out GPU's Zeus training steps; the first row is the shipped fit.

{chr(10).join(lines)}

Nested choice (the variant with the lowest error on the other three GPUs, then the held-out
GPU predicted):

| held-out GPU | chosen variant | inner error % | held-out error % |
|---|---|---|---|
{chr(10).join(nested)}

No variant, and no nested choice among them, brings a held-out training GPU to ≤ 15 %. The
form itself is the limit: fitted on each GPU's **own** Zeus rows (in sample, log loss), it
reaches {', '.join(f'{g} {own[g]:.1f}' for g in gpus)} % — the utilisations of a training
step explain part of its power only. Median predicted / measured power by workload, each GPU
held out (the shipped settings, refitted without it):

{by_wl}

Measured power ÷ TDP at the default limit (median by workload):

{meas}

The misses are per GPU, not per workload: NCF (data-loader-bound, a thousandth of the FP32
peak) draws about twice the fraction of TDP on the GDDR6 boards (A40, Quadro RTX 6000) as on the
HBM2 ones (P100, V100) — a board's static power that no spec field here carries (the memory
technology would be one; the device spec has none) — and the P100 draws less than the others
at every workload. The shipped fit stays as it was.
"""
    OUT.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
