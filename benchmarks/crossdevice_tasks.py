"""One base for every GPU: on a GPU with labels, the physics base (``crossdevice`` fitted on the
GPU's own records) with a per-device residual, against the per-device learners, on unseen
families → ``reports/crossdevice/tasks.md``.

    .venv/bin/python benchmarks/crossdevice_tasks.py [--tasks a,b] [--workers 2]

For tasks (a) RTX 3090 training time and (b) RTX 4090 inference time of ``reports/eval`` (same
unseen-family folds, seed 1337, on the models with a kernel plan), the per-device learners —
XGBoost on the static features, DIPPM — beside XGBoost with the record's operator-level
composition added as features (``xgboost.operator_features``), the physics base alone
(``crossdevice`` fitted on the training folds of this GPU) and the physics base with a
per-device residual (``crossdevice(residual="xgboost")``: an XGBoost on the static features
learns the log ratio of the measured time to the base). Tasks (c) are CPUs: the
GPU operator model does not apply there; this machine's CPU has its own operator-level
predictor (``kernelsum``, ``reports/cpu/``), and the i9 / i7 records are torch.compile'd runs.

Building the kernel plans of every model of tasks a and b (forward graphs at batch 2 and 3) is
the long part the first time (graph cache).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(ROOT.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(ROOT / "datasets"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from crossdevice_report import md_table  # noqa: E402

VARIANTS = {"xgboost (static features)": ("xgboost", {}),
            "dippm": ("dippm", {}),
            "xgboost + operator features": ("xgboost", {"operator_features": True}),
            "physics base (crossdevice on this GPU)": ("crossdevice", {}),
            "physics base + per-device residual": ("crossdevice", {"residual": "xgboost"})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="a,b")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--models-per-family", type=int, default=None,
                    help="at most N models per (source, family), the first by SHA-1 of the name "
                         "(as task gpu does); default: every record of the task")
    ap.add_argument("--out", default=str(ROOT / "reports" / "crossdevice" / "tasks.md"))
    args = ap.parse_args()
    from perfcast.evaluation import evaluate, get_task

    t0 = time.perf_counter()
    rows = []
    for name in args.tasks.split(","):
        task = dataclasses.replace(get_task(name), plans=True,
                                   max_models_per_family=args.models_per_family)
        data = task.load(workers=args.workers)
        fs = data.fs
        keep = np.flatnonzero([fs.plans[g] is not None for g in fs.graph_index])
        print(f"task {name}: {len(fs)} records, {len(keep)} with a kernel plan "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        fs = fs.subset(keep)
        for label, (kind, params) in VARIANTS.items():
            res = evaluate(fs, "unseen-family", [(kind, params)], task_name=name,
                           targets=list(task.targets), plots=False, workers=args.workers)
            for o in res.overall():
                rows.append({"task": f"({name}) {task.title}", "records": len(fs),
                             "predictor": label, "MAPE %": o.get("mape"),
                             "Kendall τ": o.get("kendall"), "Acc(10%) %": o.get("acc10")})
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    lines = ["# Same-device unseen families, with and without operator-level features", "",
             f"`.venv/bin/python benchmarks/crossdevice_tasks.py --tasks {args.tasks}"
             + (f" --models-per-family {args.models_per_family}" if args.models_per_family
                else "") + "` "
             f"({time.strftime('%Y-%m-%d')}, {time.perf_counter() - t0:.0f} s).", "",
             " ".join((__doc__ or "").split("\n\n")[2:4]).replace("\n", " "), "",
             md_table(df, digits=2), "",
             "Unseen-family folds of `perfcast.evaluation` (k = 5, seed 1337) on the records "
             "kept; every predictor sees exactly the same folds."]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
