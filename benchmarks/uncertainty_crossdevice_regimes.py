"""Held-out predictions of the cross-device model (``crossdevice``, the shipped ``xgboost``
correction) in the four regimes a request meets, cached in
``reports/uncertainty/crossdevice_regimes.csv`` for ``benchmarks/uncertainty_regimes.py``:

* ``device-unseen/family-seen``: leave-one-GPU-out (each GPU predicted by a model fitted on the
  other GPUs; its families are mostly measured on them too — the column ``family_seen`` says
  per record);
* ``device-unseen/family-unseen``: leave-one-GPU-and-family-group-out (fitted on the other GPUs'
  records of the other family groups; 3 family groups of ``perfcast.evaluation.splits.family_folds``,
  seed 1337);
* ``device-seen/family-unseen``: leave-family-group-out on every GPU (5 family groups);
* ``device-seen/family-seen``: leave-model-out on every GPU (5 groups of models, by SHA-1 of the
  name) — another model of a measured family on a measured GPU.

    nice -n 10 .venv/bin/python benchmarks/uncertainty_crossdevice_regimes.py

Each record also gets the parts of its OOD score against the records its model was fitted on
(architecture distance, unseen op classes, batch octaves outside, GPU distance).
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(ROOT.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(ROOT / "datasets"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

OUT = ROOT / "reports" / "uncertainty" / "crossdevice_regimes.csv"
TRANSFORMER_FAMILIES = ("bert", "gpt2", "gpt3", "opt", "switch")
SEED = 1337


def main() -> int:
    from perfcast import uncertainty as U
    from perfcast.devices import get_device
    from perfcast.evaluation import get_task
    from perfcast.evaluation.splits import family_folds
    from perfcast.predictors import create_predictor
    from uncertainty_report import record_features

    t0 = time.time()
    fs = get_task("gpu").load(workers=1).fs
    keep = np.flatnonzero([fs.plans[g] is not None for g in fs.graph_index])
    fs = fs.subset(keep)
    rows = fs.rows.reset_index(drop=True)
    feats = record_features(fs)
    dev = rows["device"].astype(str).to_numpy()
    fam = rows["family"].astype(str).to_numpy()
    model = rows["model"].astype(str).to_numpy()
    y = fs.target("time_ms")
    vecs = {d: U.device_vector(get_device(d)) for d in sorted(set(dev))}
    print(f"task gpu: {len(fs)} records ({time.time() - t0:.0f} s)", flush=True)

    def ood_parts(tr, te):
        gis = sorted(set(feats["gi"].to_numpy()[tr].tolist()))
        ref = U.OODReference.fit(np.stack([feats.attrs["descs"][g] for g in gis]),
                                 np.stack([feats.attrs["ops"][g] for g in gis]),
                                 feats["batch"].to_numpy()[tr], feats["input"].to_numpy()[tr],
                                 {d: vecs[d] for d in set(dev[tr])})
        out = []
        for i in te:
            g = int(feats["gi"].iat[i])
            out.append(ref.parts(feats.attrs["descs"][g], feats.attrs["ops"][g],
                                 feats["batch"].iat[i], feats["input"].iat[i],
                                 (dev[i], vecs[dev[i]])))
        return out

    recs = []

    def run(split, fold, tr, te):
        if not len(te) or not len(tr):
            return
        t = time.time()
        p = create_predictor("crossdevice", correction="xgboost").fit(fs.subset(tr),
                                                                      targets=["time_ms"])
        pred = p.predict(fs.subset(te))[:, 0]
        parts = ood_parts(tr, te)
        trf, trd = set(fam[tr]), set(dev[tr])
        for j, i in enumerate(te):
            recs.append({"split": split, "fold": fold, "model": model[i], "family": fam[i],
                         "device": dev[i], "mode": rows["mode"].iat[i],
                         "precision": rows["precision"].iat[i],
                         "batch_size": int(rows["batch_size"].iat[i]),
                         "transformer": fam[i] in TRANSFORMER_FAMILIES,
                         "device_seen": dev[i] in trd, "family_seen": fam[i] in trf,
                         "actual": y[i], "predicted": pred[j], **parts[j]})
        print(f"  {split} {fold}: {len(te)} records ({time.time() - t:.0f} s)", flush=True)

    gpus = sorted(set(dev))
    for d in gpus:  # leave-one-GPU-out
        run("logo", d, np.flatnonzero(dev != d), np.flatnonzero(dev == d))
    f5 = family_folds(fam, 5, SEED)
    k5 = np.array([f5[f] for f in fam])
    for k in range(5):  # leave-family-group-out, every GPU
        run("lfo", f"families{k}", np.flatnonzero(k5 != k), np.flatnonzero(k5 == k))
    mk = np.array([int(hashlib.sha1(m.encode()).hexdigest(), 16) % 5 for m in model])
    for k in range(5):  # leave-model-out, every GPU
        run("lmo", f"models{k}", np.flatnonzero(mk != k), np.flatnonzero(mk == k))
    f3 = family_folds(fam, 3, SEED)
    k3 = np.array([f3[f] for f in fam])
    for d in gpus:  # leave-one-GPU-and-family-group-out
        for k in range(3):
            run("logo+lfo", f"{d}/families{k}", np.flatnonzero((dev != d) & (k3 != k)),
                np.flatnonzero((dev == d) & (k3 == k)))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(recs).to_csv(OUT, index=False, float_format="%.6g")
    print(f"wrote {OUT} ({len(recs)} records, {time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
