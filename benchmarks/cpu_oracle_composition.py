"""How far a perfect operator model would get: compose the *measured* times of a model's own
nodes (``datasets/cpu/ops-t1.csv``) and compare with the measured whole model.

For every 1-thread everyday configuration at batch 1 and 8 (the batches the operator benchmark timed),
sums the measured forward (+ backward for training) times of the model's nodes and prints
``measured whole model / Σ nodes``. A ratio far from 1, varying by architecture, is what an
operator-level CPU model cannot see (per-node dispatch, cold caches in a real forward pass).
Writes ``reports/cpu/oracle.md``.

    python benchmarks/cpu_oracle_composition.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PERFCAST_DATA", str(HERE.parent.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(HERE.parent / "datasets"))


def main() -> int:
    import numpy as np
    import pandas as pd
    from cpu_opbench import node_sig

    from perfcast.datasets import load_local_cpu
    from perfcast.labeled import feature_set
    from perfcast.ops import op_group

    ops = pd.read_csv(HERE.parent / "datasets" / "cpu" / "ops-t1.csv")
    fwd, bwd = dict(zip(ops.sig, ops.fwd_ms)), dict(zip(ops.sig, ops.bwd_ms))
    df = load_local_cpu()
    df = df[np.isfinite(df.time_ms) & df.input_size.isna() & df.batch_size.isin([1, 8])
            & (df.threads == 1)]  # the operator timings are 1-thread
    fs = feature_set(df.reset_index(drop=True), plans=True, workers=1)
    rows = []
    for i, r in enumerate(fs.rows.to_dict("records")):
        plan = fs.plans[fs.graph_index[i]]
        sf = sb = 0.0
        n = 0
        for op, ins, outs, attrs, _flops, _ in plan.nodes_at(int(r["batch_size"])):
            sig = node_sig(op, ins, outs, attrs)
            if op_group(op) is None or sig not in fwd:
                continue
            sf += fwd[sig]
            sb += bwd[sig] if np.isfinite(bwd[sig]) else 0.0
            n += 1
        y = float(fs.target("time_ms")[i])
        rows.append({"model": r["model"], "mode": r["mode"], "batch": int(r["batch_size"]),
                     "measured_ms": y, "sum_nodes_ms": sf + (sb if r["mode"] == "train" else 0),
                     "nodes": n})
    o = pd.DataFrame(rows)
    o["ratio"] = o.measured_ms / o.sum_nodes_ms
    stats = o.groupby(["mode", "batch"]).ratio.describe()
    lines = ["# Composing measured operator times (an oracle operator model)", "",
             "Regenerate: `python benchmarks/cpu_oracle_composition.py`.", "",
             "measured whole model ÷ Σ measured times of its nodes (forward; + backward for "
             "training), everyday configurations at batch 1 and 8:", "",
             "| mode | batch | n | mean | std | min | max |", "|---|---|---|---|---|---|---|"]
    for (mode, b), s in stats.iterrows():
        lines.append(f"| {mode} | {b} | {int(s['count'])} | {s['mean']:.2f} | {s['std']:.2f} | "
                     f"{s['min']:.2f} | {s['max']:.2f} |")
    lines += ["", "| model | mode | batch | measured ms | Σ nodes ms | ratio |",
              "|---|---|---|---|---|---|"]
    for r in o.itertuples():
        lines.append(f"| {r.model} | {r.mode} | {r.batch} | {r.measured_ms:.1f} | "
                     f"{r.sum_nodes_ms:.1f} | {r.ratio:.2f} |")
    # how far apart operators of one kind run on this CPU (why a roofline cannot price them)
    ops["gflops"] = ops["flops"] / (ops["fwd_ms"] * 1e6)
    k3 = ops["attrs"].str.contains('"kernel": \\[3, 3\\]', regex=True)
    lines += ["", "Forward GFLOP/s of the timed nodes (`datasets/cpu/ops-t1.csv`, p10–p90):", "",
              "| op | nodes | p10 | median | p90 |", "|---|---|---|---|---|"]
    for label, m in (("3×3 depthwise conv", (ops.op == "conv_depthwise") & k3),
                     ("3×3 dense conv", (ops.op == "conv2d") & k3),
                     ("1×1 conv", (ops.op == "conv2d") & ops["attrs"].str.contains(
                         '"kernel": \\[1, 1\\]', regex=True)),
                     ("linear", ops.op == "linear")):
        g = ops.loc[m & (ops.flops > 0), "gflops"]
        lines.append(f"| {label} | {len(g)} | {g.quantile(0.1):.1f} | {g.median():.1f} | "
                     f"{g.quantile(0.9):.1f} |")
    out = HERE.parent / "reports" / "cpu" / "oracle.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
