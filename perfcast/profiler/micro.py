"""This machine's roofline, measured: sustained FP32 GFLOP/s and memory bandwidth per thread count.

A CPU's spec sheet rarely says what PyTorch gets out of it (clocks under vector load, SMT, the
BLAS library, a shared host). Two micro-benchmarks, a few seconds each, measure the two numbers
a roofline needs, at every thread count asked for:

* **compute** — ``torch.mm`` of two ``N × N`` FP32 matrices (``N`` = 1024; 2·N³ FLOPs), best of
  several repetitions: the sustained GEMM peak of the BLAS PyTorch uses.
* **bandwidth** — ``torch.add(a, b, out=c)`` over 32 Mi-element FP32 tensors (384 MiB moved per
  call, far beyond any cache): the streaming bandwidth an element-wise kernel sees.

On CUDA the same two kernels are timed with ``torch.cuda.Event`` after a warm-up (real API;
tested only where a GPU is present).

The result is a :class:`~perfcast.devices.machine.MachineProfile` (JSON-serialisable, stored
inside the predictors fitted on this machine so their physics prior travels with them).
"""

from __future__ import annotations

import platform
import time

from perfcast.devices.machine import MachineProfile
from perfcast.errors import PerfcastError

GEMM_N = 1024
STREAM_ELEMENTS = 32 * 2**20


def _best_ms(fn, reps: int, sync=None) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        best = min(best, (time.perf_counter() - t) * 1e3)
    return best


def measure_machine(threads: list[int] | None = None, *, device: str = "cpu",
                    reps: int = 5) -> MachineProfile:
    """Measure this machine's GEMM peak and streaming bandwidth at each thread count (CPU) or
    on the current CUDA device (``device`` a GPU key; ``threads`` ignored). ≈ 1–3 s per count."""
    import torch

    cuda = device != "cpu"
    if cuda and not torch.cuda.is_available():
        raise PerfcastError(f"{device}: no CUDA device visible to PyTorch here; calibrate a GPU "
                            f"on the machine that has it")
    dev = "cuda" if cuda else "cpu"
    counts = [1] if cuda else sorted(set(threads or [torch.get_num_threads()]))
    if any(t < 1 for t in counts):
        raise PerfcastError(f"thread counts must be ≥ 1, got {counts}")
    old = torch.get_num_threads()
    try:  # the CPU's model name as detected from /proc/cpuinfo (the registry's `cpu` row)
        from perfcast.devices import get_device

        cpu_name = get_device("cpu").name
    except Exception:  # noqa: BLE001 - a name is a label, not a reason to fail
        cpu_name = platform.processor() or platform.machine()
    prof = MachineProfile(device=device, cpu=cpu_name,
                          measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
                          torch_version=torch.__version__)
    sync = torch.cuda.synchronize if cuda else None
    try:
        g = torch.Generator(device=dev).manual_seed(0)
        a = torch.rand(GEMM_N, GEMM_N, generator=g, device=dev)
        b = torch.rand(GEMM_N, GEMM_N, generator=g, device=dev)
        x = torch.rand(STREAM_ELEMENTS, generator=g, device=dev)
        y = torch.rand(STREAM_ELEMENTS, generator=g, device=dev)
        z = torch.empty_like(x)
        for t in counts:
            if not cuda:
                torch.set_num_threads(t)
            torch.mm(a, b)  # warm-up (BLAS thread pool, page faults)
            torch.add(x, y, out=z)
            mm = _best_ms(lambda: torch.mm(a, b), reps, sync)
            add = _best_ms(lambda: torch.add(x, y, out=z), reps, sync)
            prof.gflops[t] = 2.0 * GEMM_N**3 / (mm * 1e-3) / 1e9
            prof.bandwidth_gbs[t] = 3.0 * 4 * STREAM_ELEMENTS / (add * 1e-3) / 1e9
    finally:
        if not cuda:
            torch.set_num_threads(old)
    return prof


__all__ = ["MachineProfile", "measure_machine"]
