"""Measure one configuration on the local device, in this process.

Inference latency (ms per batch, one ``no_grad`` forward) or training step time (forward + loss +
backward + optimizer step + ``zero_grad``, ms per batch): W warm-up and T timed iterations,
statistics median / mean / p10 / p90 / std / n.

* CPU: ``time.perf_counter`` per iteration; peak live tensor bytes of one extra (untimed)
  iteration with :mod:`perfcast.memory.tracker`; peak RSS increase over the RSS before the model
  was built; energy from RAPL (``/sys/class/powercap``) when readable, else ``None``.
* CUDA (written against the real APIs, untested on this project's CPU-only machines):
  ``torch.cuda.Event`` timing, ``max_memory_allocated/reserved``, NVML used memory and NVML's
  total-energy counter (nvidia-ml-py) around the timed iterations; each row's ``env`` holds
  ``gpu_power``: the enforced power limit, the default limit, the limit range and the idle
  power read before the first step (:meth:`_Nvml.power_info`; tested with a mocked NVML).

Models are built with random weights (timm ``pretrained=False``, torchvision ``weights=None``,
transformers ``from_config``); inputs are random.
"""

from __future__ import annotations

import gc
import resource
import statistics
import time
from pathlib import Path

from perfcast.errors import PerfcastError
from perfcast.memory.simulate import first_float, make_optimizer
from perfcast.store.db import MeasureConfig, Measurement
from perfcast.zoo import import_library

MB = float(2**20)


# --------------------------------------------------------------------------- model building
def build_model(cfg: MeasureConfig, device: str):
    """Real (random-init) model and random example inputs for ``cfg`` on torch device
    ``device`` (:func:`perfcast.zoo.build_model`)."""
    from perfcast.zoo import build_model as zoo_build

    if cfg.workload.model.kind not in ("timm", "torchvision", "hf", "module"):
        raise PerfcastError(f"perfcast collect measures timm:, torchvision:, hf: and "
                            f"module:callable models, not {cfg.model!r}")
    built = zoo_build(cfg.workload, device)
    return built.module, built.args


def make_step(model, inputs, cfg: MeasureConfig, device: str):
    """A zero-argument callable running one inference pass or one training step."""
    import contextlib

    import torch

    dev_type = "cuda" if device.startswith("cuda") else "cpu"
    if cfg.precision == "fp32":
        autocast = contextlib.nullcontext
    elif cfg.precision in ("amp", "fp16", "bf16"):
        dtype = torch.bfloat16 if cfg.precision == "bf16" else torch.float16
        if cfg.precision == "fp16":
            model.half()
            inputs = tuple(i.half() if i.is_floating_point() else i for i in inputs)
            autocast = contextlib.nullcontext
        else:
            def autocast():
                return torch.autocast(device_type=dev_type, dtype=dtype)
    else:
        raise PerfcastError(f"unknown precision {cfg.precision!r}")

    if cfg.mode == "infer":
        model.eval()

        def step():
            with torch.no_grad(), autocast():
                return model(*inputs)
        return step

    model.train()
    opt = make_optimizer(cfg.optimizer, model.parameters())
    scaler = (torch.amp.GradScaler(dev_type) if cfg.precision == "amp" and dev_type == "cuda"
              and cfg.optimizer != "none" else None)

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = first_float(model(*inputs)).float().mean()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss
    return step


# --------------------------------------------------------------------------- energy
def _rapl_files() -> list[Path]:
    root = Path("/sys/class/powercap")
    if not root.exists():
        return []
    files = []
    for d in sorted(root.glob("intel-rapl:*")):
        if d.name.count(":") == 1 and (d / "energy_uj").exists():  # package domains only
            files.append(d / "energy_uj")
    return files


def _read_rapl_uj(files: list[Path]) -> float | None:
    try:
        return float(sum(int(f.read_text()) for f in files))
    except (OSError, ValueError):
        return None


