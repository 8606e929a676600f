"""Commands for users who predict and decide ("Predict & decide" in ``perfcast --help``):
``predict`` (time, memory, energy of a model on a device), ``mig`` (which MIG slice), ``fit``
(largest batch that fits), ``cost`` (hours, USD, kWh, CO2e of a job), ``rank`` (which device),
``memory`` (exact simulated tensor peak) and ``devices`` (the hardware registry).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.table import Table

from perfcast.cli._common import (
    PANEL_PREDICT,
    BatchSize,
    Cluster,
    DataParallel,
    Device,
    Engine,
    FlashAttention,
    GraphMode,
    GraphPrecision,
    InputLen,
    InputSize,
    Json,
    MIG_DEVICES,
    Margin,
    MicroBatch,
    Mode,
    Model,
    NBatch,
    NoCache,
    NUBatch,
    Optimizer,
    OutputLen,
    OverheadMb,
    PipelineParallel,
    Precision,
    Predictor,
    Provider,
    Recompute,
    Risk,
    Schedule,
    SeqLen,
    Store,
    TensorParallel,
    Tf32,
    Zero,
    check_choice,
    choices,
    examples,
    optional_model,
    out,
    print_json,
    print_notes,
    val,
)
from perfcast.errors import PerfcastError
from perfcast.paths import check_output_file
from perfcast.workload import (
    DEFAULT_OPTIMIZER,
    GRAPH_MODES,
    OBJECTIVES,
    RECOMPUTE,
    ZERO_STAGES,
)

app = typer.Typer()

PowerLimit = Annotated[float | None, typer.Option(
    "--power-limit", help="GPU power limit (W, within the device's range; default its TDP): "
                          "energy and power at it, and the time where it binds.")]

Coverage = Annotated[float, typer.Option(
    "--coverage", help="Coverage of the calibrated intervals (0.9 = 90 %).")]


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


def _model_kwargs(input_size: str | None, seq_len: int | None, optimizer: str,
                  predictor: str | None) -> dict:
    """The prediction keywords the decision commands pass through to ``perfcast.predict``."""
    return {"input_size": input_size, "seq_len": seq_len, "optimizer": optimizer,
            "predictor": predictor, "overlap_simulation": True}


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast predict timm:resnet50 --device rtx4090 --batch-size 256 --precision amp",
    "perfcast predict timm:resnet50 --device my-gpu.json --mode train --batch-size 64 --json",
    "perfcast predict hf:meta-llama/Llama-2-7b-hf --mode generate --device h100-sxm "
    "--input-len 512 --output-len 256 --batch-size 16",
    "perfcast predict hf:meta-llama/Meta-Llama-3-8B --mode generate --engine llama.cpp "
    "--precision int4 --device rtx4090 --input-len 1024 --output-len 128 --n-ubatch 256",
    "perfcast predict hf:gpt2-large --mode train --device a100-80gb --batch-size 64 --seq-len 1024 "
    "--data-parallel 4 --tensor-parallel 2"))
def predict(
    model: Model,
    device: Device,
    batch_size: BatchSize = None,
    input_size: InputSize = None,
    seq_len: SeqLen = None,
    mode: Mode = "infer",
    precision: Precision = None,
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
    predictor: Predictor = None,
    threads: Annotated[int | None, typer.Option(
        "--threads", help="CPU threads the model runs with (CPU devices; default: this "
                          "machine's cores).")] = None,
    tf32: Tf32 = "default",
    input_len: InputLen = None,
    output_len: OutputLen = None,
    engine: Engine = None,
    n_batch: NBatch = None,
    n_ubatch: NUBatch = None,
    data_parallel: DataParallel = 1,
    tensor_parallel: TensorParallel = 1,
    pipeline_parallel: PipelineParallel = 1,
    micro_batch_size: MicroBatch = None,
    recompute: Recompute = "none",
    zero: Zero = 0,
    schedule: Schedule = "1f1b",
    flash_attention: FlashAttention = "auto",
    cluster: Cluster = None,
    store: Store = None,
    coverage: Coverage = 0.9,
    power_limit: PowerLimit = None,
    as_json: Json = False,
    no_cache: NoCache = False,
):
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
    from perfcast.api import parse_request, predict_request
    from perfcast.devices import get_device

    w, _ = parse_request(model, batch_size=batch_size, input_size=input_size, seq_len=seq_len,
                         mode=mode, precision=precision, optimizer=optimizer,
                         input_len=input_len, output_len=output_len, engine=engine,
                         n_batch=n_batch, n_ubatch=n_ubatch,
                         data_parallel=data_parallel, tensor_parallel=tensor_parallel,
                         pipeline_parallel=pipeline_parallel, micro_batch_size=micro_batch_size,
                         recompute=recompute, zero=zero, schedule=schedule, tf32=tf32,
                         flash_attention=flash_attention)
    if cluster is not None and not w.distributed:
        raise PerfcastError("--cluster describes the GPUs of a training step over several "
                            "GPUs; give --mode train with --data-parallel, --tensor-parallel or "
                            "--pipeline-parallel")
    if w.distributed:
        bad = [k for k, v in {"--store": store, "--threads": threads}.items() if v is not None]
        if bad:
            raise PerfcastError(f"{', '.join(bad)} do not apply to a training step over "
                                f"several GPUs")
        p = predict_request(w, get_device(device), predictor=predictor, use_cache=not no_cache,
                            coverage=coverage, power_limit_w=power_limit, cluster=cluster)
        _print_parallel(p, as_json)
        return
    if w.generate:
        bad = [k for k, v in {"--predictor": predictor, "--threads": threads, "--store": store,
                              "--power-limit": power_limit}.items() if v is not None]
        if bad:
            raise PerfcastError(f"{', '.join(bad)} do not apply to --mode generate (use "
                                f"--input-len / --output-len)")
        w.require_lengths()
        _print_generation(predict_request(w, get_device(device)), as_json)
        return
    p = predict_request(w, get_device(device), predictor=predictor, use_cache=not no_cache,
                        overlap_simulation=True, threads=threads, coverage=coverage,
                        power_limit_w=power_limit)
    if store:
        from perfcast.query import apply_measurements

        p = apply_measurements(p, store, threads=threads, optimizer=optimizer)
    if as_json:
        print_json(p.to_dict())
        return
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
            src = ", ".join(prov.get("source", [])[:3])
            n = prov["records"] + prov.get("early_stopping_records", 0)
            out.print(f"[dim]{target}: trained on {n:,} records "
                      f"({prov.get('families', '?')} families){': ' + src if src else ''}[/dim]",
                      highlight=False)
    for n in p.notes:  # every note, repeats included (as always)
        out.print(f"[yellow]note:[/yellow] {n}", highlight=False)
    _ood_warning(p)


# `mig` and `cost` can do without a model; `mig` takes only MIG-capable GPUs and has a default
# one: its own --device.
MigModel = optional_model("--memory-mb")
CostModel = optional_model("--time-ms")
MigDevice = Annotated[str, typer.Option(
    "--device", "-d", help=f"MIG GPU: {choices(MIG_DEVICES)}.")]


def _print_parallel(p, as_json: bool) -> None:
    """``predict --mode train`` over GPUs: the :class:`~perfcast.parallel.ParallelPrediction`,
    with the cost of 1,000 iterations through the cost path (× GPUs)."""
    from perfcast.decisions.cost import estimate_cost

    cost = None
    if p.time_ms is not None:
        try:
            cost = estimate_cost(device=p.device, time_ms=p.time_ms, iterations=1000,
                                 power_w=p.power_w, gpus=p.gpus)
        except PerfcastError as exc:
            p.notes.append(f"cost: {exc}")
    if as_json:
        d = p.to_dict()
        if cost is not None:
            d["cost_per_1000_iterations"] = {"usd": cost.usd, "hours": cost.hours,
                                             "energy_kwh": cost.energy_kwh,
                                             "kg_co2e": cost.kg_co2e,
                                             "usd_per_gpu_hour": cost.usd_per_gpu_hour,
                                             "provider": cost.provider,
                                             "price_source": cost.price_source,
                                             "price_as_of": cost.price_as_of,
                                             "sources": cost.sources}
        print_json(d)
        return
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


def _print_generation(p, as_json: bool) -> None:
    """``predict --mode generate``: the :class:`~perfcast.generation.GenerationPrediction`."""
    if as_json:
        print_json(p.to_dict())
        return
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


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast mig timm:resnet50 --device a100-40gb --batch-size 64",
    "perfcast mig timm:vit_base_patch16_224 --device h100-sxm --batch-size 32 "
    "--latency-slo-ms 50 --all-profiles",
    "perfcast mig --memory-mb 12000 --device a100-80gb"))
def mig(
    model: MigModel = None,
    device: MigDevice = "a100-40gb",
    batch_size: BatchSize = None,
    input_size: InputSize = None,
    seq_len: SeqLen = None,
    mode: GraphMode = "infer",
    precision: GraphPrecision = None,
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
    predictor: Predictor = None,
    latency_slo_ms: Annotated[float | None, typer.Option(
        "--latency-slo-ms", help="Also require time per batch on the slice ≤ this (ms).")] = None,
    margin: Margin = 0.1,
    all_profiles: Annotated[bool, typer.Option(
        "--all-profiles", help="Choose among every profile, not only DIPPM's standard even "
                               "partitions (1g/2g/3g/7g).")] = False,
    memory_mb: Annotated[float | None, typer.Option(
        "--memory-mb", help="Use this peak memory (MiB) instead of predicting it.")] = None,
    overhead_mb: OverheadMb = None,
    risk: Risk = "safe",
    coverage: Coverage = 0.9,
    as_json: Json = False,
):
    """Recommend the smallest MIG slice that holds the model.

    The smallest MIG profile whose usable memory holds the predicted peak × (1 + margin)
    (DIPPM's rule), optionally meeting a latency SLO on the slice."""
    from perfcast.decisions.mig import recommend_mig

    check_choice("--mode", mode, GRAPH_MODES, "mig")
    a = recommend_mig(model, device=device, batch_size=batch_size, mode=mode,
                      precision=precision, latency_slo_ms=latency_slo_ms, margin=margin,
                      all_profiles=all_profiles, overhead_mb=overhead_mb, memory_mb=memory_mb,
                      risk=risk,
                      **({**_model_kwargs(input_size, seq_len, optimizer, predictor),
                          "coverage": coverage} if model else {}))
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


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast fit timm:resnet50 --device a100-40gb --mode train --precision amp",
    "perfcast fit timm:resnet50 --device a100-40gb --mode infer --mig-profile 1g.5gb",
    "perfcast fit hf:meta-llama/Llama-2-7b-hf --mode generate --device a100-80gb "
    "--input-len 1024 --output-len 256"))
