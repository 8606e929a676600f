"""The workload: what runs — a model, its batch, input size or sequence length, mode, precision
and optimizer — parsed and validated in one place.

Every layer takes a :class:`Workload`: the frontends build its graph, the graph cache keys it,
the memory simulation simulates it, the profiler measures it, the measurement store records it,
the predictors get its static features and the decisions vary its batch. Nothing below this
module re-parses a spec string or re-declares the allowed values.

A model spec (:class:`ModelSpec`) is one of::

    timm:resnet50 | resnet50        timm model (random init)
    torchvision:resnet18 | tv:…     torchvision model
    hf:gpt2 | hf:path/config.json   Hugging Face architecture from its config, no weights
    path/to/model.onnx              ONNX file
    my.module:make_model            a callable returning an nn.Module
    keras:ResNet50                  keras.applications model (weights=None)     [tensorflow extra]
    path/model.keras | saved_model/ Keras file / TensorFlow SavedModel directory [tensorflow extra]
    paddle:resnet50                 paddle.vision.models model (pretrained=False)   [paddle extra]
    path/model.pdmodel | model.json PaddlePaddle inference program (+ .pdiparams)   [paddle extra]
    jax:my.module:make_fn           a callable returning (JAX function, example inputs) [jax extra]

or, from Python, an ``nn.Module`` object (:meth:`ModelSpec.of_module`; never cached) — or a Keras
model, a ``paddle.nn.Layer`` or a JAX / Flax function with its example inputs
(:meth:`ModelSpec.of_object`; never cached). Files are recognised by their format
(:func:`file_kind`). Spec kinds
are registered (:func:`register_spec_kind`) with the inputs their models take — ``image``
(``C,H,W``), ``tokens`` (a sequence length), ``tensor`` (any per-sample shape) or ``file`` (the
file fixes its shapes) — so validation refuses what does not apply (``--seq-len`` on an image
model, ``--input-size 3,224`` for a 3-channel image model) instead of ignoring it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import ModelSpecError, PerfcastError, unknown_choice

#: ``infer``: one forward pass (no grad); ``train``: forward + loss + backward + optimizer step;
#: ``generate``: an LLM serving a batch of requests (a prefill of ``input_len`` prompt tokens,
#: then ``output_len`` generated tokens each, :mod:`perfcast.generation`).
MODES = ("infer", "train", "generate")
#: The modes a model's graph is traced and measured in (``generate`` is priced from them).
GRAPH_MODES = ("infer", "train")
#: ``amp`` = float16 autocast with fp32 weights; ``fp16`` / ``bf16`` = the whole model converted.
PRECISIONS = ("fp32", "amp", "fp16", "bf16")
#: How fp32 matmuls and convolutions run on GPUs with TF32 tensor cores (NVIDIA Ampere and
#: newer): ``default`` — PyTorch's defaults, convolutions in TF32
#: (``torch.backends.cudnn.allow_tf32 = True``) and matmuls in full FP32
#: (``torch.backends.cuda.matmul.allow_tf32 = False``); ``on`` — both in TF32, as NVIDIA's NGC
#: PyTorch containers run (``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1``) and as
#: ``torch.set_float32_matmul_precision("high")`` asks; ``off`` — neither
#: (``NVIDIA_TF32_OVERRIDE=0``, or both flags False).
TF32_MODES = ("default", "on", "off")
#: GGUF weight formats of llama.cpp (``--mode generate --engine llama.cpp``), by llama.cpp's
#: names (case-insensitive): 16/32-bit ``F16``, ``BF16``, ``F32`` and the quantized ``Q8_0``,
#: ``Q6_K``, ``Q5_K_M``, ``Q4_K_M``, ``Q4_0`` (bytes per weight: :data:`perfcast.llm.arch.
#: WEIGHT_BYTES`). llama.cpp also takes ``int8`` / ``int4`` / ``fp16`` (read as ``Q8_0`` /
#: ``Q4_K_M`` / ``F16``, :func:`perfcast.generation.resolve`).
GGUF_PRECISIONS = ("F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0")
#: Serving precisions (``--mode generate``): ``int8`` / ``int4`` are weight-only quantization;
#: the GGUF formats (:data:`GGUF_PRECISIONS`) are llama.cpp's.
GENERATE_PRECISIONS = ("fp16", "bf16", "fp32", "int8", "int4", *GGUF_PRECISIONS)
#: Serving engines (``--mode generate``) and the default one.
ENGINES = ("vllm", "trt-llm", "llama.cpp", "deepspeed-mii", "hf")
DEFAULT_ENGINE = "vllm"
#: llama.cpp's logical batch ``n_batch`` (tokens it submits to one ``llama_decode``) and
#: physical batch ``n_ubatch`` (tokens per forward pass, clamped to ``n_batch``): llama-bench's
#: and llama-server's defaults. ``--batch-size`` is concurrent requests in every engine; these
#: are their own options (``--n-batch``, ``--n-ubatch``), for ``--engine llama.cpp`` only.
LLAMA_CPP_N_BATCH = 2048
LLAMA_CPP_N_UBATCH = 512
#: Activation recomputation in training: none, ``selective`` (the attention core, Megatron's
#: selective recomputation) or ``full`` (every layer's forward again in the backward pass).
RECOMPUTE = ("none", "selective", "full")
#: ZeRO stages (DeepSpeed; FSDP's SHARD_GRAD_OP = 2, FULL_SHARD = 3): 1 shards the optimizer
#: state over the data-parallel replicas, 2 the gradients too, 3 the weights too.
ZERO_STAGES = (0, 1, 2, 3)
#: Pipeline schedules: ``1f1b`` (PipeDream-flush, Megatron's default), ``interleaved``
#: (Megatron's virtual stages: each GPU holds :data:`INTERLEAVED_CHUNKS` model chunks) and
#: ``gpipe`` (all forwards, then all backwards).
SCHEDULES = ("1f1b", "interleaved", "gpipe")
#: FlashAttention in training (``--flash-attention``): ``auto`` = on where the GPU runs it
#: (NVIDIA compute capability ≥ 8.0 — FlashAttention-2 — and AMD MI200 / MI300), ``on`` (the
#: GPU must run it), ``off`` (eager attention: the S² scores written, kept, read back).
FLASH_ATTENTION = ("auto", "on", "off")
#: Model chunks per pipeline stage of the interleaved schedule.
INTERLEAVED_CHUNKS = 2
#: Most GPUs one layout may span (a T·P·D beyond it is refused as a typo).
MAX_GPUS = 1 << 20
#: Most devices an LLM is served on with tensor parallelism (``--mode generate``).
MAX_SERVING_DEVICES = 64
#: Training optimizers (torch.optim): SGD, SGD with momentum 0.9, Adam, AdamW — and ``none``:
#: forward + backward without an optimizer step (what NeuSight and others label "training").
OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw", "none")
DEFAULT_OPTIMIZER = "sgd-momentum"
#: Largest batch / dimension / sequence length accepted (a 32-bit signed int, as torch sizes).
MAX_SIZE = 2**31 - 1
#: What a spec kind's models take as input.
INPUT_KINDS = ("image", "tokens", "tensor", "file")

# --------------------------------------------------------------------------- other choices
# The allowed values of the commands' other options, one set each: the modules acting on them
# check against these, and the CLI help (perfcast.cli._common) lists them from here — so a help
# text cannot name a value the code refuses, or miss one it takes (tests/test_cli_help.py).
#: Which predicted memory ``fit`` and ``mig`` plan with: ``safe`` the interval's upper bound,
#: ``central`` the point estimate, ``optimistic`` the lower bound.
RISKS = ("safe", "central", "optimistic")
#: What ``rank`` orders the devices by: time per batch, USD or kWh of the job.
OBJECTIVES = ("time", "cost", "energy")
#: How ``perfcast train --init-from`` and ``perfcast calibrate`` adapt a predictor to new
#: records: ``auto`` (the best of the others on held-out models), ``finetune``,
#: ``recalibrate`` (log y = a + b·log ŷ) or ``scratch``.
TRANSFER_RECIPES = ("auto", "finetune", "recalibrate", "scratch")
#: Graph-encoder pre-training methods: TraPPM's graph autoencoder and the masked GraphMAE.
PRETRAIN_METHODS = ("gae", "graphmae")
#: The predictor kinds perfcast registers (:func:`perfcast.predictors.list_predictors`; a
#: test keeps the two equal).
PREDICTOR_KINDS = ("crossdevice", "dippm", "dippm-gat", "dippm-gcn", "dippm-gin", "dnnperf",
                   "gnnllm", "kernelsum", "memsim", "mlp", "nnlqp", "roofline", "trappm",
                   "xgboost")
#: Training recipes of ``perfcast train --recipe``: ``default`` (the shipped predictors, from
#: ``perfcast/training/recipes/default.json``; a recipe JSON file works too), ``llm`` (the LLM
#: generation models), ``power`` (the power model) and ``gnnllm`` (the GNN+LLM checkpoint).
TRAIN_RECIPES = ("default", "llm", "power", "gnnllm")
#: Evaluation tasks (:data:`perfcast.evaluation.tasks.TASKS` describes each) and splits
#: (:data:`perfcast.evaluation.splits.SPLITS`); a test keeps the names equal.
EVAL_TASKS = ("a", "b", "b-pt291", "rtx3090-infer", "c-i9", "c-i7", "d", "e", "e-nosim", "gpu")
EVAL_SPLITS = ("random", "family-mc", "unseen-family", "unseen-device")


# --------------------------------------------------------------------------- spec kinds
@dataclass(frozen=True)
class SpecKind:
    """A registered spec prefix: ``name`` (canonical), ``inputs`` (one of :data:`INPUT_KINDS`)
    and ``aliases`` (other prefixes meaning the same); ``framework`` the models come from
    (``pytorch`` — built by :mod:`perfcast.zoo` —, ``onnx``, ``tensorflow``, ``paddle``,
    ``jax``), ``in_process`` for objects handed over from Python (no prefix, never cached) and
    ``packages`` whose versions are part of the graph key (the exporter and its framework)."""

    name: str
    inputs: str
    aliases: tuple[str, ...] = ()
    framework: str = "pytorch"
    in_process: bool = False
    packages: tuple[str, ...] = ()


_KINDS: dict[str, SpecKind] = {}
_PREFIXES: dict[str, str] = {}  # prefix or alias → canonical kind


def register_spec_kind(name: str, inputs: str, aliases: tuple[str, ...] = (), *,
                       framework: str = "pytorch", in_process: bool = False,
                       packages: tuple[str, ...] = ()) -> SpecKind:
    """Register the spec prefix ``name:`` (and ``aliases``) for models taking ``inputs`` (see
    :class:`SpecKind` for the rest)."""
    if inputs not in INPUT_KINDS:
        raise ValueError(f"inputs must be one of {INPUT_KINDS}, got {inputs!r}")
    kind = SpecKind(name, inputs, tuple(aliases), framework, in_process, tuple(packages))
    _KINDS[name] = kind
    for p in (name, *aliases):
        _PREFIXES[p] = name
    return kind


def spec_kinds() -> list[SpecKind]:
    return [_KINDS[k] for k in sorted(_KINDS)]


def spec_kind(name: str) -> SpecKind:
    try:
        return _KINDS[_PREFIXES.get(name, name)]
    except KeyError:
        raise ModelSpecError(f"unknown model spec kind {name!r}") from None


register_spec_kind("timm", "image")
register_spec_kind("torchvision", "image", aliases=("tv",))
register_spec_kind("hf", "tokens")
register_spec_kind("onnx", "file", framework="onnx")
register_spec_kind("module", "tensor")
register_spec_kind("nn.Module", "tensor", in_process=True)  # an in-process module (Python API)
# other frameworks, through their ONNX exporters (perfcast.frontends.exported; optional extras)
_TF, _PADDLE, _JAX = (("tensorflow", "tensorflow-cpu", "keras", "tf2onnx"),
                      ("paddlepaddle", "paddle2onnx"), ("jax", "jaxlib", "flax", "jax2onnx"))
register_spec_kind("keras", "image", framework="tensorflow", packages=_TF)
register_spec_kind("tensorflow", "file", aliases=("tf",), framework="tensorflow", packages=_TF)
register_spec_kind("paddle", "image", framework="paddle", packages=_PADDLE)
register_spec_kind("pdmodel", "file", framework="paddle", packages=_PADDLE)
register_spec_kind("jax", "file", framework="jax", packages=_JAX)
register_spec_kind("keras.Model", "file", framework="tensorflow", in_process=True, packages=_TF)
register_spec_kind("paddle.Layer", "file", framework="paddle", in_process=True, packages=_PADDLE)
register_spec_kind("jax.function", "file", framework="jax", in_process=True, packages=_JAX)


def file_kind(text: str) -> str | None:
    """The spec kind of a model file or folder recognised by its format, else ``None``:
    ``tensorflow`` for a ``.keras`` file, a SavedModel directory (it holds ``saved_model.pb``)
    or its ``saved_model.pb``; ``pdmodel`` for a PaddlePaddle ``.pdmodel`` program or a
    PaddlePaddle 3 (PIR) ``.json`` program (its first bytes say ``"magic":"pir"``). ONNX files
    are the default for any other existing file (:meth:`ModelSpec.parse`)."""
    path = Path(text)
    low = text.lower().rstrip("/\\")
    if low.endswith(".keras") or low.endswith("saved_model.pb") or (
            path.is_dir() and (path / "saved_model.pb").is_file()):
        return "tensorflow"
    if low.endswith(".pdmodel"):
        return "pdmodel"
    if low.endswith(".json") and path.is_file():
        try:
            with open(path, "rb") as f:
                head = f.read(256).replace(b" ", b"")
        except OSError:
            return None
        if b'"base_code"' in head and b'"magic":"pir"' in head:
            return "pdmodel"
    return None


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec: ``text`` as given (stripped), canonical ``kind`` and ``name`` (the
    part after the prefix; the path for ONNX; ``module.path:callable`` for callables).

    ``module`` / ``example_inputs``: the ``nn.Module`` object and its example inputs of an
    in-process model (kind ``nn.Module``); compared by identity, never cached.
    """

    text: str
    kind: str
    name: str
    module: Any = field(default=None, compare=False, repr=False)
    example_inputs: tuple | None = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, spec: str | ModelSpec) -> ModelSpec:
        """Parse a spec string (see the module docstring); checks files exist, builds nothing."""
        if isinstance(spec, ModelSpec):
            return spec
        if not isinstance(spec, str):
            raise PerfcastError(f"a model spec is a string or a torch.nn.Module, "
                                f"not {type(spec).__name__}")
        text = spec.strip()
        if not text:
            raise ModelSpecError("empty model spec: give a timm name, an .onnx file, hf:<id>, ...")
        if ":" in text:
            prefix, rest = text.split(":", 1)
            if prefix in _PREFIXES and not _KINDS[_PREFIXES[prefix]].in_process:
                return cls(text, _PREFIXES[prefix], rest)
        path = Path(text)
        kind = file_kind(text)
        if kind is not None:
            if not path.exists():
                raise ModelSpecError(f"file not found: {text}")
            if kind == "tensorflow" and path.name == "saved_model.pb":
                return cls(text, kind, str(path.parent))
            return cls(text, kind, text)
        if path.is_dir():
            raise ModelSpecError(f"{text} is a folder, not a model file (a TensorFlow SavedModel "
                                 f"folder holds saved_model.pb; give an .onnx, .keras, "
                                 f".pdmodel file or a model spec)")
        if text.lower().endswith(".onnx") or path.is_file():
            if not path.exists():
                raise ModelSpecError(f"file not found: {text}")
            return cls(text, "onnx", text)
        if "/" in text or "\\" in text:
            raise ModelSpecError(f"file not found: {text} (for a Hugging Face model write "
                                 f"hf:{text})")
        if ":" in text:
            return cls(text, "module", text)
        return cls(text, "timm", text)

    @classmethod
    def of_module(cls, module: Any, example_inputs: tuple | None = None) -> ModelSpec:
        """The spec of an in-process ``nn.Module`` (``example_inputs``: meta tensors are best)."""
        name = type(module).__name__
        return cls(name, "nn.Module", name, module=module,
                   example_inputs=tuple(example_inputs) if example_inputs is not None else None)

    @classmethod
    def of_object(cls, model: Any, example_inputs: tuple | None = None) -> ModelSpec:
        """The spec of an in-process model of another framework (:func:`object_kind`): a Keras
        model (``example_inputs`` optional: shapes for a model without an input layer), a
        ``paddle.nn.Layer`` (``example_inputs``: tensors, arrays, ``InputSpec`` s or shapes) or
        a JAX / Flax callable (``example_inputs``: arrays or ``jax.ShapeDtypeStruct`` s)."""
        kind = object_kind(model, example_inputs)
        if kind is None:
            raise PerfcastError(f"model must be a spec string, a torch.nn.Module, a Keras model, "
                                f"a paddle.nn.Layer or a JAX function with example_inputs, not "
                                f"{type(model).__name__}")
        if kind == "nn.Module":
            return cls.of_module(model, example_inputs)
        name = getattr(model, "name", None) if kind == "keras.Model" else None
        name = name if isinstance(name, str) and name else (
            getattr(model, "__name__", None) or type(model).__name__)
        return cls(name, kind, name, module=model,
                   example_inputs=tuple(example_inputs) if example_inputs is not None else None)

    @property
    def inputs(self) -> str:
        """What this kind of model takes: ``image``, ``tokens``, ``tensor`` or ``file``."""
        return spec_kind(self.kind).inputs

    @property
    def framework(self) -> str:
        """The framework the model comes from (see :class:`SpecKind`)."""
        return spec_kind(self.kind).framework

    @property
    def cacheable(self) -> bool:
        return not spec_kind(self.kind).in_process

    def file_id(self) -> list | None:
        """``[resolved path, size, mtime_ns]`` of the file a spec reads (ONNX, HF config path,
        Keras file, SavedModel's ``saved_model.pb``, PaddlePaddle program)."""
        if self.kind not in ("onnx", "hf", "tensorflow", "pdmodel") \
                or not Path(self.name).exists():
            return None
        p = Path(self.name)
        if p.is_dir():
            p = p / ("saved_model.pb" if self.kind == "tensorflow" else "config.json")
        if not p.exists():
            return None
        st = p.stat()
        return [str(p.resolve()), st.st_size, st.st_mtime_ns]

    def __str__(self) -> str:
        return self.text


