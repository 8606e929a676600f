"""The :class:`Workload`: one request's model, batch, shapes, mode, precision, optimizer,
serving fields and :class:`~perfcast.workload.layout.Layout`, parsed and validated in one
place, and its graph-cache key."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.workload.choices import (
    DEFAULT_ENGINE,
    DEFAULT_OPTIMIZER,
    GENERATE_PRECISIONS,
    GGUF_PRECISIONS,
    GRAPH_MODES,
    HF_DEFAULT_OPTIMIZER,
    OPTIMIZERS,
    PRECISIONS,
)
from perfcast.workload.checks import WorkloadChecks
from perfcast.workload.finetune import parse_targets
from perfcast.workload.layout import LAYOUT_KEYWORDS, Layout, _layout_of
from perfcast.workload.spec import (
    ModelSpec,
    _is_module,
    _versions,
    parse_input_size,
    spec_kind,
)



#: :meth:`Workload.of`'s precision when none is given: fp32, or fp16 for ``generate``.
_MODE_DEFAULT: Any = type("ModeDefault", (), {"__repr__": lambda self: "'fp32'"})()
#: :meth:`Workload.of`'s (and :meth:`Workload.replace`'s) optimizer when none is given: the
#: model's source decides (:func:`default_optimizer`). ``None`` is something else: a dataset
#: record that does not say which optimizer its run used.
OPTIMIZER_NOT_GIVEN: Any = type("OptimizerNotGiven", (), {
    "__repr__": lambda self: "'adamw for hf: training, else sgd-momentum'"})()


def default_optimizer(kind: str, mode: str) -> str:
    """The optimizer of a workload whose request names none, by the source of its model
    (``kind``, :attr:`ModelSpec.kind`): :data:`HF_DEFAULT_OPTIMIZER` (AdamW) for ``hf:``
    models in ``--mode train`` — as Hugging Face Trainer (``adamw_torch``), Megatron-LM,
    llm-foundry and torchtitan train them — else :data:`DEFAULT_OPTIMIZER` (SGD with
    momentum: timm's and torchvision's reference recipes, and the measured vision data)."""
    return HF_DEFAULT_OPTIMIZER if kind == "hf" and mode == "train" else DEFAULT_OPTIMIZER



# --------------------------------------------------------------------------- the workload
@dataclass(frozen=True)
class Workload(WorkloadChecks):
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
      ``optimizer_defaulted`` — the request named none and :func:`default_optimizer` chose it
      (AdamW for ``hf:`` training, else SGD with momentum; the answer's notes say so);
    * ``input_len`` / ``output_len`` — ``--mode generate``: prompt and generated tokens per
      request (``batch_size`` requests at once, in every engine); ``engine`` — the serving
      engine (:data:`ENGINES`; ``None`` outside ``generate``); precisions
      :data:`GENERATE_PRECISIONS`;
    * ``n_batch`` / ``n_ubatch`` — ``--engine llama.cpp`` only: its logical and physical batch
      in tokens (``None`` = :data:`LLAMA_CPP_N_BATCH` and ``min(`` :data:`LLAMA_CPP_N_UBATCH`
      ``, n_batch)``, filled in by :func:`perfcast.generation.resolve`);
    * ``kv_cache_dtype`` — ``--mode generate``: the KV cache's element type
      (:data:`KV_CACHE_DTYPES`; ``None`` / ``auto`` = the model's 16-bit type; ``fp8`` in
      :data:`FP8_KV_ENGINES`);
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
    kv_cache_dtype: str | None = None
    #: ``--finetune`` (:mod:`perfcast.workload.finetune`): ``None`` (a training step of the
    #: model as given), ``full``, ``lora`` or ``qlora``; the adapters' rank and projections
    finetune: str | None = None
    lora_rank: int | None = None
    lora_targets: tuple[str, ...] | None = None
    #: the optimizer was not given: :func:`default_optimizer` chose it (not part of the
    #: workload's identity — the optimizer is)
    optimizer_defaulted: bool = field(default=False, compare=False, repr=False)

    @classmethod
    def of(cls, model: Any, *, batch_size: int | None = None, input_size: Any = None,
           seq_len: int | None = None, mode: str = "infer", precision: Any = _MODE_DEFAULT,
           optimizer: Any = OPTIMIZER_NOT_GIVEN,
           example_inputs: tuple | None = None, input_len: int | None = None,
           output_len: int | None = None, engine: str | None = None,
           layout: Layout | None = None, tf32: str | None = None,
           n_batch: int | None = None, n_ubatch: int | None = None,
           kv_cache_dtype: str | None = None,
           finetune: str | None = None, lora_rank: int | None = None,
           lora_targets: Any = None, **layout_keywords: Any) -> Workload:
        """Parse ``model`` (a spec string, a :class:`ModelSpec` or an ``nn.Module``) and the
        options, and validate them. ``example_inputs`` belong to an ``nn.Module``. The layout is
        a :class:`Layout` or the keywords ``data_parallel``, ``tensor_parallel``,
        ``pipeline_parallel``, ``micro_batch_size``, ``recompute``, ``zero``, ``schedule``.
        ``--mode generate`` without an ``engine`` is served by :data:`DEFAULT_ENGINE`; the
        precision not given is fp32 (``generate``: fp16; ``None`` = chosen later, per device);
        the optimizer not given is the model's source's (:func:`default_optimizer`: AdamW for
        ``hf:`` training, else SGD with momentum; ``None`` = not recorded, a dataset record's).
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
        defaulted = optimizer is OPTIMIZER_NOT_GIVEN
        if defaulted:
            optimizer = default_optimizer(spec.kind, mode)
        w = cls(model=spec, batch_size=batch_size,
                input_size=parse_input_size(input_size, image=spec.inputs == "image"),
                seq_len=seq_len, mode=mode, precision=precision, optimizer=optimizer,
                input_len=input_len, output_len=output_len, engine=engine, layout=lay,
                tf32="default" if tf32 is None else str(tf32).strip().lower(),
                n_batch=n_batch, n_ubatch=n_ubatch,
                kv_cache_dtype=None if kv_cache_dtype == "auto" else kv_cache_dtype,
                finetune=finetune, lora_rank=lora_rank,
                lora_targets=parse_targets(lora_targets), optimizer_defaulted=defaulted)
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

    # ----------------------------------------------------------------------------- validation: perfcast.workload.checks

    def replace(self, **changes: Any) -> Workload:
        """A validated copy with ``changes`` (``input_size`` may be a string; the layout's
        keywords — ``tensor_parallel`` … — change the layout). An optimizer the request did
        not give follows a change of mode or model (:func:`default_optimizer`); one given in
        ``changes`` is given (:data:`OPTIMIZER_NOT_GIVEN`: the default again)."""
        if "optimizer" in changes:
            changes["optimizer_defaulted"] = changes["optimizer"] is OPTIMIZER_NOT_GIVEN
        elif self.optimizer_defaulted and ("mode" in changes or "model" in changes):
            changes["optimizer"], changes["optimizer_defaulted"] = OPTIMIZER_NOT_GIVEN, True
        if changes.get("optimizer") is OPTIMIZER_NOT_GIVEN:
            changes["optimizer"] = default_optimizer(
                changes.get("model", self.model).kind, changes.get("mode", self.mode))
        if "input_size" in changes:
            changes["input_size"] = parse_input_size(changes["input_size"],
                                                     image=self.model.inputs == "image")
        if any(k in LAYOUT_KEYWORDS for k in changes):
            changes["layout"] = _layout_of(changes.pop("layout", self.layout), changes)
        if "lora_targets" in changes:
            changes["lora_targets"] = parse_targets(changes["lora_targets"])
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
        """A training workload over more than one GPU (or with a parallel-training option, or
        fine-tuned with ``--finetune``: the per-layer transformer arithmetic answers both)."""
        return self.mode == "train" and (self.layout.parallel or self.finetune is not None)

    @property
    def train_optimizer(self) -> str | None:
        """The optimizer when training (``None`` if not recorded), else ``None``."""
        return self.optimizer if self.mode == "train" else None

    @property
    def run_optimizer(self) -> str | None:
        """The optimizer a training run uses (:data:`DEFAULT_OPTIMIZER` when not recorded), else
        ``None`` — what graph keys, simulations and measurements use."""
        return (self.optimizer or DEFAULT_OPTIMIZER) if self.mode == "train" else None

    def optimizer_notes(self) -> list[str]:
        """What ``notes`` say of the optimizer: that of an ``hf:`` model's training step when
        the request named none (:func:`default_optimizer`), else nothing (the default of the
        other models, SGD with momentum, is what their measured data ran)."""
        if not (self.optimizer_defaulted and self.mode == "train"
                and self.optimizer == HF_DEFAULT_OPTIMIZER):
            return []
        return [f"optimizer: {self.optimizer} (not given: the default for hf: models, as "
                f"Hugging Face Trainer, Megatron-LM and llm-foundry train them; --optimizer "
                f"to choose)"]

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
            if self.kv_cache_dtype not in (None, "auto"):
                d.update(kv_cache_dtype=self.kv_cache_dtype)
        elif self.layout != Layout():
            d.update(self.layout.to_dict())
        if self.finetune is not None:
            d.update(finetune=self.finetune, lora_rank=self.lora_rank,
                     lora_targets=list(self.lora_targets) if self.lora_targets else None)
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