def fit(
    model: Model,
    device: Device,
    mode: Mode = "train",
    precision: Precision = None,
    input_size: InputSize = None,
    seq_len: SeqLen = None,
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
    predictor: Predictor = None,
    margin: Margin = 0.1,
    mig_profile: Annotated[str | None, typer.Option(
        "--mig-profile", help="Fit in this MIG slice (e.g. 3g.20gb).")] = None,
    overhead_mb: OverheadMb = None,
    limit: Annotated[int, typer.Option("--limit", help="Largest batch searched.")] = 65536,
    risk: Risk = "safe",
    coverage: Coverage = 0.9,
    batch_size: Annotated[int | None, typer.Option(
        "--batch-size", "-b", help="--mode generate without --input-len: requests whose "
                                   "largest prompt is searched (default 1).")] = None,
    input_len: Annotated[int | None, typer.Option(
        "--input-len", help="--mode generate: prompt tokens per request (omit it to get the "
                            "largest prompt that fits).")] = None,
    output_len: OutputLen = None,
    engine: Engine = None,
    n_batch: NBatch = None,
    n_ubatch: NUBatch = None,
    tensor_parallel: TensorParallel = 1,
    as_json: Json = False,
):
    """Find the largest batch that fits the device or a MIG slice.

    The largest batch whose predicted peak memory (+ margin) fits, with the predicted time and
    throughput at that batch.

    `--mode generate` (hf: LLMs): the most concurrent requests of --input-len + --output-len
    tokens whose weights + KV cache fit, or without --input-len the longest prompt
    --batch-size requests can hold."""
    from perfcast.decisions.fit import max_batch_size

    if mode == "generate":
        _fit_generation(model, device, input_len, output_len, batch_size, engine,
                        tensor_parallel, precision, limit, as_json, n_batch, n_ubatch)
        return
    for name, v in (("--batch-size", batch_size), ("--input-len", input_len),
                    ("--output-len", output_len), ("--engine", engine), ("--n-batch", n_batch),
                    ("--n-ubatch", n_ubatch)):
        if v is not None:
            raise PerfcastError(f"{name} applies to fit --mode generate only (fit searches "
                                f"the batch)")
    if tensor_parallel != 1:
        raise PerfcastError("--tensor-parallel applies to fit --mode generate only")

    r = max_batch_size(model, device=device, mode=mode, precision=precision, margin=margin,
                       mig_profile=mig_profile, overhead_mb=overhead_mb, limit=limit, risk=risk,
                       coverage=coverage,
                       **_model_kwargs(input_size, seq_len, optimizer, predictor))
    if as_json:
        print_json(r.to_dict())
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


