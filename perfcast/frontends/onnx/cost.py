"""Per-node canonical op, attributes and cost: conv / dense / pooling / clip resolution
(:func:`_resolve`, :func:`_extra_attrs`) and FLOPs/MACs incl. attention and recurrent layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from onnx import NodeProto

from perfcast import ops as _ops
from perfcast.flops import REDUCTIONS, cost
from perfcast.frontends.onnx.ops import (_AVGPOOL, _CLIP, _CONV, _CONVT, _COST_INPUTS,
                                         _DEFAULT_DOMAINS, _DENSE, _GATHER, _MAXPOOL,
                                         _MS_DOMAIN, _RESIZE, _default_attr, map_op_type)
from perfcast.frontends.onnx.tensors import (_UNKNOWN, FLOAT_DTYPES, _Ctx, _dtype_name,
                                             _Tensor)
from perfcast.graph import Shape

# ---------------------------------------------------------------------------------- per node


def _conv_attrs(node: NodeProto, raw: dict[str, Any], x: _Tensor, w: _Tensor,
                has_bias: bool) -> tuple[str, dict[str, Any]]:
    transposed = node.op_type == "ConvTranspose"
    kernel = list(raw.get("kernel_shape") or (w.shape[2:] if w.shape else []))
    r = len(kernel) or (len(x.shape) - 2 if x.shape else 2)
    groups = int(raw.get("group", 1))
    in_ch = 0
    if w.shape and len(w.shape) >= 2:  # weight [C_out, C_in/g, *k] or [C_in, C_out/g, *k]
        in_ch = w.shape[0] if transposed else w.shape[1] * groups
    op = _ops.refine_conv("conv_transpose" if transposed else "conv", groups, in_ch, r)
    pads = list(raw.get("pads") or [0] * (2 * r))
    attrs: dict[str, Any] = {
        "kernel": kernel, "stride": list(raw.get("strides") or [1] * r),
        "padding": pads[:r], "dilation": list(raw.get("dilations") or [1] * r),
        "groups": groups, "bias": has_bias, "transposed": transposed,
    }
    if pads[:r] != pads[r:]:
        attrs["pads"] = pads  # ONNX begin..., end...
    if raw.get("auto_pad", "NOTSET") not in ("NOTSET", ""):
        attrs["auto_pad"] = raw["auto_pad"]
    if transposed and raw.get("output_padding"):
        attrs["output_padding"] = list(raw["output_padding"])
    return op, attrs


def _dense(node: NodeProto, raw: dict[str, Any], ctx: _Ctx,
           idx: Sequence[int]) -> tuple[str, dict[str, Any]]:
    ins = list(node.input)
    a_name = ins[idx[0]] if len(ins) > idx[0] else ""
    b_name = ins[idx[1]] if len(ins) > idx[1] else ""
    a, b = ctx.get(a_name).shape, ctx.get(b_name).shape
    attrs: dict[str, Any] = {}
    b_const = ctx.is_const(b_name)
    if node.op_type == "Gemm":
        op = "linear" if b_const else "matmul"
        ta, tb = int(raw.get("transA", 0)), int(raw.get("transB", 0))
        k = (a[0] if ta else a[1]) if a and len(a) == 2 else ((b[1] if tb else b[0]) if b else None)
        attrs.update(transA=bool(ta), transB=bool(tb), bias=len(ins) > 2 and bool(ins[2]))
    else:
        op = "linear" if b_const and b is not None and len(b) == 2 else "matmul"
        ta = int(raw.get("transA", 0))  # FusedMatMul only
        k = None
        if a:
            k = a[-2] if ta and len(a) >= 2 else a[-1]
        elif b:
            k = b[-2] if len(b) >= 2 else b[0]
        attrs["bias"] = False
    if k is not None:
        attrs["contract"] = int(k)
    return op, attrs


def _clip_op(node: NodeProto, raw: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    lo: float | None = raw.get("min")
    hi: float | None = raw.get("max")
    ins = list(node.input)
    if len(ins) > 1 and ins[1]:
        v = ctx.value(ins[1], 1)
        lo = v[0] if v else None
    if len(ins) > 2 and ins[2]:
        v = ctx.value(ins[2], 1)
        hi = v[0] if v else None
    attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
    return ("relu6" if lo == 0.0 and hi == 6.0 else "clamp"), attrs


def _attention_shapes(q: Shape, k: Shape, v: Shape, q_heads: int, kv_heads: int) -> list[Shape]:
    """Per-head Q/K/V shapes ``[B, H, L, E]`` so ``sdpa_macs`` also counts GQA correctly."""
    if len(q) == 5 and not k:  # packed QKV [B, S, H, 3, E]
        qq = (q[0], q[2], q[1], q[4])
        return [qq, qq, qq]
    if len(q) == 3 and len(k) == 3 and len(v) == 3 and q_heads > 0:
        kvh = kv_heads or q_heads
        return [(q[0], q_heads, q[1], q[2] // q_heads), (k[0], q_heads, k[1], k[2] // kvh),
                (v[0], q_heads, v[1], v[2] // kvh)]
    return [q, k, v]


def _recurrent_macs(node: NodeProto, raw: dict[str, Any],
                    ctx: _Ctx) -> tuple[float, dict[str, Any]]:
    """MACs of LSTM/GRU/RNN: seq·batch·dirs·gates·hidden·(input + hidden)."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[node.op_type]
    x = ctx.get(node.input[0]).shape
    hidden = int(raw.get("hidden_size", 0))
    dirs = 2 if raw.get("direction", "forward") == "bidirectional" else 1
    attrs: dict[str, Any] = {"hidden_size": hidden, "num_directions": dirs}
    if not x or len(x) != 3 or not hidden:
        return 0.0, attrs
    seq, batch = (x[1], x[0]) if int(raw.get("layout", 0)) else (x[0], x[1])
    return float(seq * batch * dirs * gates * hidden * (x[2] + hidden)), attrs


