"""Loading an ONNX model: the ``ModelProto`` (no external data), opset, batch binding and shape
inference, including shape propagation through ONNX Runtime contrib ops.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import onnx
from onnx import GraphProto, ModelProto, NodeProto

from perfcast.errors import ModelSpecError, TraceError
from perfcast.frontends.onnx.ops import _DEFAULT_DOMAINS, _MS_DOMAIN, _attrs
from perfcast.frontends.onnx.tensors import _UNKNOWN, _init_tensor, _Tensor, _vi_tensor
from perfcast.graph import Shape

# ---------------------------------------------------------------------------------- loading


def _load(path: Path) -> ModelProto:
    if not path.exists():
        raise ModelSpecError(f"ONNX file not found: {path} (check the path)")
    if not path.is_file():
        raise ModelSpecError(f"not a file: {path} (pass the path of an .onnx file)")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf DecodeError, OSError, ...
        raise ModelSpecError(f"not a valid ONNX model: {path} ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''})") from exc
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelSpecError(f"not a valid ONNX model: {path} (no IR version or graph)")
    where = _non_utf8_string(model)
    if where is not None:
        raise ModelSpecError(f"not a valid ONNX model: {path} ({where} is not valid UTF-8 — "
                             f"the file is damaged or was not written by an ONNX exporter)")
    return model


def _non_utf8_string(msg, where: str = "model") -> str | None:
    """The first string field of ``msg`` (recursively) that is not valid UTF-8, as a readable
    location (``"graph.node[2].input[0]"``), or ``None``. ONNX's protobuf schema is proto2, so
    the Python runtime hands such a field back as ``bytes`` instead of failing to parse; names
    are the graph's keys, so one of them would reach the graph (and its cache file) as bytes."""
    from google.protobuf.descriptor import FieldDescriptor

    for field, value in msg.ListFields():
        path = f"{where}.{field.name}" if where != "model" else field.name
        repeated = (field.is_repeated if hasattr(field, "is_repeated")  # protobuf ≥ 6
                    else field.label == FieldDescriptor.LABEL_REPEATED)
        values = list(enumerate(value)) if repeated else [(None, value)]
        if field.type == FieldDescriptor.TYPE_STRING:
            for i, v in values:
                if not isinstance(v, str):
                    return path if i is None else f"{path}[{i}]"
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for i, v in values:
                found = _non_utf8_string(v, path if i is None else f"{path}[{i}]")
                if found is not None:
                    return found
    return None


def _opset(model: ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in _DEFAULT_DOMAINS:
            return int(imp.version)
    return 0


def _bind_batch(graph: GraphProto, batch_size: int | None) -> tuple[int, list[Shape], dict]:
    """Bind symbolic/unknown leading dims of graph inputs to the batch size, in place.

    Returns (batch size used, full input shapes with -1 for unresolved dims, unresolved dims).
    """
    init_names = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in init_names]
    fixed: list[tuple[str, int]] = []
    to_bind = []
    params: set[str] = set()
    for vi in inputs:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape") or not tt.shape.dim:
            continue
        d0 = tt.shape.dim[0]
        if d0.HasField("dim_value") and d0.dim_value > 0:
            fixed.append((vi.name, int(d0.dim_value)))
        else:
            to_bind.append(d0)
            if d0.HasField("dim_param") and d0.dim_param:
                params.add(d0.dim_param)
    if batch_size is not None and fixed and not to_bind:
        name, n = next(((nm, v) for nm, v in fixed if v != batch_size), (None, None))
        if name is not None:
            raise ModelSpecError(
                f"model has a fixed batch {n} (input {name!r}), not {batch_size}: use batch "
                f"size {n} (--batch-size {n}) or re-export with a dynamic batch dimension")
    batch = batch_size if batch_size is not None else (fixed[0][1] if fixed and not to_bind else 1)
    for d in to_bind:
        d.dim_value = batch
    if params:  # the same symbol elsewhere (other inputs, outputs, value_info) is the batch too
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            if vi.type.HasField("tensor_type"):
                for d in vi.type.tensor_type.shape.dim:
                    if d.HasField("dim_param") and d.dim_param in params:
                        d.dim_value = batch
    return (batch, *_input_shapes(graph))


def _input_shapes(graph: GraphProto) -> tuple[list[Shape], dict[str, list[str]]]:
    """Full shapes of the graph inputs (``-1`` for an unresolved dim) and, per input, its
    unresolved dims."""
    init_names = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in init_names]
    shapes: list[Shape] = []
    unresolved: dict[str, list[str]] = {}
    for vi in inputs:
        tt = vi.type.tensor_type
        dims = list(tt.shape.dim) if vi.type.HasField("tensor_type") else []
        shapes.append(tuple(int(d.dim_value) if d.HasField("dim_value") else -1 for d in dims))
        bad = [d.dim_param or "?" for d in dims if not d.HasField("dim_value")]
        if bad:
            unresolved[vi.name] = bad
    return shapes, unresolved


