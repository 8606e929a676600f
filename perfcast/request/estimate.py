"""The one answer of every mode and layout: :class:`Estimate`.

Its common fields are what every decision reads — time per batch (a step, an iteration over
the GPUs of a layout, or a batch of generation requests), throughput with its unit, memory per
device and whether it fits, energy of the batch (every device) and power per device, the
intervals, the route's provenance and the notes. ``details`` is the mode's own answer — a
single device's :class:`~perfcast.request.single.Prediction`, a layout's
:class:`~perfcast.parallel.ParallelPrediction` or a serving request's
:class:`~perfcast.generation.GenerationPrediction` — with the fields only that mode has (time to
first token, the layout's breakdown, MFU …); they read as attributes of the estimate too.

``to_dict()`` is the JSON every surface prints: the details' fields with the common ones over
them, plus ``kind``, ``gpus``, ``throughput_per_s`` and ``throughput_unit``.
"""

from __future__ import annotations

from typing import Any

#: ``Estimate.kind``: one device's step, a training step over several GPUs, LLM serving.
KINDS = ("single", "parallel", "generation")
#: The keys ``to_dict`` adds to the details' (every answer has them).
COMMON_KEYS = ("kind", "gpus", "throughput_per_s", "throughput_unit")
#: Common fields read from the details under another name, per kind.
_RENAMED = {"single": {"throughput_per_s": "throughput_samples_per_s"},
            "parallel": {"throughput_per_s": "samples_per_s"},
            "generation": {"throughput_per_s": "throughput_tokens_per_s",
                           "gpus": "tensor_parallel"}}
#: The common fields (each a property reading the details).
COMMON = ("model", "device", "mode", "precision", "batch_size", "gpus", "time_ms",
          "throughput_per_s", "memory_mb", "capacity_mb", "fits", "energy_j", "power_w",
          "power_limit_w", "predictor", "trained_on", "notes")


class Estimate:
    """One forecast (module docstring): ``kind`` and the mode's ``details``; the common fields
    (:data:`COMMON`; times in ms, memory in MiB per device, energy in J for the batch on every
    device, power in W per device) read from the details — and written to them — so the two
    never disagree."""

    __slots__ = ("kind", "details")

    def __init__(self, kind: str, details: Any) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown estimate kind {kind!r}")
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "details", details)

    @classmethod
    def of(cls, details: Any) -> Estimate:
        """The estimate of an engine's answer (its kind from its fields)."""
        if isinstance(details, Estimate):
            return details
        notes = getattr(details, "notes", None)
        if isinstance(notes, list):  # one note said by two paths is said once, in order
            notes[:] = list(dict.fromkeys(notes))
        if hasattr(details, "ttft_ms"):
            return cls("generation", details)
        if hasattr(details, "breakdown_ms"):
            return cls("parallel", details)
        if hasattr(details, "throughput_samples_per_s"):
            return cls("single", details)
        raise TypeError(f"not an engine's answer: {type(details).__name__}")

    @property
    def throughput_unit(self) -> str:
        return "tokens/s" if self.kind == "generation" else "samples/s"

    def __getattr__(self, name: str) -> Any:
        """A common field (:data:`COMMON`) or the mode's own (``ttft_ms``, ``breakdown_ms``,
        ``route`` …), read from the details."""
        details = object.__getattribute__(self, "details")
        kind = object.__getattribute__(self, "kind")
        if name == "gpus" and kind == "single":
            return 1
        if name == "power_limit_w" and not hasattr(details, "power_limit_w"):
            return None
        return getattr(details, _RENAMED[kind].get(name, name))

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("kind", "details"):
            raise AttributeError(f"{name} is fixed")
        setattr(self.details, _RENAMED[self.kind].get(name, name), value)

    def __repr__(self) -> str:
        return (f"Estimate({self.kind}: {self.model} on {self.device}, {self.mode}, batch "
                f"{self.batch_size}, {self.time_ms} ms)")

    @property
    def samples_per_s(self) -> float | None:
        """Samples (images, sequences, requests) per second of the batch."""
        if self.kind == "parallel":
            return self.details.samples_per_s
        if self.time_ms and self.batch_size:
            return self.batch_size / self.time_ms * 1e3
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON of every surface (module docstring)."""
        out = dict(self.details.to_dict())
        out.pop("route", None)
        out["kind"] = self.kind
        out["gpus"] = self.gpus
        out["throughput_per_s"] = self.throughput_per_s
        out["throughput_unit"] = self.throughput_unit
        return out


__all__ = ["COMMON", "COMMON_KEYS", "KINDS", "Estimate"]
