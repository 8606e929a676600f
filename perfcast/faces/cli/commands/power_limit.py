"""``perfcast power-limit``: the GPU power limit minimising Zeus's cost ``η·energy + (1 −
η)·max power·time`` (options from the request schema, answer from
:func:`perfcast.decisions.answer.answer`)."""

from __future__ import annotations

import typer
from rich import box
from rich.table import Table

from perfcast.faces.cli._common import PANEL_PREDICT, examples, out, print_json, print_notes
from perfcast.faces.cli.options import JSON, command, own_option

app = typer.Typer()
PNG = own_option("png", str | None, None, "--png",
                 help="Also write the plot (time, energy and cost against the limit) here.")


@app.command("power-limit", rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast power-limit timm:resnet50 --device v100-32gb --mode train --batch-size 64",
    "perfcast power-limit timm:resnet50 --device a40 --eta 0.8 --png power-limit.png --json"))
@command("power-limit", own=[PNG, JSON])
def power_limit(values: dict, *, png: str | None = None, as_json: bool = False):
    """Choose the GPU power limit that trades energy against time.

    The limit minimising Zeus's cost η·energy + (1−η)·max power·time for MODEL on a GPU, with
    the table of (limit, power, time, energy, cost) it chose from."""
    from perfcast.decisions.answer import answer, request
    from perfcast.paths import check_output_file

    if png:  # before any prediction
        request("power-limit", values)
        png = str(check_output_file(png, suffixes=(".png", ".svg", ".pdf"), option="--png"))
    c = answer("power-limit", values)
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


__all__ = ["app", "power_limit"]
