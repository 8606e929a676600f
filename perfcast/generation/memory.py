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
    tensor simulation of the model's prefill graph, :mod:`perfcast.llm.graphs`, at the tokens of
    one prefill pass — the engine's chunk, :data:`perfcast.llm.prefill.ENGINE_PREFILL`, or the
    batch's prompts where it has none; a closed form when the model was never simulated) and
    the runtime (measured CUDA context and library overhead)."""
    from perfcast.llm.arch import VLLM_BLOCK_TOKENS, kv_heads_per_device
    from perfcast.llm.graphs import activation_peak_mb

    n, mib = req.tensor_parallel, 2.0 ** 20
    block = VLLM_BLOCK_TOKENS if req.engine == "vllm" else None
    seqs = req.batch_size
    kv = arch.kv_cache_bytes(seqs, req.input_len + req.output_len, req.precision, block=block)
    if req.engine != "llama.cpp":  # fewer KV heads than devices: each one replicated
        kv *= kv_heads_per_device(arch, n) * n / arch.kv_heads
    # one prefill pass at a time: llama.cpp's ubatch of ≤ min(n_batch, n_ubatch) tokens of all
    # the sequences, the engine's chunk elsewhere (vLLM's max_num_batched_tokens …; HF
    # transformers: the whole batch's prompts in one forward)
    from perfcast.llm.prefill import ENGINE_PREFILL

    ub = prompt_pass_tokens(req)
    if ub is None and req.engine in ENGINE_PREFILL:
        ub = ENGINE_PREFILL[req.engine].chunk
    tokens = min(seqs * req.input_len, ub) if ub else seqs * req.input_len
    act, _ = activation_peak_mb(arch, tokens, req.precision)
    weights = arch.weight_bytes(req.precision)
    out = {"weights": weights / n / mib, "kv_cache": kv / n / mib,
           "activations": act / n, "runtime": _runtime_overhead_mb()}
    E = getattr(req.layout, "expert", 1)
    if E > 1 and arch.moe:  # experts placed: E groups of n / E devices, experts / E each
        experts = weights * arch.expert_params / max(arch.params, 1)
        out["weights"] = (weights - experts) / n / mib
        out["expert_weights"] = experts / E / (n // E) / mib
    return out


def expert_placement_note(arch, req: Workload) -> str | None:
    """What ``notes`` say of ``--expert-parallel E`` in serving (``None``: not asked)."""
    E, n = getattr(req.layout, "expert", 1), req.tensor_parallel
    if E <= 1:
        return None
    per = arch.experts // E
    return (f"expert_parallel: {arch.experts} experts of every MoE layer placed on {E} groups "
            f"of {n // E} device(s): group g holds experts {per}·g … {per}·g + {per - 1} "
            f"(each split {n // E} way(s) by tensor parallelism), the attention and dense "
            f"layers split {n} ways as before — expert_weights: the experts' share of the "
            f"weight bytes ({arch.expert_params / max(arch.params, 1):.1%} of the parameters) "
            f"÷ {n}; tokens dispatched to their top-{arch.experts_per_token} experts' groups "
            f"and combined (an all-to-all in place of the experts' all-reduce), routing "
            f"assumed uniform; time_ms: the tensor-parallel step of {n} devices (the "
            f"all-to-all's difference from the all-reduce is not modelled)")


def check_expert_parallel(arch, req: Workload) -> None:
    """``--expert-parallel E`` of ``--mode generate``: an MoE model, E dividing its experts and
    the ``--tensor-parallel`` devices, an engine that places experts (vLLM, TensorRT-LLM)."""
    from perfcast.errors import PerfcastError

    E, n = getattr(req.layout, "expert", 1), req.tensor_parallel
    if E <= 1:
        return
    if not arch.moe:
        raise PerfcastError(f"--expert-parallel {E}: {arch.model_id} is not a mixture of "
                            f"experts (no experts to place); use 1")
    if req.engine not in ("vllm", "trt-llm"):
        raise PerfcastError(f"--expert-parallel: vLLM (--enable-expert-parallel) and "
                            f"TensorRT-LLM (moe_ep_size) place experts on devices; --engine "
                            f"{req.engine} does not")
    if arch.experts % E:
        ok = [d for d in range(1, arch.experts + 1) if arch.experts % d == 0]
        raise PerfcastError(f"--expert-parallel {E} does not divide {arch.model_id}'s "
                            f"{arch.experts} experts (use one of {', '.join(map(str, ok))})")
    if n % E:
        raise PerfcastError(f"--expert-parallel {E} must divide the --tensor-parallel {n} "
                            f"serving devices (E groups of them hold the experts)")


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
