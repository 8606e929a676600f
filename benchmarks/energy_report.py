"""Judge the power model (perfcast.energy) on the Zeus traces; write reports/energy/.

    PERFCAST_DATA=../shared/data .venv/bin/python benchmarks/energy_report.py [--end-to-end]

Leave-one-GPU-out (train on three GPUs, test on the fourth) and leave-one-workload-out (train on
five workloads, test on the sixth), the power model refitted on each training split exactly as
``perfcast train --recipe power`` fits the shipped one (perfcast.training.power):

1. average power (every row: every batch, optimizer and power limit) and energy per epoch
   (predicted power × the measured time per epoch at the default limit × the predicted
   slowdown at the row's limit) — MAPE, beside two baselines given the *measured* time of the
   row: **TDP × time** (the upper bound cost/rank used before) and **a constant fraction of
   TDP** (the training split's median power ÷ TDP, capped at the limit);
2. the power-limit decision (Zeus's cost η·E + (1−η)·max power·T, η = 0.5): per (workload,
   GPU, batch, optimizer), the limit the model chooses among the limits Zeus measured, its
   *measured* cost against the best measured one (within 5 %?), beside always the maximum
   limit.

The step's FLOPs and bytes come from each workload's perfcast graph (perfcast.zoo.zeus); the
time at the default limit is the measured one here (what the time predictors answer is judged
in reports/crossdevice/), so these numbers are the power model's own error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "energy"
ETA = 0.5
COMMAND = ("PERFCAST_DATA=../shared/data .venv/bin/python benchmarks/energy_report.py"
           + (" --end-to-end" if "--end-to-end" in sys.argv else ""))


def mape(pred, true) -> float:
    pred, true = np.asarray(pred, float), np.asarray(true, float)
    return float(np.mean(np.abs(pred - true) / true) * 100)


def evaluate(frame: pd.DataFrame, split: str, serving: pd.DataFrame | None = None
             ) -> tuple[pd.DataFrame, None]:
    """Held-out predictions of every row under ``split`` (``gpu`` or ``workload``), the model
    fitted on the training split's Zeus rows (its graph-step kind, which answers these rows)
    and every ``serving`` row (its serving kind: none of ML.ENERGY's GPUs or workloads is a Zeus
    one, and it does not answer a graph step)."""
    from perfcast.training.power import fit_power_model, predict_frame

    out = []
    for g in sorted(frame[split].unique()):
        tr, te = frame[frame[split] != g], frame[frame[split] == g]
        m = fit_power_model(tr, serving)
        p = predict_frame(m, te)
        frac = float((tr["power_w"] / tr["tdp_w"]).median())
        p["const_power_w"] = np.minimum(frac * p["tdp_w"], p["power_limit_w"])
        p["tdp_power_w"] = p["tdp_w"]
        p["held_out"] = g
        out.append(p)
    return pd.concat(out), None


def table(pred: pd.DataFrame, by: str) -> pd.DataFrame:
    rows = []
    for key, d in [*pred.groupby(by), ("all", pred)]:
        top = d[d["power_limit_w"] == d.groupby("config")["power_limit_w"].transform("max")]
        rows.append({by: key, "rows": len(d),
                     "power_model": mape(d["pred_power_w"], d["power_w"]),
                     "const_fraction": mape(d["const_power_w"], d["power_w"]),
                     "tdp": mape(d["tdp_power_w"], d["power_w"]),
                     "energy_model": mape(d["pred_energy_per_epoch_j"], d["energy_per_epoch_j"]),
                     "energy_const": mape(d["const_power_w"] * d["time_per_epoch_s"],
                                          d["energy_per_epoch_j"]),
                     "energy_tdp": mape(d["tdp_w"] * d["time_per_epoch_s"],
                                        d["energy_per_epoch_j"]),
                     "power_at_default": mape(top["pred_power_w"], top["power_w"]),
                     "time_under_limit": mape(d["pred_time_ms"], d["time_ms"])})
    return pd.DataFrame(rows)


def decisions(pred: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: chosen limit (predicted cost), its measured cost vs the best."""
    from perfcast.energy import zeus_cost

    rows = []
    for cfg, d in pred.groupby("config"):
        maxp = float(d["power_limit_w"].max())
        meas = [zeus_cost(e, t, ETA, maxp) for e, t in zip(d["energy_per_epoch_j"],
                                                             d["time_per_epoch_s"])]
        est = [zeus_cost(p * t / 1e3 * n, t / 1e3 * n, ETA, maxp) for p, t, n in
               zip(d["pred_power_w"], d["pred_time_ms"], d["steps_per_epoch"])]
        i_best, i_choice = int(np.argmin(meas)), int(np.argmin(est))
        i_max = int(np.argmax(d["power_limit_w"].to_numpy()))
        gap = meas[i_choice] / meas[i_best] - 1
        rows.append({"config": cfg, "gpu": d["gpu"].iloc[0], "workload": d["workload"].iloc[0],
                     "batch_size": int(d["batch_size"].iloc[0]),
                     "optimizer": d["optimizer"].iloc[0],
                     "best_limit_w": float(d["power_limit_w"].iloc[i_best]),
                     "chosen_limit_w": float(d["power_limit_w"].iloc[i_choice]),
                     "gap": gap, "within_5pct": gap <= 0.05,
                     "max_limit_gap": meas[i_max] / meas[i_best] - 1})
    return pd.DataFrame(rows)