def _fit_generation(model, device, input_len, output_len, batch_size, engine,
                    tensor_parallel, precision, limit, as_json, n_batch=None,
                    n_ubatch=None) -> None:
    """``fit --mode generate``: the largest batch at given lengths, or the largest prompt."""
    from perfcast.api import as_workload
    from perfcast.devices import get_device
    from perfcast.generation import max_generation_batch, max_generation_context, resolve

    if input_len is not None and batch_size is not None:
        raise PerfcastError("give --input-len (the largest batch is searched) or --batch-size "
                            "(the longest prompt is searched, with --output-len), "
                            "not both")
    req = resolve(as_workload(model, mode="generate", batch_size=batch_size, precision=precision,
                              input_len=input_len, output_len=output_len, engine=engine,
                              tensor_parallel=tensor_parallel, n_batch=n_batch,
                              n_ubatch=n_ubatch))
    framework = req.engine
    knobs = {"n_batch": req.n_batch, "n_ubatch": req.n_ubatch} if framework == "llama.cpp" \
        else {}
    dev = get_device(device)
    if input_len is not None:
        if output_len is None:
            raise PerfcastError("--mode generate needs --output-len (tokens)")
        b, p = max_generation_batch(req, dev, limit=limit)
        d = {"model": model, "device": dev.key, "mode": "generate", "max_batch_size": b,
             "input_len": input_len, "output_len": output_len, "engine": framework, **knobs,
             "tensor_parallel": tensor_parallel, "prediction": p.to_dict() if p else None}
        head = (f"largest batch that fits: [bold]{b:,}[/bold] requests of {input_len:,} + "
                f"{output_len:,} tokens on {tensor_parallel}× {dev.key} ({framework})")
    else:
        i, limited, p = max_generation_context(req, dev)
        req = req.replace(output_len=req.output_len or 1)
        d = {"model": model, "device": dev.key, "mode": "generate", "max_input_len": i,
             "max_context_tokens": i + req.output_len if i else 0, "limited_by": limited,
             "batch_size": req.batch_size, "output_len": req.output_len,
             "engine": framework, **knobs, "tensor_parallel": tensor_parallel,
             "prediction": p.to_dict() if p else None}
        head = (f"longest prompt that fits: [bold]{i:,}[/bold] tokens (+ {req.output_len:,} "
                f"generated = {d['max_context_tokens']:,} context) for {req.batch_size} "
                f"request(s) on {tensor_parallel}× {dev.key} ({framework}; limited by "
                f"{limited.replace('_', ' ')})")
    if as_json:
        print_json(d)
        return
    out.print(head)
    if p is not None:
        out.print(f"memory per device {p.memory_needed_mb:,.0f} MiB needed "
                  f"({', '.join(f'{k} {v:,.0f}' for k, v in p.memory_breakdown_mb.items())}),"
                  f" batch latency {p.time_ms:,.0f} ms, "
                  f"{p.output_tokens_per_s:,.0f} output tokens/s")
        print_notes(p.notes)


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast cost timm:resnet50 --device a100-40gb --mode train --batch-size 256 --epochs 90 "
    "--dataset-size 1281167 --region FRA",
    "perfcast cost --device a100-40gb --time-ms 350 --iterations 200000 --price-per-hour 2.934",
    "perfcast cost hf:meta-llama/Llama-2-7b-hf --mode generate --device h100-sxm "
    "--requests 100000 --input-len 512 --output-len 256 --batch-size 32"))
