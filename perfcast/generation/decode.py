"""Decode steps: the shipped ``llm-latency`` model's answer over the arithmetic bound, the
envelope that keeps it monotone, the caps by dominating GPUs and llama.cpp's sequences."""

from __future__ import annotations

import math

from typing import Any
from perfcast._memo import Memo
from perfcast.errors import PerfcastError
from perfcast.workload import Workload
from perfcast.generation.settings import _llama_settings, prompt_pass_tokens, resolve


def _completed(device, precision: str, notes: list[str] | None = None):
    """``device`` with the spec fields its sheet left out derived by a stated rule
    (:func:`perfcast.devices.derive.complete`: a bf16 peak, the compute capability, the
    architecture year …); the derivations of the fields generation reads — the peak of the
    precision its GEMMs run in, the architecture year the power model reads — are appended to
    ``notes``."""
    from perfcast.devices.derive import complete, notes_for
    from perfcast.llm.physics import COMPUTE_PRECISION

    done = complete(device)[0]
    if notes is not None:
        comp = COMPUTE_PRECISION.get(precision, "fp16")
        notes.extend(notes_for(device, {f"peak_{comp}_tflops", "arch_year"}))
    return done


def _serving_dominance(x, a, precision: str) -> str | None:
    """Why GPU ``x`` serves no slower than GPU ``a`` (``None`` when it need not). Only within a
    vendor — the engines run other kernels on another vendor's GPUs (llama.cpp's HIP backend on
    an MI300X is slower than its CUDA one on the H100 the MI300X beats in every number) — and
    then when ``x`` is at least as good in every spec number (:func:`perfcast.anchors.dominates`)
    or in the two numbers that bound a decode step and a prefill: the memory bandwidth and the
    peak of the precision the GEMMs run in."""
    from perfcast.anchors import dominates
    from perfcast.devices.derive import complete
    from perfcast.llm.physics import COMPUTE_PRECISION

    cx, ca = complete(x)[0], complete(a)[0]
    vendor = str(cx.vendor or "").strip().lower()
    if not vendor or vendor != str(ca.vendor or "").strip().lower():
        return None
    if dominates(x, a):
        return "every spec number"
    prec = COMPUTE_PRECISION.get(precision, "fp16")
    pairs = ((cx.bandwidth_gbs, ca.bandwidth_gbs),
             (cx.peak_tflops(prec), ca.peak_tflops(prec)))
    if all(vx is not None and va is not None and float(vx) >= float(va) for vx, va in pairs):
        return f"memory bandwidth and {prec} peak"
    return None


def dominated_gpus(device, precision: str, need_mb: float | None = None,
                   share: float = 1.0) -> list[tuple[Any, str]]:
    """``(GPU, why)`` for every built-in GPU ``device`` serves no slower than
    (:func:`_serving_dominance`) and on which ``need_mb`` per device fits in ``share`` of the
    memory: a generation answer on ``device`` is capped at theirs, whatever a learned factor
    says between two GPUs (a newer GPU from its spec sheet is never slower than an older one
    it beats in what bounds the work)."""
    from perfcast.devices import device_origin, list_devices

    if not device.is_gpu:
        return []
    out = []
    for d in list_devices():
        if (not d.is_gpu or d.key == device.key or device_origin(d.key) != "built-in"
                or (need_mb is not None and (d.memory_mb or 0.0) * share < need_mb)):
            continue
        why = _serving_dominance(device, d, precision)
        if why:
            out.append((d, why))
    return out


def _dominated_if_unmeasured(lat, device, precision: str, need_mb: float | None = None,
                             share: float = 1.0) -> list[tuple[Any, str]]:
    """:func:`dominated_gpus` for a GPU the latency model has no measurements of (a spec sheet,
    a registry GPU outside the data); ``[]`` for a measured one, whose learned answer stands
    (capping it at another GPU's extrapolated answer made the measured rows worse)."""
    if device.key in set(lat.trained_on_.get("devices", [])):
        return []
    return dominated_gpus(device, precision, need_mb, share)


def _learned_decode_s(lat, rows, devices: dict):
    """Seconds of the decode steps the learned latency model gives each row of ``rows`` (one
    static batch each, its ``device`` a key of ``devices``)."""
    import numpy as np

    from perfcast.llm.model import features

    X = features(rows, "latency_s", devices=devices)
    t, info = lat.predict(X, parts=True)
    if info:
        return np.asarray(info["decode_s"], dtype=float)
    return np.asarray(t * X["log_decode_s"].map(math.exp).to_numpy() / X["bound_s"].to_numpy(),
                      dtype=float)


