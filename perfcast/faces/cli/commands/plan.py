"""``perfcast plan``: the best layout of a training step on N GPUs, or the cheapest LLM
deployment meeting SLOs (options from the request schema, answer from
:func:`perfcast.decisions.answer.answer`)."""

from __future__ import annotations

import typer
from rich import box
from rich.table import Table

from perfcast.faces.cli._common import (PANEL_PREDICT, examples, out, print_json, print_notes,
                                  val)
from perfcast.faces.cli.options import JSON, command

app = typer.Typer()


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast plan hf:gpt2-large --gpus 8 --device a100-80gb --precision amp --batch-size 64 "
    "--seq-len 1024 --top 5",
    "perfcast plan hf:meta-llama/Llama-2-7b-hf --mode generate --device h100-sxm --rate 5 "
    "--input-len 512 --output-len 256 --slo-ttft-ms 500 --slo-tpot-ms 50"))
@command("plan", own=[JSON])
def plan(values: dict, *, as_json: bool = False):
    """Plan the best layout on N GPUs, or the cheapest LLM deployment.

    --mode train: every valid (D, T, P, micro-batch, recompute, ZeRO) layout of --gpus GPUs
    ranked by predicted time per iteration among those that fit, and the winner named; a
    layout option given fixes it, the others are searched.

    --mode generate (hf: LLMs): the cheapest deployment (GPUs, tensor parallel, replicas, max
    batch) serving --rate requests/s of --input-len → --output-len tokens within --slo-ttft-ms
    / --slo-tpot-ms, with USD and energy per million tokens, and the table of candidates."""
    from perfcast.faces.cli._common import StageProgress
    from perfcast.decisions.answer import answer

    top = values.get("top") or 15
    mode = values.get("mode") or "train"
    with StageProgress(hidden=as_json) as prog:
        stage = "deployments" if mode == "generate" else "layouts"
        prog.start(stage)
        r = answer("plan", values, progress=lambda i, n: prog.update(stage, i, n, ""))
    if as_json:
        print_json(r.to_dict(top=top))
        return
    if mode == "generate":
        _print_serving_plan(r, top)
        return
    t = Table(title=f"{r.model} on {r.gpus:,}× {r.device} — train, {r.precision}, global batch "
                    f"{r.batch_size:,}{f', {r.seq_len:,} tokens' if r.seq_len else ''}: "
                    f"{r.fitting:,} of {r.evaluated:,} layouts fit (top {min(top, len(r.rows))})",
              box=box.SIMPLE_HEAD, pad_edge=False)
    # USD per 1M tokens (a transformer) or samples, at the plan's price × its GPUs
    per = "tok" if any(row.usd_per_1m_tokens is not None for row in r.rows) else "samples"
    usd_col = [f"USD/1M {per}"] if r.usd_per_gpu_hour is not None else []
    for col in ("#", "D", "T", "P", "m", "recomp", "ZeRO", "ms/iter", "tok/s", "MFU",
                "MiB/GPU", *usd_col, "fit"):
        t.add_column(col, justify="left" if col in ("recomp", "fit") else "right",
                     no_wrap=True)
    for row in r.rows[:top]:
        style = "bold green" if r.winner is not None and row is r.winner else None
        usd = ([val(row.usd_per_1m_tokens if per == "tok" else row.usd_per_1m_samples,
                    "{:,.3g}")] if usd_col else [])
        t.add_row(str(row.rank), str(row.data_parallel), str(row.tensor_parallel),
                  str(row.pipeline_parallel), str(row.micro_batch_size),
                  {"selective": "sel"}.get(row.recompute, row.recompute), str(row.zero),
                  f"{row.time_ms:,.0f}", val(row.tokens_per_s, "{:,.0f}"),
                  val(row.mfu, "{:.0%}"), f"{row.memory_mb:,.0f}", *usd,
                  "yes" if row.fits else "[red]no[/red]", style=style)
    out.print(t)
    if r.winner is not None:
        w = r.winner
        out.print(f"winner: [bold]D={w.data_parallel} T={w.tensor_parallel} "
                  f"P={w.pipeline_parallel} m={w.micro_batch_size} recompute={w.recompute} "
                  f"ZeRO-{w.zero}[/bold] — {w.time_ms:,.1f} ms per iteration, "
                  f"{w.memory_mb:,.0f} MiB per GPU"
                  + (f", {r.usd_per_hour:,.2f} USD per hour for {r.gpus:,} GPUs "
                     f"({r.usd_per_hour * w.time_ms / 3.6e6 * 1e3:,.3g} USD per 1,000 "
                     f"iterations)" if r.usd_per_hour is not None else ""), highlight=False)
    else:
        out.print("[red]no layout fits[/red]", highlight=False)
    out.print(f"[dim]{r.evaluated:,} layouts in {r.elapsed_s:,.1f} s"
              + (f"; skipped: {', '.join(f'{k} ({v})' for k, v in r.skipped.items())}"
                 if r.skipped else "") + "[/dim]", highlight=False)
    print_notes(r.notes)