def cost(
    model: CostModel = None,
    device: Device = ...,
    iterations: Annotated[int | None, typer.Option(
        "--iterations", help="Batches (steps) to run.")] = None,
    epochs: Annotated[int | None, typer.Option(
        "--epochs", help="Epochs (with --dataset-size).")] = None,
    dataset_size: Annotated[int | None, typer.Option(
        "--dataset-size", help="Samples per epoch.")] = None,
    batch_size: BatchSize = None,
    mode: Mode = "train",
    precision: Precision = None,
    input_size: InputSize = None,
    seq_len: SeqLen = None,
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
    predictor: Predictor = None,
    provider: Provider = None,
    price_per_hour: Annotated[float | None, typer.Option(
        "--price-per-hour", help="USD per GPU-hour (overrides the table).")] = None,
    region: Annotated[str | None, typer.Option(
        "--region", help="Electricity grid of the CO2e: a country (FRA, Germany) or a cloud "
                         "region (gcp:europe-west1); default the world average.")] = None,
    time_ms: Annotated[float | None, typer.Option(
        "--time-ms", help="Time per batch (ms) instead of predicting it.")] = None,
    power_w: Annotated[float | None, typer.Option(
        "--power-w", help="Mean power (W) for the energy.")] = None,
    pue: Annotated[float, typer.Option(
        "--pue", help="Data-centre PUE multiplying the energy.")] = 1.0,
    requests: Annotated[int | None, typer.Option(
        "--requests", help="--mode generate: requests to serve.")] = None,
    input_len: InputLen = None,
    output_len: OutputLen = None,
    engine: Engine = None,
    n_batch: NBatch = None,
    n_ubatch: NUBatch = None,
    tensor_parallel: TensorParallel = 1,
    as_json: Json = False,
):
    """Price a job: hours, USD, kWh and kg CO2e.

    Predicted (or given) time per batch × iterations, priced per GPU-hour; energy from the
    predicted energy, or time × power (an estimate, said so).

    `--mode generate --requests N` (hf: LLMs): N requests of --input-len → --output-len tokens
    served in batches of --batch-size."""
    from perfcast.decisions.cost import estimate_cost, estimate_generation_cost

    if mode == "generate":
        bad = [k for k, v in {"--iterations": iterations, "--epochs": epochs,
                              "--dataset-size": dataset_size, "--time-ms": time_ms,
                              "--power-w": power_w, "--input-size": input_size,
                              "--seq-len": seq_len, "--predictor": predictor}.items()
               if v is not None]
        if bad:
            raise PerfcastError(f"{', '.join(bad)} do not apply to cost --mode generate (use "
                                f"--requests, --input-len, --output-len)")
        for name, v in (("--requests", requests), ("--input-len", input_len),
                        ("--output-len", output_len)):
            if v is None:
                raise PerfcastError(f"cost --mode generate needs {name}")
        if model is None:
            raise PerfcastError("cost --mode generate needs a model (hf:ID)")
        from perfcast.api import as_workload

        w = as_workload(model, mode="generate", batch_size=batch_size, precision=precision,
                        input_len=input_len, output_len=output_len, engine=engine,
                        tensor_parallel=tensor_parallel, n_batch=n_batch, n_ubatch=n_ubatch)
        c = estimate_generation_cost(w, device=device, requests=requests, provider=provider,
                                     price_per_hour=price_per_hour, region=region, pue=pue)
    else:
        gen_only = {"--requests": requests, "--input-len": input_len,
                    "--output-len": output_len, "--engine": engine, "--n-batch": n_batch,
                    "--n-ubatch": n_ubatch,
                    "--tensor-parallel": None if tensor_parallel == 1 else tensor_parallel}
        given = [k for k, v in gen_only.items() if v is not None]
        if given:
            raise PerfcastError(f"{', '.join(given)} apply to --mode generate only")
        c = estimate_cost(model, device=device, iterations=iterations, epochs=epochs,
                          dataset_size=dataset_size, batch_size=batch_size, mode=mode,
                          precision=precision, optimizer=optimizer, input_size=input_size,
                          seq_len=seq_len, provider=provider, price_per_hour=price_per_hour,
                          region=region, time_ms=time_ms, power_w=power_w, pue=pue,
                          predictor=predictor)
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


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast rank timm:resnet50 --devices all --objective time --batch-size 64",
    "perfcast rank timm:resnet50 --devices rtx4090,a100-40gb,l4 --objective cost --mode train "
    "--iterations 100000 --plot rank.png"))
