"""Energy of generation — the one code path of :mod:`perfcast.energy`, for the LLM generation
path: **energy = Σ over the phases of power × devices × phase time**, each device's power from
:class:`perfcast.energy.PowerModel` (the same model and file as a training or inference step:
``load_shipped("llm-phase-power")`` and ``load_shipped("power-model")`` read the same
``power_model.json``) and bounded to ``[idle, min(limit, TDP)]``.

A served LLM alternates a compute-bound prefill and a memory-bound decode. Each phase's power
per device is ``idle + TDP · (static + c_compute · h(compute util) + c_memory · h(memory
util))`` (:meth:`~perfcast.energy.PowerModel.power`), the utilisations of the phase's work over
its **predicted** time (:func:`utilisation`): bytes moved ÷ (time × bandwidth) and FLOPs ÷ (time
× the spec's 16-bit tensor peak, the precision vLLM's GEMMs run at), per device. The
coefficients are fitted on the Zeus training traces and on ML.ENERGY v2's vLLM serving runs,
each run's measured power the time-weighted mix of its two phases
(:mod:`perfcast.training.power`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfcast.energy import (IDLE_FRACTION_OF_TDP, PowerModel, bounded_power, energy_j,
                             power_bounds)

#: The shipped id of the phase power (the power model's file: ``perfcast.shipped``).
SHIPPED_NAME = "llm-phase-power"
#: The phase power model is the power model (one model for training, prefill and decode).
PhasePower = PowerModel


def utilisation(flops, nbytes, seconds, device, n_devices: int = 1) -> tuple[Any, Any]:
    """(memory, compute) utilisation per device of work spread over ``n_devices`` (arrays):
    bytes ÷ (time × bandwidth), FLOPs ÷ (time × the spec's 16-bit tensor peak), each clipped
    to [0, 1]."""
    peak = float(device.peak_tflops("fp16") or device.peak_tflops("bf16")
                 or device.peak_fp32_tflops) * 1e12
    bw = float(device.bandwidth_gbs) * 1e9
    t = np.maximum(np.asarray(seconds, float), 1e-12) * max(1, int(n_devices))
    return (np.clip(np.asarray(nbytes, float) / (t * bw), 0.0, 1.0),
            np.clip(np.asarray(flops, float) / (t * peak), 0.0, 1.0))


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


__all__ = ["IDLE_FRACTION_OF_TDP", "PhasePower", "SHIPPED_NAME", "bounded_power",
           "decode_step_work", "energy_j", "power_bounds", "utilisation"]
