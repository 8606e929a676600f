"""The device registry: vendor peak numbers for known GPUs/CPUs, plus the local CPU.

Rows live in ``devices.json`` next to this file (dense datasheet numbers, one ``source``
note per row). The registry is open for extension: :func:`register_device` adds devices at
runtime (plugins, user configs). The key ``cpu`` is reserved for :func:`local_cpu`, which is
detected from ``/proc`` / ``/sys`` / psutil and never crashes when those are missing.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import difflib
import functools
import json
import math
import os
import platform
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.paths import package_data

_DATA_FILE = package_data("devices", "devices.json")

#: Key of the locally detected CPU; always listed last by :func:`list_devices`.
LOCAL_CPU_KEY = "cpu"

#: Precisions accepted by :meth:`Device.peak_tflops` ("amp" = FP16 tensor cores; "tf32" is a
#: peak, not a workload precision — see :data:`perfcast.workload.PRECISIONS` for those).
PEAK_PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "amp", "bf16")

_PRECISION_FIELD = {
    "fp32": "peak_fp32_tflops",
    "tf32": "peak_tf32_tflops",
    "fp16": "peak_fp16_tflops",
    "amp": "peak_fp16_tflops",
    "bf16": "peak_bf16_tflops",
}

_KINDS = ("gpu", "cpu")


@dataclass(frozen=True)
class Device:
    """One device row. Units: TFLOPS, GB, GB/s, MB, W (see ``devices.json`` ``units``)."""

    key: str
    name: str
    kind: str  # "gpu" | "cpu"
    vendor: str
    architecture: str
    peak_fp32_tflops: float | None
    peak_tf32_tflops: float | None = None
    peak_fp16_tflops: float | None = None
    peak_bf16_tflops: float | None = None
    memory_gb: float | None = None
    bandwidth_gbs: float | None = None
    sm_count: int | None = None  # GPUs
    cores: int | None = None  # CPUs
    l2_mb: float | None = None  # CPUs: last-level cache
    tdp_w: float | None = None
    mig_profiles: tuple[str, ...] = ()
    source: str = ""
    as_of: str = ""
    notes: str = ""
    detected: bool = False

    def __post_init__(self) -> None:
        key = str(self.key).strip().lower()
        if not key:
            raise PerfcastError("device key must be a non-empty string")
        object.__setattr__(self, "key", key)
        if self.kind not in _KINDS:
            raise PerfcastError(f"device '{key}': kind must be one of {_KINDS}, got {self.kind!r}")
        object.__setattr__(self, "mig_profiles", tuple(str(p) for p in (self.mig_profiles or ())))
        for name in ("peak_fp32_tflops", "peak_tf32_tflops", "peak_fp16_tflops",
                     "peak_bf16_tflops", "memory_gb", "bandwidth_gbs", "l2_mb", "tdp_w"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise PerfcastError(f"device '{key}': {name} must be a number or null, got {value!r}") from None
            if not math.isfinite(value) or value < 0:
                raise PerfcastError(f"device '{key}': {name} must be finite and >= 0, got {value!r}")
            object.__setattr__(self, name, value)
        for name in ("sm_count", "cores"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, int(value))

    # -- conversions -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``mig_profiles`` as a list)."""
        out = dataclasses.asdict(self)
        out["mig_profiles"] = list(self.mig_profiles)
        return out

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Device:
        """Build a device from a ``devices.json`` row; unknown fields are an error."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(row) - names)
        if unknown:
            raise PerfcastError(f"device row {row.get('key', '?')!r}: unknown field(s) {', '.join(unknown)}")
        try:
            return cls(**dict(row))
        except TypeError as exc:  # missing required fields
            raise PerfcastError(f"device row {row.get('key', '?')!r}: {exc}") from None

    # -- queries -----------------------------------------------------------------------
    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"

    @property
    def memory_mb(self) -> float | None:
        """Device memory in MiB (a GPU's "40 GB" is 40 GiB = 40,960 MiB); None when unknown."""
        return float(self.memory_gb) * 1024.0 if self.memory_gb else None

    @property
    def compute_units(self) -> int | None:
        """SM count for GPUs, cores for CPUs."""
        return self.sm_count if self.is_gpu else self.cores

    def peak_tflops(self, precision: str = "fp32") -> float | None:
        """Peak TFLOPS at ``precision`` ("fp32" | "tf32" | "fp16" | "amp" | "bf16").

        Falls back to the FP32 peak when the device has no number for that precision.
        """
        p = str(precision).strip().lower()
        if p not in _PRECISION_FIELD:
            raise PerfcastError(f"unknown precision '{precision}'; use one of: {', '.join(PEAK_PRECISIONS)}")
        value = getattr(self, _PRECISION_FIELD[p])
        return self.peak_fp32_tflops if value is None else value


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------
_LOCK = threading.RLock()
_REGISTRY: dict[str, Device] = {}
_LOADED = False


def _load_builtin() -> list[Device]:
    try:
        doc = json.loads(_DATA_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PerfcastError(f"cannot read device table {_DATA_FILE.name}: {exc}") from None
    rows = doc["devices"] if isinstance(doc, Mapping) else doc
    return [Device.from_dict(row) for row in rows]


def _ensure_loaded() -> dict[str, Device]:
    global _LOADED
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                builtin = {}
                for dev in _load_builtin():
                    if dev.key in builtin:
                        raise PerfcastError(f"duplicate device key '{dev.key}' in {_DATA_FILE.name}")
                    builtin[dev.key] = dev
                # Devices registered before the first lookup keep their place after the built-ins.
                for key, dev in _REGISTRY.items():
                    builtin[key] = dev
                _REGISTRY.clear()
                _REGISTRY.update(builtin)
                _LOADED = True
    return _REGISTRY


def register_device(device: Device, *, replace: bool = False) -> Device:
    """Add ``device`` to the registry (after the built-ins). ``replace=True`` overrides a key."""
    if not isinstance(device, Device):
        raise PerfcastError(f"register_device expects a Device, got {type(device).__name__}")
    if device.key == LOCAL_CPU_KEY:
        raise PerfcastError(f"device key '{LOCAL_CPU_KEY}' is reserved for the detected local CPU")
    with _LOCK:
        registry = _ensure_loaded()
        if device.key in registry and not replace:
            raise PerfcastError(f"device '{device.key}' is already registered; pass replace=True to override it")
        registry[device.key] = device
    return device


def unregister_device(key: str) -> None:
    """Remove a device added with :func:`register_device` (mainly for tests and plugins)."""
    with _LOCK:
        _ensure_loaded().pop(str(key).strip().lower(), None)


def device_keys() -> list[str]:
    """All keys in registry order, ``cpu`` last."""
    return [*_ensure_loaded().keys(), LOCAL_CPU_KEY]


def list_devices() -> list[Device]:
    """All devices in registry order, with the detected local CPU last."""
    with _LOCK:
        devices = list(_ensure_loaded().values())
    return [*devices, local_cpu()]


def _suggest(query: str, keys: list[str]) -> list[str]:
    prefix = [k for k in keys if query and (k.startswith(query) or query.startswith(k))]
    close = difflib.get_close_matches(query, keys, n=3, cutoff=0.5)
    out: list[str] = []
    for k in prefix + close:
        if k not in out:
            out.append(k)
    return out[:4]


def get_device(key: str) -> Device:
    """Look a device up by key (case-insensitive). ``cpu`` is the detected local CPU."""
    query = str(key).strip().lower()
    if query == LOCAL_CPU_KEY:
        return local_cpu()
    registry = _ensure_loaded()
    dev = registry.get(query)
    if dev is not None:
        return dev
    matches = _suggest(query, device_keys())
    hint = f"did you mean {', '.join(matches)}? " if matches else ""
    raise PerfcastError(f"unknown device '{key}'; {hint}run `perfcast devices` to list them")


# --------------------------------------------------------------------------------------
# Local CPU detection
# --------------------------------------------------------------------------------------
def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def _parse_cpuinfo(text: str | None) -> dict[str, str]:
    """First value of every ``key : value`` line (first processor block wins)."""
    info: dict[str, str] = {}
    for line in (text or "").splitlines():
        if ":" not in line:
            continue
        k, _, v = line.partition(":")
        k = k.strip().lower()
        if k and k not in info:
            info[k] = v.strip()
    return info


def _parse_size_mb(text: str) -> float | None:
    s = text.strip().upper().removesuffix("B")
    mult = {"K": 1 / 1024, "M": 1.0, "G": 1024.0}
    try:
        if s and s[-1] in mult:
            return float(s[:-1]) * mult[s[-1]]
        return float(s) / (1024 * 1024)  # plain bytes
    except ValueError:
        return None


def _last_level_cache_mb(sys_root: Path) -> tuple[float | None, int | None]:
    base = sys_root / "devices/system/cpu/cpu0/cache"
    best: tuple[int, float] | None = None
    try:
        entries = sorted(base.glob("index*"))
    except OSError:
        return None, None
    for entry in entries:
        size = _read(entry / "size")
        level = _read(entry / "level")
        if size is None:
            continue
        mb = _parse_size_mb(size)
        try:
            lvl = int((level or "0").strip())
        except ValueError:
            lvl = 0
        if mb is None:
            continue
        if best is None or (lvl, mb) > best:
            best = (lvl, mb)
    return (best[1], best[0]) if best else (None, None)


def _max_ghz(sys_root: Path, cpuinfo: dict[str, str]) -> tuple[float | None, str]:
    raw = _read(sys_root / "devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if raw:
        try:
            khz = float(raw.strip())
            if khz > 0:
                return khz / 1e6, "cpufreq cpuinfo_max_freq"
        except ValueError:
            pass
    mhz = cpuinfo.get("cpu mhz")
    if mhz:
        try:
            val = float(mhz)
            if val > 0:
                return val / 1e3, "/proc/cpuinfo 'cpu MHz'"
        except ValueError:
            pass
    try:
        import psutil

        freq = psutil.cpu_freq()
        if freq is not None and (freq.max or freq.current):
            return (freq.max or freq.current) / 1e3, "psutil.cpu_freq()"
    except Exception:  # noqa: BLE001 - psutil missing or unsupported platform
        pass
    return None, ""


def _cgroup_cpu_limit(sys_root: Path) -> float | None:
    text = _read(sys_root / "fs/cgroup/cpu.max")
    if text:
        parts = text.split()
        if len(parts) >= 2 and parts[0] != "max":
            try:
                return float(parts[0]) / float(parts[1])
            except (ValueError, ZeroDivisionError):
                return None
    return None


def _usable_cores(sys_root: Path) -> tuple[int, str]:
    try:
        logical = len(os.sched_getaffinity(0))
        how = "os.sched_getaffinity"
    except (AttributeError, OSError):
        logical = os.cpu_count() or 1
        how = "os.cpu_count"
    physical_total = logical_total = None
    try:
        import psutil

        physical_total = psutil.cpu_count(logical=False)
        logical_total = psutil.cpu_count(logical=True)
    except Exception:  # noqa: BLE001
        pass
    cores = logical
    if physical_total and logical_total and logical_total > physical_total:
        cores = max(1, round(logical * physical_total / logical_total))
        how += f" x physical/logical ({physical_total}/{logical_total}, SMT excluded)"
    quota = _cgroup_cpu_limit(sys_root)
    if quota is not None and quota < cores:
        cores = max(1, math.ceil(quota))
        how += f", capped by cgroup cpu.max ({quota:g} CPUs)"
    return cores, how


def _memory_gb(sys_root: Path) -> tuple[float | None, str]:
    total = None
    how = ""
    try:
        import psutil

        total = float(psutil.virtual_memory().total)
        how = "psutil.virtual_memory().total"
    except Exception:  # noqa: BLE001
        pass
    limit = _read(sys_root / "fs/cgroup/memory.max")
    if limit and limit.strip().isdigit():
        lim = float(limit.strip())
        if total is None or lim < total:
            total, how = lim, "cgroup memory.max"
    if total is None:
        return None, "unknown"
    return round(total / 2**30, 2), how


def _flops_per_cycle(flags: set[str]) -> tuple[int, str]:
    if "avx512f" in flags:
        return 64, "AVX-512 (assumes 2 FMA units: 2 x 16 lanes x 2)"
    if "avx2" in flags and "fma" in flags:
        return 32, "AVX2+FMA (2 FMA units x 8 lanes x 2)"
    return 8, "no AVX2/FMA detected (conservative 8)"


_VENDORS = {"genuineintel": "Intel", "authenticamd": "AMD", "arm": "Arm"}


def _detect_cpu(proc_root: str | os.PathLike[str] = "/proc", sys_root: str | os.PathLike[str] = "/sys") -> Device:
    """Detect the local CPU from ``proc_root``/``sys_root`` (parametrised for tests)."""
    proc, sysfs = Path(proc_root), Path(sys_root)
    info = _parse_cpuinfo(_read(proc / "cpuinfo"))
    flags = set((info.get("flags") or info.get("features") or "").split())

    name = info.get("model name") or info.get("hardware") or info.get("processor", "")
    if not name or name.isdigit():
        name = platform.processor() or platform.machine() or "unknown CPU"
    vendor_raw = info.get("vendor_id") or info.get("cpu implementer") or ""
    vendor = _VENDORS.get(vendor_raw.lower(), vendor_raw or "unknown")

    cores, cores_how = _usable_cores(sysfs)
    ghz, ghz_how = _max_ghz(sysfs, info)
    fpc, fpc_how = _flops_per_cycle(flags)
    notes = ["detected at runtime; peak_fp32_tflops is an ESTIMATE, not a datasheet value."]
    if ghz is None:
        ghz_used = 2.0
        notes.append("CPU frequency unknown, assumed 2.0 GHz.")
    else:
        ghz_used = ghz
    peak = cores * ghz_used * fpc / 1e3
    notes.append(
        f"peak FP32 = {cores} cores ({cores_how}) x {ghz_used:.3g} GHz"
        f"{f' ({ghz_how})' if ghz_how else ''} x {fpc} FLOPs/cycle [{fpc_how}] = {peak:.3g} TFLOPS;"
        " sustained clocks under vector load are usually lower."
    )
    mem_gb, mem_how = _memory_gb(sysfs)
    notes.append(f"memory_gb from {mem_how} (GiB).")
    notes.append("bandwidth_gbs unknown (not detectable without a benchmark).")
    llc_mb, llc_level = _last_level_cache_mb(sysfs)
    if llc_mb is not None:
        notes.append(f"l2_mb holds the last-level cache (L{llc_level}, {llc_mb:g} MB as reported by sysfs for cpu0).")
    else:
        notes.append("cache size unknown.")
    return Device(
        key=LOCAL_CPU_KEY,
        name=name,
        kind="cpu",
        vendor=vendor,
        architecture=platform.machine() or "unknown",
        peak_fp32_tflops=round(peak, 4),
        memory_gb=mem_gb,
        bandwidth_gbs=None,
        cores=cores,
        l2_mb=llc_mb,
        tdp_w=None,
        source="detected from /proc/cpuinfo, /sys/devices/system/cpu, os.sched_getaffinity and psutil",
        as_of=_dt.date.today().isoformat(),
        notes=" ".join(notes),
        detected=True,
    )


@functools.lru_cache(maxsize=1)
def local_cpu() -> Device:
    """The CPU this process runs on (cached). Never raises on missing /proc or /sys."""
    try:
        return _detect_cpu()
    except Exception as exc:  # noqa: BLE001 - detection must never crash the CLI
        return Device(
            key=LOCAL_CPU_KEY, name=platform.processor() or platform.machine() or "unknown CPU",
            kind="cpu", vendor="unknown", architecture=platform.machine() or "unknown",
            peak_fp32_tflops=round((os.cpu_count() or 1) * 2.0 * 8 / 1e3, 4),
            cores=os.cpu_count() or 1,
            source="fallback (detection failed)", as_of=_dt.date.today().isoformat(),
            notes=f"detection failed ({type(exc).__name__}); peak FP32 is a rough estimate: cores x 2.0 GHz x 8 FLOPs/cycle.",
            detected=True,
        )


__all__ = [
    "LOCAL_CPU_KEY",
    "PEAK_PRECISIONS",
    "Device",
    "device_keys",
    "get_device",
    "list_devices",
    "local_cpu",
    "register_device",
    "unregister_device",
]