def _bind_sizes(graph: GraphProto, label: str, input_size: tuple[int, ...] | None,
                seq_len: int | None) -> None:
    """Bind the symbolic per-sample dimensions of the graph inputs, in place (the batch is
    already bound by :func:`_bind_batch`): ``input_size`` gives the whole per-sample shape of
    the one input that has symbolic dimensions (its fixed ones must agree); ``seq_len`` binds
    every input whose only symbolic per-sample dimension is one (``input_ids``,
    ``attention_mask`` …). The same symbol in outputs / value_info gets the same value. What
    stays symbolic after that is an error that says which option binds it (a graph with
    unknown shapes would cost 0 FLOPs)."""
    init_names = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in init_names
              and vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")]

    def free(vi) -> list:
        return [d for d in list(vi.type.tensor_type.shape.dim)[1:]
                if not (d.HasField("dim_value") and d.dim_value > 0)]

    symbolic = [vi for vi in inputs if free(vi)]
    given = "--input-size" if input_size is not None else "--seq-len" if seq_len else None
    if given and not symbolic:
        raise ModelSpecError(f"{label}: its inputs have fixed shapes "
                             f"({_shapes_text(inputs)}); {given} does not apply — only "
                             f"--batch-size binds a symbolic batch dimension")
    values: dict[str, int] = {}
    if input_size is not None:
        if len(symbolic) != 1:
            raise ModelSpecError(f"{label}: {len(symbolic)} inputs have symbolic dimensions "
                                 f"({_shapes_text(symbolic)}); --input-size gives one input's "
                                 f"shape — re-export with fixed shapes")
        vi = symbolic[0]
        dims = list(vi.type.tensor_type.shape.dim)[1:]
        if len(dims) != len(input_size):
            raise ModelSpecError(f"{label}: input {vi.name!r} has {len(dims)} per-sample "
                                 f"dimensions ({_shapes_text([vi])}), --input-size gives "
                                 f"{len(input_size)}")
        for d, v in zip(dims, input_size):
            if d.HasField("dim_value") and d.dim_value > 0:
                if d.dim_value != v:
                    raise ModelSpecError(f"{label}: input {_shapes_text([vi])}; --input-size "
                                         f"{','.join(map(str, input_size))} disagrees with its "
                                         f"fixed dimension {d.dim_value}")
                continue
            if d.HasField("dim_param") and d.dim_param:
                values[d.dim_param] = v
            d.dim_value = v
    elif seq_len:
        for vi in symbolic:
            dims = free(vi)
            if len(dims) != 1:
                raise ModelSpecError(f"{label}: input {vi.name!r} ({_shapes_text([vi])}) has "
                                     f"{len(dims)} symbolic per-sample dimensions; --seq-len "
                                     f"binds one — give --input-size instead")
            if dims[0].HasField("dim_param") and dims[0].dim_param:
                values[dims[0].dim_param] = seq_len
            dims[0].dim_value = seq_len
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if values and vi.type.HasField("tensor_type"):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and d.dim_param in values:
                    d.dim_value = values[d.dim_param]
    left = [vi for vi in inputs if free(vi)]
    if left:
        hint = ("--seq-len N" if all(len(free(vi)) == 1 for vi in left) and len(left) > 1
                else "--input-size " + ",".join("D" for _ in
                                                list(left[0].type.tensor_type.shape.dim)[1:])
                if len(left) == 1 else "an export with fixed shapes")
        raise ModelSpecError(f"{label}: symbolic input dimensions ({_shapes_text(left)}) — "
                             f"give {hint} to bind them")


def _shapes_text(inputs) -> str:
    """``"x: N×C×224×224, mask: N×S"`` (symbols by name, unknown as ``?``)."""
    def dim(d) -> str:
        if d.HasField("dim_value") and d.dim_value > 0:
            return str(d.dim_value)
        return d.dim_param or "?"

    return ", ".join(f"{vi.name}: " + "×".join(dim(d) for d in vi.type.tensor_type.shape.dim)
                     for vi in inputs)


