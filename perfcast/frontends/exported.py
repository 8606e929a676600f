"""Models of other frameworks through their maintained ONNX exporters, then the ONNX frontend.

TensorFlow / Keras (``tf2onnx``), PaddlePaddle (``paddle2onnx``) and JAX / Flax (``jax2onnx``)
each export the model to an ONNX ``ModelProto`` in memory (:mod:`.tf_frontend`,
:mod:`.paddle_frontend`, :mod:`.jax_frontend`); :func:`graph_from_proto` binds its symbolic
dimensions, folds the shape arithmetic the exporters leave (:mod:`.shape_folding`), drops the
weights' bytes (:func:`prepare_proto`), writes it to a temporary file and builds the
:class:`~perfcast.graph.ModelGraph` with :func:`perfcast.frontends.onnx.graph_from_onnx` — one
costing, one operator vocabulary for every framework (DIPPM's framework independence, through
ONNX instead of TVM Relay; ``reports/frameworks.md`` measures it). An export of a spec is kept
in the process for its other batch sizes (:func:`memo_export`). The graph's
``meta.frontend`` names the framework, ``meta.frontend_version`` the exporter and framework
versions, and ``meta.extra["exporter"]`` the same as a dict.

Each framework is an optional extra (``pip install 'perfcast[tensorflow]'``, ``[paddle]``,
``[jax]``); without it, :func:`require` raises a one-line :class:`PerfcastError` (exit 2) that
names the extra. Exporter failures on a model that loaded are :class:`TraceError` (exit 3);
unreadable or corrupt files are :class:`ModelSpecError` (exit 2).

:func:`load_workload` is the frontend registered for the spec kinds ``keras``, ``tensorflow``,
``paddle``, ``pdmodel``, ``jax`` and the in-process kinds (``keras.Model``, ``paddle.Layer``,
``jax.function``).
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import io
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError, TraceError, reraise_interrupt
from perfcast.graph import ModelGraph
from perfcast.workload import Workload

#: The extra that installs each framework's exporter (``pip install 'perfcast[EXTRA]'``).
EXTRAS = {"tensorflow": "tensorflow", "paddle": "paddle", "jax": "jax"}

#: The packages of each extra, as imported (for the error message and version strings).
PACKAGES = {"tensorflow": ("tensorflow", "tf2onnx"), "paddle": ("paddle", "paddle2onnx"),
            "jax": ("jax", "jax2onnx")}

#: Distributions that may provide each package (the first one installed gives the version).
_DISTRIBUTIONS = {"paddle": ("paddlepaddle", "paddlepaddle-gpu"),
                  "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly")}


def require(module: str, framework: str, what: str) -> Any:
    """Import ``module`` or raise a one-line :class:`PerfcastError` (exit 2) naming the extra
    to install for ``framework`` (``what``: the thing that needed it, e.g. ``"keras:ResNet50"``)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = EXTRAS[framework]
        raise PerfcastError(f"{what} needs the {extra} extra: pip install 'perfcast[{extra}]' "
                            f"({module} is not installed: {exc})") from None


def versions(framework: str) -> dict[str, str]:
    """``{package: version}`` of the framework and its exporter (``"none"`` when missing)."""
    out = {}
    for mod in PACKAGES[framework]:
        out[mod] = "none"
        for dist in _DISTRIBUTIONS.get(mod, (mod,)):
            try:
                out[mod] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def first_line(exc: BaseException, limit: int = 200) -> str:
    """``"TypeName: first line of the message"`` (short, one line)."""
    text = str(exc).strip()
    line = text.splitlines()[0][:limit] if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


class Captured:
    """What the frameworks printed inside :func:`quiet` (read with :meth:`text`)."""

    def __init__(self, sink) -> None:
        self._sink = sink

    def text(self) -> str:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
            self._sink.seek(0)
            return self._sink.read().decode("utf-8", "replace")
        return ""


class _Forward(io.TextIOBase):
    """The ``sys.stdout`` / ``sys.stderr`` of :func:`quiet`: writes go to its file until
    :meth:`release`, then to the original stream (stderr's, as the more useful of the two)."""

    def __init__(self, sink, stdout, stderr) -> None:
        super().__init__()
        self._text = open(os.dup(sink.fileno()), "w", encoding="utf-8",  # noqa: SIM115
                          errors="replace")
        self._out, self._err = stdout, stderr

    def _target(self):
        return self._text if self._text is not None else self._err

    def write(self, s: str) -> int:
        return self._target().write(s)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            self._target().flush()

    def fileno(self) -> int:
        return self._target().fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def release(self) -> None:
        text, self._text = self._text, None
        if text is not None:
            with contextlib.suppress(Exception):
                text.flush()
                text.close()


