"""The CPU report (issue #21): unseen-family MAPE of the CPU time predictors on this machine's
dataset, per family and on the everyday 224 px / token wave, beside the test–retest noise and the
live check. Writes ``reports/cpu/README.md`` and ``reports/cpu/lofo.csv``.

    python benchmarks/cpu_report.py            # ≈ 10 min on 2 cores (graphs cached)

Predictors, each fitted once per held-out family (leave-one-family-out over every family of
``datasets/cpu/measurements.db``, inference and training together, 1 thread):

* ``xgboost`` — wave 1's shipped CPU model (static graph features, per-sample target).
* ``kernelsum (roofline)`` — kernels priced on this machine's measured roofline, non-negative
  per-class coefficients (no operator data).
* ``kernelsum (operators)`` — every node priced by the operator model fitted on
  ``datasets/cpu/ops-t1.csv`` (13.8 k distinct nodes of the dataset's models timed on this CPU),
  non-negative per-group coefficients; ``+ correction``: the bounded batch-free XGBoost factor.

The live check (``benchmarks/check_cpu_live.py --out reports/cpu/live.csv``) and the
test–retest (``benchmarks/cpu_test_retest.py --spec datasets/cpu/spec-everyday-t1.yaml --report
reports/cpu/test_retest.md``) are separate commands (they measure); their results are read here
when present.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
os.environ.setdefault("PERFCAST_DATA", str(ROOT.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(ROOT / "datasets"))

VARIANTS = {
    "xgboost": ("xgboost", {"per_sample_time": True}),
    "kernelsum (roofline)": ("kernelsum", {"machine": "local-dataset", "correction": "none"}),
    "kernelsum (operators)": ("kernelsum", {"machine": "local-dataset", "correction": "none",
                                            "ops": "local-dataset"}),
    "kernelsum (operators) + correction": ("kernelsum", {"machine": "local-dataset",
                                                         "correction": "xgboost",
                                                         "ops": "local-dataset"}),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "cpu")
    ap.add_argument("--reuse", action="store_true",
                    help="rewrite README.md from the existing lofo.csv (after a new live check "
                         "or retest) instead of refitting")
    a = ap.parse_args()

    import numpy as np
    import pandas as pd

    from perfcast.datasets import load_local_cpu
    from perfcast.labeled import feature_set
    from perfcast.predictors import create_predictor

    t0 = time.time()
    if a.reuse:
        out = pd.read_csv(a.out / "lofo.csv")
        errs = {k: out[k].to_numpy(float) for k in VARIANTS}
        return write(a, out, errs, None)
    df = load_local_cpu()
    df = df[np.isfinite(df["time_ms"])].reset_index(drop=True)
    fs = feature_set(df, plans=True, workers=2)
    rows = fs.rows
    fam = rows["family"].to_numpy()
    y = fs.target("time_ms")
    everyday = rows["input_size"].isna().to_numpy()  # wave 2: each model's default input
    errs = {}
    for name, (kind, params) in VARIANTS.items():
        base = create_predictor(kind, **params)
        if kind == "kernelsum" and params.get("ops"):
            base._op_model()  # the operator model depends on no whole-model label: fit once
        e = np.full(len(y), np.nan)
        for f in np.unique(fam):
            te, tr = np.flatnonzero(fam == f), np.flatnonzero(fam != f)
            p = copy.deepcopy(base).fit(fs.subset(tr), targets=["time_ms"])
            e[te] = p.predict(fs.subset(te))[:, 0] / y[te] - 1
        errs[name] = e
        print(f"{name:38s} unseen-family MAPE {100 * np.mean(np.abs(e)):5.1f} %  everyday "
              f"{100 * np.mean(np.abs(e[everyday])):5.1f} %", flush=True)
    out = rows[["model", "family", "mode", "batch_size", "input_size", "seq_len", "threads"]].copy()
    out["time_ms"] = y
    for k, v in errs.items():
        out[k] = v
    a.out.mkdir(parents=True, exist_ok=True)
    out.to_csv(a.out / "lofo.csv", index=False)
    return write(a, out, errs, time.time() - t0)


def write(a, rows, errs, seconds) -> int:
    import numpy as np
    import pandas as pd

    y = rows["time_ms"].to_numpy(float)
    fam = rows["family"].to_numpy()
    everyday = rows["input_size"].isna().to_numpy()

    def mape(mask, k):
        return 100 * float(np.mean(np.abs(errs[k][mask]))) if mask.any() else float("nan")

    names = list(VARIANTS)
    lines = ["# CPU predictions on this machine (issue #21)", "",
             "Regenerate: `python benchmarks/cpu_report.py` (the tables below"
             + (f"; {seconds:.0f} s" if seconds else "") + "; `--reuse` rewrites this page from "
             "`lofo.csv`); the live check: `python benchmarks/check_cpu_live.py "
             "--cpus 1 --out reports/cpu/live.csv`; the retest: `python benchmarks/"
             "cpu_test_retest.py --n 40 --spec datasets/cpu/spec-everyday-t1.yaml --report "
             "reports/cpu/test_retest.md`.", "",
             f"Data: `datasets/cpu/measurements.db`, {len(rows)} configurations of "
             f"{rows['model'].nunique()} models in {rows['family'].nunique()} families, 1 thread "
             f"(wave 1: 64–160 px, batch 1–8; wave 2, *everyday*: default input size — 224–299 px, "
             f"128–512 tokens — batch 1–32, {int(everyday.sum())} configurations). Leave one "
             f"family out: each family is predicted by a model fitted on the others.", "",
             "## Unseen-family MAPE", "",
             "| predictor | all | wave 1 (64–160 px) | everyday | everyday infer | everyday train |",
             "|---|---|---|---|---|---|"]
    infer = (rows["mode"] == "infer").to_numpy()
    for k in names:
        lines.append(f"| {k} | {mape(np.ones(len(y), bool), k):.1f} % | {mape(~everyday, k):.1f} % "
                     f"| {mape(everyday, k):.1f} % | {mape(everyday & infer, k):.1f} % | "
                     f"{mape(everyday & ~infer, k):.1f} % |")
    lines += ["", "Signed mean error (prediction / measurement − 1) on the everyday wave: "
              + ", ".join(f"{k} {100 * np.mean(errs[k][everyday]):+.1f} %" for k in names), "",
              "## Per family (unseen-family MAPE, all configurations)", "",
              "| family | configurations | " + " | ".join(names) + " |",
              "|---|---|" + "---|" * len(names)]
    for f in sorted(np.unique(fam)):
        m = fam == f
        lines.append(f"| {f} | {int(m.sum())} | " + " | ".join(f"{mape(m, k):.1f} %"
                                                              for k in names) + " |")
    retest = a.out / "test_retest.md"
    live = a.out / "live.csv"
    lines += ["", "## Noise floor and live check", ""]
    if retest.exists():
        lines.append(f"Test–retest of the everyday wave: see [test_retest.md](test_retest.md) — "
                     + next((ln.strip() for ln in retest.read_text().splitlines()
                             if ln.startswith("| time")), ""))
    else:
        lines.append("(no test–retest yet: run the retest command above)")
    if live.exists():
        lv = pd.read_csv(live)
        lines += ["", f"Live check ([live.csv](live.csv)): {len(lv)} configurations of "
                  f"{lv['model'].nunique()} models in no training set, measured and predicted in "
                  f"the same run: MAPE {100 * lv['ape'].mean():.1f} % (inference "
                  f"{100 * lv.loc[lv['mode'] == 'infer', 'ape'].mean():.1f} %, training "
                  f"{100 * lv.loc[lv['mode'] == 'train', 'ape'].mean():.1f} %), predictor "
                  f"{', '.join(sorted(lv['predictor'].astype(str).unique()))}.", "",
                  "| model | mode | batch | measured ms | predicted ms | error |",
                  "|---|---|---|---|---|---|"]
        for r in lv.itertuples():
            lines.append(f"| {r.model} | {r.mode} | {r.batch_size} | {r.measured_ms:.1f} | "
                         f"{r.predicted_ms:.1f} | {100 * (r.predicted_ms / r.measured_ms - 1):+.1f} % |")
    else:
        lines.append("(no live check yet: run the live-check command above)")
    (a.out / "README.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out / 'README.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
