"""Functions the Ray tests send to Ray workers (importable there: the test cluster's workers get
the repository on PYTHONPATH)."""

from __future__ import annotations

import time

from perfcast.store import Measurement


def slow_runner(cfg, **kw) -> Measurement:
    """A measurement that takes 0.4 s and returns fixed numbers (1 ms + the batch size)."""
    time.sleep(0.4)
    return Measurement(config=cfg, time_ms_median=1.0 + cfg.batch_size, n=kw["iters"],
                       warmup=kw["warmup"])


def die(cfg, **kw) -> Measurement:
    """The Ray worker process dies in the middle of the task (as on a crash or a lost node)."""
    import os

    os._exit(3)
