"""The most concurrent requests, or the longest prompt, whose memory fits a device."""

from __future__ import annotations

from perfcast.errors import PerfcastError
from perfcast.workload import MAX_SIZE, Workload
from perfcast.generation.settings import resolve
from perfcast.generation.result import GenerationPrediction
from perfcast.generation.memory import _fits_fn, _largest
from perfcast.generation.precision import serving_precision
from perfcast.generation.predict import predict_generation


def max_generation_batch(req: Workload, device, limit: int = 65536
                         ) -> tuple[int, GenerationPrediction | None]:
    """Largest batch (concurrent requests of ``req``'s lengths) whose memory need per device
    fits ``device`` (see :func:`_fits_fn`; memory is monotone in the batch: bisection on the
    arithmetic, then one full prediction at the answer). ``(0, None)`` when not even one
    request fits."""
    import dataclasses

    from perfcast.llm.arch import llm_arch

    req = resolve(req)
    req.require_lengths()
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise PerfcastError(f"--limit must be a positive integer, got {limit!r}")
    arch = llm_arch(req.spec)
    req.check_serving(arch)
    priced = serving_precision(req, device, [])  # the KV cache's dtype, FP8 checked
    fits = _fits_fn(arch, priced, device)
    if not fits(dataclasses.replace(priced, batch_size=1)):
        return 0, None
    b = _largest(lambda v: fits(dataclasses.replace(priced, batch_size=v)), 1, limit)
    return b, predict_generation(req.replace(batch_size=b), device)


def max_generation_context(req: Workload, device
                           ) -> tuple[int, str, GenerationPrediction | None]:
    """Largest prompt (``input_len``) that ``req.batch_size`` requests generating
    ``req.output_len`` tokens each (default 1) can hold on ``device``: ``(input_len,
    limited_by, prediction)`` with ``limited_by`` ``"memory"`` or ``"max_positions"`` (the
    model's own limit); ``(0, "memory", None)`` when not even a 1-token prompt fits."""
    import dataclasses

    from perfcast.llm.arch import llm_arch

    req = resolve(req)
    if req.output_len is None:
        req = req.replace(output_len=1)
    arch = llm_arch(req.spec)
    top = (arch.max_positions or MAX_SIZE) - req.output_len
    if top < 1:
        raise PerfcastError(f"{arch.model_id} holds at most {arch.max_positions:,} positions; "
                            f"--output-len {req.output_len:,} leaves no room for a prompt")
    top = min(top, MAX_SIZE)
    req.check_serving(arch, input_len=1)
    priced = serving_precision(req, device, [])
    fits = _fits_fn(arch, priced, device)
    if not fits(dataclasses.replace(priced, input_len=1)):
        return 0, "memory", None
    i = _largest(lambda v: fits(dataclasses.replace(priced, input_len=v)), 1, top)
    limited = "max_positions" if i == top and arch.max_positions else "memory"
    return i, limited, predict_generation(req.replace(input_len=i), device)
