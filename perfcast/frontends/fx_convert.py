"""FX graph → :class:`~perfcast.graph.ModelGraph`: the conversion step of the PyTorch frontend.

:func:`convert_fx_graph` walks an exported FX graph (inlining the bodies of higher-order ops),
turns each ATen call into a :class:`~perfcast.graph.Node` (canonical op from
:mod:`perfcast.frontends.aten_map`, shapes, parameters, FLOPs/MACs), marks forward/backward
phases, adds the data edges and, for training graphs, one optimizer-update node per parameter.
Structural no-ops are aliases (edges go through them); views of weights only are folded into
their consumer. Size arithmetic (SymInt-valued nodes) is not part of the graph. A
data-dependent size (``nonzero``: the tokens routed to a mixture-of-experts expert) must have
been bound to a value at trace time (:mod:`perfcast.zoo.moe` does it with ``torch._check``);
the node that makes it records the value and the assumption (``routed_tokens``,
``size_assumption``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from perfcast import ops as _ops
from perfcast.flops import cost
from perfcast.frontends import aten_map
from perfcast.graph import Edge, GraphMeta, ModelGraph, Node
from perfcast.zoo.moe import ROUTING_ASSUMPTION

_OPTIMIZER_OP = {"sgd": "sgd_update", "sgd-momentum": "sgd_momentum_update",
                 "adam": "adam_update", "adamw": "adamw_update"}
_PASS_THROUGH = {"alias", "detach", "detach_", "lift_fresh", "_assert_tensor_metadata", "_assert_async",
                 "_assert_scalar", "sym_constrain_range_for_size", "sym_constrain_range",
                 "_functional_assert_async", "_functional_sym_constrain_range",
                 "sym_size", "sym_numel", "sym_stride", "sym_storage_offset", "dropout_identity"}
_WEIGHT_VIEWS = {"t", "transpose", "permute", "view", "reshape", "_unsafe_view", "unsqueeze",
                 "squeeze", "expand", "alias", "detach", "flatten"}
_DROPOUTS = ("dropout", "dropout_", "feature_dropout", "feature_dropout_", "alpha_dropout",
             "alpha_dropout_")


def _dtype_str(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dim(d: Any, subs: dict | None) -> int:
    """A tensor dimension as an int; a symbolic one is evaluated with ``subs`` (symbol → int)."""
    if subs and isinstance(d, torch.SymInt):
        return int(d.node.expr.xreplace(subs))
    return int(d)


def _tensor_info(val: Any, subs: dict | None = None) -> list[tuple[tuple[int, ...], str, int]]:
    """(shape, dtype, bytes) for every tensor in an FX node's ``meta['val']``."""
    out = []
    if isinstance(val, torch.Tensor):
        shape = tuple(_dim(d, subs) for d in val.shape)
        nbytes = (math.prod(shape) if subs else int(val.numel())) * val.element_size()
        out.append((shape, _dtype_str(val.dtype), nbytes))
    elif isinstance(val, (list, tuple)):
        for v in val:
            out.extend(_tensor_info(v, subs))
    return out


def flat_nodes(args: Iterable[Any]) -> list[torch.fx.Node]:
    found: list[torch.fx.Node] = []
    for a in args:
        if isinstance(a, torch.fx.Node):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(flat_nodes(a))
        elif isinstance(a, dict):
            found.extend(flat_nodes(a.values()))
    return found


def _shape_at(shapes: list, i: int) -> tuple:
    return tuple(shapes[i]) if len(shapes) > i and shapes[i] is not None else ()


