"""The page's handler without Gradio: :func:`run_request` turns a submitted form into the
request's values by field name (:func:`perfcast.faces.ui.form.form_values`) and asks the commands —
:func:`perfcast.decisions.answer.answer` ``"predict"`` per device, ``"fit"`` / ``"mig"`` (GPUs
with MIG profiles) / ``"cost"`` for the decisions and ``"rank"`` for the ranking chart — so the
page's numbers and order are those of ``perfcast predict`` / ``fit`` / ``mig`` / ``cost`` /
``rank``. Errors become the status line's one-line message.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.request.fields import BY_NAME
from perfcast.faces.ui.form import (
    MAX_DEVICES,
    MAX_UPLOAD_MB,
    UIError,
    device_from_upload,
    form_values,
    model_from_text,
    model_from_upload,
    start_value,
)
from perfcast.faces.ui.render import (
    decisions_table,
    memory_table,
    message,
    notes_box,
    prediction_table,
    ranking_png,
)

log = logging.getLogger("perfcast")
#: The form's fields that describe the job (the decisions and the ranking), not the workload.
JOB = ("iterations", "region", "objective")


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


def run_request(form, *, max_upload_mb: float = MAX_UPLOAD_MB, progress=None) -> Result:
    """Answer one form submission (:class:`perfcast.faces.ui.form.Request`; module docstring).
    Errors become a message in ``Result.status``; ``progress(fraction, text)`` is called as
    the work goes."""
    try:
        with tempfile.TemporaryDirectory(prefix="perfcast-ui-") as tmp:
            return _run(form, Path(tmp), max_upload_mb, progress or (lambda f, t: None))
    except PerfcastError as exc:
        return Result(status=message(str(exc), error=True))
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 — a message in the page, the traceback in the log
        log.warning("perfcast ui: %s: %s", type(exc).__name__, exc, exc_info=True)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return Result(status=message(f"internal error: {type(exc).__name__}: {first}",
                                     error=True))
    finally:
        for f in (form.model_file, form.device_file):  # never kept, even when not used
            if f:
                Path(str(f)).unlink(missing_ok=True)


def _devices(keys: list[str] | None, upload: Any, tmp: Path, limit_mb: float,
             notes: list) -> list:
    """The devices of the form: registry keys (never a path) and the uploaded spec."""
    from perfcast.devices import get_device
    from perfcast.devices.registry import device_keys

    known = device_keys()
    devices = []
    for k in keys or []:
        if k not in known:
            raise UIError(f"unknown device {k!r} (choose from the list)")
        devices.append(get_device(k))
    if upload:
        dev, note = device_from_upload(upload, tmp, limit_mb)
        devices.append(dev)
        if note:
            notes.append((None, note))
    if not devices:
        raise UIError("choose at least one device (or upload a device spec)")
    if len(devices) > MAX_DEVICES:
        raise UIError(f"at most {MAX_DEVICES} devices per request")
    return list({d.key: d for d in devices}.values())


def _run(form, tmp: Path, limit_mb: float, progress) -> Result:
    from perfcast.decisions.answer import request
    from perfcast.faces.report import values_for

    notes: list = []
    values = form_values(form)
    # uploads first: they are deleted whatever happens next
    if form.model_file:
        spec, label = model_from_upload(form.model_file, tmp, limit_mb)
        if values.get("model") not in (None, start_value(BY_NAME["model"])):
            notes.append((None, f"the uploaded {label} is used, not the model box"))
    else:
        spec = label = model_from_text(values.get("model"))
    devices = _devices(values.pop("devices", None), form.device_file, tmp, limit_mb, notes)
    job = {k: values.pop(k) for k in JOB if k in values}
    # the mode always said: fit and cost default to train
    base = {**values, "model": spec, "mode": values.get("mode") or BY_NAME["mode"].default}
    if form.model_file:
        base["use_cache"] = False  # an upload leaves nothing behind in the caches
    # every request checked before any work, with the command's own one-line message
    first = request("predict", values_for("predict", {**base, "device": devices[0].key}))
    if first.mode == "generate":
        first.workload.require_lengths()
    keys = ",".join(d.key for d in devices)
    request("rank", values_for("rank", {**base, **job, "devices": keys}))
    cost = {k: v for k, v in job.items() if first.mode != "generate" or k != "iterations"}
    request("cost", values_for("cost", {**base, **cost, "device": devices[0].key}))
    run = (_run_generation if first.mode == "generate" else
           _run_layout if first.workload.distributed else _run_graph)
    r = run(base, job, label, devices, notes, progress)
    r.ranking_png = _ranking(base, job, label, keys, notes)
    r.notes = notes_box(notes, r.predictions)
    return r


def _predict(base: dict[str, Any], dev, i: int, n: int, progress, label: str):
    """``answer("predict", …)`` on one device and its JSON (the model named as shown)."""
    from perfcast.decisions.answer import answer
    from perfcast.faces.report import values_for

    progress(0.05 + 0.35 * i / n, f"predicting on {dev.key} ({i + 1}/{n}; the first request "
                                  f"for a model builds its graph)")
    p = answer("predict", values_for("predict", {**base, "device": dev.key}))
    d = p.to_dict()
    d["model"] = label
    return p, d


def _run_graph(base: dict[str, Any], job: dict[str, Any], label: str, devices: list,
               notes: list, progress) -> Result:
    """infer / train: predictions, the memory simulation, decisions and the roofline chart of
    the first device."""
    from perfcast.decisions.answer import request
    from perfcast.faces.report import (
        Report,
        analyse_operators,
        chosen_workload,
        decide,
        memory_of,
        peaks,
        values_for,
    )
    from perfcast.faces.report.charts import figure_png, roofline_figure

    use_cache = base.get("use_cache", True)
    n = len(devices)
    preds, dicts, works, mems, decs = [], [], [], [], []
    for i, dev in enumerate(devices):
        p, d = _predict(base, dev, i, n, progress, label)
        w = request("predict", values_for("predict", {**base, "device": dev.key})).workload
        preds.append(p)
        dicts.append(d)
        works.append(chosen_workload(w, p))
        notes.extend((dev.key, x) for x in p.notes)
    sims: dict[tuple, Any] = {}
    sim_notes: list[str] = []
    for i, (p, w) in enumerate(zip(preds, works)):
        progress(0.4 + 0.2 * i / n, f"memory simulation ({w.precision})")
        key = (w.precision, w.batch_size)
        if key not in sims:
            sims[key] = memory_of(w, p, use_cache=use_cache, notes=sim_notes)
        m = dict(sims[key]) if sims[key] else None
        if m is not None and p.memory_mb is not None:
            m["predicted_device_mb"] = p.memory_mb
            m["runtime_and_other_mb"] = max(0.0, p.memory_mb - m["tensor_peak_mb"])
        mems.append(m)
    notes.extend((None, x) for x in dict.fromkeys(sim_notes))
    for i, (dev, w) in enumerate(zip(devices, works)):
        progress(0.6 + 0.3 * i / n, f"largest batch, MIG profile and cost on {dev.key}")
        dn: list[str] = []
        decs.append(decide({**base, **job, "mode": w.mode, "precision": w.precision,
                            "batch_size": int(w.batch_size), "device": dev.key}, dev, notes=dn))
        notes.extend((dev.key, x) for x in dn)
    progress(0.92, "charts")
    first = devices[0]
    roofline = None
    try:
        ops_notes: list[str] = []
        ops = analyse_operators(works[0], first, preds[0], use_cache=use_cache, notes=ops_notes)
        r = Report(model=label, device=first.key, device_name=first.name, mode=works[0].mode,
                   precision=works[0].precision, batch_size=int(works[0].batch_size),
                   prediction=dicts[0], **peaks(first, works[0].precision), **ops)
        roofline = figure_png(roofline_figure(r), 110)
        notes.extend((first.key, x) for x in ops_notes)
    except PerfcastError as exc:
        notes.append((None, f"roofline chart: {exc}"))
    status = (f"{label} — {works[0].mode}, batch {works[0].batch_size:,} on "
              f"{', '.join(d.key for d in devices)}")
    return Result(status=message(status), table=prediction_table(dicts),
                  memory=memory_table(devices, mems), decisions=decisions_table(devices, decs),
                  roofline_png=roofline, predictions=dicts)


#: How the memory table names the parts of a LoRA / QLoRA step (the answer's keys otherwise).
ADAPTER_LABELS = {"weights": "weights (the frozen base)", "adapters": "adapters (trained)",
                  "gradients": "gradients (of the adapters)",
                  "optimizer_state": "optimizer state (of the adapters)"}


def _run_layout(base: dict[str, Any], job: dict[str, Any], label: str, devices: list,
                notes: list, progress) -> Result:
    """A training step the per-layer transformer arithmetic answers (``finetune``: full, LoRA
    or QLoRA of an ``hf:`` LLM): predictions per device, the answer's own memory breakdown per
    GPU (weights — the frozen base —, adapters, their gradients and optimizer state,
    activations, logits, runtime …) with its total and whether it fits, the largest batch and
    the cost (``perfcast fit`` / ``cost`` with the same options). No tensor simulation and no
    roofline chart (they cover one device's traced graph), no MIG profile (``perfcast mig``
    takes no ``--finetune``): notes say so."""
    from perfcast.decisions.answer import answer, request
    from perfcast.decisions.mig import mig_devices
    from perfcast.faces.report import fmt, values_for
    from perfcast.workload.finetune import ADAPTER_METHODS

    w = request("predict", values_for("predict", {**base, "device": devices[0].key})).workload
    n = len(devices)
    dicts, mems, decs = [], [], []
    for i, dev in enumerate(devices):
        p, d = _predict(base, dev, i, n, progress, label)
        dicts.append(d)
        notes.extend((dev.key, x) for x in p.notes)
        mems.append({"memory_breakdown_mb": d.get("memory_breakdown_mb"),
                     "predicted_device_mb": d.get("memory_mb"),
                     "capacity_mb": d.get("capacity_mb"), "fits": d.get("fits")})
        progress(0.45 + 0.45 * i / n, f"largest batch and cost on {dev.key}")
        values = {**base, **job, "precision": d.get("precision"),
                  "batch_size": d.get("batch_size"), "device": dev.key}
        dec: dict[str, Any] = {"fit": None, "mig": None, "cost": None}
        for name, what in (("fit", "largest batch"), ("cost", "cost")):
            v = {k: x for k, x in values.items() if name != "fit" or k != "batch_size"}
            try:
                dec[name] = answer(name, values_for(name, v)).to_dict()
            except PerfcastError as exc:
                notes.append((dev.key, f"{what}: {exc}"))
        if dev.key in mig_devices():
            try:  # the command's own refusal, as a note
                request("mig", {k: values[k] for k in ("model", "mode", "device", "finetune")})
            except PerfcastError as exc:
                notes.append((dev.key, f"MIG: {exc}"))
        decs.append(dec)
    notes.append((None, f"--finetune {w.finetune}: the memory is the per-GPU arithmetic of "
                        f"the answer (no tensor simulation) and there is no roofline chart "
                        f"(it covers one device's traced graph)"))
    method = f"{w.finetune} fine-tuning" + (f" (rank {w.lora_rank})"
                                            if w.finetune in ADAPTER_METHODS else "")
    d0 = dicts[0]
    tokens = d0.get("seq_len") or w.seq_len
    status = (f"{label} — train, {method}, {d0.get('precision')}, batch "
              f"{fmt(d0.get('batch_size'))}" + (f" × {fmt(tokens)} tokens" if tokens else "")
              + f" on {', '.join(d.key for d in devices)}")
    labels = ADAPTER_LABELS if w.finetune in ADAPTER_METHODS else None
    return Result(status=message(status), table=prediction_table(dicts),
                  memory=memory_table(devices, mems, labels),
                  decisions=decisions_table(devices, decs), predictions=dicts)


def _run_generation(base: dict[str, Any], job: dict[str, Any], label: str, devices: list,
                    notes: list, progress) -> Result:
    """generate: predictions per device, the largest batch, MIG (MIG GPUs) and the cost of
    serving ``iterations`` batches of requests."""
    from perfcast.faces.report import decide

    n = len(devices)
    dicts, decs = [], []
    iterations = job.get("iterations") or BY_NAME["iterations"].default_for("ui")
    p = None
    for i, dev in enumerate(devices):
        p, d = _predict(base, dev, i, n, progress, label)
        dicts.append(d)
        notes.extend((dev.key, x) for x in p.notes)
        dn: list[str] = []
        decs.append(decide({**base, "precision": p.precision, "batch_size": p.batch_size,
                            "device": dev.key, "requests": iterations * p.batch_size,
                            "region": job.get("region")}, dev, notes=dn))
        notes.extend((dev.key, x) for x in dn)
    notes.append((None, "generate: no roofline chart (it covers infer and train)"))
    mems = [{"memory_breakdown_mb": d.get("memory_breakdown_mb")} for d in dicts]
    knobs = (f" (n_batch {p.n_batch:,}, n_ubatch {p.n_ubatch:,})" if p.engine == "llama.cpp"
             else "")
    status = (f"{label} — generate, {p.engine}, batch {p.batch_size:,}{knobs}, "
              f"{p.input_len:,} → {p.output_len:,} tokens on "
              f"{', '.join(d.key for d in devices)}")
    return Result(status=message(status), table=prediction_table(dicts),
                  memory=memory_table(devices, mems),
                  decisions=decisions_table(devices, decs, "generate"), predictions=dicts)


def _ranking(base: dict[str, Any], job: dict[str, Any], label: str, keys: str,
             notes: list) -> bytes | None:
    """The ranking chart: ``answer("rank", …)`` over the form's devices, in its order."""
    from perfcast.decisions.answer import answer
    from perfcast.faces.report import values_for

    objective = job.get("objective") or BY_NAME["objective"].default
    try:
        r = answer("rank", values_for("rank", {**base, **job, "devices": keys}))
    except PerfcastError as exc:
        notes.append((None, f"ranking: {exc}"))
        return None
    return ranking_png(label, r.to_dict(), objective, job.get("iterations"))


__all__ = ["ADAPTER_LABELS", "JOB", "Result", "run_request"]
