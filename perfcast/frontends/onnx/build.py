"""Building the :class:`~perfcast.graph.ModelGraph` of an ONNX model: :func:`graph_from_onnx`
walks the nodes, counts parameters (control-flow bodies included) and emits nodes and edges.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import onnx
import onnx.inliner
from onnx import AttributeProto, GraphProto, NodeProto, TensorProto

from perfcast.errors import ModelSpecError, PerfcastError, reraise_interrupt
from perfcast.frontends.onnx.cost import (
    _cost_known,
    _extra_attrs,
    _node_cost,
    _recurrent_macs,
    _resolve,
)
from perfcast.frontends.onnx.load import (
    _bind_batch,
    _bind_sizes,
    _infer_shapes,
    _input_shapes,
    _load,
    _opset,
    _propagate_contrib_shapes,
)
from perfcast.frontends.onnx.ops import _CONST_PASSTHROUGH, _DEFAULT_DOMAINS, _attrs
from perfcast.frontends.onnx.tensors import (
    FLOAT_DTYPES,
    _Ctx,
    _dtype_name,
    _init_tensor,
    _Tensor,
    _vi_tensor,
)
from perfcast.graph import Edge, GraphMeta, ModelGraph, Node, Shape

# ---------------------------------------------------------------------------------- subgraphs


def _subgraphs(node: NodeProto) -> Iterator[GraphProto]:
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            yield a.g
        elif a.type == AttributeProto.GRAPHS:
            yield from a.graphs


def _graph_scope(g: GraphProto) -> tuple[list[str], list[TensorProto], int]:
    """(outer-scope names read, initializers defined, node count) of a subgraph, recursively."""
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    for n in g.node:
        defined.update(o for o in n.output if o)
    free: dict[str, None] = {}
    inits = list(g.initializer)
    count = len(g.node)
    for n in g.node:
        for name in n.input:
            if name and name not in defined:
                free[name] = None
        for sub in _subgraphs(n):
            f, i, c = _graph_scope(sub)
            inits += i
            count += c
            free.update((x, None) for x in f if x not in defined)
    return list(free), inits, count


def _dedup(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(n for n in names if n))


# ---------------------------------------------------------------------------------- main


def graph_from_onnx(path: str | os.PathLike, batch_size: int | None = None,
                    model_id: str | None = None, precision: str = "fp32",
                    input_size: tuple[int, ...] | None = None,
                    seq_len: int | None = None) -> ModelGraph:
    """Build a :class:`ModelGraph` from an ONNX file (external-data bytes are never read).

    ``batch_size`` binds symbolic/unknown leading dims of the graph inputs (default 1, or the
    model's fixed batch); a fixed batch that differs raises :class:`ModelSpecError`.
    ``input_size`` (per-sample shape of the one input with symbolic dimensions) or ``seq_len``
    (the one symbolic dimension of token inputs) bind the rest; symbolic dimensions left
    unbound, or an option given for a model whose shapes are fixed, raise
    :class:`ModelSpecError` naming the option.
    FLOPs/MACs on nodes are for the whole batch; bytes are bytes.
    """
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                   or batch_size <= 0):
        raise ModelSpecError(f"batch_size must be a positive integer, got {batch_size!r}")
    path = Path(path)
    model = _load(path)
    try:
        return _build(path, model, batch_size, model_id, precision, input_size, seq_len)
    except PerfcastError:
        raise
    except Exception as exc:  # a malformed model is bad input; a valid one, our bug
        reraise_interrupt(exc)
        try:
            onnx.checker.check_model(model)
        except Exception as bad:  # noqa: BLE001 - any checker complaint
            why = str(bad).strip().splitlines()[0][:200] if str(bad).strip() else type(bad).__name__
            raise ModelSpecError(f"{path} is not a valid ONNX model ({why}); "
                                 f"re-export it") from exc
        raise


def _build(path: Path, model, batch_size, model_id, precision, input_size, seq_len
           ) -> ModelGraph:
    """:func:`graph_from_onnx` after loading (see there)."""
    opset = _opset(model)
    n_functions = len(model.functions)
    if n_functions:
        try:
            model = onnx.inliner.inline_local_functions(model)
        except Exception:  # keep the calls; they become unmapped "other" nodes
            pass
    batch, _, _ = _bind_batch(model.graph, batch_size)
    _bind_sizes(model.graph, str(path), tuple(input_size) if input_size else None, seq_len)
    input_shapes, unresolved = _input_shapes(model.graph)
    model, inference = _infer_shapes(model, path)
    model = _propagate_contrib_shapes(model)
    g = model.graph

    ctx = _Ctx(base_dir=str(path.parent), opset=opset)
    for t in g.initializer:
        ctx.initializers[t.name] = t
        ctx.tensors[t.name] = _init_tensor(t)
    sparse: dict[str, _Tensor] = {}
    for sp in g.sparse_initializer:
        sparse[sp.values.name] = _Tensor(tuple(int(d) for d in sp.dims),
                                         _dtype_name(sp.values.data_type), sp.values.data_type)
    ctx.tensors.update(sparse)
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.name not in ctx.initializers:
            ctx.tensors[vi.name] = _vi_tensor(vi)
    for n in g.node:
        if n.op_type == "Constant" and n.domain in _DEFAULT_DOMAINS and n.output:
            for a in n.attribute:
                if a.name == "value" and a.type == AttributeProto.TENSOR:
                    ctx.constants[n.output[0]] = a.t
                    if ctx.get(n.output[0]).shape is None:
                        ctx.tensors[n.output[0]] = _init_tensor(a.t)

    for n in g.node:  # e.g. MatMul(x, DequantizeLinear(int8 weight)) is still a linear layer
        if (n.op_type in _CONST_PASSTHROUGH and n.domain in _DEFAULT_DOMAINS and n.input
                and all(ctx.is_const(x) for x in n.input if x)):
            ctx.derived.update(o for o in n.output if o)

    # parameters: floating initializers, each counted once (subgraph initializers included)
    def is_param(name: str) -> bool:
        t = ctx.tensors.get(name)
        return (name in ctx.initializers or name in sparse) and t is not None \
            and t.dtype in FLOAT_DTYPES
    param_names = [n for n in list(ctx.initializers) + list(sparse) if is_param(n)]
    total_params = sum(math.prod(ctx.tensors[n].shape or ()) for n in param_names)
    total_param_bytes = sum(ctx.tensors[n].nbytes for n in param_names)

    producers: dict[str, int] = {}
    for i, n in enumerate(g.node):
        for o in n.output:
            if o:
                producers[o] = i

    nodes: list[Node] = []
    edges: list[Edge] = []
    unmapped: set[str] = set()
    seen_names: set[str] = set()
    subgraph_nodes = 0
    for i, n in enumerate(g.node):
        raw = _attrs(n)
        target = n.op_type if n.domain in _DEFAULT_DOMAINS else f"{n.domain}.{n.op_type}"
        name = n.name or f"{n.op_type}_{i}"
        if name in seen_names:
            name = f"{name}_{i}"
        seen_names.add(name)

        op, attrs = _resolve(n, raw, ctx)
        if op == "other":
            unmapped.add(target)
        _extra_attrs(n, op, raw, ctx, attrs)
        if op in ("lstm", "gru", "rnn"):
            macs, rattrs = _recurrent_macs(n, raw, ctx)
            attrs.update(rattrs, macs=macs)

        ins = [ctx.get(x) for x in n.input]
        outs = [ctx.get(x) for x in n.output]
        in_shapes: list[Shape] = [t.shape if t.shape is not None else () for t in ins]
        out_shapes: list[Shape] = [t.shape if t.shape is not None else () for t in outs]

        # implicit inputs and initializers of If/Loop/Scan bodies
        implicit: list[str] = []
        inner_params: list[TensorProto] = []
        for sub in _subgraphs(n):
            free, inits, count = _graph_scope(sub)
            implicit += free
            inner_params += [t for t in inits if _dtype_name(t.data_type) in FLOAT_DTYPES]
            subgraph_nodes += count
        if implicit or inner_params:
            attrs["subgraph"] = True
        inner = [_init_tensor(t) for t in inner_params]  # body-local: parameters of the model too
        total_params += sum(math.prod(t.shape or ()) for t in inner)
        total_param_bytes += sum(t.nbytes for t in inner)

        consumed = _dedup(list(n.input) + implicit)
        params = [ctx.tensors[x] for x in consumed if is_param(x)] + inner
        n_params = sum(math.prod(t.shape or ()) for t in params)
        p_bytes = sum(t.nbytes for t in params)

        if not _cost_known(n, op, ins, outs, attrs):
            attrs["shape_unknown"] = True
            flops, macs = 0.0, 0.0
        else:
            flops, macs = _node_cost(n, op, raw, ctx, in_shapes, out_shapes, attrs)

        nodes.append(Node(
            name=name, op=op, target=target,
            input_shapes=in_shapes, input_dtypes=[t.dtype for t in ins],
            output_shapes=out_shapes, output_dtypes=[t.dtype for t in outs],
            flops=float(flops), macs=float(macs), params=int(n_params), param_bytes=int(p_bytes),
            output_bytes=int(sum(t.nbytes for t in outs)), attrs=attrs, phase="forward"))

        for x in consumed:  # one edge per (tensor, consumer)
            src = producers.get(x)
            if src is not None and src != i:
                edges.append(Edge(src, i, ctx.get(x).nbytes, "forward"))

    extra: dict[str, Any] = {
        "opset": opset, "ir_version": int(model.ir_version),
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "shape_inference": inference,
    }
    if unresolved:
        extra["unresolved_dims"] = unresolved
    if n_functions:
        extra["local_functions"] = n_functions
    if subgraph_nodes:
        extra["subgraph_nodes_not_expanded"] = subgraph_nodes
    n_unknown = sum(1 for nd in nodes if nd.attrs.get("shape_unknown"))
    if n_unknown:
        extra["nodes_with_unknown_shapes"] = n_unknown

    meta = GraphMeta(
        model_id=model_id or path.stem, batch_size=batch, input_shapes=input_shapes,
        mode="infer", precision=precision, frontend="onnx",
        frontend_version=f"onnx-{onnx.__version__}/opset-{opset}",
        unmapped_ops=sorted(unmapped), total_params=int(total_params),
        total_param_bytes=int(total_param_bytes), extra=extra)
    return ModelGraph(nodes, edges, meta)
