"""``perfcast predict``: time, throughput, memory and energy of a model on a device, for every
mode and layout — its options generated from the request schema (:mod:`perfcast.faces.cli.options`),
its answer from :func:`perfcast.decisions.answer.answer`."""

from __future__ import annotations

import typer
from rich.table import Table

from perfcast.faces.cli._common import PANEL_PREDICT, examples, out, print_json, print_notes, val
from perfcast.faces.cli.options import JSON, command
from perfcast.errors import PerfcastError

app = typer.Typer()


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast predict timm:resnet50 --device rtx4090 --batch-size 256 --precision amp",
    "perfcast predict timm:resnet50 --device my-gpu.json --mode train --batch-size 64 --json",
    "perfcast predict hf:meta-llama/Llama-2-7b-hf --mode generate --device h100-sxm "
    "--input-len 512 --output-len 256 --batch-size 16",
    "perfcast predict hf:meta-llama/Meta-Llama-3-8B --mode generate --engine llama.cpp "
    "--precision int4 --device rtx4090 --input-len 1024 --output-len 128 --n-ubatch 256",
    "perfcast predict hf:gpt2-large --mode train --device a100-80gb --batch-size 64 --seq-len 1024 "
    "--data-parallel 4 --tensor-parallel 2"))
@command("predict", own=[JSON])
def predict(values: dict, *, as_json: bool = False):
    """Forecast time, throughput, memory and energy of MODEL on a device.

    Time per batch (ms), throughput, peak memory (MiB) and energy (J), each with its interval
    and the predictor that answered (--store: measured values in place of predicted ones where
    the store has them). GPUs without labeled data of their own are answered by `crossdevice`
    (from their spec sheet); memory without a learned model by the tensor-memory simulation.

    `--mode generate` (hf: LLMs): latency of --batch-size concurrent requests (every engine;
    llama.cpp's own batches are --n-batch / --n-ubatch), time to first token, time per output
    token, tokens/s, memory per device (weights + KV cache), energy per token.

    `--mode train` over GPUs (--data-parallel, --tensor-parallel, --pipeline-parallel …;
    --batch-size is the global batch): time per iteration, tokens/s, TFLOP/s per GPU and MFU,
    memory per GPU, the breakdown (compute, communication, pipeline bubble, optimizer)."""
    from perfcast.decisions.answer import answer

    p = answer("predict", values, overlap_simulation=True)
    if as_json:
        print_json(p.to_dict())
        return
    if p.kind == "parallel":
        _print_parallel(p)
    elif p.kind == "generation":
        _print_generation(p)
    else:
        _print_single(p, p.coverage or 0.9)


def _interval(p, key: str, fmt: str) -> str:
    """``low–high`` of a calibrated interval, or ``—``."""
    lo, hi = getattr(p, f"{key}_low", None), getattr(p, f"{key}_high", None)
    if lo is None or hi is None:
        return "—"
    return f"{fmt.format(lo)} – {fmt.format(hi)}"


def _ood_warning(p) -> None:
    """One line on the terminal when the request is out of the answering models' distribution."""
    ood = getattr(p, "ood", None) or {}
    if ood.get("flagged"):
        why = "; ".join(ood.get("reasons") or []) or "far from the training data"
        out.print(f"[bold red]warning:[/bold red] out of distribution (score "
                  f"{ood['score']:.2f} ≥ {ood['threshold']:.2f}: {why}) — expect a large error",
                  highlight=False)


def _print_single(p, coverage: float) -> None:
    """``predict`` on one device: the table, provenance and notes."""
    t = Table(title=f"{p.model} on {p.device} — {p.mode}, {p.precision}, batch {p.batch_size}",
              show_header=True)
    t.add_column("quantity")
    t.add_column("prediction", justify="right")
    t.add_column(f"{coverage:.0%} interval", justify="right")
    t.add_column("predictor")
    hypo = " (hypothetical)" if p.fits is False else ""
    t.add_row("time per batch", val(p.time_ms, "{:,.3f} ms") + hypo,
              _interval(p, "time_ms", "{:,.4g}"), p.predictor.get("time_ms", "—"))
    t.add_row("throughput", val(p.throughput_samples_per_s, "{:,.1f} samples/s") + hypo, "", "")
    t.add_row("peak memory", val(p.memory_mb, "{:,.0f} MiB"), _interval(p, "memory_mb", "{:,.0f}"),
              p.predictor.get("memory_mb", "—"))
    t.add_row("fits in memory", "—" if p.fits is None else ("yes" if p.fits else "[red]no[/red]"),
              "", val(p.capacity_mb, "of {:,.0f} MiB"))
    t.add_row("energy per batch", val(p.energy_j, "{:,.3f} J"), _interval(p, "energy_j", "{:,.4g}"),
              p.predictor.get("energy_j", "—"))
    t.add_row("mean power", val(p.power_w, "{:,.1f} W"), "",
              val(p.power_limit_w, "at a {:,.0f} W power limit"))
    out.print(t)
    for target, prov in p.trained_on.items():
        if isinstance(prov, dict) and prov.get("records"):
            recs = prov["records"]  # a count, or counts per source (the power model)
            n = sum(recs.values()) if isinstance(recs, dict) else \
                recs + prov.get("early_stopping_records", 0)
            src = ", ".join(prov.get("source", [])[:3])
            fam = prov.get("families")  # model families (a count); the power model's are chips
            fam = f" ({fam} families)" if isinstance(fam, int) else ""
            out.print(f"[dim]{target}: trained on {n:,} records{fam}{': ' + src if src else ''}"
                      f"[/dim]", highlight=False)
    for n in p.notes:  # every note, repeats included (as always)
        out.print(f"[yellow]note:[/yellow] {n}", highlight=False)
    _ood_warning(p)


