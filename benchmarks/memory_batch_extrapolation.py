"""Does the A100 training-memory predictor carry over to batches larger than any it learned?

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/memory_batch_extrapolation.py \
        [--json reports/decisions/memory_batch_extrapolation.json]

Task e (GPUMemNet, A100-40GB training memory; unflagged-OOM records dropped as in the
evaluation). Split by batch, not by model: train on every record with batch ≤ B, test on the
records with batch > B (same models, bigger batches) — the question `perfcast fit` asks. Compares
xgboost as shipped (log target) with ``memory_baseline=True`` (boosting starts from log(simulated
tensors + offset), the trees learn the ratio), and the simulation + offset alone. Prints MAPE and
the signed median error (negative = under-prediction = an OOM risk for ``fit``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

# the checkout's data (see perfcast.paths) unless the environment names other folders
_REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(_REPO.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(_REPO / "datasets"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--max-train-batch", type=int, nargs="*", default=[32, 64])
    args = ap.parse_args()

    from perfcast.evaluation.tasks import get_task, simulated_mb
    from perfcast.predictors import create_predictor

    t0 = time.perf_counter()
    fs = get_task("e").load(build_missing=False).fs
    batch = fs.rows["batch_size"].to_numpy()
    y = fs.target("memory_mb")
    sim = simulated_mb(fs)
    out: dict = {"records": int(len(fs)), "batches": sorted(map(int, set(batch.tolist())))}
    print(f"task e: {len(fs):,} records, batches {out['batches']}")
    for cut in args.max_train_batch:
        tr, te = np.flatnonzero(batch <= cut), np.flatnonzero(batch > cut)
        train = fs.subset(tr)
        res = {"train": int(len(tr)), "test": int(len(te))}
        preds = {}
        for name, params in (("xgboost", {}), ("xgboost+memory_baseline",
                                              {"memory_baseline": True})):
            p = create_predictor("xgboost", **params)
            p.fit(train, targets=["memory_mb"])
            preds[name] = p.predict(fs.subset(te))[:, 0]
            if params:
                res["offset_mb"] = round(p.offset_mb_, 1)
        preds["simulation+offset"] = sim[te] + res["offset_mb"]
        for name, pr in preds.items():
            rel = (pr - y[te]) / y[te]
            res[name] = {"mape": round(float(np.mean(np.abs(rel)) * 100), 2),
                         "median_signed_pct": round(float(np.median(rel) * 100), 2),
                         "under_10pct_share": round(float(np.mean(rel < -0.10) * 100), 1)}
            print(f"train batch ≤ {cut} ({len(tr):,}) → test batch > {cut} ({len(te):,}): "
                  f"{name:26s} MAPE {res[name]['mape']:6.2f} %, median signed "
                  f"{res[name]['median_signed_pct']:+6.2f} %, under-predicted by >10 %: "
                  f"{res[name]['under_10pct_share']:.1f} % of records")
        out[f"batch<={cut}"] = res
    out["seconds"] = round(time.perf_counter() - t0, 1)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