def end_to_end(frame: pd.DataFrame, serving: pd.DataFrame | None = None
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Leave-one-GPU-out at the default limit with perfcast's *predicted* step time (what
    ``perfcast predict`` answers): features and energy from the predicted time. Returns the
    MAPE table per GPU and the per-row frame."""
    from perfcast.api import predict
    from perfcast.devices import get_device
    from perfcast.energy import step_features
    from perfcast.training.power import fit_power_model

    top = frame[frame["power_limit_w"] == frame.groupby("config")["power_limit_w"]
                .transform("max")].copy()
    t_pred = {}
    for (spec, inp, dev, b), _ in top.groupby(["model", "input_size", "device", "batch_size"]):
        p = predict(spec, device=dev, batch_size=int(b), mode="train", precision="fp32",
                    input_size=inp, optimizer="adam")
        t_pred[(spec, dev, b)] = (p.time_ms, p.predictor.get("time_ms"))
    top["pred_t0_ms"] = [t_pred[(m, d, b)][0] for m, d, b in
                         zip(top["model"], top["device"], top["batch_size"])]
    top["time_from"] = [t_pred[(m, d, b)][1] for m, d, b in
                        zip(top["model"], top["device"], top["batch_size"])]
    out = []
    for g in sorted(frame["gpu"].unique()):
        m = fit_power_model(frame[frame["gpu"] != g], serving)
        te = top[top["gpu"] == g].copy()
        te["e2e_power_w"] = [
            m.unconstrained_power(step_features(f, by, k, t / 1e3, get_device(d), "fp32",
                                                int(b)), get_device(d))
            for f, by, k, t, d, b in zip(te["flops"], te["bytes"], te["kernels"],
                                         te["pred_t0_ms"], te["device"], te["batch_size"])]
        te["e2e_energy_j"] = te["e2e_power_w"] * te["pred_t0_ms"] / 1e3 * te["steps_per_epoch"]
        out.append(te)
    d = pd.concat(out)
    rows = []
    for key, x in [*d.groupby("gpu"), ("all", d)]:
        rows.append({"gpu": key, "configs": len(x),
                     "time_at_default": mape(x["pred_t0_ms"], x["t0_ms"]),
                     "power_at_default": mape(x["e2e_power_w"], x["power_w"]),
                     "energy_per_epoch": mape(x["e2e_energy_j"], x["energy_per_epoch_j"]),
                     "energy_tdp_x_pred_time": mape(x["tdp_w"] * x["pred_t0_ms"] / 1e3
                                                    * x["steps_per_epoch"],
                                                    x["energy_per_epoch_j"])})
    return pd.DataFrame(rows), d


def end_to_end_by_workload(d: pd.DataFrame) -> pd.DataFrame:
    """Per workload (every held-out GPU): the predicted step time's MAPE, the measured ÷
    predicted time (median, lowest, highest) and the energy per epoch's MAPE."""
    rows = []
    for key, x in [*d.groupby("workload"), ("all", d)]:
        r = x["t0_ms"] / x["pred_t0_ms"]
        rows.append({"workload": key, "configs": len(x),
                     "time_at_default": mape(x["pred_t0_ms"], x["t0_ms"]),
                     "measured_over_predicted_median": float(r.median()),
                     "lowest": float(r.min()), "highest": float(r.max()),
                     "energy_per_epoch": mape(x["e2e_energy_j"], x["energy_per_epoch_j"])})
    return pd.DataFrame(rows)


