"""Subprocess entry: measure one configuration and print one JSON result line.

Run by :func:`perfcast.profiler.runner.run_isolated` as ``python -m perfcast.profiler.worker``
with the request as JSON on stdin. A fresh process per configuration isolates crashes and OOMs
and gives a clean RSS baseline.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

RESULT_PREFIX = "PERFCAST_RESULT "


def main() -> int:
    req = json.loads(sys.stdin.read())
    cpus = req.get("cpus")
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cpus))
    from dataclasses import asdict

    from perfcast.profiler.env import fingerprint
    from perfcast.profiler.measure import is_oom, measure
    from perfcast.store.db import MeasureConfig, Measurement

    cfg = MeasureConfig.from_dict(req["config"])
    try:
        m = measure(cfg, warmup=req["warmup"], iters=req["iters"], device=req.get("torch_device"),
                    max_seconds=req.get("max_seconds"))
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a row with its reason
        status = "oom" if is_oom(exc) else "failed"
        first = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else ""
        m = Measurement(config=cfg, status=status, reason=f"{type(exc).__name__}: {first}")
        if os.environ.get("PERFCAST_DEBUG"):
            traceback.print_exc()
    m.env = fingerprint(req.get("torch_device") or "cpu")
    d = asdict(m)
    d.pop("config")
    sys.stdout.write(RESULT_PREFIX + json.dumps(d) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
