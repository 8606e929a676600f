"""Commands that show a forecast to people ("Predict & decide" in ``perfcast --help``):
``report`` (one self-contained HTML page: roofline, top operators, phases, memory timeline,
decisions; its options generated from the request schema like the other commands'), ``ui``
(the Gradio web page; optional extra ``perfcast[ui]``) — and ``serve`` (the same answers as an
HTTP JSON API for programs; optional extra ``perfcast[serve]``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast.faces.cli._common import (
    PANEL_PREDICT,
    Json,
    StageProgress,
    examples,
    err,
    out,
    print_json,
)
from perfcast.faces.cli.options import JSON, command, own_option
from perfcast.errors import PerfcastError
from perfcast.paths import check_output_file

app = typer.Typer()


OUT = own_option("out_path", str, "report.html", "--out", "-o",
                 help="The HTML page to write (one file; charts embedded).")
PNG = own_option("png", bool, False, "--png",
                 help="Also write each chart as <out stem>-<chart>.png beside the page.")


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast report timm:resnet50 --device a100-40gb --batch-size 64 --out report.html --png",
    "perfcast report hf:bert-base-uncased --device rtx4090 --seq-len 128 --precision amp "
    "--region FRA"))
@command("report", own=[OUT, PNG, JSON])
def report(values: dict, *, out_path: str = "report.html", png: bool = False,
           as_json: bool = False):
    """Write one HTML page about MODEL on a device: roofline, operators, memory, decisions.

    A self-contained page (it opens offline: charts embedded as PNG) with the prediction, the
    device's roofline for the precision with the model's operator classes placed by arithmetic
    intensity and predicted attainable FLOP/s, the top operators by predicted time and their
    bound, time per phase, the memory timeline of the tensor simulation and the decisions
    (largest batch, MIG profile, cost and CO2e of --iterations batches). --mode infer or
    train."""
    from perfcast.api import request_of
    from perfcast.faces.report import check_mode, report_request, write_report

    check_mode(values.get("mode"))
    values = dict(values)
    req = request_of("report", values.pop("model"), **values)
    path = check_output_file(out_path, suffixes=(".html", ".htm"), option="--out")
    with StageProgress(hidden=as_json) as prog:
        r = report_request(req, progress=prog.stages)
        written = write_report(r, path, png=png)
    if as_json:
        d = r.to_dict()
        if d.get("memory"):
            d["memory"].pop("timeline", None)
        print_json({"written": written, "report": d})
        return
    out.print(f"wrote {written['html']} ({r.model} on {r.device}, {r.mode}, {r.precision}, "
              f"batch {r.batch_size:,}; built in {r.seconds:.1f} s)", highlight=False)
    for name, p in written.items():
        if name != "html":
            out.print(f"chart: {p}", highlight=False)


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast ui", "perfcast ui --port 8080 --max-upload-mb 50"))
def ui(
    host: Annotated[str, typer.Option(
        "--host", help="Address to listen on (default: this machine only; anything else makes "
                       "the page reachable from the network).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 7860,
    max_upload_mb: Annotated[float, typer.Option(
        "--max-upload-mb", help="Largest file a user may upload (MB).")] = 20.0,
):
    """Serve the perfcast web page (pip install 'perfcast\\[ui]').

    A Gradio page: model, batch, input size or sequence length, mode, precision and devices
    in; predictions with intervals and sources, memory breakdown, MIG profile, largest batch,
    cost and CO2e, a device ranking and the roofline chart out. Ctrl-C stops it."""
    from perfcast.faces.ui import serve

    if not 0 < port < 65536:
        raise PerfcastError(f"--port must be in 1..65535, got {port}")
    if not max_upload_mb > 0:
        raise PerfcastError(f"--max-upload-mb must be > 0, got {max_upload_mb}")
    serve(host=host, port=port, max_upload_mb=max_upload_mb,
          announce=lambda text: err.print(text, highlight=False, markup=False,
                                            soft_wrap=True))


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast serve", "perfcast serve --port 9000 --max-concurrency 2 --access-log"))
def serve(
    host: Annotated[str, typer.Option(
        "--host", help="Address to listen on (default: this machine only; there is no "
                       "authentication — anything else exposes the API to the network).")]
        = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0: any free one).")]
        = 8765,
    max_concurrency: Annotated[int, typer.Option(
        "--max-concurrency", help="Requests computed at once (threads).")] = 4,
    max_queue: Annotated[int, typer.Option(
        "--max-queue", help="Requests waiting beyond those; more are refused (503).")] = 64,
    max_body: Annotated[int, typer.Option(
        "--max-body", help="Largest request body (bytes); larger ones are refused (413).")]
        = 65536,
    graceful: Annotated[float, typer.Option(
        "--graceful", help="Seconds the requests in flight get to finish after SIGTERM.")]
        = 30.0,
    access_log: Annotated[bool, typer.Option(
        "--access-log", help="Log every request on stderr.")] = False,
    as_json: Json = False,
):
    """Serve perfcast as an HTTP JSON API for programs (pip install 'perfcast\\[serve]').

    FastAPI + uvicorn: POST /predict, /fit, /rank, /cost and /plan with the command's options as
    JSON (the JSON of --json back; bad input is HTTP 422 with the command's message), GET
    /devices, /healthz and the OpenAPI page /docs. Predictors and graphs stay warm between
    requests. SIGTERM or Ctrl-C: finish the requests in flight, then exit 0."""
    from perfcast.faces.serve import serve as run_server

    if not 0 <= port < 65536:
        raise PerfcastError(f"--port must be in 0..65535, got {port}")
    if not graceful >= 0:
        raise PerfcastError(f"--graceful must be ≥ 0 s, got {graceful}")
    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print(f"warning: listening on {host}: anyone who reaches this address can use the "
                  f"API (no authentication)", highlight=False, markup=False, soft_wrap=True)
    summary = run_server(
        host, port, max_concurrency=max_concurrency, max_queue=max_queue, max_body=max_body,
        graceful_s=graceful, access_log=access_log,
        on_ready=lambda url: err.print(f"perfcast serve: listening on {url} (docs: {url}/docs; "
                                       f"SIGTERM or Ctrl-C stops it)", highlight=False,
                                       markup=False, soft_wrap=True))
    if as_json:
        print_json(summary)
    else:
        err.print(f"stopped{' (' + summary['signal'] + ')' if summary.get('signal') else ''}: "
                  f"{summary['served']:,} requests served, {summary['errors']:,} errors",
                  highlight=False, markup=False)
