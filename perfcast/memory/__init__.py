"""Tensor-memory simulation and tracking.

* :func:`simulate_memory` — peak live tensor bytes of an inference pass or a training step of a
  model spec, simulated under FakeTensor (:mod:`perfcast.memory.simulate`).
* :class:`LiveTensorTracker`, :func:`measure_peak_tensor_bytes` — the tracker itself, usable on
  real CPU runs too (:mod:`perfcast.memory.tracker`).
"""

import importlib

#: Public names → their module, imported on first use (PEP 562): both need torch, which the
#: cached-prediction path (:mod:`perfcast.memory.cache`, :mod:`perfcast.memory.overhead`) does
#: not load.
_LAZY = {"MemoryEstimate": "perfcast.memory.simulate",
         "simulate_memory": "perfcast.memory.simulate",
         "LiveTensorTracker": "perfcast.memory.tracker",
         "measure_peak_tensor_bytes": "perfcast.memory.tracker"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'perfcast.memory' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["LiveTensorTracker", "MemoryEstimate", "measure_peak_tensor_bytes", "simulate_memory"]