# --------------------------------------------------------------------------- parsing helpers
def parse_input_size(text: Any, image: bool = True) -> tuple[int, ...] | None:
    """Per-sample input shape: ``"3,224,224"`` / ``"3x224x224"`` / ``(3, 224, 224)`` → tuple (a
    tuple or list is taken as the shape, even of one dimension); a single ``"224"`` or ``224``
    → the square image ``(3, 224, 224)`` for an image model, the 1-d shape ``(224,)`` for any
    other (``image=False``: a module taking a vector); ``None`` / ``""`` → ``None``."""
    if text is None or (isinstance(text, str) and text.strip() == ""):
        return None
    if isinstance(text, bool):
        raise PerfcastError(f"bad input size {text!r}: use C,H,W like 3,224,224")
    if isinstance(text, int):
        dims: tuple[int, ...] = (text,)
    elif isinstance(text, (tuple, list)):
        try:
            dims = tuple(_int(d) for d in text)
        except (TypeError, ValueError):
            raise PerfcastError(f"bad input size {text!r}: use C,H,W like 3,224,224") from None
    else:
        try:
            dims = tuple(int(x) for x in str(text).replace("x", ",").split(",") if x.strip())
        except ValueError:
            raise PerfcastError(f"bad input size {text!r}: use C,H,W like 3,224,224") from None
    if len(dims) == 1 and not isinstance(text, (tuple, list)) and image:
        dims = (3, dims[0], dims[0])
    if not dims or any(d <= 0 for d in dims):
        raise PerfcastError(f"bad input size {text!r}: every dimension must be positive")
    if any(d > MAX_SIZE for d in dims):
        raise PerfcastError(f"bad input size {text!r}: dimensions must be ≤ {MAX_SIZE:,}")
    return dims