def _print_parallel(p) -> None:
    """``predict --mode train`` over GPUs: the layout's estimate, with the cost of 1,000
    iterations through the cost path (× GPUs; the table only — ``perfcast cost`` prices a
    layout in JSON)."""
    from perfcast.decisions.cost import estimate_cost

    cost = None
    if p.time_ms is not None:
        try:
            cost = estimate_cost(device=p.device, time_ms=p.time_ms, iterations=1000,
                                 power_w=p.power_w, gpus=p.gpus)
        except PerfcastError as exc:
            p.notes.append(f"cost: {exc}")
    lay = p.layout
    t = Table(title=f"{p.model} on {p.gpus:,}× {p.device} — train, {p.precision}, global batch "
                    f"{p.batch_size:,}: D={lay['data_parallel']} T={lay['tensor_parallel']} "
                    f"P={lay['pipeline_parallel']} m={lay['micro_batch_size']} "
                    f"recompute={lay['recompute']} ZeRO-{lay['zero']} {lay['schedule']}")
    t.add_column("quantity")
    t.add_column("prediction", justify="right")
    t.add_row("time per iteration", val(p.time_ms, "{:,.1f} ms") +
              (" (hypothetical)" if p.fits is False else ""))
    t.add_row("throughput", val(p.samples_per_s, "{:,.2f} samples/s") +
              (f", {p.tokens_per_s:,.0f} tokens/s" if p.tokens_per_s else ""))
    t.add_row("model TFLOP/s per GPU", val(p.model_tflops_per_gpu, "{:,.1f}") +
              (f" (MFU {p.mfu:.1%})" if p.mfu is not None else ""))
    for k, v in p.breakdown_ms.items():
        if v:
            t.add_row(f"  {k.replace('_', ' ')}", f"{v:,.1f} ms ({v / p.time_ms:.0%})")
    t.add_row("memory per GPU", val(p.memory_mb, "{:,.0f} MiB"))
    for k, v in p.memory_breakdown_mb.items():
        t.add_row(f"  {k.replace('_', ' ')}", f"{v:,.0f} MiB")
    t.add_row("fits", "—" if p.fits is None else ("yes" if p.fits else "[red]no[/red]") +
              val(p.capacity_mb, " (of {:,.0f} MiB)"))
    t.add_row("energy per iteration", val(p.energy_j, "{:,.0f} J") +
              val(p.power_w, " ({:,.0f} W per GPU)"))
    if cost is not None:
        parts = [f"{cost.hours:,.2f} h"]
        if cost.usd is not None:
            parts.append(f"{cost.usd:,.0f} USD")
        if cost.kg_co2e is not None:
            parts.append(f"{cost.kg_co2e:,.1f} kg CO2e")
        t.add_row("1,000 iterations", ", ".join(parts))
        p.notes.extend(n for n in cost.notes if n.startswith("price"))
    out.print(t)
    print_notes(p.notes)


def _print_generation(p) -> None:
    """``predict --mode generate``: the :class:`~perfcast.generation.GenerationPrediction`."""
    batch = f"batch {p.batch_size}" + (f" (n_batch {p.n_batch:,}, n_ubatch {p.n_ubatch:,})"
                                       if p.engine == "llama.cpp" else "")
    t = Table(title=f"{p.model} on {p.tensor_parallel}× {p.device} — generate, {p.engine}, "
                    f"{p.precision}, {batch}, {p.input_len} → {p.output_len} tokens")
    t.add_column("quantity")
    t.add_column("prediction", justify="right")
    t.add_column("predictor")
    t.add_row("batch latency", val(p.time_ms, "{:,.0f} ms"), p.predictor.get("time_ms", "—"))
    iv = (f"{p.coverage:.0%} interval {p.ttft_ms_low:,.1f} – {p.ttft_ms_high:,.1f} ms"
          if p.ttft_ms_low is not None else "")
    t.add_row("time to first token", val(p.ttft_ms, "{:,.1f} ms"), iv)
    if p.prefill:
        t.add_row("  prefill", f"{p.prefill['prefill_tokens_per_s']:,.0f} tokens/s",
                  f"{p.prefill['passes']:,} pass(es) of ≤ {p.prefill['tokens_per_pass']:,} "
                  f"tokens")
    t.add_row("time per output token", val(p.tpot_ms, "{:,.2f} ms"), "")
    t.add_row("throughput (in + out)", val(p.throughput_tokens_per_s, "{:,.0f} tokens/s"), "")
    t.add_row("memory per device", val(p.memory_mb, "{:,.0f} MiB"),
              p.predictor.get("memory_mb", "—"))
    t.add_row("  needed", val(p.memory_needed_mb, "{:,.0f} MiB"),
              ", ".join(f"{k} {v:,.0f}" for k, v in p.memory_breakdown_mb.items()))
    t.add_row("fits", "—" if p.fits is None else ("yes" if p.fits else "[red]no[/red]"),
              val(p.capacity_mb, "of {:,.0f} MiB"))
    t.add_row("energy per batch", val(p.energy_j, "{:,.0f} J"), p.predictor.get("energy_j", "—"))
    t.add_row("energy per output token", val(p.energy_per_token_j, "{:,.3f} J"), "")
    t.add_row("mean power per device", val(p.power_w, "{:,.0f} W"),
              ", ".join(f"{k} {v:,.0f} W" for k, v in p.power_by_phase_w.items()))
    out.print(t)
    print_notes(p.notes)


__all__ = ["app", "predict"]
