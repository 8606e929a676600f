"""Issue #30's evaluation — prefill, energy by phase, decode and the serving planner, every
number held out — written to ``reports/llm/serving.md`` (+ CSV / JSON beside it):

    .venv/bin/python benchmarks/llm_serving_eval.py          # ≈ 5 min on 2 cores

1. **Prefill operators** (Vidur, the vLLM executor's token-level operators of one layer at
   prefill sizes): the operator constants fitted on one GPU, the other GPU's per-layer time
   predicted (A100 ↔ A40).
2. **llama.cpp prompt processing** (LLM-Inference-Bench): rows that differ only in
   ``n_batch`` generate the same tokens, so latency(n_batch a) − latency(the largest n_batch)
   is prompt processing alone; llama.cpp's constants refitted without the held-out
   accelerator (its vendor's other one where there is one), the operators as shipped.
3. **Whole requests, leave-one-hardware-out** (LLM-Inference-Bench, every engine): the latency
   model retrained without the held-out GPU, the prefill constants without it (Vidur's A100
   profile left out when an A100 is held out); ``time = ttft (prefill model) + decode (learned
   model's decode steps)`` against the learned model's own total, by engine and by the
   predicted prefill share — the check that prefill and decode stay right together.
4. **Serving on ML.ENERGY** (vLLM, A100 / H100), each GPU held out — the latency model, the
   prefill constants and the phase power model without it: the decode step at the running
   batch (TPOT), the queueing model at saturation (token throughput and TPOT at each max
   batch: the latency–throughput curve), power per GPU (phase model vs the shipped XGBoost
   ``llm-power`` formulation, refitted on the other GPU) and energy per output token with the
   measured and with the predicted token time, split into its prefill and decode parts.
5. **Planner speed**: ``perfcast plan … --mode generate`` in a fresh process, twice.

Nothing is tuned on a held-out fold: every fit inside a fold sees only its training part.
ML.ENERGY publishes no prompt lengths; their mean per workload (chat, code) is fitted on the
training GPU's rows — stated in the report.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(REPO.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(REPO / "datasets"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from perfcast.datasets.llm import load_llm_bench, load_mlenergy  # noqa: E402
from perfcast.datasets.vidur import load_vidur_ops  # noqa: E402
from perfcast.devices import get_device  # noqa: E402
from perfcast.llm.arch import llm_arch  # noqa: E402
from perfcast.llm.model import LLMGenerationPredictor, features  # noqa: E402
from perfcast.llm.prefill import PrefillConstants, estimate_prefill  # noqa: E402
from perfcast.training import prefill as TP  # noqa: E402

OUT = REPO / "reports" / "llm"
#: Vidur's A100 profile is an A100 (80 GB SXM): left out of the operator fit when an A100 is the
#: held-out GPU (the same chip).
SAME_CHIP = {"a100-40gb": "a100-80gb", "a100-80gb": "a100-80gb"}
PLAN_CMD = ["plan", "hf:meta-llama/Llama-2-13b-hf", "--mode", "generate", "--device",
            "a100-80gb", "--rate", "5", "--input-len", "512", "--output-len", "256",
            "--slo-tpot", "50"]
BIG_PLAN_CMD = ["plan", "hf:meta-llama/Meta-Llama-3-70B", "--mode", "generate", "--device",
                "h100-sxm", "--rate", "20", "--input-len", "2048", "--output-len", "512",
                "--slo-ttft", "2000", "--slo-tpot", "60"]


def ape(y, p):
    y, p = np.asarray(y, float), np.asarray(p, float)
    return np.abs(p - y) / np.abs(y) * 100


def mape(y, p) -> float:
    return float(np.nanmean(ape(y, p)))


def md(rows: list[dict], cols: list[str] | None = None) -> str:
    if not rows:
        return "(none)\n"
    cols = cols or list(rows[0])

    def f(v):
        if isinstance(v, float):
            return "—" if not math.isfinite(v) else (f"{v:,.1f}" if abs(v) >= 1 else f"{v:.3g}")
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(f(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- 1. operators
def prefill_operators(ops: pd.DataFrame) -> tuple[pd.DataFrame, list[dict], dict]:
    lo = TP.operator_loho(ops)
    lo["ape"] = ape(lo["measured_s"], lo["predicted_s"])
    lo["ratio"] = lo["predicted_s"] / lo["measured_s"]
    pre = lo[lo["phase"] == "prefill"]
    rows = []
    for (dev, model), g in pre.groupby(["held_out", "model"]):
        rows.append({"held-out GPU": dev, "model": model, "layer configs": len(g),
                     "MAPE %": g["ape"].mean(), "median pred/meas": g["ratio"].median()})
    for dev, g in pre.groupby("held_out"):
        rows.append({"held-out GPU": dev, "model": "all", "layer configs": len(g),
                     "MAPE %": g["ape"].mean(), "median pred/meas": g["ratio"].median()})
    summary = {dev: float(g["ape"].mean()) for dev, g in pre.groupby("held_out")}
    summary["pooled"] = float(pre["ape"].mean())
    dec = lo[lo["phase"] == "decode"]
    summary["decode_sizes"] = {dev: float(g["ape"].mean()) for dev, g in dec.groupby("held_out")}
    return lo, rows, summary


# --------------------------------------------------------------------------- 2. llama.cpp
def llama_cpp_prompts(bench, consts) -> tuple[pd.DataFrame, list[dict], dict]:
    diffs = TP.prompt_differences(bench)
    devices = {k: get_device(k) for k in diffs["device"].unique()}
    G = TP._ops_on_grid(diffs, consts, devices)
    lh = TP.llama_cpp_loho(diffs, G, devices)
    lh["ape"] = ape(lh["measured_s"], lh["predicted_s"])
    lh["err_share_of_latency_%"] = (lh["predicted_s"] - lh["measured_s"]).abs() \
        / lh["latency_b_s"] * 100
    rows = []
    for (dev, n), g in lh.groupby(["device", "n_devices"]):
        one = g[g["n_batch_a"] == 1]
        small = g[g["n_batch_a"] > 1]
        rows.append({"held-out": dev, "devices": int(n), "pairs": len(g),
                     "n_batch 1 vs 64: MAPE %": one["ape"].mean(),
                     "median pred/meas": (one["predicted_s"] / one["measured_s"]).median(),
                     "n_batch 16/32 vs 64: |error| / latency %":
                         small["err_share_of_latency_%"].mean(),
                     "trained on": g["trained_on"].iloc[0]})
    vend = lh["device"].map(lambda d: "nvidia" if d in ("a100-40gb", "h100-sxm") else "amd")
    one = lh["n_batch_a"] == 1
    summary = {d: float(lh.loc[one & (lh["device"] == d), "ape"].mean())
               for d in sorted(lh["device"].unique())}
    summary["nvidia"] = float(lh.loc[one & (vend == "nvidia"), "ape"].mean())
    summary["amd"] = float(lh.loc[one & (vend == "amd"), "ape"].mean())
    return lh, rows, summary


# --------------------------------------------------------------------------- fold pieces
def fold_constants(ops, shipped_ops, held_out: str, bench_diffs, G, devices) -> PrefillConstants:
    """Prefill constants without ``held_out``: operators refitted without its chip (when Vidur
    has it), llama.cpp refitted without it."""
    chip = SAME_CHIP.get(held_out)
    op = TP.fit_operators(ops[ops["device_key"] != chip]) if chip else shipped_ops
    keep = (bench_diffs["device"] != held_out).to_numpy()
    eng = TP.fit_llama_cpp_by_vendor(bench_diffs[keep], {k: a[keep] for k, a in G.items()},
                                     devices)
    return PrefillConstants(gemm=op["gemm"], memop=op["memop"], engines=eng)


def ttft_of(frame: pd.DataFrame, consts: PrefillConstants) -> np.ndarray:
    out = []
    for r in frame.itertuples(index=False):
        dev = get_device(r.device)
        eng = r.framework
        llama = eng == "llama.cpp"  # (its rows: one sequence at their n_batch / n_ubatch)
        seqs = int(round(r.concurrent))
        out.append(estimate_prefill(
            llm_arch(f"hf:{r.model}"), dev, engine=eng, precision=r.precision, batch=seqs,
            input_len=int(r.input_len), n_devices=int(r.n_devices),
            chunk=int(min(r.n_batch, r.n_ubatch)) if llama else None,
            constants=consts).seconds)
    return np.array(out)


# --------------------------------------------------------------------------- 3. requests
def latency_loho(lib, Xl, ops, shipped_ops, diffs, G, devices):
    y = lib["latency_s"].to_numpy()
    rows, cache = [], {}
    pred_old = np.full(len(lib), np.nan)
    pred_new = np.full(len(lib), np.nan)
    share = np.full(len(lib), np.nan)
    for dev in sorted(lib["device"].unique()):
        test = (lib["device"] == dev).to_numpy()
        lat = LLMGenerationPredictor(target="latency_s", target_mode="blend",
                                     hardware="vendor").fit(Xl[~test], y[~test])
        consts = fold_constants(ops, shipped_ops, dev, diffs, G, devices)
        # the other engines' per-pass overheads from this fold's engine model
        consts.engines.update(TP.engine_model_overheads(model=lat))
        cache[dev] = (lat, consts)
        t, info = lat.predict(Xl[test], parts=True)
        ttft = ttft_of(lib[test], consts)
        dec = info["decode_s"]
        new = np.maximum(ttft + dec, Xl.loc[test, "bound_s"].to_numpy())
        pred_old[test], pred_new[test], share[test] = t, new, ttft / new
    lib = lib.assign(old=pred_old, new=pred_new, share=share)
    for (dev, eng), g in lib.groupby(["device", "framework"]):
        rows.append({"held-out GPU": dev, "engine": eng, "rows": len(g),
                     "learned total MAPE %": mape(g["latency_s"], g["old"]),
                     "ttft + decode MAPE %": mape(g["latency_s"], g["new"]),
                     "median prefill share %": 100 * g["share"].median()})
    bins = pd.cut(lib["share"], [0, 0.05, 0.15, 0.3, 1.0], include_lowest=True)
    by_share = [{"predicted prefill share": str(b), "rows": len(g),
                 "learned total MAPE %": mape(g["latency_s"], g["old"]),
                 "ttft + decode MAPE %": mape(g["latency_s"], g["new"])}
                for b, g in lib.groupby(bins, observed=True)]
    nv = lib["device"].isin(["a100-40gb", "h100-sxm"])
    summary = {"all_old": mape(lib["latency_s"], lib["old"]),
               "all_new": mape(lib["latency_s"], lib["new"]),
               "nvidia_old": mape(lib.loc[nv, "latency_s"], lib.loc[nv, "old"]),
               "nvidia_new": mape(lib.loc[nv, "latency_s"], lib.loc[nv, "new"]),
               "by_device_new": {d: mape(g["latency_s"], g["new"])
                                 for d, g in lib.groupby("device")}}
    return lib, rows, by_share, summary, cache


# --------------------------------------------------------------------------- 4. ML.ENERGY
def serving_loho(me, cache) -> tuple[pd.DataFrame, list[dict], list[dict], dict]:
    from perfcast.training.phase_power import decode_steps, fit_prompt_lengths, serving_phases
    from perfcast.training.power import (fit_power_model, predict_serving, serving_frame,
                                         zeus_frame)

    z = zeus_frame()  # the power model's training steps: every fold keeps them (no LLM GPU)
    parts, prompt_fits = [], {}
    for dev in sorted(me["device"].unique()):
        test = (me["device"] == dev).to_numpy()
        lat, consts = cache[dev]
        tr, te = me[~test], me[test].copy()
        # the workloads' mean prompt lengths (unpublished) from the other GPU's token times
        prompts = fit_prompt_lengths(tr, latency_model=lat, prefill_constants=consts)
        i_te = te["subtask"].fillna("all").map(prompts).to_numpy()
        prompt_fits[dev] = prompts
        # the one power model (perfcast.energy.PowerModel): its serving kind fitted on the
        # other GPU's serving phases only (measured token times, as shipped); and on them and
        # every Zeus step together (issue 42's first fit)
        sv_tr = serving_frame(tr, prefill_constants=consts, latency_model=lat, prompts=prompts)
        sv_te = serving_frame(te, prefill_constants=consts, latency_model=lat, prompts=prompts)
        pm = fit_power_model(z, sv_tr)
        pm_s = fit_power_model(z, sv_tr, serving_with_zeus=True)
        # the shipped formulation of llm-power, refitted on the other GPU
        xgb = LLMGenerationPredictor(target="power_per_device_w", target_mode="direct",
                                     hardware="specs").fit(features(tr, "tpot_s"),
                                                           tr["power_per_device_w"].to_numpy())
        te["power_xgb"] = xgb.predict(features(te, "tpot_s"))
        # decode step at the measured running batch; at the max batch
        d_run = decode_steps(te, i_te, lat, "batch_size")
        d_max = decode_steps(te, i_te, lat, "max_batch")
        o = te["output_len"].to_numpy(float)
        t_pre = sv_te["t_pre"].to_numpy()
        lam_meas = 1.0 / (te["token_time_s"].to_numpy() * o)
        rho = np.minimum(lam_meas * t_pre, 0.98)
        te["tpot_step"] = d_run
        te["tpot_queue"] = d_run / (1 - rho)
        nmax = te["max_batch"].to_numpy(float)
        lam_sat = nmax / ((o - 1) * d_max + nmax * t_pre)
        te["tput_sat"] = lam_sat * o
        te["tpot_sat"] = d_max / (1 - lam_sat * t_pre)
        te["token_time_pred"] = 1.0 / te["tput_sat"]
        # power: the power model at the phases of the measured token time; of the predicted one
        te["power_phase"] = predict_serving(pm, sv_te)["pred_power_w"].to_numpy()
        te["power_phase_serving_only"] = predict_serving(pm_s, sv_te)["pred_power_w"].to_numpy()
        ph_p = serving_phases(te, token_time_s=te["token_time_pred"].to_numpy(),
                              prefill_constants=consts, prompt_len=i_te)
        sv_p = predict_serving(pm, pd.concat([te[["device"]], ph_p], axis=1))
        te["power_phase_pred_tt"] = sv_p["pred_power_w"].to_numpy()
        n = te["n_devices"].to_numpy(float)
        te["ept_meas_tt"] = te["power_phase"] * n * te["token_time_s"]
        te["ept_pred"] = te["power_phase_pred_tt"] * n * te["token_time_pred"]
        te["ept_xgb_meas_tt"] = te["power_xgb"] * n * te["token_time_s"]
        # the predicted split per output token (full prediction)
        p_pre, p_dec = sv_p["pred_prefill_w"].to_numpy(), sv_p["pred_decode_w"].to_numpy()
        te["ept_prefill"] = p_pre * n * ph_p["t_pre"].to_numpy() / o
        te["ept_decode"] = p_dec * n * ph_p["t_dec"].to_numpy() / o
        te["p_prefill_w"], te["p_decode_w"] = p_pre, p_dec
        te["theta"] = json.dumps([round(x, 4) for x in pm.pooled])
        parts.append(te)
    r = pd.concat(parts)
    y_e = r["energy_per_token_j"]
    rows = []
    for dev, g in r.groupby("device"):
        ye = g["energy_per_token_j"]
        rows.append({
            "held-out GPU": dev, "rows": len(g),
            "TPOT: decode step at running batch %": mape(g["tpot_s"], g["tpot_step"]),
            "(median)": float(np.median(ape(g["tpot_s"], g["tpot_step"]))),
            "TPOT: + prefill interference %": mape(g["tpot_s"], g["tpot_queue"]),
            "(median) ": float(np.median(ape(g["tpot_s"], g["tpot_queue"]))),
            "power: power model %": mape(g["power_per_device_w"], g["power_phase"]),
            "power: serving + Zeus fit (before) %": mape(g["power_per_device_w"],
                                                    g["power_phase_serving_only"]),
            "power: XGBoost (llm-power) %": mape(g["power_per_device_w"], g["power_xgb"]),
            "J/token, measured token time: phase %": mape(ye, g["ept_meas_tt"]),
            "J/token, measured token time: XGBoost %": mape(ye, g["ept_xgb_meas_tt"]),
            "J/token, all predicted %": mape(ye, g["ept_pred"]),
            "(median)  ": float(np.median(ape(ye, g["ept_pred"])))})
    queue_rows = []
    for dev, g in r.groupby("device"):
        queue_rows.append({"held-out GPU": dev, "configs": len(g),
                           "token throughput at saturation MAPE %":
                               mape(g["throughput_tok_s"], g["tput_sat"]),
                           "median pred/meas": (g["tput_sat"] / g["throughput_tok_s"]).median(),
                           "TPOT at saturation MAPE %": mape(g["tpot_s"], g["tpot_sat"]),
                           "running batch / max batch (measured, median)":
                               (g["batch_size"] / g["max_batch"]).median()})
    summary = {
        "tpot_step": mape(r["tpot_s"], r["tpot_step"]),
        "tpot_queue": mape(r["tpot_s"], r["tpot_queue"]),
        "tpot_step_median": float(np.median(ape(r["tpot_s"], r["tpot_step"]))),
        "tpot_queue_median": float(np.median(ape(r["tpot_s"], r["tpot_queue"]))),
        "energy_per_token_all_predicted_median": float(np.median(ape(y_e, r["ept_pred"]))),
        "power_phase": mape(r["power_per_device_w"], r["power_phase"]),
        "power_xgb": mape(r["power_per_device_w"], r["power_xgb"]),
        "power_phase_serving_only": mape(r["power_per_device_w"],
                                         r["power_phase_serving_only"]),
        "energy_per_token_measured_time_phase": mape(y_e, r["ept_meas_tt"]),
        "energy_per_token_measured_time_xgb": mape(y_e, r["ept_xgb_meas_tt"]),
        "energy_per_token_all_predicted": mape(y_e, r["ept_pred"]),
        "throughput_saturation": mape(r["throughput_tok_s"], r["tput_sat"]),
        "tpot_saturation": mape(r["tpot_s"], r["tpot_sat"]),
        "prompt_tokens_fitted_on_the_other_gpu": prompt_fits,
        "prefill_share_of_energy_median": float((r["ept_prefill"] / (r["ept_prefill"]
                                                                     + r["ept_decode"])).median()),
        "by_device": {d: {"power_phase": mape(g["power_per_device_w"], g["power_phase"]),
                          "energy_measured_time": mape(g["energy_per_token_j"], g["ept_meas_tt"]),
                          "energy_all_predicted": mape(g["energy_per_token_j"], g["ept_pred"]),
                          "tpot_queue": mape(g["tpot_s"], g["tpot_queue"])}
                      for d, g in r.groupby("device")}}
    return r, rows, queue_rows, summary


# --------------------------------------------------------------------------- 5. speed
def plan_speed() -> dict:
    exe = str(REPO / ".venv" / "bin" / "perfcast")
    out = {}
    for name, cmd in (("acceptance", PLAN_CMD), ("llama3_70b_h100", BIG_PLAN_CMD)):
        runs = []
        for _ in range(2):
            t0 = time.perf_counter()
            p = subprocess.run([exe, *cmd, "--json"], capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if p.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)} failed: {p.stderr.strip()}")
            d = json.loads(p.stdout)
            runs.append({"wall_s": round(wall, 2), "plan_s": round(d["elapsed_s"], 2),
                         "evaluated": d["evaluated"], "feasible": d["feasible"]})
        out[name] = {"command": "perfcast " + " ".join(cmd), "runs": runs}
    return out


# --------------------------------------------------------------------------- main
def main() -> None:
    t0 = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    ops = load_vidur_ops()
    shipped_ops = TP.fit_operators(ops)
    lo, op_rows, op_sum = prefill_operators(ops)
    bucket = pd.cut(lo["num_tokens"], [0, 64, 256, 1024, 4096, 1 << 20],
                    labels=["1-64", "65-256", "257-1024", "1025-4096", ">4096"])
    lo.assign(tokens=bucket).groupby(["held_out", "model", "tp", "tokens"], observed=True).agg(
        layer_configs=("ape", "size"), mape_pct=("ape", "mean"),
        median_pred_over_meas=("ratio", "median")).round(4).reset_index().to_csv(
        OUT / "prefill_operators_loho.csv", index=False)
    print(f"operators: {op_sum}", flush=True)
    lib = load_llm_bench()
    lh, ll_rows, ll_sum = llama_cpp_prompts(lib, shipped_ops)
    lh.to_csv(OUT / "prefill_llama_cpp_loho.csv", index=False)
    print(f"llama.cpp prompts: {ll_sum}", flush=True)
    diffs = TP.prompt_differences(lib)
    devices = {k: get_device(k) for k in diffs["device"].unique()}
    G = TP._ops_on_grid(diffs, shipped_ops, devices)
    Xl = features(lib, "latency_s")
    lat_df, lat_rows, lat_share, lat_sum, cache = latency_loho(lib, Xl, ops, shipped_ops,
                                                               diffs, G, devices)
    lat_df[["model", "device", "n_devices", "framework", "batch_size", "n_batch", "input_len",
            "latency_s", "old", "new", "share"]].to_csv(OUT / "requests_loho.csv", index=False)
    print(f"requests: {lat_sum}", flush=True)
    me = load_mlenergy()
    sv, sv_rows, q_rows, sv_sum = serving_loho(me, cache)
    sv[["model", "device", "n_devices", "batch_size", "max_batch", "output_len", "tpot_s",
        "tpot_step", "tpot_queue", "throughput_tok_s", "tput_sat", "tpot_sat",
        "power_per_device_w", "power_phase", "power_xgb", "energy_per_token_j", "ept_meas_tt",
        "ept_pred", "ept_prefill", "ept_decode", "p_prefill_w", "p_decode_w"]].to_csv(
        OUT / "serving_loho.csv", index=False)
    print(f"serving: {sv_sum}", flush=True)
    speed = plan_speed()
    print(f"plan speed: {speed}", flush=True)
    summary = {"prefill_operators_loho_mape": op_sum, "llama_cpp_prompt_loho_mape": ll_sum,
               "requests_loho": lat_sum, "serving_loho": sv_sum, "plan_speed": speed,
               "seconds": round(time.perf_counter() - t0, 1)}
    (OUT / "serving_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    write_report(op_rows, op_sum, ll_rows, ll_sum, lat_rows, lat_share, lat_sum, sv_rows, q_rows,
                 sv_sum, speed, summary["seconds"])


def write_report(op_rows, op_sum, ll_rows, ll_sum, lat_rows, lat_share, lat_sum, sv_rows,
                 q_rows, sv_sum, speed, seconds) -> None:
    def met(v, goal):
        return f"**{v:.1f}** ({'met' if v <= goal else 'not met'}, goal ≤ {goal})"

    acc = speed["acceptance"]["runs"]
    big = speed["llama3_70b_h100"]["runs"]
    by = sv_sum["by_device"]
    text = f"""# LLM serving: prefill, energy by phase, the serving plan (issue #30)