def rank(
    model: Model,
    devices: Annotated[str, typer.Option(
        "--devices", help="all, or a comma list of device keys and spec files.")] = "all",
    objective: Annotated[str, typer.Option(
        "--objective", help=f"Order by {choices(OBJECTIVES)} — time per batch, USD or kWh of "
                            f"--iterations batches.")] = "time",
    batch_size: BatchSize = None,
    mode: GraphMode = "infer",
    precision: GraphPrecision = None,
    input_size: InputSize = None,
    seq_len: SeqLen = None,
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
    iterations: Annotated[int, typer.Option(
        "--iterations", help="Batches the cost/energy are for.")] = 1000,
    provider: Provider = None,
    plot: Annotated[str | None, typer.Option(
        "--plot", help="Also write a PNG bar chart here.")] = None,
    as_json: Json = False,
):
    """Rank devices for MODEL by time, cost or energy.

    One row per device: time per batch with its interval and source, memory and whether it
    fits, USD and kWh of --iterations batches."""
    from perfcast.decisions.rank import rank as do_rank

    check_choice("--mode", mode, GRAPH_MODES, "rank")
    if plot:  # before any prediction
        plot = str(check_output_file(plot, suffixes=(".png", ".svg", ".pdf"), option="--plot"))
    r = do_rank(model, devices=devices, objective=objective, batch_size=batch_size, mode=mode,
                precision=precision, iterations=iterations, provider=provider,
                **_model_kwargs(input_size, seq_len, optimizer, None))
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


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast plan hf:gpt2-large --gpus 8 --device a100-80gb --precision amp --batch-size 64 "
    "--seq-len 1024 --top 5",
    "perfcast plan hf:meta-llama/Llama-2-7b-hf --mode generate --device h100-sxm --rate 5 "
    "--input-len 512 --output-len 256 --slo-ttft 500 --slo-tpot 50"))
