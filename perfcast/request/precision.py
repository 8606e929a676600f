"""One device's step at a precision no learned model has data for — ``bf16-pure`` and ``fp8``
training (:data:`perfcast.workload.EXTRA_PRECISIONS`) — answered by the support rule: the
request is routed as ``bf16`` (learned where the models have support, their bf16 rows being
autocast runs), then the physics of the difference is applied and said in ``notes``:

* memory: + the tensor simulation's difference (:func:`perfcast.memory.simulate_memory` at
  the precision − at bf16: bf16-pure's 16-bit weights, gradients and optimizer state; fp8's
  FP8 weight copies);
* time, ``bf16-pure``: − the roofline's difference (no fp32 master weights to read and cast,
  a 16-bit optimizer step: :func:`perfcast.predictors.roofline.cost_time_ms`);
* time, ``fp8``: − what the FP8 tensor peak saves on every ``nn.Linear`` GEMM (forward, input
  gradient and weight gradient), the casts to FP8 and their scaling launches counted, a GEMM too
  small to gain left in bf16 (:func:`fp8_gemm_saving_ms`). The saving is a roofline one (both
  precisions at their peaks), so the time the learned answer adds above the roofline (launches,
  efficiency) is kept as measured at bf16 — a conservative (slower) FP8 answer.
"""

from __future__ import annotations

from perfcast.workload import Workload

#: What each extra precision is routed as.
ROUTED_AS = {"bf16-pure": "bf16", "fp8": "bf16"}
#: The canonical ops FP8 training runs in FP8: a linear layer's GEMM (a weight-holding node).
FP8_OPS = ("linear",)


def routed_workload(w: Workload) -> Workload | None:
    """The workload a request at an extra precision is routed as (``None``: routed as is)."""
    if w.precision in ROUTED_AS:
        return w.replace(precision=ROUTED_AS[w.precision])
    return None


def fp8_gemm_saving_ms(graph, batch: int, device) -> tuple[float, int, int]:
    """``(ms saved, GEMMs in FP8, linear GEMMs)`` of one training step of ``graph`` at ``batch``
    when its ``nn.Linear`` GEMMs run in FP8 on ``device`` (see the module docstring): per GEMM,
    ``3 · [max(F/peak_bf16, bytes/bw) − max(F/peak_fp8, bytes/bw)] − casts``, kept where > 0."""
    from perfcast.devices.derive import complete
    from perfcast.devices.fp8 import fp8_peak_tflops
    from perfcast.parallel.model import (
        FP8_CAST_GRAD_BYTES,
        FP8_CAST_INPUT_BYTES,
        FP8_CAST_LAUNCHES_BWD,
        FP8_CAST_LAUNCHES_FWD,
        FP8_CAST_WEIGHT_BYTES,
    )
    from perfcast.predictors.roofline import DEFAULT_LAUNCH_US

    dev = complete(device)[0]
    f8 = fp8_peak_tflops(device)[0]
    b16 = dev.peak_tflops("bf16")
    bw = float(dev.bandwidth_gbs or 0.0) * 1e9
    if not f8 or not b16 or not bw:
        return 0.0, 0, 0
    k = float(batch) / float(graph.meta.batch_size or 1)
    launch = DEFAULT_LAUNCH_US["gpu"] * 1e-6
    saved, used, total = 0.0, 0, 0
    for n in graph.nodes:
        if n.op not in FP8_OPS or not n.params or n.phase != "forward":
            continue
        total += 1
        a_in = float(sum(_numel(s) for s in n.input_shapes[:1])) * k
        a_out = float(sum(_numel(s) for s in n.output_shapes[:1])) * k
        w = float(n.params)
        flops = float(n.flops) * k
        t_mem = (2.0 * (a_in + a_out) + 2.0 * w) / bw
        t16 = 3.0 * max(flops / (b16 * 1e12), t_mem)
        t8 = 3.0 * max(flops / (f8 * 1e12), t_mem)
        casts = ((a_in * FP8_CAST_INPUT_BYTES + w * FP8_CAST_WEIGHT_BYTES
                  + a_out * FP8_CAST_GRAD_BYTES) / bw
                 + (FP8_CAST_LAUNCHES_FWD + FP8_CAST_LAUNCHES_BWD) * launch)
        if t16 - t8 - casts > 0:
            saved += t16 - t8 - casts
            used += 1
    return saved * 1e3, used, total


def _numel(shape) -> int:
    out = 1
    for d in shape:
        out *= int(d)
    return out


