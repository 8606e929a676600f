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
spec measures only what is missing; ``retry_failed`` re-measures failed rows (each new row
replaces the old one in one transaction). Each configuration runs in a fresh subprocess
(timeout, memory watchdog; it dies with the collector) and is committed whole when it finishes;
Ctrl-C, SIGTERM or even SIGKILL records nothing for the running one.

One collector per store and machine: :func:`collect` holds the store's collector lock
(:mod:`perfcast.store.lock`) for the whole collection — a busy store is refused
(:class:`~perfcast.errors.PerfcastError` naming the holder) or, with ``wait_for_lock``, waited
for; the lock is released on return, error, Ctrl-C and SIGTERM, and a killed collector's lock
is taken over by the next one.
"""

from __future__ import annotations

import gc
import itertools
import math
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.store.db import MeasureConfig, Measurement, MeasurementStore
from perfcast.store.lock import CollectorLock
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
    #: a store held by another collector: wait until it is free (``False``: refuse, exit 2)
    wait_for_lock: bool = False
    #: seconds between two looks at a busy lock (``None``: ``$PERFCAST_LOCK_POLL``, else 5)
    lock_poll_s: float | None = None

    def validate(self) -> None:
        if self.warmup < 0:
            raise PerfcastError(f"warm-up iterations must be ≥ 0, got {self.warmup}")
        if self.iters < 1:
            raise PerfcastError(f"timed iterations must be ≥ 1, got {self.iters}")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise PerfcastError(f"timeout must be positive, got {self.timeout_s}")
        if self.max_seconds is not None and not (math.isfinite(self.max_seconds)
                                                 and self.max_seconds > 0):
            raise PerfcastError(f"--max-seconds must be positive, got {self.max_seconds}")
        if not (math.isfinite(self.cooldown_s) and self.cooldown_s >= 0):
            raise PerfcastError(f"--cooldown must be ≥ 0 seconds, got {self.cooldown_s}")
        if self.memory_limit_mb is not None and not (
                isinstance(self.memory_limit_mb, (int, float))
                and math.isfinite(self.memory_limit_mb) and self.memory_limit_mb > 0):
            # a limit ≤ 0 records every configuration as an OOM it never had
            raise PerfcastError(f"--memory-limit-mb must be a positive number of MiB, got "
                                f"{self.memory_limit_mb!r}")
        if self.cpus is not None and any(isinstance(c, bool) or not isinstance(c, int) or c < 0
                                         for c in self.cpus):
            raise PerfcastError(f"--cpus takes CPU ids (integers ≥ 0), got {self.cpus}")
        if self.lock_poll_s is not None and not self.lock_poll_s > 0:
            raise PerfcastError(f"lock poll interval must be positive, got {self.lock_poll_s}")


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


#: Keys of one sweep in a sweep file, and the collection options a file may set at its top.
SWEEP_KEYS = ("models", "batch_sizes", "input_sizes", "seq_lens", "modes", "precisions",
              "optimizer")
#: Top-level options of a sweep file → the type each value must have.
SPEC_OPTIONS = {"device": str, "threads": int, "warmup": int, "iters": int, "timeout": float,
                "cooldown": float, "memory_limit_mb": float, "cpus": list, "max_seconds": float}


def load_spec(path: str | Path) -> tuple[list[Sweep], dict[str, Any]]:
    """Read a YAML sweep file → (sweeps, top-level options). Every key is checked (an unknown
    one is an error naming it and the nearest valid key) and every value has its type; the
    workloads themselves are validated when :meth:`Sweep.configs` expands them."""
    import yaml

    from perfcast.errors import unknown_keys

    p = Path(path)
    if not p.is_file():
        raise PerfcastError(f"spec file not found: {p}")
    try:
        doc = yaml.safe_load(p.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError, ValueError) as exc:
        raise PerfcastError(f"spec file {p} is not valid YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(doc, dict):
        raise PerfcastError(f"spec file {p}: expected a mapping of options and 'sweeps', got "
                            f"{type(doc).__name__}")
    bad = unknown_keys(doc, ("sweeps", *SWEEP_KEYS, *SPEC_OPTIONS))
    if bad:
        raise PerfcastError(f"spec file {p}: unknown key(s) {bad}")
    raw = doc.pop("sweeps", None)
    if raw is None:
        raw = [{k: doc.pop(k) for k in list(doc) if k in SWEEP_KEYS}]
    elif any(k in doc for k in SWEEP_KEYS):
        raise PerfcastError(f"spec file {p}: give the sweep keys inside 'sweeps' or at the top, "
                            f"not both")
    if not isinstance(raw, list):
        raise PerfcastError(f"spec file {p}: 'sweeps' must be a list of sweeps")
    options = {k: _option(p, k, v) for k, v in doc.items()}
    sweeps = []
    for i, s in enumerate(raw):
        if not isinstance(s, dict) or not s.get("models"):
            raise PerfcastError(f"sweep {i} in {p} needs a non-empty 'models' list")
        bad = unknown_keys(s, SWEEP_KEYS)
        if bad:
            raise PerfcastError(f"sweep {i} in {p}: unknown key(s) {bad}")
        fields = {}
        for k, v in s.items():
            if k == "optimizer":
                if not isinstance(v, str):
                    raise PerfcastError(f"sweep {i} in {p}: optimizer must be a name, got {v!r}")
                fields[k] = v
                continue
            values = list(v) if isinstance(v, (list, tuple)) else [v]
            if not values or any(isinstance(x, (dict, list, bool)) for x in values):
                raise PerfcastError(f"sweep {i} in {p}: {k} must be a non-empty list of values, "
                                    f"got {v!r}")
            fields[k] = values
        sweeps.append(Sweep(**fields))
    return sweeps, options


def _option(path: Path, key: str, value: Any) -> Any:
    """A top-level option of a sweep file, checked against its type in :data:`SPEC_OPTIONS`."""
    want = SPEC_OPTIONS[key]
    if want is list:
        if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool)
                                                  and x >= 0 for x in value):
            raise PerfcastError(f"spec file {path}: {key} must be a list of CPU ids, got "
                                f"{value!r}")
        return value
    if want is str:
        if not isinstance(value, str) or not value:
            raise PerfcastError(f"spec file {path}: {key} must be a name, got {value!r}")
        return value
    import math

    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if want is int:
        ok = ok and float(value).is_integer() and value >= (1 if key == "threads" else 0)
    else:
        ok = ok and (value >= 0 if key == "cooldown" else value > 0)
    if not ok:
        kind = ("an integer ≥ 1" if key == "threads" else "an integer ≥ 0" if want is int
                else "a number ≥ 0" if key == "cooldown" else "a number > 0")
        raise PerfcastError(f"spec file {path}: {key} must be {kind}, got {value!r}")
    return int(value) if want is int else float(value)


def graph_key_for(cfg: MeasureConfig) -> str | None:
    """Cache key of the graph of ``cfg`` (links a measurement to ``perfcast inspect``'s cache)."""
    try:
        return cfg.workload.key()
    except PerfcastError:
        return None


def _runner_kwargs(settings: CollectSettings) -> dict[str, Any]:
    return {"warmup": settings.warmup, "iters": settings.iters, "timeout_s": settings.timeout_s,
            "memory_limit_mb": settings.memory_limit_mb, "cpus": settings.cpus,
            "torch_device": settings.torch_device, "max_seconds": settings.max_seconds}


def pinned_cpus(threads: int | None, allowed: Iterable[int] | None = None) -> list[int] | None:
    """The CPUs a Ray measurement of ``threads`` threads is pinned to when ``--cpus`` was not
    given: the first ``threads`` of the node's ``allowed`` CPUs (default: this process's
    affinity); ``None`` (not pinned) for torch's default thread count or where affinity is not
    available."""
    import os

    if not threads:
        return None
    if allowed is None:
        if not hasattr(os, "sched_getaffinity"):
            return None
        allowed = os.sched_getaffinity(0)
    cpus = sorted(allowed)[:int(threads)]
    return cpus or None


def _measure_task(config: dict[str, Any], kwargs: dict[str, Any], cooldown_s: float,
                  runner: Callable[..., Measurement] | None = None) -> Measurement:
    """One configuration measured by a Ray task on the node that runs it (its measuring
    subprocess, timeout and memory watchdog as without Ray); ``host`` = that node. The
    cooldown comes first, while the task holds the node's measuring slot. On a CPU, without
    ``--cpus``, a measurement with a thread count is pinned to that many of the node's CPUs
    (:func:`pinned_cpus`; the row's ``env.affinity`` records them)."""
    import socket

    from perfcast.profiler.runner import run_isolated

    if kwargs.get("cpus") is None and kwargs.get("torch_device") != "cuda":
        kwargs = {**kwargs, "cpus": pinned_cpus(config.get("threads"))}
    if cooldown_s:
        time.sleep(cooldown_s)
    m = (runner or run_isolated)(MeasureConfig.from_dict(config), **kwargs)
    m.host = m.host or socket.gethostname()
    return m


def collect(store: MeasurementStore, configs: Iterable[MeasureConfig], settings: CollectSettings,
            progress: Callable[[int, int, MeasureConfig, Measurement | None], None] | None = None,
            runner: Callable[..., Measurement] | None = None,
            lock: CollectorLock | None = None, ray_address: str | None = None) -> dict[str, int]:
    """Measure every configuration not yet in ``store``, holding its collector lock throughout
    (busy: :class:`PerfcastError`, or wait with ``settings.wait_for_lock``) — or ``lock``, that
    lock already acquired by the caller (who releases it). Returns counts by status.

    ``ray_address`` (:mod:`perfcast.distributed`: ``local``, ``auto``, ``HOST:PORT``): the
    measurements run as Ray tasks — on CUDA each requests one GPU (``num_gpus=1``: one task per
    GPU at a time), on a CPU one :data:`~perfcast.distributed.CPU_PROFILER` slot (one per node)
    and its threads' CPUs (all of the node's for torch's default), pinned to ``settings.cpus``
    when given, else to the first CPUs of the node (:func:`pinned_cpus`) — and each result is
    written by this process as its task finishes, exactly as without Ray (resumable, claims on a
    shared store). A task that fails (its worker died, the node was lost) is a ``failed`` row with the
    reason; ``retry_failed`` measures it again. No automatic retry: a measurement that crashed
    a worker once would likely do it again."""
    settings.validate()
    if ray_address is None:
        from perfcast.profiler.runner import run_isolated

        runner = runner or run_isolated
    configs = list(dict.fromkeys(configs))  # dedupe, keep order
    statuses = ["ok"] if settings.retry_failed else None
    with (nullcontext(lock) if lock is not None else
          store.collector_lock().acquire(wait=settings.wait_for_lock,
                                         poll_s=settings.lock_poll_s)) as held:
        done = store.done_keys(statuses) if statuses else store.done_keys()
        todo = [c for c in configs if c.key() not in done]
        counts = {"skipped": len(configs) - len(todo), "ok": 0, "oom": 0, "timeout": 0,
                  "failed": 0, "claimed_elsewhere": 0}
        if ray_address is not None:
            _collect_on_ray(store, todo, settings, counts, held, statuses, progress, runner,
                            ray_address)
            return counts
        measured = 0
        for i, cfg in enumerate(todo):
            key = cfg.key()
            # a store shared by several machines: measure what no other collector is measuring
            # and none has finished since the look above
            if not held.claim(key):
                counts["claimed_elsewhere"] += 1
                continue
            try:
                if store.has(key, statuses) if statuses else store.has(key):
                    counts["skipped"] += 1
                    store.dequeue([key])
                    continue
                if measured and settings.cooldown_s:
                    time.sleep(settings.cooldown_s)
                if progress:
                    progress(i, len(todo), cfg, None)
                m = runner(cfg, **_runner_kwargs(settings))
                m.graph_key = graph_key_for(cfg)
                store.add(m, replace=settings.retry_failed)  # one transaction: whole row or none
                store.dequeue([key])  # asked for by perfcast query --measure-missing
                measured += 1
            finally:
                held.unclaim(key)
            counts[m.status] = counts.get(m.status, 0) + 1
            if progress:
                progress(i + 1, len(todo), cfg, m)
            gc.collect()
    return counts


def _collect_on_ray(store: MeasurementStore, todo: list[MeasureConfig], settings: CollectSettings,
                    counts: dict[str, int], held: CollectorLock, statuses: list[str] | None,
                    progress, runner, address: str) -> None:
    """:func:`collect`'s measurements as Ray tasks, at most as many at once as the cluster has
    measuring slots (GPUs, or CPU-profiler nodes), each claimed when it is submitted."""
    from perfcast.distributed import CPU_PROFILER, cluster, failure_reason, require_resource

    with cluster(address) as ray:
        if settings.torch_device == "cuda":
            slots = int(require_resource(ray, "GPU", "measuring on CUDA"))
            base = {"num_gpus": 1, "num_cpus": 1}
        else:
            slots = int(require_resource(ray, CPU_PROFILER, "measuring on a CPU"))
            base = {"resources": {CPU_PROFILER: 1}}
        # CPUs of the nodes that measure (a CPU task runs on one of them)
        node_cpus = [float(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes()
                     if n.get("Alive") and (settings.torch_device == "cuda"
                                            or n.get("Resources", {}).get(CPU_PROFILER))]
        most, least = max(node_cpus, default=1.0), min(node_cpus, default=1.0)
        task = ray.remote(_measure_task)
        kwargs = _runner_kwargs(settings)
        pending = iter(todo)
        inflight: dict[Any, MeasureConfig] = {}
        finished = 0

        def submit() -> None:
            while len(inflight) < max(1, slots):
                cfg = next(pending, None)
                if cfg is None:
                    return
                key = cfg.key()
                if not held.claim(key):
                    counts["claimed_elsewhere"] += 1
                    continue
                if store.has(key, statuses) if statuses else store.has(key):
                    counts["skipped"] += 1
                    store.dequeue([key])
                    held.unclaim(key)
                    continue
                opts = dict(base, max_retries=0)
                if settings.torch_device != "cuda":  # the CPUs its threads use, within a node;
                    # torch's default thread count uses every CPU of the (smallest) node
                    want = len(settings.cpus) if settings.cpus else (cfg.threads or least)
                    opts["num_cpus"] = max(1.0, min(float(want), most))
                inflight[task.options(**opts).remote(cfg.to_dict(), kwargs, settings.cooldown_s,
                                                     runner)] = cfg
                if progress:
                    progress(finished, len(todo), cfg, None)

        try:
            submit()
            while inflight:
                done, _ = ray.wait(list(inflight), num_returns=1)
                cfg = inflight.pop(done[0])
                try:
                    m = ray.get(done[0])
                except (KeyboardInterrupt, SystemExit):
                    raise
                except Exception as exc:  # noqa: BLE001 - the task failed: a failed row
                    m = Measurement(config=cfg, status="failed", reason=failure_reason(exc))
                m.graph_key = graph_key_for(cfg)
                try:
                    store.add(m, replace=settings.retry_failed)  # as it finishes: resumable
                    store.dequeue([cfg.key()])
                finally:
                    held.unclaim(cfg.key())
                counts[m.status] = counts.get(m.status, 0) + 1
                finished += 1
                if progress:
                    progress(finished, len(todo), cfg, m)
                submit()
        finally:
            for ref, cfg in inflight.items():  # interrupted: nothing recorded for these
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - finished meanwhile
                    pass
                held.unclaim(cfg.key())