def plan(
    model: Model,
    device: Device,
    gpus: Annotated[int | None, typer.Option(
        "--gpus", help="--mode train: GPUs to spread the training over (required); --mode "
                       "generate: the most GPUs a deployment may use.", show_default=False)] = None,
    cluster: Cluster = None,
    batch_size: Annotated[int | None, typer.Option(
        "--batch-size", "-b", help="Global batch (default: max(32, GPUs)).")] = None,
    seq_len: SeqLen = None,
    mode: Annotated[str, typer.Option(
        "--mode", help="What to plan: " + choices(("train (the layouts of a training step)",
                                                   "generate (the deployments serving an LLM "
                                                   "at --rate)")) + ".")] = "train",
    precision: Precision = None,
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
    data_parallel: Annotated[int | None, typer.Option(
        "--data-parallel", help="Fix D (default: every D).")] = None,
    tensor_parallel: Annotated[int | None, typer.Option(
        "--tensor-parallel", help="Fix T (default: every T dividing the heads).")] = None,
    pipeline_parallel: Annotated[int | None, typer.Option(
        "--pipeline-parallel", help="Fix P (default: every P dividing the layers).")] = None,
    micro_batch_size: Annotated[int | None, typer.Option(
        "--micro-batch-size", help="Fix the micro-batch (default: every power of two).")] = None,
    recompute: Annotated[str | None, typer.Option(
        "--recompute", help=f"Only this recomputation: {choices(RECOMPUTE)} (default: "
                            f"every one).")] = None,
    zero: Annotated[str | None, typer.Option(
        "--zero", help=f"Only these ZeRO stages, comma-separated from {choices(ZERO_STAGES)} "
                       f"(default: every one).")] = None,
    schedule: Schedule = "1f1b",
    flash_attention: FlashAttention = "auto",
    rate: Annotated[float | None, typer.Option(
        "--rate", help="--mode generate: requests per second to serve.")] = None,
    input_len: InputLen = None,
    output_len: OutputLen = None,
    slo_ttft: Annotated[float | None, typer.Option(
        "--slo-ttft", help="--mode generate: time-to-first-token SLO (ms, mean).")] = None,
    slo_tpot: Annotated[float | None, typer.Option(
        "--slo-tpot", help="--mode generate: time-per-output-token SLO (ms, mean).")] = None,
    engine: Engine = None,
    n_batch: NBatch = None,
    n_ubatch: NUBatch = None,
    max_batch: Annotated[int | None, typer.Option(
        "--max-batch", help="--mode generate: fix the running requests per replica "
                            "(default: every power of two that fits).")] = None,
    price_per_hour: Annotated[float | None, typer.Option(
        "--price-per-hour", help="USD per GPU-hour (default: --provider's, or the lowest "
                                 "provider's on-demand price in the price table).")] = None,
    provider: Provider = None,
    top: Annotated[int, typer.Option("--top", help="Rows shown (the JSON: --top too).")] = 15,
    as_json: Json = False,
):
    """Plan the best layout on N GPUs, or the cheapest LLM deployment.

    --mode train: every valid (D, T, P, micro-batch, recompute, ZeRO) layout of --gpus GPUs
    ranked by predicted time per iteration among those that fit, and the winner named.

    --mode generate (hf: LLMs): the cheapest deployment (GPUs, tensor parallel, replicas, max
    batch) serving --rate requests/s of --input-len → --output-len tokens within --slo-ttft /
    --slo-tpot, with USD and energy per million tokens, and the table of candidates."""
    from perfcast.cli._common import StageProgress, split_list
    from perfcast.decisions.plan import plan as do_plan

    if top < 1:
        raise PerfcastError(f"--top must be ≥ 1, got {top}")
    zeros = tuple(split_list(zero, int)) if zero else None
    with StageProgress(hidden=as_json) as prog:
        stage = "deployments" if mode == "generate" else "layouts"
        prog.start(stage)
        r = do_plan(model, gpus=gpus, device=device, cluster=cluster, batch_size=batch_size,
                    seq_len=seq_len, precision=precision, optimizer=optimizer, mode=mode,
                    data_parallel=data_parallel, tensor_parallel=tensor_parallel,
                    pipeline_parallel=pipeline_parallel, micro_batch_size=micro_batch_size,
                    recompute=recompute, zero=zeros, schedule=schedule,
                    flash_attention=flash_attention,
                    progress=lambda i, n: prog.update(stage, i, n, ""),
                    rate=rate, input_len=input_len, output_len=output_len,
                    slo_ttft_ms=slo_ttft, slo_tpot_ms=slo_tpot, engine=engine,
                    max_batch=max_batch, price_per_hour=price_per_hour, provider=provider,
                    n_batch=n_batch, n_ubatch=n_ubatch)
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


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast memory timm:resnet50 --mode train --batch-size 32 --optimizer adamw",
    "perfcast memory hf:gpt2 --mode infer --batch-size 8 --seq-len 512 --precision fp16 --json"))
