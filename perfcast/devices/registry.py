"""The device registry: vendor peak numbers for known GPUs/CPUs, plus the local CPU.

Rows live in ``devices.json`` next to this file (dense datasheet numbers, one ``source``
note per row). The registry is open for extension, in three ways:

* a **device spec file** — one JSON object with the keys of a ``devices.json`` row — wherever a
  device is named: ``get_device("path/to/my.json")`` (and so ``--device my.json`` on every
  command) reads, validates and registers it for the process under its ``key`` (or a key made
  from the file name when it has none);
* **user devices** — the spec files in :func:`perfcast.paths.user_devices_dir`
  (``$PERFCAST_DEVICES_DIR``, else ``<data home>/devices``), written by
  ``perfcast devices add`` (:func:`add_user_device`) and loaded on first use, so their keys can be
  named later; a user device may override a built-in key only when added with ``--replace``;
* :func:`register_device` from Python (plugins, tests).

Every row, built-in or not, is validated in one place, :meth:`Device.__post_init__`: unknown
fields, missing required fields (a GPU needs ``peak_fp32_tflops``, ``memory_gb``,
``bandwidth_gbs``, ``sm_count``) and nonsense values are one-line :class:`PerfcastError`\\ s
naming the key (and the file). The key ``cpu`` is reserved for :func:`local_cpu`, which is
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
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError, unknown_keys
from perfcast.paths import package_data, read_json_file, user_devices_dir, write_file_atomically

_DATA_FILE = package_data("devices", "devices.json")

#: Key of the locally detected CPU; always listed last by :func:`list_devices`.
LOCAL_CPU_KEY = "cpu"

#: Precisions accepted by :meth:`Device.peak_tflops` ("amp" = FP16 tensor cores; "tf32" is a
#: peak, not a workload precision — see :data:`perfcast.workload.PRECISIONS` for those).
PEAK_PRECISIONS: tuple[str, ...] = ("fp32", "fp32_matrix", "tf32", "fp16", "amp", "bf16", "fp64")

_PRECISION_FIELD = {
    "fp32": "peak_fp32_tflops",
    "fp32_matrix": "peak_fp32_matrix_tflops",
    "tf32": "peak_tf32_tflops",
    "fp16": "peak_fp16_tflops",
    "amp": "peak_fp16_tflops",
    "bf16": "peak_bf16_tflops",
    "fp64": "peak_fp64_tflops",
}

_KINDS = ("gpu", "cpu")

#: Numbers that must be > 0 when given, with their unit (for messages).
_POSITIVE_NUMBERS: dict[str, str] = {
    "peak_fp32_tflops": "TFLOPS", "peak_fp32_matrix_tflops": "TFLOPS",
    "peak_tf32_tflops": "TFLOPS", "peak_fp16_tflops": "TFLOPS",
    "peak_bf16_tflops": "TFLOPS", "peak_fp64_tflops": "TFLOPS", "memory_gb": "GB",
    "bandwidth_gbs": "GB/s", "boost_clock_mhz": "MHz", "l2_mb": "MB", "tdp_w": "W",
    "idle_w": "W", "power_limit_min_w": "W", "power_limit_max_w": "W",
    "intra_node_gbs": "GB/s", "inter_node_gbs": "GB/s",
}
#: Whole numbers that must be > 0 when given.
_POSITIVE_INTS: dict[str, str] = {"sm_count": "SMs/CUs", "fp32_cores_per_sm": "cores per SM",
                                  "cores": "cores", "gpus_per_node": "GPUs"}
#: What a device of each kind cannot do without (a GPU model reads all four).
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "gpu": ("peak_fp32_tflops", "memory_gb", "bandwidth_gbs", "sm_count"),
    "cpu": ("peak_fp32_tflops", "cores"),
}
_KEY_RE = re.compile(r"[a-z0-9][a-z0-9._+-]*")
_CC_RE = re.compile(r"\d+\.\d+|gfx[0-9a-f]{3,4}")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: A non-tensor FP32 peak above this is a unit mistake (GFLOPS given as TFLOPS).
_MAX_FP32_TFLOPS = 1000.0


@dataclass(frozen=True)
class Device:
    """One device row. Units: TFLOPS, GB, GB/s, MB, W, MHz (see ``devices.json`` ``units``).

    Validated on construction (:meth:`__post_init__`): the key is a lower-case token, ``kind``
    is ``gpu`` or ``cpu``, the fields :data:`REQUIRED_FIELDS` names for the kind are present,
    numbers are numbers > 0, counts whole numbers > 0. Anything else is a one-line
    :class:`PerfcastError` naming the key.
    """

    key: str
    name: str = ""
    kind: str = ""  # "gpu" | "cpu"
    vendor: str = ""
    architecture: str = ""
    peak_fp32_tflops: float | None = None
    # full-precision FP32 GEMMs on matrix cores (AMD CDNA MFMA, what rocBLAS SGEMM runs on);
    # None where FP32 GEMMs run on the FP32 vector units (NVIDIA: TF32 is another precision)
    peak_fp32_matrix_tflops: float | None = None
    peak_tf32_tflops: float | None = None
    peak_fp16_tflops: float | None = None
    peak_bf16_tflops: float | None = None
    peak_fp64_tflops: float | None = None  # vector FP64 (not FP64 tensor cores)
    memory_gb: float | None = None
    bandwidth_gbs: float | None = None
    sm_count: int | None = None  # GPUs: SMs (NVIDIA) / compute units (AMD)
    fp32_cores_per_sm: int | None = None  # GPUs: CUDA cores per SM / stream processors per CU
    boost_clock_mhz: float | None = None  # GPUs: the clock the FP32 peak is computed at
    compute_capability: str | None = None  # NVIDIA "8.0"; AMD gfx target "gfx90a"
    arch_year: int | None = None  # launch year of the architecture
    cores: int | None = None  # CPUs
    l2_mb: float | None = None  # CPUs: last-level cache
    tdp_w: float | None = None
    # GPUs: board power at idle (W; when measured — else perfcast.energy assumes a fraction of
    # TDP and says so) and the range a power limit may be set in (nvidia-smi -pl; NVML's
    # power-management limit constraints)
    idle_w: float | None = None
    power_limit_min_w: float | None = None
    power_limit_max_w: float | None = None
    mig_profiles: tuple[str, ...] = ()
    # GPUs: the servers a parallel training step defaults to (perfcast.parallel.Cluster):
    # GPUs per node, per-GPU unidirectional bandwidth inside a node (NVLink / NVSwitch / xGMI /
    # PCIe) and across nodes (the node's network ÷ its GPUs), GB/s; ``interconnect`` says
    # which links and where the numbers come from
    gpus_per_node: int | None = None
    intra_node_gbs: float | None = None
    inter_node_gbs: float | None = None
    interconnect: str = ""
    source: str = ""
    as_of: str = ""
    notes: str = ""
    detected: bool = False

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        if not isinstance(self.key, str) or not self.key.strip():
            raise PerfcastError(f"device key must be a non-empty string, got {self.key!r}")
        key = self.key.strip().lower()
        set_("key", key)

        def fail(msg: str) -> PerfcastError:
            return PerfcastError(f"device '{key}': {msg}")

        if not _KEY_RE.fullmatch(key) or key.endswith(".json"):
            raise fail("the key may hold only letters, digits and . _ + - (starting with a "
                       "letter or digit), and must not end in .json")
        if not isinstance(self.name, str) or not self.name.strip():
            raise fail("name is required (a non-empty string)")
        if self.kind not in _KINDS:
            raise fail(f"kind must be one of {', '.join(_KINDS)}, got {self.kind!r}")
        for name in ("vendor", "architecture", "source", "as_of", "notes", "interconnect"):
            value = getattr(self, name)
            if value is None:
                set_(name, "")
            elif not isinstance(value, str):
                raise fail(f"{name} must be a string, got {value!r}")
        if self.as_of and not _DATE_RE.fullmatch(self.as_of):
            raise fail(f"as_of must be an ISO date YYYY-MM-DD, got {self.as_of!r}")
        for name, unit in _POSITIVE_NUMBERS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise fail(f"{name} must be a number ({unit}), got {value!r}")
            value = float(value)
            if not math.isfinite(value):
                raise fail(f"{name} must be a finite number ({unit}), got {value!r}")
            if value <= 0:
                raise fail(f"{name} must be > 0 {unit}, got {getattr(self, name)!r}")
            set_(name, value)
        for name, unit in _POSITIVE_INTS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or (isinstance(value, float) and not value.is_integer())):
                raise fail(f"{name} must be a whole number ({unit}), got {value!r}")
            if value <= 0:
                raise fail(f"{name} must be > 0 {unit}, got {value!r}")
            set_(name, int(value))
        cc = self.compute_capability
        if cc is not None and (not isinstance(cc, str) or not _CC_RE.fullmatch(cc.strip())):
            raise fail(f'compute_capability must be a string like "8.0" (NVIDIA) or "gfx90a" '
                       f"(AMD), got {cc!r}")
        if isinstance(cc, str):
            set_("compute_capability", cc.strip())
        year = self.arch_year
        if year is not None:
            if (isinstance(year, bool) or not isinstance(year, (int, float))
                    or (isinstance(year, float) and not year.is_integer())
                    or not 1990 <= year <= 2100):
                raise fail(f"arch_year must be a year (1990-2100), got {year!r}")
            set_("arch_year", int(year))
        profiles = self.mig_profiles
        if profiles is None:
            profiles = ()
        if isinstance(profiles, str) or not isinstance(profiles, (list, tuple)) or not all(
                isinstance(p, str) and p.strip() for p in profiles):
            raise fail(f"mig_profiles must be a list of profile names, got {profiles!r}")
        set_("mig_profiles", tuple(p.strip() for p in profiles))
        if not isinstance(self.detected, bool):
            raise fail(f"detected must be true or false, got {self.detected!r}")
        missing = [f for f in REQUIRED_FIELDS[self.kind] if getattr(self, f) is None]
        if missing:
            units = {**_POSITIVE_NUMBERS, **_POSITIVE_INTS}
            raise fail(f"missing {', '.join(f'{m} ({units[m]})' for m in missing)}: required "
                       f"for a {self.kind.upper()}")
        lo, hi = self.power_limit_min_w, self.power_limit_max_w
        if lo is not None and hi is not None and lo > hi:
            raise fail(f"power_limit_min_w {lo:g} W is above power_limit_max_w {hi:g} W")
        if self.idle_w is not None and self.tdp_w is not None and self.idle_w >= self.tdp_w:
            raise fail(f"idle_w {self.idle_w:g} W must be below tdp_w {self.tdp_w:g} W")
        if self.is_gpu and self.peak_fp32_tflops > _MAX_FP32_TFLOPS:
            raise fail(f"peak_fp32_tflops {self.peak_fp32_tflops:g} TFLOPS is implausible for "
                       f"non-tensor FP32 (> {_MAX_FP32_TFLOPS:g}); is it in GFLOPS? divide by 1000")

    # -- conversions -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``mig_profiles`` as a list)."""
        out = dataclasses.asdict(self)
        out["mig_profiles"] = list(self.mig_profiles)
        return out

    @classmethod
    def from_dict(cls, row: Mapping[str, Any], *, origin: str | None = None) -> Device:
        """Build a device from a ``devices.json`` row (or a spec file's object). Unknown fields
        are an error naming them; ``origin`` (a file) prefixes every error message."""
        prefix = f"{origin}: " if origin else ""
        if not isinstance(row, Mapping):
            raise PerfcastError(f"{prefix}a device is a JSON object with the keys of a "
                                f"devices.json row, got {type(row).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        key = row.get("key")
        label = f"device '{str(key).strip().lower()}'" if key else "device row"
        hints = unknown_keys(row, names)
        if hints:
            raise PerfcastError(f"{prefix}{label}: unknown field(s) {hints}; the "
                                f"fields are those of a devices.json row (perfcast devices --json)")
        if not key:
            raise PerfcastError(f"{prefix}{label}: missing key")
        try:
            return cls(**dict(row))
        except PerfcastError as exc:
            raise PerfcastError(f"{prefix}{exc}") from None
        except TypeError as exc:  # e.g. a non-hashable where a string belongs
            raise PerfcastError(f"{prefix}{label}: {exc}") from None

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
        """Peak TFLOPS at ``precision`` ("fp32" | "fp32_matrix" | "tf32" | "fp16" | "amp" |
        "bf16" | "fp64"; "fp32_matrix" = FP32 GEMMs on matrix cores, AMD CDNA).

        Falls back to the FP32 peak when the device has no number for a reduced precision (it
        then runs on the FP32 units); an unknown FP64 peak is ``None`` (FP64 is never faster).
        """
        p = str(precision).strip().lower()
        if p not in _PRECISION_FIELD:
            raise PerfcastError(f"unknown precision '{precision}'; use one of: {', '.join(PEAK_PRECISIONS)}")
        value = getattr(self, _PRECISION_FIELD[p])
        if p == "fp64":
            return value
        return self.peak_fp32_tflops if value is None else value


# --------------------------------------------------------------------------------------
# Device spec files
# --------------------------------------------------------------------------------------
def key_from_file_name(path: str | os.PathLike[str]) -> str:
    """The key of a spec file without one: its name without ``.json``, lower-cased, runs of
    other characters than letters, digits and ``. _ + -`` replaced by ``-``."""
    stem = Path(path).name
    stem = stem[:-5] if stem.lower().endswith(".json") else stem
    key = re.sub(r"[^a-z0-9._+-]+", "-", stem.lower()).strip("-.")
    if not key:
        raise PerfcastError(f"{path}: no \"key\" in the spec and none can be made from the file "
                            f"name; add \"key\": \"my-gpu\"")
    return key


def load_device_spec(path: str | os.PathLike[str]) -> Device:
    """Read and validate a device spec file (one JSON object with the keys of a
    ``devices.json`` row; ``key`` defaults to :func:`key_from_file_name`). Registers nothing.
    Errors name the file and the key."""
    p = Path(path).expanduser()
    doc = read_json_file(p, "device spec file")
    if not isinstance(doc, Mapping):
        raise PerfcastError(f"{path}: a device spec is one JSON object with the keys of a "
                            f"devices.json row, got a JSON {type(doc).__name__}")
    row = dict(doc)
    if row.get("key") in (None, ""):
        row["key"] = key_from_file_name(p)
    return Device.from_dict(row, origin=str(path))


def _spec_row(device: Device) -> dict[str, Any]:
    """What a user device file holds: the row without the runtime-only ``detected``."""
    row = device.to_dict()
    row.pop("detected", None)
    return row


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------
_LOCK = threading.RLock()
_REGISTRY: dict[str, Device] = {}
_BUILTIN: dict[str, Device] = {}
_ORIGIN: dict[str, str] = {}  # key -> where the registered row came from (messages)
_LOADED = False
_USER_DIR: Path | None = None  # the user-devices directory whose files are loaded
_USER_FILES: dict[str, Path] = {}  # key -> file, of the loaded user devices
_SPECS: dict[tuple[str, int, int], Device] = {}  # (resolved path, mtime, size) -> --device spec

_BUILTIN_ORIGIN = "built-in"


def _load_builtin() -> list[Device]:
    try:
        doc = json.loads(_DATA_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PerfcastError(f"cannot read device table {_DATA_FILE.name}: {exc}") from None
    rows = doc["devices"] if isinstance(doc, Mapping) else doc
    return [Device.from_dict(row, origin=_DATA_FILE.name) for row in rows]


def _ensure_builtin() -> dict[str, Device]:
    global _LOADED
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                builtin: dict[str, Device] = {}
                for dev in _load_builtin():
                    if dev.key in builtin:
                        raise PerfcastError(f"duplicate device key '{dev.key}' in {_DATA_FILE.name}")
                    builtin[dev.key] = dev
                _BUILTIN.clear()
                _BUILTIN.update(builtin)
                # Devices registered before the first lookup keep their place after the built-ins.
                merged = dict(builtin)
                for key, dev in _REGISTRY.items():
                    merged[key] = dev
                for key in builtin:
                    _ORIGIN.setdefault(key, _BUILTIN_ORIGIN)
                _REGISTRY.clear()
                _REGISTRY.update(merged)
                _LOADED = True
    return _REGISTRY


def _read_user_dir(folder: Path) -> dict[str, tuple[Device, Path]]:
    """The valid user devices of ``folder`` (errors name the bad file)."""
    if not folder.is_dir():
        return {}
    found: dict[str, tuple[Device, Path]] = {}
    for path in sorted(folder.glob("*.json")):
        if path.name.startswith(".") or not path.is_file():
            continue
        dev = load_device_spec(path)
        hint = f"fix or delete the file (perfcast devices remove {dev.key})"
        if dev.key == LOCAL_CPU_KEY:
            raise PerfcastError(f"{path}: device key '{LOCAL_CPU_KEY}' is reserved for the "
                                f"detected local CPU; {hint}")
        if dev.key in found:
            raise PerfcastError(f"{path}: device key '{dev.key}' is also defined by "
                                f"{found[dev.key][1]}; {hint}")
        found[dev.key] = (dev, path)
    return found


def _drop_user_key(key: str) -> None:
    """Forget the loaded user device ``key`` (a built-in it overrode comes back)."""
    _USER_FILES.pop(key, None)
    if key in _BUILTIN:
        _REGISTRY[key] = _BUILTIN[key]
        _ORIGIN[key] = _BUILTIN_ORIGIN
    else:
        _REGISTRY.pop(key, None)
        _ORIGIN.pop(key, None)


def _sync_user_devices() -> None:
    """Load the user-devices directory's files (once per directory: a changed
    ``$PERFCAST_DEVICES_DIR`` swaps the set)."""
    global _USER_DIR
    folder = user_devices_dir()
    if folder == _USER_DIR:
        return
    with _LOCK:
        if folder == _USER_DIR:
            return
        found = _read_user_dir(folder)  # raises before anything changes
        for key in list(_USER_FILES):
            _drop_user_key(key)
        for key, (dev, path) in found.items():
            _REGISTRY[key] = dev  # a built-in it overrides keeps its place
            _ORIGIN[key] = f"user device file {path}"
            _USER_FILES[key] = path
        _USER_DIR = folder


def _ensure_loaded() -> dict[str, Device]:
    registry = _ensure_builtin()
    _sync_user_devices()
    return registry


def register_device(device: Device, *, replace: bool = False) -> Device:
    """Add ``device`` to the registry (after the built-ins). ``replace=True`` overrides a key."""
    if not isinstance(device, Device):
        raise PerfcastError(f"register_device expects a Device, got {type(device).__name__}")
    if device.key == LOCAL_CPU_KEY:
        raise PerfcastError(f"device key '{LOCAL_CPU_KEY}' is reserved for the detected local CPU")
    with _LOCK:
        registry = _ensure_loaded()
        if device.key in registry and not replace:
            raise PerfcastError(f"device '{device.key}' is already registered "
                                f"({device_origin(device.key)}); pass replace=True to override it")
        registry[device.key] = device
        _ORIGIN[device.key] = "registered at runtime"
    return device


def unregister_device(key: str) -> None:
    """Remove a device added with :func:`register_device` (mainly for tests and plugins)."""
    with _LOCK:
        k = str(key).strip().lower()
        _ensure_loaded().pop(k, None)
        _ORIGIN.pop(k, None)
        _USER_FILES.pop(k, None)


def device_origin(key: str) -> str:
    """Where the registered device ``key`` came from: ``built-in``, ``user device file …``,
    ``spec file …`` or ``registered at runtime`` (``""`` when unknown)."""
    k = str(key).strip().lower()
    if k == LOCAL_CPU_KEY:
        return "detected"
    _ensure_loaded()
    return _ORIGIN.get(k, "")


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


def _looks_like_path(text: str) -> bool:
    return (text.lower().endswith(".json") or "/" in text or os.sep in text
            or text.startswith("~"))


def _from_spec_file(text: str) -> Device:
    """The device of the spec file ``text``, registered for the process under its key."""
    p = Path(text).expanduser()
    try:
        st = p.stat()
    except OSError:
        raise PerfcastError(f"device spec file not found: {text}") from None
    ident = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    with _LOCK:
        registry = _ensure_loaded()
        cached = _SPECS.get(ident)
        if cached is not None and registry.get(cached.key) is cached:
            return cached
        dev = load_device_spec(text)
        if dev.key == LOCAL_CPU_KEY:
            raise PerfcastError(f"{text}: device key '{LOCAL_CPU_KEY}' is reserved for the "
                                f"detected local CPU; give the spec another \"key\"")
        current = registry.get(dev.key)
        origin = f"spec file {ident[0]}"
        if current is not None and current == dev:
            dev = current  # the same row (e.g. the file of a user device): reuse it
        elif current is not None and _ORIGIN.get(dev.key) != origin:
            how = (f"; to override it for good: perfcast devices add {text} --replace"
                   if dev.key in _BUILTIN or dev.key in _USER_FILES else "")
            raise PerfcastError(f"{text}: device key '{dev.key}' is already taken "
                                f"({device_origin(dev.key)}) by a device with other values; give "
                                f"the spec another \"key\"{how}")
        else:
            registry[dev.key] = dev
            _ORIGIN[dev.key] = origin
        _SPECS[ident] = dev
        return dev


def get_device(key_or_path: str | os.PathLike[str] | Device) -> Device:
    """A device by registry key (case-insensitive; ``cpu`` is the detected local CPU) or by the
    path of a device spec file (a string ending in ``.json``, holding a path separator, or an
    existing file that is not a registry key): the spec is read, validated and registered for
    the process under its ``key`` (or a key made from the file name). A :class:`Device` is
    returned as is."""
    if isinstance(key_or_path, Device):
        return key_or_path
    if isinstance(key_or_path, os.PathLike):
        return _from_spec_file(os.fspath(key_or_path))
    text = str(key_or_path).strip()
    query = text.lower()
    if query == LOCAL_CPU_KEY:
        return local_cpu()
    if _looks_like_path(text):
        return _from_spec_file(text)
    registry = _ensure_loaded()
    dev = registry.get(query)
    if dev is not None:
        return dev
    if text and Path(text).is_file():
        return _from_spec_file(text)
    matches = _suggest(query, device_keys())
    hint = f"did you mean {', '.join(matches)}? " if matches else ""
    raise PerfcastError(f"unknown device '{key_or_path}'; {hint}run `perfcast devices` to list "
                        f"them, or give the path of a device spec .json")


# --------------------------------------------------------------------------------------
# User devices (perfcast devices add / remove)
# --------------------------------------------------------------------------------------
def user_devices() -> dict[str, Path]:
    """The loaded user devices: key → their file in :func:`~perfcast.paths.user_devices_dir`."""
    _ensure_loaded()
    return dict(_USER_FILES)


def add_user_device(path: str | os.PathLike[str], *, replace: bool = False) -> tuple[Device, Path]:
    """Validate the spec file ``path`` and keep it as a user device
    (``user_devices_dir()/<key>.json``), registered at once. A key that is built-in, already a
    user device or registered otherwise needs ``replace=True``. Returns the device and its file."""
    dev = load_device_spec(path)
    if dev.key == LOCAL_CPU_KEY:
        raise PerfcastError(f"{path}: device key '{LOCAL_CPU_KEY}' is reserved for the detected "
                            f"local CPU; give the spec another \"key\"")
    with _LOCK:
        registry = _ensure_loaded()
        folder = user_devices_dir()
        previous = _USER_FILES.get(dev.key)
        if not replace and dev.key in registry:
            what = ("a built-in device" if _ORIGIN.get(dev.key) == _BUILTIN_ORIGIN
                    else f"already a user device ({previous})" if previous is not None
                    else f"already registered ({device_origin(dev.key)})")
            raise PerfcastError(f"{path}: device '{dev.key}' is {what}; pass --replace to "
                                f"override it, or give the spec another \"key\"")
        try:
            target = write_file_atomically(
                folder / f"{dev.key}.json",
                (json.dumps(_spec_row(dev), indent=2, ensure_ascii=False) + "\n").encode())
            if previous is not None and previous != target and previous.exists():
                previous.unlink()
        except OSError as exc:
            raise PerfcastError(f"cannot write the user device to {folder}: {exc}") from None
        registry[dev.key] = dev
        _ORIGIN[dev.key] = f"user device file {target}"
        _USER_FILES[dev.key] = target
    return dev, target


def _file_key(path: Path) -> str:
    """The key a user device file declares (its name's key when unreadable)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        key = doc.get("key") if isinstance(doc, Mapping) else None
        if isinstance(key, str) and key.strip():
            return key.strip().lower()
    except (OSError, ValueError):
        pass
    try:
        return key_from_file_name(path)
    except PerfcastError:
        return ""


def remove_user_device(key: str) -> list[Path]:
    """Delete the user device ``key`` (its file(s) in ``user_devices_dir()``; read even when
    another file there is broken) and unregister it — a built-in it overrode comes back.
    Built-in devices cannot be removed. Returns the deleted files."""
    k = str(key).strip().lower()
    folder = user_devices_dir()
    files = [p for p in sorted(folder.glob("*.json")) if not p.name.startswith(".")
             and p.is_file() and _file_key(p) == k] if folder.is_dir() else []
    if not files:
        builtin = _ensure_builtin()
        if k in builtin and _ORIGIN.get(k) == _BUILTIN_ORIGIN:
            raise PerfcastError(f"'{k}' is a built-in device; only user devices (in {folder}) "
                                f"can be removed")
        known = sorted(_file_key(p) for p in folder.glob("*.json")) if folder.is_dir() else []
        have = f" (user devices: {', '.join(known)})" if known else " (there are none)"
        raise PerfcastError(f"no user device '{k}' in {folder}{have}")
    try:
        for p in files:
            p.unlink()
    except OSError as exc:
        raise PerfcastError(f"cannot delete {p}: {exc}") from None
    with _LOCK:
        if _USER_DIR == folder and k in _USER_FILES:
            _drop_user_key(k)
    return files



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
    "REQUIRED_FIELDS",
    "Device",
    "add_user_device",
    "device_keys",
    "device_origin",
    "get_device",
    "key_from_file_name",
    "list_devices",
    "load_device_spec",
    "local_cpu",
    "register_device",
    "remove_user_device",
    "unregister_device",
    "user_devices",
]
