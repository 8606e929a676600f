"""``perfcast ui``: a web page for people who would rather look than type (thesis §6.6.4).

A thin Gradio layer (optional extra: ``pip install 'perfcast[ui]'``) whose form is generated
from the request schema and whose answers are the commands': :mod:`~perfcast.faces.ui.form` (the
inputs — the schema fields the page shows, by their names, choices and modes — and the uploads),
:mod:`~perfcast.faces.ui.handler` (:func:`run_request`: the form → ``answer("predict")`` per device,
``fit`` / ``mig`` / ``cost`` per device and ``rank`` for the ranking chart, in ``perfcast
rank``'s order; testable without Gradio), :mod:`~perfcast.faces.ui.render` (the tables and charts)
and :mod:`~perfcast.faces.ui.app` (:func:`build_app`, :func:`serve`).

In: a model — a timm / torchvision name, ``hf:<id>`` of a shipped config, or an uploaded
``.onnx`` or ``config.json`` — the workload's fields (mode, precision, batch size, input size
or sequence length; ``--finetune`` / ``--lora-rank`` / ``--lora-targets`` for a training step
of an ``hf:`` LLM; input / output length, engine and llama.cpp's batches for ``generate``),
one or several registry devices and/or an uploaded device spec (JSON), and the job (length,
grid region, ranking objective). Out: the prediction per device with its sources and
intervals (every key of ``perfcast predict --json``), the memory breakdown (a fine-tuning
step: the answer's own per GPU, with its total and whether it fits), the largest batch
that fits, the MIG profile, cost and CO2e of the job, the devices ranked and the roofline chart
of the first device.

Safety (the page may be opened by anyone who can reach the port):

* it listens on 127.0.0.1 unless ``--host`` says otherwise;
* uploads are limited to ``max_upload_mb`` (MB of 2**20 bytes; default 20, ``perfcast ui
  --max-upload-mb``; refused by the server before they are stored, and checked again here),
  only ``.onnx`` and ``.json`` are taken, an ``.onnx`` must parse as an ONNX model without
  external data; each upload is moved into a private temporary directory for the request and
  deleted with it (Gradio's own upload folder is a temporary directory of the server, deleted
  when it stops), and an uploaded model's graph is not cached;
* the model box takes names only: ``module:callable`` specs, other frameworks' prefixes, file
  paths and anything that names an existing file are refused (upload the file instead);
  devices are registry keys or an uploaded spec, never a path;
* an error is a one-line message in the page (``#pc-status``), never a traceback; requests
  are queued (one runs at a time) and the long ones show their progress.
"""

from perfcast.faces.ui.app import LAYOUT, build_app, component, serve
from perfcast.faces.ui.form import (
    ADAPTER_FIELDS,
    AUTO,
    INPUTS,
    MAX_DEVICES,
    MAX_UPLOAD_MB,
    SHOWN,
    UPLOADS,
    Request,
    UIError,
    device_from_upload,
    elem_id,
    form_values,
    model_from_text,
    model_from_upload,
)
from perfcast.faces.ui.handler import Result, run_request
from perfcast.faces.ui.render import (
    decisions_table,
    memory_table,
    notes_box,
    prediction_table,
    ranking_png,
)

__all__ = ["ADAPTER_FIELDS", "AUTO", "INPUTS", "LAYOUT", "MAX_DEVICES", "MAX_UPLOAD_MB",
           "SHOWN", "UPLOADS", "Request", "Result", "UIError", "build_app", "component",
           "decisions_table", "device_from_upload", "elem_id", "form_values", "memory_table",
           "model_from_text", "model_from_upload", "notes_box", "prediction_table",
           "ranking_png", "run_request", "serve"]