def memory(
    model: Model,
    batch_size: BatchSize = 1,
    input_size: InputSize = None,
    seq_len: SeqLen = None,
    mode: GraphMode = "train",
    precision: GraphPrecision = "fp32",
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
    as_json: Json = False,
):
    """Simulate the exact tensor-memory peak of a step (MiB).

    The peak of live tensor bytes of a training step or an inference pass, simulated under
    FakeTensor — no device, no weights. Excludes the CUDA context, the allocator and library
    workspaces (perfcast predict adds them on GPUs)."""
    from perfcast.memory import simulate_memory

    check_choice("--mode", mode, GRAPH_MODES, "memory")
    d = simulate_memory(model, batch_size=batch_size, input_size=input_size, seq_len=seq_len,
                        mode=mode, precision=precision, optimizer=optimizer).to_dict()
    if as_json:
        print_json(d)
        return
    t = Table(title=f"{d['model']}  ({d['mode']}, {d['precision']}, batch {d['batch_size']})",
              show_header=False)
    t.add_row("tensor peak", f"{d['tensor_peak_mb']:,.1f} MiB")
    for k in ("param_mb", "grad_mb", "optimizer_state_mb", "activation_peak_mb"):
        if d.get(k) is not None:
            t.add_row(k.removesuffix("_mb").replace("_", " "), f"{d[k]:,.1f} MiB")
    for note in d.get("notes") or []:
        t.add_row("note", str(note))
    out.print(t)


