"""This machine, measured: a short probe of the CPU that the shipped CPU time
model (``kernelsum``) is scaled by.

The shipped CPU model was fitted on measurements of one machine. On another machine its
answers are off by that machine's speed, so on the first CPU prediction of a machine (keyed by
:func:`machine_key`: the CPU's model name, its core counts, the kernel's view of its clocks, the
thread count and the torch version) perfcast runs :func:`run_probe` — three micro-benchmarks
at the thread count asked for, with torch since the model prices torch ops:

* **GEMM** — ``torch.mm`` of two ``N × N`` FP32 matrices for ``N`` in :data:`GEMM_SIZES`, best
  of a few repetitions: GFLOP/s (``2·N³`` FLOPs). ``N = 1024`` is
  :func:`perfcast.profiler.micro.measure_machine`'s kernel, the one the training machine's
  profile measured.
* **bandwidth** — ``torch.add(a, b, out=c)`` over :data:`STREAM_ELEMENTS` FP32 elements (3 × 4
  bytes moved per element, 384 MiB per call; ``measure_machine``'s kernel and size, so that
  the two machines are read alike: a smaller stream reads faster where caches hold part of
  it), best of a few: GB/s.
* **dispatch** — ``relu`` and ``add`` of tiny tensors (:data:`DISPATCH_ELEMENTS`) whose inputs
  require grad, each call timed alone, the median of :data:`DISPATCH_CALLS` calls per op and
  size, then the median over them (µs per forward call); and ``torch.autograd.grad`` of the same
  outputs (µs per backward call) — the statistic the operator benchmark's forward and backward
  timings give for tiny ``relu`` / ``add`` nodes (:func:`reference_from_records`).

The result (:class:`Probe`) is cached as versioned JSON, written atomically, in
``cache_dir().parent / "machine"`` (:func:`probe_path`); :func:`probe_for` reads it, or probes
on a miss, a changed key or an unreadable file. Only the probe imports torch: a cached probe
is read without it.

The reference — the same probe of the machine the shipped model was trained on — cannot be
re-run there; :func:`reference_from_records` derives it from that machine's own records (its
measured roofline, ``machine.json``, and its operator benchmark, ``ops-t1.csv``).
:func:`time_ratios` turns the two into the factors by which a time on the reference machine
becomes a time here.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError

#: Version of the cached probe file (a file of another version is probed again).
PROBE_FORMAT = 1
#: GEMM sizes (N of ``N × N`` matrices); 1024 is ``measure_machine``'s.
GEMM_SIZES = (256, 512, 1024)
#: Elements of the streaming add (``measure_machine``'s: 32 Mi, 384 MiB moved per call).
STREAM_ELEMENTS = 32 * 2**20
#: Repetitions (best of) per GEMM size and of the streaming add: enough for one quiet moment
#: on a shared machine, within :data:`BUDGET_S` with torch's import (the time of each probe
#: is in its ``seconds``; ``benchmarks/cpu_reference_probe.py --probe`` prints it).
GEMM_REPS = {256: 20, 512: 10, 1024: 6}
STREAM_REPS = 5
#: Input sizes (elements) of the dispatch probe's ``relu`` / ``add`` calls.
DISPATCH_ELEMENTS = (64, 512, 4096)
#: Calls timed per op and size (the operator benchmark's most: 25).
DISPATCH_CALLS = 25
#: Nodes of the operator benchmark that make the reference's dispatch: these ops, at most
#: this many input elements (dispatch-dominated: the call costs more than the work).
DISPATCH_OPS = ("relu", "add")
DISPATCH_MAX_ELEMENTS = 4096
#: The wall-time budget of a probe (seconds, torch's import included), checked by the tests.
BUDGET_S = 3.0


@dataclass
class Probe:
    """One probe of one machine at ``threads`` threads: ``gemm_gflops[N]`` (GFLOP/s of an
    ``N × N`` FP32 GEMM), ``bandwidth_gbs`` (GB/s of a streaming add), ``dispatch_fwd_us`` /
    ``dispatch_bwd_us`` (µs per tiny op call, forward under autograd / its backward),
    ``seconds`` (wall time of the probe, torch's import included; 0 for a reference derived
    from records), ``load_1m`` (the 1-minute load average as the probe started: a busy machine
    reads slower), ``source`` (how the numbers were obtained)."""

    threads: int
    gemm_gflops: dict[int, float] = field(default_factory=dict)
    bandwidth_gbs: float = float("nan")
    dispatch_fwd_us: float = float("nan")
    dispatch_bwd_us: float = float("nan")
    seconds: float = 0.0
    load_1m: float = float("nan")
    measured_at: str = ""
    torch_version: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (strict JSON: a number not measured is ``null``)."""
        d = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
             for k, v in asdict(self).items()}
        d["gemm_gflops"] = {str(k): v for k, v in self.gemm_gflops.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Probe:
        def num(v) -> float:
            return float("nan") if v is None else float(v)

        try:
            p = cls(threads=int(d["threads"]),
                    gemm_gflops={int(k): float(v) for k, v in d["gemm_gflops"].items()},
                    bandwidth_gbs=num(d["bandwidth_gbs"]),
                    dispatch_fwd_us=num(d["dispatch_fwd_us"]),
                    dispatch_bwd_us=num(d["dispatch_bwd_us"]),
                    seconds=float(d.get("seconds", 0.0)),
                    load_1m=num(d.get("load_1m")),
                    measured_at=str(d.get("measured_at", "")),
                    torch_version=str(d.get("torch_version", "")),
                    source=str(d.get("source", "")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PerfcastError(f"machine probe is malformed ({type(exc).__name__}: {exc})") \
                from None
        if p.threads < 1 or not p.gemm_gflops or not all(
                math.isfinite(v) and v > 0 for v in p.gemm_gflops.values()):
            raise PerfcastError("machine probe is malformed (no positive GEMM GFLOP/s)")
        return p

    def describe(self) -> str:
        """One line: the numbers, as the notes give them."""
        g = ", ".join(f"{v:.0f} @{n}" for n, v in sorted(self.gemm_gflops.items()))
        parts = [f"GEMM {g} GFLOP/s (@N×N)"]
        if math.isfinite(self.bandwidth_gbs):
            parts.append(f"copy {self.bandwidth_gbs:.1f} GB/s")
        if math.isfinite(self.dispatch_fwd_us):
            parts.append(f"dispatch {self.dispatch_fwd_us:.2f} µs fwd"
                         + (f" / {self.dispatch_bwd_us:.1f} µs bwd"
                            if math.isfinite(self.dispatch_bwd_us) else ""))
        if math.isfinite(self.load_1m):
            parts.append(f"load average {self.load_1m:.2f} as it ran")
        return f"{self.threads} thread(s): " + ", ".join(parts)


# ----------------------------------------------------------------------------------- the key
def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def clock_mhz() -> tuple[float | None, str]:
    """The kernel's view of this CPU's clock: cpufreq's ``cpuinfo_max_freq`` of cpu0 (MHz),
    else ``/proc/cpuinfo``'s ``cpu MHz`` rounded to 100 MHz (it moves with the load on
    machines that scale their clock), else ``None``."""
    raw = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    try:
        if raw and float(raw.strip()) > 0:
            return float(raw.strip()) / 1e3, "cpufreq cpuinfo_max_freq"
    except ValueError:
        pass
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        k, _, v = line.partition(":")
        if k.strip().lower() == "cpu mhz":
            try:
                return round(float(v) / 100.0) * 100.0, "/proc/cpuinfo cpu MHz (to 100 MHz)"
            except ValueError:
                break
    return None, "unknown"


def _torch_version() -> str:
    """torch's version from its package metadata (without importing torch)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return ""


def machine_key(threads: int) -> dict[str, Any]:
    """What a cached probe is valid for: the CPU's model name, its logical and usable cores,
    the kernel's view of its clock (:func:`clock_mhz`), the thread count and torch's version
    (another BLAS or oneDNN is another machine to a torch op)."""
    from perfcast.devices.detect import local_cpu

    cpu = local_cpu()
    mhz, how = clock_mhz()
    return {"cpu": cpu.name, "logical_cpus": os.cpu_count() or 0, "usable_cores": cpu.cores,
            "clock_mhz": mhz, "clock_source": how, "threads": int(threads),
            "machine": platform.machine(), "torch": _torch_version()}


#: Environment variable: the directory of cached probes (default beside the graph cache).
PROBE_DIR_ENV = "PERFCAST_PROBE_DIR"


def probe_dir() -> Path:
    """Where probes are cached: ``$PERFCAST_PROBE_DIR``, else ``cache_dir().parent / "machine"``
    (beside the graph cache)."""
    from perfcast.paths import cache_dir

    env = os.environ.get(PROBE_DIR_ENV)
    return Path(env).expanduser() if env else cache_dir().parent / "machine"


def probe_path(key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return probe_dir() / f"probe-{digest}.json"


# ----------------------------------------------------------------------------- the probe
def _best_s(fn: Callable[[], Any], reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _median_us(fn: Callable[[], Any], calls: int) -> float:
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6)
    times.sort()
    return times[len(times) // 2]  # the operator benchmark's median (upper of two)


def run_probe(threads: int, *, gemm_sizes: Iterable[int] = GEMM_SIZES,
              stream_elements: int = STREAM_ELEMENTS, reps: int | None = None,
              dispatch_elements: Iterable[int] = DISPATCH_ELEMENTS,
              dispatch_calls: int = DISPATCH_CALLS) -> Probe:
    """Probe this machine at ``threads`` torch threads (see the module docstring). ``reps``: best of that many per GEMM size
    and stream (default :data:`GEMM_REPS`, :data:`STREAM_REPS`); the keyword arguments shrink
    it (tests)."""
    t_start = time.perf_counter()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = float("nan")
    import torch

    if threads < 1:
        raise PerfcastError(f"threads must be ≥ 1, got {threads}")
    old = torch.get_num_threads()
    probe = Probe(threads=int(threads), measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
                  load_1m=load,
                  torch_version=torch.__version__,
                  source="probed on this machine (perfcast.devices.probe.run_probe)")
    try:
        torch.set_num_threads(int(threads))
        with torch.no_grad():
            for n in gemm_sizes:
                a = torch.ones(n, n).mul_(0.5)
                b = torch.ones(n, n).mul_(0.25)
                torch.mm(a, b)  # warm-up (BLAS thread pool, page faults)
                s = _best_s(lambda: torch.mm(a, b), reps or GEMM_REPS.get(int(n), 8))
                probe.gemm_gflops[int(n)] = 2.0 * n ** 3 / s / 1e9
            x = torch.empty(stream_elements).fill_(1.0)
            y = torch.empty(stream_elements).fill_(2.0)
            z = torch.empty(stream_elements)
            torch.add(x, y, out=z)
            s = _best_s(lambda: torch.add(x, y, out=z), reps or STREAM_REPS)
            probe.bandwidth_gbs = 3.0 * 4 * stream_elements / s / 1e9
            del x, y, z
        fwd, bwd = [], []
        g = torch.Generator().manual_seed(0)
        for n in dispatch_elements:
            for op in DISPATCH_OPS:
                ins = [torch.randn(1, n, generator=g).requires_grad_(True)
                       for _ in range(1 if op == "relu" else 2)]
                fn = (lambda ins=ins: torch.relu(ins[0])) if op == "relu" else \
                    (lambda ins=ins: torch.add(ins[0], ins[1]))
                fn()  # warm-up, as the operator benchmark
                fwd.append(_median_us(fn, dispatch_calls))
                out = fn()
                gy = torch.ones_like(out)

                def back(out=out, ins=ins, gy=gy):
                    torch.autograd.grad(out, ins, gy, retain_graph=True)

                back()
                bwd.append(_median_us(back, dispatch_calls))
        probe.dispatch_fwd_us = float(statistics.median(fwd))
        probe.dispatch_bwd_us = float(statistics.median(bwd))
    finally:
        torch.set_num_threads(old)
    probe.seconds = time.perf_counter() - t_start
    return probe


# ------------------------------------------------------------------------------ the cache
@dataclass
class ProbeResult:
    """A probe and how it was obtained: ``status`` ``"measured"`` (run now, in this process),
    ``"cached"`` (read from ``path``), with ``why`` saying why a probe ran (no file, another
    key, an unreadable file)."""

    probe: Probe
    status: str
    path: Path
    why: str = ""


#: Probes of this process, by key (a server answers many requests from one probe).
_SEEN: dict[str, ProbeResult] = {}


def read_cached(path: Path, key: dict[str, Any]) -> tuple[Probe | None, str]:
    """``(probe, "")`` from ``path`` when it holds a probe of ``key`` in this format, else
    ``(None, why)``; never raises."""
    if not path.exists():
        return None, "no probe of this machine cached"
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("format") != PROBE_FORMAT:
            return None, f"cached probe {path.name} is of another format"
        if doc.get("key") != key:
            return None, f"cached probe {path.name} is of another machine key"
        return Probe.from_dict(doc["probe"]), ""
    except (OSError, ValueError, KeyError, TypeError, PerfcastError) as exc:
        return None, f"cached probe {path.name} unreadable ({type(exc).__name__})"


def write_cached(path: Path, key: dict[str, Any], probe: Probe) -> None:
    """Write ``probe`` for ``key`` as JSON (atomically: a temporary file renamed into place)."""
    from perfcast.paths import write_file_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomically(path, json.dumps({"format": PROBE_FORMAT, "key": key,
                                            "probe": probe.to_dict()}, indent=1))


def _load_now() -> float:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return float("nan")


def _busy(load_1m: float) -> bool:
    """A load average above the logical CPUs: a probe taken then reads the machine slower than
    it is when quieter, so a cached one is replaced once the load falls below (never more than
    one probe per quiet moment)."""
    return math.isfinite(load_1m) and load_1m > (os.cpu_count() or 1)


def probe_for(threads: int, *, runner: Callable[[int], Probe] | None = None) -> ProbeResult:
    """This machine's probe at ``threads`` threads: cached (this process, then the file of its
    :func:`machine_key`) or measured now by ``runner`` (default :func:`run_probe`) and cached;
    a cached probe taken on a busy machine (:func:`_busy`) is measured again when the machine
    is no longer busy.
    A cache that cannot be written is not an error (the probe answers; it runs again next
    time)."""
    key = machine_key(threads)
    tag = json.dumps(key, sort_keys=True)
    hit = _SEEN.get(tag)
    path = probe_path(key)
    if hit is not None and hit.path == path:
        return ProbeResult(hit.probe, "cached" if hit.status == "cached" else "measured",
                           path, hit.why)
    probe, why = read_cached(path, key)
    if probe is not None and _busy(probe.load_1m) and not _busy(_load_now()):
        why = (f"cached probe {path.name} was taken under load {probe.load_1m:.1f} on "
               f"{os.cpu_count()} CPUs; the machine is quieter now")
        probe = None
    if probe is not None:
        res = ProbeResult(probe, "cached", path)
    else:
        probe = (runner or run_probe)(int(threads))
        res = ProbeResult(probe, "measured", path, why)
        try:
            write_cached(path, key, probe)
        except OSError as exc:
            res.why += f"; not cached ({type(exc).__name__}: {exc})"
    _SEEN[tag] = res
    return res


# -------------------------------------------------------------------------- the reference
def reference_from_records(machine: dict[str, Any], ops_rows: Iterable[dict[str, Any]], *,
                           source: str, about: dict[str, Any] | None = None) -> dict[str, Any]:
    """The probe of a machine that cannot be probed again, from its own records: ``machine``
    (its measured roofline, a :class:`~perfcast.devices.machine.MachineProfile` dict —
    ``measure_machine``'s GEMM at ``N`` = 1024 and streaming add at each thread count) and
    ``ops_rows`` (its operator benchmark's rows: ``op``, ``in_shapes`` (JSON), ``threads``,
    ``fwd_ms``, ``bwd_ms``) — dispatch as the median forward / backward time of its ``relu``
    and ``add`` nodes of at most :data:`DISPATCH_MAX_ELEMENTS` input elements at one thread
    (tiny ops run on one thread whatever the count, so that value stands for every count).
    Returns ``{"format", "source", "about", "probes": {threads: Probe dict}}``."""
    from perfcast.devices.machine import MachineProfile

    prof = MachineProfile.from_dict(machine)
    fwd, bwd = [], []
    for r in ops_rows:
        if r.get("op") not in DISPATCH_OPS or int(float(r.get("threads") or 0)) != 1:
            continue
        try:
            shapes = json.loads(r["in_shapes"])
            numel = max(math.prod(int(d) for d in s) for s in shapes) if shapes else 1
            f = float(r["fwd_ms"])
        except (KeyError, TypeError, ValueError):
            continue
        if numel > DISPATCH_MAX_ELEMENTS or not math.isfinite(f):
            continue
        fwd.append(f * 1e3)
        try:
            b = float(r.get("bwd_ms") or "nan")
        except ValueError:
            b = float("nan")
        if math.isfinite(b):
            bwd.append(b * 1e3)
    if not fwd:
        raise PerfcastError("reference probe: no tiny relu / add node at one thread in the "
                            "operator benchmark")
    probes = {}
    for t in sorted(prof.gflops):
        probes[str(t)] = Probe(
            threads=t, gemm_gflops={1024: prof.gflops[t]}, bandwidth_gbs=prof.bandwidth_gbs[t],
            dispatch_fwd_us=float(statistics.median(fwd)),
            dispatch_bwd_us=float(statistics.median(bwd)) if bwd else float("nan"),
            measured_at=prof.measured_at, torch_version=prof.torch_version,
            source=f"{source}: GEMM and copy from the machine profile (measure_machine), "
                   f"dispatch the median of {len(fwd)} tiny relu/add nodes (1 thread)",
        ).to_dict()
    return {"format": PROBE_FORMAT, "source": source, "about": dict(about or {}),
            "probes": probes, "dispatch_nodes": len(fwd)}


def reference_at(reference: dict[str, Any], threads: int) -> tuple[Probe, str]:
    """The reference probe at ``threads``: measured, or from the nearest measured count with
    the machine profile's rule (GEMM linear in threads, bandwidth and dispatch held), with a
    note saying so."""
    probes = {int(k): Probe.from_dict(v) for k, v in reference["probes"].items()}
    if threads in probes:
        return probes[threads], ""
    near = min(probes, key=lambda k: (abs(k - threads), k))
    p = probes[near]
    q = Probe(threads=threads, gemm_gflops={n: v * threads / near
                                            for n, v in p.gemm_gflops.items()},
              bandwidth_gbs=p.bandwidth_gbs, dispatch_fwd_us=p.dispatch_fwd_us,
              dispatch_bwd_us=p.dispatch_bwd_us, measured_at=p.measured_at,
              torch_version=p.torch_version, source=p.source)
    return q, (f"the reference machine was measured at {sorted(probes)} thread(s), not "
               f"{threads}: its GEMM scaled from {near} linearly in threads, copy and "
               f"dispatch held")


def time_ratios(here: Probe, ref: Probe) -> dict[str, Any]:
    """Factors turning a time on the reference machine into a time here: ``compute`` (ref /
    here GEMM GFLOP/s, geometric mean over the sizes both measured), ``memory`` (ref / here
    GB/s), ``dispatch_fwd`` / ``dispatch_bwd`` (here / ref µs per call; 1 where either side
    lacks the number)."""
    common = sorted(set(here.gemm_gflops) & set(ref.gemm_gflops))
    if not common:
        raise PerfcastError("the probes share no GEMM size")
    compute = math.exp(sum(math.log(ref.gemm_gflops[n] / here.gemm_gflops[n]) for n in common)
                       / len(common))

    def ratio(a: float, b: float) -> float:
        return a / b if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0 else 1.0

    return {"compute": compute, "memory": ratio(ref.bandwidth_gbs, here.bandwidth_gbs),
            "dispatch_fwd": ratio(here.dispatch_fwd_us, ref.dispatch_fwd_us),
            "dispatch_bwd": ratio(here.dispatch_bwd_us, ref.dispatch_bwd_us),
            "gemm_sizes": common}


__all__ = [
    "BUDGET_S", "DISPATCH_ELEMENTS", "GEMM_SIZES", "PROBE_DIR_ENV", "PROBE_FORMAT",
    "STREAM_ELEMENTS", "Probe",
    "ProbeResult", "clock_mhz", "machine_key", "probe_dir", "probe_for", "probe_path",
    "read_cached", "reference_at", "reference_from_records", "run_probe", "time_ratios",
    "write_cached",
]
