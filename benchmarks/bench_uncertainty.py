"""What the intervals and the OOD score add to a warm prediction (issue #16 goal: < 5 ms).

    .venv/bin/python benchmarks/bench_uncertainty.py [--repeat 50]

Times, in one warm process, (1) a whole ``perfcast.predict`` of the acceptance request and
(2) :func:`perfcast.uncertainty.annotate` alone on that prediction's route (the part issue #16
adds: op-class counts of the graph, the descriptor's projection, the k-NN distance to the
training architectures, the bucket's conformal quantiles). Writes
``reports/uncertainty/bench.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REQUESTS = (("timm:resnet50", "rtx4090", 256, "amp", "infer"),
            ("timm:resnet50", "a100-40gb", 64, "fp32", "train"),
            ("timm:resnet50", "l4", 64, "amp", "infer"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    import perfcast
    from perfcast import uncertainty as U

    rows = []
    for model, device, batch, precision, mode in REQUESTS:
        kw = dict(device=device, batch_size=batch, precision=precision, mode=mode)
        p = perfcast.predict(model, **kw)  # cold: graph, models, calibration loaded
        whole = []
        for _ in range(max(5, args.repeat // 5)):
            t = time.perf_counter()
            p = perfcast.predict(model, **kw)
            whole.append((time.perf_counter() - t) * 1e3)
        part = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            U.annotate(p, p.route, 0.9)
            part.append((time.perf_counter() - t) * 1e3)
        rows.append({"request": f"{model} {device} {mode} {precision} batch {batch}",
                     "predictor": p.predictor.get("time_ms"),
                     "warm_predict_ms_median": round(statistics.median(whole), 2),
                     "uncertainty_ms_median": round(statistics.median(part), 3),
                     "uncertainty_ms_max": round(max(part), 3),
                     "interval": [p.time_ms_low, p.time_ms, p.time_ms_high],
                     "ood_score": p.ood.get("score")})
        print(rows[-1], flush=True)
    out = ROOT / "reports" / "uncertainty" / "bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": ".venv/bin/python benchmarks/bench_uncertainty.py",
                               "machine": f"{platform.machine()}, {platform.python_version()}",
                               "repeat": args.repeat, "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
