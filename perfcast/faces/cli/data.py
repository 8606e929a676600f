"""Commands for users who build graphs and measure ("Data & measurement" in ``perfcast --help``):
``inspect`` (a model's computation graph), ``collect`` (measure on this machine into a resumable
store), ``query`` (what a store measured, else the prediction), ``corpus`` (an unlabeled graph
corpus for pre-training) and ``calibrate`` (measure a few models here and adapt the shipped
model to this machine).
"""

from __future__ import annotations

import math
from typing import Annotated

import typer
from rich.table import Table

from perfcast.faces.cli._common import (
    PANEL_DATA,
    BatchSize,
    BatchSizes,
    GraphMode,
    GraphPrecision,
    InputSize,
    Json,
    Model,
    Modes,
    NoCache,
    ModelOptimizer,
    Optimizer,
    Predictor,
    Ray,
    SeqLen,
    StageProgress,
    Threads,
    Transfer,
    Workers,
    check_choice,
    check_workers,
    choices,
    examples,
    fmt_bytes,
    fmt_num,
    out,
    print_json,
    print_notes,
    print_summary,
    split_list,
    val,
)
from perfcast.errors import PerfcastError, unknown_choice
from perfcast.paths import check_output_dir, check_output_file
from perfcast.workload import DEFAULT_OPTIMIZER, OPTIMIZER_NOT_GIVEN, PRECISIONS, TRANSFER_RECIPES
from perfcast.workload import GRAPH_MODES as MODES

app = typer.Typer()


@app.command(rich_help_panel=PANEL_DATA, epilog=examples(
    "perfcast inspect timm:resnet50",
    "perfcast inspect hf:bert-base-uncased --seq-len 128 --mode train --json",
    "perfcast inspect model.onnx --batch-size 8 --save graphs/"))
def inspect(
    model: Model,
    batch_size: BatchSize = None,
    input_size: InputSize = None,
    seq_len: SeqLen = None,
    mode: GraphMode = "infer",
    precision: GraphPrecision = "fp32",
    optimizer: ModelOptimizer = None,
    as_json: Json = False,
    no_cache: NoCache = False,
    save: Annotated[str | None, typer.Option(
        "--save", help="Also write the graph to this .npz file.")] = None,
):
    """Build the model's computation graph and print its size, MACs, FLOPs and operators.

    MACs and FLOPs are per batch, bytes are bytes; --json adds the op counts, the phases of a
    training graph and the operators no class maps (never dropped: counted as other)."""
    from perfcast.cache import get_graph
    from perfcast.workload import Workload

    check_choice("--mode", mode, MODES, "inspect")
    w = Workload.of(model, batch_size=batch_size, input_size=input_size, seq_len=seq_len,
                    mode=mode, precision=precision,
                    optimizer=optimizer if optimizer is not None else OPTIMIZER_NOT_GIVEN)
    if save:  # checked before the graph is built; a directory gets <dir>/<model>.npz
        save = check_output_file(save, suffixes=(".npz",), option="--save",
                                 default_name=f"{w.file_stem()}.npz")
    graph = get_graph(w, use_cache=not no_cache)
    if save:
        graph.save(save)
    s = graph.summary()
    if as_json:
        print_json(s)
        return
    t = Table(title=f"{s['model']}  ({s['mode']}, {s['precision']}, batch {s['batch_size']})",
              show_header=False)
    t.add_row("input shapes", ", ".join("×".join(map(str, x)) for x in s["input_shapes"]))
    t.add_row("nodes / edges", f"{s['nodes']:,} / {s['edges']:,}")
    t.add_row("parameters", f"{s['params']:,} ({fmt_bytes(s['param_bytes'])})")
    t.add_row("MACs (per batch)", fmt_num(s["macs"]))
    t.add_row("FLOPs (per batch)", fmt_num(s["flops"]))
    t.add_row("activation bytes", fmt_bytes(s["activation_bytes"]))
    if s["mode"] == "train":
        t.add_row("phases", ", ".join(f"{k} {v}" for k, v in s["phase_counts"].items()))
    top = sorted(s["op_counts"].items(), key=lambda kv: -kv[1])
    t.add_row("operators", ", ".join(f"{k} {v}" for k, v in top[:12])
              + (f", … ({len(top)} kinds)" if len(top) > 12 else ""))
    t.add_row("unmapped ops", ", ".join(s["unmapped_ops"]) or "none")
    out.print(t)