#: The first grid point of each dimension of the decode envelope (:func:`_decode_envelope`):
#: running sequences, prompt tokens, output tokens — shorter ones are answered as these.
_ENVELOPE_START = {"batch": 1, "input": 16, "output": 2}
#: Envelope grids kept per process (model, device, engine, precision, devices, grid): ``serve``
#: and the planner ask the same grids again.
_ENVELOPES = Memo(256)


def _ladder(start: int, x: int) -> list[int]:
    """Powers of two × ``start`` from ``start`` up to the first ≥ ``x``."""
    out = [start]
    while out[-1] < x:
        out.append(out[-1] * 2)
    return out


def _monotone(grid):
    """``grid`` made non-decreasing along every axis by a running maximum from below: a dip
    of the learned model (an answer faster than a smaller request's) is raised to the smaller
    request's answer (its cost in accuracy, held out: reports/llm/consistency.md)."""
    import numpy as np

    for axis in range(grid.ndim):
        grid = np.maximum.accumulate(grid, axis=axis)
    return grid


def _decode_envelope(lat, rows, device) -> Any:
    """Seconds of the decode steps of each row of ``rows`` (one request each, the same model,
    engine, precision and devices; ``batch_size`` / ``concurrent``, ``input_len``,
    ``output_len`` vary) on ``device``, non-decreasing in the running sequences, the prompt and
    the output length by construction: the learned model is evaluated on a fixed grid of powers
    of two (:data:`_ENVELOPE_START`), made monotone along each axis (:func:`_monotone`) and
    interpolated multilinearly — in log₂ of the sequences and the prompt, linearly in the
    output tokens (the decode steps add up). A grid value never depends on the request, so a
    larger request can only read larger values. llama.cpp's rows are one sequence each (the
    data has no other; :func:`_llama_sequences_ratio` scales to more): no batch axis, its
    ``n_batch`` / ``n_ubatch`` part of the grid's key."""
    import numpy as np

    from perfcast.features.table import Table

    first = rows.iloc[0]
    llama = first["framework"] == "llama.cpp"
    bs = rows["concurrent"].to_numpy(dtype=float)
    ins = rows["input_len"].to_numpy(dtype=float)
    outs = rows["output_len"].to_numpy(dtype=float)
    B = [1] if llama else _ladder(_ENVELOPE_START["batch"], int(bs.max()))
    I = _ladder(_ENVELOPE_START["input"], int(ins.max()))
    O = _ladder(_ENVELOPE_START["output"], int(outs.max()))
    knobs = (first.get("n_batch"), first.get("n_ubatch")) if llama else ()
    key = (str(first["model"]), device, str(first["framework"]), str(first["precision"]),
           int(first["n_devices"]), tuple(B), len(I), len(O), *map(str, knobs), id(lat))
    grid = _ENVELOPES.get(key)
    if grid is None:
        pts = [(b, i, o) for b in B for i in I for o in O]
        g = Table.from_records([{**first.to_dict(), "device": device.key,
                                "batch_size": b, "concurrent": b,
                                "input_len": i, "output_len": o} for b, i, o in pts])
        dec = _learned_decode_s(lat, g, {device.key: device})
        grid = _monotone(np.asarray(dec, dtype=float).reshape(len(B), len(I), len(O)))
        _ENVELOPES.put(key, grid)

    def cell(values, ladder, log: bool):
        """Index of each value's cell on ``ladder`` and its weight toward the upper point."""
        f = np.log2 if log else (lambda v: v)
        lo = f(np.asarray(ladder, dtype=float))
        x = np.clip(f(np.maximum(values, 1.0)), lo[0], lo[-1])
        if len(lo) == 1:
            return np.zeros(len(x), dtype=int), np.zeros_like(x)
        j = np.clip(np.searchsorted(lo, x, side="right") - 1, 0, len(lo) - 2)
        return j, (x - lo[j]) / (lo[j + 1] - lo[j])

    jb, wb = cell(bs, B, True) if not llama else (np.zeros(len(rows), dtype=int),
                                                   np.zeros(len(rows)))
    ji, wi = cell(ins, I, True)
    jo, wo = cell(outs, O, False)
    out = np.zeros(len(rows))
    for db in (0, 1):
        for di in (0, 1):
            for do in (0, 1):
                w = ((wb if db else 1 - wb) * (wi if di else 1 - wi) * (wo if do else 1 - wo))
                vb = np.minimum(jb + db, len(B) - 1)
                vi = np.minimum(ji + di, len(I) - 1)
                vo = np.minimum(jo + do, len(O) - 1)
                out += w * grid[vb, vi, vo]
    return out


