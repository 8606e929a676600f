"""``perfcast mig``: the smallest MIG slice that holds the model (options from the request
schema, answer from :func:`perfcast.decisions.answer.answer`)."""

from __future__ import annotations

import typer
from rich.table import Table

from perfcast.faces.cli._common import (PANEL_PREDICT, examples, out, print_json, print_notes,
                                  val)
from perfcast.faces.cli.options import JSON, command

app = typer.Typer()


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast mig timm:resnet50 --device a100-40gb --batch-size 64",
    "perfcast mig timm:vit_base_patch16_224 --device h100-sxm --batch-size 32 "
    "--latency-slo-ms 50 --all-profiles",
    "perfcast mig --memory-mb 12000 --device a100-80gb"))
@command("mig", own=[JSON])
def mig(values: dict, *, as_json: bool = False):
    """Recommend the smallest MIG slice that holds the model.

    The smallest MIG profile whose usable memory holds the predicted peak × (1 + margin)
    (DIPPM's rule), optionally meeting a latency SLO on the slice."""
    from perfcast.decisions.answer import answer

    a = answer("mig", values)
    if as_json:
        print_json(a.to_dict())
        return
    t = Table(title=f"{a.model} on {a.device} — {a.mode}, {a.precision}, batch {a.batch_size}: "
                    f"memory {val(a.memory_mb, '{:,.0f}')} MiB (+{a.margin:.0%} → "
                    f"{val(a.required_mb, '{:,.0f}')} MiB)")
    for col in ("profile", "usable MiB", "headroom MiB", "time/batch on slice", "verdict"):
        t.add_column(col, justify="left" if col in ("profile", "verdict") else "right")
    rows = ([{"profile": a.profile, "usable_mb": a.usable_mb, "headroom_mb": a.headroom_mb,
              "slice_time_ms": a.slice_time_ms, "verdict": "[bold green]recommended[/]"}]
            if a.profile else [])
    rows += [{**r, "verdict": "fits"} for r in a.alternatives]
    rows += [{**r, "verdict": f"[red]{r['reason']}[/]"} for r in a.rejected]
    order = {r["profile"]: i for i, r in enumerate(a.alternatives + a.rejected)}
    for r in sorted(rows, key=lambda r: (r["verdict"] != "[bold green]recommended[/]",
                                         order.get(r["profile"], -1))):
        t.add_row(r["profile"], val(r["usable_mb"], "{:,.0f}"), val(r["headroom_mb"], "{:,.0f}"),
                  val(r["slice_time_ms"], "{:,.2f} ms"), r["verdict"])
    out.print(t)
    out.print(f"profile: [bold]{a.profile or 'none'}[/bold]", highlight=False)
    print_notes(a.notes)


__all__ = ["app", "mig"]
