"""Fitting the :class:`~perfcast.parallel.model.Efficiency` on measured iterations.

:func:`fit_efficiency` takes :class:`Case` s (a traced model, a layout, the measured time) and
finds the efficiencies minimising the squared log error of the predicted iteration times; which
parameters are free is fixed beforehand (:data:`FREE`) — never chosen by a test score.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from perfcast.parallel.blocks import TracedModel
from perfcast.parallel.cluster import Cluster
from perfcast.parallel.collectives import CollectiveModel
from perfcast.parallel.model import Efficiency, estimate
from perfcast.workload import Layout

#: The efficiencies fitted, with their bounds (a matrix unit reaches at most ~90 % of its
#: peak in cuBLAS); the others keep their defaults: attention products at the GEMMs'
#: efficiency, the kernel launch time the roofline's 5 µs, no fixed per-iteration time.
FREE: dict[str, tuple[float, float]] = {"gemm": (0.05, 0.9), "memory": (0.05, 1.0),
                                        "overlap": (0.0, 1.0),
                                        "network": (0.05, 1.0)}
BASE = Efficiency(launch_us=5.0, step_ms=0.0, network=0.7)


@dataclass
class Case:
    """One measured iteration: the traced model, its layout (with its micro-batch), the
    global batch, precision, optimizer, device, cluster and ``time_ms``."""

    name: str
    traced: TracedModel
    layout: Layout
    batch: int
    precision: str
    optimizer: str
    device: Any
    cluster: Cluster
    time_ms: float
    memory_mb: float | None = None


def predict_cases(cases: list[Case], eff: Efficiency, coll: CollectiveModel,
                  runtime_mb: float = 0.0) -> list:
    """The :class:`~perfcast.parallel.model.Estimate` of each case."""
    return [estimate(c.traced, c.layout, batch=c.batch, micro_batch=c.layout.micro_batch,
                     precision=c.precision, optimizer=c.optimizer, device=c.device,
                     cluster=c.cluster, eff=eff, coll=coll, runtime_mb=runtime_mb)
            for c in cases]


def fit_efficiency(cases: list[Case], coll: CollectiveModel, *, base: Efficiency = BASE,
                   free: dict[str, tuple[float, float]] | None = None,
                   trained_on: dict[str, Any] | None = None) -> Efficiency:
    """The efficiencies (``free`` ones, default :data:`FREE`) minimising Σ log²(predicted /
    measured) over ``cases``."""
    from scipy.optimize import least_squares

    free = FREE if free is None else free
    names = list(free)
    lo = np.array([free[n][0] for n in names])
    hi = np.array([free[n][1] for n in names])
    y = np.log([c.time_ms for c in cases])

    def eff_of(x) -> Efficiency:
        return replace(base, **{n: float(v) for n, v in zip(names, x)})

    def resid(x):
        t = np.array([e.time_ms for e in predict_cases(cases, eff_of(x), coll)])
        return np.log(t) - y

    x0 = np.clip([getattr(base, n) for n in names], lo + 1e-6, hi - 1e-6)
    best = None
    for start in (x0, (lo + hi) / 2):  # two starts: the loss is not convex in ω
        r = least_squares(resid, start, bounds=(lo, hi), x_scale="jac")
        if best is None or r.cost < best.cost:
            best = r
    eff = eff_of(best.x)
    return replace(eff, trained_on=dict(trained_on or {}, cases=len(cases),
                                        rms_log_error=float(np.sqrt(np.mean(best.fun ** 2)))))


__all__ = ["BASE", "Case", "FREE", "fit_efficiency", "predict_cases"]