def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise TypeError
    if isinstance(v, float) and not v.is_integer():
        raise ValueError
    return int(v)


def _positive(name: str, value: Any, unit: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PerfcastError(f"{name} must be a positive integer{unit}, got {value!r}")
    if value > MAX_SIZE:
        raise PerfcastError(f"{name} must be ≤ {MAX_SIZE:,}, got {value:,}")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise unknown_choice(name, value, allowed)


#: :meth:`Workload.of`'s precision when none is given: fp32, or fp16 for ``generate``.
_MODE_DEFAULT: Any = type("ModeDefault", (), {"__repr__": lambda self: "'fp32'"})()


# --------------------------------------------------------------------------- parallel layout
#: ``Workload.of`` / ``replace`` keywords of the layout and the :class:`Layout` field each sets.
LAYOUT_KEYWORDS = {"data_parallel": "data", "tensor_parallel": "tensor",
                   "pipeline_parallel": "pipeline", "micro_batch_size": "micro_batch",
                   "recompute": "recompute", "zero": "zero", "schedule": "schedule",
                   "flash_attention": "flash_attention"}
#: The command-line option of each layout field (what the error messages name).
LAYOUT_OPTIONS = {"data": "--data-parallel", "tensor": "--tensor-parallel",
                  "pipeline": "--pipeline-parallel", "micro_batch": "--micro-batch-size",
                  "recompute": "--recompute", "zero": "--zero", "schedule": "--schedule",
                  "flash_attention": "--flash-attention"}


@dataclass(frozen=True)
class Layout:
    """How a workload is spread over GPUs: ``data`` (D data-parallel replicas), ``tensor`` (T:
    Megatron tensor parallelism — the layers' matrices, attention heads and vocabulary split T
    ways; for ``--mode generate`` the serving devices), ``pipeline`` (P stages of consecutive
    layers), ``micro_batch`` (m samples per pipeline / gradient-accumulation micro-batch;
    ``None`` = the fastest that fits, chosen by the prediction), ``recompute``
    (:data:`RECOMPUTE`), ``zero`` (:data:`ZERO_STAGES`), ``schedule`` (:data:`SCHEDULES`) and
    ``flash_attention`` (:data:`FLASH_ATTENTION`; resolved per GPU by
    :func:`perfcast.parallel.model.fused_attention`). The GPUs are ``T·P·D``; the global batch
    (``Workload.batch_size``) is ``D · m ·`` the micro-batches each replica accumulates."""

    data: int = 1
    tensor: int = 1
    pipeline: int = 1
    micro_batch: int | None = None
    recompute: str = "none"
    zero: int = 0
    schedule: str = "1f1b"
    flash_attention: str = "auto"

    @property
    def gpus(self) -> int:
        return self.data * self.tensor * self.pipeline

    @property
    def parallel(self) -> bool:
        """More than one GPU, or a training option of the parallel model given."""
        return self != Layout()

    def non_default(self) -> list[str]:
        """The options (``--data-parallel`` …) given a value other than their default."""
        base = Layout()
        return [LAYOUT_OPTIONS[f.name] for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(base, f.name)]

    def validate(self) -> None:
        """Each field on its own (the rules between fields and the workload:
        :meth:`Workload.validate`; against the model's shape: :meth:`Workload.check_layout`)."""
        for name in ("data", "tensor", "pipeline"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise PerfcastError(f"{LAYOUT_OPTIONS[name]} must be a positive integer, "
                                    f"got {v!r}")
        if self.micro_batch is not None:
            _positive(LAYOUT_OPTIONS["micro_batch"], self.micro_batch)
        _choice("recompute", self.recompute, RECOMPUTE)
        if isinstance(self.zero, bool) or self.zero not in ZERO_STAGES:
            raise unknown_choice("ZeRO stage", self.zero, ZERO_STAGES)
        _choice("pipeline schedule", self.schedule, SCHEDULES)
        _choice("flash attention", self.flash_attention, FLASH_ATTENTION)
        if self.gpus > MAX_GPUS:
            raise PerfcastError(f"the layout spans T·P·D = {self.gpus:,} GPUs; at most "
                                f"{MAX_GPUS:,}")

    def to_dict(self) -> dict[str, Any]:
        return {"data_parallel": self.data, "tensor_parallel": self.tensor,
                "pipeline_parallel": self.pipeline, "micro_batch_size": self.micro_batch,
                "recompute": self.recompute, "zero": self.zero, "schedule": self.schedule,
                "flash_attention": self.flash_attention, "gpus": self.gpus}

    def __str__(self) -> str:
        m = f"m={self.micro_batch}" if self.micro_batch else "m=auto"
        flash = "" if self.flash_attention == "auto" else f" flash={self.flash_attention}"
        return (f"D={self.data} T={self.tensor} P={self.pipeline} {m} "
                f"recompute={self.recompute} zero={self.zero} {self.schedule}{flash}")


def _layout_of(layout: Layout | None, kw: dict[str, Any]) -> Layout:
    """``layout`` with the flat keywords of :data:`LAYOUT_KEYWORDS` in ``kw`` applied (popped)."""
    fields = {LAYOUT_KEYWORDS[k]: kw.pop(k) for k in list(kw) if k in LAYOUT_KEYWORDS}
    base = layout if layout is not None else Layout()
    if not isinstance(base, Layout):
        raise PerfcastError(f"layout must be a perfcast.workload.Layout, not "
                            f"{type(base).__name__}")
    return dataclasses.replace(base, **fields) if fields else base


# --------------------------------------------------------------------------- the workload
@dataclass(frozen=True)
class Workload:
    """One workload. Build it with :meth:`of` (parses and validates); derive variants with
    :meth:`replace` (validated too).

    * ``model`` — the :class:`ModelSpec`;
    * ``batch_size`` — samples per batch; ``None`` = the consumer's default (graphs: 1, or an
      ONNX file's own fixed batch; predictions: 1 for inference, 32 for a training step);
    * ``input_size`` — per-sample input shape (``(3, 224, 224)``; image models: C,H,W), ``None``
      = the model's default;
    * ``seq_len`` — tokens per sample (``hf:`` models), ``None`` = the default (128);
    * ``mode`` — :data:`MODES`; ``precision`` — :data:`PRECISIONS`, or ``None`` = the precision
      perfcast has measurements for on the chosen device (resolved by :mod:`perfcast.routing`);
    * ``optimizer`` — :data:`OPTIMIZERS` (training only; ignored in keys of inference), or
      ``None`` = not recorded (a dataset record that does not say which): graph keys and
      simulations then use :data:`DEFAULT_OPTIMIZER`, the static features encode "unknown";
    * ``input_len`` / ``output_len`` — ``--mode generate``: prompt and generated tokens per
      request (``batch_size`` requests at once, in every engine); ``engine`` — the serving
      engine (:data:`ENGINES`; ``None`` outside ``generate``); precisions
      :data:`GENERATE_PRECISIONS`;
    * ``n_batch`` / ``n_ubatch`` — ``--engine llama.cpp`` only: its logical and physical batch
      in tokens (``None`` = :data:`LLAMA_CPP_N_BATCH` and ``min(`` :data:`LLAMA_CPP_N_UBATCH`
      ``, n_batch)``, filled in by :func:`perfcast.generation.resolve`);
    * ``tf32`` — :data:`TF32_MODES`: what fp32 matmuls and convolutions run as on GPUs with TF32
      units (``default``: PyTorch's defaults; ``on``: NGC containers; ``off``);
    * ``layout`` — the :class:`Layout` over GPUs (training: data, tensor and pipeline
      parallelism, micro-batch, recomputation, ZeRO, schedule; ``generate``: tensor
      parallelism only). ``batch_size`` is then the *global* batch.

    A new option is one field here, its check in :meth:`validate` (with the modes it applies
    to), its entry in :meth:`to_dict` and, when it changes the traced graph, in :meth:`key`.
    """

    model: ModelSpec
    batch_size: int | None = None
    input_size: tuple[int, ...] | None = None
    seq_len: int | None = None
    mode: str = "infer"
    precision: str | None = "fp32"
    optimizer: str | None = DEFAULT_OPTIMIZER
    input_len: int | None = None
    output_len: int | None = None
    engine: str | None = None
    layout: Layout = field(default_factory=Layout)
    tf32: str = "default"
    n_batch: int | None = None
    n_ubatch: int | None = None

    @classmethod
    def of(cls, model: Any, *, batch_size: int | None = None, input_size: Any = None,
           seq_len: int | None = None, mode: str = "infer", precision: Any = _MODE_DEFAULT,
           optimizer: str | None = DEFAULT_OPTIMIZER,
           example_inputs: tuple | None = None, input_len: int | None = None,
           output_len: int | None = None, engine: str | None = None,
           layout: Layout | None = None, tf32: str | None = None,
           n_batch: int | None = None, n_ubatch: int | None = None,
           **layout_keywords: Any) -> Workload:
        """Parse ``model`` (a spec string, a :class:`ModelSpec` or an ``nn.Module``) and the
        options, and validate them. ``example_inputs`` belong to an ``nn.Module``. The layout is
        a :class:`Layout` or the keywords ``data_parallel``, ``tensor_parallel``,
        ``pipeline_parallel``, ``micro_batch_size``, ``recompute``, ``zero``, ``schedule``.
        ``--mode generate`` without an ``engine`` is served by :data:`DEFAULT_ENGINE`; the
        precision not given is fp32 (``generate``: fp16; ``None`` = chosen later, per device).
        ``n_batch`` / ``n_ubatch``: llama.cpp's logical and physical batch (tokens)."""
        if isinstance(model, Workload):
            raise PerfcastError("already a Workload: use .replace() to change it")
        unknown = sorted(set(layout_keywords) - set(LAYOUT_KEYWORDS))
        if unknown:
            raise PerfcastError(f"unknown workload keyword(s) {', '.join(unknown)}")
        lay = _layout_of(layout, dict(layout_keywords))
        if mode == "generate" and engine is None:
            engine = DEFAULT_ENGINE
        if precision is _MODE_DEFAULT:
            precision = "fp16" if mode == "generate" else "fp32"
        elif mode == "generate" and isinstance(precision, str) \
                and precision not in GENERATE_PRECISIONS \
                and precision.strip().upper() in GGUF_PRECISIONS:
            precision = precision.strip().upper()  # GGUF names: q4_k_m → Q4_K_M
        if isinstance(model, (str, ModelSpec)):
            spec = ModelSpec.parse(model)
            if example_inputs is not None:
                raise PerfcastError("example_inputs are for an nn.Module model, not a spec")
        elif _is_module(model):
            spec = ModelSpec.of_module(model, example_inputs)
        else:
            spec = ModelSpec.of_object(model, example_inputs)
        w = cls(model=spec, batch_size=batch_size,
                input_size=parse_input_size(input_size, image=spec.inputs == "image"),
                seq_len=seq_len, mode=mode, precision=precision, optimizer=optimizer,
                input_len=input_len, output_len=output_len, engine=engine, layout=lay,
                tf32="default" if tf32 is None else str(tf32).strip().lower(),
                n_batch=n_batch, n_ubatch=n_ubatch)
        w.validate()
        return w

    @classmethod
    def from_record(cls, rec: Any) -> Workload:
        """The workload a dataset record (or measurement-store row) was measured on: its
        ``model``, ``batch_size``, ``input_size``, ``seq_len``, ``mode``, ``precision`` and, for
        training, ``optimizer`` (an unknown or missing optimizer → ``None``, not recorded). Raises
        :class:`PerfcastError` when perfcast has no workload for it (e.g. ``fp64``)."""
        def get(key, default=None):
            try:
                v = rec[key]
            except (KeyError, IndexError, TypeError):
                return default
            if v is None or (isinstance(v, float) and v != v):
                return default
            try:  # pandas NA / NaT
                import pandas as pd

                if not isinstance(v, (str, tuple, list)) and pd.isna(v):
                    return default
            except (ImportError, TypeError, ValueError):
                pass
            return v

        spec = get("model")
        if not spec:
            raise PerfcastError("record has no model spec")
        precision = get("precision", "fp32")
        if precision not in PRECISIONS:
            raise PerfcastError(f"{spec}: precision {precision!r} has no perfcast workload "
                                f"(perfcast knows {', '.join(PRECISIONS)})")
        mode = get("mode", "infer")
        optimizer = get("optimizer")
        if mode != "train" or optimizer not in OPTIMIZERS:
            optimizer = None
        batch, seq = get("batch_size"), get("seq_len")
        return cls.of(str(spec), batch_size=int(batch) if batch is not None else None,
                      input_size=get("input_size"),
                      seq_len=int(float(seq)) if seq is not None and str(seq) != "" else None,
                      mode=str(mode), precision=str(precision), optimizer=optimizer)

    # ----------------------------------------------------------------------------- validation
    def validate(self) -> None:
        """Raise :class:`PerfcastError` (exit code 2) for anything invalid or inapplicable."""
        if self.batch_size is not None:
            _positive("batch size", self.batch_size)
        _choice("mode", self.mode, MODES)
        generate = self.mode == "generate"
        if self.precision is not None:
            if generate:
                if self.precision not in GENERATE_PRECISIONS:
                    raise unknown_choice("generation precision", self.precision,
                                         GENERATE_PRECISIONS)
            elif self.precision in GENERATE_PRECISIONS and self.precision not in PRECISIONS:
                raise PerfcastError(f"precision {self.precision} is weight-only quantization "
                                    f"for LLM serving (--mode generate); a model run takes "
                                    f"{', '.join(PRECISIONS)}")
            else:
                _choice("precision", self.precision, PRECISIONS)
        if self.optimizer is not None:
            _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("tf32", self.tf32, TF32_MODES)
        if self.tf32 != "default" and self.precision not in (None, "fp32"):
            raise PerfcastError(f"--tf32 {self.tf32} applies to --precision fp32 (it says how "
                                f"fp32 matmuls and convolutions run), not {self.precision}")
        self._validate_generation()
        self._validate_layout()
        if self.seq_len is not None:
            _positive("sequence length", self.seq_len, " (tokens)")
        if self.input_size is not None:
            if not self.input_size or any(isinstance(d, bool) or not isinstance(d, int)
                                          or d <= 0 or d > MAX_SIZE for d in self.input_size):
                raise PerfcastError(f"input size must be positive dimensions like 3,224,224, "
                                    f"got {self.input_size}")
        kind, label = self.model.inputs, self.model.text
        if kind == "image":
            if self.seq_len is not None:
                raise PerfcastError(f"{label} is an image model: it takes --input-size C,H,W, "
                                    f"not --seq-len")
            if self.input_size is not None and len(self.input_size) != 3:
                raise PerfcastError(f"{label} is an image model: its input size is C,H,W (three "
                                    f"numbers, e.g. 3,224,224), got "
                                    f"{','.join(map(str, self.input_size))}")
        elif kind == "tokens":
            if self.input_size is not None:
                raise PerfcastError(f"{label} is a text model: it takes --seq-len (tokens), not "
                                    f"--input-size")
        elif kind == "file":
            if self.input_size is not None and self.seq_len is not None:
                raise PerfcastError(f"{label}: give --input-size or --seq-len, not both (each "
                                    f"binds the ONNX file's symbolic input dimensions)")
        elif self.seq_len is not None:  # tensor: any per-sample shape, no sequence length
            raise PerfcastError(f"{label} takes --input-size (its per-sample input shape), not "
                                f"--seq-len")

    def _validate_generation(self) -> None:
        """``--mode generate``: an ``hf:`` model, token counts instead of input sizes, a known
        engine; outside it none of its options."""
        given = [name for name, v in (("--input-len", self.input_len),
                                      ("--output-len", self.output_len),
                                      ("--engine", self.engine), ("--n-batch", self.n_batch),
                                      ("--n-ubatch", self.n_ubatch)) if v is not None]
        if self.mode != "generate":
            if given:
                raise PerfcastError(f"{', '.join(given)} apply to --mode generate only")
            return
        if self.model.kind != "hf":
            raise PerfcastError(f"--mode generate serves Hugging Face decoder LLMs (hf:ID or "
                                f"hf:path/config.json), not {self.model.text!r}")
        for name, v in (("--input-len", self.input_len), ("--output-len", self.output_len)):
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise PerfcastError(f"{name} must be a positive integer, got {v!r}")
                if v > MAX_SIZE:
                    raise PerfcastError(f"{name} must be ≤ {MAX_SIZE:,}, got {v:,}")
        bad = [k for k, v in (("--input-size", self.input_size), ("--seq-len", self.seq_len))
               if v is not None]
        if bad:
            raise PerfcastError(f"{', '.join(bad)} do not apply to --mode generate (use "
                                f"--input-len / --output-len)")
        if self.engine is not None:
            _choice("engine", self.engine, ENGINES)
        if self.precision in GGUF_PRECISIONS and self.engine != "llama.cpp":
            raise PerfcastError(f"--precision {self.precision} is a GGUF format of llama.cpp "
                                f"(--engine llama.cpp); {self.engine or DEFAULT_ENGINE} takes "
                                f"fp16, bf16, fp32, int8 or int4")
        self._validate_llama_batches()

    def _validate_llama_batches(self) -> None:
        """``n_batch`` / ``n_ubatch`` (the one place they are checked): positive token counts,
        for ``--engine llama.cpp`` only, ``n_ubatch`` ≤ ``n_batch`` (the default ``n_batch``,
        :data:`LLAMA_CPP_N_BATCH`, when only ``n_ubatch`` is given)."""
        given = [(o, v) for o, v in (("--n-batch", self.n_batch), ("--n-ubatch", self.n_ubatch))
                 if v is not None]
        if not given:
            return
        engine = self.engine or DEFAULT_ENGINE
        if engine != "llama.cpp":
            what = {"--n-batch": "logical", "--n-ubatch": "physical"}
            raise PerfcastError(f"{' / '.join(o for o, _ in given)} "
                                f"{'is' if len(given) == 1 else 'are'} llama.cpp's "
                                f"{' / '.join(what[o] for o, _ in given)} batch (--engine "
                                f"llama.cpp); --engine {engine} takes --batch-size (concurrent "
                                f"requests) only")
        for o, v in given:
            _positive(o, v, " (tokens)")
        nb = self.n_batch if self.n_batch is not None else LLAMA_CPP_N_BATCH
        if self.n_ubatch is not None and self.n_ubatch > nb:
            raise PerfcastError(f"--n-ubatch {self.n_ubatch:,} is larger than --n-batch {nb:,}"
                                f"{'' if self.n_batch is not None else ' (the default)'}: "
                                f"llama.cpp's physical batch is at most its logical batch")

    def require_lengths(self, *names: str) -> None:
        """Raise the one-line error of a ``generate`` request without ``input_len`` /
        ``output_len`` (``names``: which of them this use needs; default both)."""
        for name in names or ("input_len", "output_len"):
            if getattr(self, name) is None:
                raise PerfcastError(f"--mode generate needs --{name.replace('_', '-')} (tokens)")

    def _validate_layout(self) -> None:
        """The layout's fields, and the rules between them and the rest of the request (those
        against the model's shape: :meth:`check_layout`)."""
        lay = self.layout
        if not isinstance(lay, Layout):
            raise PerfcastError(f"layout must be a perfcast.workload.Layout, not "
                                f"{type(lay).__name__}")
        lay.validate()
        if self.mode == "generate":
            others = [o for o in lay.non_default() if o != "--tensor-parallel"]
            if others:
                raise PerfcastError(f"{', '.join(others)} apply to --mode train only (--mode "
                                    f"generate takes --tensor-parallel)")
            if lay.tensor > MAX_SERVING_DEVICES:
                raise PerfcastError(f"--tensor-parallel must be ≤ {MAX_SERVING_DEVICES}, got "
                                    f"{lay.tensor}")
            return
        if self.mode != "train":
            given = lay.non_default()
            if given:
                also = (" (--tensor-parallel also to --mode generate)"
                        if "--tensor-parallel" in given else "")
                raise PerfcastError(f"{', '.join(given)} "
                                    f"{'applies' if len(given) == 1 else 'apply'} to --mode "
                                    f"train{also}, not --mode {self.mode}")
            return
        if lay.flash_attention != "auto" and self.model.kind != "hf":
            raise PerfcastError(f"--flash-attention is the attention kernel of an hf: "
                                f"transformer's layers; {self.model.text} has none to set")
        if (lay.tensor > 1 or lay.pipeline > 1) and self.model.kind != "hf":
            raise PerfcastError(f"tensor and pipeline parallelism split a transformer's layers "
                                f"(hf: models); {self.model.text} takes --data-parallel (and "
                                f"--zero, --micro-batch-size) only")
        if lay.pipeline == 1 and lay.schedule != "1f1b":
            raise PerfcastError(f"--schedule {lay.schedule} orders a pipeline's micro-batches; "
                                f"it needs --pipeline-parallel > 1")
        if lay.zero >= 2 and lay.pipeline > 1:
            raise PerfcastError(f"--zero {lay.zero} shards the gradients over the data-parallel "
                                f"replicas during the backward pass, which pipeline "
                                f"parallelism does not support (DeepSpeed refuses ZeRO-2/3 "
                                f"with pipeline stages); use --zero 1 or --pipeline-parallel 1")
        b, d, m = self.batch_size, lay.data, lay.micro_batch
        if b is not None:
            if m is not None and b % (d * m):
                raise PerfcastError(f"the global batch {b:,} (--batch-size) is not a multiple "
                                    f"of D·m = {d} × {m} = {d * m:,} (--data-parallel × "
                                    f"--micro-batch-size): each replica runs whole "
                                    f"micro-batches")
            if b % d:
                raise PerfcastError(f"the global batch {b:,} (--batch-size) does not divide "
                                    f"among --data-parallel {d} replicas")
            if lay.schedule == "interleaved" and m is not None \
                    and (b // (d * m)) % lay.pipeline:
                raise PerfcastError(f"--schedule interleaved needs the micro-batches per "
                                    f"replica (B / (D·m) = {b // (d * m)}) to be a multiple "
                                    f"of --pipeline-parallel {lay.pipeline} (Megatron's rule)")

    def check_layout(self, *, layers: int, heads: int, hidden: int, kv_heads: int | None = None,
                     gpus: int | None = None, name: str | None = None) -> None:
        """The layout against the model's shape (``layers`` transformer blocks, ``heads``
        attention heads of which ``kv_heads`` key/value heads, width ``hidden``) and, with
        ``gpus``, the GPUs one has: T divides the heads, the KV heads and the width, P divides
        the layers (each stage holds L/P; interleaved: L/(P·v)), T·P·D = ``gpus``. Exit 2
        naming the rule broken."""
        lay, label = self.layout, name or self.model.text
        t, p = lay.tensor, lay.pipeline
        if gpus is not None and lay.gpus != gpus:
            raise PerfcastError(f"the layout uses T·P·D = {t}·{p}·{lay.data} = {lay.gpus:,} "
                                f"GPUs, not the {gpus:,} of --gpus")
        if t > 1:
            if heads % t:
                ok = [d for d in range(1, heads + 1) if heads % d == 0 and hidden % d == 0]
                raise PerfcastError(f"--tensor-parallel {t} does not divide {label}'s {heads} "
                                    f"attention heads (each GPU holds heads / T; use one of "
                                    f"{', '.join(map(str, ok))})")
            if hidden % t:
                raise PerfcastError(f"--tensor-parallel {t} does not divide {label}'s hidden "
                                    f"size {hidden:,} (the column / row-parallel matrices are "
                                    f"split T ways)")
            if kv_heads and kv_heads != heads and kv_heads % t:
                raise PerfcastError(f"--tensor-parallel {t} does not divide {label}'s "
                                    f"{kv_heads} key/value heads (Megatron splits the query "
                                    f"groups T ways)")
        if p > layers:
            raise PerfcastError(f"--pipeline-parallel {p} is more stages than {label}'s "
                                f"{layers} layers")
        if layers % p:
            raise PerfcastError(f"--pipeline-parallel {p} does not divide {label}'s {layers} "
                                f"layers (each stage holds L / P of them)")
        if lay.schedule == "interleaved" and layers % (p * INTERLEAVED_CHUNKS):
            raise PerfcastError(f"--schedule interleaved gives each of the {p} stages "
                                f"{INTERLEAVED_CHUNKS} chunks: {label}'s {layers} layers must "
                                f"divide by P·{INTERLEAVED_CHUNKS} = {p * INTERLEAVED_CHUNKS}")

    def check_serving(self, arch: Any, *, input_len: int | None = None) -> None:
        """``--mode generate`` against the LLM's shape (``arch``: an
        :class:`~perfcast.llm.arch.LLMArch` — ``model_id``, ``layers``, ``heads``,
        ``kv_heads``, ``max_positions``): the context (``input_len``, default the request's, +
        ``output_len``) within its positions; tensor parallelism (every engine but llama.cpp)
        dividing the attention heads and dividing or being a multiple of the KV heads (vLLM's
        rule); llama.cpp's layer split no more devices than layers. Exit 2 naming the rule."""
        i = self.input_len if input_len is None else input_len
        o = self.output_len or 0
        if arch.max_positions and i is not None and i + o > arch.max_positions:
            raise PerfcastError(f"{arch.model_id} holds at most {arch.max_positions:,} "
                                f"positions; input {i:,} + output {o:,} = {i + o:,} tokens")
        tp = self.layout.tensor
        if self.engine == "llama.cpp":
            if tp > arch.layers:
                raise PerfcastError(f"llama.cpp splits {arch.model_id}'s {arch.layers} layers "
                                    f"across devices; --tensor-parallel {tp} is more devices "
                                    f"than layers")
            return
        ok = [t for t in range(1, MAX_SERVING_DEVICES + 1) if arch.heads % t == 0
              and (arch.kv_heads % t == 0 if arch.kv_heads >= t else t % arch.kv_heads == 0)]
        if arch.heads % tp:
            raise PerfcastError(f"--tensor-parallel {tp} does not divide {arch.model_id}'s "
                                f"{arch.heads} attention heads (use one of "
                                f"{', '.join(map(str, ok))})")
        if tp not in ok:
            raise PerfcastError(f"--tensor-parallel {tp} neither divides {arch.model_id}'s "
                                f"{arch.kv_heads} KV heads nor is a multiple of them (use one "
                                f"of {', '.join(map(str, ok))})")

    def replace(self, **changes: Any) -> Workload:
        """A validated copy with ``changes`` (``input_size`` may be a string; the layout's
        keywords — ``tensor_parallel`` … — change the layout)."""
        if "input_size" in changes:
            changes["input_size"] = parse_input_size(changes["input_size"],
                                                     image=self.model.inputs == "image")
        if any(k in LAYOUT_KEYWORDS for k in changes):
            changes["layout"] = _layout_of(changes.pop("layout", self.layout), changes)
        w = dataclasses.replace(self, **changes)
        w.validate()
        return w

    def single_device(self) -> Workload:
        """This workload without its layout: what one device runs (the same global batch)."""
        return self if self.layout == Layout() else self.replace(layout=Layout())

    # ----------------------------------------------------------------------------- views
    @property
    def spec(self) -> str:
        """The model spec as given (``timm:resnet50``, a path, a class name for modules)."""
        return self.model.text

    @property
    def train(self) -> bool:
        return self.mode == "train"

    @property
    def generate(self) -> bool:
        return self.mode == "generate"

    @property
    def tensor_parallel(self) -> int:
        """T: tensor-parallel GPUs (training) or serving devices (``generate``)."""
        return self.layout.tensor

    @property
    def gpus(self) -> int:
        """GPUs the workload runs on (T·P·D)."""
        return self.layout.gpus

    @property
    def distributed(self) -> bool:
        """A training workload over more than one GPU (or with a parallel-training option)."""
        return self.mode == "train" and self.layout.parallel

    @property
    def train_optimizer(self) -> str | None:
        """The optimizer when training (``None`` if not recorded), else ``None``."""
        return self.optimizer if self.mode == "train" else None

    @property
    def run_optimizer(self) -> str | None:
        """The optimizer a training run uses (:data:`DEFAULT_OPTIMIZER` when not recorded), else
        ``None`` — what graph keys, simulations and measurements use."""
        return (self.optimizer or DEFAULT_OPTIMIZER) if self.mode == "train" else None

    @property
    def input_size_text(self) -> str | None:
        """``"3,224,224"`` or ``None`` (the form stores and CSV files keep)."""
        return ",".join(map(str, self.input_size)) if self.input_size else None

    def key(self) -> str:
        """Stable hex key of the graph of this workload (the graph cache's key; cheap — imports
        no framework). Includes the graph format, framework versions and, for files, the file's
        size and modification time."""
        if not self.model.cacheable:
            raise PerfcastError("an in-process nn.Module has no cache key")
        if self.precision is None:
            raise PerfcastError("the workload's precision is not chosen yet")
        from perfcast.graph import GRAPH_FORMAT_VERSION

        if self.mode not in GRAPH_MODES or self.layout != Layout():
            raise PerfcastError(f"a graph is traced for one device in --mode infer or train; "
                                f"this workload is {self}")
        doc = {"spec": self.model.text, "kind": self.model.kind, "batch": self.batch_size,
               "input": list(self.input_size) if self.input_size else None, "seq": self.seq_len,
               "mode": self.mode, "precision": self.precision,
               "optimizer": self.run_optimizer, "format": GRAPH_FORMAT_VERSION,
               "versions": _versions(), "file": self.model.file_id()}
        packages = spec_kind(self.model.kind).packages
        if packages:  # the exporter and its framework (only these kinds: other keys unchanged)
            doc["exporter"] = _versions(packages)
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:24]

    def file_stem(self) -> str:
        """A file name for this workload's outputs: ``timm-resnet50_infer_fp32_b8`` (the spec's
        name part without folders or punctuation, then mode, precision, batch)."""
        import re

        text = self.model.text.rstrip("/\\")
        name = text.split(":", 1)[-1] if spec_kind(self.model.kind).inputs != "file" \
            or self.model.kind == "jax" else text
        name = re.split(r"[/\\]", name)[-1]
        for suffix in (".onnx", ".json", ".keras", ".pdmodel", ".pb"):
            name = name.removesuffix(suffix)
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{self.model.kind}-{name}").strip("-.")
        parts = [name or "model", self.mode, self.precision or "auto",
                 f"b{self.batch_size}" if self.batch_size else None]
        return "_".join(p for p in parts if p)

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-able dict (``model`` is the spec text; ``input_size`` a list or None); the
        generation fields in ``--mode generate``, the layout's when it is not one device's."""
        d = {"model": self.model.text, "batch_size": self.batch_size,
             "input_size": list(self.input_size) if self.input_size else None,
             "seq_len": self.seq_len, "mode": self.mode, "precision": self.precision,
             "optimizer": self.train_optimizer, "tf32": self.tf32}
        if self.mode == "generate":
            d.update(input_len=self.input_len, output_len=self.output_len, engine=self.engine,
                     tensor_parallel=self.layout.tensor)
            if self.engine == "llama.cpp":
                d.update(n_batch=self.n_batch, n_ubatch=self.n_ubatch)
        elif self.layout != Layout():
            d.update(self.layout.to_dict())
        return d

    def __str__(self) -> str:
        if self.mode == "generate":
            size = f"{self.input_len or '?'} → {self.output_len or '?'} tokens, {self.engine}"
            if self.n_batch is not None or self.n_ubatch is not None:
                size += f" n_batch {self.n_batch or '?'} n_ubatch {self.n_ubatch or '?'}"
        else:
            size = (f"input {self.input_size_text}" if self.input_size else
                    f"seq {self.seq_len}" if self.seq_len else "default input")
        lay = f", {self.layout}" if self.layout != Layout() else ""
        return (f"{self.model.text} ({self.mode}, {self.precision or 'auto precision'}, "
                f"batch {self.batch_size or 'default'}, {size}{lay})")


def _is_module(obj: Any) -> bool:
    try:
        from torch import nn
    except ImportError:
        return False
    return isinstance(obj, nn.Module)


def _root_module(obj: Any) -> str:
    return (getattr(type(obj), "__module__", "") or "").split(".", 1)[0]


def object_kind(obj: Any, example_inputs: tuple | None = None) -> str | None:
    """The in-process spec kind of ``obj`` without importing any framework: ``nn.Module``,
    ``keras.Model`` (a Keras model), ``paddle.Layer`` (a ``paddle.nn.Layer``), ``jax.function``
    (a Flax / Equinox module, or any other callable whose example inputs are JAX or NumPy
    arrays, ``jax.ShapeDtypeStruct`` s or shape tuples), else ``None``."""
    import sys

    if _is_module(obj):
        return "nn.Module"
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(obj, getattr(keras, "Model", ())):
        return "keras.Model"
    paddle = sys.modules.get("paddle")
    if paddle is not None and isinstance(obj, getattr(getattr(paddle, "nn", None), "Layer", ())):
        return "paddle.Layer"
    if not callable(obj):
        return None
    if _root_module(obj) in ("flax", "equinox") or any(
            c.__module__.split(".", 1)[0] in ("flax", "equinox") for c in type(obj).__mro__):
        return "jax.function"
    first = next(iter(example_inputs), None) if example_inputs else None
    if first is not None and _root_module(first) in ("jax", "jaxlib", "numpy"):
        return "jax.function"
    if example_inputs and all(_is_shape(x) for x in example_inputs):
        return "jax.function"  # a plain callable with shapes: only the JAX frontend takes one
    return None


def _is_shape(x: Any) -> bool:
    return isinstance(x, (tuple, list)) and bool(x) and all(
        isinstance(d, int) and not isinstance(d, bool) for d in x)


@functools.lru_cache(maxsize=None)
def _versions(packages: tuple[str, ...] = ("torch", "timm", "transformers", "onnx", "perfcast")
              ) -> tuple[str, ...]:
    """Versions of the libraries a graph depends on (part of every graph key)."""
    from importlib import metadata

    out = []
    for pkg in packages:
        try:
            out.append(f"{pkg}={metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            out.append(f"{pkg}=none")
    return tuple(out)


__all__ = ["DEFAULT_ENGINE", "DEFAULT_OPTIMIZER", "ENGINES", "FLASH_ATTENTION",
           "GENERATE_PRECISIONS",
           "GGUF_PRECISIONS", "GRAPH_MODES", "LLAMA_CPP_N_BATCH", "LLAMA_CPP_N_UBATCH",
           "INPUT_KINDS", "INTERLEAVED_CHUNKS", "LAYOUT_KEYWORDS", "LAYOUT_OPTIONS", "Layout",
           "MAX_GPUS", "MAX_SIZE", "MODES", "ModelSpec", "OPTIMIZERS", "PRECISIONS", "RECOMPUTE",
           "SCHEDULES", "SpecKind", "Workload", "ZERO_STAGES", "file_kind", "object_kind",
           "EVAL_SPLITS", "EVAL_TASKS", "OBJECTIVES", "PREDICTOR_KINDS", "PRETRAIN_METHODS",
           "RISKS", "TRAIN_RECIPES", "TRANSFER_RECIPES",
           "parse_input_size", "register_spec_kind", "spec_kind", "spec_kinds"]
