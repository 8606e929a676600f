"""Energy of generation — the one code path of :mod:`perfcast.energy`, re-exported for the LLM
generation path: **energy = power × devices × time**, each device's power bounded to
``[idle, min(limit, TDP)]`` (:func:`~perfcast.energy.bounded_power`), idle from the spec or
:data:`~perfcast.energy.IDLE_FRACTION_OF_TDP` × TDP (assumed, said so).

The unconstrained power of a served LLM comes from ``llm-power`` (ML.ENERGY serving
measurements, :mod:`perfcast.llm.model`); that of any model graph from the Zeus-trained power
model (:class:`~perfcast.energy.PowerModel`). Both are bounded and multiplied here, by the same
functions.
"""

from __future__ import annotations

from perfcast.energy import IDLE_FRACTION_OF_TDP, bounded_power, energy_j, power_bounds

__all__ = ["IDLE_FRACTION_OF_TDP", "bounded_power", "energy_j", "power_bounds"]