def _infer_shapes(model: ModelProto, path: Path) -> tuple[ModelProto, str]:
    """Run ONNX shape inference in memory; fall back to ``infer_shapes_path`` via a temp file."""
    errors: list[str] = []
    for data_prop in (True, False):
        try:
            return onnx.shape_inference.infer_shapes(model, data_prop=data_prop), "in-memory"
        except Exception as exc:  # e.g. protobuf > 2 GB, inference bug with data_prop
            errors.append(f"{type(exc).__name__}: {exc}")
    try:
        with tempfile.TemporaryDirectory(prefix="perfcast-onnx-") as tmp:
            src, dst = os.path.join(tmp, "in.onnx"), os.path.join(tmp, "out.onnx")
            with open(src, "wb") as f:
                f.write(model.SerializeToString())
            onnx.shape_inference.infer_shapes_path(src, dst, data_prop=True)
            return onnx.load(dst, load_external_data=False), "path"
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    raise TraceError(f"ONNX shape inference failed for {path}: {errors[-1].splitlines()[0]}")


#: Contrib ops whose output 0 has the shape and dtype of input 0 (ONNX cannot infer them).
_SAME_SHAPE_CONTRIB = frozenset({
    "FastGelu", "BiasGelu", "Gelu", "QuickGelu", "BiasAdd", "BiasSoftmax", "BiasDropout",
    "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
    "SimplifiedLayerNormalization", "RotaryEmbedding"})


def _contrib_output_shape(node: NodeProto, known: dict[str, _Tensor]) -> Shape | None:
    """Output-0 shape of a ``com.microsoft`` op from its input shapes (None if unknown)."""
    def get(i: int) -> Shape | None:
        return known.get(node.input[i], _UNKNOWN).shape if i < len(node.input) else None

    raw = _attrs(node)
    x = get(0)
    if x is None:
        return None
    op = node.op_type
    if op in _SAME_SHAPE_CONTRIB:
        return x
    if op == "Attention" and len(x) == 3:
        w = get(1)
        sizes = raw.get("qkv_hidden_sizes")
        v = sizes[2] if sizes else (w[1] // 3 if w and len(w) == 2 else None)
        return (x[0], x[1], int(v)) if v else None
    if op in ("MultiHeadAttention", "DecoderMaskedMultiHeadAttention"):
        v = get(2)
        if len(x) == 5:  # packed QKV [B, S, N, 3, H]
            return (x[0], x[1], x[2] * x[4])
        if len(x) == 3 and v is not None and len(v) == 3:
            return (x[0], x[1], v[2])
        if len(x) == 3 and v is not None and len(v) == 4:
            return (x[0], x[1], v[1] * v[3])
        return x if len(x) == 3 else None
    if op == "GroupQueryAttention" and len(x) == 3:
        heads, kv_heads = int(raw.get("num_heads", 0)), int(raw.get("kv_num_heads", 0))
        k = get(1) if len(node.input) > 1 and node.input[1] else None
        if k is None and heads and kv_heads:  # packed QKV
            return (x[0], x[1], x[2] * heads // (heads + 2 * kv_heads))
        return x
    if op == "MatMulNBits" and "N" in raw:
        return (*x[:-1], int(raw["N"]))
    return None


def _propagate_contrib_shapes(model: ModelProto, max_passes: int = 64) -> ModelProto:
    """Give ONNX Runtime contrib ops output shapes and re-run inference until nothing changes."""
    def contrib_nodes(g: GraphProto) -> list[NodeProto]:
        return [n for n in g.node if n.domain == _MS_DOMAIN
                or (n.domain in _DEFAULT_DOMAINS and n.op_type in _SAME_SHAPE_CONTRIB)]

    g = model.graph
    contrib = contrib_nodes(g)
    for _ in range(max_passes if contrib else 0):
        known = {t.name: _init_tensor(t) for t in g.initializer}
        known.update((vi.name, _vi_tensor(vi)) for vi in list(g.input) + list(g.value_info)
                     + list(g.output))
        outputs = {vi.name: vi for vi in g.output}
        added = 0
        for n in contrib:
            out = n.output[0] if n.output else ""
            if not out or known.get(out, _UNKNOWN).shape is not None:
                continue
            shape = _contrib_output_shape(n, known)
            x = known.get(n.input[0], _UNKNOWN) if n.input else _UNKNOWN
            if shape is None or not x.elem_type:
                continue
            vi = onnx.helper.make_tensor_value_info(out, x.elem_type, list(shape))
            if out in outputs:
                outputs[out].type.CopyFrom(vi.type)
            else:
                g.value_info.append(vi)
            known[out] = _vi_tensor(vi)
            added += 1
        if not added:
            break
        try:
            model = onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception:  # keep what we have; later nodes stay unknown
            break
        g = model.graph
        contrib = contrib_nodes(g)
    return model