# `perfcast devices` lists (as it always did); `devices add` / `devices remove` keep the user's
# own device specs (perfcast.paths.user_devices_dir()).
devices_app = typer.Typer(no_args_is_help=False)
app.add_typer(devices_app, name="devices", rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast devices", "perfcast devices --json", "perfcast devices add my-gpu.json",
    "perfcast devices remove my-gpu"))


@devices_app.callback(invoke_without_command=True)
def devices(ctx: typer.Context, as_json: Json = False):
    """List the devices perfcast knows; add or remove your own.

    Peak TFLOPS, memory GB, bandwidth GB/s and MIG profiles of every registry device; `devices
    add SPEC.json` keeps a spec of your own (the keys of a registry row, perfcast devices
    --json shows them), `devices remove KEY` deletes it."""
    if ctx.invoked_subcommand is not None:
        return
    from perfcast.devices import list_devices

    rows = list_devices()
    if as_json:
        print_json([d.to_dict() for d in rows])
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


@devices_app.command("add", epilog=examples("perfcast devices add my-gpu.json",
                                            "perfcast devices add a100-40gb.json --replace"))
def devices_add(
    spec: Annotated[str, typer.Argument(
        help="Device spec: a JSON object with the keys of a devices.json row (perfcast devices "
             "--json shows them); key defaults to the file name.", show_default=False)],
    replace: Annotated[bool, typer.Option(
        "--replace", help="Overwrite a user device or override a built-in one of that key.")] = False,
    as_json: Json = False,
):
    """Keep a device spec of your own (then --device KEY works).

    Validates SPEC.json and stores it in $PERFCAST_DEVICES_DIR, else <data home>/devices."""
    from perfcast.devices import add_user_device

    dev, path = add_user_device(spec, replace=replace)
    if as_json:
        print_json({"key": dev.key, "path": str(path), "device": dev.to_dict()})
        return
    out.print(f"added device [bold]{dev.key}[/bold] ({dev.name}) → {path}", highlight=False)


@devices_app.command("remove", epilog=examples("perfcast devices remove my-gpu"))
def devices_remove(
    key: Annotated[str, typer.Argument(help="Key of a user device (perfcast devices add).",
                                       show_default=False)],
    as_json: Json = False,
):
    """Delete a device of your own.

    Built-in devices stay; a built-in the user device overrode comes back."""
    from perfcast.devices import remove_user_device

    files = remove_user_device(key)
    if as_json:
        print_json({"key": key.strip().lower(), "removed": [str(f) for f in files]})
        return
    out.print(f"removed device [bold]{key.strip().lower()}[/bold] "
              f"({', '.join(str(f) for f in files)})", highlight=False)