#: Per-row held-out end-to-end predictions (what ``perfcast predict`` answers for energy on an
#: unseen GPU): read by ``benchmarks/uncertainty_report.py`` to calibrate the ``energy_j``
#: intervals of the ``power-model`` answer.
END_TO_END_CSV = "end_to_end_leave_one_gpu_out.csv"


def end_to_end_rows(d: pd.DataFrame) -> pd.DataFrame:
    """The end-to-end rows per step: measured vs predicted time, power and energy (J per
    step) and the log residual ``log(measured / predicted energy)``."""
    out = pd.DataFrame({
        "config": d["config"], "gpu": d["gpu"], "device": d["device"],
        "workload": d["workload"], "model": d["model"], "batch_size": d["batch_size"],
        "optimizer": d["optimizer"], "power_limit_w": d["power_limit_w"],
        "time_from": d["time_from"], "time_ms": d["t0_ms"], "pred_time_ms": d["pred_t0_ms"],
        "power_w": d["power_w"], "pred_power_w": d["e2e_power_w"],
        "energy_j": d["energy_per_epoch_j"] / d["steps_per_epoch"],
        "pred_energy_j": d["e2e_power_w"] * d["pred_t0_ms"] / 1e3})
    out["residual"] = np.log(out["energy_j"] / out["pred_energy_j"])
    return out


