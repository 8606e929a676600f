"""Live check of the CPU predictions (issue #21): measure models that are in no training set on
this machine and predict them in the same run.

The models are ``LIVE_CHECK`` of ``benchmarks/make_cpu_dataset_spec.py`` (never in a sweep of
``datasets/cpu/``): everyday models at their default input size (224 px), inference at batch 1
and 4 and a training step at batch 1, measured by the profiler in isolated processes (pinned to
``--cpus``, ``--threads`` torch threads), each then predicted by ``perfcast.predict`` with the
same thread count. Prints one row per configuration and the MAPE (and ``--json``).

    python benchmarks/check_cpu_live.py [--threads 1] [--cpus 1] [--models ...] [--json]
        [--out reports/cpu/live.csv] [--unscaled]

The shipped CPU model answers scaled to this machine by its probe (perfcast.devices.probe; run
on the first CPU prediction, cached); the probes and ratios are printed at the end.
``--unscaled`` predicts every row a second time without it (``PERFCAST_PROBE=off``), so the
before / after of the probe is read on the same measurements.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PERFCAST_DATA", str(HERE.parent.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(HERE.parent / "datasets"))

from make_cpu_dataset_spec import LIVE_CHECK  # noqa: E402

CONFIGS = [("infer", 1), ("infer", 4), ("train", 1)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=LIVE_CHECK)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cpus", default=None, help="pin measurements to these CPU ids, e.g. 1")
    ap.add_argument("--max-seconds", type=float, default=3.0)
    ap.add_argument("--out", type=Path, default=None, help="write the rows as CSV")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--unscaled", action="store_true",
                    help="also predict every row without this machine's probe "
                         "(PERFCAST_PROBE=off, in a subprocess): before / after on the same "
                         "measurements")
    a = ap.parse_args()

    import numpy as np
    import pandas as pd

    import perfcast
    from perfcast.profiler.runner import run_isolated
    from perfcast.store.db import MeasureConfig

    cpus = [int(c) for c in a.cpus.split(",")] if a.cpus else None
    rows = []
    t0 = time.time()
    for model in a.models:
        for mode, batch in CONFIGS:
            cfg = MeasureConfig.of(model, batch_size=batch, mode=mode, precision="fp32",
                                   device="cpu", threads=a.threads)
            m = run_isolated(cfg, warmup=3, iters=20, cpus=cpus, max_seconds=a.max_seconds)
            if m.status != "ok":
                print(f"{model} b{batch} {mode}: {m.status} ({m.reason})", file=sys.stderr)
                continue
            p = perfcast.predict(model, device="cpu", batch_size=batch, mode=mode,
                                 precision="fp32", threads=a.threads)
            rows.append({"model": model, "mode": mode, "batch_size": batch,
                         "threads": a.threads, "measured_ms": m.time_ms_median,
                         "measured_p10_ms": m.time_ms_p10, "measured_p90_ms": m.time_ms_p90,
                         "predicted_ms": p.time_ms, "predictor": p.predictor.get("time_ms"),
                         "ape": abs(p.time_ms / m.time_ms_median - 1)})
            if not a.json:
                r = rows[-1]
                print(f"{model:38s} {mode:5s} b{batch:<3d} measured {r['measured_ms']:9.1f} ms  "
                      f"predicted {r['predicted_ms']:9.1f} ms  ({r['predictor']})  "
                      f"{100 * r['ape']:5.1f} %", flush=True)
    probe = _probe_notes(a.threads)
    if a.unscaled and rows:
        raw = _predict_unscaled(rows)
        for r, v in zip(rows, raw):
            r["unscaled_ms"] = v
            r["ape_unscaled"] = abs(v / r["measured_ms"] - 1)
    df = pd.DataFrame(rows)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(a.out, index=False)
    summary = {"configurations": len(df), "models": int(df["model"].nunique()) if len(df) else 0,
               "threads": a.threads,
               "mape": float(np.mean(df["ape"])) if len(df) else None,
               "mape_infer": float(df.loc[df["mode"] == "infer", "ape"].mean()) if len(df) else None,
               "mape_train": float(df.loc[df["mode"] == "train", "ape"].mean()) if len(df) else None,
               "seconds": round(time.time() - t0, 1), "probe": probe}
    if a.unscaled and len(df):
        summary.update({
            "mape_unscaled": float(np.mean(df["ape_unscaled"])),
            "mape_infer_unscaled": float(df.loc[df["mode"] == "infer", "ape_unscaled"].mean()),
            "mape_train_unscaled": float(df.loc[df["mode"] == "train", "ape_unscaled"].mean()),
            "median_predicted_over_measured": float(np.median(df["predicted_ms"]
                                                              / df["measured_ms"])),
            "median_unscaled_over_measured": float(np.median(df["unscaled_ms"]
                                                             / df["measured_ms"]))})
    if a.json:
        print(json.dumps({"summary": summary, "rows": rows}, indent=1))
    else:
        print(f"\nlive check: {summary['configurations']} configurations of {summary['models']} "
              f"models not in any training set, {a.threads} thread(s): MAPE "
              f"{100 * summary['mape']:.1f} % (infer {100 * summary['mape_infer']:.1f} %, "
              f"train {100 * summary['mape_train']:.1f} %), {summary['seconds']:.0f} s")
        if "mape_unscaled" in summary:
            print(f"without this machine's probe (PERFCAST_PROBE=off): MAPE "
                  f"{100 * summary['mape_unscaled']:.1f} % (infer "
                  f"{100 * summary['mape_infer_unscaled']:.1f} %, train "
                  f"{100 * summary['mape_train_unscaled']:.1f} %); predicted / measured, median: "
                  f"{summary['median_predicted_over_measured']:.2f} with the probe, "
                  f"{summary['median_unscaled_over_measured']:.2f} without")
        for line in probe:
            print(f"probe: {line}")
    return 0


def _probe_notes(threads: int) -> list[str]:
    """The probe notes of the shipped CPU model at ``threads`` (this machine's probe, the
    reference, the ratios), as a prediction gives them."""
    import perfcast

    p = perfcast.predict("timm:resnet18", device="cpu", batch_size=1, mode="infer",
                         precision="fp32", threads=threads)
    keep = ("this machine", "the training machine", "scaled by", "not scaled",
            "calibrated on this machine")
    return [n.removeprefix("time_ms: ") for n in p.notes
            if n.startswith("time_ms: ") and n.removeprefix("time_ms: ").startswith(keep)]


def _predict_unscaled(rows: list[dict]) -> list[float]:
    """Every row predicted again in a fresh process with ``PERFCAST_PROBE=off``."""
    import subprocess

    code = ("import json, sys, perfcast\n"
            "rows = json.loads(sys.stdin.read())\n"
            "print(json.dumps([perfcast.predict(r['model'], device='cpu', "
            "batch_size=r['batch_size'], mode=r['mode'], precision='fp32', "
            "threads=r['threads']).time_ms for r in rows]))")
    env = {**os.environ, "PERFCAST_PROBE": "off"}
    keys = ("model", "batch_size", "mode", "threads")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         input=json.dumps([{k: r[k] for k in keys} for r in rows]))
    if out.returncode != 0:
        print(f"the unscaled predictions failed:\n{out.stderr[-3000:]}", file=sys.stderr)
        return [float("nan")] * len(rows)
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
