"""Prediction speed: per model with a cached graph (perfcast.predict) and batch throughput
(FeatureSet of many records through one shipped predictor).

    .venv/bin/python benchmarks/bench_predict.py [--json reports/bench_predict.json]

Targets (issue #4): < 20 ms per model once the graph is cached; ≥ 1,000 graphs/s in batch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()

    import perfcast
    from perfcast.predictors import shipped
    from perfcast.predictors.data import feature_set

    out: dict = {}
    cases = [("timm:resnet50", "rtx4090", "infer", "amp", 256),
             ("timm:resnet50", "rtx3090", "train", "amp", 64),
             ("timm:vit_base_patch16_224", "i9-10940x", "infer", "fp32", 1)]
    for model, dev, mode, prec, bs in cases:
        perfcast.predict(model, device=dev, mode=mode, precision=prec, batch_size=bs)  # warm
        ts = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            perfcast.predict(model, device=dev, mode=mode, precision=prec, batch_size=bs)
            ts.append((time.perf_counter() - t) * 1e3)
        key = f"{model} {dev} {mode} {prec} b{bs}"
        out[key] = {"median_ms": round(statistics.median(ts), 2), "max_ms": round(max(ts), 2)}
        print(f"predict {key}: median {statistics.median(ts):.2f} ms (max {max(ts):.2f} ms)")

    # batch: every RTX 4090 inference record of the public data through the shipped model
    from perfcast import datasets as D

    df = D.load_all()
    df = df[(df["device"] == "rtx4090") & (df["mode"] == "infer")]
    fs = feature_set(df, build_missing=False)
    for target in ("time_ms",):
        entry = shipped.find("rtx4090", "infer", "amp", target)
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
