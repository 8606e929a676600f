"""Threads as an input: the shipped CPU model (fitted on 1-thread measurements only) predicting
the 2-thread measurements of ``datasets/cpu/`` (``spec-everyday-t2.yaml``), beside the same
configurations at 1 thread. The 2-thread answer comes from the machine profile at 2 threads
(GEMM and bandwidth measured at 2 threads) — zero-shot in the thread count.
Writes ``reports/cpu/threads.md``.

    python benchmarks/check_cpu_threads.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("PERFCAST_DATA", str(HERE.parent.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(HERE.parent / "datasets"))


def main() -> int:
    import numpy as np
    import pandas as pd

    import perfcast
    from perfcast.datasets import load_local_cpu

    df = load_local_cpu()
    t2 = df[(df["threads"] == 2) & np.isfinite(df["time_ms"])]
    if t2.empty:
        print("no 2-thread measurements in datasets/cpu/ (perfcast collect --spec "
              "datasets/cpu/spec-everyday-t2.yaml …)", file=sys.stderr)
        return 2
    t1 = df[df["threads"] == 1]
    key = ["model", "mode", "batch_size", "seq_len"]
    rows = []
    for r in t2.itertuples():
        seq = None if pd.isna(r.seq_len) else int(r.seq_len)
        kw = {"batch_size": int(r.batch_size), "mode": r.mode, "precision": "fp32",
              "seq_len": seq}
        p2 = perfcast.predict(r.model, device="cpu", threads=2, **kw).time_ms
        p1 = perfcast.predict(r.model, device="cpu", threads=1, **kw).time_ms
        m1 = t1[(t1["model"] == r.model) & (t1["mode"] == r.mode)
                & (t1["batch_size"] == r.batch_size) & t1["input_size"].isna()
                & ((t1["seq_len"] == r.seq_len) | (t1["seq_len"].isna() & pd.isna(r.seq_len)))]
        rows.append({"model": r.model, "mode": r.mode, "batch_size": int(r.batch_size),
                     "seq_len": seq, "measured_t2_ms": r.time_ms, "predicted_t2_ms": p2,
                     "measured_t1_ms": float(m1["time_ms"].iloc[0]) if len(m1) else np.nan,
                     "predicted_t1_ms": p1})
    o = pd.DataFrame(rows)
    o["ape_t2"] = (o.predicted_t2_ms / o.measured_t2_ms - 1).abs()
    o["speedup_measured"] = o.measured_t1_ms / o.measured_t2_ms
    o["speedup_predicted"] = o.predicted_t1_ms / o.predicted_t2_ms
    lines = ["# Threads: 1-thread training data, 2-thread answers", "",
             "Regenerate: `python benchmarks/check_cpu_threads.py` (after `perfcast collect --spec "
             "datasets/cpu/spec-everyday-t2.yaml --db datasets/cpu/measurements.db`).", "",
             f"{len(o)} configurations measured with 2 threads; the shipped `cpu` model was fitted "
             f"on 1-thread measurements only. MAPE at 2 threads: **{100 * o.ape_t2.mean():.1f} %**. "
             f"Speed-up 1 → 2 threads: measured median {o.speedup_measured.median():.2f}×, "
             f"predicted median {o.speedup_predicted.median():.2f}×.", "",
             "| model | mode | batch | seq | measured t1 | measured t2 | predicted t2 | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in o.itertuples():
        lines.append(f"| {r.model} | {r.mode} | {r.batch_size} | {r.seq_len or ''} | "
                     f"{r.measured_t1_ms:.1f} | {r.measured_t2_ms:.1f} | {r.predicted_t2_ms:.1f} | "
                     f"{100 * (r.predicted_t2_ms / r.measured_t2_ms - 1):+.1f} % |")
    out = HERE.parent / "reports" / "cpu" / "threads.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:6]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
