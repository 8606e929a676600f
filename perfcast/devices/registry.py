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

import difflib
import json
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path

from perfcast.errors import PerfcastError
from perfcast.paths import user_devices_dir, write_file_atomically

from perfcast.devices.detect import local_cpu
from perfcast.devices.schema import (  # noqa: F401  (the registry's names, as they always were)
    _DATA_FILE,
    LOCAL_CPU_KEY,
    PEAK_PRECISIONS,
    REQUIRED_FIELDS,
    Device,
    _spec_row,
    key_from_file_name,
    load_device_spec,
)


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


#: Product names of registry GPUs as drivers and benchmarks print them (``nvidia-smi``'s
#: names, NeuSight's and ML.ENERGY's devices) where they do not reduce to a key or a registry
#: name by :func:`_name_form`: form → key.
NAME_ALIASES = {
    "a100sxm440gb": "a100-40gb", "a100sxm480gb": "a100-80gb", "a100pcie40gb": "a100-40gb-pcie",
    "a100pcie80gb": "a100-80gb-pcie", "h10080gbhbm3": "h100-sxm", "h100sxm580gb": "h100-sxm",
    "v100sxm216gb": "v100-16gb", "v100sxm232gb": "v100-32gb", "v100pcie32gb": "v100-32gb-pcie",
    "p100pcie16gb": "p100-16gb-pcie", "gh200480gb": "gh200", "gh200144gbhbm3e": "gh200",
    "rtx6000adageneration": "rtx6000-ada", "quadrortx6000": "quadro-rtx-6000",
    "datacentergpumax1550": "max1550",
}
#: Words of a product name that no registry key carries.
_VENDOR_WORDS = ("nvidia", "geforce", "tesla", "amd", "radeon", "instinct", "intel(r)", "intel")


def _name_form(text: str) -> str:
    """A device name reduced for matching: lower case, vendor words and parenthesised remarks
    dropped, only letters and digits (``NVIDIA GeForce RTX 4090`` → ``rtx4090``)."""
    t = re.sub(r"\(.*?\)", " ", str(text).lower())
    t = re.sub(r"\b(" + "|".join(re.escape(w) for w in _VENDOR_WORDS) + r")\b", " ", t)
    return re.sub(r"[^a-z0-9]", "", t)


def _by_name(text: str, registry: Mapping[str, Device]) -> list[str]:
    """The registry keys a product name means (``NVIDIA A100-SXM4-40GB``, ``H100 SXM``,
    ``GeForce RTX 4090``): its :func:`_name_form` against the keys', the registry names' and
    :data:`NAME_ALIASES`; several keys when it is ambiguous, none when unknown."""
    form = _name_form(text)
    if not form:
        return []
    if form in NAME_ALIASES and NAME_ALIASES[form] in registry:
        return [NAME_ALIASES[form]]
    return [k for k, d in registry.items()
            if form in (_name_form(k), _name_form(getattr(d, "name", "") or ""))]


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
    named = _by_name(text, registry)
    if len(named) == 1:
        return registry[named[0]]
    matches = named or _suggest(query, device_keys())
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
