"""TensorFlow / Keras frontend: a Keras model, a ``.keras`` file, a TensorFlow SavedModel
directory or a ``keras:`` application → ONNX with ``tf2onnx`` → :class:`~perfcast.graph.ModelGraph`
(see :mod:`perfcast.frontends.exported`). Needs ``pip install 'perfcast[tensorflow]'``.

Weights are never read:

* a ``.keras`` file is a zip archive; only its ``config.json`` (the architecture) is read and
  the model is rebuilt from it with Keras's own initializers (``model.weights.h5`` is never
  opened; ``safe_mode`` stays on, so a file that needs arbitrary code to load is refused);
* a SavedModel is loaded with ``experimental_skip_checkpoint`` (the ``variables/`` folder is
  not read) and its ``serving_default`` signature (or its only one) is exported;
* ``keras:NAME`` builds ``keras.applications.NAME(weights=None)`` (:mod:`perfcast.zoo.keras_apps`).

Every floating-point variable is then set to deterministic random values in [0.5, 1.5):
tf2onnx folds operations whose constant operand is trivial (it drops the ``Add`` of an
all-zero bias), so values that are never 0 or 1 keep the exported graph the model's full graph.

Layout: Keras computes channels-last; every 4-D input of a channels-last model (for a
SavedModel: a 4-D input whose last dimension is 1–4 channels) is exported channels-first
(``inputs_as_nchw``), so the graph's input is ``N,C,H,W`` and ``--input-size C,H,W`` means what
it means for every other image model. The batch dimension is exported symbolic and bound by
``--batch-size`` (default 1), other symbolic dimensions by ``--input-size`` / ``--seq-len``, as
for ONNX files; the shape arithmetic tf2onnx leaves (Keras attention's einsums) is then folded
(:mod:`perfcast.frontends.shape_folding`). One export serves every batch size of a spec in a
process (:func:`perfcast.frontends.exported.memo_export`). TensorFlow's ``Erfc`` (Keras's exact
GELU), which tf2onnx leaves unconverted, is converted as ``1 - Erf``.

Memory: TensorFlow's freezing of the graph (inside tf2onnx) peaks near 10 GB of RAM for a
BERT-base-sized Keras model (≈ 20× its weights); tf2onnx's own growth with every optimizer pass
is avoided (:func:`_patch_tf2onnx`).
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

from perfcast.errors import ModelSpecError, PerfcastError, reraise_interrupt
from perfcast.frontends.exported import (
    export_failed,
    first_line,
    graph_from_proto,
    leading_dim,
    memo_export,
    quiet,
    require,
)
from perfcast.graph import ModelGraph

#: ONNX opset tf2onnx exports to (its newest tested opset).
OPSET = 17
#: Range of the random values every floating-point variable gets before the export.
RANDOM_RANGE = (0.5, 1.5)


def import_tf(what: str) -> tuple[Any, Any, Any]:
    """``(tensorflow, keras, tf2onnx)``, imported quietly (TensorFlow's C++ log is set to errors
    only, Keras to the TensorFlow backend unless the environment chose one); one-line error
    naming the extra when missing, or when Keras runs on another backend."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    with quiet():
        _triton_before_tensorflow()
        _paddle_before_tensorflow()
        tf = require("tensorflow", "tensorflow", what)
        keras = require("keras", "tensorflow", what)
        tf2onnx = require("tf2onnx", "tensorflow", what)
    _patch_tf2onnx(tf2onnx)
    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise PerfcastError(f"{what}: Keras runs on the {backend} backend here; tf2onnx exports "
                            f"TensorFlow graphs — set KERAS_BACKEND=tensorflow")
    return tf, keras, tf2onnx


def _triton_before_tensorflow() -> None:
    """Load Triton (torch's kernel compiler, imported by ``torch._dynamo``) before TensorFlow:
    Triton's ``libtriton`` loaded *after* TensorFlow crashes the process (both bundle LLVM; seen
    with tensorflow-cpu 2.21 and the triton of torch 2.14). When TensorFlow is already loaded
    and Triton is not, Triton is marked unavailable (``sys.modules["triton"] = None``) so torch
    runs without it — perfcast only traces on the CPU and never compiles kernels."""
    import sys

    if "triton" in sys.modules:
        return
    if sys.modules.get("tensorflow") is not None:
        sys.modules["triton"] = None  # type: ignore[assignment]
        return
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - not installed / not loadable: nothing to order
        pass


