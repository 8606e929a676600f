"""What every ``perfcast`` command shares: the two consoles, the number formatters, list
parsing, the summary / notes printers, the one progress adapter of the long commands and the
options used by more than one command — each defined once here as an ``Annotated`` alias.

A command declares ``device: Device`` or ``batch_size: BatchSize = None``; the alias holds the
option's names and help, the command's signature its default. Options whose meaning differs
between commands (``--out``, ``--limit``, ``--epochs`` …) stay with their command.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from perfcast.errors import PerfcastError
from perfcast.jsonout import strict_json
from perfcast.workload import (
    DEFAULT_ENGINE,
    DEFAULT_OPTIMIZER,
    ENGINES,
    FLASH_ATTENTION,
    GENERATE_PRECISIONS,
    GRAPH_MODES,
    HF_DEFAULT_OPTIMIZER,
    LLAMA_CPP_N_BATCH,
    LLAMA_CPP_N_UBATCH,
    MODES,
    OPTIMIZERS,
    PRECISIONS,
    PREDICTOR_KINDS,
    RECOMPUTE,
    RISKS,
    SCHEDULES,
    TF32_MODES,
    TRANSFER_RECIPES,
    ZERO_STAGES,
)

out = Console()
err = Console(stderr=True)

#: Help panels of ``perfcast --help`` (one per audience).
PANEL_PREDICT = "Predict & decide"
PANEL_DATA = "Data & measurement"
PANEL_RESEARCH = "Research"


# --------------------------------------------------------------------------- formatting
def _or(values: tuple[str, ...]) -> str:
    """``("a", "b", "c")`` → ``"a, b or c"``."""
    return ", ".join(values[:-1]) + " or " + values[-1] if len(values) > 1 else values[0]


def fmt_num(x: float) -> str:
    """``1.8e9`` → ``"1.800 G"``."""
    for unit, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3f} {unit}"
    return f"{x:g}"


def fmt_bytes(x: float) -> str:
    return f"{x / 2**20:,.1f} MiB"


def val(v, fmt: str) -> str:
    """``fmt.format(v)``, or ``—`` when ``v`` is ``None``."""
    return "—" if v is None else fmt.format(v)


def split_list(text: str | None, cast=str) -> list:
    """``"1,4, 8"`` → ``[1, 4, 8]`` (commas or spaces)."""
    if not text:
        return []
    try:
        return [cast(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise PerfcastError(f"bad list {text!r}: use comma-separated values like 1,4,8") from None


def check_workers(workers: int) -> None:
    if workers < 1:
        raise PerfcastError(f"workers must be ≥ 1, got {workers}")


def examples(*commands: str) -> str:
    """A command's epilog: ``Examples:`` and one command per line (``perfcast … --help`` shows
    it; tests/test_cli_help.py parses every one against the command's options)."""
    return "Examples:\n\n" + "\n\n".join(commands)


# --------------------------------------------------------------------------- printers
def print_json(obj) -> None:
    """Print ``obj`` as strict JSON (:func:`strict_json`)."""
    out.print_json(strict_json(obj))


def print_summary(summary: dict, as_json: bool) -> None:
    """A run's summary: JSON, or one ``key value, …`` line."""
    if as_json:
        print_json(summary)
    else:
        out.print(", ".join(f"{k} {v}" for k, v in summary.items()))


def print_notes(notes: list[str]) -> None:
    for n in dict.fromkeys(notes):  # keep order, drop repeats
        out.print(f"[yellow]note:[/yellow] {n}", highlight=False)


# --------------------------------------------------------------------------- progress
class StageProgress:
    """The progress display of every long command: a rich progress bar on stderr (hidden with
    ``--json``) with one bar per named stage. Use as a context manager::

        with StageProgress(hidden=as_json) as prog:
            prog.start("measuring")                            # show a bar before any callback
            run(progress=lambda i, n, cfg: prog.update("measuring", i, n, cfg.model))
            run(progress=prog.stages)                          # callbacks (stage, i, n)
    """

    def __init__(self, hidden: bool):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                                  disable=hidden)
        self._bars: dict[str, int] = {}

    def __enter__(self) -> StageProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None and not self._progress.disable:
            # an error: its one line alone — no half-done bar above it, and not the empty line
            # rich's Progress.stop prints on a non-interactive stderr
            for task in self._bars.values():
                self._progress.remove_task(task)
            self._progress.live.transient = True
            self._progress.live.stop()
            return
        self._progress.__exit__(*exc)

    def start(self, stage: str) -> None:
        """Show the bar of ``stage`` (total unknown yet)."""
        if stage not in self._bars:
            self._bars[stage] = self._progress.add_task(stage, total=None)

    def update(self, stage: str, i: int, n: int | None,
               description: str | None = None) -> None:
        """``i`` of ``n`` done in ``stage``; ``description`` replaces the bar's label."""
        self.start(stage)
        self._progress.update(self._bars[stage], total=n, completed=i,
                              **({"description": description} if description else {}))

    def stages(self, stage: str, i: int, n: int) -> None:
        """The ``progress(stage, i, n)`` callback of training and evaluation: a bar per stage."""
        self.update(stage, i, n)


