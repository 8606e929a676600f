"""Environment fingerprint recorded with every measurement."""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fingerprint(device: str = "cpu") -> dict[str, Any]:
    """CPU model, cores, load, GPU + driver (if CUDA), torch/perfcast/python versions."""
    import torch

    from perfcast._version import __version__

    env: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch": torch.__version__,
        "perfcast": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
    }
    try:
        env["loadavg_1m"] = round(os.getloadavg()[0], 2)
    except OSError:
        pass
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["cuda"] = torch.version.cuda
        try:
            import pynvml

            pynvml.nvmlInit()
            env["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception:  # noqa: BLE001
            env["driver"] = None
    return env