def _paddle_before_tensorflow() -> None:
    """Load PaddlePaddle and paddle2onnx before TensorFlow when they are installed:
    PaddlePaddle's ``libpaddle`` loaded *after* TensorFlow crashes the process in its static
    initialisers, and paddle2onnx's native module loaded after it crashes in its first export
    (TensorFlow's protobuf symbols take the place of the ones they bundle; seen with
    tensorflow-cpu 2.21, paddlepaddle 3.3.1 and paddle2onnx 2.0.1). The other order works.
    Costs ≈ 1–2 s, only when the paddle extra is installed too and not loaded yet."""
    import importlib
    import importlib.util
    import sys

    if sys.modules.get("tensorflow") is not None:
        return
    os.environ.setdefault("GLOG_minloglevel", "2")
    for name in ("paddle", "paddle2onnx"):
        if name in sys.modules:
            continue
        try:
            if importlib.util.find_spec(name) is None:
                return
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - not loadable: TensorFlow alone still works
            return


def randomize(variables, seed: int = 0) -> int:
    """Assign deterministic random values in :data:`RANDOM_RANGE` to every floating-point
    variable (Keras or TensorFlow); returns how many were set."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = 0
    for v in variables:
        dtype = np.dtype(getattr(v.dtype, "as_numpy_dtype", v.dtype))
        if not np.issubdtype(dtype, np.floating):
            continue
        shape = tuple(int(d) for d in v.shape)
        v.assign(rng.uniform(*RANDOM_RANGE, size=shape).astype(dtype))
        n += 1
    return n


# ---------------------------------------------------------------------------------- Keras


def _spec_of(tf, x: Any, name: str, batch: int | None):
    """A ``tf.TensorSpec`` with batch ``batch`` (``None``: symbolic) from an example input: a
    ``TensorSpec``, an array / tensor (its shape and dtype) or a shape tuple (float32)."""
    if isinstance(x, tf.TensorSpec):
        shape, dtype = tuple(x.shape), x.dtype
    elif hasattr(x, "shape") and hasattr(x, "dtype"):
        shape, dtype = tuple(x.shape), tf.as_dtype(getattr(x.dtype, "name", str(x.dtype)))
    elif isinstance(x, (tuple, list)) and all(isinstance(d, int) or d is None for d in x):
        shape, dtype = tuple(x), tf.float32
    else:
        raise PerfcastError(f"example input {name} must be an array, a tf.TensorSpec or a shape "
                            f"tuple, not {type(x).__name__}")
    if not shape:
        raise PerfcastError(f"example input {name} has no batch dimension (shape ())")
    return tf.TensorSpec((batch, *shape[1:]), dtype, name=name)


def _keras_specs(tf, model, example_inputs, batch: int | None) -> list:
    if example_inputs is not None:
        return [_spec_of(tf, x, f"input_{i}", batch) for i, x in enumerate(example_inputs)]
    try:
        inputs = list(model.inputs)
    except (AttributeError, ValueError):
        inputs = []
    if not inputs:
        raise PerfcastError(f"Keras model {getattr(model, 'name', '')!r} has no input layer "
                            f"(a subclassed or unbuilt model): give example_inputs (shapes)")
    return [tf.TensorSpec((batch, *tuple(t.shape)[1:]), tf.as_dtype(str(t.dtype)),
                          name=f"input_{i}") for i, t in enumerate(inputs)]


def _patch_tf2onnx(tf2onnx: Any) -> None:
    """Keep tf2onnx 1.17's memory flat: after every optimizer it rewrites each node's
    ``NodeProto`` in place (``del attribute[:]`` then ``extend``), and with protobuf's upb
    backend the removed attributes stay in the message's arena — one more copy of every
    weight per optimizer pass (≈ 36 copies: 21 GB for a BERT-base Keras model). A constant's
    node gets a fresh ``NodeProto`` before each rewrite, so the old copy is freed. Applied
    once, only to ``tf2onnx.graph.Node.update_proto``; the graph it builds is unchanged."""
    from onnx import NodeProto

    node_cls = getattr(getattr(tf2onnx, "graph", None), "Node", None)
    original = getattr(node_cls, "update_proto", None)
    if original is None or getattr(original, "_perfcast", False):
        return

    def update_proto(self, external_tensor_storage=None):
        op = getattr(self, "_op", None)
        if isinstance(op, NodeProto) and len(op.attribute) and self.is_const():
            fresh = NodeProto(name=op.name, op_type=op.op_type, domain=op.domain,
                              doc_string=op.doc_string)
            self._op = fresh
        return original(self, external_tensor_storage)

    update_proto._perfcast = True  # type: ignore[attr-defined]
    node_cls.update_proto = update_proto


def _erfc(ctx, node, name, args) -> None:
    """tf2onnx handler of TensorFlow's ``Erfc`` (which tf2onnx 1.17 leaves unconverted; Keras's
    exact GELU uses it): ``erfc(x) = 1 - erf(x)``."""
    import numpy as np
    from tf2onnx import utils

    x = node.input[0]
    dtype = ctx.get_dtype(x)
    erf = ctx.make_node("Erf", [x], shapes=[ctx.get_shape(x)], dtypes=[dtype])
    one = ctx.make_const(utils.make_name(f"{name}_one"),
                         np.array(1, dtype=utils.map_onnx_to_numpy_type(dtype)))
    node.type = "Sub"
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])


#: TensorFlow ops tf2onnx does not convert itself, converted by perfcast (old-style handlers).
CUSTOM_OP_HANDLERS = {"Erfc": (_erfc, [])}


def _convert(tf2onnx, fn, specs, nchw: list[str]):
    """``tf2onnx.convert.from_function`` with :data:`CUSTOM_OP_HANDLERS`. Its optimizers run
    without a deep copy of the graph before each (``TF2ONNX_CATCH_ERRORS=FALSE``: the copies
    of the weights took half the time of a BERT-base export); if one of them fails, the export
    is retried the default way (a failing optimizer is then skipped)."""
    key = "TF2ONNX_CATCH_ERRORS"
    before = os.environ.get(key)
    kwargs = {"input_signature": specs, "opset": OPSET, "inputs_as_nchw": nchw or None,
              "custom_op_handlers": dict(CUSTOM_OP_HANDLERS)}
    try:
        os.environ[key] = "FALSE"
        try:
            return tf2onnx.convert.from_function(fn, **kwargs)[0]
        except Exception:  # noqa: BLE001 - an optimizer failed: the tolerant way
            os.environ[key] = "TRUE"
            return tf2onnx.convert.from_function(fn, **kwargs)[0]
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def onnx_from_keras(model: Any, example_inputs: tuple | None = None, *, what: str | None = None,
                    channels_first: bool | None = None, batch_size: int | None = None):
    """``(ModelProto, info)``: ``model`` (a Keras model) exported by tf2onnx after
    :func:`randomize`, its batch symbolic (or ``batch_size``). ``example_inputs`` (optional):
    arrays, ``tf.TensorSpec`` s or shape tuples for a model without an input layer (their
    first dimension, the batch, is replaced). 4-D inputs are exported channels-first when the
    model is channels-last (``channels_first`` overrides)."""
    what = what or f"Keras model {getattr(model, 'name', '')!r}"
    tf, keras, tf2onnx = import_tf(what)
    specs = _keras_specs(tf, model, example_inputs, batch_size)
    if channels_first is None:
        channels_first = keras.config.image_data_format() == "channels_last"
    nchw = [s.name for s in specs if channels_first and len(s.shape) == 4]
    n = len(specs)

    def call(*xs):
        return model(xs[0] if n == 1 else list(xs), training=False)

    try:
        with quiet():
            randomize(model.weights)
            fn = tf.function(call, input_signature=specs)
            proto = _convert(tf2onnx, fn, specs, nchw)
    except PerfcastError:
        raise
    except Exception as exc:  # noqa: BLE001 - the exporter's failure, in one line
        raise export_failed(exc, what, "tf2onnx") from exc
    return proto, {"channels_first_inputs": nchw, "opset_requested": OPSET}


def graph_from_keras(model: Any, example_inputs: tuple | None = None, *,
                     batch_size: int | None = None, precision: str = "fp32",
                     input_size: tuple[int, ...] | None = None, seq_len: int | None = None,
                     model_id: str | None = None) -> ModelGraph:
    """The graph of a Keras model (built from its architecture; its weights are replaced by
    random values, see the module docstring). ``batch_size`` binds the symbolic batch (default:
    the first dimension of ``example_inputs``, else 1);
    ``input_size`` (C,H,W for an image input) / ``seq_len`` bind other symbolic dimensions."""
    name = model_id or f"keras:{getattr(model, 'name', type(model).__name__)}"
    proto, info = onnx_from_keras(model, example_inputs, what=name)
    return graph_from_proto(proto, framework="tensorflow", exporter="tf2onnx", model_id=name,
                            batch_size=batch_size or leading_dim(example_inputs),
                            precision=precision, input_size=input_size, seq_len=seq_len,
                            extra=info)


def graph_from_keras_application(name: str, input_size: tuple[int, ...] | None = None, *,
                                 batch_size: int | None = None, precision: str = "fp32"
                                 ) -> ModelGraph:
    """The graph of ``keras:NAME`` (``keras.applications.NAME(weights=None)``) for the
    per-sample input ``input_size`` (C,H,W; default: the application's own)."""
    from perfcast.zoo.keras_apps import keras_application

    _, keras, _ = import_tf(f"keras:{name}")
    built: dict[str, Any] = {}

    def export():
        with quiet():
            model, built["id"], built["shape"] = keras_application(keras, name, input_size)
        proto, info = onnx_from_keras(model, what=built["id"])
        return proto, {**info, "model_id": built["id"], "input_size": list(built["shape"])}

    key = ("keras", name.lower(), tuple(input_size) if input_size else None)
    proto, info = memo_export(key, export)
    model_id = info.pop("model_id")
    return graph_from_proto(proto, framework="tensorflow", exporter="tf2onnx",
                            model_id=model_id, batch_size=batch_size, precision=precision,
                            extra=info)


def load_keras_file(path: str | os.PathLike) -> Any:
    """The Keras model of a ``.keras`` file rebuilt from its ``config.json`` alone (random
    init; the weights file in the archive is never read). One-line :class:`ModelSpecError`
    for a file that is not a Keras archive or whose architecture Keras cannot rebuild."""
    path = Path(path)
    if not path.is_file():
        raise ModelSpecError(f"Keras file not found: {path}" if not path.exists() else
                             f"not a Keras model file: {path} is a folder (a .keras file is a "
                             f"zip archive)")
    try:
        with zipfile.ZipFile(path) as z:
            config = json.loads(z.read("config.json"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        why = ("not a zip archive" if isinstance(exc, zipfile.BadZipFile) else
               "no config.json in the archive" if isinstance(exc, KeyError) else first_line(exc))
        raise ModelSpecError(f"not a valid Keras model file: {path} ({why})") from None
    if not isinstance(config, dict) or "class_name" not in config:
        raise ModelSpecError(f"not a valid Keras model file: {path} (config.json holds no "
                             f"model config)")
    _, keras, _ = import_tf(str(path))
    try:
        with quiet():
            model = keras.saving.deserialize_keras_object(config)
    except Exception as exc:  # noqa: BLE001 - unknown custom layer, unsafe lambda, bad config
        reraise_interrupt(exc)
        raise ModelSpecError(f"could not rebuild the Keras model in {path} from its config "
                             f"({first_line(exc)}); custom layers must be importable and "
                             f"registered") from exc
    if not isinstance(model, keras.Model):
        raise ModelSpecError(f"not a valid Keras model file: {path} (config.json describes a "
                             f"{type(model).__name__}, not a model)")
    return model


# ---------------------------------------------------------------------------------- SavedModel


def onnx_from_saved_model(path: str | os.PathLike, signature: str | None = None,
                          batch_size: int | None = None):
    """``(ModelProto, info)`` of a TensorFlow SavedModel directory: loaded without its
    variables (``experimental_skip_checkpoint``), variables set by :func:`randomize`, the
    ``serving_default`` signature (or ``signature``, or the only one) exported by tf2onnx
    (unknown leading dimensions symbolic, or ``batch_size``)."""
    path = Path(path)
    if path.name == "saved_model.pb":
        path = path.parent
    if not (path / "saved_model.pb").is_file():
        raise ModelSpecError(f"not a TensorFlow SavedModel: {path} (no saved_model.pb in it)")
    what = f"SavedModel {path}"
    tf, _, tf2onnx = import_tf(what)
    try:
        with quiet():
            loaded = tf.saved_model.load(
                str(path), options=tf.saved_model.LoadOptions(experimental_skip_checkpoint=True))
    except Exception as exc:  # noqa: BLE001 - corrupt protobuf, unknown ops, TF1 graph
        reraise_interrupt(exc)
        raise ModelSpecError(f"not a valid TensorFlow SavedModel: {path} "
                             f"({first_line(exc)})") from exc
    sigs = dict(getattr(loaded, "signatures", {}) or {})
    if not sigs:
        raise ModelSpecError(f"{what} has no serving signature to export (save it with "
                             f"tf.saved_model.save(..., signatures=...) or model.export())")
    key = signature or ("serving_default" if "serving_default" in sigs else
                        next(iter(sigs)) if len(sigs) == 1 else None)
    if key not in sigs:
        raise ModelSpecError(f"{what}: signature {signature or 'serving_default'!r} not found "
                             f"(it has {', '.join(sorted(sigs))})")
    sig = sigs[key]
    kw_specs = sig.structured_input_signature[1]
    names = sorted(kw_specs)
    specs = []
    for n in names:
        shape = list(kw_specs[n].shape)
        if shape and shape[0] is None and batch_size is not None:
            shape[0] = int(batch_size)
        specs.append(tf.TensorSpec(shape, kw_specs[n].dtype, name=n))
    nchw = [s.name for s in specs if len(s.shape) == 4 and s.shape[-1] is not None
            and s.shape[-1] <= 4 and (s.shape[1] is None or s.shape[1] > 4)]

    def call(*xs):
        out = sig(**dict(zip(names, xs)))
        return [out[k] for k in sorted(out)] if isinstance(out, dict) else out

    try:
        with quiet():
            randomize(list(loaded.variables) if hasattr(loaded, "variables") else
                      list(sig.variables))
            fn = tf.function(call, input_signature=specs)
            proto = _convert(tf2onnx, fn, specs, nchw)
    except PerfcastError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise export_failed(exc, what, "tf2onnx") from exc
    return proto, {"signature": key, "channels_first_inputs": nchw, "opset_requested": OPSET}


def graph_from_tf_path(path: str | os.PathLike, *, batch_size: int | None = None,
                       precision: str = "fp32", input_size: tuple[int, ...] | None = None,
                       seq_len: int | None = None, memo_key: tuple | None = None
                       ) -> ModelGraph:
    """The graph of a ``.keras`` file or a SavedModel directory (or its ``saved_model.pb``);
    ``memo_key`` keeps the export for other batch sizes (:func:`memo_export`; e.g. the path
    with its size and modification time)."""
    p = Path(path)
    if p.suffix.lower() == ".keras":
        model_id = p.stem

        def export():
            return onnx_from_keras(load_keras_file(p), what=model_id)
    else:
        model_id = (p.parent if p.name == "saved_model.pb" else p).name or str(p)

        def export():
            return onnx_from_saved_model(p)
    proto, info = memo_export(memo_key, export)
    return graph_from_proto(proto, framework="tensorflow", exporter="tf2onnx",
                            model_id=model_id, batch_size=batch_size, precision=precision,
                            input_size=input_size, seq_len=seq_len, extra=info)


__all__ = ["CUSTOM_OP_HANDLERS", "OPSET", "RANDOM_RANGE", "graph_from_keras",
           "graph_from_keras_application", "graph_from_tf_path", "import_tf", "load_keras_file",
           "onnx_from_keras", "onnx_from_saved_model", "randomize"]