# --------------------------------------------------------------------------- shared options
# Every option with a fixed set of values states them in its help, generated from the one set
# in perfcast.workload (tests/test_cli_help.py compares each help text with those sets).
MODEL_HELP = ("timm name, timm:<name>, torchvision:<name>, hf:<id|config.json>, "
              "path/to/model.onnx or module.path:callable")

Model = Annotated[str, typer.Argument(help=MODEL_HELP, show_default=False)]


def optional_model(alternative: str):
    """The model argument of a command that can do without it given ``alternative``."""
    return Annotated[str | None, typer.Argument(
        help=f"{MODEL_HELP} (optional with {alternative})", show_default=False)]


def choices(values) -> str:
    """The allowed values as help text: ``("a", "b", "c")`` → ``"a, b or c"``."""
    return _or(tuple(str(v) for v in values))


def check_choice(option: str, value, allowed, command: str) -> None:
    """Refuse ``value`` outside ``allowed`` with the command's one-line error (exit 2) — for
    options whose command takes fewer values than the request does (``--mode generate``)."""
    if value is not None and value not in allowed:
        where = (" (LLM serving: perfcast predict, fit, cost and plan --mode generate)"
                 if option == "--mode" and value == "generate" else "")
        raise PerfcastError(f"perfcast {command} takes {option} {choices(allowed)}, not "
                            f"{value!r}{where}")


#: What each mode runs (the --mode help).
MODE_MEANING = {"infer": "one forward pass",
                "train": "one training step (forward, loss, backward, optimizer)",
                "generate": "an LLM serving a batch of requests (hf: models)"}


def mode_help(modes: tuple[str, ...]) -> str:
    """``infer (one forward pass) or train (…)`` for the modes a command takes."""
    return "What runs: " + choices([f"{m} ({MODE_MEANING[m]})" for m in modes]) + "."


def precision_help(modes: tuple[str, ...]) -> str:
    text = (f"{choices(PRECISIONS)} (amp: float16 autocast; default: the precision measured on "
            f"that device and mode, else fp32)")
    if "generate" in modes:
        text += (f"; --mode generate: {choices(GENERATE_PRECISIONS)} (int8 / int4: weight-only; "
                 f"the upper-case ones are llama.cpp's GGUF formats; default fp16)")
    return text + "."


Device = Annotated[str, typer.Option("--device", "-d", help="Device: a registry key (perfcast "
                                                           "devices lists them) or the JSON "
                                                           "spec file of a GPU.",
                                     show_default=False)]
BatchSize = Annotated[int | None, typer.Option(
    "--batch-size", "-b", help="Samples per batch (default: 1, or 32 for a predicted training "
                               "step; an ONNX file's own batch); --mode generate: concurrent "
                               "requests, in every engine.")]
InputSize = Annotated[str | None, typer.Option(
    "--input-size", help="Per-sample input shape C,H,W (vision models; one number: a 1-d shape).")]
SeqLen = Annotated[int | None, typer.Option(
    "--seq-len", help="Sequence length in tokens (text models, hf:).")]
#: --mode of the commands taking every mode (predict, fit, cost).
Mode = Annotated[str, typer.Option("--mode", help=mode_help(MODES))]
#: --mode of the commands over a model's graph only (no generate).
GraphMode = Annotated[str, typer.Option("--mode", help=mode_help(GRAPH_MODES))]
Precision = Annotated[str | None, typer.Option("--precision", help=precision_help(MODES))]
GraphPrecision = Annotated[str | None, typer.Option("--precision",
                                                    help=precision_help(GRAPH_MODES))]
