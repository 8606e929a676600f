"""Energy of generation, in one code path: **energy = power × devices × time**, with the power
of each device bounded to ``[idle, TDP]``.

The power comes from the learned model (``llm-power``: ML.ENERGY's average board power while
serving, as a fraction of TDP); this module only bounds it and multiplies. Idle power is the
spec's ``idle_w`` when a device has one, else :data:`IDLE_FRACTION_OF_TDP` × TDP — an
assumption (datacenter GPUs idle at roughly 10–15 % of TDP: an A100-SXM at 50–60 W of 400 W, an
H100-SXM at 70–100 W of 700 W, by their vendors' NVML readings), stated in every answer that
uses it. The general power model (idle, power limits, every workload) is issue #15's; when it
lands, it replaces :func:`bounded_power`'s source, not this formula.
"""

from __future__ import annotations

IDLE_FRACTION_OF_TDP = 0.10


def power_bounds(device) -> tuple[float | None, float | None, str]:
    """(idle W, TDP W, where idle came from) of one device; ``None`` when unknown."""
    tdp = float(device.tdp_w) if getattr(device, "tdp_w", None) else None
    idle = getattr(device, "idle_w", None)
    if idle:
        return float(idle), tdp, "spec idle_w"
    if tdp is None:
        return None, None, "no TDP"
    return IDLE_FRACTION_OF_TDP * tdp, tdp, f"{IDLE_FRACTION_OF_TDP:.0%} of TDP (assumed)"


def bounded_power(device, watts: float) -> float:
    """``watts`` per device clipped to ``[idle, TDP]``."""
    idle, tdp, _ = power_bounds(device)
    w = float(watts)
    if tdp is not None:
        w = min(w, tdp)
    if idle is not None:
        w = max(w, idle)
    return w


def energy_j(power_w: float, n_devices: int, seconds: float) -> float:
    """Joules of ``n_devices`` drawing ``power_w`` each for ``seconds``."""
    return float(power_w) * int(n_devices) * float(seconds)


__all__ = ["IDLE_FRACTION_OF_TDP", "bounded_power", "energy_j", "power_bounds"]
