"""Energy of generation — the one code path of :mod:`perfcast.energy`, re-exported for the LLM
generation path: **energy = power × devices × time**, each device's power bounded to
``[idle, min(limit, TDP)]`` (:func:`~perfcast.energy.bounded_power`), idle from the spec or
:data:`~perfcast.energy.IDLE_FRACTION_OF_TDP` × TDP (assumed, said so).

**Power by phase** (:class:`PhasePower`): a served LLM alternates a compute-bound prefill and a
memory-bound decode, and a board draws power with what it does. Each phase's power per device
is ``idle + (TDP − idle) · activity``, the activity a linear function of the phase's achieved
utilisations, capped::

    activity = clip(a₀ + a_mem · memory utilisation + a_comp · compute utilisation, 0, ceiling)

with *memory utilisation* = bytes moved ÷ (time × bandwidth) and *compute utilisation* =
FLOPs ÷ (time × the spec's 16-bit tensor peak), per device. The **ceiling** is what
compute-bound steps draw: the median activity of the Zeus traces' compute-bound training steps
at their default power limit (BERT and ResNet-50 on A40, V100, P100, RTX 6000: compute
utilisation ≥ 0.3) — where a long prefill goes. ``a₀, a_mem, a_comp`` are fitted on ML.ENERGY's
vLLM serving runs (A100, H100), whose average power mixes both phases: a small batch streaming
the weights draws well below TDP, a large one more (:mod:`perfcast.training.phase_power`).
The energy of a request batch is then ``Σ_phase power × devices × phase time``.

The unconstrained power of any *model graph* (training, inference) comes from the Zeus-trained
:class:`~perfcast.energy.PowerModel`; that of a served LLM from :class:`PhasePower`. Both are
bounded and multiplied by the same functions.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.energy import IDLE_FRACTION_OF_TDP, bounded_power, energy_j, power_bounds
from perfcast.errors import PerfcastError

PHASE_FORMAT = "perfcast-llm-phase-power/1"
#: Directory of the shipped coefficients (``perfcast.shipped.load_shipped("llm-phase-power")``).
SHIPPED_NAME = "llm-phase-power"
CONFIG_FILE = "config.json"
#: Compute utilisation from which a Zeus training step counts as compute-bound (the ceiling).
COMPUTE_BOUND_UTILISATION = 0.3


@dataclass(frozen=True)
class PhasePower:
    """The phase power model (module docstring): ``a0``, ``a_mem``, ``a_comp``, ``ceiling``
    and ``trained_on`` (provenance, held-out errors)."""

    a0: float
    a_mem: float
    a_comp: float
    ceiling: float
    trained_on: dict[str, Any] = field(default_factory=dict)

    def activity(self, mem_util, comp_util):
        """Fraction of ``TDP − idle`` drawn above idle (arrays)."""
        a = self.a0 + self.a_mem * np.asarray(mem_util, float) \
            + self.a_comp * np.asarray(comp_util, float)
        return np.clip(a, 0.0, self.ceiling)

    def power(self, device, mem_util: float, comp_util: float) -> float:
        """Average board power (W) of one device in a phase with these utilisations, bounded
        to ``[idle, TDP]``."""
        idle, tdp, _ = power_bounds(device)
        if tdp is None:
            raise PerfcastError(f"{device.key} has no TDP in its spec: no power prediction")
        return bounded_power(device, idle + float(self.activity(mem_util, comp_util))
                             * (tdp - idle))

    def to_dict(self) -> dict[str, Any]:
        return {"format": PHASE_FORMAT, **asdict(self)}

    def save(self, folder: str | Path) -> Path:
        from perfcast.paths import write_file_atomically

        path = Path(folder) / CONFIG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_file_atomically(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, folder: str | Path) -> PhasePower:
        path = Path(folder) / CONFIG_FILE
        try:
            d = json.loads(path.read_text())
            if d.get("format") != PHASE_FORMAT:
                raise ValueError(f"not a {PHASE_FORMAT} file")
            return cls(a0=float(d["a0"]), a_mem=float(d["a_mem"]), a_comp=float(d["a_comp"]),
                       ceiling=float(d["ceiling"]), trained_on=d.get("trained_on", {}))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PerfcastError(f"cannot read the phase power model {path}: {exc} (retrain "
                                f"with perfcast train --recipe llm --only phase-power)") from None


def utilisation(flops, nbytes, seconds, device, n_devices: int = 1) -> tuple[Any, Any]:
    """(memory, compute) utilisation per device of work spread over ``n_devices``: bytes ÷
    (time × bandwidth), FLOPs ÷ (time × the spec's 16-bit tensor peak)."""
    peak = float(device.peak_tflops("fp16") or device.peak_tflops("bf16")
                 or device.peak_fp32_tflops) * 1e12
    bw = float(device.bandwidth_gbs) * 1e9
    t = np.maximum(np.asarray(seconds, float), 1e-12) * max(1, int(n_devices))
    return np.asarray(nbytes, float) / (t * bw), np.asarray(flops, float) / (t * peak)


def decode_step_work(arch, *, batch: float, context: float, precision: str,
                     n_devices: int = 1) -> tuple[float, float]:
    """(FLOPs, bytes) of one decode step of ``batch`` sequences at mean ``context`` tokens (all
    devices): 2 × the parameters each token multiplies + attention; the weights the batch
    touches + every sequence's KV cache (replicated KV heads under tensor parallelism)."""
    from perfcast.llm.arch import WEIGHT_BYTES, kv_heads_per_device

    flops = batch * (arch.flops_per_token() + arch.attention_flops(1, context))
    kv = batch * arch.kv_bytes_per_token(precision) * context
    if n_devices > 1:
        kv *= kv_heads_per_device(arch, n_devices) * n_devices / arch.kv_heads
    nbytes = arch.active_params(max(1, int(round(batch)))) * WEIGHT_BYTES[precision] + kv
    return float(flops), float(nbytes)


__all__ = ["COMPUTE_BOUND_UTILISATION", "IDLE_FRACTION_OF_TDP", "PHASE_FORMAT", "PhasePower",
           "bounded_power", "decode_step_work", "energy_j", "power_bounds", "utilisation"]
