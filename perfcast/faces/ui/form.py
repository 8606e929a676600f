"""The page's form, generated from the request schema (:data:`perfcast.request.fields.FIELDS`):
which fields it shows (:data:`SHOWN`), each input's label, help, choices and starting value, the
form as submitted (:class:`Request`) and its values by field name (:func:`form_values`) — plus
what the page alone takes: the uploads (a model, a device spec) and the names-only model box.

One rule for every box: empty, 0 in a number box and the empty choice (``auto``) are *not
given* — the command's default. The page shows every box whatever the mode, so a box left at its
starting value is not sent for a mode it does not apply to; changed, it is sent and refused by
the request with its one-line message. The same holds for the adapters' boxes (``lora_rank``,
``lora_targets``) while ``finetune`` is not ``lora`` / ``qlora`` (:data:`ADAPTER_FIELDS`).
"""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.request.fields import BY_NAME, Field
from perfcast.workload.finetune import ADAPTER_METHODS

#: The schema fields the page shows, in the form's order.
SHOWN = ("model", "mode", "precision", "batch_size", "input_size", "seq_len", "finetune",
         "lora_rank", "lora_targets", "input_len", "output_len", "engine", "kv_cache_dtype",
         "n_batch", "n_ubatch", "devices", "iterations", "region", "objective")
#: The boxes that shape ``--finetune``'s adapters: they apply to ``finetune`` lora / qlora only
#: (:data:`perfcast.workload.finetune.ADAPTER_METHODS`; the request says so when they are given
#: without it), so a box left at its starting value is not sent without them.
ADAPTER_FIELDS = ("lora_rank", "lora_targets")
#: The page's own inputs (not request fields): an uploaded model and an uploaded device spec.
UPLOADS = {"model_file": "model", "device_file": "devices"}
#: Every input of the form, in order (an upload after the field it stands in for).
INPUTS = tuple(n for name in SHOWN
               for n in (name, *(u for u, beside in UPLOADS.items() if beside == name)))
#: The empty choice of a choice box without a default (the precision measured on the device,
#: the default engine): not given.
AUTO = "auto"
#: Default largest upload (MB), as ``perfcast ui --max-upload-mb``.
MAX_UPLOAD_MB = 20.0
#: Most devices one request may compare.
MAX_DEVICES = 8
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_FILE_SUFFIXES = (".onnx", ".json", ".pb", ".keras", ".h5", ".pdmodel", ".py", ".pt", ".pth")


class UIError(PerfcastError):
    """A request the page refuses (shown as a message)."""


# ------------------------------------------------------------------------------ the inputs
def shown_fields() -> tuple[Field, ...]:
    return tuple(BY_NAME[n] for n in SHOWN)


def elem_id(name: str) -> str:
    """The input's HTML id: ``pc-`` and the name with dashes (``pc-batch-size``)."""
    return "pc-" + name.replace("_", "-")


def label(f: Field) -> str:
    """``batch size, samples``: the name and the unit."""
    return f.name.replace("_", " ") + (f", {f.unit}" if f.unit else "")


def info(f: Field) -> str:
    """The help under an input: the field's sentence (the page's own where it has one), the
    modes it applies to and, for a number, that empty or 0 is the default."""
    text = f.help_for("ui").rstrip(".")
    extra = []
    if f.modes != BY_NAME["mode"].choices and f.name != "mode":
        extra.append("mode " + " / ".join(f.modes) + " only")
    if f.kind in ("int", "float"):
        extra.append("empty or 0: the default")
    return text + (f" ({'; '.join(extra)})" if extra else "") + "."


def choices(f: Field) -> list[str] | None:
    """A choice box's choices: :meth:`Field.allowed`, after :data:`AUTO` when the field has no
    default (``None`` for a box without choices)."""
    allowed = f.allowed()
    if not allowed or f.kind == "list":
        return None
    return ([AUTO] if f.default is None else []) + [str(c) for c in allowed]


def start_value(f: Field) -> Any:
    """The input's starting value: the schema's default for the page (``overrides["ui"]``),
    else the field's; :data:`AUTO` for a choice box without one; a list for the devices."""
    v = f.default_for("ui")
    if f.kind == "list":
        return [x for x in str(v).split(",") if x] if v not in (None, "all") else []
    if v is None and choices(f):
        return AUTO
    return v


def _form_class():
    fields = [(n, Any, dataclasses.field(default=None)) for n in INPUTS]
    cls = dataclasses.make_dataclass("Request", fields)
    cls.__module__ = __name__
    cls.__doc__ = (
        "What the form sends: one attribute per input (:data:`INPUTS`: the request fields the "
        "page shows by their names, and the uploads ``model_file`` / ``device_file``); "
        "``None`` = not given. See :func:`form_values` and :func:`perfcast.faces.ui.run_request`.")
    return cls


#: The form as submitted (generated from :data:`INPUTS`).
Request = _form_class()


# ------------------------------------------------------------------------------ the values
def parse(f: Field, v: Any) -> Any:
    """One input's value for the request, or ``None`` (not given): an empty box, 0 in a number
    box and :data:`AUTO` are not given; a number box's whole number is an ``int``; the devices
    a list of keys. The request checks the rest (kind, bounds, choices, modes)."""
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    if f.kind in ("int", "float"):
        if isinstance(v, bool):
            raise UIError(f"{f.flag} must be a number, got {v!r}")
        if isinstance(v, str):
            try:
                v = float(v.strip())
            except ValueError:
                raise UIError(f"{f.flag} must be a number, got {v!r}") from None
        if not isinstance(v, (int, float)):
            raise UIError(f"{f.flag} must be a number, got {v!r}")
        if v == 0:
            return None
        if isinstance(v, float) and math.isfinite(v) and v == int(v) and f.kind == "int":
            return int(v)
        return v
    if f.kind == "list":
        items = v.split(",") if isinstance(v, str) else list(v)
        items = [str(x).strip() for x in items if str(x).strip()]
        return items or None
    if isinstance(v, str):
        v = v.strip()
        if v == AUTO and choices(f) and AUTO not in (f.allowed() or ()):
            return None
    return v


def form_values(form) -> dict[str, Any]:
    """The form's values by field name — the given ones (module docstring): what the page
    hands to :func:`perfcast.decisions.answer.answer`."""
    mode_field = BY_NAME["mode"]
    mode = parse(mode_field, form.mode) or mode_field.default
    adapters = parse(BY_NAME["finetune"], form.finetune) in ADAPTER_METHODS
    out = {}
    for f in shown_fields():
        v = parse(f, getattr(form, f.name))
        if v is None:
            continue
        applies = (f.applies(mode) or mode not in mode_field.choices) and \
            (adapters or f.name not in ADAPTER_FIELDS)
        if not applies and v == parse(f, start_value(f)):
            continue  # left at its starting value, in a box that does not apply
        out[f.name] = v
    return out


# ------------------------------------------------------------------------------ model input
def model_from_text(text: str | None) -> str:
    """The spec of the model box: a timm name (``resnet50`` / ``timm:resnet50``),
    ``torchvision:<name>`` or ``hf:<id>`` of a config shipped with perfcast; everything else —
    paths, ``module:callable``, other prefixes — is refused."""
    t = (text or "").strip()
    if not t:
        raise UIError("give a model name (e.g. resnet50, torchvision:resnet18, "
                      "hf:bert-base-uncased) or upload an .onnx / config.json file")
    if len(t) > 200:
        raise UIError("the model name is too long")
    prefix, sep, rest = t.partition(":")
    if sep and prefix == "hf":
        from perfcast.zoo.hf_config import _lookup_shipped, shipped_model_ids

        model_id = _lookup_shipped(rest)
        if model_id is None:
            ids = shipped_model_ids()
            raise UIError(f"unknown Hugging Face model {rest!r}: the page takes the "
                          f"{len(ids)} configs shipped with perfcast (e.g. "
                          f"{', '.join(ids[:4])}) or an uploaded config.json")
        if Path(model_id).exists():
            raise UIError(f"hf:{model_id} names a local file here; upload the config instead")
        return f"hf:{model_id}"
    looks_like_path = ("/" in t or "\\" in t or t.startswith(("~", ".")) or ".." in t
                       or t.lower().endswith(_FILE_SUFFIXES))
    if looks_like_path:
        raise UIError(f"file paths are not accepted in the model box ({t!r}); upload an .onnx "
                      f"or config.json file instead")
    if sep:
        if prefix in ("timm", "torchvision", "tv") and _NAME.fullmatch(rest):
            return t
        raise UIError(f"{t!r}: the page takes timm / torchvision names and hf: ids only "
                      f"(module:callable specs and other prefixes are refused; use the "
                      f"command line for those)")
    if not _NAME.fullmatch(t):
        raise UIError(f"{t!r} is not a model name (letters, digits, _ . - only)")
    if Path(t).exists():
        raise UIError(f"{t!r} names a file here; upload it instead")
    return t


