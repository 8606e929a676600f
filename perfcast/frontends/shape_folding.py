"""Shape-computation folding for exported ONNX graphs (:mod:`perfcast.frontends.exported`).

The framework exporters write *dynamic* shape arithmetic into their graphs even when every
shape is known once the inputs are bound: tf2onnx turns a Keras ``EinsumDense`` /
``MultiHeadAttention`` into ``Shape → Gather → ReduceProd → Concat → Reshape`` chains,
paddle2onnx builds ``arange`` from ``Constant → Identity → Squeeze → Range``. ONNX shape
inference stops at such a chain (its data propagation covers a few ops only), every tensor
after it has an unknown shape, and its operators would cost 0 MACs.

:func:`fold_shape_computations` evaluates these small computations once, with the ONNX
reference evaluator, on the bound input shapes: ``Shape`` / ``Size`` of a tensor whose shape
is known become constants, and so does any node whose inputs are all small constants (at most
:data:`MAX_ELEMENTS` elements each, outputs too) — index ranges, reshape targets, casts of
them. Shape inference is re-run after each round until nothing more folds. ``Identity`` nodes
are bypassed (their consumers read the source). Weights are never evaluated (they are larger
than :data:`MAX_ELEMENTS`, or external data that is never read), nor random, sequence or
control-flow ops, nor other domains. The graph computes the same function afterwards.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any

#: Largest constant (in elements) that is read or produced by folding.
MAX_ELEMENTS = 4096

#: Ops never evaluated (random values, sequences, optional values, side effects).
_NEVER = frozenset({
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
    "Bernoulli", "If", "Loop", "Scan", "SequenceConstruct", "SequenceEmpty", "SequenceAt",
    "SequenceInsert", "SequenceErase", "SequenceLength", "SplitToSequence", "ConcatFromSequence",
    "Optional", "OptionalGetElement", "OptionalHasElement", "Constant", "Dropout",
})


def _static_shape(vi: Any) -> tuple[int, ...] | None:
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return None
    dims = []
    for d in vi.type.tensor_type.shape.dim:
        if not d.HasField("dim_value") or d.dim_value < 0:
            return None
        dims.append(int(d.dim_value))
    return tuple(dims)


def _subgraph_names(graph: Any) -> set[str]:
    """Names read inside the subgraphs of ``graph``'s nodes (they may come from outside)."""
    import onnx

    names: set[str] = set()
    for n in graph.node:
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else (
                list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else [])
            for sg in subs:
                names.update(x for sn in sg.node for x in sn.input)
                names |= _subgraph_names(sg)
    return names


def bypass_identities(graph: Any) -> int:
    """Remove ``Identity`` nodes whose output is not a graph output nor read by a subgraph;
    their consumers read the Identity's input instead. Returns how many were removed."""
    keep_names = {o.name for o in graph.output} | _subgraph_names(graph)
    alias: dict[str, str] = {}
    kept = []
    for n in graph.node:
        for i, x in enumerate(n.input):
            if x in alias:
                n.input[i] = alias[x]
        if n.op_type == "Identity" and n.domain in ("", "ai.onnx") and len(n.input) == 1 \
                and len(n.output) == 1 and n.output[0] not in keep_names and n.input[0]:
            alias[n.output[0]] = n.input[0]
            continue
        kept.append(n)
    removed = len(graph.node) - len(kept)
    if removed:
        del graph.node[:]
        graph.node.extend(kept)
    return removed


def _small_constants(graph: Any) -> dict[str, Any]:
    """Values of the initializers and ``Constant`` nodes with at most :data:`MAX_ELEMENTS`
    elements whose data is in the model (external data is never read)."""
    from onnx import TensorProto, numpy_helper

    out: dict[str, Any] = {}
    for t in graph.initializer:
        if t.data_location == TensorProto.EXTERNAL or math.prod(t.dims) > MAX_ELEMENTS:
            continue
        with contextlib.suppress(Exception):
            out[t.name] = numpy_helper.to_array(t)
    for n in graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1:
            with contextlib.suppress(Exception):
                from onnx.reference import ReferenceEvaluator

                (value,) = ReferenceEvaluator(n).run(None, {})
                if getattr(value, "size", MAX_ELEMENTS + 1) <= MAX_ELEMENTS:
                    out[n.output[0]] = value
    return out