class _Nvml:
    """NVML energy (mJ) and used memory for the current CUDA device; inert when unavailable."""

    def __init__(self, index: int = 0):
        self.handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # noqa: BLE001 - no NVML: energy stays None
            self.handle = None

    def energy_mj(self) -> float | None:
        if self.handle is None:
            return None
        try:
            return float(self.nv.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception:  # noqa: BLE001 - pre-Volta GPUs have no energy counter
            return None

    def power_info(self, idle_samples: int = 5, interval_s: float = 0.1) -> dict | None:
        """``{power_limit_w, default_power_limit_w, power_limit_min_w, power_limit_max_w,
        idle_w}`` of the device (W, NVML: enforced limit, default limit, the limit constraints,
        and the median of ``idle_samples`` power readings ``interval_s`` apart — call it while
        the GPU does nothing); a value NVML does not give is ``None``; ``None`` without NVML."""
        if self.handle is None:
            return None
        import statistics
        import time

        def watts(fn, *args):
            try:
                v = getattr(self.nv, fn)(self.handle, *args)
            except Exception:  # noqa: BLE001 - not supported on this GPU / driver
                return None
            return [x / 1e3 for x in v] if isinstance(v, (tuple, list)) else v / 1e3

        lo_hi = watts("nvmlDeviceGetPowerManagementLimitConstraints") or [None, None]
        idle = []
        for i in range(max(1, idle_samples)):
            w = watts("nvmlDeviceGetPowerUsage")
            if w is not None:
                idle.append(w)
            if i + 1 < idle_samples:
                time.sleep(interval_s)
        return {"power_limit_w": watts("nvmlDeviceGetEnforcedPowerLimit"),
                "default_power_limit_w": watts("nvmlDeviceGetPowerManagementDefaultLimit"),
                "power_limit_min_w": lo_hi[0], "power_limit_max_w": lo_hi[1],
                "idle_w": statistics.median(idle) if idle else None}

    def used_mb(self) -> float | None:
        if self.handle is None:
            return None
        try:
            return self.nv.nvmlDeviceGetMemoryInfo(self.handle).used / MB
        except Exception:  # noqa: BLE001
            return None


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / MB


def _stats(times_ms: list[float]) -> dict[str, float]:
    s = sorted(times_ms)
    n = len(s)

    def q(p: float) -> float:
        if n == 1:
            return s[0]
        k = (n - 1) * p
        lo, hi = int(k), min(int(k) + 1, n - 1)
        return s[lo] + (s[hi] - s[lo]) * (k - lo)

    return {"time_ms_median": statistics.median(s), "time_ms_mean": statistics.fmean(s),
            "time_ms_p10": q(0.10), "time_ms_p90": q(0.90),
            "time_ms_std": statistics.stdev(s) if n > 1 else 0.0, "n": n}


def is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "out of memory" in text or "can't allocate" in text \
        or "cannot allocate memory" in text or type(exc).__name__ == "OutOfMemoryError"


# --------------------------------------------------------------------------- the measurement
def measure(cfg: MeasureConfig, warmup: int = 5, iters: int = 30, device: str | None = None,
            track_memory: bool = True, max_seconds: float | None = None) -> Measurement:
    """Measure ``cfg`` in this process. Raises on error (the caller records failures).

    ``max_seconds`` bounds the warm-up and the timed loop each (at least 1 warm-up and 3 timed
    iterations are always run, fewer than ``warmup`` / ``iters`` when the step is slow).
    """
    import torch

    if warmup < 0 or iters < 1:
        raise PerfcastError("warm-up must be ≥ 0 and timed iterations ≥ 1")
    device = device or ("cuda" if cfg.device not in ("cpu",) and torch.cuda.is_available() else "cpu")
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    t_start = time.perf_counter()
    import_library(cfg.workload)  # library imports are not the model's memory
    gc.collect()
    rss0 = _rss_mb()
    torch.manual_seed(0)
    model, inputs = build_model(cfg, device)
    step = make_step(model, inputs, cfg, device)
    cuda = device.startswith("cuda")
    nvml = _Nvml(torch.cuda.current_device()) if cuda else None
    rapl = [] if cuda else _rapl_files()
    # the power limit the row runs at and the board's idle power (before any step: the GPU
    # idles), so users' own measurements can train the power model (perfcast.energy)
    gpu_power = nvml.power_info() if nvml else None

    w0 = time.perf_counter()
    for i in range(warmup):
        step()
        if max_seconds and time.perf_counter() - w0 > max_seconds:
            break
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    times: list[float] = []
    e0 = nvml.energy_mj() if nvml else _read_rapl_uj(rapl) if rapl else None
    wall0 = time.perf_counter()
    if cuda:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(iters)]
        for a, b in events:
            a.record()
            step()
            b.record()
        torch.cuda.synchronize()
        times = [a.elapsed_time(b) for a, b in events]
    else:
        for _ in range(iters):
            t = time.perf_counter()
            step()
            times.append((time.perf_counter() - t) * 1000.0)
            if max_seconds and len(times) >= 3 and time.perf_counter() - wall0 > max_seconds:
                break
    wall = time.perf_counter() - wall0
    e1 = nvml.energy_mj() if nvml else _read_rapl_uj(rapl) if rapl else None

    m = Measurement(config=cfg, warmup=warmup, threads_used=torch.get_num_threads())
    if gpu_power is not None:
        m.env["gpu_power"] = gpu_power
    for k, v in _stats(times).items():
        setattr(m, k, v)
    if e0 is not None and e1 is not None and e1 >= e0:
        joules = (e1 - e0) / (1e3 if nvml else 1e6)
        m.energy_j = joules / len(times)
        m.power_w = joules / wall if wall > 0 else None
        m.energy_source = "nvml" if nvml else "rapl"
    if cuda:
        m.cuda_max_allocated_mb = torch.cuda.max_memory_allocated() / MB
        m.cuda_max_reserved_mb = torch.cuda.max_memory_reserved() / MB
        m.peak_tensor_mb = m.cuda_max_allocated_mb
        m.nvml_used_mb = nvml.used_mb() if nvml else None
    elif track_memory:
        from perfcast.memory.tracker import measure_peak_tensor_bytes

        m.peak_tensor_mb = measure_peak_tensor_bytes(step) / MB
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB -> MiB (Linux)
    m.rss_increase_mb = max(0.0, peak_rss - rss0)
    m.duration_s = time.perf_counter() - t_start
    return m