def _node_cost(node: NodeProto, op: str, raw: dict[str, Any], ctx: _Ctx,
               in_shapes: list[Shape], out_shapes: list[Shape],
               attrs: dict[str, Any]) -> tuple[float, float]:
    """(flops, macs) of one node, via :func:`perfcast.flops.cost` on the right tensors."""
    idx = _COST_INPUTS.get(node.op_type)
    cin = [in_shapes[i] if i < len(in_shapes) else () for i in idx] if idx else in_shapes
    if op in ("lstm", "gru", "rnn"):
        return cost(op, cin, out_shapes, attrs)
    if op == "multihead_attention" and node.domain == _MS_DOMAIN and node.op_type == "Attention":
        x, w = cin[0], cin[1] if len(cin) > 1 else ()
        if len(x) != 3 or len(w) != 2:
            return 0.0, 0.0
        sizes = list(raw.get("qkv_hidden_sizes") or [w[1] // 3] * 3)
        heads = int(raw.get("num_heads", 1)) or 1
        f1, m1 = cost("linear", [x], [(x[0], x[1], w[1])],
                      {"contract": x[2], "bias": len(cin) > 2 and bool(cin[2])})
        qkv = [(x[0], heads, x[1], s // heads) for s in sizes]
        f2, m2 = cost("sdpa", qkv, out_shapes, {})
        return f1 + f2, m1 + m2
    if op in ("sdpa", "multihead_attention"):
        q_heads = int(raw.get("q_num_heads", raw.get("num_heads", 0)) or 0)
        kv_heads = int(raw.get("kv_num_heads", 0) or 0)
        q, k, v = (cin[i] if i < len(cin) else () for i in range(3))
        cin = _attention_shapes(q, k, v, q_heads, kv_heads)
    return cost(op, cin, out_shapes, attrs)


def _cost_known(node: NodeProto, op: str, ins: list[_Tensor], outs: list[_Tensor],
                attrs: dict[str, Any]) -> bool:
    """Whether every shape that ``cost`` reads for this op is known."""
    if node.output and node.output[0] and outs[0].shape is None:
        return False
    idx = _COST_INPUTS.get(node.op_type)
    used = [ins[i] if i < len(ins) else _UNKNOWN for i in idx] if idx else ins
    if op in ("linear", "matmul", "bmm"):
        return "contract" in attrs
    if op.startswith("conv"):
        return all(t.shape is not None for t in used[:2])
    if op == "einsum":
        return all(t.shape is not None for t in used)
    if op in ("sdpa", "multihead_attention") or op in REDUCTIONS:
        return bool(used) and used[0].shape is not None  # K/V may be packed or optional
    return True


def _resolve(node: NodeProto, raw: dict[str, Any], ctx: _Ctx) -> tuple[str, dict[str, Any]]:
    """Canonical op and canonical attrs of one node."""
    mapped = map_op_type(node.op_type, node.domain)
    ins = list(node.input)
    attrs: dict[str, Any] = {}
    if mapped in (_CONV, _CONVT):
        x_i, w_i, b_i = _COST_INPUTS.get(node.op_type, (0, 1, 2))
        x, w = (ctx.get(ins[i]) if i < len(ins) else _UNKNOWN for i in (x_i, w_i))
        return _conv_attrs(node, raw, x, w, has_bias=len(ins) > b_i and bool(ins[b_i]))
    if mapped == _DENSE:
        return _dense(node, raw, ctx, _COST_INPUTS.get(node.op_type, (0, 1)))
    if mapped in (_MAXPOOL, _AVGPOOL) or mapped == "lp_pool":
        if node.op_type == "GlobalLpPool":
            x = ctx.get(ins[0]).shape
            return "lp_pool", {"kernel": list(x[2:]) if x else []}
        kernel = list(raw.get("kernel_shape") or [])
        r = max(1, min(3, len(kernel) or 2))
        pads = list(raw.get("pads") or [0] * (2 * r))
        attrs = {"kernel": kernel, "stride": list(raw.get("strides") or [1] * r),
                 "padding": pads[:r], "dilation": list(raw.get("dilations") or [1] * r),
                 "ceil_mode": bool(raw.get("ceil_mode", 0))}
        if pads[:r] != pads[r:]:
            attrs["pads"] = pads
        if mapped == "lp_pool":
            return "lp_pool", attrs
        return f"{'max' if mapped == _MAXPOOL else 'avg'}_pool{r}d", attrs
    if mapped == _CLIP:
        return _clip_op(node, raw, ctx)
    if mapped == _RESIZE:
        mode = str(raw.get("mode", "nearest")).lower()
        attrs = {"mode": mode}
        return ("upsample_nearest" if mode == "nearest" else "upsample_linear"), attrs
    if mapped == _GATHER:
        data = ctx.initializers.get(ins[0]) if ins else None
        op = "gather"
        if data is not None and len(data.dims) == 2 and _dtype_name(data.data_type) in FLOAT_DTYPES:
            op = "embedding"  # nn.Embedding exports as Gather(weight_initializer, ids)
        return op, attrs
    if mapped == "einsum":
        return "einsum", {"equation": str(raw.get("equation", ""))}
    if mapped == "linear":  # MatMulNBits: K is an attribute, weights are packed
        attrs = {"bias": len(ins) > 5 and bool(ins[5])}
        if "K" in raw:
            attrs["contract"] = int(raw["K"])
        return "linear", attrs
    return mapped, attrs


def _extra_attrs(node: NodeProto, op: str, raw: dict[str, Any], ctx: _Ctx,
                 attrs: dict[str, Any]) -> None:
    """Canonical ``axis``/``axes``/``perm``/``to`` keys where the op has them."""
    axis = raw.get("axis")
    if axis is None and node.domain in _DEFAULT_DOMAINS:
        axis = _default_attr(node.op_type, node.domain, ctx.opset, "axis")
    if axis is not None and not isinstance(axis, (list, str)):
        attrs["axis"] = int(axis)
    ins = list(node.input)
    if _ops.category(op) == "reduction" or node.op_type.startswith("Reduce"):
        axes = raw.get("axes")
        if axes is None and len(ins) > 1 and ins[1] and node.op_type.startswith("Reduce"):
            v = ctx.value(ins[1])
            axes = [int(a) for a in v] if v is not None else None
        if axes is not None:
            attrs["axes"] = list(axes)
        if "keepdims" in raw:
            attrs["keepdims"] = bool(raw["keepdims"])
    if node.op_type == "CumSum" and len(ins) > 1:
        v = ctx.value(ins[1], 1)
        if v:
            attrs["axis"] = int(v[0])
    if node.op_type == "Transpose" and "perm" in raw:
        attrs["perm"] = list(raw["perm"])
    if node.op_type == "Cast" and "to" in raw:
        attrs["to"] = _dtype_name(int(raw["to"]))
    for key in ("num_heads", "q_num_heads", "kv_num_heads", "epsilon"):
        if key in raw:
            attrs[key] = raw[key]
