"""``perfcast cost``: hours, USD, kWh and kg CO2e of a job in any mode and layout (options
from the request schema, answer from :func:`perfcast.decisions.answer.answer`)."""

from __future__ import annotations

import typer
from rich.table import Table

from perfcast.faces.cli._common import (PANEL_PREDICT, examples, out, print_json, print_notes,
                                  val)
from perfcast.faces.cli.options import JSON, command

app = typer.Typer()


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast cost timm:resnet50 --device a100-40gb --mode train --batch-size 256 --epochs 90 "
    "--dataset-size 1281167 --region FRA",
    "perfcast cost timm:resnet50 --device a100-80gb --mode train --data-parallel 8 "
    "--batch-size 2048 --iterations 100000",
    "perfcast cost --device a100-40gb --time-ms 350 --iterations 200000 --price-per-hour 2.934",
    "perfcast cost hf:meta-llama/Llama-2-7b-hf --mode generate --device h100-sxm "
    "--requests 100000 --input-len 512 --output-len 256 --batch-size 32"))
@command("cost", own=[JSON])
def cost(values: dict, *, as_json: bool = False):
    """Price a job: hours, USD, kWh and kg CO2e.

    Predicted (or given) time per batch × iterations, priced per GPU-hour × GPUs; energy from
    the predicted energy, or time × power (an estimate, said so).

    `--mode generate --requests N` (hf: LLMs): N requests of --input-len → --output-len tokens
    served in batches of --batch-size."""
    from perfcast.decisions.answer import answer

    c = answer("cost", values)
    if as_json:
        print_json(c.to_dict())
        return
    t = Table(title=f"{c.model or 'job'} on {c.device} — {c.iterations:,} × batch {c.batch_size}",
              show_header=False)
    t.add_row("time per batch", f"{c.time_ms_per_iteration:,.2f} ms")
    t.add_row("duration", f"[bold]{c.hours:,.2f} h[/bold]"
              + (f"  ({c.coverage:.0%}: {c.hours_low:,.2f} – {c.hours_high:,.2f} h)"
                 if c.hours_high is not None else ""))
    t.add_row("price", val(c.usd_per_gpu_hour, "{:,.3f} USD/GPU-h")
              + (f" ({c.provider}, {c.price_as_of})" if c.price_as_of else ""))
    t.add_row("cost", f"[bold]{val(c.usd, '{:,.2f} USD')}[/bold]"
              + (f"  ({c.coverage:.0%}: {c.usd_low:,.2f} – {c.usd_high:,.2f} USD)"
                 if c.usd_high is not None else ""))
    t.add_row("power", val(c.power_w, "{:,.0f} W"))
    t.add_row("energy", val(c.energy_kwh, "{:,.2f} kWh"))
    t.add_row("carbon intensity", val(c.carbon_g_per_kwh, "{:,.0f} g CO2e/kWh"))
    t.add_row("emissions", f"[bold]{val(c.kg_co2e, '{:,.2f} kg CO2e')}[/bold]")
    out.print(t)
    for k, v in c.sources.items():
        out.print(f"[dim]{k}: {v}[/dim]", highlight=False)
    print_notes(c.notes)


__all__ = ["app", "cost"]
