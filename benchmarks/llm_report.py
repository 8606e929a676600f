"""Write ``reports/llm/``: LLM generation predictors on the public serving measurements, under
the thesis' stratified 5-fold CV, leave-one-model-out and leave-one-hardware-out, beside the
arithmetic bound alone and the thesis' published numbers (ch. 6, Tables 6.5 / 6.6).

    .venv/bin/python benchmarks/llm_report.py            # ≈ 5 min on 2 cores

Predictors (``perfcast.predictors.llm``): ``bound`` (the arithmetic lower bound alone),
``thesis`` (XGBoost on log(target) from the Table 6.3-style features, hardware included),
``thesis-nohw`` (the same without hardware features: Table 6.6's ablation), ``perfcast``
(the bound × a learned factor ≥ 1, hardware seen through its vendor and ridge point),
``perfcast-specs`` (the same with the thesis' spec features), ``perfcast-nohw``. Energy per output token = predicted power
× n devices × TPOT ÷ running batch (power and TPOT each predicted out of fold).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(REPO.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(REPO / "datasets"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from perfcast.datasets.llm import load_llm_bench, load_mlenergy  # noqa: E402
from perfcast.predictors.llm import LLMGenerationPredictor, features  # noqa: E402

OUT = REPO / "reports" / "llm"
VARIANTS = {
    "thesis": {"target_mode": "direct", "hardware": "specs"},
    "thesis-nohw": {"target_mode": "direct", "hardware": "none"},
    "perfcast-specs": {"target_mode": "residual", "hardware": "specs"},
    "perfcast": {"target_mode": "residual", "hardware": "vendor"},
    "perfcast-nohw": {"target_mode": "residual", "hardware": "none"},
}
#: The thesis' Table 6.5 (XGBoost / GNN MAPE %, encoder models, stratified 5-fold CV).
THESIS = {"throughput / latency": (5.49, 17.60), "memory": (1.81, 9.45), "energy": (6.27, 53.18)}


def mape(y, p) -> float:
    y, p = np.asarray(y, float), np.asarray(p, float)
    return float(np.mean(np.abs(p - y) / y) * 100)


def folds(df: pd.DataFrame, split: str, seed: int = 0):
    """(name, test mask) per fold."""
    if split == "cv5":  # stratified by hardware × engine, as the thesis stratifies
        rng = np.random.default_rng(seed)
        fold = np.empty(len(df), int)
        for _, idx in df.groupby(["device", "framework"]).indices.items():
            idx = rng.permutation(idx)
            fold[idx] = np.arange(len(idx)) % 5
        for k in range(5):
            yield f"fold {k}", fold == k
    elif split == "lomo":
        for m in sorted(df["model"].unique()):
            yield m, (df["model"] == m).to_numpy()
    elif split == "loho":
        for d in sorted(df["device"].unique()):
            yield d, (df["device"] == d).to_numpy()


def run(df: pd.DataFrame, X: pd.DataFrame, target: str, split: str) -> pd.DataFrame:
    y = df[target].to_numpy(float)
    pred = {name: np.full(len(df), np.nan) for name in ["bound", *VARIANTS]}
    groups = []
    for name, test in folds(df, split):
        train = ~test
        if test.sum() == 0 or train.sum() < 20:
            continue
        groups.append((name, test))
        if target != "power_per_device_w":
            pred["bound"][test] = X["bound_s"].to_numpy()[test]
        for v, params in VARIANTS.items():
            m = LLMGenerationPredictor(target=target, **params).fit(X[train], y[train])
            pred[v][test] = m.predict(X[test])
    rows = []
    for name, test in groups:
        rows.append({"group": name, "n": int(test.sum()),
                     **{k: mape(y[test], p[test]) for k, p in pred.items()
                        if not np.isnan(p[test]).all()}})
    table = pd.DataFrame(rows)
    allrow = {"group": "all (pooled)", "n": int(np.isfinite(pred["perfcast"]).sum()),
              **{k: mape(y[np.isfinite(p)], p[np.isfinite(p)]) for k, p in pred.items()
                 if np.isfinite(p).any()}}
    table = pd.concat([table, pd.DataFrame([allrow])], ignore_index=True)
    table.attrs["pred"] = pred
    return table


def md(table: pd.DataFrame) -> str:
    cols = [c for c in table.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in table.iterrows():
        lines.append("| " + " | ".join(f"{r[c]:.1f}" if isinstance(r[c], float) else str(r[c])
                                       for c in cols) + " |")
    return "\n".join(lines)


def main() -> None:
    t0 = time.time()
    OUT.mkdir(parents=True, exist_ok=True)
    lib = load_llm_bench()
    mle = load_mlenergy()
    print("features …", file=sys.stderr, flush=True)
    Xl = features(lib, "latency_s")
    Xm = features(mle, "tpot_s")
    sections = []
    summary = {}
    for split, title in (("cv5", "stratified 5-fold CV (hardware × engine strata)"),
                         ("lomo", "leave-one-model-out"), ("loho", "leave-one-hardware-out")):
        print(split, file=sys.stderr, flush=True)
        lat = run(lib, Xl, "latency_s", split)
        tpot = run(mle, Xm, "tpot_s", split)
        powr = run(mle, Xm, "power_per_device_w", split)
        # energy per output token: power × n × TPOT / running batch, each out of fold
        e_true = mle["energy_per_token_j"].to_numpy()
        e_rows = {}
        for v in VARIANTS:
            p = powr.attrs["pred"][v] * mle["n_devices"].to_numpy() \
                * tpot.attrs["pred"][v] / mle["batch_size"].to_numpy()
            ok = np.isfinite(p)
            e_rows[v] = mape(e_true[ok], p[ok])
        tdp_e = Xm["tdp_w"].to_numpy() * mle["n_devices"].to_numpy() * mle["tpot_s"].to_numpy() \
            / mle["batch_size"].to_numpy()
        e_rows["TDP × measured TPOT"] = mape(e_true, tdp_e)
        summary[split] = {"latency": lat.iloc[-1].to_dict(), "tpot": tpot.iloc[-1].to_dict(),
                          "power": powr.iloc[-1].to_dict(), "energy_per_token": e_rows}
        sections += [f"## {title}", "",
                     f"### Batch latency, LLM-Inference-Bench ({len(lib):,} configurations)", "",
                     md(lat), "",
                     f"### Time per output token, ML.ENERGY ({len(mle):,} configurations)", "",
                     md(tpot), "",
                     "### Average power per GPU while serving, ML.ENERGY", "", md(powr), "",
                     "### Energy per output token (J), ML.ENERGY, pooled MAPE %", "",
                     "| " + " | ".join(e_rows) + " |", "|" + "---|" * len(e_rows),
                     "| " + " | ".join(f"{v:.1f}" for v in e_rows.values()) + " |", ""]
    head = [
        "# LLM generation: latency, time per output token, power and energy (issue #14)", "",
        f"`.venv/bin/python benchmarks/llm_report.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.time() - t0:.0f} s). MAPE %, every prediction out of fold.", "",
        "**Data** (`perfcast.datasets.llm`; drops with reasons below): LLM-Inference-Bench "
        "batch latency (its throughput is B·(I+O)/latency exactly — derived, so latency is the "
        "label; llama.cpp rows are one sequence), ML.ENERGY v2 vLLM serving on A100-40GB / H100 "
        "(TPOT, energy per request; per-GPU power = energy/request × requests/s ÷ GPUs).", "",
        "**Predictors**: `bound` = the arithmetic lower bound alone (weights + KV cache streamed "
        "per decode step, FLOPs at peak; KV-capacity waves); `thesis` = XGBoost on log(target) "
        "from Table 6.3-style features + hardware; `perfcast` = bound × learned factor ≥ 1 "
        "(XGBoost on log(target / bound); hardware as vendor + ridge point FLOP/byte, "
        "`-specs` with the registry's numbers instead); `-nohw` = without hardware features "
        "(Table 6.6).", "",
        "**The thesis' own numbers** (Table 6.5, encoder models' forward throughput, stratified "
        "5-fold CV; not the same data): " + "; ".join(
            f"{k} XGBoost {a} % / GNN {b} %" for k, (a, b) in THESIS.items()) + ".", "",
        "## Summary (pooled MAPE %)", "",
        "| split | latency: bound | thesis | perfcast | TPOT: thesis | perfcast | "
        "power: thesis | perfcast | energy/token: thesis | perfcast |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for split, s in summary.items():
        head.append(f"| {split} | {s['latency'].get('bound', float('nan')):.1f} | "
                    f"{s['latency']['thesis']:.1f} | {s['latency']['perfcast']:.1f} | "
                    f"{s['tpot']['thesis']:.1f} | {s['tpot']['perfcast']:.1f} | "
                    f"{s['power']['thesis']:.1f} | {s['power']['perfcast']:.1f} | "
                    f"{s['energy_per_token']['thesis']:.1f} | "
                    f"{s['energy_per_token']['perfcast']:.1f} |")
    reports = ["## What was dropped", "", lib.attrs["report"].to_markdown(),
               mle.attrs["report"].to_markdown()]
    text = "\n".join(head + [""] + sections + reports) + "\n"
    (OUT / "README.md").write_text(text)
    print(OUT / "README.md")


if __name__ == "__main__":
    main()
