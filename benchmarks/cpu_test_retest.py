"""Test-retest of the project's CPU dataset: re-measure a sample of configurations and compare.

Picks N configurations measured OK in ``datasets/cpu/measurements.db`` (repeat 0; a fixed seed),
measures them again as ``repeat = 1`` (resumable like any collect), and prints the relative
difference of the medians |t1 − t0| / t0 (time) and of the peak tensor memory. That spread is the
floor any predictor can reach on this data. Writes ``reports/cpu_test_retest.md``.

    python benchmarks/cpu_test_retest.py [--n 50] [--db datasets/cpu/measurements.db] [--cpus 1]
        [--spec datasets/cpu/spec-everyday-t1.yaml --report reports/cpu/test_retest.md]

``--spec``: sample only the configurations of that sweep file and measure them again with its
settings (warm-up, iterations, time budget).
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import replace
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="datasets/cpu/measurements.db")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--cpus", default="1")
    ap.add_argument("--report", type=Path, default=Path("reports/cpu_test_retest.md"))
    ap.add_argument("--spec", type=Path, default=None)
    a = ap.parse_args()

    import numpy as np

    from perfcast.profiler.collect import CollectSettings, collect
    from perfcast.store import MeasureConfig, MeasurementStore

    store = MeasurementStore(a.db)
    df = store.to_dataframe()
    first = df[(df.status == "ok") & (df["repeat"] == 0)].sort_values("id")
    settings = CollectSettings(cpus=[int(c) for c in a.cpus.split(",")])
    if a.spec:
        from perfcast.profiler.collect import load_spec

        sweeps, opts = load_spec(a.spec)
        keys = {c.key() for s in sweeps for c in s.configs(opts.get("device", "cpu"),
                                                           opts.get("threads"))}
        first = first[first["config_key"].isin(keys)]
        settings = CollectSettings(cpus=settings.cpus, warmup=int(opts.get("warmup", 5)),
                                   iters=int(opts.get("iters", 30)),
                                   max_seconds=opts.get("max_seconds"))
    if len(first) < a.n:
        print(f"only {len(first)} measured configurations in {a.db}", file=sys.stderr)
        return 2
    rows = first.iloc[sorted(random.Random(a.seed).sample(range(len(first)), a.n))]
    fields = ["model", "batch_size", "input_size", "seq_len", "mode", "precision", "optimizer",
              "device", "threads"]

    def cfg_of(r) -> MeasureConfig:
        d = {k: (None if (isinstance(r[k], float) and np.isnan(r[k])) else r[k]) for k in fields}
        d["batch_size"] = int(d["batch_size"])
        d["threads"] = int(d["threads"]) if d["threads"] is not None else None
        d["seq_len"] = int(d["seq_len"]) if d["seq_len"] is not None else None
        d["optimizer"] = d["optimizer"] or "sgd-momentum"
        return MeasureConfig.from_dict(d)

    configs = [replace(cfg_of(r), repeat=1) for _, r in rows.iterrows()]
    counts = collect(store, configs, settings,
                     progress=lambda i, n, c, m: print(f"[{i}/{n}] {c.model} b{c.batch_size} "
                                                       f"{c.mode}", flush=True) if m else None)
    print(counts)
    df = store.to_dataframe()
    key = fields
    a0 = df[(df["repeat"] == 0) & (df.status == "ok")]
    a1 = df[(df["repeat"] == 1) & (df.status == "ok")]
    m = a0.merge(a1, on=key, suffixes=("_0", "_1"))
    m = m[m["config_key_0"].isin(set(rows["config_key"]))]  # this sample only
    dt = (m.time_ms_median_1 - m.time_ms_median_0).abs() / m.time_ms_median_0
    dm = (m.peak_tensor_mb_1 - m.peak_tensor_mb_0).abs() / m.peak_tensor_mb_0
    gap_h = None
    try:
        import pandas as pd

        gap_h = (pd.to_datetime(m.created_at_1) - pd.to_datetime(m.created_at_0)).dt.total_seconds().median() / 3600
    except Exception:  # noqa: BLE001
        pass
    lines = [
        "# Test-retest of the CPU dataset",
        "",
        f"Regenerate: `python benchmarks/cpu_test_retest.py --n {a.n}"
        + (f" --spec {a.spec} --report {a.report}" if a.spec else "") + f"` (seed {a.seed}).",
        "",
        f"{len(m)} configurations measured twice (repeat 0 and 1; median time between the two "
        f"measurements {gap_h:.1f} h)." if gap_h is not None else f"{len(m)} configurations measured twice.",
        "",
        "| quantity | median | mean | p90 | max |",
        "|---|---|---|---|---|",
        f"| time: abs(t1 − t0) / t0 | {100 * dt.median():.2f} % | {100 * dt.mean():.2f} % | "
        f"{100 * dt.quantile(0.9):.2f} % | {100 * dt.max():.2f} % |",
        f"| peak tensor memory: abs(m1 − m0) / m0 | {100 * dm.median():.2f} % | {100 * dm.mean():.2f} % | "
        f"{100 * dm.quantile(0.9):.2f} % | {100 * dm.max():.2f} % |",
        "",
        "The time spread is the floor any time predictor can reach on this data (MAPE against a",
        "second measurement of the same configuration); memory is deterministic.",
        "",
        "| model | batch | input | mode | t0 ms | t1 ms | rel. diff |",
        "|---|---|---|---|---|---|---|",
    ]
    for (_, r), d in zip(m.iterrows(), dt):
        lines.append(f"| {r.model} | {r.batch_size} | {r.input_size} | {r['mode']} | "
                     f"{r.time_ms_median_0:.2f} | {r.time_ms_median_1:.2f} | {100 * d:.1f} % |")
    a.report.parent.mkdir(parents=True, exist_ok=True)
    a.report.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
