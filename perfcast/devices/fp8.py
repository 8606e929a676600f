"""Which GPUs run FP8, and at what peak: the one check every FP8 path makes.

FP8 GEMMs (E4M3 forward, E5M2 gradients: Transformer Engine, torchao float8; FP8 weights and
KV cache in vLLM and TensorRT-LLM) need FP8 tensor / matrix cores — NVIDIA Ada, Hopper and
Blackwell, AMD CDNA 3 / 4. :func:`fp8_peak_tflops` gives a device's dense FP8 peak (the
registry's or spec file's ``peak_fp8_tflops``, else derived by architecture,
:mod:`perfcast.devices.derive`, with the note saying so); :func:`require_fp8` refuses, in one
line naming the registry GPUs that have FP8, a device without FP8 units.
"""

from __future__ import annotations

from perfcast.errors import PerfcastError


def fp8_peak_tflops(device) -> tuple[float | None, list[str]]:
    """``(dense FP8 TFLOPS, notes)`` of ``device``: given, or derived (a note says so);
    ``(None, [])`` when the device has no FP8 units."""
    from perfcast.devices.derive import complete, notes_for

    done, _ = complete(device)
    peak = getattr(done, "peak_fp8_tflops", None)
    return (float(peak) if peak else None), notes_for(device, ("peak_fp8_tflops",))


def fp8_devices() -> list[str]:
    """The registry's GPUs with FP8 units (given or derived peak), in registry order."""
    from perfcast.devices import list_devices

    return [d.key for d in list_devices() if d.is_gpu and fp8_peak_tflops(d)[0]]


def require_fp8(device, what: str = "--precision fp8") -> tuple[float, list[str]]:
    """The FP8 peak and its notes (:func:`fp8_peak_tflops`); a one-line error naming the GPUs
    that have FP8 when ``device`` has none."""
    peak, notes = fp8_peak_tflops(device)
    if peak:
        return peak, notes
    from perfcast.devices.derive import has_fp8_units

    if has_fp8_units(device):  # an FP8 architecture whose sheet gives no tensor peak to derive
        raise PerfcastError(f"{what}: {device.key} has FP8 tensor cores (by its architecture), but "
                            f"its spec gives neither peak_fp8_tflops nor the dense "
                            f"peak_fp16_tflops it is derived from (2 × FP16); add one of them "
                            f"to the spec file")
    arch = getattr(device, "architecture", "") or getattr(device, "vendor", "") or "?"
    raise PerfcastError(f"{what}: {device.key} ({arch}) has no FP8 tensor cores; FP8 runs on "
                        f"NVIDIA Ada, Hopper and Blackwell and AMD MI300 — in the registry "
                        f"{', '.join(fp8_devices())} (or a spec file with peak_fp8_tflops); "
                        f"use bf16 on {device.key}")


def training_precision_notes(precision: str | None, device) -> list[str]:
    """What ``notes`` say of a training step's precision on ``device``: its meaning
    (:data:`perfcast.workload.TRAIN_PRECISION_MEANING`) and, for ``fp8``, the FP8 peak used
    (given, or derived with the rule) — refusing a device without FP8 units."""
    from perfcast.workload import TRAIN_PRECISION_MEANING

    out = []
    if precision == "fp8":
        peak, derived = require_fp8(device)
        bf16 = device.peak_tflops("bf16")
        out.append(f"precision: {TRAIN_PRECISION_MEANING['fp8']}; FP8 peak {peak:,.1f} TFLOPS "
                   f"on {device.key} ({peak / bf16:.2g}× its bf16 peak)" if bf16 else
                   f"precision: {TRAIN_PRECISION_MEANING['fp8']}; FP8 peak {peak:,.1f} TFLOPS")
        out.extend(derived)
    elif precision in ("bf16", "bf16-pure"):  # the ones whose meaning a user may doubt
        out.append(f"precision: {TRAIN_PRECISION_MEANING[precision]}")
    return out


def bf16_units_note(precision: str | None, device) -> str | None:
    """What ``notes`` say of a bf16 run on a GPU without bf16 tensor / matrix units (NVIDIA
    before Ampere, AMD before CDNA, after :func:`perfcast.devices.derive.complete`): PyTorch runs
    it on the FP32 units, so its GEMMs and convolutions are priced at the FP32 peak, on half the
    bytes of fp32; ``None`` otherwise."""
    if precision not in ("bf16", "bf16-pure") or not device.is_gpu:
        return None
    from perfcast.devices.derive import complete

    if complete(device)[0].peak_bf16_tflops:
        return None
    half = (f" (fp16 / amp run at its FP16 peak, {device.peak_fp16_tflops:,.1f} TFLOPS)"
            if device.peak_fp16_tflops else "")
    return (f"precision: {device.key} has no bf16 tensor or matrix units: its bf16 GEMMs and "
            f"convolutions are priced at its FP32 peak ({device.peak_fp32_tflops:,.1f} TFLOPS), "
            f"moving half the bytes of fp32{half}")


__all__ = ["bf16_units_note", "fp8_devices", "fp8_peak_tflops", "require_fp8",
           "training_precision_notes"]
