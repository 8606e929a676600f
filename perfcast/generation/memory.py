"""Memory per device of a generation request (weights, KV cache, activations, runtime) and
whether it fits."""

from __future__ import annotations

from perfcast.workload import Workload
from perfcast.generation.settings import prompt_pass_tokens


def _runtime_overhead_mb() -> float:
    """The measured CUDA context + library overhead (``memory/runtime_overhead.json``, read
    without importing the memory simulation and torch)."""
    import json

    from perfcast.paths import package_data

    doc = json.loads(package_data("memory", "runtime_overhead.json").read_text())
    return float(doc["runtime_overhead_mb"])


def memory_per_device(arch, req: Workload) -> dict[str, float]:
    """MiB per device: weights and KV cache (vLLM: whole 16-token blocks) split over the
    devices (tensor parallelism shards every layer, llama.cpp's layer split gives each device
    its layers: both ``1/n``; with fewer KV heads than devices, tensor parallelism replicates
    them, :func:`~perfcast.llm.arch.kv_heads_per_device`), the prefill's activation peak (the
    tensor simulation of the model's prefill graph, :mod:`perfcast.llm.graphs`, at the batch's prompt tokens; a
    closed form when the model was never simulated) and the runtime (measured CUDA context and
    library overhead)."""
    from perfcast.llm.arch import VLLM_BLOCK_TOKENS, kv_heads_per_device
    from perfcast.llm.graphs import activation_peak_mb

    n, mib = req.tensor_parallel, 2.0 ** 20
    block = VLLM_BLOCK_TOKENS if req.engine == "vllm" else None
    seqs = req.batch_size
    kv = arch.kv_cache_bytes(seqs, req.input_len + req.output_len, req.precision, block=block)
    if req.engine != "llama.cpp":  # fewer KV heads than devices: each one replicated
        kv *= kv_heads_per_device(arch, n) * n / arch.kv_heads
    # llama.cpp: one ubatch of ≤ min(n_batch, n_ubatch) tokens of all the sequences at a time
    ub = prompt_pass_tokens(req)
    tokens = min(seqs * req.input_len, ub) if ub else seqs * req.input_len
    act, _ = activation_peak_mb(arch, tokens, req.precision)
    return {"weights": arch.weight_bytes(req.precision) / n / mib, "kv_cache": kv / n / mib,
            "activations": act / n, "runtime": _runtime_overhead_mb()}


def _fits_fn(arch, req: Workload, device):
    """``fits(request) -> bool``: the memory need per device (weights, KV cache, activations,
    runtime) within the device — for vLLM within its ``gpu_memory_utilization`` share, which
    is where vLLM profiles all of it before sizing the KV cache."""
    from perfcast.llm.physics import MEMORY_UTILIZATION

    cap = float(device.memory_mb)

    def fits(r: Workload) -> bool:
        need = sum(memory_per_device(arch, r).values())
        return need <= (MEMORY_UTILIZATION * cap if r.engine == "vllm" else cap)

    return fits


def _largest(ok, lo: int, hi: int) -> int:
    """Largest ``v`` in ``[lo, hi]`` with ``ok(v)`` for a monotone ``ok`` (``ok(lo)`` true)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo
