"""``perfcast ui``: a web page for people who would rather look than type (thesis §6.6.4).

A thin Gradio layer over :mod:`perfcast.api`, :mod:`perfcast.decisions` and
:mod:`perfcast.report` (optional extra: ``pip install 'perfcast[ui]'``). :func:`build_app`
returns the ``gradio.Blocks``; :func:`serve` runs it; :func:`run_request` is the request handler
without Gradio (what the page calls, testable directly).

In: a model — a timm / torchvision name, ``hf:<id>`` of a shipped config, or an uploaded
``.onnx`` or ``config.json`` — batch size, input size or sequence length (input / output length,
the serving engine and llama.cpp's ``n_batch`` / ``n_ubatch`` for ``generate``), mode, precision, one or several registry devices and/or an uploaded device
spec (JSON). Out: the prediction per device with its sources (and intervals where the
prediction has ``<key>_low`` / ``<key>_high``: every key of the prediction is shown), the
memory breakdown, the MIG profile, the largest batch that fits, cost and CO2e of a job, a bar
chart ranking the devices and the roofline chart of the first device.

Safety (the page may be opened by anyone who can reach the port):

* it listens on 127.0.0.1 unless ``--host`` says otherwise;
* uploads are limited to ``max_upload_mb`` (MB of 2**20 bytes; default 20, ``perfcast ui
  --max-upload-mb``; refused by the server before they are stored, and checked again here), only ``.onnx`` and ``.json`` are taken, an ``.onnx`` must parse as an
  ONNX model without external data; each upload is moved into a private temporary directory for
  the request and deleted with it (Gradio's own upload folder is a temporary directory of the
  server, deleted when it stops);
* the model box takes names only: ``module:callable`` specs, other frameworks' prefixes, file
  paths and anything that names an existing file are refused (upload the file instead);
  devices are registry keys or an uploaded spec, never a path;
* an error is a one-line message in the page (``#pc-status``), never a traceback; requests
  are queued (one runs at a time) and the long ones show their progress.
"""

from __future__ import annotations

import html
import io
import itertools
import logging
import math
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.workload import (  # every mode and engine the page offers
    DEFAULT_ENGINE,
    ENGINES,
    LLAMA_CPP_N_BATCH,
    LLAMA_CPP_N_UBATCH,
    MODES,
    OBJECTIVES,
)

log = logging.getLogger("perfcast")

#: Default largest upload (MB), as ``perfcast ui --max-upload-mb``.
MAX_UPLOAD_MB = 20.0
#: Most devices one request may compare.
MAX_DEVICES = 8
PRECISION_CHOICES = ("auto", "fp32", "amp", "fp16", "bf16")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_FILE_SUFFIXES = (".onnx", ".json", ".pb", ".keras", ".h5", ".pdmodel", ".py", ".pt", ".pth")


class UIError(PerfcastError):
    """A request the page refuses (shown as a message)."""


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
        from perfcast.zoo.hf import _lookup_shipped, shipped_model_ids

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
        label = src.name
        suffix = src.suffix.lower()
        if suffix not in suffixes:
            raise UIError(f"{label}: only {' or '.join(suffixes)} files are accepted here")
        size = src.stat().st_size
        if size > limit_mb * 2**20:
            raise UIError(f"{label}: {size / 2**20:,.1f} MB is over the upload limit of "
                          f"{limit_mb:g} MB")
        if size == 0:
            raise UIError(f"{label}: the file is empty")
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


def _check_onnx(path: Path, label: str) -> None:
    """An ONNX model without external data, or a :class:`UIError` saying what it is not."""
    import onnx

    try:
        m = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 — any parse failure is "not ONNX"
        raise UIError(f"{label}: not an ONNX model (the file does not parse as ONNX)") from None
    if not m.ir_version or not m.graph.node:
        raise UIError(f"{label}: not an ONNX model (no graph nodes in it)")
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        raise UIError(f"{label}: ONNX models with external data files are not accepted here")