def md(df: pd.DataFrame, fmt: str = "{:.1f}") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt.format(v) if isinstance(v, float) else str(v)
                                       for v in r) + " |")
    return "\n".join(lines)


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if "PERFCAST_DATA" not in os.environ:
        os.environ["PERFCAST_DATA"] = str(ROOT.parent / "shared" / "data")
    from perfcast.training.power import serving_frame, zeus_frame

    frame = zeus_frame()
    serving = serving_frame()
    res: dict = {"command": COMMAND, "rows": len(frame),
                 "configurations": int(frame["config"].nunique()), "eta": ETA}
    text = {}
    for split in ("gpu", "workload"):
        pred, _ = evaluate(frame, split, serving)
        t = table(pred, split)
        dec = decisions(pred)
        dsum = dec.groupby("gpu" if split == "gpu" else "workload").agg(
            cases=("config", "size"), within_5pct=("within_5pct", "mean"),
            median_gap=("gap", "median"), max_limit_within_5pct=(
                "max_limit_gap", lambda s: float((s <= 0.05).mean()))).reset_index()
        dsum.loc[len(dsum)] = ["all", len(dec), float(dec["within_5pct"].mean()),
                               float(dec["gap"].median()),
                               float((dec["max_limit_gap"] <= 0.05).mean())]
        res[split] = {"power": t.to_dict(orient="records"),
                      "decision": dsum.to_dict(orient="records")}
        text[split] = (t, dsum, dec)
    OUT.mkdir(parents=True, exist_ok=True)
    for split in ("gpu", "workload"):
        text[split][2].to_csv(OUT / f"decisions_leave_one_{split}_out.csv", index=False,
                              float_format="%.4f")
    e2e_md = ""
    if "--end-to-end" in sys.argv:
        e2e, e2e_rows = end_to_end(frame, serving)
        res["end_to_end_gpu"] = e2e.to_dict(orient="records")
        e2e_w = end_to_end_by_workload(e2e_rows)
        res["end_to_end_workload"] = e2e_w.to_dict(orient="records")
        resid = end_to_end_rows(e2e_rows)["residual"]
        q05, q50, q95 = (float(v) for v in np.quantile(resid, [0.05, 0.5, 0.95]))
        OUT.mkdir(parents=True, exist_ok=True)
        end_to_end_rows(e2e_rows).to_csv(OUT / END_TO_END_CSV, index=False, float_format="%.6g")
        e2e_md = f"""
## 3. End to end: with perfcast's predicted time (`--end-to-end`)

Leave-one-GPU-out at the default limit (the {len(frame[frame['power_limit_w'] == frame.groupby('config')['power_limit_w'].transform('max')])} highest-limit rows), the step time from `perfcast.predict`
(the shipped time predictors: `crossdevice` on these GPUs, fp32 training, Adam-family
optimizer) instead of the measured one — what `perfcast predict` answers for energy. Energy per
epoch = predicted power × predicted time × steps; beside TDP × predicted time. MAPE, %:

{md(e2e)}

Per workload (all four held-out GPUs; `measured_over_predicted`: measured ÷ predicted step
time):

{md(e2e_w, "{:.2f}")}

Per row (time, power, energy per step, log residual): `{END_TO_END_CSV}` — the held-out
residuals `benchmarks/uncertainty_report.py` calibrates the `energy_j` intervals on
(log(measured / predicted energy) 5 / 50 / 95 %: {q05:.2f} / {q50:.2f} / {q95:.2f}).

Why the predicted time is far below the measured one for some workloads (issue #42). The traces
give a time per **epoch** (`time_per_epoch`, `../shared/data/README.md`); a step's time is it ÷
the steps of an epoch (`perfcast/zoo/zeus.py`), so it holds everything the training script does
per step, not only the GPU's kernels:

* **The host's training loop** (data loader, Python, an optimizer looping over parameter
  tensors, `zero_grad`, a loss read back every step). NCF's GPU is near idle (≈ 38 W on the
  V100, its idle draw) and its step stays ≈ 3 ms (A40, V100) / 6-7 ms (P100, RTX 6000 hosts)
  from batch 4 to 512, then grows with the batch (per-sample collation); ShuffleNet's and
  BERT's smallest batches take 33-37 ms (A40, V100) / ≈ 60 ms (the other two hosts) whatever the
  batch. Per kernel of perfcast's training-step plan that is ≈ 60-90 µs on the faster hosts and
  ≈ 2× on the slower ones, where the crossdevice queue's dispatch (fitted on benchmark loops
  with synthetic data) is 5 µs: a property of the script and its host, not of the GPU or the
  graph, and nothing a spec sheet gives for a held-out GPU. Not modelled; it is what the
  `energy_j` interval's upper side covers.
* **DeepSpeech2's recurrence** was priced as one fully parallel operator reading its weights
  once. Its 635 time steps depend on each other and each streams the layer's recurrent weights
  (16.8 MB per direction in fp32, more than any of these GPUs' L2): the kernel plan now counts
  those reads (`perfcast.features.kernels.recurrent_weight_bytes`, forward and backward). The
  crossdevice answer for a V100 at batch 8 went from 184 to 943 ms; the answer perfcast gives is
  still capped lower by the dominance rule (`perfcast.anchors`: the RTX 2080 Ti's own learned
  model, trained on torchvision CNNs, answers these `module:` specs too). The rest is open: with
  LibriSpeech train-clean-100's 28,539 utterances per epoch the measured steps imply ≈ 2.6 s per
  step at batch 2-8 on the V100 with the GPU drawing 62 % of its TDP, 10× what streaming the
  recurrent weights takes; with the 960-hour set (281,241) they match it, but then the large
  batches would run above the V100's FP32 peak (mixed precision would explain both) — the
  traces do not say which.
* **Sentiment140 at 128 tokens** is over-predicted (≈ 2× at batch ≥ 16): the measured steps
  would need ≈ 26 TFLOPS on the V100 (FP32 peak 14) at 128 tokens, so the run used shorter
  (tweet-length, dynamically padded) sequences or half precision; the traces do not say which.
"""
    (OUT / "results.json").write_text(json.dumps(res, indent=1, default=float) + "\n")
    g, w = text["gpu"], text["workload"]
    allg = g[0][g[0]["gpu"] == "all"].iloc[0]
    dg = g[1][g[1]["gpu"] == "all"].iloc[0]
    doc = f"""# Energy: the power model on the Zeus traces

Regenerate: `{COMMAND}` (under a minute; the workloads' graphs come from the graph cache or are
built once). The model is the one power model of `perfcast.energy`; a graph step (these
rows) is answered by its graph-step fit (`P₀ = idle + (TDP − idle)·σ(θ·x)`, `x` the step's
log utilisations of its work over the time, intensity and batch — section above), which each
split refits on its training Zeus rows only, as `perfcast train --recipe power --out
perfcast/shipped` fits the shipped one (`perfcast/shipped/power_model.json`) on every row. A
held-out GPU's family is unseen: it answers with the pooled fit.

Data: the Zeus NSDI'23 traces (`../shared/data/zeus-power/`, {len(frame):,} rows,
{frame['config'].nunique()} configurations = GPU × workload × batch × optimizer, each over
6-9 power limits) on A40, V100 (PCIe), P100 (PCIe) and Quadro RTX 6000; six training
workloads built as perfcast graphs (`perfcast/zoo/zeus.py`). The time at the default limit is
the **measured** one, so these are the power model's own errors (power, the limit response, the
slowdown); the time predictors' error is in `reports/crossdevice/`. Baselines get the row's
measured time too: **TDP** = power TDP (what `cost` / `rank` used before), **const** = the
training split's median power ÷ TDP × TDP, capped at the limit.

## 1. Average power and energy per epoch — MAPE (%)

`power_*`: every row; `power_at_default`: the rows at the highest limit (TDP) only;
`energy_*`: energy per epoch (model: predicted power × measured default-limit time × predicted
slowdown; baselines: their power × the row's measured time); `time_under_limit`: predicted
step time under the limit (measured default time × predicted slowdown).

### Leave-one-GPU-out

{md(g[0])}

### Leave-one-workload-out

{md(w[0])}

## 2. Power-limit decision (η = {ETA}) — cases within 5 % of the best measured cost

Per (workload, GPU, batch, optimizer): the limit minimising the *predicted* cost
η·E + (1−η)·max power·T among the limits Zeus measured; `within_5pct` = share of cases whose
*measured* cost at that limit is within 5 % of the best measured limit's; `median_gap` = median
excess cost; `max_limit_within_5pct` = the same share for always keeping the maximum limit.
Per case: `decisions_leave_one_gpu_out.csv`, `decisions_leave_one_workload_out.csv`.

### Leave-one-GPU-out

{md(g[1], "{:.3f}")}

### Leave-one-workload-out

{md(w[1], "{:.3f}")}

## Goals (issue #15) and where they stand

* Leave-one-GPU-out power MAPE ≤ 8 %: **{allg['power_model']:.1f} %** — not met (TDP
  {allg['tdp']:.1f} %, constant fraction {allg['const_fraction']:.1f} %). The power drawn at
  the default limit differs by GPU for the same utilisation (a P100 tops out near 60 % of its
  TDP on ResNet-50 where the RTX 6000 reaches 90 %; data-loader-bound NCF draws 4 % of
  TDP − idle on the P100 and 20 % on the A40) — nothing in a spec sheet of three training GPUs
  predicts the fourth's.
* Leave-one-GPU-out energy per epoch ≤ 10 %: **{allg['energy_model']:.1f} %** — not met.
* Power-limit choice within 5 % of the best measured cost in ≥ 80 % of cases, leave-one-GPU-out:
  **{dg['within_5pct']:.0%}** of {int(dg['cases'])} cases
  ({'met' if dg['within_5pct'] >= 0.8 else 'not met'}; keeping the maximum limit:
  {dg['max_limit_within_5pct']:.0%}).

How this was reached, honestly (issue #15's activity model, which answers graph steps again
since the fits by kind of work of issue #42 — reports/energy/power_model_kinds.md; the limit
response and the slowdown below are still its): the features and the
activity model were fixed before the first run of this report and not changed after it. The slowdown's form was changed once, after that
first run: ``((P₀ − s·idle)/(P − s·idle))^γ`` over-predicted the slowdown of a limit just below
the unconstrained power (×1.09 where the traces show ×1.03), so the model never chose a lower
limit (62 % of cases within 5 %, the same as keeping the maximum); the pooled traces' shape
(log T/T₀ ≈ (ln P₀/P)²) gave the present ``exp(γ·(ln P₀/P)^β)``, whose two numbers each split
refits from its own training rows. An XGBoost activity model and device features (SM·clock ÷ TDP,
bandwidth ÷ TDP) were tried on the pooled data and did worse leave-one-GPU-out (27.5 %,
23.9 %, 25.6 % on the power at the default limit vs 18.5 %); they are not shipped.
"""
    doc = doc.replace("\n## Goals (issue #15)", e2e_md + "\n## Goals (issue #15)")
    # keep the power model's section (benchmarks/power_model_eval.py writes it between these
    # markers, under the title)
    begin, end = "<!-- power-model-eval:begin -->", "<!-- power-model-eval:end -->"
    old = (OUT / "README.md").read_text() if (OUT / "README.md").exists() else ""
    if begin in old and end in old:
        first = doc.index("\n") + 1
        doc = (doc[:first] + "\n" + old[old.index(begin):old.index(end) + len(end)] + "\n"
               + doc[first:])
    (OUT / "README.md").write_text(doc)
    print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
