"""``perfcast collect``: measure a sweep of configurations into the measurement store.

A sweep is models × batch sizes × input sizes (vision) or sequence lengths (text) × modes ×
precisions, from flags or a YAML file::

    device: cpu            # the local device's registry key (cpu, or e.g. rtx4090 on a GPU box)
    warmup: 5
    iters: 30
    threads: 1
    sweeps:
      - models: [timm:resnet18, timm:mobilenetv3_small_100]
        batch_sizes: [1, 4]
        input_sizes: ["3,128,128", "3,160,160"]
        modes: [infer, train]
        precisions: [fp32]
        optimizer: sgd-momentum

Resumable: configurations already in the store (any status) are skipped, so rerunning the same
spec measures only what is missing; ``retry_failed`` re-measures failed rows. Each configuration
runs in a fresh subprocess (timeout, memory watchdog) and is committed when it finishes; Ctrl-C
kills the running one and records nothing for it.
"""

from __future__ import annotations

import gc
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.store.db import MeasureConfig, Measurement, MeasurementStore
from perfcast.workload import DEFAULT_OPTIMIZER


@dataclass
class CollectSettings:
    """How to measure (not part of a configuration's identity)."""

    warmup: int = 5
    iters: int = 30
    timeout_s: float = 600.0
    cooldown_s: float = 1.0
    memory_limit_mb: float | None = None
    cpus: list[int] | None = None
    retry_failed: bool = False
    torch_device: str | None = None
    #: time budget (s) of one configuration's timed loop: stop after ``iters`` iterations or
    #: this many seconds, whichever comes first (at least 3 timed iterations; warm-up gets the
    #: same budget, at least 1 iteration). ``None``: always ``iters``.
    max_seconds: float | None = None

    def validate(self) -> None:
        if self.warmup < 0:
            raise PerfcastError(f"warm-up iterations must be ≥ 0, got {self.warmup}")
        if self.iters < 1:
            raise PerfcastError(f"timed iterations must be ≥ 1, got {self.iters}")
        if self.timeout_s <= 0:
            raise PerfcastError(f"timeout must be positive, got {self.timeout_s}")
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise PerfcastError(f"--max-seconds must be positive, got {self.max_seconds}")


@dataclass
class Sweep:
    models: list[str]
    batch_sizes: list[int] = field(default_factory=lambda: [1])
    input_sizes: list[str | None] = field(default_factory=lambda: [None])
    seq_lens: list[int | None] = field(default_factory=lambda: [None])
    modes: list[str] = field(default_factory=lambda: ["infer"])
    precisions: list[str] = field(default_factory=lambda: ["fp32"])
    optimizer: str = DEFAULT_OPTIMIZER

    def configs(self, device: str, threads: int | None, repeat: int = 0) -> list[MeasureConfig]:
        """Every combination, each validated as a :class:`~perfcast.workload.Workload`."""
        out = []
        for model, b, size, seq, mode, prec in itertools.product(
                self.models, self.batch_sizes, self.input_sizes, self.seq_lens, self.modes,
                self.precisions):
            out.append(MeasureConfig.of(model, batch_size=b, input_size=size, seq_len=seq,
                                        mode=mode, precision=prec, optimizer=self.optimizer,
                                        device=device, threads=threads, repeat=repeat))
        return out


def load_spec(path: str | Path) -> tuple[list[Sweep], dict[str, Any]]:
    """Read a YAML sweep file → (sweeps, top-level options)."""
    import yaml

    p = Path(path)
    if not p.exists():
        raise PerfcastError(f"spec file not found: {p}")
    try:
        doc = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise PerfcastError(f"spec file {p} is not valid YAML: {str(exc).splitlines()[0]}") from exc
    raw = doc.pop("sweeps", None)
    if raw is None:
        raw = [{k: doc.pop(k) for k in list(doc)
                if k in ("models", "batch_sizes", "input_sizes", "seq_lens", "modes",
                         "precisions", "optimizer")}]
    sweeps = []
    for i, s in enumerate(raw):
        if not isinstance(s, dict) or not s.get("models"):
            raise PerfcastError(f"sweep {i} in {p} needs a non-empty 'models' list")
        unknown = set(s) - {"models", "batch_sizes", "input_sizes", "seq_lens", "modes",
                            "precisions", "optimizer"}
        if unknown:
            raise PerfcastError(f"sweep {i} in {p} has unknown keys: {', '.join(sorted(unknown))}")
        sweeps.append(Sweep(**{k: (list(v) if isinstance(v, (list, tuple)) else v)
                               for k, v in s.items()}))
    return sweeps, doc


def graph_key_for(cfg: MeasureConfig) -> str | None:
    """Cache key of the graph of ``cfg`` (links a measurement to ``perfcast inspect``'s cache)."""
    try:
        return cfg.workload.key()
    except PerfcastError:
        return None


def collect(store: MeasurementStore, configs: Iterable[MeasureConfig], settings: CollectSettings,
            progress: Callable[[int, int, MeasureConfig, Measurement | None], None] | None = None,
            runner: Callable[..., Measurement] | None = None) -> dict[str, int]:
    """Measure every configuration not yet in ``store``. Returns counts by status."""
    from perfcast.profiler.runner import run_isolated

    settings.validate()
    runner = runner or run_isolated
    configs = list(dict.fromkeys(configs))  # dedupe, keep order
    done = store.done_keys() if not settings.retry_failed else store.done_keys(["ok"])
    todo = [c for c in configs if c.key() not in done]
    if settings.retry_failed:
        store.delete(c.key() for c in todo)
    counts = {"skipped": len(configs) - len(todo), "ok": 0, "oom": 0, "timeout": 0, "failed": 0}
    for i, cfg in enumerate(todo):
        if progress:
            progress(i, len(todo), cfg, None)
        m = runner(cfg, warmup=settings.warmup, iters=settings.iters,
                   timeout_s=settings.timeout_s, memory_limit_mb=settings.memory_limit_mb,
                   cpus=settings.cpus, torch_device=settings.torch_device,
                   max_seconds=settings.max_seconds)
        m.graph_key = graph_key_for(cfg)
        store.add(m)
        counts[m.status] = counts.get(m.status, 0) + 1
        if progress:
            progress(i + 1, len(todo), cfg, m)
        gc.collect()
        if settings.cooldown_s and i + 1 < len(todo):
            time.sleep(settings.cooldown_s)
    return counts
