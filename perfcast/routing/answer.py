"""What a route answers (:class:`Answer`, :class:`Route`), the names of its bounds, and the
small rules every step reads: the shipped precision of a device, when the simulation applies,
the graph a request reads, the memory floor, a predictor name."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.features.records import learning_workload
from perfcast.workload import Workload

#: ``Answer.source`` values: a shipped model, a predictor the user saved, the roofline bound,
#: the tensor-memory simulation, nothing.
SOURCES = ("learned", "user", "roofline", "simulation", "none")
#: ``Answer.bounds`` entry: the value was raised to the simulated tensors (+ runtime overhead on
#: a GPU).
MEMORY_LOWER_BOUND = "memory-lower-bound"
#: ``Answer.bounds`` entry: the value was raised to weights (+ gradients + optimizer state) + inputs.
MEMORY_WEIGHTS_BOUND = "memory-weights-bound"
#: ``Answer.bounds`` entry: the time was raised to the physical lower bound (roofline floor).
TIME_LOWER_BOUND = "time-lower-bound"
#: ``Answer.bounds`` entry: the time was read through the batch rule (time and throughput never
#: fall as the batch grows; :func:`monotone_curve`).
TIME_MONOTONE = "time-monotone"
#: ``Answer.bounds`` entry: the request lies outside the learned model's training data
#: (:mod:`perfcast.predictors.support`): the physics base answered, wholly or blended in.
TIME_SUPPORT = "time-support"
#: ``Answer.bounds`` entry: the time grew because the power limit binds (:mod:`perfcast.energy`).
POWER_LIMIT_SLOWDOWN = "power-limit-slowdown"
#: Batches a time answer is read on (:meth:`_Request.curve`): the powers of two and three times
#: them, 1 … 65,536 — every batch the public benchmarks measured but a handful; answers between
#: two of them are interpolated in log-log, so they keep the batch rule.
BATCH_GRID: tuple[int, ...] = tuple(sorted({*(2 ** k for k in range(17)),
                                            *(3 * 2 ** k for k in range(15))}))


@dataclass
class Answer:
    """One target's answer: ``value`` (``None`` = nothing could answer), ``source`` (see
    :data:`SOURCES`), ``predictor`` (the name shown to the user), ``trained_on`` (provenance of a
    learned value), ``bounds`` applied and the ``notes`` about this target."""

    target: str
    value: float | None = None
    source: str = "none"
    predictor: str | None = None
    trained_on: dict[str, Any] | None = None
    bounds: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the shipped manifest entry's ``id`` that answered (``None``: a user's or calibrated
    #: model, a fallback) — what :mod:`perfcast.uncertainty` finds the calibration by
    model_id: str | None = None

    @property
    def learned(self) -> bool:
        return self.source in ("learned", "user")


@dataclass
class Route:
    """Answers by target, the precision note (when perfcast chose the precision), the input
    size the graph used, and every note in the order it was made."""

    answers: dict[str, Answer]
    notes: list[str]
    precision_note: str | None = None
    input_size: list[int] | None = None
    #: the GPU power limit the energy (and a limit-bound time) is for (W; ``None``: no energy)
    power_limit_w: float | None = None
    #: the routed request (graph summary, floors) — what :func:`perfcast.uncertainty.annotate`
    #: reads for the OOD score; not serialised
    request: Any = field(default=None, repr=False, compare=False)


def shipped_precision(device: str, mode: str) -> tuple[str, str | None]:
    """``(precision, note)`` when the user gives none: the precision perfcast has measurements
    for on that device and mode when there is exactly one (e.g. ``amp`` for the RTX 3090
    training data), else ``fp32``; the note says which was used (``None``: nothing measured)."""
    from perfcast import shipped

    measured = sorted({e["precision"] for e in shipped.manifest()
                       if (e["device"], e["mode"]) == (device, mode)})
    precision = measured[0] if len(measured) == 1 else "fp32"
    note = None
    if measured:
        note = (f"precision: {precision} (what the {device} {mode} measurements used"
                f"{'; measured: ' + ', '.join(measured) if len(measured) > 1 else ''}; "
                f"pass --precision to choose)")
    return precision, note


def simulation_applies(workload: Workload) -> bool:
    """The tensor-memory simulation runs from PyTorch model specs (not ONNX, not other
    frameworks' models, not in-process modules)."""
    return workload.model.framework == "pytorch" and workload.model.kind != "nn.Module"


def graph_workload(workload: Workload) -> Workload:
    """The learning workload whose graph the predictors read (an in-process module keeps the
    batch of its example inputs; the static features rescale)."""
    lw = learning_workload(workload)
    if workload.model.example_inputs is not None:
        lw = lw.replace(batch_size=None)
    return lw


def _shipped_id(entry: dict) -> str | None:
    """The id of a shipped manifest entry (``None`` for a user's calibrated model: the shipped
    calibration is not about it)."""
    return None if entry.get("root") else entry.get("id")


def memory_floor_mb(summary, workload: Workload) -> float:
    """The least memory (MiB) a run of ``workload`` holds: its weights (+ a gradient and the
    optimizer's states per parameter in training) and its input batch — all alive at once.
    Bytes per element: 2 for fp16 / bf16-pure and bf16 inference (weights, states and inputs),
    else 4 (amp and bf16 training keep fp32 master weights; token ids are counted at 4 bytes,
    the least an id takes)."""
    from perfcast.predictors.roofline import DEFAULT_OPTIMIZER, OPTIMIZER_STATES, half_weights

    half = half_weights(workload.precision, workload.mode)
    e = 2.0 if half else 4.0
    total = float(summary.param_bytes) * (0.5 if half else 1.0)
    if workload.mode == "train":
        opt = workload.train_optimizer
        states = OPTIMIZER_STATES.get(opt if opt in OPTIMIZER_STATES else DEFAULT_OPTIMIZER, 1)
        total += float(summary.params) * e * (1 + states)
    k = float(workload.batch_size or 1) / max(1, summary.batch)
    total += float(summary.input_elements) * k * e
    return total / 2**20


def check_predictor_name(name: str) -> None:
    """A ``--predictor`` registry name must exist (a known name without a shipped model for the
    device is answered with the default model and a note; an unknown one is an error)."""
    import difflib

    from perfcast.predictors import list_predictors

    names = [n for n in list_predictors() if not n.startswith("test-")]
    if name not in names:
        near = difflib.get_close_matches(name, names, n=1)
        raise PerfcastError(f"unknown predictor {name!r}"
                            + (f" — did you mean {near[0]!r}?" if near else "")
                            + f" (predictors: {', '.join(names)}; or a saved predictor's "
                              f"directory)")


def looks_like_path(text: str) -> bool:
    """Whether a ``--predictor`` value names a directory rather than a registry name."""
    return os.sep in text or text.startswith(".") or os.path.isdir(text)
