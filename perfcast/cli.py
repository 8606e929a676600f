"""The ``perfcast`` command line.

Exit codes: 0 success · 1 internal error · 2 bad input (model, file, device, option) ·
3 the model could not be traced · 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from perfcast.errors import PerfcastError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Forecast DL model latency, step time, memory and energy before running.")
out = Console()
err = Console(stderr=True)


def _fmt_num(x: float) -> str:
    for unit, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3f} {unit}"
    return f"{x:g}"


def _fmt_bytes(x: float) -> str:
    return f"{x / 2**20:,.1f} MiB"


@app.command()
def inspect(
    model: str = typer.Argument(..., help="timm name, timm:<name>, torchvision:<name>, hf:<id|config.json>, "
                                          "path/to/model.onnx or module.path:callable"),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", "-b",
                                             help="Batch size in samples (default 1; ONNX: the file's own)."),
    input_size: Optional[str] = typer.Option(None, "--input-size", help="Per-sample input C,H,W (vision)."),
    seq_len: Optional[int] = typer.Option(None, "--seq-len", help="Sequence length in tokens (hf:)."),
    mode: str = typer.Option("infer", "--mode", help="infer or train."),
    precision: str = typer.Option("fp32", "--precision", help="fp32, amp, fp16 or bf16."),
    optimizer: str = typer.Option("sgd-momentum", "--optimizer",
                                  help="Train mode: sgd, sgd-momentum, adam or adamw."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Rebuild the graph, ignore the cache."),
    save: Optional[str] = typer.Option(None, "--save", help="Also write the graph to this .npz file."),
):
    """Build the model's computation graph and print its size, MACs, FLOPs and operators."""
    from perfcast.cache import get_graph
    from perfcast.frontends import GraphRequest, parse_input_size

    req = GraphRequest(spec=model, batch_size=batch_size, input_size=parse_input_size(input_size),
                       seq_len=seq_len, mode=mode, precision=precision, optimizer=optimizer)
    graph = get_graph(req, use_cache=not no_cache)
    if save:
        graph.save(save)
    s = graph.summary()
    if as_json:
        out.print_json(json.dumps(s))
        return
    t = Table(title=f"{s['model']}  ({s['mode']}, {s['precision']}, batch {s['batch_size']})",
              show_header=False)
    t.add_row("input shapes", ", ".join("×".join(map(str, x)) for x in s["input_shapes"]))
    t.add_row("nodes / edges", f"{s['nodes']:,} / {s['edges']:,}")
    t.add_row("parameters", f"{s['params']:,} ({_fmt_bytes(s['param_bytes'])})")
    t.add_row("MACs (per batch)", _fmt_num(s["macs"]))
    t.add_row("FLOPs (per batch)", _fmt_num(s["flops"]))
    t.add_row("activation bytes", _fmt_bytes(s["activation_bytes"]))
    if s["mode"] == "train":
        t.add_row("phases", ", ".join(f"{k} {v}" for k, v in s["phase_counts"].items()))
    top = sorted(s["op_counts"].items(), key=lambda kv: -kv[1])
    t.add_row("operators", ", ".join(f"{k} {v}" for k, v in top[:12])
              + (f", … ({len(top)} kinds)" if len(top) > 12 else ""))
    t.add_row("unmapped ops", ", ".join(s["unmapped_ops"]) or "none")
    out.print(t)


@app.command()
def devices(as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
    """List the hardware perfcast knows (peak TFLOPS, memory GB, bandwidth GB/s, MIG)."""
    from perfcast.devices import list_devices

    rows = list_devices()
    if as_json:
        out.print_json(json.dumps([d.to_dict() for d in rows]))
        return
    t = Table(title="devices")
    for col in ("key", "name", "FP32 TFLOPS", "FP16 TFLOPS", "memory GB", "GB/s", "MIG"):
        t.add_column(col)
    for d in rows:
        t.add_row(d.key, d.name, f"{d.peak_fp32_tflops:g}" if d.peak_fp32_tflops else "-",
                  f"{d.peak_fp16_tflops:g}" if d.peak_fp16_tflops else "-",
                  f"{d.memory_gb:g}" if d.memory_gb else "-",
                  f"{d.bandwidth_gbs:g}" if d.bandwidth_gbs else "-",
                  str(len(d.mig_profiles)) if d.mig_profiles else "-")
    out.print(t)


@app.command()
def version():
    """Print perfcast's version."""
    from perfcast._version import __version__

    out.print(__version__)


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one-line errors, documented exit codes."""
    try:
        app(args=argv, standalone_mode=False)
        return 0
    except PerfcastError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False, markup=True, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("interrupted", highlight=False)
        return 130
    except SystemExit as exc:
        return int(exc.code or 0)
    except Exception as exc:  # click usage errors and anything unexpected
        import click

        if isinstance(exc, click.exceptions.Abort):
            err.print("interrupted", highlight=False)
            return 130
        if isinstance(exc, click.ClickException):
            err.print(f"error: {exc.format_message()}", highlight=False, markup=False, soft_wrap=True)
            return 2
        if os.environ.get("PERFCAST_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        err.print(f"internal error: {type(exc).__name__}: {first[:300]} "
                  "(set PERFCAST_DEBUG=1 for the traceback)", highlight=False, markup=False,
                  soft_wrap=True)
        return 1


def _entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    _entry()
