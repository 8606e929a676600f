"""PaddlePaddle frontend: a ``paddle.nn.Layer``, an inference program file (``.pdmodel``, or
PaddlePaddle 3's PIR ``.json``; the ``.pdiparams`` beside it is never read) or a ``paddle:``
vision model → ONNX with ``paddle2onnx`` → :class:`~perfcast.graph.ModelGraph` (see
:mod:`perfcast.frontends.exported`). Needs ``pip install 'perfcast[paddle]'``.

Weights are never read: the program is exported *without* its parameters file (paddle2onnx
then leaves every parameter an undefined name), and each parameter is added back as an ONNX
initializer with its name, shape and dtype from the program and its bytes marked as external
data that is never read — what the ONNX frontend does with any external data. A legacy
``.pdmodel`` program is translated to PIR first (as paddle2onnx does). A ``paddle.nn.Layer`` is
saved with ``paddle.jit.save`` (in eval mode) to a temporary folder and exported the same way.

Inputs are exported with a symbolic batch (bound by ``--batch-size``, default 1; for a layer
from Python, the first dimension of its example inputs); PaddlePaddle computes channels-first,
so ``--input-size C,H,W`` binds the symbolic dimensions of an image input directly.
"""

from __future__ import annotations

import os
import tempfile
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

#: ONNX opset requested from paddle2onnx (it raises the opset itself when an op needs more).
OPSET = 17
#: Where the never-read parameter bytes "are" (the ONNX external-data location).
UNREAD = "weights-not-read"

_ONNX_DTYPES = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6,
                "int64": 7, "bool": 9, "float16": 10, "float64": 11, "bfloat16": 16}


def import_paddle(what: str) -> tuple[Any, Any]:
    """``(paddle, paddle2onnx)``, imported quietly; one-line error naming the extra when
    missing."""
    import importlib.util
    import sys

    os.environ.setdefault("GLOG_minloglevel", "2")  # PaddlePaddle's C++ log: errors only
    late = [m for m in ("paddle", "paddle2onnx")
            if m not in sys.modules and importlib.util.find_spec(m) is not None]
    if late and sys.modules.get("tensorflow") is not None:
        # PaddlePaddle / paddle2onnx loaded after TensorFlow crash the process (their protobuf
        # symbols clash); perfcast's TensorFlow frontend loads them first for this reason
        raise PerfcastError(f"{what}: PaddlePaddle cannot be loaded into a process that has "
                            f"already loaded TensorFlow (their native libraries clash and the "
                            f"process would crash); import paddle and paddle2onnx before "
                            f"tensorflow, or use a separate process")
    with quiet():
        paddle = require("paddle", "paddle", what)
        p2o = require("paddle2onnx", "paddle", what)
    return paddle, p2o


def _dtype_name(dtype: Any) -> str:
    return str(dtype).rsplit(".", 1)[-1].lower()


def program_parameters(paddle: Any, json_path: str | os.PathLike) -> dict[str, tuple]:
    """``{name: (shape, dtype name)}`` of the parameters of a PIR program file (read from the
    program alone; the parameters file is not opened)."""
    with paddle.pir_utils.IrGuard():
        program = paddle.load(str(json_path))
    out: dict[str, tuple] = {}
    for op in program.global_block().ops:
        if op.name() == "builtin.parameter":
            name = op.attrs().get("parameter_name")
            r = op.result(0)
            out[str(name)] = (tuple(int(d) for d in r.shape), _dtype_name(r.dtype))
    return out


def _add_parameters(proto: Any, params: dict[str, tuple]) -> int:
    """Add the parameters the exported graph reads but does not define as initializers whose
    bytes are external data that is never read; returns how many were added."""
    from onnx import TensorProto

    g = proto.graph
    defined = {t.name for t in g.initializer} | {vi.name for vi in g.input}
    defined.update(o for n in g.node for o in n.output)
    added = 0
    for name in dict.fromkeys(x for n in g.node for x in n.input if x):
        if name in defined or name not in params:
            continue
        shape, dtype = params[name]
        t = TensorProto(name=name, dims=list(shape), data_type=_ONNX_DTYPES.get(dtype, 1),
                        data_location=TensorProto.EXTERNAL)
        entry = t.external_data.add()
        entry.key, entry.value = "location", UNREAD
        g.initializer.append(t)
        defined.add(name)
        added += 1
    return added


