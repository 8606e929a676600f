"""``perfcast rank``: devices ranked by time, cost or energy for a request of any mode
(options from the request schema, answer from :func:`perfcast.decisions.answer.answer`)."""

from __future__ import annotations

import typer
from rich import box
from rich.table import Table

from perfcast.faces.cli._common import (PANEL_PREDICT, examples, out, print_json, print_notes,
                                  val)
from perfcast.faces.cli.options import JSON, command, own_option

app = typer.Typer()

PLOT = own_option("plot", str | None, None, "--plot", help="Also write a PNG bar chart here.")


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast rank timm:resnet50 --devices all --objective time --batch-size 64",
    "perfcast rank timm:resnet50 --devices rtx4090,a100-40gb,l4 --objective cost --mode train "
    "--iterations 100000 --plot rank.png",
    "perfcast rank hf:meta-llama/Llama-2-7b-hf --mode generate --devices a100-80gb,h100-sxm,l4 "
    "--input-len 512 --output-len 128 --batch-size 8"))
@command("rank", own=[PLOT, JSON])
def rank(values: dict, *, plot: str | None = None, as_json: bool = False):
    """Rank devices for MODEL by time, cost or energy.

    One row per device: time per batch with its interval and source, memory and whether it
    fits, USD and kWh of --iterations batches."""
    from perfcast.decisions.answer import answer, request
    from perfcast.paths import check_output_file

    if plot:  # before any prediction
        request("rank", values)
        plot = str(check_output_file(plot, suffixes=(".png", ".svg", ".pdf"), option="--plot"))
    r = answer("rank", values)
    if plot:
        r.plot(plot)
    if as_json:
        print_json({**r.to_dict(), **({"plot": plot} if plot else {})})
        return
    t = Table(title=f"{r.model} — {r.mode}, batch {r.batch_size}, by {r.objective} "
                    f"(USD, kWh for {r.iterations:,} batches; time from: learned·records "
                    f"trained on, or roofline)", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("#", "device", "ms/batch", "90 % interval", "time from", "MiB", "fits", "USD",
                "kWh"):
        t.add_column(col, justify="left" if col in ("device", "time from", "fits") else "right",
                     no_wrap=True)
    for d in r.devices:
        src = d.time_source + (f"·{d.trained_records:,}" if d.trained_records else "")
        t.add_row(str(d.rank), f"{d.device} {d.precision}", val(d.time_ms, "{:,.1f}"),
                  _interval(d, "time_ms", "{:,.1f}"), src,
                  val(d.memory_mb, "{:,.0f}"),
                  {True: "yes", False: "[red]no[/red]", None: "—"}[d.fits],
                  val(d.usd, "{:,.2f}"), val(d.energy_kwh, "{:.3g}"))
    out.print(t)
    if plot:
        out.print(f"chart: {plot}")
    print_notes(r.notes)


def _interval(p, key: str, fmt: str) -> str:
    """``low–high`` of a calibrated interval, or ``—``."""
    lo, hi = getattr(p, f"{key}_low", None), getattr(p, f"{key}_high", None)
    if lo is None or hi is None:
        return "—"
    return f"{fmt.format(lo)} – {fmt.format(hi)}"


__all__ = ["app", "rank"]