def _upload(path: Any, suffixes: tuple[str, ...], into: Path, name: str,
            limit_mb: float) -> Path:
    """Move an upload into the request's private directory as ``name`` (Gradio's copy is
    deleted), after checking its suffix and size."""
    src = Path(str(path))
    try:
        shown = src.name
        suffix = src.suffix.lower()
        if suffix not in suffixes:
            raise UIError(f"{shown}: only {' or '.join(suffixes)} files are accepted here")
        size = src.stat().st_size
        if size > limit_mb * 2**20:
            raise UIError(f"{shown}: {size / 2**20:,.1f} MB is over the upload limit of "
                          f"{limit_mb:g} MB")
        if size == 0:
            raise UIError(f"{shown}: the file is empty")
        dest = into / name
        shutil.copyfile(src, dest)
        return dest
    except OSError as exc:
        raise UIError(f"the upload could not be read ({exc.strerror or exc}); upload it "
                      f"again") from None
    finally:
        try:
            src.unlink()
        except OSError:
            pass


def _check_onnx(path: Path, shown: str) -> None:
    """An ONNX model without external data, or a :class:`UIError` saying what it is not."""
    import onnx

    try:
        m = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 — any parse failure is "not ONNX"
        raise UIError(f"{shown}: not an ONNX model (the file does not parse as ONNX)") from None
    if not m.ir_version or not m.graph.node:
        raise UIError(f"{shown}: not an ONNX model (no graph nodes in it)")
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        raise UIError(f"{shown}: ONNX models with external data files are not accepted here")


def model_from_upload(path: Any, into: Path, limit_mb: float) -> tuple[str, str]:
    """``(spec, label)`` of an uploaded ``.onnx`` or HF ``config.json``."""
    import json

    shown = Path(str(path)).name
    dest = _upload(path, (".onnx", ".json"), into,
                   "model.onnx" if shown.lower().endswith(".onnx") else "config.json", limit_mb)
    if dest.suffix == ".onnx":
        _check_onnx(dest, shown)
        return str(dest), shown
    try:
        doc = json.loads(dest.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise UIError(f"{shown}: not valid JSON") from None
    if not isinstance(doc, dict) or "model_type" not in doc:
        raise UIError(f"{shown}: not a Hugging Face config.json (no \"model_type\"); upload "
                      f"device specs in the device box")
    return f"hf:{dest}", shown


def device_from_upload(path: Any, into: Path, limit_mb: float):
    """The :class:`~perfcast.devices.Device` of an uploaded spec, registered for the server
    process under its key — or, when that key is taken by another device, under
    ``<key>-<hash>`` (a note says so)."""
    import hashlib

    from perfcast.devices import get_device, register_device
    from perfcast.devices.registry import LOCAL_CPU_KEY, device_keys, load_device_spec

    shown = Path(str(path)).name
    dest = _upload(path, (".json",), into, "device.json", limit_mb)
    dev = load_device_spec(dest)
    note = None
    if dev.key in device_keys():
        current = get_device(dev.key)
        if current == dev:
            return current, None
        new = f"{dev.key}-{hashlib.sha1(dest.read_bytes()).hexdigest()[:6]}"
        note = f"{shown}: key {dev.key!r} is taken by another device; used {new!r}"
        dev = dataclasses.replace(dev, key=new)
        if new in device_keys():
            return get_device(new), note
    if dev.key == LOCAL_CPU_KEY:
        raise UIError(f"{shown}: the key 'cpu' is reserved for this machine's CPU")
    return register_device(dev), note


__all__ = ["ADAPTER_FIELDS", "AUTO", "INPUTS", "MAX_DEVICES", "MAX_UPLOAD_MB", "SHOWN",
           "UPLOADS", "Request", "UIError", "choices", "device_from_upload", "elem_id",
           "form_values", "info", "label", "model_from_text", "model_from_upload", "parse",
           "shown_fields", "start_value"]
