"""Operator-level labels of this CPU: time every distinct node of the CPU dataset's models.

For each (model, input) of ``datasets/cpu/measurements.db`` (``--only-everyday``: the 224 px /
token wave), the nodes of its kernel plan at the batch sizes ``--batches`` are timed with
:func:`perfcast.profiler.opbench.time_node` (forward and, with ``--backward``, the gradient) at
``--threads`` torch threads, in this process pinned to ``--cpus``. Distinct nodes (op, shapes,
attrs) are timed once; the CSV is appended as it goes (resumable: a re-run skips what is in it).
First, unless it exists, the machine profile (GEMM GFLOP/s and streaming GB/s at 1..cores
threads, :func:`perfcast.profiler.micro.measure_machine`) is written to ``machine.json`` beside
the CSV: the physics the CPU predictor is priced with.

    python benchmarks/cpu_opbench.py [--out datasets/cpu/ops-t1.csv] [--threads 1] [--cpus 1]
        [--batches 1,8] [--backward] [--only-everyday] [--max-seconds 0.02] [--limit N]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("PERFCAST_DATA", str(HERE.parent.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(HERE.parent / "datasets"))

FIELDS = ["sig", "op", "group", "in_shapes", "out_shapes", "attrs", "flops", "threads",
          "fwd_ms", "bwd_ms", "model"]


def node_sig(op, ins, outs, attrs) -> str:
    return json.dumps([op, [list(s) for s in ins], [list(s) for s in outs],
                       {k: attrs[k] for k in sorted(attrs)}], separators=(",", ":"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("datasets/cpu/ops-t1.csv"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cpus", default=None)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--only-everyday", action="store_true")
    ap.add_argument("--max-seconds", type=float, default=0.02)
    ap.add_argument("--limit", type=int, default=None)
    a = ap.parse_args()

    import numpy as np
    import torch

    from perfcast.datasets import load_local_cpu
    from perfcast.labeled import feature_set
    from perfcast.profiler.opbench import group_of, time_node

    prof_path = a.out.parent / "machine.json"
    if not prof_path.exists():
        from perfcast.profiler.micro import measure_machine

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        prof = measure_machine(list(range(1, max(cores, a.threads) + 1)), reps=9)
        prof.save(prof_path)
        print(f"machine profile → {prof_path}: {prof.gflops} GFLOP/s, {prof.bandwidth_gbs} GB/s",
              flush=True)
    if a.cpus and hasattr(os, "sched_setaffinity"):  # the profile used every core; ops: pinned
        os.sched_setaffinity(0, {int(c) for c in a.cpus.split(",")})
    torch.set_num_threads(a.threads)
    df = load_local_cpu()
    df = df[np.isfinite(df["time_ms"])]
    if a.only_everyday:
        df = df[df["input_size"].isna()]
    df = df.drop_duplicates(["model", "input_size", "seq_len"]).reset_index(drop=True)
    fs = feature_set(df, plans=True, workers=1)
    done = set()
    if a.out.exists():
        with a.out.open() as f:
            done = {(r["sig"], int(r["threads"])) for r in csv.DictReader(f)}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    new_file = not a.out.exists()
    batches = [int(b) for b in a.batches.split(",")]
    todo = []
    seen = set()
    for i, rec in enumerate(fs.rows.to_dict("records")):
        plan = fs.plans[fs.graph_index[i]]
        if plan is None:
            continue
        for b in batches:
            for op, ins, outs, attrs, flops, _name in plan.nodes_at(b):
                if group_of(op) is None:
                    continue
                sig = node_sig(op, ins, outs, attrs)
                if sig in seen or (sig, a.threads) in done:
                    continue
                seen.add(sig)
                todo.append((sig, op, ins, outs, attrs, flops, rec["model"]))
    if a.limit:
        todo = todo[:a.limit]
    print(f"{len(todo)} nodes to time ({len(done)} already in {a.out})", flush=True)
    t0 = time.time()
    with a.out.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new_file:
            w.writeheader()
        for j, (sig, op, ins, outs, attrs, flops, model) in enumerate(todo):
            r = time_node(op, ins, outs, attrs, backward=a.backward, max_seconds=a.max_seconds)
            if r is None:
                continue
            w.writerow({"sig": sig, "op": op, "group": group_of(op),
                        "in_shapes": json.dumps([list(s) for s in ins]),
                        "out_shapes": json.dumps([list(s) for s in outs]),
                        "attrs": json.dumps(attrs), "flops": flops, "threads": a.threads,
                        "fwd_ms": r["fwd_ms"], "bwd_ms": r.get("bwd_ms", ""), "model": model})
            if j % 200 == 0:
                f.flush()
                print(f"[{j}/{len(todo)}] {time.time() - t0:.0f} s", flush=True)
    print(f"done: {len(todo)} nodes in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