`.venv/bin/python benchmarks/llm_serving_eval.py` ({seconds / 60:.0f} min on 2 cores). MAPE %,
every prediction held out: the GPU predicted is never in the fit (operators, llama.cpp's
constants, the latency model, the phase power model — each refitted per fold). Nothing is tuned
on a held-out fold. CSVs beside this file hold the rows (Vidur's operators by token range).

## Goals (issue #30)

* Prefill throughput / TTFT ≤ 15 % leave-one-hardware-out: the prefill operators of a layer
  (Vidur, vLLM's executor) {met(op_sum['a100-80gb'], 15)} with the A100 held out,
  {met(op_sum['a40'], 15)} with the A40 held out; llama.cpp's prompt processing
  (LLM-Inference-Bench) {met(ll_sum['nvidia'], 15)} on the NVIDIA GPUs held out (A100
  {ll_sum['a100-40gb']:.1f}, H100 {ll_sum['h100-sxm']:.1f}), {ll_sum['amd']:.1f} on the AMD
  ones (MI250 {ll_sum['mi250']:.1f}, MI300X {ll_sum['mi300x']:.1f}: not met). No source
  measures vLLM's, TensorRT-LLM's or DeepSpeed's TTFT by itself; their prefill enters the whole
  requests below.
* Energy per output token ≤ 10 %: with the measured token time (the power model's own error)
  {met(sv_sum['energy_per_token_measured_time_phase'], 10)} (A100
  {by['a100-40gb']['energy_measured_time']:.1f}, H100 {by['h100-sxm']['energy_measured_time']:.1f};
  the shipped XGBoost power formulation: {sv_sum['energy_per_token_measured_time_xgb']:.1f});
  everything predicted (token time from the queueing model at the configuration's max batch)
  {met(sv_sum['energy_per_token_all_predicted'], 10)} (A100
  {by['a100-40gb']['energy_all_predicted']:.1f}, H100 {by['h100-sxm']['energy_all_predicted']:.1f}).
* Decode stays ≤ 10 %: `tpot_ms` is the learned model's decode steps ÷ (output − 1) exactly as
  before this issue (the prefill model replaces only the prefill share), so the decode figures
  measured before stand. Whole LLM-Inference-Bench requests (prompt = output length) with the
  NVIDIA GPU held out: ttft + decode {lat_sum['nvidia_new']:.1f} vs the learned total
  {lat_sum['nvidia_old']:.1f} (all accelerators {lat_sum['all_new']:.1f} vs
  {lat_sum['all_old']:.1f}; section 3). ML.ENERGY's TPOT predicted from LLM-Inference-Bench's
  decode model is **not** within 10 % (section 4: median
  {sv_sum['tpot_step_median']:.0f} % from the decode step alone, another vLLM version and
  unpublished prompts).
* `plan --mode generate` over all candidates < 10 s: the acceptance command
  ({acc[0]['evaluated']} deployments) {acc[0]['wall_s']:.1f} s in a fresh process (planning
  {acc[0]['plan_s']:.1f} s), then {acc[1]['wall_s']:.1f} s; Llama-3-70B on H100 at 20 req/s
  ({big[0]['evaluated']} deployments) {big[0]['wall_s']:.1f} / {big[1]['wall_s']:.1f} s.

## 1. Prefill operators, leave-one-GPU-out (Vidur)

One layer's token-level operators (QKV, output, MLP GEMMs, 2 norms, rotary, activation,
residual add) at prefill sizes (> 64 tokens, TP 1–8), constants fitted on the other GPU's
operators (`perfcast.training.prefill.operator_loho`). Decode sizes (≤ 64 tokens):
{', '.join(f'{k} {v:.1f}' for k, v in op_sum['decode_sizes'].items())}.

{md(op_rows)}
## 2. llama.cpp prompt processing, leave-one-accelerator-out (LLM-Inference-Bench)

Pairs of rows differing only in `n_batch` (the generated tokens cancel): prompt processing
at `n_batch` 1 (a pass per token) minus at 64, and at 16 / 32 minus 64 (differences of a few
hundred ms, within run-to-run noise: shown as |error| ÷ the request's latency). llama.cpp's
streaming factor, overheads and pipelining refitted without the held-out accelerator (its
vendor's other GPU: one GPU to learn a vendor from).

{md(ll_rows)}
## 3. Whole requests, leave-one-hardware-out (LLM-Inference-Bench)

`time = ttft (prefill model) + decode (the learned model's decode steps)`, beside the learned
model's own total; both retrained without the held-out GPU. By engine:

{md(lat_rows)}
By the predicted prefill share of the request:

{md(lat_share)}
## 4. Serving on ML.ENERGY (vLLM 0.5.4), leave-one-GPU-out

The decode model (retrained without the GPU), the prefill constants and the power model
(`perfcast.energy.PowerModel`, `perfcast.training.power.fit_power_model`: its serving kind
fitted on the other GPU's serving phases only; the held-out GPU's family is then unseen, so it
answers with the pooled coefficients) predict each configuration. ML.ENERGY does not publish its prompts: their mean length per workload is
fitted on the other GPU's token times and TPOTs
(`perfcast.training.phase_power.fit_prompt_lengths`: {sv_sum['prompt_tokens_fitted_on_the_other_gpu']}).
Power per phase: predicted prefill share of energy per output token, median
{100 * sv_sum['prefill_share_of_energy_median']:.0f} %; the per-row prefill and decode powers
and energies are in `serving_loho.csv` (no source measures the split).

{md(sv_rows)}
The power model's own error is the "measured token time" columns: power by phase from the
utilisations (LOHO {sv_sum['power_phase']:.1f} %) against the XGBoost formulation shipped
before ({sv_sum['power_xgb']:.1f} %). The same form fitted on the other GPU's serving rows and
every Zeus training step together (issue 42's first fit) gives
{sv_sum['power_phase_serving_only']:.1f} %. Everything predicted, the
error is the token time's: the
decode model learned on LLM-Inference-Bench (another vLLM, static batches) misses ML.ENERGY's
decode steps by half at the median, and the prefills' share of the server (ρ) is near 1 for
the long chat prompts, where `1 / (1 − ρ)` amplifies any error (the mean TPOT errors above).

### The queueing model against the latency–throughput curves

Each ML.ENERGY configuration is a server saturated at its max batch (`Max BS`): the model's
saturation rate `λ = N / ((O−1)·d(N) + N·t_pre)` at `N` = max batch gives the token
throughput and `TPOT = d(N) / (1 − λ·t_pre)`.

{md(q_rows)}
## 5. Planner speed

{md([{"plan": k, "command": v["command"], "deployments": v["runs"][0]["evaluated"],
      "fresh process s": v["runs"][0]["wall_s"], "again s": v["runs"][1]["wall_s"],
      "planning s": v["runs"][1]["plan_s"]} for k, v in speed.items()])}
## What these numbers do not cover

* TTFT of vLLM, TensorRT-LLM and DeepSpeed-MII is not measured by any source here: their
  prefill is checked through Vidur's operators (vLLM's executor) and inside whole requests.
* llama.cpp's large ubatches (512 tokens, compute-bound) are priced by the operators fitted on
  Vidur (cuBLAS through PyTorch) at the FP16-accumulate peak llama.cpp's cuBLAS path uses; its
  held-out check here is at n_batch ≤ 64 (memory-bound passes).
* AMD: llama.cpp's prompt speed on MI250 vs MI300X differs by the software stack (HIP
  kernels), not the spec sheet: one AMD GPU does not predict the other.
* Quantized formats: no row of any source is quantized; dequantisation is priced from its
  bytes (llama.cpp's FP16 copy above 32 tokens per ubatch, fused kernels elsewhere).
"""
    # keep the power model's section (benchmarks/power_model_eval.py writes it between these
    # markers, under the title)
    path, begin, end = OUT / "serving.md", "<!-- power-model-eval:begin -->", \
        "<!-- power-model-eval:end -->"
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old:
        block = old[old.index(begin):old.index(end) + len(end)]
        first = text.index("\n") + 1
        text = text[:first] + "\n" + block + "\n" + text[first:]
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
