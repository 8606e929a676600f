"""The page as a ``gradio.Blocks`` (:func:`build_app`) and the server (:func:`serve`). Every
input is built from its schema field (:func:`component`: a number box for a number, a text box,
radio buttons or a drop-down of :meth:`~perfcast.request.fields.Field.allowed` for a choice;
label, help and starting value from the field), laid out by :data:`LAYOUT`."""

from __future__ import annotations

import inspect
import io
import shutil
import tempfile

from perfcast.errors import PerfcastError
from perfcast.request.fields import BY_NAME, Field
from perfcast.faces.ui.form import (
    INPUTS,
    MAX_DEVICES,
    MAX_UPLOAD_MB,
    Request,
    choices,
    elem_id,
    info,
    label,
    start_value,
)
from perfcast.faces.ui.handler import run_request

#: The form's inputs by column and row (every name of :data:`~perfcast.faces.ui.form.INPUTS` once).
LAYOUT = ((("model", "model_file"), ("mode", "precision"),
           ("batch_size", "input_size", "seq_len"), ("finetune", "lora_rank", "lora_targets"),
           ("input_len", "output_len"),
           ("engine", "kv_cache_dtype", "n_batch", "n_ubatch")),
          (("devices", "device_file"), ("iterations", "region", "objective")))
#: The uploads' labels.
UPLOAD_LABELS = {"model_file": "…or upload a model (.onnx or config.json)",
                 "device_file": "…and/or upload a device spec (.json)"}
#: Radio buttons up to this many choices, a drop-down beyond.
RADIO_MAX = 3

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


def component(gr, f: Field, device_keys: list[str]):
    """The input of schema field ``f``: its label (name, unit), help, ``elem_id``
    (``pc-<name>``), choices and starting value (:mod:`perfcast.faces.ui.form`)."""
    kw = {"label": label(f), "info": info(f), "elem_id": elem_id(f.name)}
    if f.kind == "list":  # the devices: several registry keys
        start = [k for k in start_value(f) if k in device_keys] or device_keys[:1]
        return gr.Dropdown(device_keys, value=start, multiselect=True,
                           max_choices=MAX_DEVICES, **kw)
    options = choices(f)
    if options:
        make = gr.Radio if len(options) <= RADIO_MAX else gr.Dropdown
        return make(options, value=start_value(f), **kw)
    if f.kind in ("int", "float"):
        return gr.Number(value=start_value(f), precision=0 if f.kind == "int" else None, **kw)
    return gr.Textbox(value=start_value(f) or "", **kw)


def build_app(max_upload_mb: float = MAX_UPLOAD_MB):
    """The page as a ``gradio.Blocks`` (queue set: one request runs at a time, others wait).
    ``demo.perfcast_inputs``: the inputs by name."""
    gr = _import_gradio()
    from PIL import Image

    from perfcast.devices.registry import device_keys

    keys = device_keys()
    inputs = {}

    def make(name: str):
        if name in UPLOAD_LABELS:
            suffixes = [".onnx", ".json"] if name == "model_file" else [".json"]
            inputs[name] = gr.File(label=UPLOAD_LABELS[name], file_types=suffixes,
                                   elem_id=elem_id(name))
        else:
            inputs[name] = component(gr, BY_NAME[name], keys)

    # delete_cache: every 5 minutes the files older than 10 (charts sent to the page), and all
    # of them when the server stops
    with gr.Blocks(title="perfcast", analytics_enabled=False, delete_cache=(300, 600)) as demo:
        gr.Markdown("# perfcast — forecast a model's time, memory, energy and cost on "
                    "hardware\nPredictions are estimates; each value says which model or "
                    f"simulation gave it. Uploads: .onnx or .json up to {max_upload_mb:g} MB, "
                    "deleted after use. An empty box (or 0) is the command's default.")
        with gr.Row():
            for column in LAYOUT:
                with gr.Column():
                    for row in column:
                        with gr.Row():
                            for name in row:
                                make(name)
                    if column is LAYOUT[-1]:
                        go = gr.Button("Predict", variant="primary", elem_id="pc-go")
        status = gr.HTML(elem_id="pc-status")
        table = gr.HTML(elem_id="pc-table-box")
        notes = gr.HTML(elem_id="pc-notes-box")
        # (columns with a minimum width: on a phone they stack instead of squeezing)
        with gr.Row():
            with gr.Column(min_width=340):
                ranking = gr.Image(label="devices ranked (perfcast rank)", type="pil",
                                   elem_id="pc-ranking", interactive=False)
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

        def submit(*args):
            values = dict(zip(INPUTS, args))
            progress = args[len(INPUTS)] if len(args) > len(INPUTS) else None
            r = run_request(Request(**values), max_upload_mb=max_upload_mb,
                            progress=(lambda f, t: progress(f, desc=t)) if progress else None)
            return (r.status, r.table, r.notes, img(r.ranking_png), img(r.roofline_png),
                    r.memory, r.decisions, None, None)

        # the handler's parameters are the inputs' names (gradio's API and client use them)
        submit.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in INPUTS]
            + [inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                 default=gr.Progress())])
        go.click(submit, [inputs[n] for n in INPUTS],
                 [status, table, notes, ranking, roofline, memory, decisions,
                  inputs["model_file"], inputs["device_file"]],
                 concurrency_limit=1, api_name="predict")
    demo.queue(default_concurrency_limit=1, max_size=32)
    demo.perfcast_css = _CSS
    demo.perfcast_inputs = inputs
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


__all__ = ["LAYOUT", "build_app", "component", "serve"]