def model_from_upload(path: Any, into: Path, limit_mb: float) -> tuple[str, str]:
    """``(spec, label)`` of an uploaded ``.onnx`` or HF ``config.json``."""
    import json

    label = Path(str(path)).name
    dest = _upload(path, (".onnx", ".json"), into,
                   "model.onnx" if label.lower().endswith(".onnx") else "config.json", limit_mb)
    if dest.suffix == ".onnx":
        _check_onnx(dest, label)
        return str(dest), label
    try:
        doc = json.loads(dest.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise UIError(f"{label}: not valid JSON") from None
    if not isinstance(doc, dict) or "model_type" not in doc:
        raise UIError(f"{label}: not a Hugging Face config.json (no \"model_type\"); upload "
                      f"device specs in the device box")
    return f"hf:{dest}", label


def device_from_upload(path: Any, into: Path, limit_mb: float):
    """The :class:`~perfcast.devices.Device` of an uploaded spec, registered for the server
    process under its key — or, when that key is taken by another device, under
    ``<key>-<hash>`` (a note says so)."""
    import dataclasses
    import hashlib

    from perfcast.devices import get_device, register_device
    from perfcast.devices.registry import LOCAL_CPU_KEY, device_keys, load_device_spec

    label = Path(str(path)).name
    dest = _upload(path, (".json",), into, "device.json", limit_mb)
    dev = load_device_spec(dest)
    note = None
    if dev.key in device_keys():
        current = get_device(dev.key)
        if current == dev:
            return current, None
        new = f"{dev.key}-{hashlib.sha1(dest.read_bytes()).hexdigest()[:6]}"
        note = f"{label}: key {dev.key!r} is taken by another device; used {new!r}"
        dev = dataclasses.replace(dev, key=new)
        if new in device_keys():
            return get_device(new), note
    if dev.key == LOCAL_CPU_KEY:
        raise UIError(f"{label}: the key 'cpu' is reserved for this machine's CPU")
    return register_device(dev), note


# ------------------------------------------------------------------------------ the request
@dataclass
class Request:
    """What the form sends (see :func:`run_request`)."""

    model: str | None = "resnet50"
    model_file: Any = None
    batch_size: Any = None
    input_size: str | None = None
    seq_len: Any = None
    input_len: Any = None
    output_len: Any = None
    mode: str = "infer"
    precision: str = "auto"
    devices: list[str] = field(default_factory=list)
    device_file: Any = None
    iterations: Any = 1000
    region: str | None = None
    objective: str = "time"
    #: mode generate: the serving engine (ignored by the other modes: the form always sends
    #: one) and llama.cpp's logical / physical batch (empty or 0: llama-bench's defaults)
    engine: str | None = None
    n_batch: Any = None
    n_ubatch: Any = None


@dataclass
class Result:
    """What the page shows: HTML fragments and charts (PNG bytes; ``None`` when absent)."""

    status: str
    table: str = ""
    notes: str = ""
    memory: str = ""
    decisions: str = ""
    ranking_png: bytes | None = None
    roofline_png: bytes | None = None
    predictions: list[dict[str, Any]] = field(default_factory=list)


def _int(name: str, v: Any, *, required: bool = False) -> int | None:
    """A whole number ≥ 1 from the form; empty or 0 (what an empty number box sends) is
    ``None`` — the default."""
    if v is None or (isinstance(v, str) and not v.strip()) or (
            isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0):
        if required:
            raise UIError(f"{name} is required")
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise UIError(f"{name} must be a whole number, got {v!r}") from None
    if not math.isfinite(f) or f != int(f) or f < 1:
        raise UIError(f"{name} must be a whole number ≥ 1, got {v!r}")
    return int(f)


def run_request(req: Request, *, max_upload_mb: float = MAX_UPLOAD_MB,
                progress=None) -> Result:
    """Answer one form submission (see the module docstring). Errors become a message in
    ``Result.status``; ``progress(fraction, text)`` is called as the work goes."""
    try:
        with tempfile.TemporaryDirectory(prefix="perfcast-ui-") as tmp:
            return _run(req, Path(tmp), max_upload_mb, progress or (lambda f, t: None))
    except PerfcastError as exc:
        return Result(status=_message(str(exc), error=True))
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 — a message in the page, the traceback in the log
        log.warning("perfcast ui: %s: %s", type(exc).__name__, exc, exc_info=True)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return Result(status=_message(f"internal error: {type(exc).__name__}: {first}",
                                      error=True))
    finally:
        for f in (req.model_file, req.device_file):  # never kept, even when not used
            if f:
                Path(str(f)).unlink(missing_ok=True)


_SERIAL = itertools.count(1)


def _message(text: str, *, error: bool = False) -> str:
    """The status box: ``text`` (an error in red); ``data-serial`` numbers the answers of this
    server (a page can tell a new answer from the last one)."""
    e = html.escape
    cls = "pc-error" if error else "pc-ok"
    return (f'<div class="{cls}" data-serial="{next(_SERIAL)}">{"Error: " if error else ""}'
            f"{e(text)}</div>")


def notes_box(notes: list, preds: list[dict[str, Any]] | None = None) -> str:
    """The notes of an answer grouped by the quantity they are about, each group collapsible
    (:func:`perfcast.report.note_groups`); a note is ``(device, text)`` or a plain string, and
    each prediction adds where its intervals were calibrated."""
    from perfcast.report import note_groups, notes_html

    pairs = [n if isinstance(n, tuple) else (None, str(n)) for n in notes]
    intervals = {d["device"]: d.get("intervals") or {} for d in preds or []}
    groups = note_groups(pairs, intervals)
    if not groups:
        return ""
    n = sum(len(lines) for _, lines in groups)
    return (f'<div id="pc-notes"><p class="pc-notes-title">Notes ({n}) — how each value was '
            f"made and what to keep in mind; open a group to read it</p>"
            + notes_html(groups) + "</div>")


def _run(req: Request, tmp: Path, limit_mb: float, progress) -> Result:
    from perfcast.devices import get_device
    from perfcast.devices.registry import device_keys

    notes: list[str] = []
    if req.mode not in MODES:
        raise UIError(f"mode must be one of {', '.join(MODES)}")
    if req.precision not in PRECISION_CHOICES:
        raise UIError(f"precision must be one of {', '.join(PRECISION_CHOICES)}")
    if req.objective not in OBJECTIVES:
        raise UIError(f"ranking objective must be one of {', '.join(OBJECTIVES)}")
    if req.engine not in (None, "", *ENGINES):
        raise UIError(f"engine must be one of {', '.join(ENGINES)}")
    # uploads first: they are deleted whatever happens next
    if req.model_file:
        spec, label = model_from_upload(req.model_file, tmp, limit_mb)
        if (req.model or "").strip() not in ("", "resnet50"):
            notes.append((None, f"the uploaded {label} is used, not the model box"))
    else:
        spec = model_from_text(req.model)
        label = spec
    devices = []
    keys = device_keys()
    for k in req.devices or []:
        if k not in keys:
            raise UIError(f"unknown device {k!r} (choose from the list)")
        devices.append(get_device(k))
    if req.device_file:
        dev, note = device_from_upload(req.device_file, tmp, limit_mb)
        devices.append(dev)
        if note:
            notes.append((None, note))
    if not devices:
        raise UIError("choose at least one device (or upload a device spec)")
    if len(devices) > MAX_DEVICES:
        raise UIError(f"at most {MAX_DEVICES} devices per request")
    devices = list({d.key: d for d in devices}.values())
    iterations = _int("iterations", req.iterations) or 1000
    uploaded = bool(req.model_file)
    region = (req.region or "").strip() or None
    if req.mode == "generate":
        return _run_generation(req, spec, label, devices, iterations, region, notes, progress)
    return _run_predict(req, spec, label, devices, iterations, region, uploaded, notes,
                        progress)


def _run_predict(req: Request, spec: str, label: str, devices: list, iterations: int,
                 region: str | None, uploaded: bool, notes: list[str], progress) -> Result:
    from perfcast.api import DEFAULT_BATCH, parse_request, predict_workload
    from perfcast.report import (
        Report,
        analyse_operators,
        chart_pngs,
        decide,
        memory_of,
        peaks,
    )

    use_cache = not uploaded  # an upload leaves nothing behind in the caches
    progress(0.02, "reading the model")
    for name, v in (("input length", req.input_len), ("output length", req.output_len),
                    ("n_batch", req.n_batch), ("n_ubatch", req.n_ubatch)):
        if v not in (None, "", 0):
            raise UIError(f"{name} applies to mode generate only (leave it empty)")
    w0, _ = parse_request(spec, batch_size=_int("batch size", req.batch_size),
                          input_size=(req.input_size or "").strip() or None,
                          seq_len=_int("sequence length", req.seq_len), mode=req.mode,
                          precision=None if req.precision == "auto" else req.precision)
    n = len(devices)
    preds, works, mems, decs = [], [], [], []
    for i, dev in enumerate(devices):
        progress(0.05 + 0.35 * i / n, f"predicting on {dev.key} ({i + 1}/{n}; the first "
                                      f"request for a model builds its graph)")
        p = predict_workload(w0, dev, use_cache=use_cache)
        w = w0.replace(precision=p.precision, batch_size=p.batch_size or DEFAULT_BATCH[w0.mode])
        if w.input_size is None and p.input_size and w.model.inputs in ("image", "tensor"):
            w = w.replace(input_size=tuple(p.input_size))
        preds.append(p)
        works.append(w)
    sims: dict[tuple, Any] = {}
    for i, (dev, p, w) in enumerate(zip(devices, preds, works)):
        progress(0.4 + 0.2 * i / n, f"memory simulation ({w.precision})")
        key = (w.precision, w.batch_size)
        if key not in sims:
            sims[key] = memory_of(w, p, use_cache=use_cache, notes=notes)
        m = dict(sims[key]) if sims[key] else None
        if m is not None and p.memory_mb is not None:
            m["predicted_device_mb"] = p.memory_mb
            m["runtime_and_other_mb"] = max(0.0, p.memory_mb - m["tensor_peak_mb"])
        mems.append(m)
    for i, (dev, w) in enumerate(zip(devices, works)):
        progress(0.6 + 0.3 * i / n, f"largest batch, MIG profile and cost on {dev.key}")
        decs.append(decide(w, dev, use_cache=use_cache, iterations=iterations, region=region,
                           notes=notes))
    progress(0.92, "charts")
    first = devices[0]
    ops_notes: list[str] = []
    roofline_png = None
    try:
        ops = analyse_operators(works[0], first, preds[0], use_cache=use_cache, notes=ops_notes)
        r = Report(model=label, device=first.key, device_name=first.name, mode=works[0].mode,
                   precision=works[0].precision, batch_size=int(works[0].batch_size),
                   prediction=preds[0].to_dict(), **peaks(first, works[0].precision), **ops)
        roofline_png = chart_pngs(r)["roofline"]
    except PerfcastError as exc:
        notes.append((None, f"roofline chart: {exc}"))
    dicts = []
    for p in preds:
        d = p.to_dict()
        if uploaded:
            d["model"] = label
        dicts.append(d)
    for p in preds:
        notes.extend((p.device, n) for n in p.notes)
    status = (f"{label} — {works[0].mode}, batch {works[0].batch_size:,} on "
              f"{', '.join(d.key for d in devices)}")
    return Result(status=_message(status), notes=notes_box(notes + ops_notes, dicts),
                  table=prediction_table(dicts), memory=memory_table(devices, mems),
                  decisions=decisions_table(devices, decs),
                  ranking_png=ranking_png(label, works[0], dicts, decs, req.objective,
                                          iterations),
                  roofline_png=roofline_png, predictions=dicts)


def _run_generation(req: Request, spec: str, label: str, devices: list, iterations: int,
                    region: str | None, notes: list[str], progress) -> Result:
    from perfcast.api import as_workload
    from perfcast.decisions.cost import estimate_generation_cost
    from perfcast.generation import DEFAULTS, max_generation_batch, predict_generation, resolve

    for name, v in (("input size", req.input_size), ("sequence length", req.seq_len)):
        if v not in (None, "", 0):
            raise UIError(f"{name} does not apply to mode generate (use input / output length)")
    precision = DEFAULTS["precision"] if req.precision in ("auto", "amp") else req.precision
    g = resolve(as_workload(spec, mode="generate", precision=precision,
                            input_len=_int("input length", req.input_len, required=True),
                            output_len=_int("output length", req.output_len, required=True),
                            batch_size=_int("batch size", req.batch_size),
                            engine=req.engine or None, n_batch=_int("n_batch", req.n_batch),
                            n_ubatch=_int("n_ubatch", req.n_ubatch)))
    dicts, decs = [], []
    n = len(devices)
    for i, dev in enumerate(devices):
        progress(0.1 + 0.8 * i / n, f"generation on {dev.key} ({i + 1}/{n})")
        p = predict_generation(g, dev)
        d = p.to_dict()
        d["model"] = label
        dicts.append(d)
        notes.extend((dev.key, x) for x in p.notes)
        dec: dict[str, Any] = {"fit": None, "mig": None, "cost": None}
        try:
            b, _ = max_generation_batch(g, dev)
            dec["fit"] = {"max_batch_size": b}
        except PerfcastError as exc:
            notes.append((dev.key, f"largest batch: {exc}"))
        try:
            dec["cost"] = estimate_generation_cost(
                g, device=dev.key, requests=iterations * g.batch_size, region=region).to_dict()
        except PerfcastError as exc:
            notes.append((dev.key, f"cost: {exc}"))
        decs.append(dec)
    notes.append((None, "generate: no roofline chart (it covers infer and train) and no MIG "
                        "advice"))
    mems = [{"memory_breakdown_mb": d.get("memory_breakdown_mb")} for d in dicts]
    knobs = (f" (n_batch {g.n_batch:,}, n_ubatch {g.n_ubatch:,})" if g.engine == "llama.cpp"
             else "")
    status = (f"{label} — generate, {g.engine}, batch {g.batch_size:,}{knobs}, "
              f"{g.input_len:,} → {g.output_len:,} tokens on "
              f"{', '.join(d.key for d in devices)}")
    return Result(status=_message(status), notes=notes_box(notes, dicts),
                  table=prediction_table(dicts),
                  memory=memory_table(devices, mems), decisions=decisions_table(devices, decs),
                  ranking_png=ranking_png(label, None, dicts, decs, req.objective, iterations),
                  predictions=dicts)


# ------------------------------------------------------------------------------ rendering
def prediction_table(preds: list[dict[str, Any]]) -> str:
    """Quantities × devices, as people read them (:func:`perfcast.report.prediction_rows`):
    every key of the predictions with its unit, the interval beside the value ("16.4 ms
    (11.5–20.9 ms, 90 %)"), the predictor under it, and the out-of-distribution verdict as a
    sentence. Each value cell carries ``data-device``, ``data-key`` and ``data-value`` (the
    exact number)."""
    from perfcast.report import fmt, prediction_rows

    e = html.escape
    rows_by_dev = [{r["quantity"]: r for r in prediction_rows(d)} for d in preds]
    keys = list(dict.fromkeys(k for rows in rows_by_dev for k in rows))
    labels = {k: r["label"] for rows in rows_by_dev for k, r in rows.items()}
    head = "".join(f"<th>{e(d['device'])}<br><small>{e(str(d.get('precision')))}, batch "
                   f"{e(fmt(d.get('batch_size')))}</small></th>" for d in preds)
    body = []
    for k in keys:
        cells = []
        for d, rows in zip(preds, rows_by_dev):
            r = rows.get(k)
            if r is None:
                cells.append("<td>—</td>")
                continue
            v = r["value"]
            raw = repr(v) if isinstance(v, (int, float, bool)) or v is None else str(v)
            extra = ""
            if r["interval"]:
                extra += f' <span class="pc-interval">({e(r["interval"])})</span>'
            if r["source"]:
                extra += f'<br><small class="pc-source">{e(r["source"])}</small>'
            cls = "pc-value pc-sentence" if k == "ood" else "pc-value"
            cells.append(f'<td data-device="{e(d["device"])}" data-key="{e(k)}" '
                         f'data-value="{e(raw)}"><span class="{cls}">{e(r["text"])}</span>'
                         f"{extra}</td>")
        body.append(f'<tr><th scope="row">{e(labels[k])}</th>{"".join(cells)}</tr>')
    return (f'<div class="pc-scroll"><table id="pc-table" class="pc-table"><thead><tr>'
            f"<th>quantity</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")


def memory_table(devices: list, mems: list[dict[str, Any] | None]) -> str:
    """Memory breakdown per device (MiB): parameters, gradients, optimizer state, activations
    at the peak, inputs and buffers, runtime overhead and other, predicted total."""
    from perfcast.report import with_unit

    e = html.escape
    parts = (("parameters", "param_mb"), ("gradients", "grad_mb"),
             ("optimizer state", "optimizer_state_mb"),
             ("activations (at the peak)", "activation_peak_mb"), ("inputs", "input_mb"),
             ("buffers", "buffer_mb"), ("tensor peak (simulated)", "tensor_peak_mb"),
             ("runtime overhead and other", "runtime_and_other_mb"),
             ("predicted device memory", "predicted_device_mb"))
    rows = []
    gen = [m.get("memory_breakdown_mb") if m else None for m in mems]
    if any(gen):
        keys = list(dict.fromkeys(k for g in gen if g for k in g))
        parts = tuple((k, k) for k in keys)
        mems = [g or {} for g in gen]
    for label, key in parts:
        vals = [m.get(key) if m else None for m in mems]
        if all(v is None for v in vals):
            continue
        rows.append(f"<tr><th>{e(label.replace('_', ' '))}</th>"
                    + "".join(f"<td>{e(with_unit(v, 'MiB'))}</td>" for v in vals) + "</tr>")
    if not rows:
        return "<p>No memory breakdown (no tensor simulation for this model).</p>"
    head = "".join(f"<th>{e(d.key)}</th>" for d in devices)
    return (f'<div class="pc-scroll"><table id="pc-memory" class="pc-table"><thead><tr>'
            f"<th>memory</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def decisions_table(devices: list, decs: list[dict[str, Any]]) -> str:
    """Per device: largest batch that fits, MIG profile, job hours, USD, kWh, kg CO2e."""
    from perfcast.report import with_unit

    e = html.escape
    cost = lambda d, k: (d.get("cost") or {}).get(k)  # noqa: E731
    lines = [("largest batch that fits", "samples",
              lambda d: (d.get("fit") or {}).get("max_batch_size")),
             ("MIG profile", None, lambda d: ((d.get("mig") or {}).get("profile") or "none fits")
              if d.get("mig") else None),
             ("job: length", "batches", lambda d: cost(d, "iterations")),
             ("job: time", "duration", lambda d: cost(d, "hours")),
             ("job: price", "USD", lambda d: cost(d, "usd")),
             ("job: energy", "kWh", lambda d: cost(d, "energy_kwh")),
             ("job: emissions", "kg CO2e", lambda d: cost(d, "kg_co2e"))]
    head = "".join(f"<th>{e(d.key)}</th>" for d in devices)
    def text(v, unit):
        return _duration(v) if unit == "duration" else with_unit(v, unit)

    body = "".join(f"<tr><th>{e(label)}</th>"
                   + "".join(f"<td>{e(text(get(d), unit))}</td>" for d in decs) + "</tr>"
                   for label, unit, get in lines)
    return (f'<div class="pc-scroll"><table id="pc-decisions" class="pc-table"><thead><tr>'
            f"<th>decision</th>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def _duration(hours: Any) -> str:
    """Hours as people say them: ``16.4 s``, ``12.5 min``, ``3.20 h``, ``4.1 days``."""
    from perfcast.report import fmt

    if not isinstance(hours, (int, float)) or isinstance(hours, bool):
        return fmt(hours)
    s = hours * 3600
    if s < 60:
        return f"{fmt(s, 3)} s"
    if s < 3600:
        return f"{fmt(s / 60, 3)} min"
    if hours < 48:
        return f"{fmt(hours, 3)} h"
    return f"{fmt(hours / 24, 3)} days"


def ranking_png(label: str, w, preds: list[dict[str, Any]], decs: list[dict[str, Any]],
                objective: str, iterations: int) -> bytes | None:
    """Bar chart of the devices by ``objective`` (time per batch, or USD / kWh of the job),
    as :func:`perfcast.decisions.rank.rank` orders them: devices whose time is learned first,
    then those with a model of any GPU (crossdevice) or the roofline; hatched: does not fit."""
    from perfcast.report import _plt

    vals = []
    for d, dec in zip(preds, decs):
        cost = dec.get("cost") or {}
        v = {"time": d.get("time_ms"), "cost": cost.get("usd"),
             "energy": cost.get("energy_kwh")}[objective]
        src = (d.get("predictor") or {}).get("time_ms") or "—"
        learned = src not in ("roofline", "crossdevice", "—")
        vals.append((v is None, not learned, d.get("fits") is False, v or 0.0, d, src))
    vals.sort(key=lambda t: t[:4])
    rows = [t for t in vals if not t[0]]
    if not rows:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.3))
    names = [f"{t[4]['device']} ({t[5]})" for t in rows][::-1]
    bars = ax.barh(names, [t[3] for t in rows][::-1],
                   color=["tab:blue" if not t[1] else "tab:gray" for t in rows][::-1])
    for b, t in zip(bars, rows[::-1]):
        if t[2]:
            b.set_hatch("//")
    unit = {"time": "ms per batch", "cost": f"USD for {iterations:,} batches",
            "energy": f"kWh for {iterations:,} batches"}[objective]
    ax.set_xlabel(unit)
    ax.set_title(f"{label}\nblue: learned time · gray: any-GPU model or roofline · "
                 f"hatched: does not fit", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=100)
    finally:
        plt.close(fig)
    return buf.getvalue()


# ------------------------------------------------------------------------------ Gradio
_CSS = """
.pc-scroll{max-width:100%;overflow-x:auto}
.pc-table{border-collapse:collapse;font-size:.9em;width:100%}
.pc-table th,.pc-table td{border:1px solid #ccc;padding:4px 8px;text-align:left;
vertical-align:top;overflow-wrap:break-word}.pc-table small{color:#666}
.pc-table tbody th{font-weight:600;min-width:6.5em;hyphens:auto}
.pc-value{font-variant-numeric:tabular-nums;font-weight:600}.pc-sentence{font-weight:normal}
.pc-interval{color:#555;white-space:nowrap}
.pc-error{background:#fde8e8;border:1px solid #e02424;color:#9b1c1c;padding:.6em;
border-radius:4px}.pc-ok{background:#eef6ee;border:1px solid #8c8;padding:.6em;border-radius:4px}
#pc-notes details{border:1px solid #ddd;border-radius:4px;margin:.3em 0;padding:.2em .6em}
#pc-notes summary{cursor:pointer;font-weight:600}#pc-notes li{font-size:.9em;margin:.2em 0}
.pc-notes-title{margin:.6em 0 .2em;color:#444}
@media (max-width:600px){.pc-table{font-size:.82em}.pc-table th,.pc-table td{padding:3px 4px}
.pc-table tbody th{min-width:5.5em}.pc-interval{white-space:normal}}
"""


def _import_gradio():
    try:
        import gradio as gr
    except ImportError:
        raise PerfcastError("perfcast ui needs Gradio: pip install 'perfcast[ui]'") from None
    return gr


def build_app(max_upload_mb: float = MAX_UPLOAD_MB):
    """The page as a ``gradio.Blocks`` (queue set: one request runs at a time, others wait)."""
    gr = _import_gradio()
    from PIL import Image

    from perfcast.devices.registry import device_keys

    keys = device_keys()
    # delete_cache: every 5 minutes the files older than 10 (charts sent to the page), and all
    # of them when the server stops
    with gr.Blocks(title="perfcast", analytics_enabled=False, delete_cache=(300, 600)) as demo:
        gr.Markdown("# perfcast — forecast a model's time, memory, energy and cost on "
                    "hardware\nPredictions are estimates; each value says which model or "
                    f"simulation gave it. Uploads: .onnx or .json up to {max_upload_mb:g} MB, "
                    "deleted after use.")
        with gr.Row():
            with gr.Column():
                model = gr.Textbox(label="model", value="resnet50", elem_id="pc-model",
                                   info="timm or torchvision:<name>, hf:<id> (shipped "
                                        "configs) — or upload below")
                model_file = gr.File(label="…or upload a model (.onnx or config.json)",
                                     file_types=[".onnx", ".json"], elem_id="pc-model-file")
                with gr.Row():
                    mode = gr.Radio(list(MODES), value="infer", label="mode",
                                    elem_id="pc-mode")
                    precision = gr.Dropdown(list(PRECISION_CHOICES), value="auto",
                                            label="precision", elem_id="pc-precision")
                with gr.Row():
                    batch = gr.Number(label="batch size, samples (0 = default)", value=None, precision=0,
                                      elem_id="pc-batch")
                    input_size = gr.Textbox(label="input size C,H,W (vision)",
                                            elem_id="pc-input-size")
                    seq_len = gr.Number(label="sequence length, tokens (text; 0 = default)", value=None,
                                        precision=0, elem_id="pc-seq-len")
                with gr.Row():
                    input_len = gr.Number(label="input length, tokens (generate)", value=None,
                                          precision=0, elem_id="pc-input-len")
                    output_len = gr.Number(label="output length, tokens (generate)", value=None,
                                           precision=0, elem_id="pc-output-len")
                with gr.Row():
                    engine = gr.Dropdown(list(ENGINES), value=DEFAULT_ENGINE,
                                         label="serving engine (generate; batch size = "
                                               "concurrent requests)", elem_id="pc-engine")
                    n_batch = gr.Number(label=f"n_batch, tokens (llama.cpp; 0 = "
                                              f"{LLAMA_CPP_N_BATCH:,})", value=None,
                                        precision=0, elem_id="pc-n-batch")
                    n_ubatch = gr.Number(label=f"n_ubatch, tokens (llama.cpp; 0 = "
                                               f"{LLAMA_CPP_N_UBATCH})", value=None,
                                         precision=0, elem_id="pc-n-ubatch")
            with gr.Column():
                devices = gr.Dropdown(keys, value=["a100-40gb", "rtx4090"] if
                                      {"a100-40gb", "rtx4090"} <= set(keys) else keys[:1],
                                      multiselect=True, label="devices", elem_id="pc-devices",
                                      max_choices=MAX_DEVICES)
                device_file = gr.File(label="…and/or upload a device spec (.json)",
                                      file_types=[".json"], elem_id="pc-device-file")
                with gr.Row():
                    iterations = gr.Number(label="job length, batches (cost, CO2e)", value=1000,
                                           precision=0, elem_id="pc-iterations")
                    region = gr.Textbox(label="grid region (CO2e; default world)",
                                        elem_id="pc-region")
                    objective = gr.Radio(list(OBJECTIVES), value="time", label="rank by",
                                         elem_id="pc-objective")
                go = gr.Button("Predict", variant="primary", elem_id="pc-go")
        status = gr.HTML(elem_id="pc-status")
        table = gr.HTML(elem_id="pc-table-box")
        notes = gr.HTML(elem_id="pc-notes-box")
        # (columns with a minimum width: on a phone they stack instead of squeezing)
        with gr.Row():
            with gr.Column(min_width=340):
                ranking = gr.Image(label="devices ranked", type="pil", elem_id="pc-ranking",
                                   interactive=False)
            with gr.Column(min_width=340):
                roofline = gr.Image(label="roofline of the first device", type="pil",
                                    elem_id="pc-roofline", interactive=False)
        with gr.Row():
            with gr.Column(min_width=340):
                memory = gr.HTML(elem_id="pc-memory-box")
            with gr.Column(min_width=340):
                decisions = gr.HTML(elem_id="pc-decisions-box")

        def img(png: bytes | None):
            return Image.open(io.BytesIO(png)) if png else None

        def submit(model_v, model_file_v, batch_v, input_size_v, seq_len_v, input_len_v,
                   output_len_v, mode_v, precision_v, devices_v, device_file_v, iterations_v,
                   region_v, objective_v, engine_v=None, n_batch_v=None, n_ubatch_v=None,
                   progress=gr.Progress()):
            r = run_request(Request(
                model=model_v, model_file=model_file_v, batch_size=batch_v,
                input_size=input_size_v, seq_len=seq_len_v, input_len=input_len_v,
                output_len=output_len_v, mode=mode_v, precision=precision_v,
                devices=list(devices_v or []), device_file=device_file_v,
                iterations=iterations_v, region=region_v, objective=objective_v,
                engine=engine_v, n_batch=n_batch_v, n_ubatch=n_ubatch_v),
                max_upload_mb=max_upload_mb, progress=lambda f, t: progress(f, desc=t))
            return (r.status, r.table, r.notes, img(r.ranking_png), img(r.roofline_png),
                    r.memory, r.decisions, None, None)

        go.click(submit, [model, model_file, batch, input_size, seq_len, input_len, output_len,
                          mode, precision, devices, device_file, iterations, region, objective,
                          engine, n_batch, n_ubatch],
                 [status, table, notes, ranking, roofline, memory, decisions, model_file,
                  device_file],
                 concurrency_limit=1, api_name="predict")
    demo.queue(default_concurrency_limit=1, max_size=32)
    demo.perfcast_css = _CSS
    return demo


def _theme(gr):
    """The default theme with this machine's fonts (no font fetched from the internet)."""
    sans = ["system-ui", "-apple-system", "Segoe UI", "Roboto", "sans-serif"]
    mono = ["ui-monospace", "SFMono-Regular", "Menlo", "monospace"]
    return gr.themes.Default(font=sans, font_mono=mono)


def serve(*, host: str = "127.0.0.1", port: int = 7860, max_upload_mb: float = MAX_UPLOAD_MB,
          announce=print, block: bool = True):
    """Run the page on ``host:port`` until interrupted (``block=False``: return the running
    Blocks; call ``.close()``). Gradio's upload folder is a fresh temporary directory, removed
    when the server stops."""
    import atexit
    import os

    upload_dir = tempfile.mkdtemp(prefix="perfcast-ui-uploads-")
    old = os.environ.get("GRADIO_TEMP_DIR")
    os.environ["GRADIO_TEMP_DIR"] = upload_dir  # read by gradio at import
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        gr = _import_gradio()
    except PerfcastError:
        shutil.rmtree(upload_dir, ignore_errors=True)
        if old is None:
            os.environ.pop("GRADIO_TEMP_DIR", None)
        else:
            os.environ["GRADIO_TEMP_DIR"] = old
        raise
    atexit.register(shutil.rmtree, upload_dir, ignore_errors=True)
    import gradio.processing_utils as pu

    if hasattr(pu, "DEFAULT_TEMP_DIR"):  # gradio imported earlier in this process
        pu.DEFAULT_TEMP_DIR = upload_dir
    if host not in ("127.0.0.1", "localhost", "::1"):
        announce(f"warning: listening on {host}: anyone who can reach this address can use "
                 f"the page")
    demo = build_app(max_upload_mb)
    demo.launch(server_name=host, server_port=port, max_file_size=int(max_upload_mb * 2**20),
                show_error=False, share=False, ssr_mode=False, quiet=True,
                prevent_thread_lock=True, theme=_theme(gr), css=demo.perfcast_css,
                footer_links=[], enable_monitoring=False, pwa=False, mcp_server=False)
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"
    announce(f"perfcast ui on {url} (uploads up to {max_upload_mb:g} MB, in {upload_dir} until "
             f"it stops; Ctrl-C stops it)")
    if not block:
        return demo
    try:
        demo.block_thread()
    finally:
        demo.close()
        shutil.rmtree(upload_dir, ignore_errors=True)
    return None


__all__ = ["MAX_UPLOAD_MB", "Request", "Result", "UIError", "build_app",
           "decisions_table", "device_from_upload", "memory_table", "model_from_text",
           "model_from_upload", "prediction_table", "ranking_png", "run_request", "serve"]
