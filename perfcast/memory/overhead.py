"""GPU memory beyond live tensors (MiB): CUDA context, cuDNN/cuBLAS handles and workspaces,
allocator caching — what ``nvidia-smi`` shows that the tensor-memory simulation does not count.

Measured, not assumed: ``runtime_overhead.json`` is written by
``scripts/derive_runtime_overhead.py`` from GPUMemNet's A100 measurements beside perfcast's
simulation of the same runs (tiny models, where measured − simulated is the fixed part).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from perfcast.paths import package_data


@lru_cache(maxsize=1)
def runtime_overhead() -> dict[str, Any]:
    """The measured record: ``runtime_overhead_mb`` (median), ``p10_mb``, ``p90_mb``, ``runs``,
    ``device``, ``source``."""
    return json.loads(package_data("memory", "runtime_overhead.json").read_text())


def runtime_overhead_mb() -> float:
    """Median measured runtime overhead of a PyTorch process on a GPU (MiB)."""
    return float(runtime_overhead()["runtime_overhead_mb"])
