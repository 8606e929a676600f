"""This machine's CPU, detected from ``/proc`` / ``/sys`` / psutil (never crashes when those
are missing): :func:`local_cpu`."""

from __future__ import annotations

import datetime as _dt
import functools
import math
import os
import platform
from pathlib import Path


from perfcast.devices.schema import LOCAL_CPU_KEY, Device



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