def _canonical(base: str, node: torch.fx.Node, in_shapes: list, attrs: dict) -> str | None:
    fam = aten_map.lookup(base)
    if fam is None:
        return None
    a = node.args
    if fam == "conv":
        transposed = False
        groups = 1
        if base in ("convolution", "_convolution"):
            transposed = bool(a[6]) if len(a) > 6 else False
            groups = int(a[8]) if len(a) > 8 else 1
            attrs.update(stride=list(a[3]), padding=list(a[4]), dilation=list(a[5]))
        elif base in ("conv1d", "conv2d", "conv3d", "_convolution_mode"):
            groups = int(a[6]) if len(a) > 6 else int(node.kwargs.get("groups", 1))
            if len(a) > 3:
                attrs["stride"] = list(a[3]) if isinstance(a[3], (list, tuple)) else [a[3]]
            if len(a) > 4:
                attrs["padding"] = a[4] if isinstance(a[4], str) else list(a[4])
            if len(a) > 5:
                attrs["dilation"] = list(a[5])
        w = in_shapes[1] if len(in_shapes) > 1 else ()
        attrs["kernel"] = list(w[2:])
        attrs["groups"] = groups
        attrs["bias"] = len(a) > 2 and a[2] is not None
        attrs["transposed"] = transposed
        cin = in_shapes[0][1] if in_shapes and len(in_shapes[0]) > 1 else 0
        return _ops.refine_conv("conv_transpose" if transposed else "conv", groups, cin,
                                max(1, len(w) - 2))
    if fam == "conv_transpose":
        w = in_shapes[1] if len(in_shapes) > 1 else ()
        attrs.update(kernel=list(w[2:]), transposed=True, bias=len(a) > 2 and a[2] is not None)
        return f"conv_transpose{max(1, min(3, len(w) - 2))}d"
    if fam == "linear":
        if base == "addmm":
            attrs.update(contract=int(in_shapes[1][-1]), bias=True)
        else:
            attrs.update(contract=int(in_shapes[0][-1]) if in_shapes and in_shapes[0] else 1,
                         bias=len(a) > 2 and a[2] is not None)
        return "linear"
    if fam in ("matmul", "bmm"):
        ops_in = in_shapes[1:] if base in ("baddbmm", "addbmm", "addmv", "addr") else in_shapes
        if ops_in and ops_in[0]:
            attrs["contract"] = int(ops_in[0][-1])
        attrs["bias"] = base in ("baddbmm", "addbmm", "addmv")
        return fam
    if fam == "einsum":
        attrs["equation"] = str(a[0])
        return "einsum"
    if base in ("lstm", "gru", "rnn_tanh", "rnn_relu") and in_shapes and len(in_shapes[0]) > 1:
        # aten.lstm / gru / rnn_*(input, hx, params, ...) over a whole sequence: every weight
        # matrix (the 2-D inputs: W_ih, W_hh of each layer and direction; hx is 3-D) is
        # applied once per token
        x = in_shapes[0]
        tokens = math.prod(int(d) for d in x[:-1]) if len(x) > 1 else 1
        attrs["macs"] = float(tokens * sum(int(s[0]) * int(s[1]) for s in in_shapes[1:]
                                           if len(s) == 2))
        return fam
    if fam == "grouped_mm":
        # MoE experts as one grouped GEMM: rows [S, K] (S = tokens x top_k, sorted by expert)
        # times each group's weight -> [S, N]; a linear layer of S rows (MACs S x K x N)
        attrs["contract"] = int(_shape_at(in_shapes, 0)[-1]) if _shape_at(in_shapes, 0) else 1
        attrs["bias"] = base == "_grouped_mm" and len(a) > 3 and a[3] is not None
        return "linear"
    if fam == "grouped_mm_backward":
        # (input [S, K], weight, offs, grad_out [S, N]) -> (d_input [S, K], d_weight): two GEMMs
        # of S x K x N, counted as one [S, K] output contracting 2N (dX: N, dW: N)
        g = _shape_at(in_shapes, 3)
        attrs["contract"] = 2 * int(g[-1]) if g else 1
        attrs["bias"] = False
        return "linear"
    if base == "where" and len(a) == 1:
        return "nonzero"  # where(cond): nonzero(cond) as a tuple of index tensors
    if fam == "conv_backward":
        mask = a[10] if len(a) > 10 else [True, True, True]
        attrs["grads"] = int(bool(mask[0])) + int(bool(mask[1]))
        attrs["bias_grad"] = bool(mask[2]) if len(mask) > 2 else False
        attrs["transposed"] = bool(a[7]) if len(a) > 7 else False
        attrs["groups"] = int(a[9]) if len(a) > 9 else 1
        w = in_shapes[2] if len(in_shapes) > 2 else ()
        attrs["kernel"] = list(w[2:])
        return "conv_backward"
    if fam in ("max_pool", "avg_pool"):
        k = a[1] if len(a) > 1 else []
        k = list(k) if isinstance(k, (list, tuple)) else [k]
        rank = len(in_shapes[0]) - 2 if in_shapes and in_shapes[0] else len(k)
        if len(k) == 1 and rank > 1:
            k = k * rank
        attrs["kernel"] = k
        if len(a) > 2 and a[2]:
            attrs["stride"] = list(a[2]) if isinstance(a[2], (list, tuple)) else [a[2]]
        return f"{fam}{max(1, min(3, rank))}d"
    if fam == "hardtanh":
        lo = a[1] if len(a) > 1 else -1.0
        hi = a[2] if len(a) > 2 else 1.0
        return "relu6" if (lo, hi) == (0.0, 6.0) or (lo, hi) == (0, 6) else "hardtanh"
    if fam == "cast":
        val = node.meta.get("val")
        src = node.args[0].meta.get("val") if node.args and isinstance(node.args[0], torch.fx.Node) else None
        if isinstance(val, torch.Tensor) and isinstance(src, torch.Tensor) and val.dtype == src.dtype:
            return "copy"
        return "cast"
    if fam in ("sdpa", "sdpa_backward"):
        q = in_shapes[0 if fam == "sdpa" else 1] if in_shapes else ()
        if len(q) >= 3:
            attrs["heads"] = int(q[-3])
        return fam
    return fam


