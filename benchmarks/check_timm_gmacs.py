"""Check perfcast's MAC counts against timm's published GMACs (``infer_gmacs``, per sample).

For every (model, image size) in ``../shared/data/timm-benchmarks/benchmark-infer-*.csv`` this
builds the inference graph at batch 1 and compares total MACs and parameter count with the CSV.
Prints: how many traced, the share within 5 %, the disagreements and failures with their
reasons, and the throughput (models/minute) — the "whole timm list" speed figure.

    python benchmarks/check_timm_gmacs.py [--limit N] [--workers 2] [--out reports/timm_gmacs]
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import multiprocessing as mp
import os
import signal
import sys
import time
from pathlib import Path

# the checkout's data (see perfcast.paths) unless the environment names other folders
_REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(_REPO.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(_REPO / "datasets"))
DATA = Path(os.environ["PERFCAST_DATA"])


def load_rows(data_dir: Path) -> list[dict]:
    seen: dict[tuple[str, int], dict] = {}
    for path in sorted(glob.glob(str(data_dir / "timm-benchmarks" / "benchmark-infer-*.csv"))):
        for r in csv.DictReader(open(path)):
            if not r.get("infer_gmacs"):
                continue
            key = (r["model"], int(r["infer_img_size"]))
            seen.setdefault(key, {"model": r["model"], "img_size": int(r["infer_img_size"]),
                                  "ref_gmacs": float(r["infer_gmacs"]),
                                  "ref_params_m": float(r["param_count"]) if r.get("param_count") else None})
    return list(seen.values())


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


def _work(args: tuple[dict, int]) -> dict:
    row, timeout = args
    from perfcast.frontends import build_graph
    from perfcast.workload import Workload

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    t = time.perf_counter()
    out = dict(row)
    try:
        g = build_graph(Workload.of(f"timm:{row['model']}", batch_size=1,
                                     input_size=(3, row["img_size"], row["img_size"])))
        out.update(status="ok", gmacs=g.macs / 1e9, params_m=g.params / 1e6, nodes=g.num_nodes,
                   other=g.op_counts().get("other", 0), unmapped=";".join(g.meta.unmapped_ops))
    except _Timeout:
        out.update(status="timeout", reason=f"no graph within {timeout} s")
    except Exception as exc:  # noqa: BLE001 - report every failure with its reason
        msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        out.update(status="fail", reason=f"{type(exc).__name__}: {msg}")
    finally:
        signal.alarm(0)
    out["seconds"] = round(time.perf_counter() - t, 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=0, help="check only the first N rows (0 = all)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=180, help="seconds per model")
    ap.add_argument("--out", type=Path, default=Path("reports/timm_gmacs"))
    a = ap.parse_args()
    rows = load_rows(a.data)
    if not rows:
        print(f"no timm benchmark CSVs under {a.data}", file=sys.stderr)
        return 2
    if a.limit:
        step = max(1, len(rows) // a.limit)
        rows = rows[::step][: a.limit]
    t0 = time.perf_counter()
    results = []
    ctx = mp.get_context("fork")
    with ctx.Pool(a.workers, maxtasksperchild=20) as pool:
        for i, r in enumerate(pool.imap_unordered(_work, [(r, a.timeout) for r in rows]), 1):
            results.append(r)
            if i % 25 == 0 or i == len(rows):
                ok = sum(x["status"] == "ok" for x in results)
                print(f"[{i}/{len(rows)}] traced {ok}, {time.perf_counter() - t0:.0f} s", flush=True)
    wall = time.perf_counter() - t0
    ok = [r for r in results if r["status"] == "ok"]
    for r in ok:
        r["rel_err"] = (r["gmacs"] - r["ref_gmacs"]) / r["ref_gmacs"] if r["ref_gmacs"] else float("nan")
    within = [r for r in ok if abs(r["rel_err"]) <= 0.05]
    disagree = sorted((r for r in ok if abs(r["rel_err"]) > 0.05), key=lambda r: -abs(r["rel_err"]))
    failed = [r for r in results if r["status"] != "ok"]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    keys = ["model", "img_size", "status", "ref_gmacs", "gmacs", "rel_err", "ref_params_m",
            "params_m", "nodes", "other", "unmapped", "seconds", "reason"]
    with open(f"{a.out}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, keys, extrasaction="ignore")
        w.writeheader()
        for r in sorted(results, key=lambda r: (r["model"], r["img_size"])):
            w.writerow(r)
    summary = {
        "rows": len(rows), "traced": len(ok), "failed": len(failed),
        "within_5pct": len(within), "share_within_5pct_of_traced": len(within) / max(1, len(ok)),
        "median_abs_rel_err": sorted(abs(r["rel_err"]) for r in ok)[len(ok) // 2] if ok else None,
        "wall_s": round(wall, 1), "workers": a.workers,
        "models_per_minute": round(len(results) / wall * 60, 1),
        "median_graph_s": sorted(r["seconds"] for r in ok)[len(ok) // 2] if ok else None,
    }
    Path(f"{a.out}.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    print(f"\n{len(disagree)} traced models disagree by more than 5 %:")
    for r in disagree[:40]:
        print(f"  {r['model']}@{r['img_size']}: ours {r['gmacs']:.3f} vs timm {r['ref_gmacs']:.3f} "
              f"({100 * r['rel_err']:+.1f} %)")
    print(f"\n{len(failed)} did not trace:")
    for r in failed[:60]:
        print(f"  {r['model']}@{r['img_size']}: {r['status']}: {r.get('reason', '')}")
    print(f"\nfull table: {a.out}.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
