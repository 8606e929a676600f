"""The device spec: :class:`Device` (one row of the registry or a user's spec file — units in
the field names, validated on construction) and reading a spec file."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError, unknown_keys
from perfcast.paths import package_data, read_json_file

_DATA_FILE = package_data("devices", "devices.json")

#: Key of the locally detected CPU; always listed last by :func:`list_devices`.
LOCAL_CPU_KEY = "cpu"

#: Precisions accepted by :meth:`Device.peak_tflops` ("amp" = FP16 tensor cores; "tf32" is a
#: peak, not a workload precision — see :data:`perfcast.workload.PRECISIONS` for those).
PEAK_PRECISIONS: tuple[str, ...] = ("fp32", "fp32_matrix", "tf32", "fp16", "amp", "bf16", "fp8",
                                     "fp64")

_PRECISION_FIELD = {
    "fp32": "peak_fp32_tflops",
    "fp32_matrix": "peak_fp32_matrix_tflops",
    "tf32": "peak_tf32_tflops",
    "fp16": "peak_fp16_tflops",
    "amp": "peak_fp16_tflops",
    "bf16": "peak_bf16_tflops",
    "bf16-pure": "peak_bf16_tflops",  # the training precision: bf16's peak
    "fp8": "peak_fp8_tflops",
    "fp64": "peak_fp64_tflops",
}

_KINDS = ("gpu", "cpu")

#: Numbers that must be > 0 when given, with their unit (for messages).
_POSITIVE_NUMBERS: dict[str, str] = {
    "peak_fp32_tflops": "TFLOPS", "peak_fp32_matrix_tflops": "TFLOPS",
    "peak_tf32_tflops": "TFLOPS", "peak_fp16_tflops": "TFLOPS",
    "peak_bf16_tflops": "TFLOPS", "peak_fp8_tflops": "TFLOPS", "peak_fp64_tflops": "TFLOPS",
    "memory_gb": "GB",
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
#: The least a peak, memory or bandwidth may be (far below any real device: the smallest in
#: devices.json are 0.17 TFLOPS FP64, 8 GB, 76.8 GB/s); less is a unit mistake or a typo.
_MIN_PLAUSIBLE: dict[str, float] = {
    **{name: 0.001 for name, unit in _POSITIVE_NUMBERS.items() if unit == "TFLOPS"},
    "memory_gb": 0.001, "bandwidth_gbs": 0.1,
}


@dataclass(frozen=True)
class Device:
    """One device row. Units: TFLOPS, GB, GB/s, MB, W, MHz (see ``devices.json`` ``units``).

    Validated on construction (:meth:`__post_init__`): the key is a lower-case token, ``kind``
    is ``gpu`` or ``cpu``, the fields :data:`REQUIRED_FIELDS` names for the kind are present,
    numbers are numbers > 0 (peaks, memory and bandwidth no less than :data:`_MIN_PLAUSIBLE`),
    counts whole numbers > 0. Anything else is a one-line
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
    # dense FP8 (E4M3 / E5M2) tensor / matrix core peak, FP32 accumulate; None = no FP8 units
    # (before Ada / Hopper, AMD before CDNA 3) — or not given: perfcast.devices.derive
    peak_fp8_tflops: float | None = None
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
            least = _MIN_PLAUSIBLE.get(name)
            if least is not None and value < least:
                span = (f"{least:g}–{_MAX_FP32_TFLOPS:g} {unit}" if name == "peak_fp32_tflops"
                        and self.kind == "gpu" else f"≥ {least:g} {unit}")
                raise fail(f"{name} {value:g} {unit} is implausibly small (allowed: {span}); "
                           f"is it in the right unit?")
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
        "bf16" | "fp8" | "fp64"; "fp32_matrix" = FP32 GEMMs on matrix cores, AMD CDNA).

        Falls back to the FP32 peak when the device has no number for a reduced precision (it
        then runs on the FP32 units); an unknown FP64 peak is ``None`` (FP64 is never faster),
        and so is an unknown FP8 peak (FP8 GEMMs need FP8 units: :mod:`perfcast.devices.fp8`).
        """
        p = str(precision).strip().lower()
        if p not in _PRECISION_FIELD:
            raise PerfcastError(f"unknown precision '{precision}'; use one of: {', '.join(PEAK_PRECISIONS)}")
        value = getattr(self, _PRECISION_FIELD[p])
        if p in ("fp64", "fp8"):
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