@app.command(rich_help_panel=PANEL_DATA, epilog=examples(
    "perfcast collect --models 'timm:resnet18 timm:mobilenetv3_small_100' --batch-sizes 1,8 "
    "--modes infer,train --db measurements.db",
    "perfcast collect --spec sweep.yaml --device rtx4090 --db postgresql://user:pw@host/db",
    "perfcast collect --queued --db measurements.db --device cpu"))
def collect(
    models: Annotated[str | None, typer.Option(
        "--models", "-m", help="Space-separated model specs, e.g. "
                               "'timm:resnet18 timm:vit_tiny_patch16_224'.")] = None,
    batch_sizes: BatchSizes = "1",
    input_sizes: Annotated[str | None, typer.Option(
        "--input-sizes",
        help="Space-separated C,H,W per sample, e.g. '3,128,128 3,160,160'.")] = None,
    seq_lens: Annotated[str | None, typer.Option(
        "--seq-lens", help="Comma-separated sequence lengths (hf:).")] = None,
    modes: Modes = "infer",
    precisions: Annotated[str, typer.Option(
        "--precisions", help=f"Comma-separated precisions: {choices(PRECISIONS)}.")] = "fp32",
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
    spec: Annotated[str | None, typer.Option(
        "--spec", help="YAML sweep file (instead of the flags above).")] = None,
    db: Annotated[str, typer.Option(
        "--db", help="SQLite file or SQLAlchemy URL.")] = "perfcast-measurements.db",
    # the machine measuring (no -d: not the --device of the prediction commands)
    device: Annotated[str, typer.Option(
        "--device", help="Registry key of the local device.")] = "cpu",
    warmup: Annotated[int | None, typer.Option(
        "--warmup", help="Warm-up iterations (default 5).")] = None,
    iters: Annotated[int | None, typer.Option(
        "--iters", help="Timed iterations (default 30).")] = None,
    max_seconds: Annotated[float | None, typer.Option(
        "--max-seconds", help="Time budget (s) of one configuration's warm-up and timed loop "
                              "each: fewer iterations when a step is slow (≥ 3 timed).")] = None,
    threads: Threads = None,
    cpus: Annotated[str | None, typer.Option(
        "--cpus", help="Pin the measuring process to these CPU ids, e.g. '1'.")] = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", help="Seconds per configuration.")] = 600.0,
    cooldown: Annotated[float, typer.Option(
        "--cooldown", help="Seconds of rest between configurations.")] = 1.0,
    memory_limit_mb: Annotated[float | None, typer.Option(
        "--memory-limit-mb", help="Kill and record OOM above this RSS (MiB).")] = None,
    repeat: Annotated[int, typer.Option(
        "--repeat", help="Repeat index (1 = re-measurement for test-retest).")] = 0,
    retry_failed: Annotated[bool, typer.Option(
        "--retry-failed", help="Re-measure failed rows.")] = False,
    export: Annotated[str | None, typer.Option(
        "--export", help="Afterwards write all rows to .parquet/.csv.")] = None,
    wait: Annotated[bool, typer.Option(
        "--wait", help="If another collector holds the store, wait until it finishes (checking "
                       "every $PERFCAST_LOCK_POLL s, default 5) instead of exiting with "
                       "code 2.")] = False,
    queued: Annotated[bool, typer.Option(
        "--queued", help="Measure the configurations of --device queued in the store by "
                         "perfcast query --measure-missing (with or instead of a sweep).")
    ] = False,
    ray: Ray = None,
    as_json: Json = False,
):
    """Measure time, memory and energy on this machine into a resumable store.

    Each configuration runs in a fresh subprocess and is committed whole when it finishes; a
    re-run measures only what is missing. One collector per store and machine: a lock is held
    for the whole collection."""
    from perfcast.devices import get_device
    from perfcast.profiler.collect import CollectSettings, Sweep, load_spec
    from perfcast.profiler.collect import collect as run_collect
    from perfcast.store import MeasurementStore

    from perfcast.distributed import check_address

    ray = check_address(ray)
    if export:  # before anything is measured
        export = str(check_output_file(export, suffixes=(".parquet", ".csv"), option="--export"))
    options: dict = {}
    sweeps: list = []
    if spec:
        sweeps, options = load_spec(spec)
    elif models:
        sweeps = [Sweep(models=models.split(),
                        batch_sizes=split_list(batch_sizes, int),
                        input_sizes=input_sizes.split() if input_sizes else [None],
                        seq_lens=split_list(seq_lens, int) or [None],
                        modes=[m.strip() for m in modes.split(",")],
                        precisions=[p.strip() for p in precisions.split(",")],
                        optimizer=optimizer)]
    elif not queued:
        raise PerfcastError("give --models (and sweep flags), --spec FILE or --queued")
    device = get_device(options.get("device", device)).key  # a spec file → its key; unknown: error
    threads = options.get("threads", threads)
    settings = CollectSettings(
        warmup=warmup if warmup is not None else int(options.get("warmup", 5)),
        iters=iters if iters is not None else int(options.get("iters", 30)),
        timeout_s=float(options.get("timeout", timeout)),
        cooldown_s=float(options.get("cooldown", cooldown)),
        memory_limit_mb=options.get("memory_limit_mb", memory_limit_mb),
        cpus=split_list(cpus, int) or options.get("cpus"),
        retry_failed=retry_failed,
        max_seconds=max_seconds if max_seconds is not None else options.get("max_seconds"),
        torch_device="cuda" if get_device(device).kind == "gpu" else "cpu")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or not 1 <= threads <= 4096):
        raise PerfcastError(f"--threads must be in 1..4096, got {threads!r}")
    configs = [c for s in sweeps for c in s.configs(device, threads, repeat)]
    if sweeps and not configs:
        raise PerfcastError("the sweep has no configuration to measure: one of its lists "
                            "(models, batch sizes, modes, precisions …) is empty")
    settings.validate()
    if ray is None:  # measured here (with --ray, on the cluster's machines)
        _check_local_device(device, settings.cpus)
    store = MeasurementStore(db)
    if queued:  # asked for by perfcast query --measure-missing (their own threads and repeat)
        asked = store.queued(device)
        store.dequeue(c.key() for c in asked if store.has(c.key()))  # measured meanwhile
        configs += asked
    # the lock before the progress bar: its refusal or waiting note is not drawn over
    with store.collector_lock().acquire(wait=wait) as lock, \
            StageProgress(hidden=as_json) as prog:
        prog.start("measuring")

        def on_progress(i, n, cfg, m):
            prog.update("measuring", i, n, f"{cfg.model} b{cfg.batch_size} {cfg.mode}"
                        + (f" → {m.status}" if m is not None else ""))

        counts = run_collect(store, configs, settings, progress=on_progress, lock=lock,
                             ray_address=ray)
    if export:
        store.export(export)
    print_summary({"db": store.target, "configs": len(configs), **counts,  # password masked
                   "rows_in_store": store.count()}, as_json)


