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

#: ``infer``: one forward pass (no grad); ``train``: forward + loss + backward + optimizer step.
MODES = ("infer", "train")
#: ``amp`` = float16 autocast with fp32 weights; ``fp16`` / ``bf16`` = the whole model converted.
PRECISIONS = ("fp32", "amp", "fp16", "bf16")
#: Training optimizers (torch.optim): SGD, SGD with momentum 0.9, Adam, AdamW — and ``none``:
#: forward + backward without an optimizer step (what NeuSight and others label "training").
OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw", "none")
DEFAULT_OPTIMIZER = "sgd-momentum"
#: Largest batch / dimension / sequence length accepted (a 32-bit signed int, as torch sizes).
MAX_SIZE = 2**31 - 1
#: What a spec kind's models take as input.
INPUT_KINDS = ("image", "tokens", "tensor", "file")


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
def parse_input_size(text: Any) -> tuple[int, ...] | None:
    """Per-sample input shape: ``"3,224,224"`` / ``"3x224x224"`` / ``(3, 224, 224)`` → tuple (a
    tuple or list is taken as the shape, even of one dimension); a single ``"224"`` or ``224``
    → the square image ``(3, 224, 224)``; ``None`` / ``""`` → ``None``."""
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
    if len(dims) == 1 and not isinstance(text, (tuple, list)):
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
      simulations then use :data:`DEFAULT_OPTIMIZER`, the static features encode "unknown".
    """

    model: ModelSpec
    batch_size: int | None = None
    input_size: tuple[int, ...] | None = None
    seq_len: int | None = None
    mode: str = "infer"
    precision: str | None = "fp32"
    optimizer: str | None = DEFAULT_OPTIMIZER

    @classmethod
    def of(cls, model: Any, *, batch_size: int | None = None, input_size: Any = None,
           seq_len: int | None = None, mode: str = "infer", precision: str | None = "fp32",
           optimizer: str | None = DEFAULT_OPTIMIZER,
           example_inputs: tuple | None = None) -> Workload:
        """Parse ``model`` (a spec string, a :class:`ModelSpec` or an ``nn.Module``) and the
        options, and validate them. ``example_inputs`` belong to an ``nn.Module``."""
        if isinstance(model, Workload):
            raise PerfcastError("already a Workload: use .replace() to change it")
        if isinstance(model, (str, ModelSpec)):
            spec = ModelSpec.parse(model)
            if example_inputs is not None:
                raise PerfcastError("example_inputs are for an nn.Module model, not a spec")
        elif _is_module(model):
            spec = ModelSpec.of_module(model, example_inputs)
        else:
            spec = ModelSpec.of_object(model, example_inputs)
        w = cls(model=spec, batch_size=batch_size, input_size=parse_input_size(input_size),
                seq_len=seq_len, mode=mode, precision=precision, optimizer=optimizer)
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
        if self.precision is not None:
            _choice("precision", self.precision, PRECISIONS)
        if self.optimizer is not None:
            _choice("optimizer", self.optimizer, OPTIMIZERS)
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

    def replace(self, **changes: Any) -> Workload:
        """A validated copy with ``changes`` (``input_size`` may be a string)."""
        if "input_size" in changes:
            changes["input_size"] = parse_input_size(changes["input_size"])
        w = dataclasses.replace(self, **changes)
        w.validate()
        return w

    # ----------------------------------------------------------------------------- views
    @property
    def spec(self) -> str:
        """The model spec as given (``timm:resnet50``, a path, a class name for modules)."""
        return self.model.text

    @property
    def train(self) -> bool:
        return self.mode == "train"

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
        """Flat JSON-able dict (``model`` is the spec text; ``input_size`` a list or None)."""
        return {"model": self.model.text, "batch_size": self.batch_size,
                "input_size": list(self.input_size) if self.input_size else None,
                "seq_len": self.seq_len, "mode": self.mode, "precision": self.precision,
                "optimizer": self.train_optimizer}

    def __str__(self) -> str:
        size = (f"input {self.input_size_text}" if self.input_size else
                f"seq {self.seq_len}" if self.seq_len else "default input")
        return (f"{self.model.text} ({self.mode}, {self.precision or 'auto precision'}, "
                f"batch {self.batch_size or 'default'}, {size})")


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


__all__ = ["DEFAULT_OPTIMIZER", "INPUT_KINDS", "MAX_SIZE", "MODES", "ModelSpec", "OPTIMIZERS",
           "PRECISIONS", "SpecKind", "Workload", "file_kind", "object_kind", "parse_input_size",
           "register_spec_kind", "spec_kind", "spec_kinds"]