@contextlib.contextmanager
def quiet() -> Iterator[Captured]:
    """Silence the frameworks' own chatter while they import and export: Python warnings and
    logging, and whatever they print to the process's stdout / stderr (file descriptors 1 and 2,
    and ``sys.stdout`` / ``sys.stderr``, are pointed at a temporary file and restored
    afterwards; perfcast prints its own one-line error when something fails). Yields a
    :class:`Captured` to read what was printed."""
    import logging
    import warnings

    sys.stdout.flush()
    sys.stderr.flush()
    saved: list[tuple[int, int]] = []
    prev_disable = logging.root.manager.disable
    sink = tempfile.TemporaryFile()
    # Python-level prints go to the same file (sys.stdout may not be descriptor 1: pytest's
    # capture, notebooks); a stream that forwards to the real one afterwards, since logging
    # handlers created meanwhile (a framework's import) keep the stream they were given
    text = _Forward(sink, sys.stdout, sys.stderr)
    try:
        for fd in (1, 2):
            try:
                saved.append((fd, os.dup(fd)))
                os.dup2(sink.fileno(), fd)
            except OSError:  # no such descriptor (embedded interpreters): leave it
                pass
        logging.disable(logging.CRITICAL)
        with warnings.catch_warnings(), contextlib.redirect_stdout(text), \
                contextlib.redirect_stderr(text):
            warnings.simplefilter("ignore")
            yield Captured(sink)
    finally:
        logging.disable(prev_disable)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
        text.release()
        sink.close()


def leading_dim(example_inputs) -> int | None:
    """The first dimension of the first example input (array, tensor, spec or shape tuple), or
    ``None`` when it has none (or it is symbolic)."""
    first = next(iter(example_inputs or ()), None)
    shape = getattr(first, "shape", first if isinstance(first, (tuple, list)) else None)
    try:
        d = int(list(shape)[0])
    except (TypeError, ValueError, IndexError):
        return None
    return d if d > 0 else None


#: Where the bytes of weights dropped from an exported graph "are" (external data, never read).
UNREAD = "weights-not-read"


def prepare_proto(proto: Any, *, label: str, batch_size: int | None = None,
                  input_size: tuple[int, ...] | None = None, seq_len: int | None = None
                  ) -> dict[str, Any]:
    """Make an exported ``ModelProto`` ready for the ONNX frontend, in place: local functions
    inlined, the symbolic input dimensions bound (``batch_size`` / ``input_size`` /
    ``seq_len``, as for an ONNX file; errors name the option), its shape computations folded
    (:func:`perfcast.frontends.shape_folding.fold_shape_computations` — exporters leave
    dynamic shape arithmetic that ONNX shape inference cannot follow) and the bytes of every
    large initializer dropped (marked as external data that is never read: only shapes
    matter). Returns what was done (``meta.extra["onnx_cleanup"]``). Idempotent."""
    import onnx

    from perfcast.frontends.onnx.load import _bind_batch, _bind_sizes
    from perfcast.frontends.shape_folding import fold_shape_computations

    if len(proto.functions):
        with contextlib.suppress(Exception):  # kept as calls: unmapped nodes, as for files
            inlined = onnx.inliner.inline_local_functions(proto)
            proto.CopyFrom(inlined)
    _bind_batch(proto.graph, batch_size)
    _bind_sizes(proto.graph, label, tuple(input_size) if input_size else None, seq_len)
    info = fold_shape_computations(proto)
    info["weights_dropped"] = drop_weights(proto)
    return info


def drop_weights(proto: Any) -> int:
    """Drop the bytes of every initializer larger than the shape-folding limit, in place: it
    stays with its name, shape and dtype, its data marked external (:data:`UNREAD`, never
    read). Returns how many were dropped."""
    import math

    from onnx import TensorProto

    from perfcast.frontends.shape_folding import MAX_ELEMENTS

    dropped = 0
    for t in proto.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL or math.prod(t.dims) <= MAX_ELEMENTS:
            continue
        dims, dtype, name = list(t.dims), t.data_type, t.name
        t.Clear()
        t.name, t.data_type, t.data_location = name, dtype, TensorProto.EXTERNAL
        t.dims.extend(dims)
        entry = t.external_data.add()
        entry.key, entry.value = "location", UNREAD
        dropped += 1
    return dropped


#: Exports kept in this process (:func:`memo_export`), most recent last.
_MEMO: collections.OrderedDict[tuple, tuple[bytes, dict]] = collections.OrderedDict()
#: How many exports :func:`memo_export` keeps.
MEMO_SIZE = 8


def memo_export(key: tuple | None, export: Callable[[], tuple[Any, dict]]
                ) -> tuple[Any, dict[str, Any]]:
    """``export()`` → ``(ModelProto, info)``, kept in this process under ``key`` with its
    weights dropped (:func:`drop_weights`; a few hundred KB): the same model at another batch
    size or precision — ``predict`` builds several — is bound from the kept export instead of
    being exported again. Each call returns its own copy. ``key=None``: not kept (objects
    from Python, which may change between calls)."""
    import onnx

    if key is not None and key in _MEMO:
        _MEMO.move_to_end(key)
        data, info = _MEMO[key]
        return onnx.load_from_string(data), dict(info)
    proto, info = export()
    drop_weights(proto)
    if key is not None:
        _MEMO[key] = (proto.SerializeToString(), dict(info))
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return proto, info