def _check_local_device(device: str, cpus: list[int] | None) -> None:
    """Refuse what this machine cannot measure before a failed row is stored for each
    configuration: a GPU that PyTorch does not see, CPU ids it does not have."""
    import os

    from perfcast.devices import get_device

    if cpus and hasattr(os, "sched_getaffinity"):
        have = os.sched_getaffinity(0)
        missing = sorted(set(cpus) - have)
        if missing:
            raise PerfcastError(f"--cpus {','.join(map(str, missing))}: not CPUs this process "
                                f"may run on (it may use {','.join(map(str, sorted(have)))})")
    if get_device(device).is_gpu:
        import torch

        if not torch.cuda.is_available():
            raise PerfcastError(f"{device}: no CUDA device visible to PyTorch here; collect "
                                f"on the machine that has it (or --device cpu)")


@app.command(rich_help_panel=PANEL_DATA, epilog=examples(
    "perfcast query timm:resnet50 --device rtx4090 --batch-size 64 --store measurements.db",
    "perfcast query timm:resnet50 --device rtx4090 --store postgresql://user:pw@host/db "
    "--measure-missing --json"))
def query(
    model: Model,
    device: Annotated[str, typer.Option(
        "--device", "-d", help="Device key (perfcast devices) the measurement was made on.",
        show_default=False)],
    store: Annotated[str, typer.Option(
        "--store", "--db", help="Measurement store: SQLite file or SQLAlchemy URL "
                                "(postgresql://user:pw@host/db).")] = "perfcast-measurements.db",
    batch_size: BatchSize = None,
    input_size: InputSize = None,
    seq_len: SeqLen = None,
    mode: GraphMode = "infer",
    precision: GraphPrecision = None,
    optimizer: ModelOptimizer = None,
    threads: Annotated[int | None, typer.Option(
        "--threads", help="CPU threads of the measurement (default: any; the most when "
                          "several were measured).")] = None,
    predictor: Predictor = None,
    measure_missing: Annotated[bool, typer.Option(
        "--measure-missing", help="Queue the configuration in the store when it was not "
                                  "measured (perfcast collect --queued measures the queue).")
    ] = False,
    as_json: Json = False,
    no_cache: NoCache = False,
):
    """Query before you measure: what a store measured, else the prediction.

    The store's measured time (ms per batch), memory (MiB) and energy (J per batch) of MODEL on
    a device, with spread and date — else the prediction, marked as such. Each value says its
    source: measured or predicted."""
    from perfcast.query import query as run_query

    check_choice("--mode", mode, MODES, "query")
    writer = None
    if measure_missing:  # the store is written (created when missing) to queue what it lacks
        from perfcast.devices import get_device
        from perfcast.store import MeasurementStore

        get_device(device)  # a wrong device creates no store
        writer = MeasurementStore(store)
    try:
        res = run_query(model, device=device, store=store, batch_size=batch_size,
                        input_size=input_size, seq_len=seq_len, mode=mode, precision=precision,
                        optimizer=optimizer if optimizer is not None else OPTIMIZER_NOT_GIVEN,
                        threads=threads, predictor=predictor,
                        enqueue=writer.ask if writer else None, use_cache=not no_cache)
    finally:
        if writer:
            writer.close()
    if as_json:
        print_json(res.to_dict())
        return
    size = (f"input {res.input_size}" if res.input_size else
            f"seq {res.seq_len}" if res.seq_len else "default input")
    t = Table(title=f"{res.model} on {res.device} — {res.mode}, {res.precision}, batch "
                    f"{res.batch_size}, {size}: {res.source}")
    for col in ("quantity", "value", "source", "spread", "when / by"):
        t.add_column(col, justify="right" if col == "value" else "left")
    names = {"time_ms": ("time per batch", "{:,.3f} ms"), "memory_mb": ("peak memory",
                                                                         "{:,.0f} MiB"),
             "energy_j": ("energy per batch", "{:,.3f} J")}
    for target, (label, fmt) in names.items():
        a = res.answers[target]
        value = "out of memory" if a.status == "oom" else val(a.value, fmt)
        source = a.source + (f" ({a.predictor})" if a.predictor else "")
        spread = ""
        if a.spread and target == "time_ms" and a.spread.get("p10") is not None:
            spread = (f"p10–p90 {a.spread['p10']:,.3f}–{a.spread['p90']:,.3f} ms, "
                      f"n={a.spread['n']}, {a.spread['repeats']} run(s)")
        elif a.spread and a.spread.get("repeats", 0) > 1:
            spread = (f"{a.spread['min']:,.3f}–{a.spread['max']:,.3f} over "
                      f"{a.spread['repeats']} runs")
        if a.kind:
            spread = (spread + "; " if spread else "") + a.kind
        when = " ".join(x for x in ((a.measured_at or "")[:16].replace("T", " ")
                                    + (" UTC" if a.measured_at else ""),
                                    f"on {a.host}" if a.host else "") if x)
        t.add_row(label, value, source, spread, when)
    t.add_row("fits in memory", "—" if res.fits is None else ("yes" if res.fits else "no"),
              "", "", "")
    out.print(t)
    out.print(f"[dim]store: {res.store} ({res.rows} row(s) of this configuration)[/dim]",
              highlight=False)
    if res.queued:
        out.print(f"measure-missing: {res.queued}" + (
            f" — perfcast collect --queued --db {res.store} --device {res.device} measures it"
            if res.queued in ("queued", "already queued") else ""), highlight=False)
    print_notes(res.notes)