def _failure_line(captured: str) -> str | None:
    """paddle2onnx logs its failure instead of raising it: the line that says why."""
    for line in reversed(captured.splitlines()):
        if "Failed to convert" in line or "Error" in line or "error" in line:
            return line.strip()[:300]
    return None


def _check_legacy_program(path: Path) -> None:
    """Parse a ``.pdmodel`` as a ``ProgramDesc`` in Python first: PaddlePaddle's C++ loader
    crashes the process on some malformed files instead of raising."""
    from paddle.base.proto import framework_pb2

    desc = framework_pb2.ProgramDesc()
    try:
        desc.ParseFromString(path.read_bytes())
    except Exception as exc:  # noqa: BLE001 - protobuf DecodeError, OSError
        raise ModelSpecError(f"not a valid PaddlePaddle program: {path} "
                             f"({first_line(exc)})") from None
    if not desc.blocks or not any(len(b.ops) for b in desc.blocks) or any(
            not op.type for b in desc.blocks for op in b.ops):
        raise ModelSpecError(f"not a valid PaddlePaddle program: {path} (no operators in it)")


def onnx_from_paddle_program(model_file: str | os.PathLike, what: str | None = None):
    """``(ModelProto, info)`` of a PaddlePaddle inference program (``.json`` PIR or legacy
    ``.pdmodel``), exported by paddle2onnx without reading its parameters (see the module
    docstring)."""
    path = Path(model_file)
    what = what or str(path)
    if not path.is_file():
        raise ModelSpecError(f"PaddlePaddle program not found: {path}" if not path.exists()
                             else f"not a PaddlePaddle program file: {path} is a folder")
    paddle, p2o = import_paddle(what)
    import onnx

    with tempfile.TemporaryDirectory(prefix="perfcast-paddle-") as tmp:
        json_path = path
        try:
            with quiet():
                if path.suffix.lower() == ".pdmodel":  # legacy program → PIR, as paddle2onnx does
                    _check_legacy_program(path)
                    with paddle.pir_utils.OldIrGuard():
                        legacy = paddle.load(str(path))
                    pir = paddle.pir.translate_to_pir(legacy.desc)
                    json_path = Path(tmp) / "model.json"
                    with paddle.pir_utils.IrGuard():
                        paddle.save(pir, str(json_path))
                params = program_parameters(paddle, json_path)
        except PerfcastError:
            raise
        except Exception as exc:  # noqa: BLE001 - not a program / corrupt
            reraise_interrupt(exc)
            raise ModelSpecError(f"not a valid PaddlePaddle program: {path} "
                                 f"({first_line(exc)})") from exc
        try:
            with quiet() as out:
                try:
                    data = p2o.export(str(json_path), "", opset_version=OPSET,
                                      auto_upgrade_opset=True, enable_onnx_checker=False,
                                      optimize_tool="None")
                except UnboundLocalError as exc:  # it logged the real failure and fell through
                    why = _failure_line(out.text())
                    raise RuntimeError(why or "paddle2onnx produced no model") from exc
            if not data:
                raise RuntimeError("paddle2onnx produced no model")
            proto = onnx.load_from_string(data)
        except PerfcastError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise export_failed(exc, what, "paddle2onnx") from exc
    added = _add_parameters(proto, params)
    return proto, {"parameters_not_read": added, "opset_requested": OPSET}


def _input_spec(paddle: Any, x: Any, i: int):
    """An ``InputSpec`` with a symbolic batch from an example input: an ``InputSpec``, a
    tensor / array (shape, dtype) or a shape tuple (float32)."""
    InputSpec = paddle.static.InputSpec
    if isinstance(x, InputSpec):
        shape, dtype, name = list(x.shape), x.dtype, x.name or f"input_{i}"
    elif hasattr(x, "shape") and hasattr(x, "dtype"):
        shape, dtype, name = list(x.shape), _dtype_name(x.dtype), f"input_{i}"
    elif isinstance(x, (tuple, list)) and all(isinstance(d, int) or d is None for d in x):
        shape, dtype, name = list(x), "float32", f"input_{i}"
    else:
        raise PerfcastError(f"example input {i} must be a tensor, an array, an InputSpec or a "
                            f"shape tuple, not {type(x).__name__}")
    if not shape:
        raise PerfcastError(f"example input {i} has no batch dimension (shape ())")
    return InputSpec([None, *[None if d is None or d < 0 else int(d) for d in shape[1:]]],
                     dtype, name)