# --mode generate (one Workload with the other modes: perfcast.workload)
InputLen = Annotated[int | None, typer.Option(
    "--input-len", help="--mode generate: prompt tokens per request.")]
OutputLen = Annotated[int | None, typer.Option(
    "--output-len", help="--mode generate: generated tokens per request.")]
Tf32 = Annotated[str, typer.Option(
    "--tf32", help=f"How fp32 matmuls and convolutions run on GPUs with TF32 units (Ampere and "
                   f"newer): {choices(TF32_MODES)}. default = PyTorch's defaults (convolutions "
                   f"TF32, matmuls FP32); on = NGC containers / "
                   f"set_float32_matmul_precision('high'); off = NVIDIA_TF32_OVERRIDE=0.")]
Engine = Annotated[str | None, typer.Option(
    "--engine", "--framework", help=f"--mode generate: serving engine, {choices(ENGINES)} "
                                    f"(default {DEFAULT_ENGINE}).")]
NBatch = Annotated[int | None, typer.Option(
    "--n-batch", help=f"--engine llama.cpp: its logical batch n_batch, tokens (llama-bench -b; "
                      f"default {LLAMA_CPP_N_BATCH:,}). The prompt runs in passes of "
                      f"min(n_batch, n_ubatch) tokens.", show_default=False)]
NUBatch = Annotated[int | None, typer.Option(
    "--n-ubatch", help=f"--engine llama.cpp: its physical batch n_ubatch, tokens (llama-bench "
                       f"-ub; ≤ n_batch; default {LLAMA_CPP_N_UBATCH}, clamped to n_batch).",
    show_default=False)]
# the parallel layout (perfcast.workload.Layout)
TensorParallel = Annotated[int, typer.Option(
    "--tensor-parallel", help="GPUs splitting each layer (Megatron tensor parallelism: the "
                              "matrices, heads and vocabulary split T ways); --mode generate: "
                              "devices sharing the model.")]
DataParallel = Annotated[int, typer.Option(
    "--data-parallel", help="--mode train: data-parallel replicas (D); --batch-size is the "
                            "global batch.")]
PipelineParallel = Annotated[int, typer.Option(
    "--pipeline-parallel", help="--mode train: pipeline stages (P), each holding L/P layers.")]
MicroBatch = Annotated[int | None, typer.Option(
    "--micro-batch-size", help="--mode train: samples per pipeline / gradient-accumulation "
                               "micro-batch (default: the fastest that fits).")]
Recompute = Annotated[str, typer.Option(
    "--recompute", help=f"--mode train: activation recomputation, {choices(RECOMPUTE)}.")]
Zero = Annotated[int, typer.Option(
    "--zero", help=f"--mode train: ZeRO stage, {choices(ZERO_STAGES)} — 1 shards the optimizer "
                   f"state over the data-parallel replicas, 2 the gradients too, 3 the weights "
                   f"too.")]
Schedule = Annotated[str, typer.Option(
    "--schedule", help=f"--mode train: pipeline schedule, {choices(SCHEDULES)}.")]
FlashAttention = Annotated[str, typer.Option(
    "--flash-attention", help=f"--mode train, hf: transformers: the attention kernel, "
                              f"{choices(FLASH_ATTENTION)} — auto: FlashAttention where the GPU "
                              f"runs it (NVIDIA compute capability ≥ 8.0, AMD MI200 / MI300: no "
                              f"S² scores kept, recomputed in the backward pass), eager "
                              f"attention elsewhere.")]
Cluster = Annotated[str | None, typer.Option(
    "--cluster", help="--mode train over GPUs: cluster JSON with gpus_per_node, "
                      "intra_node_gbs, inter_node_gbs (per-GPU unidirectional GB/s) and "
                      "optional latencies (default: the device's servers, perfcast devices).")]
Optimizer = Annotated[str, typer.Option("--optimizer",
                                        help=f"Training optimizer: {choices(OPTIMIZERS)} (none: "
                                             f"forward + backward, no optimizer step).")]
#: ``--optimizer`` where the model's source chooses the one not given
#: (:func:`perfcast.workload.default_optimizer`).
ModelOptimizer = Annotated[str | None, typer.Option(
    "--optimizer", help=f"Training optimizer: {choices(OPTIMIZERS)} (none: forward + backward, "
                        f"no optimizer step; default: {HF_DEFAULT_OPTIMIZER} for hf: models, "
                        f"as Hugging Face Trainer, Megatron-LM and llm-foundry train them, "
                        f"else {DEFAULT_OPTIMIZER}, as timm's and torchvision's reference "
                        f"recipes).", show_default=False)]
