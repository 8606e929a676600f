"""Every option of a request, declared once: its name, type, default, help, unit, choices, the
modes it applies to, the commands that take it and its names on the command line and over HTTP.

The typer options of the CLI (:mod:`perfcast.faces.cli.options`), the pydantic bodies of ``perfcast
serve``, the web page's form (:mod:`perfcast.faces.ui`) and the CLI reference of the docs are all
generated from :data:`FIELDS`; :meth:`perfcast.request.Request.validate` refuses what does not
apply to the request's mode from each field's :attr:`Field.modes`. A new option is one
:class:`Field` here (and the code that reads it).

Names: the HTTP name is the Python keyword (``power_limit_w``); the command-line flag is the
same with dashes (``--power-limit-w``), and :attr:`Field.aliases` keeps a short or earlier
spelling (``--power-limit``) working on both surfaces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perfcast.workload.finetune import (
    ALL_LINEAR,
    DEFAULT_LORA_RANK,
    FINETUNE,
    LORA_TARGETS,
    MAX_LORA_RANK,
)
from perfcast.workload import (
    DEFAULT_ENGINE,
    DEFAULT_OPTIMIZER,
    ENGINES,
    FLASH_ATTENTION,
    GENERATE_PRECISIONS,
    HF_DEFAULT_OPTIMIZER,
    KV_CACHE_DTYPES,
    LLAMA_CPP_N_BATCH,
    LLAMA_CPP_N_UBATCH,
    MAX_GPUS,
    MODEL_PRECISIONS,
    MODES,
    OBJECTIVES,
    OPTIMIZERS,
    PRECISIONS,
    PREDICTOR_KINDS,
    RECOMPUTE,
    RISKS,
    SCHEDULES,
    TF32_MODES,
    ZERO_STAGES,
)

#: The groups of the request tree (:class:`perfcast.request.Request`): what runs, how it is
#: spread over GPUs, how it is served, how perfcast answers, and each decision's own knobs.
GROUPS = ("workload", "layout", "serving", "options", "decision")
#: Commands whose options come from here, and the HTTP route of each (``perfcast serve``).
COMMANDS = ("predict", "fit", "cost", "rank", "mig", "power-limit", "plan")
#: Every mode, for fields that apply to all.
ALL = tuple(MODES)
GRAPH = ("infer", "train")
#: The most ``--overhead-mb`` (runtime_overhead_mb) may be: 1 TiB in MiB, far above any GPU's
#: memory (more is a unit mistake, bytes or KiB given as MiB).
MAX_RUNTIME_OVERHEAD_MB = 1_048_576


@dataclass(frozen=True)
class Field:
    """One request option. ``name``: the Python keyword and HTTP name; ``kind``: ``int``,
    ``float``, ``str``, ``bool`` or ``list`` (comma-separated on the command line); ``default``
    (``None`` = left to the mode's default); ``help`` (one sentence, no flag names of other
    fields needed); ``unit``; ``choices`` (a tuple, or a callable giving one when it is read:
    registry devices, price providers); ``modes`` it applies to; ``commands`` that take it;
    ``cli``: the flag (``--`` + the name with dashes unless given); ``aliases``: other flags /
    HTTP names accepted for it; ``short``: a one-letter flag; ``group``: :data:`GROUPS`;
    ``minimum`` / ``maximum``: a number's bounds; ``overrides``: ``{command: {"help": …,
    "default": …}}`` — a command's or a surface's (``"ui"``: the web page's starting value, an
    empty box still meaning "not given"); ``listed``: values the help lists that the command
    checks itself (a price provider: any case, or an alias)."""

    name: str
    kind: str
    group: str
    help: str
    default: Any = None
    unit: str | None = None
    choices: tuple | Callable[[], tuple] | None = None
    modes: tuple[str, ...] = ALL
    commands: tuple[str, ...] = ()
    cli: str | None = None
    aliases: tuple[str, ...] = ()
    short: str | None = None
    argument: bool = False
    #: bounds of a number: ``minimum`` (exclusive when ``exclusive``) and ``maximum``
    minimum: float | None = None
    maximum: float | None = None
    exclusive: bool = False
    #: per command, a help text or default that differs from the field's own
    overrides: dict = field(default_factory=dict, compare=False, hash=False)
    #: commands that cannot answer without it
    required: tuple[str, ...] = ()
    #: said when the field is given in a mode it does not apply to (what it is for)
    why: str | None = None
    #: values listed in the help, not enforced here (the command checks them with its aliases)
    listed: Callable[[], tuple] | None = None

    @property
    def flag(self) -> str:
        """The command-line flag."""
        return self.cli or "--" + self.name.replace("_", "-")

    def allowed(self, command: str | None = None) -> tuple | None:
        """The allowed values for ``command`` (``None``: any of the kind)."""
        c = self.overrides.get(command, {}).get("choices", self.choices)
        return tuple(c()) if callable(c) else c

    def help_for(self, command: str | None = None) -> str:
        return self.overrides.get(command, {}).get("help", self.help)

    def default_for(self, command: str | None = None) -> Any:
        return self.overrides.get(command, {}).get("default", self.default)

    def describe(self, command: str | None = None) -> str:
        """The help every surface shows: the sentence, unit, choices, default and modes."""
        text = self.help_for(command).rstrip(".")
        extra = []
        if self.unit and not self.argument:
            extra.append(self.unit)
        allowed = self.allowed(command) if self.name != "precision" else None
        allowed = allowed or (tuple(self.listed()) if self.listed is not None else None)
        if allowed and (self.name != "device" or "choices" in self.overrides.get(command, {})):
            extra.append(f"one of {_or(allowed)}")
        default = self.default_for(command)
        if default is not None and self.kind != "bool" and not self.argument:
            extra.append(f"default {default}")
        if self.modes != ALL and not self.argument:
            extra.append(f"--mode {' / '.join(self.modes)}")
        return text + (f" ({'; '.join(extra)})" if extra else "") + "."

    def applies(self, mode: str | None) -> bool:
        return mode is None or mode in self.modes

    def http_aliases(self) -> tuple[str, ...]:
        """Other keys a request body may use for it (its flag aliases as keywords)."""
        return tuple(a.lstrip("-").replace("-", "_") for a in self.aliases if a.startswith("--"))


def _or(values) -> str:
    """``a, b or c``."""
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]


def _devices() -> tuple[str, ...]:
    from perfcast.devices import device_keys

    return tuple(device_keys())


def _mig_devices() -> tuple[str, ...]:
    """The GPUs of the shipped MIG profile table (read without importing the decisions)."""
    import json

    from perfcast.paths import package_data

    try:
        doc = json.loads(package_data("decisions", "data", "mig_profiles.json")
                         .read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    return tuple(sorted(k for tbl in doc.get("tables", {}).values()
                        for k in tbl.get("devices", [])))


def _providers() -> tuple[str, ...]:
    """The price table's providers, read without importing the decisions (empty when the
    table cannot be read: the commands then say why)."""
    import csv

    from perfcast.paths import price_table_path

    try:
        with open(price_table_path(), encoding="utf-8", newline="") as f:
            return tuple(sorted({r["provider"].strip().lower() for r in csv.DictReader(f)
                                 if (r.get("provider") or "").strip()}))
    except (OSError, ValueError, KeyError, csv.Error):
        return ()


#: What each mode runs (the --mode help).
MODE_MEANING = {"infer": "one forward pass",
                "train": "one training step (forward, loss, backward, optimizer)",
                "generate": "an LLM serving a batch of requests (hf: models)"}


def _mode_help(modes) -> str:
    return "What runs: " + _or([f"{m} ({MODE_MEANING[m]})" for m in modes])


#: Per command, the modes it takes and its default one (a decision's natural mode).
_MODES_OF = {"memory": (GRAPH, "train"), "power-limit": (GRAPH, "train"),
             "report": (GRAPH, "infer"), "plan": (("train", "generate"), "train"),
             "fit": (ALL, "train"), "cost": (ALL, "train")}
_MODE_OVERRIDES = {c: {"choices": m, "default": d, "help": _mode_help(m)}
                   for c, (m, d) in _MODES_OF.items()}
#: The precision's help for the modes that trace a graph.
_GRAPH_PRECISION_HELP = (f"{_or(PRECISIONS)} (amp: float16 autocast; default: the precision "
                         f"measured on that device and mode, else fp32)")
#: ``--mode train``'s meanings of the 16-bit and 8-bit precisions (the table and help say them).
_TRAIN_PRECISION_HELP = ("; --mode train: bf16 = bf16 autocast with fp32 master weights, "
                         "gradients and optimizer state (torch.autocast, FSDP mixed precision, "
                         "Megatron --bf16), bf16-pure = model, gradients and optimizer state "
                         "all in bf16, fp8 = FP8 GEMMs forward and backward at the FP8 tensor "
                         "peak, the rest bf16, fp32 master weights (Transformer Engine / "
                         "torchao float8; GPUs with FP8 units)")

_P = ("predict",)
#: the commands that take --finetune (a training step of a layout, on one GPU or many)
_FINETUNE_CMDS = ("predict", "fit", "cost", "rank", "plan")
_DECIDE = ("predict", "fit", "cost", "rank", "mig", "power-limit", "plan")
_GRAPH_CMDS = ("predict", "fit", "cost", "rank", "mig", "power-limit", "plan")
#: the commands that answer --mode generate (power-limit covers one GPU's infer / train step)
_SERVE = ("predict", "fit", "cost", "rank", "mig", "plan")
#: perfcast report (one HTML page about one device; --mode infer or train)
_R = ("report",)

FIELDS: tuple[Field, ...] = (
    # ---------------------------------------------------------------------------- workload
    Field("model", "str", "workload", argument=True, commands=_DECIDE + ("memory",) + _R,
          required=("predict", "fit", "rank", "power-limit", "plan", "report"),
          overrides={"ui": {"default": "resnet50"}},
          help="timm name, timm:<name>, torchvision:<name>, hf:<id|config.json>, "
               "path/to/model.onnx or module.path:callable"),
    Field("device", "str", "workload", short="-d", unit=None,
          commands=("predict", "fit", "cost", "mig", "power-limit", "plan", "report"),
          required=("predict", "fit", "cost", "power-limit", "plan", "report"),
          overrides={"mig": {"choices": _mig_devices, "default": "a100-40gb",
                             "help": "MIG GPU"}},
          help="Device: a registry key (perfcast devices lists them) or the JSON spec file of "
               "a GPU"),
    Field("batch_size", "int", "workload", short="-b", unit="samples",
          commands=_DECIDE + ("memory",) + _R, overrides={"memory": {"default": 1}},
          help="Samples per batch (default: 1, or 32 for a predicted training step; an ONNX "
               "file's own batch); --mode generate: concurrent requests, in every engine; "
               "with a layout: the global batch"),
    Field("input_size", "str", "workload", modes=GRAPH, commands=_GRAPH_CMDS + ("memory",) + _R,
          help="Per-sample input shape C,H,W (vision models; one number: a 1-d shape)"),
    Field("seq_len", "int", "workload", unit="tokens", modes=GRAPH,
          commands=_GRAPH_CMDS + ("memory",) + _R,
          help="Sequence length in tokens (text models, hf:)"),
    Field("mode", "str", "workload", default="infer", choices=ALL,
          commands=_DECIDE + ("memory",) + _R, overrides=_MODE_OVERRIDES,
          help=_mode_help(ALL)),
    Field("precision", "str", "workload",
          choices=tuple(dict.fromkeys((*MODEL_PRECISIONS, *GENERATE_PRECISIONS))),
          commands=_DECIDE + ("memory",) + _R,
          overrides={**{c: {"choices": PRECISIONS, "help": _GRAPH_PRECISION_HELP}
                        for c in ("power-limit", "report")},
                     "memory": {"choices": (*PRECISIONS, "bf16-pure"),
                                "help": _GRAPH_PRECISION_HELP + _TRAIN_PRECISION_HELP}},
          help=_GRAPH_PRECISION_HELP.replace(_or(PRECISIONS), _or(MODEL_PRECISIONS), 1)
               + _TRAIN_PRECISION_HELP + f"; --mode generate: {_or(GENERATE_PRECISIONS)} "
               f"(int8 / int4: weight-only; fp8: FP8 weights and activations, vLLM / "
               f"TensorRT-LLM; the upper-case ones are llama.cpp's GGUF formats; "
               f"default fp16)"),
    Field("optimizer", "str", "workload", choices=OPTIMIZERS,
          modes=("train",), commands=_GRAPH_CMDS + ("memory",) + _R,
          help=f"Training optimizer (none: forward + backward, no optimizer step; default: "
               f"{HF_DEFAULT_OPTIMIZER} for hf: models, as Hugging Face Trainer, Megatron-LM "
               f"and llm-foundry train them, else {DEFAULT_OPTIMIZER}, as timm's and "
               f"torchvision's reference recipes)"),
    Field("tf32", "str", "workload", default="default", choices=TF32_MODES, modes=GRAPH,
          commands=_GRAPH_CMDS + _R,
          help="How fp32 matmuls and convolutions run on GPUs with TF32 units (Ampere and "
               "newer): default = PyTorch's defaults (convolutions TF32, matmuls FP32); on = "
               "NGC containers / set_float32_matmul_precision('high'); off = "
               "NVIDIA_TF32_OVERRIDE=0"),
    Field("finetune", "str", "workload", choices=FINETUNE, modes=("train",),
          commands=_FINETUNE_CMDS,
          help="Fine-tune an hf: decoder LLM: full (every weight trained), lora (a frozen "
               "16-bit base + rank-r adapters) or qlora (the base's linear layers in 4-bit "
               "NormalFloat with double quantisation, bitsandbytes; compute in bf16 / fp16); "
               "with --recompute full for gradient checkpointing (default: a training step of "
               "the model as given)"),
    Field("lora_rank", "int", "workload", default=DEFAULT_LORA_RANK, minimum=1,
          maximum=MAX_LORA_RANK, modes=("train",), commands=_FINETUNE_CMDS,
          help="Rank r of the LoRA adapters (r·(in + out) parameters per adapted projection; "
               "--finetune lora / qlora)"),
    Field("lora_targets", "str", "workload", modes=("train",), commands=_FINETUNE_CMDS,
          listed=lambda: (*LORA_TARGETS, ALL_LINEAR),
          help="Projections the LoRA adapters adapt, comma-separated (Llama's names, as "
               "PEFT's target_modules; --finetune lora / qlora; default: every attention and "
               "MLP projection, all-linear)"),
    # ---------------------------------------------------------------------------- layout
    Field("data_parallel", "int", "layout", default=1, unit="GPUs", modes=("train",),
          commands=("predict", "fit", "cost", "rank", "plan"),
          help="Data-parallel replicas (D); --batch-size is the global batch"),
    Field("tensor_parallel", "int", "layout", default=1, unit="GPUs",
          modes=("train", "generate"), commands=("predict", "fit", "cost", "rank", "plan"),
          help="GPUs splitting each layer (Megatron tensor parallelism); --mode generate: "
               "devices sharing the model"),
    Field("pipeline_parallel", "int", "layout", default=1, unit="GPUs", modes=("train",),
          commands=("predict", "fit", "cost", "rank", "plan"),
          help="Pipeline stages (P), each holding L/P layers"),
    Field("micro_batch_size", "int", "layout", unit="samples", modes=("train",),
          commands=("predict", "cost", "rank", "plan"),
          help="Samples per pipeline / gradient-accumulation micro-batch (default: the "
               "largest that fits)"),
    Field("recompute", "str", "layout", default="none", choices=RECOMPUTE, modes=("train",),
          commands=("predict", "fit", "cost", "rank", "plan"),
          help="Activation recomputation"),
    Field("zero", "int", "layout", default=0, choices=ZERO_STAGES, modes=("train",),
          commands=("predict", "fit", "cost", "rank", "plan"),
          help="ZeRO stage: 1 shards the optimizer state over the data-parallel replicas, 2 "
               "the gradients too, 3 the weights too"),
    Field("schedule", "str", "layout", default="1f1b", choices=SCHEDULES, modes=("train",),
          commands=("predict", "fit", "cost", "rank", "plan"), help="Pipeline schedule"),
    Field("flash_attention", "str", "layout", default="auto", choices=FLASH_ATTENTION,
          modes=("train",), commands=("predict", "fit", "cost", "rank", "plan"),
          help="The attention kernel of hf: transformers: auto = FlashAttention where the GPU "
               "runs it (NVIDIA compute capability ≥ 8.0, AMD MI200 / MI300: no S² scores "
               "kept, recomputed in the backward pass), eager attention elsewhere"),
    Field("context_parallel", "int", "layout", default=1, unit="GPUs", minimum=1,
          maximum=MAX_GPUS, modes=("train",),
          commands=("predict", "fit", "cost", "rank", "plan"),
          help="GPUs splitting each sequence (C, context parallelism: ring attention passes "
               "K and V around them; 2·C divides --seq-len); the GPUs are D·T·P·C"),
    Field("expert_parallel", "int", "layout", default=1, unit="GPUs", minimum=1,
          maximum=MAX_GPUS, modes=("train", "generate"),
          commands=("predict", "fit", "cost", "rank", "plan"),
          help="GPUs splitting a mixture of experts' experts (E; all-to-all dispatch and "
               "combine); train: E divides D·C and the experts; --mode generate: E of the "
               "--tensor-parallel devices hold the experts"),
    Field("cluster", "str", "layout",
          why="--cluster describes the GPUs of a training step over several GPUs (with "
              "--data-parallel, --tensor-parallel or --pipeline-parallel)", modes=("train",),
          commands=("predict", "fit", "cost", "rank", "plan"),
          help="A training step over GPUs: cluster JSON with gpus_per_node, intra_node_gbs, "
               "inter_node_gbs (per-GPU unidirectional GB/s) and optional latencies (default: "
               "the device's servers, perfcast devices)"),
    # ---------------------------------------------------------------------------- serving
    Field("engine", "str", "serving", choices=ENGINES, modes=("generate",), commands=_SERVE,
          aliases=("--framework",),
          help=f"Serving engine (default {DEFAULT_ENGINE})"),
    Field("kv_cache_dtype", "str", "serving", default="auto", choices=KV_CACHE_DTYPES,
          modes=("generate",),
          commands=_SERVE,
          help="The KV cache's element type: auto = the model's 16-bit type; fp8 = vLLM's / "
               "TensorRT-LLM's FP8 KV cache, one byte an element, half the cache (GPUs with "
               "FP8 units)"),
    Field("input_len", "int", "serving", unit="tokens", modes=("generate",), commands=_SERVE,
          overrides={"ui": {"default": 512}},
          help="Prompt tokens per request"),
    Field("output_len", "int", "serving", unit="tokens", modes=("generate",),
          commands=_SERVE, overrides={"ui": {"default": 128}},
          help="Generated tokens per request"),
    Field("n_batch", "int", "serving", unit="tokens", modes=("generate",), commands=_SERVE,
          help=f"--engine llama.cpp: its logical batch n_batch (llama-bench -b; default "
               f"{LLAMA_CPP_N_BATCH:,}); the prompt runs in passes of min(n_batch, n_ubatch) "
               f"tokens"),
    Field("n_ubatch", "int", "serving", unit="tokens", modes=("generate",), commands=_SERVE,
          help=f"--engine llama.cpp: its physical batch n_ubatch (llama-bench -ub; ≤ n_batch; "
               f"default {LLAMA_CPP_N_UBATCH}, clamped to n_batch)"),
    Field("rate", "float", "serving", minimum=0, exclusive=True, unit="requests/s", modes=("generate",),
          commands=("plan",), help="Requests per second the deployment must serve"),
    Field("slo_ttft_ms", "float", "serving", minimum=0, exclusive=True, unit="ms", modes=("generate",),
          commands=("plan",), aliases=("--slo-ttft",),
          help="Time-to-first-token objective (a deployment meets it at the rate)"),
    Field("slo_tpot_ms", "float", "serving", minimum=0, exclusive=True, unit="ms", modes=("generate",),
          commands=("plan",), aliases=("--slo-tpot",),
          help="Time-per-output-token objective"),
    Field("max_batch", "int", "serving", minimum=1, unit="requests", modes=("generate",),
          commands=("plan",),
          help="Most requests a replica runs at once (default: the most that fit)"),
    # ---------------------------------------------------------------------------- options
    Field("predictor", "str", "options", modes=GRAPH,
          commands=("predict", "fit", "cost", "rank", "mig", "power-limit", "report"),
          help=f"Which predictor answers: one of {_or(PREDICTOR_KINDS)} (the shipped "
               f"model of that kind for the device, mode and precision) — or the directory of "
               f"a predictor saved by perfcast train (default: your calibrated model or the "
               f"shipped one; else crossdevice on a GPU; else the roofline)"),
    Field("threads", "int", "options", minimum=1, maximum=4096, modes=GRAPH, commands=_P,
          help="CPU threads the model runs with (CPU devices; default: this machine's cores)"),
    Field("coverage", "float", "options", minimum=0, maximum=1, exclusive=True, default=0.9, modes=ALL,
          commands=("predict", "fit", "cost", "rank", "mig"),
          help="Coverage of the calibrated intervals (0.9 = 90 %)"),
    Field("power_limit_w", "float", "options", minimum=0, exclusive=True, unit="W", modes=GRAPH,
          commands=("predict", "cost", "rank"), aliases=("--power-limit",),
          help="GPU power limit (default: its TDP): energy at that limit, and the time where "
               "it binds"),
    Field("store", "str", "options", modes=GRAPH, commands=_P,
          help="Measurement store (SQLite file or SQLAlchemy URL): its measured values are "
               "used where it has them"),
    Field("runtime_overhead_mb", "float", "options", minimum=0,
          maximum=MAX_RUNTIME_OVERHEAD_MB, unit="MiB", modes=GRAPH,
          commands=("predict", "fit", "mig"), aliases=("--overhead-mb",),
          help="GPU memory beyond the live tensors added to simulated memory (default: the "
               "median measured on real runs; 0 = tensors only)"),
    Field("use_cache", "bool", "options", default=True,
          commands=("predict", "fit", "cost", "rank", "mig", "power-limit", "plan", "report"),
          help="Use the graph cache (false: rebuild the graph)"),
    # ---------------------------------------------------------------------------- decisions
    Field("devices", "list", "decision", default="all", commands=("rank",),
          overrides={"ui": {"default": "a100-40gb,rtx4090",
                            "help": "Devices to predict on, compare and rank (registry keys; "
                                    "upload a spec for another)"}},
          help="Devices to rank: comma-separated registry keys or spec files, or all"),
    Field("objective", "str", "decision", default="time", choices=OBJECTIVES,
          commands=("rank",), help="What to rank by: time per batch, USD or kWh of the job"),
    Field("iterations", "int", "decision", minimum=1, unit="batches",
          commands=("cost", "rank", "report"),
          overrides={c: {"default": 1000} for c in ("ui", "rank", "report")},
          help="Batches (iterations) the job runs"),
    Field("epochs", "float", "decision", minimum=0, exclusive=True, modes=GRAPH,
          commands=("cost",),
          help="Epochs over --dataset-size samples (instead of --iterations)"),
    Field("dataset_size", "int", "decision", minimum=1, unit="samples", modes=GRAPH,
          commands=("cost",),
          help="Samples per epoch (with --epochs)"),
    Field("requests", "int", "decision", minimum=1, unit="requests", modes=("generate",),
          commands=("cost",),
          help="Requests to serve, in batches of --batch-size (instead of --iterations)"),
    Field("provider", "str", "decision", listed=_providers, commands=("cost", "rank", "plan"),
          help="Cloud whose on-demand price to use: its latest-dated offer for the GPU "
               "(default: the lowest provider's; any case, or an alias such as google for gcp) "
               "in the public price table $PERFCAST_DATA/prices/gpu_prices.csv, or the file "
               "$PERFCAST_PRICES names"),
    Field("price_per_hour", "float", "decision", minimum=0, unit="USD per GPU-hour",
          commands=("cost", "rank", "plan"), help="Price of one GPU-hour (replaces the table's)"),
    Field("region", "str", "decision", commands=("cost", "report"),
          help="Grid region of the carbon intensity (default: the world average)"),
    Field("time_ms", "float", "decision", minimum=0, exclusive=True, unit="ms", modes=GRAPH, commands=("cost",),
          help="Use this time per batch instead of predicting it"),
    Field("power_w", "float", "decision", minimum=0, exclusive=True, unit="W", modes=GRAPH, commands=("cost",),
          help="Use this mean power instead of predicting it"),
    Field("pue", "float", "decision", minimum=1, default=1.0, commands=("cost",),
          help="Data-centre power usage effectiveness (energy × PUE)"),
    Field("margin", "float", "decision", minimum=0, default=0.1, commands=("fit", "mig"),
          help="Safety margin on memory (0.1 = 10 %; --mode generate: none unless given, the "
               "engine's own memory share being the margin)"),
    Field("risk", "str", "decision", default="safe", choices=RISKS, modes=GRAPH,
          commands=("fit", "mig"),
          help="Which predicted memory to plan with: safe = the interval's upper bound, "
               "central = the point estimate, optimistic = the lower bound"),
    Field("mig_profile", "str", "decision", modes=GRAPH, commands=("fit",),
          help="Fit in this MIG slice (e.g. 3g.20gb)"),
    Field("limit", "int", "decision", minimum=1, default=65536, commands=("fit",),
          help="Largest batch searched"),
    Field("latency_slo_ms", "float", "decision", minimum=0, exclusive=True, unit="ms",
          commands=("mig",),
          help="Also require time per batch on the slice ≤ this"),
    Field("all_profiles", "bool", "decision", default=False, commands=("mig",),
          help="Choose among every profile, not only DIPPM's standard even partitions"),
    Field("memory_mb", "float", "decision", minimum=0, exclusive=True, unit="MiB",
          commands=("mig",),
          help="Use this peak memory instead of predicting it"),
    Field("eta", "float", "decision", minimum=0, maximum=1, default=0.5, modes=GRAPH, commands=("power-limit",),
          help="Weight of energy against time (Zeus' η: 1 = energy only, 0 = time only)"),
    Field("gpus", "int", "decision", minimum=1, maximum=MAX_GPUS, unit="GPUs",
          commands=("cost", "plan"),
          overrides={"cost": {"help": "GPUs the job runs on, priced per GPU-hour: with "
                                      "--time-ms, default 1; a layout's or --tensor-parallel's "
                                      "own GPUs otherwise"}},
          help="--mode train: GPUs to spread the training over; --mode generate: the most "
               "GPUs"),
    Field("top", "int", "decision", minimum=1, default=15, commands=("plan",),
          help="Layouts in the answer"),
)

#: :data:`FIELDS` by name.
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
#: Other names accepted for a field (flag aliases as keywords, e.g. ``power_limit``).
ALIASES: dict[str, str] = {a: f.name for f in FIELDS for a in f.http_aliases()}


def fields_of(command: str) -> tuple[Field, ...]:
    """The fields ``command`` takes, in :data:`FIELDS` order."""
    return tuple(f for f in FIELDS if command in f.commands)


def field(name: str) -> Field:
    from perfcast.errors import PerfcastError

    try:
        return BY_NAME[ALIASES.get(name, name)]
    except KeyError:
        raise PerfcastError(f"unknown option {name!r}") from None


__all__ = ["ALIASES", "ALL", "BY_NAME", "COMMANDS", "FIELDS", "GROUPS", "Field",
           "MAX_RUNTIME_OVERHEAD_MB", "field", "fields_of"]
