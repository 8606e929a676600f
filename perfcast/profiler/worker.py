"""Subprocess entry: measure one configuration and print one JSON result line.

Run by :func:`perfcast.profiler.runner.run_isolated` as ``python -m perfcast.profiler.worker``
with the request as JSON on stdin. A fresh process per configuration isolates crashes and OOMs
and gives a clean RSS baseline. On Linux it dies with the collector that started it (even one
killed by SIGKILL): no orphan goes on measuring and loading the machine.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback

RESULT_PREFIX = "PERFCAST_RESULT "
#: Environment variable the runner sets: the pid of the collector that started this worker.
PARENT_ENV = "PERFCAST_COLLECTOR_PID"


def die_with_parent() -> None:
    """Linux: ask the kernel to SIGKILL this process when its parent (the collector, whose pid
    is ``$PERFCAST_COLLECTOR_PID``) ends; exit at once if it has ended already."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != parent:  # the collector died before the prctl
        os._exit(1)


def main() -> int:
    die_with_parent()
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
    m.env = {**fingerprint(req.get("torch_device") or "cpu"), **(m.env or {})}  # + gpu_power
    d = asdict(m)
    d.pop("config")
    sys.stdout.write(RESULT_PREFIX + json.dumps(d) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
