"""What reading a learned model only inside its support costs on its own training records.

    .venv/bin/python benchmarks/support_insample.py [--per-group 40]

For a deterministic sample of the records of every shipped per-device GPU time model (timm on
the RTX 3090 / 4090, torchvision on the TITAN RTX), the MAPE of ``perfcast.predict`` (the
routed answer: the learned model's residual over the physics base read at its home batch and
carried along the base's batch scaling, then the batch rule) beside the learned model's own
answer on the same record (``perfcast.routing.request._Request.grid`` at the record's batch, no routing). These
are in-sample records: both numbers are optimistic; the difference is what the support rule
costs where the learned model is at its best.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(ROOT.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(ROOT / "datasets"))

import numpy as np  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-group", type=int, default=40)
    args = ap.parse_args()
    import perfcast
    from perfcast.datasets import load_all

    df = load_all()
    df = df[df.device.isin(["rtx4090", "rtx3090", "titan-rtx"]) & df.time_ms.notna()
            & (df.num_gpus.fillna(1) == 1) & (df.precision != "fp64")]
    rng = np.random.default_rng(0)
    print("| device | mode | precision | records | routed MAPE % | learned model alone % |")
    print("|---|---|---|---|---|---|")
    for (dev, mode, prec), g in df.groupby(["device", "mode", "precision"]):
        g = g.iloc[rng.permutation(len(g))[:args.per_group]]
        routed, raw = [], []
        for r in g.itertuples():
            size = r.input_size if isinstance(r.input_size, str) else None
            try:
                p = perfcast.predict(r.model, device=dev, mode=mode, precision=prec,
                                     batch_size=int(r.batch_size), input_size=size)
            except Exception:  # noqa: BLE001 — a record perfcast cannot build is skipped
                continue
            req = p.route.request
            pred = req.answered_by["time_ms"][0]
            if getattr(pred, "extrapolates", False):
                continue  # the physics base answered by construction: nothing learned to read
            v = float(pred.predict(req.record(False, pred.uses_graphs, pred.uses_plans))[0, 0])
            routed.append(abs(p.time_ms / r.time_ms - 1))
            raw.append(abs(v / r.time_ms - 1))
        if routed:
            print(f"| {dev} | {mode} | {prec} | {len(routed)} | {100 * np.mean(routed):.1f} | "
                  f"{100 * np.mean(raw):.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