def onnx_from_paddle_layer(layer: Any, example_inputs, what: str | None = None):
    """``(ModelProto, info)`` of a ``paddle.nn.Layer``: saved with ``paddle.jit.save`` for
    ``example_inputs`` (batch made symbolic) in eval mode, then :func:`onnx_from_paddle_program`."""
    what = what or f"PaddlePaddle layer {type(layer).__name__}"
    paddle, _ = import_paddle(what)
    if not example_inputs:
        raise PerfcastError(f"{what}: give example_inputs (tensors, arrays, InputSpecs or "
                            f"shapes, batch first)")
    specs = [_input_spec(paddle, x, i) for i, x in enumerate(example_inputs)]
    was_training = bool(getattr(layer, "training", False))
    with tempfile.TemporaryDirectory(prefix="perfcast-paddle-") as tmp:
        try:
            with quiet():
                layer.eval()
                paddle.jit.save(layer, os.path.join(tmp, "model"), input_spec=specs)
        except Exception as exc:  # noqa: BLE001 - dynamic-to-static conversion failed
            raise export_failed(exc, what, "paddle.jit.save") from exc
        finally:
            if was_training:
                layer.train()
        program = next((Path(tmp) / f"model{s}" for s in (".json", ".pdmodel")
                        if (Path(tmp) / f"model{s}").is_file()), None)
        if program is None:
            raise export_failed(RuntimeError("paddle.jit.save wrote no program"), what,
                                "paddle.jit.save")
        return onnx_from_paddle_program(program, what)


def graph_from_paddle(layer: Any, example_inputs, *, batch_size: int | None = None,
                      precision: str = "fp32", input_size: tuple[int, ...] | None = None,
                      seq_len: int | None = None, model_id: str | None = None) -> ModelGraph:
    """The graph of a ``paddle.nn.Layer`` for ``example_inputs`` (batch first; the batch
    defaults to theirs). ``input_size`` / ``seq_len`` bind dimensions given as ``None`` / -1."""
    name = model_id or f"paddle:{type(layer).__name__}"
    proto, info = onnx_from_paddle_layer(layer, example_inputs, what=name)
    return graph_from_proto(proto, framework="paddle", exporter="paddle2onnx", model_id=name,
                            batch_size=batch_size or leading_dim(example_inputs),
                            precision=precision, input_size=input_size, seq_len=seq_len,
                            extra=info)


def graph_from_paddle_vision(name: str, input_size: tuple[int, ...] | None = None, *,
                             batch_size: int | None = None, precision: str = "fp32"
                             ) -> ModelGraph:
    """The graph of ``paddle:NAME`` (``paddle.vision.models.NAME(pretrained=False)``) for the
    per-sample input ``input_size`` (C,H,W; default 224 px, 299 for Inception-v3)."""
    from perfcast.zoo.paddle_vision import paddle_vision_model

    paddle, _ = import_paddle(f"paddle:{name}")

    def export():
        with quiet():
            layer, model_id, shape = paddle_vision_model(paddle, name, input_size)
        proto, info = onnx_from_paddle_layer(layer, [(1, *shape)], what=model_id)
        return proto, {**info, "model_id": model_id, "input_size": list(shape)}

    key = ("paddle", name.lower(), tuple(input_size) if input_size else None)
    proto, info = memo_export(key, export)
    model_id = info.pop("model_id")
    return graph_from_proto(proto, framework="paddle", exporter="paddle2onnx",
                            model_id=model_id, batch_size=batch_size, precision=precision,
                            extra=info)


def graph_from_paddle_file(path: str | os.PathLike, *, batch_size: int | None = None,
                           precision: str = "fp32", input_size: tuple[int, ...] | None = None,
                           seq_len: int | None = None, memo_key: tuple | None = None
                           ) -> ModelGraph:
    """The graph of a ``.pdmodel`` / PIR ``.json`` inference program (parameters not read);
    ``memo_key`` keeps the export for other batch sizes (:func:`memo_export`)."""
    p = Path(path)
    proto, info = memo_export(memo_key, lambda: onnx_from_paddle_program(p))
    return graph_from_proto(proto, framework="paddle", exporter="paddle2onnx", model_id=p.stem,
                            batch_size=batch_size, precision=precision, input_size=input_size,
                            seq_len=seq_len, extra=info)


__all__ = ["OPSET", "graph_from_paddle", "graph_from_paddle_file", "graph_from_paddle_vision",
           "import_paddle", "onnx_from_paddle_layer", "onnx_from_paddle_program",
           "program_parameters"]