def _data_dependent_dims(val: Any) -> list[int]:
    """Dimensions of an FX node's (first) output whose size was data-dependent — an unbacked
    symbol of ``nonzero`` / ``where(mask)`` that the model bound with ``torch._check`` (an
    unbound one cannot become an int and fails the conversion)."""
    if isinstance(val, (list, tuple)):
        val = next((v for v in val if isinstance(v, torch.Tensor)), None)
    if not isinstance(val, torch.Tensor):
        return []
    dims = []
    for i, d in enumerate(val.shape):
        if isinstance(d, torch.SymInt):
            raw = getattr(d.node, "_expr", None)
            if raw is not None and free_unbacked_symbols(raw):
                dims.append(i)
    return dims


def _is_sym(n: torch.fx.Node) -> bool:
    """Whether an FX node computes a (symbolic) size rather than a tensor."""
    return isinstance(n.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool))



def _is_graph_attr(a: torch.fx.Node, owner: torch.fx.GraphModule) -> bool:
    """Whether FX node ``a`` fetches a subgraph (a ``GraphModule`` attribute of ``owner``)."""
    return a.op == "get_attr" and isinstance(getattr(owner, a.target, None), torch.fx.GraphModule)


def _subgraph_of(n: torch.fx.Node, owner: torch.fx.GraphModule) -> torch.fx.GraphModule | None:
    """The body of a higher-order op (autocast, set_grad_enabled…), or None for a plain call."""
    return next((getattr(owner, a.target) for a in n.args
                 if isinstance(a, torch.fx.Node) and _is_graph_attr(a, owner)), None)


def _is_pass_through(base: str, n: torch.fx.Node) -> bool:
    """Structural no-ops (aliases, assertions, symbolic sizes, inactive dropout)."""
    return base in _PASS_THROUGH or base.startswith(("sym_", "_assert")) or (
        base in _DROPOUTS and len(n.args) > 2 and n.args[2] is False)