@app.command(rich_help_panel=PANEL_DATA, epilog=examples(
    "perfcast corpus --out corpus/ --families resnet,vit --variants-per-family 4 "
    "--input-sizes 160,224 --batch-sizes 1,8 --modes infer,train --workers 2",
    "perfcast corpus --out corpus/ --limit 20 --ray"))
def corpus(
    out_dir: Annotated[str, typer.Option(
        "--out", help="Corpus directory (graphs/ + index.csv).", show_default=False)],
    families: Annotated[str | None, typer.Option(
        "--families", help="Comma-separated timm families (default: all).")] = None,
    variants: Annotated[int | None, typer.Option(
        "--variants-per-family",
        help="At most this many models per family (spread evenly).")] = None,
    input_sizes: Annotated[str, typer.Option(
        "--input-sizes", help="Comma-separated square sides, e.g. 160,192,224.")] = "224",
    batch_sizes: BatchSizes = "1",
    modes: Modes = "infer",
    workers: Workers = 2,
    limit: Annotated[int | None, typer.Option(
        "--limit", help="Build at most this many new graphs.")] = None,
    timeout: Annotated[int, typer.Option("--timeout", help="Seconds per graph.")] = 300,
    retry_failed: Annotated[bool, typer.Option(
        "--retry-failed", help="Build again the graphs whose index line is failed or timeout "
                               "(otherwise they are skipped like the built ones).")] = False,
    ray: Ray = None,
    as_json: Json = False,
):
    """Build an unlabeled graph corpus for pre-training (graphs only, no measurement).

    Over timm families, input sizes, batches and modes; resumable, failures recorded in the
    index (--ray: as Ray tasks; a local cluster gets --workers CPUs)."""
    from perfcast.distributed import check_address
    from perfcast.store.corpus import build_corpus, plan

    ray = check_address(ray)
    check_workers(workers)
    check_output_dir(out_dir, option="--out")
    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    for m in mode_list:
        if m not in MODES:
            raise unknown_choice("mode", m, MODES)
    sizes, batches = split_list(input_sizes, int), split_list(batch_sizes, int)
    if any(v <= 0 for v in sizes + batches):
        raise PerfcastError("input sizes and batch sizes must be positive")
    items = plan([f.strip() for f in families.split(",")] if families else None, variants,
                 sizes, batches, mode_list)
    with StageProgress(hidden=as_json) as prog:
        prog.start("building graphs")

        def on_progress(i, n, row):
            prog.update("building graphs", i, n,
                        f"{row['model']} b{row['batch_size']} {row['mode']}"
                        if row else "building graphs")

        counts = build_corpus(items, out_dir, workers=workers, timeout_s=timeout, limit=limit,
                              progress=on_progress, ray_address=ray,
                              retry_failed=retry_failed)
    print_summary({"out": out_dir, "planned": len(items), **counts}, as_json)