def graph_from_proto(proto: Any, *, framework: str, exporter: str, model_id: str,
                     batch_size: int | None = None, precision: str = "fp32",
                     input_size: tuple[int, ...] | None = None, seq_len: int | None = None,
                     extra: dict[str, Any] | None = None) -> ModelGraph:
    """The :class:`ModelGraph` of an exported ONNX ``ModelProto`` (see the module docstring),
    after :func:`prepare_proto` (which changes ``proto`` in place): ``batch_size`` /
    ``input_size`` / ``seq_len`` bind the symbolic input dimensions as for an ONNX file;
    ``extra`` is added to ``meta.extra``. Initializers marked as external data are read as
    shapes only (their bytes need not exist)."""
    from perfcast.frontends.onnx import graph_from_onnx

    cleanup = prepare_proto(proto, label=model_id, batch_size=batch_size,
                            input_size=input_size, seq_len=seq_len)
    with tempfile.TemporaryDirectory(prefix="perfcast-export-") as tmp:
        path = Path(tmp) / f"{framework}.onnx"
        path.write_bytes(proto.SerializeToString())
        graph = graph_from_onnx(path, batch_size=batch_size, model_id=model_id,
                                precision=precision)
    graph.meta.extra["onnx_cleanup"] = cleanup
    vers = versions(framework)
    graph.meta.frontend = framework
    graph.meta.frontend_version = (f"{exporter}-{vers.get(exporter, 'none')}/"
                                   + "/".join(f"{k}-{v}" for k, v in vers.items() if k != exporter)
                                   + f"/{graph.meta.frontend_version}")
    graph.meta.extra["exporter"] = {"name": exporter, **vers}
    if extra:
        graph.meta.extra.update(extra)
    return graph


def export_failed(exc: BaseException, what: str, exporter: str) -> TraceError:
    """The one-line :class:`TraceError` (exit 3) of an exporter that failed on a loaded model
    (re-raises an interrupt first)."""
    reraise_interrupt(exc)
    return TraceError(f"could not export {what} to ONNX with {exporter}: {first_line(exc)}")


# ---------------------------------------------------------------------------------- workloads


def _file_key(workload: Workload) -> tuple | None:
    """The :func:`memo_export` key of a model file: kind, path, size and modification time."""
    fid = workload.model.file_id()
    return (workload.model.kind, *map(str, fid)) if fid else None


def load_workload(workload: Workload) -> ModelGraph:
    """The graph of a workload of another framework (the registered frontend of its kinds)."""
    kind = workload.model.kind
    if workload.mode != "infer":
        raise PerfcastError(f"{workload.spec}: a {workload.model.framework} model is read "
                            f"through its ONNX exporter, which exports inference graphs only; "
                            f"use --mode infer (or give the PyTorch model for a training graph)")
    common = {"batch_size": workload.batch_size, "precision": workload.precision}
    if kind in ("keras", "tensorflow", "keras.Model"):
        from perfcast.frontends import tf_frontend as fe

        if kind == "keras":
            return fe.graph_from_keras_application(workload.model.name, workload.input_size,
                                                   **common)
        if kind == "tensorflow":
            return fe.graph_from_tf_path(workload.model.name, input_size=workload.input_size,
                                         seq_len=workload.seq_len, memo_key=_file_key(workload),
                                         **common)
        return fe.graph_from_keras(workload.model.module, workload.model.example_inputs,
                                   input_size=workload.input_size, seq_len=workload.seq_len,
                                   **common)
    if kind in ("paddle", "pdmodel", "paddle.Layer"):
        from perfcast.frontends import paddle_frontend as fe

        if kind == "paddle":
            return fe.graph_from_paddle_vision(workload.model.name, workload.input_size, **common)
        if kind == "pdmodel":
            return fe.graph_from_paddle_file(workload.model.name, input_size=workload.input_size,
                                             seq_len=workload.seq_len,
                                             memo_key=_file_key(workload), **common)
        return fe.graph_from_paddle(workload.model.module, workload.model.example_inputs,
                                    input_size=workload.input_size, seq_len=workload.seq_len,
                                    **common)
    if kind in ("jax", "jax.function"):
        from perfcast.frontends import jax_frontend as fe

        if workload.input_size is not None or workload.seq_len is not None:
            raise PerfcastError(f"{workload.spec}: a JAX function's example inputs fix its "
                                f"shapes; --input-size / --seq-len do not apply (only "
                                f"--batch-size, which replaces their first dimension)")
        if kind == "jax":
            return fe.graph_from_jax_spec(workload.model.name, **common)
        return fe.graph_from_jax(workload.model.module, workload.model.example_inputs,
                                 model_id=workload.model.text, **common)
    raise PerfcastError(f"no exporter frontend for {kind}: specs")


__all__ = ["EXTRAS", "MEMO_SIZE", "UNREAD", "Captured", "drop_weights", "export_failed",
           "graph_from_proto", "leading_dim", "load_workload", "memo_export", "prepare_proto",
           "quiet", "require", "versions"]