def _known_shapes(model: Any) -> dict[str, tuple[int, ...]]:
    """Static shapes of the graph's values after ONNX shape inference (with data
    propagation) on a copy whose large initializers are replaced by inputs of their shape."""
    import onnx
    from onnx import TensorProto, helper

    g = model.graph
    light = onnx.ModelProto()  # the graph without its large weights (never copied)
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    lg = light.graph
    lg.node.extend(g.node)
    lg.input.extend(g.input)
    lg.output.extend(g.output)
    names = {vi.name for vi in g.input}
    shapes: dict[str, tuple[int, ...]] = {}
    for t in g.initializer:
        shapes[t.name] = tuple(int(d) for d in t.dims)
        if t.data_location != TensorProto.EXTERNAL and math.prod(t.dims) <= MAX_ELEMENTS:
            lg.initializer.append(t)
        elif t.name not in names:
            lg.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    for vi in g.input:
        s = _static_shape(vi)
        if s is not None:
            shapes[vi.name] = s
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inferred = onnx.shape_inference.infer_shapes(light, data_prop=True)
    except Exception:  # noqa: BLE001 - inference failed: fold what the inputs give
        return shapes
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        s = _static_shape(vi)
        if s is not None:
            shapes[vi.name] = s
    return shapes


def _fold_round(model: Any) -> int:
    """One pass in graph order; returns how many nodes became constants."""
    import numpy as np
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    g = model.graph
    consts = _small_constants(g)
    shapes = _known_shapes(model)
    opsets = {imp.domain or "": int(imp.version) for imp in model.opset_import}
    opset = opsets.get("", opsets.get("ai.onnx", 17))
    folded = 0
    new_nodes = []
    for n in g.node:
        value = None
        if n.domain in ("", "ai.onnx") and n.op_type not in _NEVER and n.input \
                and not any(a.type in (5, 10) for a in n.attribute):  # no GRAPH / GRAPHS
            if n.op_type in ("Shape", "Size") and n.input[0] in shapes:
                shape = shapes[n.input[0]]
                if n.op_type == "Size":
                    value = [np.array(math.prod(shape), dtype=np.int64)]
                else:
                    attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
                    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
                    value = [np.array(shape[slice(start, end)], dtype=np.int64)]
            elif all((not x) or x in consts for x in n.input):
                try:
                    feeds = {x: consts[x] for x in n.input if x}
                    value = ReferenceEvaluator(n, opsets={"": opset}).run(None, feeds)
                except Exception:  # noqa: BLE001 - not evaluable here: keep the node
                    value = None
        if value is not None and len(value) == len(n.output) and all(
                isinstance(v, np.ndarray) and v.size <= MAX_ELEMENTS for v in value):
            for name, v in zip(n.output, value):
                if not name:
                    continue
                consts[name] = v
                new_nodes.append(helper.make_node(
                    "Constant", [], [name], name=f"{n.name or n.op_type}_folded",
                    value=numpy_helper.from_array(np.asarray(v), name)))
            folded += 1
            continue
        new_nodes.append(n)
    if folded:
        del g.node[:]
        g.node.extend(new_nodes)
    return folded


def _drop_unused_constants(graph: Any) -> int:
    """Remove ``Constant`` nodes nothing reads (folding leaves the sources of folded chains)."""
    removed_total = 0
    outputs = {o.name for o in graph.output} | _subgraph_names(graph)
    while True:
        read = {x for n in graph.node for x in n.input} | outputs
        kept = [n for n in graph.node
                if not (n.op_type == "Constant" and not any(o in read for o in n.output))]
        removed = len(graph.node) - len(kept)
        if not removed:
            return removed_total
        del graph.node[:]
        graph.node.extend(kept)
        removed_total += removed


def fold_shape_computations(model: Any, max_rounds: int = 256) -> dict[str, int]:
    """Fold ``model``'s shape computations in place (see the module docstring); its inputs'
    dimensions should be bound first. Returns ``{"identities": n, "folded": n, "rounds": n}``."""
    identities = bypass_identities(model.graph)
    total, rounds = 0, 0
    for rounds in range(1, max_rounds + 1):  # noqa: B007 - the count is reported
        n = _fold_round(model)
        total += n
        if not n:
            break
    _drop_unused_constants(model.graph)
    return {"identities": identities, "folded": total, "rounds": rounds}


__all__ = ["MAX_ELEMENTS", "bypass_identities", "fold_shape_computations"]
