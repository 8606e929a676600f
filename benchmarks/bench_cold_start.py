"""Cold start of ``perfcast predict``.

    .venv/bin/python benchmarks/bench_cold_start.py [--repeat 5] [--json reports/bench_cold_start.json]
    .venv/bin/python benchmarks/bench_cold_start.py --kinds [--repeat 3] [--json reports/bench_cold_start_kinds.json]

Default: a new process with EMPTY perfcast caches (graph cache and memory-simulation cache in a
fresh ``XDG_CACHE_HOME``), i.e. what a user sees the first time. Target (issue #4): the two
commands below answer in under 5 s. Also printed, from the same moment: the bare import floor
(``python -c "import torch, timm, pandas"``, machine load shows there first) and the same
command again in the same cache (graph and simulation cached).

``--kinds`` (issue #31): a *cached* prediction — graph and simulation already in the cache,
the process new — for every shipped predictor kind (one command each, :data:`KINDS`): the
median wall time of ``--repeat`` runs after one priming run, the import time ``python -X
importtime`` reports for the same command, and which heavy packages it loaded (torch,
torch_geometric, transformers, XGBoost, scikit-learn, pandas). Goal: < 1.5 s.

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
        assert keys["time_ms"] and keys["memory_mb"], keys  # (generate: per-device memory)
    return dt


#: One command per shipped predictor kind (``--kinds``): the kind that answers ``time_ms``.
KINDS = {
    "dippm": ["predict", "timm:resnet50", "--device", "rtx4090", "--batch-size", "256",
              "--precision", "amp", "--json"],
    "xgboost": ["predict", "timm:resnet50", "--device", "rtx3090", "--mode", "train", "--json"],
    "trappm": ["predict", "timm:resnet50", "--device", "rtx3090", "--mode", "train",
               "--predictor", "trappm", "--json"],
    "dnnperf": ["predict", "timm:resnet50", "--device", "rtx3090", "--mode", "train",
                "--predictor", "dnnperf", "--json"],
    "gnnllm": ["predict", "timm:resnet50", "--device", "rtx3090", "--mode", "train",
               "--predictor", "gnnllm", "--json"],
    "nnlqp": ["predict", "timm:resnet50", "--device", "i9-10940x", "--predictor", "nnlqp",
              "--json"],
    "mlp": ["predict", "timm:resnet50", "--device", "i7-12700h", "--predictor", "mlp", "--json"],
    "kernelsum": ["predict", "timm:resnet50", "--device", "cpu", "--json"],
    "crossdevice": ["predict", "timm:resnet50", "--device", "h100-sxm", "--json"],
    "llm (generate)": ["predict", "hf:meta-llama/Llama-2-7b-hf", "--device", "h100-sxm",
                       "--mode", "generate", "--input-len", "512", "--output-len", "128",
                       "--batch-size", "16", "--json"],
}
HEAVY = ("torch", "torch_geometric", "transformers", "xgboost", "sklearn", "pandas")


def _imports(argv: list[str], env: dict) -> tuple[float, list[str]]:
    """``python -X importtime`` of the command: total import seconds (top-level cumulative)
    and which of :data:`HEAVY` it imported."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "perfcast", *argv],
                          env=env, capture_output=True, text=True)
    total, loaded = 0, set()
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        _, cum, name = line.split(":", 1)[1].split("|")
        if not name.startswith("  "):
            total += int(cum)
        top = name.strip().split(".")[0]
        if top in HEAVY:
            loaded.add(top)
    return total / 1e6, sorted(loaded)


def kinds(repeat: int, out: str | None) -> None:
    """``--kinds``: a cached prediction per shipped predictor kind (module docstring)."""
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items()
               if k not in ("PERFCAST_CACHE_DIR", "PERFCAST_GRAPH_STORE")}
        env["XDG_CACHE_HOME"] = tmp
        for kind, cmd in KINDS.items():
            _run(CLI + cmd, env)  # priming: graph and simulation into the cache
            times = [_run(CLI + cmd, env) for _ in range(repeat)]
            proc = subprocess.run(CLI + cmd, env=env, capture_output=True, text=True)
            d = json.loads(proc.stdout)
            imp, loaded = _imports(cmd, env)
            results[kind] = {"command": "perfcast " + " ".join(cmd),
                             "answered_by": (d.get("predictor") or {}).get("time_ms"),
                             "cached_s": [round(x, 2) for x in times],
                             "cached_median_s": round(statistics.median(times), 2),
                             "imports_s": round(imp, 2), "heavy_imports": loaded}
            print(f"{kind:15s} median {statistics.median(times):5.2f} s (imports {imp:4.2f} s: "
                  f"{', '.join(loaded) or 'none of ' + '/'.join(HEAVY)}) — time_ms by "
                  f"{results[kind]['answered_by']}", flush=True)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(results, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--kinds", action="store_true",
                    help="a cached prediction per shipped predictor kind (issue #31)")
    args = ap.parse_args()
    if args.kinds:
        kinds(args.repeat, args.json)
        return

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
