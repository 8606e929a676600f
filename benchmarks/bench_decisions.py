"""Speed and consistency of the decision commands, each a new process with EMPTY caches.

    .venv/bin/python benchmarks/bench_decisions.py [--repeat 3] [--json reports/decisions/bench_decisions.json]

Target (issue #5): `perfcast fit timm:resnet50 --device a100-40gb --mode train` under 30 s, and
its answer consistent with `perfcast predict` at that batch and the next one up (checked here in
the same cache, printed). Also times `perfcast mig` (DIPPM Table 5's densenet121 b32) and
`perfcast rank --devices all`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = str(Path(sys.executable).with_name("perfcast"))
FIT = ["fit", "timm:resnet50", "--device", "a100-40gb", "--mode", "train", "--json"]
CASES = {
    "fit resnet50 a100-40gb train": FIT,
    "mig densenet121 b32 a100-40gb": ["mig", "timm:densenet121", "--device", "a100-40gb",
                                      "--batch-size", "32", "--json"],
    "rank resnet50 all devices b64 train": ["rank", "timm:resnet50", "--devices", "all",
                                            "--batch-size", "64", "--mode", "train", "--json"],
}


def _run(args: list[str], env: dict) -> tuple[float, dict]:
    t = time.perf_counter()
    p = subprocess.run([CLI, *args], env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"perfcast {' '.join(args)} failed:\n{p.stderr.strip()}")
    return dt, json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    res: dict = {}
    for name, cmd in CASES.items():
        times, last = [], None
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                env = {k: v for k, v in os.environ.items()
                       if k not in ("PERFCAST_CACHE_DIR", "PERFCAST_GRAPH_STORE")}
                env["XDG_CACHE_HOME"] = tmp
                dt, last = _run(cmd, env)
                times.append(dt)
                if cmd is FIT:  # consistency with predict, same cache
                    b = last["max_batch_size"]
                    cap, margin = last["capacity_mb"], last["margin"]
                    mem = [_run(["predict", "timm:resnet50", "--device", "a100-40gb", "--mode",
                                 "train", "--batch-size", str(x), "--json"], env)[1]["memory_mb"]
                           for x in (b, b + 1)]
                    ok = mem[0] * (1 + margin) <= cap < mem[1] * (1 + margin)
                    res["fit_consistency"] = {"max_batch_size": b, "predict_memory_mb": mem,
                                              "capacity_mb": cap, "margin": margin,
                                              "consistent": ok}
        res[name] = {"median_s": round(statistics.median(times), 2),
                     "max_s": round(max(times), 2), "times_s": [round(t, 2) for t in times]}
        summary = {"fit": lambda d: f"max_batch_size {d['max_batch_size']}",
                   "mig": lambda d: f"profile {d['profile']} ({d['memory_mb']:,.0f} MiB)",
                   "ran": lambda d: f"first {d['devices'][0]['device']}"}[name[:3]](last)
        print(f"perfcast {' '.join(cmd)}: median {statistics.median(times):.2f} s "
              f"(max {max(times):.2f} s) → {summary}")
    c = res["fit_consistency"]
    print(f"consistency: predict memory at {c['max_batch_size']} / {c['max_batch_size'] + 1} = "
          f"{c['predict_memory_mb'][0]:,.0f} / {c['predict_memory_mb'][1]:,.0f} MiB, × "
          f"{1 + c['margin']:.2f} vs {c['capacity_mb']:,.0f} MiB → "
          f"{'consistent' if c['consistent'] else 'INCONSISTENT'}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
