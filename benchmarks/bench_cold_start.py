"""Cold start of ``perfcast predict``: a new process with EMPTY perfcast caches (graph cache and
memory-simulation cache in a fresh ``XDG_CACHE_HOME``), i.e. what a user sees the first time.

    .venv/bin/python benchmarks/bench_cold_start.py [--repeat 5] [--json reports/bench_cold_start.json]

Target (issue #4): the two commands below answer in under 5 s. Also printed, from the same
moment: the bare import floor (``python -c "import torch, timm, pandas"``, machine load shows
there first) and the same command again in the same cache (graph and simulation cached).
The OS page cache is warm (dropping it needs root); the first repeat is reported but it is the
same as the others once the packages were read once.
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

ROOT = Path(__file__).resolve().parents[1]
CLI = [str(Path(sys.executable).with_name("perfcast"))]
COMMANDS = {
    "rtx4090 infer": ["predict", "timm:resnet50", "--device", "rtx4090", "--batch-size", "256",
                      "--precision", "amp", "--json"],
    "rtx3090 train": ["predict", "timm:resnet50", "--device", "rtx3090", "--mode", "train",
                      "--json"],
}


def _run(argv: list[str], env: dict) -> float:
    t = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr.strip()}")
    if argv[:1] == CLI:
        keys = json.loads(proc.stdout)
        assert keys["time_ms"] and keys["memory_mb"], keys
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    results: dict[str, dict] = {}
    floor: list[float] = []
    for name, cmd in COMMANDS.items():
        cold, warm = [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                env = {k: v for k, v in os.environ.items()
                       if k not in ("PERFCAST_CACHE_DIR", "PERFCAST_GRAPH_STORE")}
                env["XDG_CACHE_HOME"] = tmp
                floor.append(_run([sys.executable, "-c", "import torch, timm, pandas"], env))
                cold.append(_run(CLI + cmd, env))
                warm.append(_run(CLI + cmd, env))
        results[name] = {"cold_s": [round(x, 2) for x in cold],
                         "cold_median_s": round(statistics.median(cold), 2),
                         "cold_max_s": round(max(cold), 2),
                         "cached_median_s": round(statistics.median(warm), 2)}
        print(f"perfcast {' '.join(cmd)}\n  empty caches: median {statistics.median(cold):.2f} s "
              f"(min {min(cold):.2f}, max {max(cold):.2f}); graph+simulation cached: median "
              f"{statistics.median(warm):.2f} s")
    results["import_floor_s"] = {"median": round(statistics.median(floor), 2),
                                 "min": round(min(floor), 2), "max": round(max(floor), 2)}
    print(f"import floor (python -c 'import torch, timm, pandas'): median "
          f"{statistics.median(floor):.2f} s (min {min(floor):.2f}, max {max(floor):.2f})")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