def _dominance_capped(lat, rows, device, below: list) -> tuple[Any, tuple | None]:
    """Seconds of the decode steps of each row of ``rows`` on ``device``: the monotone
    envelope of the learned model (:func:`_decode_envelope`), capped at the envelope of any GPU
    of ``below`` (:func:`dominated_gpus`) that answers faster; and ``(GPU, why)`` of the one
    that capped. A GPU's whole grid is evaluated only when its learned answer at the grid
    point below the request is faster (its envelope is at least the smallest grid value of the
    request's cell, that corner's — pruning by it is exact)."""
    import numpy as np

    from perfcast.features.table import Table

    env = _decode_envelope(lat, rows, device)
    who = None
    if below:
        llama = rows["framework"].iloc[0] == "llama.cpp"
        corner = rows.copy()
        for col, dim in (("input_len", "input"), ("output_len", "output"),
                         *(() if llama else (("concurrent", "batch"),))):
            start = _ENVELOPE_START[dim]
            v = np.maximum(rows[col].to_numpy(dtype=float), start)
            corner[col] = (start * 2 ** np.floor(np.log2(v / start) + 1e-9)).astype(int)
        if not llama:
            corner["batch_size"] = corner["concurrent"]
        many = Table.concat([corner.assign(device=d.key) for d, _ in below])
        at = _learned_decode_s(lat, many, {d.key: d for d, _ in below}).reshape(len(below),
                                                                                len(rows))
        best = env
        for k in np.flatnonzero((at < env).any(axis=1)):
            other = _decode_envelope(lat, rows.assign(device=below[k][0].key), below[k][0])
            if (other < best).any():
                best, who = np.minimum(best, other), below[k]
        env = best
    return env, who


def _llama_sequences_ratio(arch, device, req: Workload, batches) -> Any:
    """For llama.cpp: the arithmetic bound of the decode steps of ``b`` concurrent sequences
    ÷ that of one sequence, for each ``b`` of ``batches`` (the weights are streamed once per
    step whatever ``b``; the KV cache and the FLOPs grow with it) — what scales the learned
    one-sequence answer, LLM-Inference-Bench having llama.cpp rows of one sequence only."""
    import numpy as np

    from perfcast.llm.physics import bound_of, request_work

    def decode_s(b: int) -> float:
        w = request_work(arch, device, batch=int(b), input_len=req.input_len,
                         output_len=req.output_len, n_devices=req.tensor_parallel,
                         precision=req.precision, engine=req.engine,
                         prompt_chunk=prompt_pass_tokens(req))
        return bound_of(w, device, req.precision).decode_s

    one = decode_s(1)
    return np.array([decode_s(b) / one if one > 0 else 1.0 for b in batches])


def decode_step_seconds(req: Workload, device, batches) -> list[float]:
    """Seconds of one decode step of ``req`` (its lengths, engine, precision, devices) at each
    number of running sequences in ``batches``: the decode steps the learned model gives a
    static batch of that many requests, ÷ (output − 1) — ``tpot_ms`` of
    :func:`predict_generation` for every batch in one call of the model (what the serving
    planner, :mod:`perfcast.decisions.serving`, interpolates). llama.cpp: the learned
    one-sequence answer × the arithmetic bound's ratio of ``b`` sequences to one
    (:func:`_llama_sequences_ratio`)."""
    from perfcast.features.table import Table
    from perfcast.llm.arch import llm_arch
    from perfcast.shipped import load_shipped

    req = resolve(req)
    req.require_lengths()
    device = _completed(device, req.precision)
    if req.output_len < 2:
        raise PerfcastError("a decode step needs --output-len ≥ 2")
    llama = req.engine == "llama.cpp"
    batches = [int(b) for b in batches]
    rows = Table.from_records([{"model": req.model.name, "device": device.key,
                               "n_devices": req.tensor_parallel, "framework": req.engine,
                               "precision": req.precision, "batch_size": 1 if llama else b,
                               "concurrent": 1 if llama else b, "input_len": req.input_len,
                               "output_len": req.output_len, **_llama_settings(req)}
                              for b in batches])
    lat = load_shipped("llm-latency")
    dec, _ = _dominance_capped(lat, rows, device,
                               _dominated_if_unmeasured(lat, device, req.precision))
    if llama:
        dec = dec * _llama_sequences_ratio(llm_arch(req.spec), device, req, batches)
    return [float(v) / (req.output_len - 1) for v in dec]
