"""Prediction speed: per model with a cached graph (perfcast.predict) and batch throughput
(FeatureSet of many records through one shipped predictor).

    .venv/bin/python benchmarks/bench_predict.py [--json reports/bench_predict.json] [--predictor NAME]

``--predictor`` times the shipped models of one kind (e.g. ``trappm``) on the cases it covers.

Targets (issue #4): < 20 ms per model once the graph is cached; ≥ 1,000 graphs/s in batch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--predictor", default=None, help="time the shipped models of this kind")
    args = ap.parse_args()

    import perfcast
    from perfcast import shipped
    from perfcast.labeled.frames import feature_set

    out: dict = {}
    cases = [("timm:resnet50", "rtx4090", "infer", "amp", 256, "time_ms"),
             ("timm:resnet50", "rtx3090", "train", "amp", 64, "time_ms"),
             ("timm:vit_base_patch16_224", "i9-10940x", "infer", "fp32", 1, "time_ms"),
             ("timm:resnet50", "a100-40gb", "train", "fp32", 32, "memory_mb")]
    kind = args.predictor
    for model, dev, mode, prec, bs, target in cases:
        if shipped.find(dev, mode, prec, target, predictor=kind) is None:
            continue  # no shipped model of that kind here (the last case is for --predictor)
        if kind is None and target == "memory_mb":
            continue  # keep the default run's cases as recorded in BENCHMARKS.md
        kw = dict(device=dev, mode=mode, precision=prec, batch_size=bs, predictor=kind)
        perfcast.predict(model, **kw)  # warm
        ts = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            perfcast.predict(model, **kw)
            ts.append((time.perf_counter() - t) * 1e3)
        key = f"{model} {dev} {mode} {prec} b{bs}" + (f" ({kind})" if kind else "")
        out[key] = {"median_ms": round(statistics.median(ts), 2), "max_ms": round(max(ts), 2)}
        print(f"predict {key}: median {statistics.median(ts):.2f} ms (max {max(ts):.2f} ms)")

    # batch: every RTX 4090 inference record of the public data through the shipped model
    from perfcast import datasets as D

    df = D.load_all()
    df = df[(df["device"] == "rtx4090") & (df["mode"] == "infer")]
    fs = feature_set(df, build_missing=False)
    for target in ("time_ms",):
        entry = shipped.find("rtx4090", "infer", "amp", target, predictor=kind)
        if entry is None:
            continue
        pred = shipped.load_entry(entry)
        pred.predict(fs.subset(np.arange(min(64, len(fs)))))
        t = time.perf_counter()
        pred.predict(fs)
        dt = time.perf_counter() - t
        n_graphs = len(set(fs.graph_index.tolist()))
        out[f"batch {pred.name} {target}"] = {
            "records": len(fs), "graphs": n_graphs, "seconds": round(dt, 3),
            "records_per_s": round(len(fs) / dt, 1), "graphs_per_s": round(n_graphs / dt, 1)}
        print(f"batch {pred.name}: {len(fs)} records / {n_graphs} graphs in {dt:.2f} s → "
              f"{len(fs) / dt:.0f} records/s, {n_graphs / dt:.0f} graphs/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
