"""Tensor-memory simulation and tracking.

* :func:`simulate_memory` — peak live tensor bytes of an inference pass or a training step of a
  model spec, simulated under FakeTensor (:mod:`perfcast.memory.simulate`).
* :class:`LiveTensorTracker`, :func:`measure_peak_tensor_bytes` — the tracker itself, usable on
  real CPU runs too (:mod:`perfcast.memory.tracker`).
"""

from perfcast.memory.simulate import MemoryEstimate, simulate_memory
from perfcast.memory.tracker import LiveTensorTracker, measure_peak_tensor_bytes

__all__ = ["LiveTensorTracker", "MemoryEstimate", "measure_peak_tensor_bytes", "simulate_memory"]
