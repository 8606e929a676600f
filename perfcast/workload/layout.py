"""How a training step is spread over GPUs (:class:`Layout`), and the checks of a field's value
the workload shares with it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from perfcast.errors import PerfcastError, unknown_choice
from perfcast.workload.choices import (
    FLASH_ATTENTION,
    MAX_GPUS,
    MAX_SIZE,
    RECOMPUTE,
    SCHEDULES,
    ZERO_STAGES,
)



def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise TypeError
    if isinstance(v, float) and not v.is_integer():
        raise ValueError
    return int(v)


def _positive(name: str, value: Any, unit: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PerfcastError(f"{name} must be a positive integer{unit}, got {value!r}")
    if value > MAX_SIZE:
        raise PerfcastError(f"{name} must be ≤ {MAX_SIZE:,}, got {value:,}")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise unknown_choice(name, value, allowed)


# --------------------------------------------------------------------------- parallel layout
#: ``Workload.of`` / ``replace`` keywords of the layout and the :class:`Layout` field each sets.
LAYOUT_KEYWORDS = {"data_parallel": "data", "tensor_parallel": "tensor",
                   "pipeline_parallel": "pipeline", "micro_batch_size": "micro_batch",
                   "recompute": "recompute", "zero": "zero", "schedule": "schedule",
                   "flash_attention": "flash_attention", "context_parallel": "context",
                   "expert_parallel": "expert"}
#: The command-line option of each layout field (what the error messages name).
LAYOUT_OPTIONS = {"data": "--data-parallel", "tensor": "--tensor-parallel",
                  "pipeline": "--pipeline-parallel", "micro_batch": "--micro-batch-size",
                  "recompute": "--recompute", "zero": "--zero", "schedule": "--schedule",
                  "flash_attention": "--flash-attention", "context": "--context-parallel",
                  "expert": "--expert-parallel"}


@dataclass(frozen=True)
class Layout:
    """How a workload is spread over GPUs: ``data`` (D data-parallel replicas), ``tensor`` (T:
    Megatron tensor parallelism — the layers' matrices, attention heads and vocabulary split T
    ways; for ``--mode generate`` the serving devices), ``pipeline`` (P stages of consecutive
    layers), ``micro_batch`` (m samples per pipeline / gradient-accumulation micro-batch;
    ``None`` = the fastest that fits, chosen by the prediction), ``recompute``
    (:data:`RECOMPUTE`), ``zero`` (:data:`ZERO_STAGES`), ``schedule`` (:data:`SCHEDULES`) and
    ``flash_attention`` (:data:`FLASH_ATTENTION`; resolved per GPU by
    :func:`perfcast.parallel.model.fused_attention`), ``context`` (C: context parallelism — each
    sequence split over C GPUs, ring attention passing K and V around them) and ``expert``
    (E: expert parallelism of a mixture of experts — each MoE layer's experts split over E GPUs
    of the data-parallel × context-parallel ones, tokens dispatched and combined by
    all-to-all; for ``--mode generate`` E of the serving devices hold the experts, attention
    split over them by tensor parallelism). The GPUs are ``T·P·D·C`` (E adds none: Megatron's
    rule, E divides D·C); the global batch (``Workload.batch_size``) is ``D · m ·`` the
    micro-batches each replica accumulates (the C GPUs of a context-parallel group share each
    sample)."""

    data: int = 1
    tensor: int = 1
    pipeline: int = 1
    micro_batch: int | None = None
    recompute: str = "none"
    zero: int = 0
    schedule: str = "1f1b"
    flash_attention: str = "auto"
    context: int = 1
    expert: int = 1

    @property
    def gpus(self) -> int:
        return self.data * self.tensor * self.pipeline * self.context

    @property
    def parallel(self) -> bool:
        """More than one GPU, or a training option of the parallel model given."""
        return self != Layout()

    def non_default(self) -> list[str]:
        """The options (``--data-parallel`` …) given a value other than their default."""
        base = Layout()
        return [LAYOUT_OPTIONS[f.name] for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(base, f.name)]

    def validate(self) -> None:
        """Each field on its own (the rules between fields and the workload:
        :meth:`Workload.validate`; against the model's shape: :meth:`Workload.check_layout`)."""
        for name in ("data", "tensor", "pipeline", "context", "expert"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise PerfcastError(f"{LAYOUT_OPTIONS[name]} must be a positive integer, "
                                    f"got {v!r}")
        if self.micro_batch is not None:
            _positive(LAYOUT_OPTIONS["micro_batch"], self.micro_batch)
        _choice("recompute", self.recompute, RECOMPUTE)
        if isinstance(self.zero, bool) or self.zero not in ZERO_STAGES:
            raise unknown_choice("ZeRO stage", self.zero, ZERO_STAGES)
        _choice("pipeline schedule", self.schedule, SCHEDULES)
        _choice("flash attention", self.flash_attention, FLASH_ATTENTION)
        if self.gpus > MAX_GPUS:
            raise PerfcastError(f"the layout spans T·P·D·C = {self.gpus:,} GPUs; at most "
                                f"{MAX_GPUS:,}")

    def to_dict(self) -> dict[str, Any]:
        return {"data_parallel": self.data, "tensor_parallel": self.tensor,
                "pipeline_parallel": self.pipeline, "micro_batch_size": self.micro_batch,
                "recompute": self.recompute, "zero": self.zero, "schedule": self.schedule,
                "flash_attention": self.flash_attention, "context_parallel": self.context,
                "expert_parallel": self.expert, "gpus": self.gpus}

    def __str__(self) -> str:
        m = f"m={self.micro_batch}" if self.micro_batch else "m=auto"
        flash = "" if self.flash_attention == "auto" else f" flash={self.flash_attention}"
        cp = (f" C={self.context}" if self.context > 1 else "") + \
            (f" E={self.expert}" if self.expert > 1 else "")
        return (f"D={self.data} T={self.tensor} P={self.pipeline}{cp} {m} "
                f"recompute={self.recompute} zero={self.zero} {self.schedule}{flash}")


def _layout_of(layout: Layout | None, kw: dict[str, Any]) -> Layout:
    """``layout`` with the flat keywords of :data:`LAYOUT_KEYWORDS` in ``kw`` applied (popped)."""
    fields = {LAYOUT_KEYWORDS[k]: kw.pop(k) for k in list(kw) if k in LAYOUT_KEYWORDS}
    base = layout if layout is not None else Layout()
    if not isinstance(base, Layout):
        raise PerfcastError(f"layout must be a perfcast.workload.Layout, not "
                            f"{type(base).__name__}")
    return dataclasses.replace(base, **fields) if fields else base
