"""The ``perfcast`` command line.

Exit codes: 0 success · 1 internal error · 2 bad input (model, file, device, option) ·
3 the model could not be traced · 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from perfcast.errors import PerfcastError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Forecast DL model latency, step time, memory and energy before running.")
out = Console()
err = Console(stderr=True)


def _fmt_num(x: float) -> str:
    for unit, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3f} {unit}"
    return f"{x:g}"


def _fmt_bytes(x: float) -> str:
    return f"{x / 2**20:,.1f} MiB"


@app.command()
def inspect(
    model: str = typer.Argument(..., help="timm name, timm:<name>, torchvision:<name>, hf:<id|config.json>, "
                                          "path/to/model.onnx or module.path:callable"),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", "-b",
                                             help="Batch size in samples (default 1; ONNX: the file's own)."),
    input_size: Optional[str] = typer.Option(None, "--input-size", help="Per-sample input C,H,W (vision)."),
    seq_len: Optional[int] = typer.Option(None, "--seq-len", help="Sequence length in tokens (hf:)."),
    mode: str = typer.Option("infer", "--mode", help="infer or train."),
    precision: str = typer.Option("fp32", "--precision", help="fp32, amp, fp16 or bf16."),
    optimizer: str = typer.Option("sgd-momentum", "--optimizer",
                                  help="Train mode: sgd, sgd-momentum, adam or adamw."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Rebuild the graph, ignore the cache."),
    save: Optional[str] = typer.Option(None, "--save", help="Also write the graph to this .npz file."),
):
    """Build the model's computation graph and print its size, MACs, FLOPs and operators."""
    from perfcast.cache import get_graph
    from perfcast.frontends import GraphRequest, parse_input_size

    req = GraphRequest(spec=model, batch_size=batch_size, input_size=parse_input_size(input_size),
                       seq_len=seq_len, mode=mode, precision=precision, optimizer=optimizer)
    graph = get_graph(req, use_cache=not no_cache)
    if save:
        graph.save(save)
    s = graph.summary()
    if as_json:
        out.print_json(json.dumps(s))
        return
    t = Table(title=f"{s['model']}  ({s['mode']}, {s['precision']}, batch {s['batch_size']})",
              show_header=False)
    t.add_row("input shapes", ", ".join("×".join(map(str, x)) for x in s["input_shapes"]))
    t.add_row("nodes / edges", f"{s['nodes']:,} / {s['edges']:,}")
    t.add_row("parameters", f"{s['params']:,} ({_fmt_bytes(s['param_bytes'])})")
    t.add_row("MACs (per batch)", _fmt_num(s["macs"]))
    t.add_row("FLOPs (per batch)", _fmt_num(s["flops"]))
    t.add_row("activation bytes", _fmt_bytes(s["activation_bytes"]))
    if s["mode"] == "train":
        t.add_row("phases", ", ".join(f"{k} {v}" for k, v in s["phase_counts"].items()))
    top = sorted(s["op_counts"].items(), key=lambda kv: -kv[1])
    t.add_row("operators", ", ".join(f"{k} {v}" for k, v in top[:12])
              + (f", … ({len(top)} kinds)" if len(top) > 12 else ""))
    t.add_row("unmapped ops", ", ".join(s["unmapped_ops"]) or "none")
    out.print(t)