def adjust(out, w: Workload, routed: Workload, device, graph, use_cache: bool = True) -> None:
    """Turn ``out`` (the :class:`~perfcast.request.single.Prediction` of ``routed``) into the
    answer for ``w`` (module docstring): its precision, memory, time and the notes saying how."""
    from perfcast.devices.fp8 import training_precision_notes

    p, b = w.precision, int(w.batch_size)
    out.precision = p
    out.notes[:0] = training_precision_notes(p, device) + w.optimizer_notes() \
        if w.mode == "train" else []
    out.notes.append(f"precision: no learned model has {p} measurements — answered as the "
                     f"bf16 request, then the physics of the difference (the support rule)")
    if w.mode != "train":  # bf16-pure inference is bf16 inference: the weights in bf16
        out.notes.append("bf16-pure in --mode infer: bf16 (the weights in bf16, no master copy "
                         "either way)")
        return
    _memory(out, w, routed, use_cache)
    if out.time_ms is None:
        return
    t0 = out.time_ms
    if p == "fp8":
        saved, used, total = fp8_gemm_saving_ms(graph, b, device)
        out.notes.append(f"time_ms: fp8 — {used} of {total} linear-layer GEMMs in FP8 (the "
                         f"others too small to gain), {saved:,.4g} ms saved on the roofline "
                         f"(forward, input and weight gradients at the FP8 peak, less the casts "
                         f"and scaling launches); convolutions, attention and the rest in bf16")
    else:
        from perfcast.predictors.roofline import GraphCost, cost_time_ms

        cost = GraphCost.of_graph(graph)
        saved = cost_time_ms(cost, b, "train", "bf16", device, optimizer=w.train_optimizer) \
            - cost_time_ms(cost, b, "train", "bf16-pure", device, optimizer=w.train_optimizer)
        saved = max(0.0, saved) if saved == saved else 0.0
        out.notes.append(f"time_ms: bf16-pure — {saved:,.4g} ms saved on the roofline (16-bit "
                         f"weights read, a 16-bit optimizer step); the kernels as bf16's")
    # never faster than all of the bf16 step's work sped up by the ratio of the peaks (fp8), or
    # than every byte it moves halved (bf16-pure: the compute stays)
    ratio = 2.0
    if p == "fp8":
        from perfcast.devices.fp8 import fp8_peak_tflops

        f8, b16 = fp8_peak_tflops(device)[0], device.peak_tflops("bf16")
        ratio = (f8 / b16) if f8 and b16 else 1.0
    out.time_ms = max(t0 - saved, t0 / max(ratio, 1.0)) if saved > 0 else t0
    scale = out.time_ms / t0 if t0 else 1.0
    for key in ("time_ms_low", "time_ms_high", "energy_j", "energy_j_low", "energy_j_high"):
        v = getattr(out, key, None)
        if v is not None:
            setattr(out, key, v * scale)
    if scale != 1.0:
        out.notes.append(f"time_ms: {t0:,.4g} ms at bf16 → {out.time_ms:,.4g} ms; its interval "
                         f"and the energy scaled alike (the same power)")
    if out.time_ms:
        out.throughput_samples_per_s = b / out.time_ms * 1e3


def _memory(out, w: Workload, routed: Workload, use_cache: bool) -> None:
    """``out``'s memory + the simulated difference between ``w`` and ``routed``."""
    from perfcast.errors import PerfcastError
    from perfcast.memory.cache import MemsimCache

    if out.memory_mb is None:
        return
    try:
        if use_cache:
            cache = MemsimCache()
            a, c = cache.get(w, strict=True), cache.get(routed, strict=True)
        else:
            a, c = MemsimCache.simulate(w), MemsimCache.simulate(routed)
    except PerfcastError as exc:
        out.notes.append(f"memory_mb: the bf16 answer — {w.precision}'s own could not be "
                         f"simulated ({exc})")
        return
    if a is None or c is None:
        return
    delta = a - c
    out.memory_mb += delta
    for key in ("memory_mb_low", "memory_mb_high"):
        v = getattr(out, key, None)
        if v is not None:
            setattr(out, key, max(0.0, v + delta))
    out.notes.append(f"memory_mb: the bf16 answer {delta:+,.1f} MiB — the tensor simulation "
                     f"at {w.precision} less at bf16 ({a:,.1f} − {c:,.1f} MiB)")
    if out.capacity_mb is not None:
        out.fits = bool(out.memory_mb <= out.capacity_mb)


__all__ = ["FP8_OPS", "ROUTED_AS", "adjust", "fp8_gemm_saving_ms", "routed_workload"]
