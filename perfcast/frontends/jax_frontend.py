"""JAX / Flax frontend: a JAX function (a Flax NNX module, ``partial(model.apply, params)``, any
jittable callable) with example inputs → ONNX with ``jax2onnx`` →
:class:`~perfcast.graph.ModelGraph` (see :mod:`perfcast.frontends.exported`). Needs
``pip install 'perfcast[jax]'``.

JAX has no model file: from Python, give the function and its example inputs
(:func:`graph_from_jax`, or ``perfcast.load_graph(fn, example_inputs=...)`` /
``perfcast.predict``); from the command line, ``jax:my.module:make_model`` names a callable
that returns ``(fn, example_inputs)`` (:func:`graph_from_jax_spec`). Example inputs are arrays,
``jax.ShapeDtypeStruct`` s or shape tuples (float32); only their shapes and dtypes are used —
nothing is computed. Their first dimension is the batch: ``--batch-size`` replaces it in every
input (the function is traced at that batch).

Weights are whatever the function closes over (a Flax module's random init — build it with
``nnx.Rngs(0)``; nothing is loaded); jax2onnx stores them as initializers.
"""

from __future__ import annotations

import importlib
from typing import Any

from perfcast.errors import ModelSpecError, PerfcastError, reraise_interrupt
from perfcast.frontends.exported import (
    export_failed,
    first_line,
    graph_from_proto,
    quiet,
    require,
)
from perfcast.graph import ModelGraph


def import_jax(what: str) -> tuple[Any, Any]:
    """``(jax, jax2onnx)``, imported quietly; one-line error naming the extra when missing."""
    with quiet():
        jax = require("jax", "jax", what)
        j2o = require("jax2onnx", "jax", what)
    return jax, j2o


def _struct(jax: Any, x: Any, i: int, batch_size: int | None):
    """``jax.ShapeDtypeStruct`` of an example input, its first dimension set to
    ``batch_size`` when given."""
    import numpy as np

    if hasattr(x, "shape") and hasattr(x, "dtype"):
        shape, dtype = tuple(int(d) for d in x.shape), np.dtype(x.dtype)
    elif isinstance(x, (tuple, list)) and x and all(isinstance(d, int) and not isinstance(d, bool)
                                                    for d in x):
        shape, dtype = tuple(x), np.dtype("float32")
    else:
        raise PerfcastError(f"example input {i} must be an array, a jax.ShapeDtypeStruct or a "
                            f"shape tuple of positive integers, not {type(x).__name__}")
    if any(d <= 0 for d in shape):
        raise PerfcastError(f"example input {i} has a dimension ≤ 0: {shape}")
    if batch_size is not None:
        if not shape:
            raise PerfcastError(f"example input {i} has no batch dimension to set to "
                                f"{batch_size} (shape ())")
        shape = (int(batch_size), *shape[1:])
    return jax.ShapeDtypeStruct(shape, dtype)


def onnx_from_jax(fn: Any, example_inputs, *, batch_size: int | None = None,
                  what: str | None = None):
    """``(ModelProto, info)``: ``fn`` traced by jax2onnx at the shapes of ``example_inputs``
    (first dimension replaced by ``batch_size`` when given)."""
    what = what or f"JAX function {getattr(fn, '__name__', type(fn).__name__)}"
    jax, j2o = import_jax(what)
    if not callable(fn):
        raise PerfcastError(f"{what} is not callable")
    if not example_inputs:
        raise PerfcastError(f"{what}: give example_inputs (arrays, jax.ShapeDtypeStructs or "
                            f"shapes, batch first)")
    structs = [_struct(jax, x, i, batch_size) for i, x in enumerate(example_inputs)]
    try:
        with quiet():
            proto = j2o.to_onnx(fn, structs, model_name="perfcast")
    except PerfcastError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise export_failed(exc, what, "jax2onnx") from exc
    return proto, {"input_shapes_traced": [list(s.shape) for s in structs]}


def graph_from_jax(fn: Any, example_inputs, *, batch_size: int | None = None,
                   precision: str = "fp32", model_id: str | None = None) -> ModelGraph:
    """The graph of a JAX / Flax function at its example inputs' shapes (see the module
    docstring); ``batch_size`` replaces their first dimension."""
    name = model_id or f"jax:{getattr(fn, '__name__', type(fn).__name__)}"
    proto, info = onnx_from_jax(fn, example_inputs, batch_size=batch_size, what=name)
    return graph_from_proto(proto, framework="jax", exporter="jax2onnx", model_id=name,
                            precision=precision, extra=info)


def resolve_jax_spec(spec: str) -> tuple[Any, tuple]:
    """``(fn, example_inputs)`` from ``module.path:callable`` (the callable, given no arguments,
    returns them); one-line :class:`ModelSpecError` for anything else."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise ModelSpecError(f"jax:{spec}: write jax:module.path:callable (a callable returning "
                             f"(function, example_inputs))")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ModelSpecError(f"cannot import {mod_name!r} for model spec jax:{spec}: "
                             f"{first_line(exc)}") from None
    make = getattr(mod, attr, None)
    if make is None or not callable(make):
        raise ModelSpecError(f"module {mod_name!r} has no callable {attr!r}")
    try:
        with quiet():
            made = make()
    except Exception as exc:  # noqa: BLE001
        reraise_interrupt(exc)
        raise ModelSpecError(f"jax:{spec} failed: {first_line(exc)}") from exc
    if not (isinstance(made, (tuple, list)) and len(made) == 2 and callable(made[0])
            and isinstance(made[1], (tuple, list))):
        raise ModelSpecError(f"jax:{spec} must return (function, example_inputs), got "
                             f"{type(made).__name__}")
    return made[0], tuple(made[1])


def graph_from_jax_spec(spec: str, *, batch_size: int | None = None, precision: str = "fp32"
                        ) -> ModelGraph:
    """The graph of ``jax:module.path:callable`` (see :func:`resolve_jax_spec`)."""
    import_jax(f"jax:{spec}")
    fn, inputs = resolve_jax_spec(spec)
    return graph_from_jax(fn, inputs, batch_size=batch_size, precision=precision,
                          model_id=f"jax:{spec}")


__all__ = ["graph_from_jax", "graph_from_jax_spec", "import_jax", "onnx_from_jax",
           "resolve_jax_spec"]