@app.command()
def devices(as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
    """List the hardware perfcast knows (peak TFLOPS, memory GB, bandwidth GB/s, MIG)."""
    from perfcast.devices import list_devices

    rows = list_devices()
    if as_json:
        out.print_json(json.dumps([d.to_dict() for d in rows]))
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


def _print_summary(summary: dict, as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps(summary))
    else:
        out.print(", ".join(f"{k} {v}" for k, v in summary.items()))


def _progress_bar(disable: bool):
    """A rich progress bar on stderr (hidden for --json)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err, disable=disable)


def _split_list(text: Optional[str], cast=str) -> list:
    """``"1,4, 8"`` → ``[1, 4, 8]`` (commas or spaces)."""
    if not text:
        return []
    try:
        return [cast(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise PerfcastError(f"bad list {text!r}: use comma-separated values like 1,4,8") from None


@app.command()
def collect(
    models: Optional[str] = typer.Option(None, "--models", "-m",
                                         help="Space-separated model specs, e.g. 'timm:resnet18 timm:vit_tiny_patch16_224'."),
    batch_sizes: str = typer.Option("1", "--batch-sizes", help="Comma-separated batch sizes."),
    input_sizes: Optional[str] = typer.Option(None, "--input-sizes",
                                              help="Space-separated C,H,W per sample, e.g. '3,128,128 3,160,160'."),
    seq_lens: Optional[str] = typer.Option(None, "--seq-lens", help="Comma-separated sequence lengths (hf:)."),
    modes: str = typer.Option("infer", "--modes", help="Comma-separated: infer,train."),
    precisions: str = typer.Option("fp32", "--precisions", help="Comma-separated: fp32,amp,bf16."),
    optimizer: str = typer.Option("sgd-momentum", "--optimizer", help="Train mode optimizer."),
    spec: Optional[str] = typer.Option(None, "--spec", help="YAML sweep file (instead of the flags above)."),
    db: str = typer.Option("perfcast-measurements.db", "--db", help="SQLite file or SQLAlchemy URL."),
    device: str = typer.Option("cpu", "--device", help="Registry key of the local device."),
    warmup: Optional[int] = typer.Option(None, "--warmup", help="Warm-up iterations (default 5)."),
    iters: Optional[int] = typer.Option(None, "--iters", help="Timed iterations (default 30)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads for torch (default: torch's)."),
    cpus: Optional[str] = typer.Option(None, "--cpus", help="Pin the measuring process to these CPU ids, e.g. '1'."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds per configuration."),
    cooldown: float = typer.Option(1.0, "--cooldown", help="Seconds of rest between configurations."),
    memory_limit_mb: Optional[float] = typer.Option(None, "--memory-limit-mb",
                                                    help="Kill and record OOM above this RSS (MiB)."),
    repeat: int = typer.Option(0, "--repeat", help="Repeat index (1 = re-measurement for test-retest)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Re-measure failed rows."),
    export: Optional[str] = typer.Option(None, "--export", help="Afterwards write all rows to .parquet/.csv."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
):
    """Measure latency / step time, memory and energy on this machine into a resumable store."""
    from perfcast.devices import get_device
    from perfcast.profiler.collect import CollectSettings, Sweep, load_spec
    from perfcast.profiler.collect import collect as run_collect
    from perfcast.store import MeasurementStore

    options: dict = {}
    if spec:
        sweeps, options = load_spec(spec)
    else:
        if not models:
            raise PerfcastError("give --models (and sweep flags) or --spec FILE")
        sweeps = [Sweep(models=models.split(),
                        batch_sizes=_split_list(batch_sizes, int),
                        input_sizes=input_sizes.split() if input_sizes else [None],
                        seq_lens=_split_list(seq_lens, int) or [None],
                        modes=[m.strip() for m in modes.split(",")],
                        precisions=[p.strip() for p in precisions.split(",")],
                        optimizer=optimizer)]
    device = options.get("device", device)
    get_device(device)  # unknown device: one-line error
    threads = options.get("threads", threads)
    settings = CollectSettings(
        warmup=warmup if warmup is not None else int(options.get("warmup", 5)),
        iters=iters if iters is not None else int(options.get("iters", 30)),
        timeout_s=float(options.get("timeout", timeout)),
        cooldown_s=float(options.get("cooldown", cooldown)),
        memory_limit_mb=options.get("memory_limit_mb", memory_limit_mb),
        cpus=_split_list(cpus, int) or options.get("cpus"),
        retry_failed=retry_failed,
        torch_device="cuda" if get_device(device).kind == "gpu" else "cpu")
    configs = [c for s in sweeps for c in s.configs(device, threads, repeat)]
    store = MeasurementStore(db)
    with _progress_bar(disable=as_json) as prog:
        task = prog.add_task("measuring", total=None)

        def on_progress(i, n, cfg, m):
            prog.update(task, total=n, completed=i,
                        description=f"{cfg.model} b{cfg.batch_size} {cfg.mode}"
                        + (f" → {m.status}" if m is not None else ""))

        counts = run_collect(store, configs, settings, progress=on_progress)
    if export:
        store.export(export)
    _print_summary({"db": db, "configs": len(configs), **counts,
                    "rows_in_store": store.count()}, as_json)


@app.command()
def corpus(
    out_dir: str = typer.Option(..., "--out", help="Corpus directory (graphs/ + index.csv)."),
    families: Optional[str] = typer.Option(None, "--families",
                                           help="Comma-separated timm families (default: all)."),
    variants: Optional[int] = typer.Option(None, "--variants-per-family",
                                           help="At most this many models per family (spread evenly)."),
    input_sizes: str = typer.Option("224", "--input-sizes", help="Comma-separated square sides, e.g. 160,192,224."),
    batch_sizes: str = typer.Option("1", "--batch-sizes", help="Comma-separated batch sizes."),
    modes: str = typer.Option("infer", "--modes", help="infer, train or infer,train."),
    workers: int = typer.Option(2, "--workers", help="Worker processes."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Build at most this many new graphs."),
    timeout: int = typer.Option(300, "--timeout", help="Seconds per graph."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
):
    """Build an unlabeled graph corpus (graphs only) over timm families, sizes, batches, modes."""
    from perfcast.store.corpus import build_corpus, plan

    if workers < 1:
        raise PerfcastError(f"workers must be ≥ 1, got {workers}")
    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    for m in mode_list:
        if m not in ("infer", "train"):
            raise PerfcastError(f"unknown mode {m!r}: use infer or train")
    sizes, batches = _split_list(input_sizes, int), _split_list(batch_sizes, int)
    if any(v <= 0 for v in sizes + batches):
        raise PerfcastError("input sizes and batch sizes must be positive")
    items = plan([f.strip() for f in families.split(",")] if families else None, variants,
                 sizes, batches, mode_list)
    with _progress_bar(disable=as_json) as prog:
        task = prog.add_task("building graphs", total=None)

        def on_progress(i, n, row):
            prog.update(task, total=n, completed=i,
                        description=f"{row['model']} b{row['batch_size']} {row['mode']}"
                        if row else "building graphs")

        counts = build_corpus(items, out_dir, workers=workers, timeout_s=timeout, limit=limit,
                              progress=on_progress)
    _print_summary({"out": out_dir, "planned": len(items), **counts}, as_json)


@app.command()
def memory(
    model: str = typer.Argument(..., help="Model spec (as for inspect)."),
    batch_size: int = typer.Option(1, "--batch-size", "-b", help="Batch size (samples)."),
    input_size: Optional[str] = typer.Option(None, "--input-size", help="Per-sample input C,H,W (vision)."),
    seq_len: Optional[int] = typer.Option(None, "--seq-len", help="Sequence length in tokens (hf:)."),
    mode: str = typer.Option("train", "--mode", help="train or infer."),
    precision: str = typer.Option("fp32", "--precision", help="fp32, amp, fp16 or bf16."),
    optimizer: str = typer.Option("sgd-momentum", "--optimizer", help="sgd, sgd-momentum, adam or adamw."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
):
    """Exact peak of live tensor bytes of a training step or inference pass (MiB), simulated
    under FakeTensor — no device, no weights. Excludes CUDA context, allocator and workspaces."""
    from perfcast.frontends import GraphRequest, parse_input_size
    from perfcast.memory import simulate_memory

    size = parse_input_size(input_size)
    GraphRequest(spec=model, batch_size=batch_size, input_size=size, seq_len=seq_len, mode=mode,
                 precision=precision, optimizer=optimizer).validate()
    est = simulate_memory(model, batch_size=batch_size, input_size=size, seq_len=seq_len,
                          mode=mode, precision=precision, optimizer=optimizer)
    d = est.to_dict()
    if as_json:
        out.print_json(json.dumps(d))
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


def _parse_params(items: Optional[list[str]], names: list[str]) -> dict[str, dict]:
    """``["dippm.epochs=40", "mlp.lr=0.001"]`` → ``{"dippm": {"epochs": 40}, "mlp": {"lr": 0.001}}``
    (values are JSON when they parse as JSON, else strings)."""
    out: dict[str, dict] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        pname, dot, hp = key.strip().partition(".")
        if not sep or not dot or not pname or not hp:
            raise PerfcastError(f"--param {item!r}: use PREDICTOR.KEY=VALUE, e.g. dippm.epochs=40")
        if pname not in names:
            raise PerfcastError(f"--param {item!r}: {pname} is not among the evaluated predictors "
                                f"({', '.join(names)})")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        out.setdefault(pname, {})[hp.strip()] = value
    return out


def _pm(d: dict, key: str, digits: int = 2, std: bool = True) -> str:
    v, s = d.get(key), d.get(f"{key}_std")
    if v is None:
        return "-"
    return f"{v:,.{digits}f}" + (f" ± {s:,.{digits}f}" if std and s is not None else "")


@app.command()
def evaluate(
    task: str = typer.Option(..., "--task", "-t", help="a, b, b-pt291, rtx3090-infer, c-i9, c-i7, "
                                                       "d or e (perfcast.evaluation.tasks)."),
    split: str = typer.Option(..., "--split", "-s", help="random, family-mc or unseen-family."),
    predictors: Optional[str] = typer.Option(
        None, "--predictors", "-p",
        help="Comma-separated predictor names (default: the task's, e.g. dippm,nnlqp,mlp,xgboost,roofline)."),
    seeds: Optional[str] = typer.Option(
        None, "--seeds", help="Comma-separated split seeds (default 1337-1341; unseen-family 1337)."),
    out_dir: str = typer.Option("reports/eval", "--out",
                                help="Report root: writes <out>/<task>/<split>/."),
    workers: int = typer.Option(2, "--workers", help="Worker processes building missing graphs."),
    param: Optional[list[str]] = typer.Option(
        None, "--param", help="Hyper-parameter PREDICTOR.KEY=VALUE (repeatable), e.g. dippm.epochs=40."),
    folds: int = typer.Option(5, "--folds", help="K of the unseen-family split."),
    no_build: bool = typer.Option(
        False, "--no-build",
        help="Do not build missing graphs: records without a graph are dropped (counted)."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Skip the PNG plots."),
    as_json: bool = typer.Option(False, "--json", help="Print the overall metrics as JSON."),
):
    """Fit predictors on model-grouped splits of a task, score the test parts and write a report
    (metrics, per-family tables, predictions, plots, summary.md) under <out>/<task>/<split>/."""
    from perfcast.evaluation import SPLITS, get_task
    from perfcast.evaluation import evaluate as run_evaluate
    from perfcast.evaluation.run import check_predictors

    tsk = get_task(task)
    if split not in SPLITS:
        raise PerfcastError(f"unknown split {split!r} (known: {', '.join(SPLITS)})")
    if workers < 1:
        raise PerfcastError(f"workers must be ≥ 1, got {workers}")
    seed_list = _split_list(seeds, int)
    names = ([p.strip() for p in predictors.split(",") if p.strip()] if predictors
             else list(tsk.default_predictors))
    hp = _parse_params(param, names)
    specs = [(n, hp.get(n, {})) for n in names]
    # one-line errors (unknown predictor / hyper-parameter) before any work
    check_predictors(specs, tsk.targets, explicit=predictors is not None)
    with _progress_bar(disable=as_json) as prog:
        bars: dict[str, int] = {}

        def on_progress(stage: str, i: int, n: int) -> None:
            kind, _, what = stage.partition(" ")
            bar = {"graphs": "data", "features": "data"}.get(kind, kind)
            if bar not in bars:
                bars[bar] = prog.add_task(bar, total=None)
            desc = {"graphs": "building graphs", "features": "features"}.get(
                kind, f"{kind} {what}".strip())
            prog.update(bars[bar], total=n, completed=i, description=desc)

        res = run_evaluate(tsk, split, specs, seed_list or None, out_dir, on_progress,
                           build_missing=not no_build, workers=workers, k=folds,
                           strict=predictors is not None, plots=not no_plots)
    for p, msg in res.failures.items():
        err.print(f"warning: {p} failed ({msg}); left out of the report", highlight=False,
                  markup=False)
    if as_json:
        from perfcast.evaluation.report import run_json

        out.print_json(json.dumps({**run_json(res), "out": str(res.out_dir)}))
        return
    for t in res.targets:
        tb = Table(title=f"task {res.task_name} · {split} · {t} "
                         f"(mean ± std over {len(res.seeds)} seed(s))")
        for col in ("predictor", "n", "MAPE %", "fam-avg MAPE %", "RMSE", "Kendall τ", "Acc(10%) %"):
            tb.add_column(col)
        for d in res.overall():
            if d["target"] == t:
                tb.add_row(d["predictor"], _pm(d, "n", 0, std=False), _pm(d, "mape"),
                           _pm(d, "mape_macro"), _pm(d, "rmse", 1), _pm(d, "kendall", 3),
                           _pm(d, "acc10", 1))
        out.print(tb)
    out.print(f"records {len(res.data.fs):,}, models {len(set(res.groups.tolist())):,}, "
              f"families {len(set(res.data.fs.families().tolist())):,}; report: {res.out_dir}")


@app.command()
def predict(
    model: str = typer.Argument(..., help="timm name, timm:<name>, torchvision:<name>, hf:<id|config.json>, "
                                          "path/to/model.onnx or module.path:callable"),
    device: str = typer.Option(..., "--device", "-d", help="Device key (perfcast devices)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", "-b",
                                             help="Batch size (default 1 for infer, 32 for train)."),
    input_size: Optional[str] = typer.Option(None, "--input-size", help="Per-sample input shape C,H,W."),
    seq_len: Optional[int] = typer.Option(None, "--seq-len", help="Sequence length (text models)."),
    mode: str = typer.Option("infer", "--mode", help="infer or train."),
    precision: Optional[str] = typer.Option(
        None, "--precision", help="fp32, amp, fp16 or bf16 (default: the precision measured on that "
                                  "device and mode, else fp32)."),
    optimizer: str = typer.Option("sgd-momentum", "--optimizer", help="Training optimizer."),
    predictor: Optional[str] = typer.Option(
        None, "--predictor", help="Shipped predictor kind (dippm, xgboost, roofline, …) or the "
                                  "directory of a predictor saved by perfcast train."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Rebuild the graph."),
):
    """Forecast time per batch (ms), throughput, peak memory (MiB) and energy (J) of MODEL on a
    device. Devices without labeled data fall back to the roofline and the memory simulation."""
    from perfcast.api import predict as api_predict

    if batch_size is not None and batch_size <= 0:
        raise PerfcastError(f"batch size must be a positive integer, got {batch_size}")
    p = api_predict(model, device=device, batch_size=batch_size, input_size=input_size,
                    seq_len=seq_len, mode=mode, precision=precision, optimizer=optimizer,
                    predictor=predictor, use_cache=not no_cache, overlap_simulation=True)
    if as_json:
        out.print_json(json.dumps(p.to_dict()))
        return
    t = Table(title=f"{p.model} on {p.device} — {p.mode}, {p.precision}, batch {p.batch_size}",
              show_header=True)
    t.add_column("quantity")
    t.add_column("prediction", justify="right")
    t.add_column("predictor")

    def val(v, fmt):
        return "—" if v is None else fmt.format(v)

    t.add_row("time per batch", val(p.time_ms, "{:,.3f} ms"), p.predictor.get("time_ms", "—"))
    t.add_row("throughput", val(p.throughput_samples_per_s, "{:,.1f} samples/s"), "")
    t.add_row("peak memory", val(p.memory_mb, "{:,.0f} MiB"), p.predictor.get("memory_mb", "—"))
    t.add_row("energy per batch", val(p.energy_j, "{:,.3f} J"), p.predictor.get("energy_j", "—"))
    t.add_row("mean power", val(p.power_w, "{:,.1f} W"), "")
    out.print(t)
    for target, prov in p.trained_on.items():
        if isinstance(prov, dict) and prov.get("records"):
            src = ", ".join(prov.get("source", [])[:3])
            n = prov["records"] + prov.get("early_stopping_records", 0)
            out.print(f"[dim]{target}: trained on {n:,} records "
                      f"({prov.get('families', '?')} families){': ' + src if src else ''}[/dim]",
                      highlight=False)
    for n in p.notes:
        out.print(f"[yellow]note:[/yellow] {n}", highlight=False)


_MODEL_HELP = ("timm name, timm:<name>, torchvision:<name>, hf:<id|config.json>, "
               "path/to/model.onnx or module.path:callable")
# options shared by the decision commands (typer reads the Annotated metadata)
DeviceOpt = Annotated[str, typer.Option("--device", "-d", help="Device key (perfcast devices).",
                                         show_default=False)]
BatchOpt = Annotated[Optional[int], typer.Option("--batch-size", "-b", help="Batch size.")]
InputSizeOpt = Annotated[Optional[str], typer.Option("--input-size",
                                                     help="Per-sample input C,H,W.")]
SeqLenOpt = Annotated[Optional[int], typer.Option("--seq-len",
                                                  help="Sequence length (text models).")]
ModeOpt = Annotated[str, typer.Option("--mode", help="infer or train.")]
PrecisionOpt = Annotated[Optional[str], typer.Option(
    "--precision", help="fp32, amp, fp16 or bf16 (default: the precision measured on that device "
                        "and mode, else fp32).")]
OptimizerOpt = Annotated[str, typer.Option("--optimizer", help="Training optimizer.")]
PredictorOpt = Annotated[Optional[str], typer.Option("--predictor",
                                                     help="Predictor (see perfcast predict).")]
OverheadOpt = Annotated[Optional[float], typer.Option(
    "--overhead-mb", help="Runtime overhead added to simulated GPU memory (MiB).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _model_kwargs(input_size: Optional[str], seq_len: Optional[int], optimizer: str,
                  predictor: Optional[str]) -> dict:
    return {"input_size": input_size, "seq_len": seq_len, "optimizer": optimizer,
            "predictor": predictor, "overlap_simulation": True}


def _val(v, fmt: str) -> str:
    return "—" if v is None else fmt.format(v)


def _print_notes(notes: list[str]) -> None:
    for n in dict.fromkeys(notes):  # keep order, drop repeats
        out.print(f"[yellow]note:[/yellow] {n}", highlight=False)


@app.command()
def mig(
    model: Optional[str] = typer.Argument(None, help=_MODEL_HELP + " (optional with --memory-mb)"),
    device: str = typer.Option("a100-40gb", "--device", "-d",
                               help="MIG GPU: a100-40gb, a100-80gb, h100-sxm, h100-pcie, h200 …"),
    batch_size: BatchOpt = None,
    input_size: InputSizeOpt = None,
    seq_len: SeqLenOpt = None,
    mode: ModeOpt = "infer",
    precision: PrecisionOpt = None,
    optimizer: OptimizerOpt = "sgd-momentum",
    predictor: PredictorOpt = None,
    latency_slo_ms: Optional[float] = typer.Option(
        None, "--latency-slo-ms", help="Also require time per batch on the slice ≤ this (ms)."),
    margin: float = typer.Option(0.1, "--margin", help="Error margin on memory (0.1 = 10 %)."),
    all_profiles: bool = typer.Option(
        False, "--all-profiles", help="Choose among every profile, not only DIPPM's standard "
                                      "even partitions (1g/2g/3g/7g)."),
    memory_mb: Optional[float] = typer.Option(
        None, "--memory-mb", help="Use this peak memory (MiB) instead of predicting it."),
    overhead_mb: OverheadOpt = None,
    as_json: JsonOpt = False,
):
    """Recommend the smallest MIG profile whose usable memory holds the predicted peak (DIPPM's
    rule, with an error margin and an optional latency SLO)."""
    from perfcast.decisions.mig import recommend_mig

    a = recommend_mig(model, device=device, batch_size=batch_size, mode=mode,
                      precision=precision, latency_slo_ms=latency_slo_ms, margin=margin,
                      all_profiles=all_profiles, overhead_mb=overhead_mb, memory_mb=memory_mb,
                      **(_model_kwargs(input_size, seq_len, optimizer, predictor)
                         if model else {}))
    if as_json:
        out.print_json(json.dumps(a.to_dict()))
        return
    t = Table(title=f"{a.model} on {a.device} — {a.mode}, {a.precision}, batch {a.batch_size}: "
                    f"memory {_val(a.memory_mb, '{:,.0f}')} MiB (+{a.margin:.0%} → "
                    f"{_val(a.required_mb, '{:,.0f}')} MiB)")
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
        t.add_row(r["profile"], _val(r["usable_mb"], "{:,.0f}"), _val(r["headroom_mb"], "{:,.0f}"),
                  _val(r["slice_time_ms"], "{:,.2f} ms"), r["verdict"])
    out.print(t)
    out.print(f"profile: [bold]{a.profile or 'none'}[/bold]", highlight=False)
    _print_notes(a.notes)


@app.command()
def fit(
    model: str = typer.Argument(..., help=_MODEL_HELP),
    device: DeviceOpt = ...,
    mode: ModeOpt = "train",
    precision: PrecisionOpt = None,
    input_size: InputSizeOpt = None,
    seq_len: SeqLenOpt = None,
    optimizer: OptimizerOpt = "sgd-momentum",
    predictor: PredictorOpt = None,
    margin: float = typer.Option(0.1, "--margin", help="Safety margin on memory (0.1 = 10 %)."),
    mig_profile: Optional[str] = typer.Option(None, "--mig-profile",
                                              help="Fit in this MIG slice (e.g. 3g.20gb)."),
    overhead_mb: OverheadOpt = None,
    limit: int = typer.Option(65536, "--limit", help="Largest batch searched."),
    as_json: JsonOpt = False,
):
    """Largest batch whose predicted peak memory (+ margin) fits the device or a MIG slice, with
    the predicted time and throughput at that batch."""
    from perfcast.decisions.fit import max_batch_size

    r = max_batch_size(model, device=device, mode=mode, precision=precision, margin=margin,
                       mig_profile=mig_profile, overhead_mb=overhead_mb, limit=limit,
                       **_model_kwargs(input_size, seq_len, optimizer, predictor))
    if as_json:
        out.print_json(json.dumps(r.to_dict()))
        return
    where = f"{r.device}{' ' + r.mig_profile if r.mig_profile else ''}"
    t = Table(title=f"{r.model} on {where} — {r.mode}, {r.precision}", show_header=False)
    t.add_row("largest batch that fits", f"[bold]{_val(r.max_batch_size, '{:,}')}[/bold]")
    t.add_row("predicted memory at it", f"{_val(r.memory_mb, '{:,.0f} MiB')} "
              f"(× {1 + r.margin:.2f} ≤ {r.capacity_mb:,.0f} MiB)")
    t.add_row("memory at the next batch", _val(r.next_memory_mb, "{:,.0f} MiB"))
    t.add_row("time per batch", _val(r.time_ms, "{:,.2f} ms") + f"  ({r.predictor.get('time_ms', '—')})")
    t.add_row("throughput", _val(r.throughput_samples_per_s, "{:,.1f} samples/s"))
    t.add_row("predictions made", str(r.evaluations))
    out.print(t)
    _print_notes(r.notes)


@app.command()
def cost(
    model: Optional[str] = typer.Argument(None, help=_MODEL_HELP + " (optional with --time-ms)"),
    device: DeviceOpt = ...,
    iterations: Optional[int] = typer.Option(None, "--iterations", help="Batches (steps) to run."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Epochs (with --dataset-size)."),
    dataset_size: Optional[int] = typer.Option(None, "--dataset-size", help="Samples per epoch."),
    batch_size: BatchOpt = None,
    mode: ModeOpt = "train",
    precision: PrecisionOpt = None,
    input_size: InputSizeOpt = None,
    seq_len: SeqLenOpt = None,
    optimizer: OptimizerOpt = "sgd-momentum",
    predictor: PredictorOpt = None,
    provider: Optional[str] = typer.Option(None, "--provider", help="aws, gcp, azure, … (prices.json)."),
    price_per_hour: Optional[float] = typer.Option(None, "--price-per-hour",
                                                   help="USD per GPU-hour (overrides the table)."),
    region: Optional[str] = typer.Option(None, "--region",
                                         help="Country (FRA, Germany) or cloud region (aws:us-east-1)."),
    time_ms: Optional[float] = typer.Option(None, "--time-ms",
                                            help="Time per batch (ms) instead of predicting it."),
    power_w: Optional[float] = typer.Option(None, "--power-w", help="Mean power (W) for the energy."),
    pue: float = typer.Option(1.0, "--pue", help="Data-centre PUE multiplying the energy."),
    as_json: JsonOpt = False,
):
    """Hours, USD, kWh and kg CO2e of a job: predicted (or given) time per batch × iterations,
    priced per GPU-hour, energy from predicted energy or time × power (an estimate, said so)."""
    from perfcast.decisions.cost import estimate_cost

    c = estimate_cost(model, device=device, iterations=iterations, epochs=epochs,
                      dataset_size=dataset_size, batch_size=batch_size, mode=mode,
                      precision=precision, optimizer=optimizer, input_size=input_size,
                      seq_len=seq_len, provider=provider, price_per_hour=price_per_hour,
                      region=region, time_ms=time_ms, power_w=power_w, pue=pue,
                      predictor=predictor)
    if as_json:
        out.print_json(json.dumps(c.to_dict()))
        return
    t = Table(title=f"{c.model or 'job'} on {c.device} — {c.iterations:,} × batch {c.batch_size}",
              show_header=False)
    t.add_row("time per batch", f"{c.time_ms_per_iteration:,.2f} ms")
    t.add_row("duration", f"[bold]{c.hours:,.2f} h[/bold]")
    t.add_row("price", _val(c.usd_per_gpu_hour, "{:,.3f} USD/GPU-h"))
    t.add_row("cost", f"[bold]{_val(c.usd, '{:,.2f} USD')}[/bold]")
    t.add_row("power", _val(c.power_w, "{:,.0f} W"))
    t.add_row("energy", _val(c.energy_kwh, "{:,.2f} kWh"))
    t.add_row("carbon intensity", _val(c.carbon_g_per_kwh, "{:,.0f} g CO2e/kWh"))
    t.add_row("emissions", f"[bold]{_val(c.kg_co2e, '{:,.2f} kg CO2e')}[/bold]")
    out.print(t)
    for k, v in c.sources.items():
        out.print(f"[dim]{k}: {v}[/dim]", highlight=False)
    _print_notes(c.notes)


@app.command()
def rank(
    model: str = typer.Argument(..., help=_MODEL_HELP),
    devices: str = typer.Option("all", "--devices", help="all or a comma list of device keys."),
    objective: str = typer.Option("time", "--objective", help="time, cost or energy."),
    batch_size: BatchOpt = None,
    mode: ModeOpt = "infer",
    precision: Optional[str] = typer.Option(
        None, "--precision", help="fp32, amp, fp16 or bf16 (default: each device's measured one)."),
    input_size: InputSizeOpt = None,
    seq_len: SeqLenOpt = None,
    optimizer: OptimizerOpt = "sgd-momentum",
    iterations: int = typer.Option(1000, "--iterations", help="Batches the cost/energy are for."),
    provider: Optional[str] = typer.Option(None, "--provider", help="Price table provider."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Also write a PNG bar chart here."),
    as_json: JsonOpt = False,
):
    """Rank devices for MODEL by time per batch, cost or energy (with memory fit)."""
    from perfcast.decisions.rank import rank as do_rank

    r = do_rank(model, devices=devices, objective=objective, batch_size=batch_size, mode=mode,
                precision=precision, iterations=iterations, provider=provider,
                **_model_kwargs(input_size, seq_len, optimizer, None))
    if plot:
        r.plot(plot)
    if as_json:
        out.print_json(json.dumps({**r.to_dict(), **({"plot": plot} if plot else {})}))
        return
    t = Table(title=f"{r.model} — {r.mode}, batch {r.batch_size}, by {r.objective} "
                    f"(USD, kWh for {r.iterations:,} batches; time from: learned·records "
                    f"trained on, or roofline)", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("#", "device", "ms/batch", "time from", "MiB", "fits", "USD", "kWh"):
        t.add_column(col, justify="left" if col in ("device", "time from", "fits") else "right",
                     no_wrap=True)
    for d in r.devices:
        src = d.time_source + (f"·{d.trained_records:,}" if d.trained_records else "")
        t.add_row(str(d.rank), f"{d.device} {d.precision}", _val(d.time_ms, "{:,.1f}"), src,
                  _val(d.memory_mb, "{:,.0f}"),
                  {True: "yes", False: "[red]no[/red]", None: "—"}[d.fits],
                  _val(d.usd, "{:,.2f}"), _val(d.energy_kwh, "{:.3g}"))
    out.print(t)
    if plot:
        out.print(f"chart: {plot}")
    _print_notes(r.notes)


@app.command()
def pretrain(
    corpus_dir: str = typer.Option(..., "--corpus", help="Unlabeled corpus directory (perfcast corpus --out)."),
    out_dir: str = typer.Option(..., "--out", help="Encoder directory (encoder.json + encoder.safetensors)."),
    method: str = typer.Option("gae", "--method", help="gae (TraPPM) or graphmae."),
    hidden: int = typer.Option(128, "--hidden", help="Embedding width c (TraPPM: 512)."),
    epochs: int = typer.Option(10, "--epochs", help="Total epochs (a resumed run continues to this)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Graphs per minibatch."),
    lr: float = typer.Option(5e-4, "--lr", help="Adam learning rate."),
    dropout: Optional[float] = typer.Option(
        None, "--dropout", help="Encoder dropout (default: 0.5 for gae as TraPPM, 0.2 graphmae)."),
    final_act: bool = typer.Option(
        True, "--final-act/--linear-out",
        help="BatchNorm → ReLU → dropout after the last layer too (TraPPM) or a linear output."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Use at most this many graphs."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    resume: bool = typer.Option(True, "--resume/--no-resume",
                                help="Continue from the checkpoint in --out (default) or start over."),
    workers: int = typer.Option(2, "--workers", help="Processes reading the corpus."),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch threads (default: torch's)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
):
    """Pre-train a graph encoder (GAE or GraphMAE) on an unlabeled corpus for the trappm
    predictor; checkpointed every epoch, resumable."""
    from perfcast.pretrain import pretrain as run_pretrain

    if workers < 1:
        raise PerfcastError(f"workers must be ≥ 1, got {workers}")
    with _progress_bar(disable=as_json) as prog:
        task = prog.add_task("reading corpus", total=None)

        def on_progress(i, n, info):
            prog.update(task, total=n, completed=i,
                        description=f"epoch {info['epoch']}/{info['epochs']} loss {info['loss']:.4f}"
                        if info else "reading corpus")

        res = run_pretrain(corpus_dir, out_dir, method=method, hidden=hidden, epochs=epochs,
                           batch_size=batch_size, lr=lr, seed=seed, limit=limit, resume=resume,
                           dropout=dropout, final_act=final_act, n_threads=threads,
                           workers=workers, progress=on_progress)
    summary = {"out": res.out, "method": res.method, "epochs": res.epochs,
               "epochs_run": res.epochs_run,
               "final_loss": round(res.final_loss, 5) if res.final_loss is not None else None,
               "seconds": res.seconds, "seconds_run": res.seconds_run, "graphs": res.graphs,
               "nodes": res.nodes, "encoder_mb": res.encoder_mb}
    if as_json:
        out.print_json(json.dumps(summary))
        return
    t = Table(title=f"{res.method} encoder → {res.out}", show_header=False)
    t.add_row("epochs done", f"{res.epochs} ({res.epochs_run} in this run)")
    t.add_row("final loss", "-" if res.final_loss is None else f"{res.final_loss:.5f}")
    t.add_row("training time", f"{res.seconds:,.1f} s ({res.seconds_run:,.1f} s in this run)")
    t.add_row("corpus", f"{res.graphs:,} graphs, {res.nodes:,} nodes")
    t.add_row("encoder.safetensors", f"{res.encoder_mb:.2f} MB")
    out.print(t)


@app.command()
def train(
    recipe: Optional[str] = typer.Option(
        None, "--recipe", help="Train a recipe's models (e.g. default: the shipped predictors)."),
    init_from: Optional[str] = typer.Option(
        None, "--init-from", help="Fine-tune this saved predictor (directory) or shipped model id."),
    data: Optional[str] = typer.Option(
        None, "--data", help="Labeled records: measurement store (.db / URL) or CSV/Parquet in the "
                             "dataset schema (model, device, mode, precision, batch_size, time_ms …)."),
    predictor: str = typer.Option("xgboost", "--predictor", help="Predictor to train on --data."),
    out_dir: Optional[str] = typer.Option(None, "--out", help="Output directory."),
    device: Optional[str] = typer.Option(None, "--device", help="Only records of this device."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Epochs (learned GNN/MLP predictors)."),
    workers: int = typer.Option(2, "--workers", help="Worker processes building graphs."),
    only: Optional[str] = typer.Option(None, "--only", help="Recipe: comma-separated entry ids."),
    transfer: str = typer.Option(
        "auto", "--transfer", help="--init-from: auto (the best on held-out models), finetune "
                                   "(train every weight further), recalibrate (map the "
                                   "prediction, log y = a + b·log ŷ) or scratch (same kind, "
                                   "new weights)."),
    list_models: bool = typer.Option(False, "--list", help="List the shipped models and exit."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
):
    """Train predictors: `--recipe default` rebuilds the shipped models; `--data D --out DIR`
    trains a predictor on your records; `--init-from M --data D --out DIR` fine-tunes a saved or
    shipped predictor on your measurements (a few dozen are enough to adapt it)."""
    from perfcast.predictors import train as T
    from perfcast.predictors.shipped import manifest

    if list_models:
        rows = manifest()
        if as_json:
            out.print_json(json.dumps(rows))
            return
        t = Table("device", "mode", "precision", "targets", "predictor", "records")
        t.add_column("id (for --init-from)", overflow="fold")
        for e in rows:
            t.add_row(e["device"], e["mode"], e["precision"], ",".join(e["targets"]),
                      e["predictor"], str(e.get("trained_on", {}).get("records", "")), e["id"])
        out.print(t)
        return
    if workers < 1:
        raise PerfcastError(f"workers must be ≥ 1, got {workers}")
    if epochs is not None and epochs <= 0:
        raise PerfcastError(f"epochs must be positive, got {epochs}")
    with _progress_bar(disable=as_json) as prog:
        bars: dict[str, int] = {}

        def on_progress(stage: str, i: int, n: int) -> None:
            if stage not in bars:
                bars[stage] = prog.add_task(stage, total=None)
            prog.update(bars[stage], total=n, completed=i)

        if recipe:
            if init_from or data:
                raise PerfcastError("--recipe trains from the public data; drop --init-from/--data")
            res = T.train_recipe(recipe, out_dir=out_dir, workers=workers,
                                 only=_split_list(only) or None, progress=on_progress)
            summary = {"recipe": recipe, "out": str(res["out"]), "models": len(res["models"]),
                       "seconds": res["seconds"]}
        elif init_from:
            if not data or not out_dir:
                raise PerfcastError("--init-from needs --data (your measurements) and --out DIR")
            pred, fs = T.fine_tune(init_from, data, out_dir, device=device, epochs=epochs,
                                   workers=workers, transfer=transfer, progress=on_progress)
            tr = pred.trained_on_["transfer"]
            summary = {"predictor": pred.name, "init_from": init_from, "records": len(fs),
                       "targets": pred.targets_, "transfer": tr["recipe"],
                       **({"held_out_mape": tr["held_out_mape"]} if "held_out_mape" in tr else {}),
                       "out": out_dir}
        elif data:
            if not out_dir:
                raise PerfcastError("--data needs --out DIR (where the trained predictor goes)")
            df = T.load_training_data(data)
            if device:
                df = df[df["device"].astype(str) == device]
            params = {"epochs": epochs} if epochs else None
            pred, fs = T.fit_frame(df, predictor, params=params, workers=workers,
                                   progress=on_progress)
            pred.save(out_dir)
            summary = {"predictor": pred.name, "records": len(fs), "targets": pred.targets_,
                       "out": out_dir}
        else:
            raise PerfcastError("give --recipe NAME, --data D --out DIR, or --init-from M --data D "
                                "--out DIR (see perfcast train --help)")
    _print_summary(summary, as_json)


@app.command()
def version():
    """Print perfcast's version."""
    from perfcast._version import __version__

    out.print(__version__)


def _terminate(signum, frame):  # noqa: ANN001
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one-line errors, documented exit codes."""
    import signal

    try:
        signal.signal(signal.SIGTERM, _terminate)  # `kill` cleans up like Ctrl-C
    except ValueError:  # not the main thread
        pass
    try:
        rc = app(args=argv, standalone_mode=False)  # typer returns Exit codes (130 on Ctrl-C)
        if rc == 130:
            err.print("interrupted", highlight=False)
        return rc if isinstance(rc, int) else 0
    except PerfcastError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False, markup=True, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("interrupted", highlight=False)
        return 130
    except SystemExit as exc:
        return int(exc.code or 0)
    except Exception as exc:  # click usage errors and anything unexpected
        import click

        # typer ≥ 0.20 vendors its own copy of click (typer._click): check both
        aborts, usage = (click.exceptions.Abort,), (click.ClickException,)
        try:
            from typer import exceptions as _te
            from typer._click import exceptions as _tce

            aborts += tuple(c for c in (getattr(_te, "Abort", None),) if c)
            usage += (_tce.ClickException,)
        except ImportError:
            pass
        if isinstance(exc, aborts):
            err.print("interrupted", highlight=False)
            return 130
        if isinstance(exc, usage):
            err.print(f"error: {exc.format_message()}", highlight=False, markup=False, soft_wrap=True)
            return 2
        if os.environ.get("PERFCAST_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        err.print(f"internal error: {type(exc).__name__}: {first[:300]} "
                  "(set PERFCAST_DEBUG=1 for the traceback)", highlight=False, markup=False,
                  soft_wrap=True)
        return 1


def _entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    _entry()
