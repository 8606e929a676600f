"""``perfcast power-limit`` (Predict & decide): the GPU power limit minimising Zeus's cost
``η·energy + (1 − η)·max power·time`` (:mod:`perfcast.decisions.power_limit`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.table import Table

from perfcast.cli._common import (
    PANEL_PREDICT,
    BatchSize,
    Device,
    GraphMode,
    GraphPrecision,
    InputSize,
    Json,
    Model,
    Optimizer,
    Predictor,
    SeqLen,
    check_choice,
    examples,
    out,
    print_json,
    print_notes,
)
from perfcast.paths import check_output_file
from perfcast.workload import DEFAULT_OPTIMIZER, GRAPH_MODES

app = typer.Typer()


@app.command("power-limit", rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast power-limit timm:resnet50 --device v100-32gb --mode train --batch-size 64",
    "perfcast power-limit timm:resnet50 --device a40 --eta 0.8 --png power-limit.png --json"))
def power_limit(
    model: Model,
    device: Device,
    eta: Annotated[float, typer.Option(
        "--eta", help="Weight of energy in the cost (0: time only, 1: energy only).")] = 0.5,
    batch_size: BatchSize = None,
    mode: GraphMode = "train",
    precision: GraphPrecision = None,
    input_size: InputSize = None,
    seq_len: SeqLen = None,
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
    predictor: Predictor = None,
    png: Annotated[str | None, typer.Option(
        "--png", help="Also write the plot (time, energy and cost against the limit) here.")
    ] = None,
    as_json: Json = False,
):
    """Choose the GPU power limit that trades energy against time.

    The limit minimising Zeus's cost η·energy + (1−η)·max power·time for MODEL on a GPU, with
    the table of (limit, power, time, energy, cost) it chose from."""
    from perfcast.decisions.power_limit import choose_power_limit

    check_choice("--mode", mode, GRAPH_MODES, "power-limit")
    if png:  # before any prediction
        png = str(check_output_file(png, suffixes=(".png", ".svg", ".pdf"), option="--png"))
    c = choose_power_limit(model, device=device, eta=eta, batch_size=batch_size, mode=mode,
                           precision=precision, input_size=input_size, seq_len=seq_len,
                           optimizer=optimizer, predictor=predictor, overlap_simulation=True)
    if png:
        c.plot(png)
    if as_json:
        print_json({**c.to_dict(), **({"png": png} if png else {})})
        return
    t = Table(title=f"{c.model} on {c.device} — {c.mode}, {c.precision}, batch {c.batch_size}: "
                    f"cost = {c.eta:g}·E + {1 - c.eta:g}·{c.max_power_w:,.0f} W·T per batch",
              box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("limit W", "power W", "ms/batch", "J/batch", "cost J", ""):
        t.add_column(col, justify="right" if col else "left")
    for r in c.table:
        mark = "[bold green]← chosen[/]" if r["limit_w"] == c.limit_w else ""
        if r["limit_w"] == c.default["limit_w"]:
            mark += (" " if mark else "") + "(default)"
        t.add_row(f"{r['limit_w']:,.0f}", f"{r['power_w']:,.0f}", f"{r['time_ms']:,.2f}",
                  f"{r['energy_j']:,.3g}", f"{r['cost']:,.4g}", mark)
    out.print(t)
    out.print(f"power limit: [bold]{c.limit_w:,.0f} W[/bold] — energy {-c.energy_saving:+.1%}, "
              f"time {c.time_increase:+.1%} vs the default {c.default['limit_w']:,.0f} W "
              f"(nvidia-smi -pl {c.limit_w:,.0f})", highlight=False)
    if png:
        out.print(f"plot: {png}")
    print_notes(c.notes)