def _print_serving_plan(r, top: int) -> None:
    """``plan --mode generate``: the :class:`~perfcast.decisions.serving.ServingPlan`."""
    slo = ", ".join(x for x in (f"TTFT ≤ {r.slo_ttft_ms:g} ms" if r.slo_ttft_ms else "",
                                f"TPOT ≤ {r.slo_tpot_ms:g} ms" if r.slo_tpot_ms else "") if x)
    t = Table(title=f"{r.model} on {r.device} — {r.engine}, {r.precision}, {r.rate:g} req/s of "
                    f"{r.input_len:,} → {r.output_len:,} tokens{', ' + slo if slo else ''}: "
                    f"{r.feasible} of {r.evaluated} deployments meet it (top "
                    f"{min(top, len(r.rows))}; T×R = tensor parallel × replicas; batch = "
                    f"running requests a replica admits; kWh and USD per 1M output tokens)",
              box=box.SIMPLE_HEAD, pad_edge=False)
    usd = r.usd_per_gpu_hour is not None
    cols = ["#", "GPUs", "T×R", "batch", "run", "TTFT ms", "TPOT ms", "W/GPU", "kWh/1M"]
    cols += ["USD/1M", "SLO"] if usd else ["SLO"]
    for col in cols:
        t.add_column(col, justify="left" if col == "SLO" else "right", no_wrap=col != "SLO")
    for row in r.rows[:top]:
        style = "bold green" if r.winner is not None and row is r.winner else None
        cells = [str(row.rank), str(row.gpus), f"{row.tensor_parallel}×{row.replicas}",
                 str(row.max_batch), val(row.running_batch, "{:,.1f}"),
                 val(row.ttft_ms, "{:,.0f}"), val(row.tpot_ms, "{:,.1f}"),
                 val(row.power_w, "{:,.0f}"), val(row.kwh_per_1m_output_tokens, "{:,.2f}")]
        if usd:
            cells.append(val(row.usd_per_1m_output_tokens, "{:,.3f}"))
        cells.append("yes" if row.meets_slo else f"[red]no[/red] {row.why}")
        t.add_row(*cells, style=style)
    out.print(t)
    if r.winner is not None:
        w = r.winner
        usd = (f", {w.usd_per_1m_output_tokens:,.3f} USD per 1M output tokens "
               f"({w.usd_per_1m_tokens:,.3f} per 1M tokens in + out)"
               if w.usd_per_1m_output_tokens is not None else "")
        out.print(f"winner: [bold]{w.replicas} replica(s) × T={w.tensor_parallel} = {w.gpus} "
                  f"GPU(s), max batch {w.max_batch}[/bold] — TTFT {w.ttft_ms:,.0f} ms, TPOT "
                  + (f"{w.tpot_ms:,.1f} ms" if w.tpot_ms is not None else "—")
                  + (f", {w.kwh_per_1m_output_tokens:,.2f} kWh per 1M output tokens"
                     if w.kwh_per_1m_output_tokens is not None else "") + usd,
                  highlight=False)
    else:
        out.print("[red]no deployment meets the SLOs[/red]", highlight=False)
    out.print(f"[dim]{r.evaluated:,} deployments in {r.elapsed_s:,.1f} s[/dim]",
              highlight=False)
    print_notes(r.notes)


__all__ = ["app", "plan"]