@app.command(rich_help_panel=PANEL_DATA, epilog=examples(
    "perfcast calibrate --device cpu --minutes 10",
    "perfcast calibrate --device cpu --minutes 3 --threads 2 --transfer recalibrate --json"))
def calibrate(
    device: Annotated[str, typer.Option(
        "--device", help="The local device: cpu, or the registry key of this machine's GPU.")
    ] = "cpu",
    minutes: Annotated[float, typer.Option(
        "--minutes", help="Budget of the measurements (the fit after them takes seconds).")
    ] = 10.0,
    threads: Annotated[int | None, typer.Option(
        "--threads", help="CPU threads to calibrate (default: this machine's usable cores, "
                          "as perfcast devices detects them).")] = None,
    models: Annotated[str | None, typer.Option(
        "--models", "-m", help="Space-separated model specs instead of the default set.")
    ] = None,
    batch_sizes: Annotated[str | None, typer.Option(
        "--batch-sizes", help="Comma-separated batch sizes instead of the default ones.")
    ] = None,
    input_size: Annotated[str | None, typer.Option(
        "--input-size", help="C,H,W for every image model (default: each model's own).")
    ] = None,
    transfer: Transfer = "auto",
    max_seconds: Annotated[float, typer.Option(
        "--max-seconds", help="Time budget (s) of one configuration's timed loop.")] = 2.0,
    as_json: Json = False,
):
    """Calibrate perfcast to this machine: measure a few models, adapt the shipped model.

    Prints the MAPE on held-out models before and after; later predictions for the device use
    the calibrated model."""
    from perfcast.paths import user_models_dir
    from perfcast.training.calibrate import calibrate as run_calibrate

    if threads is not None and threads < 1:
        raise PerfcastError(f"--threads must be ≥ 1, got {threads}")
    bs = split_list(batch_sizes, int) if batch_sizes else None
    if bs and any(b < 1 for b in bs):
        raise PerfcastError("batch sizes must be positive")
    # before minutes of measuring: the options read only after it
    if transfer not in TRANSFER_RECIPES:
        raise unknown_choice("--transfer", transfer, TRANSFER_RECIPES)
    if not (math.isfinite(max_seconds) and max_seconds > 0):
        raise PerfcastError(f"--max-seconds must be a positive number, got {max_seconds}")
    with StageProgress(hidden=as_json) as prog:
        prog.start("measuring")
        res = run_calibrate(device, minutes, threads=threads,
                            models=models.split() if models else None, batch_sizes=bs,
                            input_size=input_size, transfer=transfer, max_seconds=max_seconds,
                            progress=lambda s, i, n, d: prog.update(s, i, n, d or s))
    if as_json:
        print_json(res.to_dict())
        return
    fmt = lambda v: "—" if v is None else f"{100 * v:.1f} %"
    t = Table(title=f"calibrated {res.device}"
                    + (f" at {res.threads} thread(s)" if res.threads else ""))
    t.add_column("")
    t.add_column("value")
    t.add_row("measured", f"{res.measured} configurations of {len(res.models)} models"
                          + (f" ({res.failed} failed)" if res.failed else "")
                          + (" — budget reached" if res.stopped_by == "budget" else ""))
    t.add_row("held out", ", ".join(res.held_out))
    t.add_row("MAPE before (shipped model)", fmt(res.mape_before))
    t.add_row(f"MAPE after ({res.recipe})", fmt(res.mape_after))
    t.add_row("saved to", res.saved_to)
    t.add_row("took", f"{res.seconds:.0f} s")
    out.print(t)
    out.print(f"perfcast predict … --device {res.device} now uses it (remove "
              f"{user_models_dir() / 'manifest.json'} to go back to the shipped model).")
