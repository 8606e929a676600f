"""Run one measurement in a fresh subprocess with a timeout and a memory watchdog."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import fields

from perfcast.profiler.worker import PARENT_ENV, RESULT_PREFIX
from perfcast.store.db import MeasureConfig, Measurement


def _kill(proc: subprocess.Popen) -> None:
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def run_isolated(cfg: MeasureConfig, *, warmup: int = 5, iters: int = 30, timeout_s: float = 600,
                 memory_limit_mb: float | None = None, cpus: list[int] | None = None,
                 torch_device: str | None = None, max_seconds: float | None = None) -> Measurement:
    """Measure ``cfg`` in a child process. Timeouts, OOMs and crashes become failed rows.

    ``KeyboardInterrupt`` kills the child and propagates (nothing is recorded); if this process
    is killed outright (SIGKILL), the child dies with it (Linux, :func:`~perfcast.profiler.
    worker.die_with_parent`).
    """
    import psutil

    req = {"config": cfg.to_dict(), "warmup": warmup, "iters": iters, "cpus": cpus,
           "torch_device": torch_device, "max_seconds": max_seconds}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "perfcast.profiler.worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONWARNINGS": "ignore",
                                            PARENT_ENV: str(os.getpid())})  # dies with us
    status, reason = None, None
    try:
        proc.stdin.write(json.dumps(req))
        proc.stdin.close()
        ps = psutil.Process(proc.pid)
        while proc.poll() is None:
            if time.perf_counter() - t0 > timeout_s:
                status, reason = "timeout", f"no result within {timeout_s:g} s"
                _kill(proc)
                break
            if memory_limit_mb:
                try:
                    rss = ps.memory_info().rss / 2**20
                except psutil.Error:
                    rss = 0.0
                if rss > memory_limit_mb:
                    status, reason = "oom", (f"RSS {rss:.0f} MiB exceeded the memory limit "
                                             f"{memory_limit_mb:.0f} MiB")
                    _kill(proc)
                    break
            time.sleep(0.05)
        out = proc.stdout.read()
        err = proc.stderr.read()
    except BaseException:
        _kill(proc)
        raise
    if status is None:
        line = next((ln for ln in out.splitlines() if ln.startswith(RESULT_PREFIX)), None)
        if line is not None:
            d = json.loads(line[len(RESULT_PREFIX):])
            names = {f.name for f in fields(Measurement)} - {"config"}
            m = Measurement(config=cfg, **{k: v for k, v in d.items() if k in names})
            m.duration_s = m.duration_s or time.perf_counter() - t0
            return m
        rc = proc.returncode
        if rc is not None and rc < 0 and -rc == signal.SIGKILL:
            status, reason = "oom", "worker killed by SIGKILL (likely the kernel's OOM killer)"
        elif rc == 130 or (rc is not None and rc < 0 and -rc == signal.SIGINT):
            raise KeyboardInterrupt
        else:
            tail = (err.strip().splitlines() or ["no output"])[-1][:500]
            status, reason = "failed", f"worker exited with code {rc}: {tail}"
    return Measurement(config=cfg, status=status, reason=reason,
                       duration_s=time.perf_counter() - t0)
