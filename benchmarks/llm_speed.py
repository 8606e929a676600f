"""Time a 7B generate prediction, cold and warm (issue #14's goal: < 3 s cold once the model's
configs are cached, < 50 ms warm), and write ``reports/llm/speed.md`` + ``speed.json``:

    .venv/bin/python benchmarks/llm_speed.py [--runs 7] [--warm 50]

* **cold, CLI** — wall time of a fresh ``perfcast predict hf:meta-llama/Llama-2-7b-hf --mode
  generate --input-len 512 --output-len 512 --batch-size 16 --framework vllm --device h100-sxm
  --precision fp16 --json`` process (interpreter start, imports, model load, prediction,
  JSON out), after one untimed run has cached the architecture summary;
* **cold, API** — a fresh ``python -c`` that calls ``perfcast.predict(..., mode="generate")``
  once (same request);
* **warm** — :func:`perfcast.generation.predict_generation` called again in the same process
  (models loaded, summaries cached): median and 95th percentile of ``--warm`` calls.

The machine's load average is recorded beside the numbers: a busy machine is slower.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "reports" / "llm"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ARGS = ["predict", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--input-len", "512",
        "--output-len", "512", "--batch-size", "16", "--framework", "vllm", "--device",
        "h100-sxm", "--precision", "fp16", "--json"]
API = ("import perfcast\n"
       "p = perfcast.predict('hf:meta-llama/Llama-2-7b-hf', device='h100-sxm', mode='generate', "
       "input_len=512, output_len=512, batch_size=16, engine='vllm', precision='fp16')\n"
       "assert p.time_ms > 0\n")


def _wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr.strip()[-500:]}")
    return dt


def _arg(name: str, default: int) -> int:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def main() -> None:
    runs, warm_n = _arg("--runs", 7), _arg("--warm", 50)
    cli = [sys.executable, "-m", "perfcast", *ARGS]
    _wall(cli)  # untimed: caches the architecture summary (transformers + torch, once)
    load0 = os.getloadavg()
    cold_cli = [_wall(cli) for _ in range(runs)]
    cold_api = [_wall([sys.executable, "-c", API]) for _ in range(runs)]

    from perfcast.devices import get_device
    from perfcast.generation import predict_generation
    from perfcast.workload import Workload

    req = Workload.of("hf:meta-llama/Llama-2-7b-hf", mode="generate", input_len=512,
                      output_len=512, batch_size=16, precision="fp16")
    dev = get_device("h100-sxm")
    predict_generation(req, dev)
    warm = []
    for _ in range(warm_n):
        t = time.perf_counter()
        predict_generation(req, dev)
        warm.append(time.perf_counter() - t)
    warm.sort()
    load1 = os.getloadavg()
    res = {
        "date": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
        "load_average_1min": [round(load0[0], 2), round(load1[0], 2)],
        "request": " ".join(ARGS),
        "cold_cli_s": {"median": statistics.median(cold_cli), "max": max(cold_cli),
                       "runs": [round(v, 3) for v in cold_cli]},
        "cold_api_s": {"median": statistics.median(cold_api), "max": max(cold_api),
                       "runs": [round(v, 3) for v in cold_api]},
        "warm_ms": {"median": 1e3 * statistics.median(warm),
                    "p95": 1e3 * warm[int(0.95 * (len(warm) - 1))], "max": 1e3 * warm[-1],
                    "calls": warm_n},
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "speed.json").write_text(json.dumps(res, indent=1) + "\n")
    c, a, w = res["cold_cli_s"], res["cold_api_s"], res["warm_ms"]
    ok = {True: "met", False: "NOT met"}
    md = [
        "# Speed of a 7B generate prediction (issue #14 goal)", "",
        f"`.venv/bin/python benchmarks/llm_speed.py` ({res['date']}, {res['cpus']} CPUs, "
        f"1-min load average {load0[0]:.1f} → {load1[0]:.1f} while it ran). Request: `perfcast {res['request']}`; the architecture summary cached by "
        f"one untimed run first.", "",
        "| measurement | median | worst | goal |", "|---|---:|---:|---|",
        f"| cold, CLI process ({runs} runs) | {c['median']:.2f} s | {c['max']:.2f} s | "
        f"< 3 s: {ok[c['max'] < 3]} |",
        f"| cold, Python API process ({runs} runs) | {a['median']:.2f} s | {a['max']:.2f} s | "
        f"< 3 s: {ok[a['max'] < 3]} |",
        f"| warm, same process ({warm_n} calls) | {w['median']:.1f} ms | {w['max']:.1f} ms "
        f"(p95 {w['p95']:.1f}) | < 50 ms: {ok[w['p95'] < 50]} |", "",
        "A cold process spends most of its time importing (numpy, pandas, xgboost, the CLI) "
        "and loading the two shipped boosters; neither torch nor transformers is imported once "
        "the summary is cached (`tests/test_llm.py`). Warm, a prediction is the arithmetic "
        "(request passes, memory) and three single-row booster calls on one thread.", ""]
    (OUT / "speed.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