class _Converter:
    """State of one FX → ModelGraph conversion; FX names are qualified by their subgraph prefix.

    ``subs`` binds the symbols of a dynamic-shape export (symbol → int).
    """

    def __init__(self, param_inputs: dict[str, str], subs: dict | None):
        self.param_inputs = param_inputs
        self.subs = subs
        self.index_of: dict[str, int] = {}          # qualified fx name -> ModelGraph node index
        self.alias_of: dict[str, str] = {}          # qualified fx name -> name it passes through to
        self.param_of: dict[str, str] = {}          # qualified fx name -> parameter name
        self.hop_outputs: dict[str, list[str]] = {}  # higher-order op -> qualified names of outputs
        self.nodes: list[Node] = []
        self.fx_by_index: list[tuple[torch.fx.Node, str]] = []  # (fx node, its graph's prefix)
        self.unmapped: set[str] = set()

    def resolve(self, name: str) -> str:
        while name in self.alias_of:
            name = self.alias_of[name]
        return name

    def walk(self, graph_nodes: list[torch.fx.Node], owner: torch.fx.GraphModule, prefix: str,
             operands: list[str] | None) -> list[str]:
        """Convert one FX graph; ``operands`` bind a subgraph's placeholders. Returns outputs."""
        placeholder_i = 0
        outputs: list[str] = []
        for n in graph_nodes:
            q = prefix + n.name
            if n.op == "placeholder":
                if operands is not None:
                    if placeholder_i < len(operands):
                        self.alias_of[q] = operands[placeholder_i]
                    placeholder_i += 1
                elif n.name in self.param_inputs:
                    self.param_of[q] = self.param_inputs[n.name]
            elif n.op == "output":
                outputs = [prefix + x.name for x in flat_nodes(n.args)]
            elif n.op == "call_function":
                self._call_function(n, owner, prefix, q)
        return outputs

    def _call_function(self, n: torch.fx.Node, owner: torch.fx.GraphModule, prefix: str,
                       q: str) -> None:
        """One ``call_function``: an alias, an inlined subgraph, a folded weight view or a node."""
        if n.target is operator.getitem:
            src = prefix + n.args[0].name
            idx = n.args[1] if len(n.args) > 1 else 0
            if src in self.hop_outputs and isinstance(idx, int) and idx < len(self.hop_outputs[src]):
                self.alias_of[q] = self.hop_outputs[src][idx]
            else:
                self.alias_of[q] = src
            return
        sub = _subgraph_of(n, owner)
        if sub is not None:  # higher-order op (autocast, set_grad_enabled…): inline its body
            ops_in = [prefix + a.name for a in flat_nodes(n.args) if not _is_graph_attr(a, owner)]
            self.hop_outputs[q] = self.walk(list(sub.graph.nodes), sub, q + ".", ops_in)
            return
        if _is_sym(n):
            return  # size arithmetic (symbolic batch, data-dependent sizes), not a model op
        base = aten_map.aten_base_name(n.target)
        ins = flat_nodes(list(n.args) + list(n.kwargs.values()))
        # symbolic sizes are arguments, not data inputs (a static export has none)
        ins = [x for x in ins if not _is_sym(x)]
        if _is_pass_through(base, n):
            if ins:
                self.alias_of[q] = prefix + ins[0].name
            return
        in_resolved = [self.resolve(prefix + x.name) for x in ins]
        if base in _WEIGHT_VIEWS and ins and all(r in self.param_of for r in in_resolved):
            self.param_of[q] = self.param_of[in_resolved[0]]
            return
        self._add_node(n, q, prefix, base, ins, in_resolved)

    def _add_node(self, n: torch.fx.Node, q: str, prefix: str, base: str,
                  ins: list[torch.fx.Node], in_resolved: list[str]) -> None:
        """Append the ModelGraph node of an ATen call (shapes, canonical op, params, cost)."""
        in_shapes, in_dtypes = [], []
        for x in ins:
            info = _tensor_info(x.meta.get("val"), self.subs)
            if info:
                in_shapes.append(info[0][0])
                in_dtypes.append(info[0][1])
        out = _tensor_info(n.meta.get("val"), self.subs)
        attrs: dict[str, Any] = {}
        op = _canonical(base, n, in_shapes, attrs)
        target = str(n.target)
        if op is None:
            op = "other"
            self.unmapped.add(target)
        routed = _data_dependent_dims(n.meta.get("val"))
        if routed and out and not any(_data_dependent_dims(x.meta.get("val")) for x in ins):
            # the op that makes a data-dependent size (an MoE expert's tokens: nonzero), whose
            # value perfcast.zoo.moe bound at trace time to an expected value
            attrs["routed_tokens"] = int(out[0][0][routed[0]])
            attrs["size_assumption"] = ROUTING_ASSUMPTION
        params, pbytes = self._param_size(ins, in_resolved)
        flops, macs = cost(op, in_shapes, [o[0] for o in out], attrs)
        self.index_of[q] = len(self.nodes)
        self.fx_by_index.append((n, prefix))
        self.nodes.append(Node(
            name=q, op=op, target=target, input_shapes=in_shapes, input_dtypes=in_dtypes,
            output_shapes=[o[0] for o in out], output_dtypes=[o[1] for o in out],
            flops=flops, macs=macs, params=int(params), param_bytes=pbytes,
            output_bytes=sum(o[2] for o in out), attrs=attrs))

    def _param_size(self, ins: list[torch.fx.Node], in_resolved: list[str]) -> tuple[int, int]:
        """(elements, bytes) of the distinct parameters a node reads."""
        params = 0
        pbytes = 0
        seen_params: set[str] = set()
        for x, r in zip(ins, in_resolved):
            if r in self.param_of and self.param_of[r] not in seen_params:
                seen_params.add(self.param_of[r])
                info = _tensor_info(x.meta.get("val"), self.subs)
                if info:
                    params += math.prod(info[0][0]) if info[0][0] else 1
                    pbytes += info[0][2]
        return params, pbytes

    def mark_phases(self, fx_nodes: list[torch.fx.Node], roots: set[str]) -> None:
        """Forward = ancestors of the loss/outputs/buffer updates; every other node is backward."""
        by_name = {n.name: n for n in fx_nodes}
        fwd: set[str] = set()
        stack = [r for r in roots if r in by_name]
        while stack:
            name = stack.pop()
            if name in fwd:
                continue
            fwd.add(name)
            stack.extend(x.name for x in flat_nodes(list(by_name[name].args) +
                                                     list(by_name[name].kwargs.values())))
        for i, (fxn, _) in enumerate(self.fx_by_index):
            self.nodes[i].phase = "forward" if fxn.name in fwd else "backward"

    def edges(self) -> list[Edge]:
        """Data edges between converted nodes, deduplicated per (src, dst)."""
        edges: list[Edge] = []
        seen: set[tuple[int, int]] = set()
        for dst, (fxn, prefix) in enumerate(self.fx_by_index):
            for x in flat_nodes(list(fxn.args) + list(fxn.kwargs.values())):
                r = self.resolve(prefix + x.name)
                src = self.index_of.get(r)
                if src is None or (src, dst) in seen:
                    continue
                seen.add((src, dst))
                info = _tensor_info(x.meta.get("val"), self.subs)
                nbytes = sum(i[2] for i in info)
                kind = "forward" if self.nodes[dst].phase == "forward" else "backward"
                edges.append(Edge(src, dst, nbytes, kind))
        return edges

    def add_optimizer_nodes(self, fx_nodes: list[torch.fx.Node], grads: dict[str, str],
                            optimizer: str, edges: list[Edge]) -> None:
        """One update node per parameter tensor, fed by its gradient."""
        if optimizer == "none":  # forward + backward only: no update
            return
        opt_op = _OPTIMIZER_OP[optimizer]
        by_name = {n.name: n for n in fx_nodes}
        for grad_name, pname in grads.items():
            gnode = by_name.get(grad_name)
            info = _tensor_info(gnode.meta.get("val"), self.subs) if gnode is not None else []
            if not info:
                continue
            shape, dtype, nbytes = info[0]
            numel = int(math.prod(shape)) if shape else 1
            attrs = {"param": pname,
                     "state_tensors": {"sgd": 0, "sgd-momentum": 1}.get(optimizer, 2)}
            flops, _ = cost(opt_op, [shape, shape], [shape], attrs)
            idx = len(self.nodes)
            self.nodes.append(Node(name=f"opt.{pname}", op=opt_op, target=f"optim.{optimizer}",
                                   input_shapes=[shape, shape], input_dtypes=[dtype, dtype],
                                   output_shapes=[shape], output_dtypes=[dtype], flops=flops,
                                   macs=0.0, params=numel, param_bytes=nbytes,
                                   output_bytes=nbytes, attrs=attrs, phase="optimizer"))
            src = self.index_of.get(self.resolve(grad_name))
            if src is not None:
                edges.append(Edge(src, idx, nbytes, "backward"))


def convert_fx_graph(gm: torch.fx.GraphModule, param_inputs: dict[str, str],
                     grads: dict[str, str], roots: set[str], mode: str, optimizer: str,
                     subs: dict | None = None) -> ModelGraph:
    """FX graph → :class:`ModelGraph`. ``subs`` binds the symbols of a dynamic-shape export
    (symbol → int); its size arithmetic (SymInt-valued nodes) is not part of the model graph."""
    fx_nodes = list(gm.graph.nodes)
    conv = _Converter(param_inputs, subs)
    conv.walk(fx_nodes, gm, "", None)
    if mode == "train":  # phases: forward = ancestors of the loss/outputs/buffer updates
        conv.mark_phases(fx_nodes, roots)
    edges = conv.edges()
    if mode == "train":  # optimizer: one update node per parameter tensor
        conv.add_optimizer_nodes(fx_nodes, grads, optimizer, edges)
    meta = GraphMeta(model_id="", batch_size=1, input_shapes=[], unmapped_ops=sorted(conv.unmapped))
    return ModelGraph(conv.nodes, edges, meta)
