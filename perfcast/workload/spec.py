"""Model specs: the registry of spec kinds and the inputs their models take, :class:`ModelSpec`
(one parse of a spec string, file or in-process object) and input sizes."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import ModelSpecError, PerfcastError
from perfcast.workload.choices import INPUT_KINDS, MAX_SIZE
from perfcast.workload.layout import _int


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

    @property
    def canonical(self) -> str:
        """The spec as the training records name it: ``kind:name`` for a model of a zoo
        (``resnet50`` and ``tv:resnet50`` → ``timm:resnet50``, ``torchvision:resnet50``); the
        text as given for files and in-process models."""
        k = spec_kind(self.kind)
        if k.in_process or self.kind in ("onnx", "module") or file_kind(self.text) is not None:
            return self.text
        return f"{self.kind}:{self.name}"

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