Predictor = Annotated[str | None, typer.Option(
    "--predictor", help=f"Which predictor answers: {choices(PREDICTOR_KINDS)} (the shipped model "
                        f"of that kind for the device, mode and precision; roofline and memsim "
                        f"need none) — or the directory of a predictor saved by perfcast train "
                        f"(default: your calibrated model or the shipped one for the device, mode "
                        f"and precision; else crossdevice on a GPU; else the roofline).")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]
Ray = Annotated[str | None, typer.Option(
    "--ray", metavar="[ADDRESS]",
    help="Run the tasks on Ray (pip install 'perfcast\\[ray]'): alone, a local cluster for this "
         "command; auto, the cluster running here; HOST:PORT, that one.")]
Store = Annotated[str | None, typer.Option(
    "--store", help="Measurement store (SQLite file or SQLAlchemy URL, e.g. "
                    "postgresql://user:pw@host/db): its measured values are used where it has "
                    "them.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Rebuild the graph, ignore the cache.")]
OverheadMb = Annotated[float | None, typer.Option(
    "--overhead-mb", help="Runtime overhead added to simulated GPU memory (MiB).")]
Margin = Annotated[float, typer.Option("--margin", help="Safety margin on memory (0.1 = 10 %).")]
def _shipped_table(name: str) -> dict:
    """A table shipped in ``perfcast/decisions/data`` (read for the help texts; empty when
    it cannot be read — the command then says why)."""
    import json

    from perfcast.paths import package_data

    try:
        return json.loads(package_data("decisions", "data", name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _price_providers() -> tuple[str, ...]:
    """The providers of the price table (:func:`perfcast.paths.price_table_path`), read for the
    help text without importing the decisions; ``()`` when it cannot be read (the commands then
    say why, through :mod:`perfcast.decisions.prices`)."""
    import csv

    from perfcast.paths import price_table_path

    try:
        with open(price_table_path(), encoding="utf-8", newline="") as f:
            return tuple(sorted({r["provider"].strip().lower() for r in csv.DictReader(f)
                                 if (r.get("provider") or "").strip()}))
    except (OSError, ValueError, KeyError, csv.Error):
        return ()


#: The providers of the public price table.
PROVIDERS = _price_providers()
#: The GPUs of the shipped MIG profile table.
MIG_DEVICES = tuple(sorted(k for tbl in _shipped_table("mig_profiles.json").get("tables", {})
                           .values() for k in tbl.get("devices", [])))

Provider = Annotated[str | None, typer.Option(
    "--provider", help=f"Cloud whose on-demand price to use: "
                       f"{choices(PROVIDERS) if PROVIDERS else '(no price table found)'} (its "
                       f"latest-dated offer for the GPU; default: the lowest provider's). "
                       f"Prices: the public price table ($PERFCAST_DATA/prices/gpu_prices.csv; "
                       f"$PERFCAST_PRICES replaces it).")]
Risk = Annotated[str, typer.Option(
    "--risk", help=f"Which predicted memory to plan with: {choices(RISKS)} — safe = the "
                   f"interval's upper bound, central = the point estimate, optimistic = the "
                   f"lower bound.")]
Transfer = Annotated[str, typer.Option(
    "--transfer", help=f"How to adapt the model to the new records: {choices(TRANSFER_RECIPES)}"
                       f" — auto = the best of the others on held-out models, finetune = train "
                       f"every weight further, recalibrate = map the prediction (log y = a + "
                       f"b·log ŷ), scratch = same kind, new weights.")]
Workers = Annotated[int, typer.Option("--workers",
                                      help="Worker processes (building graphs, reading a corpus).")]
Threads = Annotated[int | None, typer.Option("--threads",
                                             help="CPU threads for torch (default: torch's).")]
BatchSizes = Annotated[str, typer.Option("--batch-sizes", help="Comma-separated batch sizes.")]
Modes = Annotated[str, typer.Option("--modes", help=f"Comma-separated modes: "
                                                    f"{choices(GRAPH_MODES)} (or both).")]
MemsimSeed = Annotated[str | None, typer.Option(
    "--memsim-seed", help="memory-validation CSV whose simulations seed the cache, e.g. "
                          "reports/memory_validation.csv")]
