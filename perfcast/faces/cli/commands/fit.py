"""``perfcast fit``: the largest batch (or, for ``--mode generate`` without ``--input-len``,
the longest prompt) that fits (options from the request schema, answer from
:func:`perfcast.decisions.answer.answer`)."""

from __future__ import annotations

import typer
from rich.table import Table

from perfcast.faces.cli._common import (PANEL_PREDICT, examples, out, print_json, print_notes,
                                  val)
from perfcast.faces.cli.options import JSON, command

app = typer.Typer()


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast fit timm:resnet50 --device a100-40gb --mode train --precision amp",
    "perfcast fit timm:resnet50 --device a100-40gb --mode infer --mig-profile 1g.5gb",
    "perfcast fit hf:meta-llama/Llama-2-7b-hf --mode generate --device a100-80gb "
    "--input-len 1024 --output-len 256"))
@command("fit", own=[JSON])
def fit(values: dict, *, as_json: bool = False):
    """Find the largest batch that fits the device or a MIG slice.

    The largest batch whose predicted peak memory (+ margin) fits, with the predicted time and
    throughput at that batch; with a layout over GPUs, the largest global batch.

    `--mode generate` (hf: LLMs): the most concurrent requests of --input-len + --output-len
    tokens whose weights + KV cache fit, or without --input-len the longest prompt
    --batch-size requests can hold."""
    from perfcast.decisions.answer import answer

    r = answer("fit", values)
    if as_json:
        print_json(r.to_dict())
        return
    if r.mode == "generate":
        _print_generation_fit(r)
        return
    where = f"{r.device}{' ' + r.mig_profile if r.mig_profile else ''}"
    t = Table(title=f"{r.model} on {where} — {r.mode}, {r.precision}", show_header=False)
    t.add_row("largest batch that fits", f"[bold]{val(r.max_batch_size, '{:,}')}[/bold]")
    t.add_row("predicted memory at it", f"{val(r.memory_mb, '{:,.0f} MiB')}"
              + (f" ({r.coverage:.0%}: {r.memory_mb_low:,.0f} – {r.memory_mb_high:,.0f})"
                 if r.memory_mb_high is not None else "")
              + f"; planned with ({r.risk}) {val(r.planned_memory_mb, '{:,.0f} MiB')} "
              f"× {1 + r.margin:.2f} ≤ {r.capacity_mb:,.0f} MiB")
    t.add_row("memory at the next batch", val(r.next_memory_mb, "{:,.0f} MiB"))
    t.add_row("time per batch", val(r.time_ms, "{:,.2f} ms") + f"  ({r.predictor.get('time_ms', '—')})")
    t.add_row("throughput", val(r.throughput_samples_per_s, "{:,.1f} samples/s"))
    t.add_row("predictions made", str(r.evaluations))
    out.print(t)
    print_notes(r.notes)


def _print_generation_fit(r) -> None:
    """``fit --mode generate``: the most requests, or the longest prompt, that fit."""
    d = r.to_dict()
    tp = d.get("tensor_parallel") or 1
    if d.get("max_input_len") is not None or d.get("limited_by"):
        out.print(f"longest prompt that fits: [bold]{d.get('max_input_len') or 0:,}[/bold] "
                  f"tokens (+ {d.get('output_len') or 0:,} generated = "
                  f"{d.get('max_context_tokens') or 0:,} context) for "
                  f"{d.get('batch_size') or 1} request(s) on {tp}× {r.device} "
                  f"({d.get('engine')}; limited by {str(d.get('limited_by')).replace('_', ' ')})")
    else:
        out.print(f"largest batch that fits: [bold]{val(r.max_batch_size, '{:,}')}[/bold] "
                  f"requests of {d.get('input_len') or 0:,} + {d.get('output_len') or 0:,} "
                  f"tokens on {tp}× {r.device} ({d.get('engine')})")
    p = d.get("prediction")
    if p:
        out.print(f"memory per device {p['memory_needed_mb']:,.0f} MiB needed "
                  f"({', '.join(f'{k} {v:,.0f}' for k, v in p['memory_breakdown_mb'].items())}),"
                  f" batch latency {p['time_ms']:,.0f} ms, "
                  f"{p['output_tokens_per_s']:,.0f} output tokens/s")
    print_notes(r.notes)


__all__ = ["app", "fit"]
