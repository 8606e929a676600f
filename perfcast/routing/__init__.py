"""Routing: which predictor answers each target of a request, and which bounds were applied.

For a :class:`~perfcast.workload.Workload` on a :class:`~perfcast.devices.Device`, :func:`route`
returns a :class:`Route`: one :class:`Answer` per target (``time_ms``, ``memory_mb``,
``energy_j``) with its value, its ``source`` and the bounds applied. Target by target:

1. a predictor the user saved answers what it was trained for;
2. else the shipped model of that (device, mode, precision), or the kind the user named;
3. else a fallback: time by the roofline, memory by the tensor-memory simulation (+ the GPU's
   runtime overhead), energy by the power model of :mod:`perfcast.energy`;
4. support: a learned time model answers only inside the batches and sizes it was fitted on
   (:mod:`perfcast.predictors.support`); outside them it fades to the physics base on the same
   device (``crossdevice`` on a GPU, ``kernelsum`` on this CPU, else the roofline);
5. bounds: the batch rule (time per batch and throughput never fall as the batch grows,
   :func:`monotone_curve`), the time floor, the memory floors — each applied bound is listed in
   ``Answer.bounds`` with a note.

How often each bound binds and what it costs is measured in ``reports/`` (BENCHMARKS.md), not
quoted here.

Modules: :mod:`~perfcast.routing.answer` (the result types and small rules),
:mod:`~perfcast.routing.curve` (the batch rule), :mod:`~perfcast.routing.request` (one routed
request: its graph, its learned and physics answers on the batch grid) and
:mod:`~perfcast.routing.route` (the policy above)."""

from __future__ import annotations

from perfcast.routing.answer import (
    Answer,
    BATCH_GRID,
    MEMORY_LOWER_BOUND,
    MEMORY_WEIGHTS_BOUND,
    POWER_LIMIT_SLOWDOWN,
    Route,
    SOURCES,
    TIME_LOWER_BOUND,
    TIME_MONOTONE,
    TIME_SUPPORT,
    check_predictor_name,
    graph_workload,
    looks_like_path,
    memory_floor_mb,
    shipped_precision,
    simulation_applies,
)
from perfcast.routing.curve import (
    curve_at,
    monotone_curve,
)
from perfcast.routing.route import (
    route,
)

__all__ = [
    "Answer",
    "BATCH_GRID",
    "MEMORY_LOWER_BOUND",
    "MEMORY_WEIGHTS_BOUND",
    "POWER_LIMIT_SLOWDOWN",
    "Route",
    "SOURCES",
    "TIME_LOWER_BOUND",
    "TIME_MONOTONE",
    "TIME_SUPPORT",
    "check_predictor_name",
    "curve_at",
    "graph_workload",
    "looks_like_path",
    "memory_floor_mb",
    "monotone_curve",
    "route",
    "shipped_precision",
    "simulation_applies",
]
