"""Choose dnnperf's settings on validation records only (issue #19) → reports/dnnperf/selection.json.

DNNPerf tuned its hyper-parameters "on the validation dataset by grid search" (§IV-C). This
script does that on the **validation part** of the family-mc fold of seed 1337 (15 % of the
training models, carved out of the training part; the fold's test records are never loaded into
a fit or a score here): each variant fits on the fold's training records, and the validation
loss (MSE of standardised log targets, the training loss) and the validation MAPE of its best
epoch are printed and saved. The variants are DNNPerf's two published settings — the paper's
TensorFlow setting (3 / 1 rounds, sum readout) and its PyTorch setting (§V-C: Batch
Normalization of the readout before the MLP, 2 rounds, learning rate 1e-3) — and perfcast's
constant-scaled sum readout; and the scale MinMax sees: perfcast's log1p magnitudes or the raw
values (DNNPerf scales the raw feature values).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/dnnperf_select.py --task a [--variants "NAME|NAME"]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "dnnperf" / "selection.json"
SEED = 1337
TARGET = {"a": "time_ms", "e": "memory_mb"}
#: name → dnnperf hyper-parameters (the rest are the predictor's defaults)
VARIANTS = {
    "scaled-sum (perfcast default before selection)": {"readout_norm": "scale", "rounds": "tf",
                                                       "lr": 2e-3},
    "paper TF rounds, BatchNorm readout": {"readout_norm": "batchnorm", "rounds": "tf",
                                           "lr": 2e-3},
    "paper PyTorch setting (BatchNorm, 2 rounds, lr 1e-3)": {"readout_norm": "batchnorm",
                                                             "rounds": 2, "lr": 1e-3},
    "PyTorch setting, MinMax of raw values (not of log1p)": {"readout_norm": "batchnorm",
                                                             "rounds": 2, "lr": 1e-3,
                                                             "node_scale": "raw"},
    "PyTorch setting, raw values and raw targets (the paper's scales)": {
        "readout_norm": "batchnorm", "rounds": 2, "lr": 1e-3, "node_scale": "raw",
        "target_space": "linear"},
}


def main(argv=None) -> int:
    import torch

    from perfcast.evaluation.splits import family_mc_split, model_groups, unseen_family_split
    from perfcast.evaluation.tasks import get_task
    from perfcast.predictors import create_predictor

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", choices=sorted(TARGET), default="a")
    ap.add_argument("--split", choices=("family-mc", "unseen-family"), default="family-mc",
                    help="family-mc: the seed-1337 fold; unseen-family: fold 0 of seed 1337 (its "
                         "validation part is whole families held out of training)")
    ap.add_argument("--variants", default=None, help="'|'-separated variant names (default all)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    task = get_task(a.task)
    fs = task.load(build_missing=False).fs
    groups = model_groups(fs.rows, fs.summaries, fs.graph_index)
    fold = (family_mc_split(groups, fs.families(), SEED) if a.split == "family-mc" else
            unseen_family_split(groups, fs.families(), SEED)[0])
    train, valid = fs.subset(fold.train), fs.subset(fold.valid)
    target = TARGET[a.task]
    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    want = a.variants.split("|") if a.variants else list(VARIANTS)
    for name in want:
        params = VARIANTS[name]
        t0 = time.perf_counter()
        m = create_predictor("dnnperf", **params).fit(train, valid, targets=[target])
        fit_s = time.perf_counter() - t0
        y = valid.target(target)
        yhat = m.predict(valid)[:, 0]
        ok = np.isfinite(y)
        mape = float(100 * np.mean(np.abs(yhat[ok] - y[ok]) / y[ok]))
        vl = [h["valid_loss"] for h in m.history_ if "valid_loss" in h]
        out = {"params": params, "valid_records": int(ok.sum()), "train_records": len(train),
               "best_valid_loss": float(min(vl)), "best_epoch": int(np.argmin(vl) + 1),
               "epochs_run": len(vl), "valid_mape": round(mape, 2), "fit_seconds": round(fit_s, 1)}
        part = (f"{a.task}/family-mc seed {SEED} valid" if a.split == "family-mc" else
                f"{a.task}/unseen-family seed {SEED} fold 0 valid")
        res.setdefault(part, {})[name] = out
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(res, indent=1) + "\n")
        print(f"{a.task} {a.split} {name}: valid loss {out['best_valid_loss']:.4f} (epoch "
              f"{out['best_epoch']}/{out['epochs_run']}), valid MAPE {mape:.2f} %, "
              f"{fit_s:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
