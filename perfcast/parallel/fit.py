"""Fitting the :class:`~perfcast.parallel.model.Efficiency` on measured iterations.

:func:`fit_efficiency` takes :class:`Case` s (a traced model, a layout, the measured time) and
finds the efficiencies minimising the log error of the predicted iteration times — squared, or
a robust loss (``soft_l1``: squared below ``f_scale``, linear above, so a run its framework
slowed for reasons outside the model moves the fit less); cases may be weighted (two datasets
of different sizes given equal weight). Which parameters are free is fixed beforehand
(:data:`FREE`, :data:`FREE_JOINT`) — never chosen by a test score.
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
#: efficiency, the kernel launch time the roofline's 5 µs, no fixed per-iteration time. The
#: data-parallel all-reduce's overlap ω is the software's: a case gives it when it is known
#: (:attr:`Case.overlap`), else add ``"overlap": (0.0, 1.0)`` to fit it.
FREE: dict[str, tuple[float, float]] = {"gemm": (0.05, 0.9), "memory": (0.05, 1.0),
                                        "network": (0.05, 1.0)}
#: The efficiencies fitted on DLPerf's Megatron-LM runs together with llm-foundry's FSDP runs
#: (``benchmarks/distributed_eval.py``): :data:`FREE` + FlashAttention's fraction of the matrix
#: peak (``attention``; only the FlashAttention runs inform it). FSDP's overlap stays 1 — it
#: prefetches a layer's gather while the previous layer computes, so its collectives are hidden
#: whenever they take less than the compute (``overlap_fsdp`` is not identified by runs where
#: they do, nearly all of them).
FREE_JOINT: dict[str, tuple[float, float]] = {**FREE, "attention": (0.05, 0.9)}
BASE = Efficiency(launch_us=5.0, step_ms=0.0, network=0.7, attention=0.5, overlap_fsdp=1.0)


@dataclass
class Case:
    """One measured iteration: the traced model, its layout (with its micro-batch), the
    global batch, precision, optimizer, device, cluster and ``time_ms`` (``memory_mb`` when
    measured; ``grad_bytes``: the gradients' element size in their reduction when it is not
    the weights'; ``overlap``: the share of the backward pass its software overlaps the
    data-parallel all-reduce with, when known — Megatron-LM in 2021 all-reduced after the
    backward pass, 0)."""

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
    grad_bytes: float | None = None
    overlap: float | None = None


def predict_cases(cases: list[Case], eff: Efficiency, coll: CollectiveModel,
                  runtime_mb: float = 0.0) -> list:
    """The :class:`~perfcast.parallel.model.Estimate` of each case (a case's own ``overlap``
    in place of ``eff``'s)."""
    return [estimate(c.traced, c.layout, batch=c.batch, micro_batch=c.layout.micro_batch,
                     precision=c.precision, optimizer=c.optimizer, device=c.device,
                     cluster=c.cluster,
                     eff=eff if c.overlap is None else replace(eff, overlap=c.overlap),
                     coll=coll, runtime_mb=runtime_mb, grad_bytes=c.grad_bytes)
            for c in cases]


def fit_efficiency(cases: list[Case], coll: CollectiveModel, *, base: Efficiency = BASE,
                   free: dict[str, tuple[float, float]] | None = None,
                   trained_on: dict[str, Any] | None = None,
                   weights: list[float] | None = None, loss: str = "linear",
                   f_scale: float = 0.05) -> Efficiency:
    """The efficiencies (``free`` ones, default :data:`FREE`) minimising Σ wᵢ·ρ(log(predicted /
    measured)) over ``cases`` (``weights`` wᵢ, default 1; ``loss`` ρ: ``linear`` = squared,
    or scipy's ``soft_l1`` / ``huber`` / ``cauchy`` with scale ``f_scale`` in log units)."""
    from scipy.optimize import least_squares

    free = FREE if free is None else free
    names = list(free)
    lo = np.array([free[n][0] for n in names])
    hi = np.array([free[n][1] for n in names])
    y = np.log([c.time_ms for c in cases])
    w = np.sqrt(np.ones(len(cases)) if weights is None else np.asarray(weights, float))

    def eff_of(x) -> Efficiency:
        return replace(base, **{n: float(v) for n, v in zip(names, x)})

    def resid(x):
        t = np.array([e.time_ms for e in predict_cases(cases, eff_of(x), coll)])
        return (np.log(t) - y) * w

    x0 = np.clip([getattr(base, n) for n in names], lo + 1e-6, hi - 1e-6)
    best = None
    for start in (x0, (lo + hi) / 2):  # two starts: the loss is not convex in ω
        r = least_squares(resid, start, bounds=(lo, hi), x_scale="jac", loss=loss,
                          f_scale=f_scale)
        if best is None or r.cost < best.cost:
            best = r
    eff = eff_of(best.x)
    err = best.fun / w
    return replace(eff, trained_on=dict(trained_on or {}, cases=len(cases),
                                        loss=loss if loss == "linear" else
                                        f"{loss} (scale {f_scale:g} in log)",
                                        rms_log_error=float(np.sqrt(np.mean(err ** 2)))))


__all__ = ["BASE", "Case", "FREE", "FREE_JOINT", "fit_efficiency", "predict_cases"]
