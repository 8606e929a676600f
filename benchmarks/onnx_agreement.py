"""Agreement between the PyTorch graph and the ONNX graph of the same model.

The same model built through :func:`perfcast.frontends.torch_frontend.graph_from_module` and
through ``torch.onnx.export`` + :func:`perfcast.frontends.onnx.graph_from_onnx` must
give the same op counts, modulo the exporter's documented decompositions, and total MACs
within 2 %. :func:`compare_graphs` checks this as a *normalisation*:

1. every canonical op is mapped to a **comparison group** (:data:`GROUP_OF`): all convolutions
   are ``conv``, ``linear``/``matmul``/``bmm``/``einsum`` are ``dense``, ``relu``/``relu6``/
   ``hardtanh``/``clamp`` are ``relu_clip``, pooling is split by kind, every other compute op is
   its own group. Shape and memory plumbing (``reshape``, ``transpose``, ``slice``, ``gather``,
   ``cast``, ``concat``, ``dropout``, constants…) forms *plumbing* groups whose counts are
   reported but never compared (:data:`PLUMBING_GROUPS`).
2. nodes that are computed from constants only (no path from a model input) and nodes whose
   result never reaches a model output are set aside on both sides (the exporter folds the
   former and deletes the latter);
3. the documented decomposition rules (:data:`RULES`) turn the PyTorch counts into the counts
   the ONNX graph should have — e.g. an eval BatchNorm after a Conv disappears, a SiLU becomes
   a Sigmoid and a Mul;
4. whatever still differs in a compute group is ``"unexplained"``.

:data:`DOCUMENTED_DECOMPOSITIONS` maps every rule name (and the bookkeeping tags used in the
difference list) to a one-line explanation, for docs and reports.

Agreement = every compute group's count is equal after the rules, and total MACs agree within
:data:`MACS_TOLERANCE` (2 %).

A validation helper, never used at prediction time: it serves ``benchmarks/check_onnx_agreement.py``
(run from the checkout; this folder is on ``sys.path``) and ``tests/test_onnx_agreement.py``.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from perfcast import ops as _ops
from perfcast.graph import ModelGraph, Node

__all__ = ["DOCUMENTED_DECOMPOSITIONS", "GROUP_OF", "MACS_TOLERANCE", "PLUMBING_GROUPS",
           "RULES", "compare_graphs", "comparison_group", "format_comparison",
           "onnx_constant_nodes"]

#: Largest allowed relative difference of total MACs, ``|onnx - torch| / torch``.
MACS_TOLERANCE = 0.02

# ---------------------------------------------------------------------------------- groups

_EXPLICIT_GROUPS: dict[str, tuple[str, ...]] = {
    "conv": ("conv1d", "conv2d", "conv3d", "conv_depthwise", "conv_grouped",
             "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"),
    "dense": ("linear", "matmul", "bmm", "einsum"),
    "attention": ("sdpa", "multihead_attention"),
    "relu_clip": ("relu", "relu6", "hardtanh", "clamp"),
    "softmax": ("softmax", "log_softmax"),
    "max_pool": ("max_pool1d", "max_pool2d", "max_pool3d"),
    "avg_pool": ("avg_pool1d", "avg_pool2d", "avg_pool3d"),
    "resize": ("upsample_nearest", "upsample_linear"),
}

#: Op categories (:data:`perfcast.ops.CATEGORY`) whose ops are plumbing, never compared.
PLUMBING_CATEGORIES = frozenset({"shape", "memory", "constant", "regularization"})


def _build_groups() -> dict[str, str]:
    out: dict[str, str] = {}
    for group, members in _EXPLICIT_GROUPS.items():
        for op in members:
            out[op] = group
    for op in _ops.OPS:
        if op in out:
            continue
        cat = _ops.category(op)
        out[op] = f"plumbing:{cat}" if cat in PLUMBING_CATEGORIES else op
    return out


#: Canonical op -> comparison group. Plumbing groups are named ``plumbing:<category>``.
GROUP_OF: dict[str, str] = _build_groups()

#: Groups that are reported but not compared (shape/memory plumbing, constants, dropout).
PLUMBING_GROUPS = frozenset(g for g in GROUP_OF.values() if g.startswith("plumbing:"))


def comparison_group(op: str) -> str:
    """Comparison group of a canonical op (unknown ops are the ``other`` group)."""
    return GROUP_OF.get(op, "other")


def is_compute_group(group: str) -> bool:
    return group not in PLUMBING_GROUPS


# ---------------------------------------------------------------------------------- docs

#: Every documented decomposition / bookkeeping rule: name -> explanation.
DOCUMENTED_DECOMPOSITIONS: dict[str, str] = {}


def _document(name: str, text: str) -> None:
    DOCUMENTED_DECOMPOSITIONS[name] = text


_document("shape_plumbing",
          "Shape and memory plumbing (reshape/view, transpose/permute, slice/select, split/"
          "unbind, gather, concat, expand, copy/clone, cast, pad, roll, constants, dropout) is "
          "expressed differently by torch.export and the ONNX exporter; these groups are "
          "reported but not compared.")
_document("constant_folding",
          "Nodes computed only from constants (no path from a model input: position-id "
          "ranges, attention-mask construction, Swin's shifted-window mask) are folded into "
          "initializers by the ONNX exporter (or kept when too large to fold); they are set "
          "aside on both sides.")
_document("dead_code_elimination",
          "Nodes whose result never reaches a model output (e.g. BERT's pooler when only "
          "last_hidden_state is returned) run in eager PyTorch but are deleted by the ONNX "
          "exporter; they are set aside on the PyTorch side.")


# ---------------------------------------------------------------------------------- analysis


def _in_edges(graph: ModelGraph) -> list[list[int]]:
    preds: list[list[int]] = [[] for _ in graph.nodes]
    for e in graph.edges:
        if 0 <= e.src < len(graph.nodes) and 0 <= e.dst < len(graph.nodes) and e.src != e.dst:
            if e.src not in preds[e.dst]:
                preds[e.dst].append(e.src)
    return preds


def _out_edges(graph: ModelGraph) -> list[list[int]]:
    succ: list[list[int]] = [[] for _ in graph.nodes]
    for e in graph.edges:
        if 0 <= e.src < len(graph.nodes) and 0 <= e.dst < len(graph.nodes) and e.src != e.dst:
            if e.dst not in succ[e.src]:
                succ[e.src].append(e.dst)
    return succ


def _topo_order(n: int, preds: list[list[int]]) -> list[int]:
    """Node indices in a topological order (frontends emit one already; this is a guard)."""
    if all(p < i for i, ps in enumerate(preds) for p in ps):
        return list(range(n))
    indeg = [len(ps) for ps in preds]
    succ: list[list[int]] = [[] for _ in range(n)]
    for i, ps in enumerate(preds):
        for p in ps:
            succ[p].append(i)
    order, stack = [], [i for i in range(n) if indeg[i] == 0]
    while stack:
        i = stack.pop()
        order.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                stack.append(j)
    seen = set(order)
    return order + [i for i in range(n) if i not in seen]  # cycles: keep the rest in order


def _input_dependent(graph: ModelGraph, preds: list[list[int]]) -> list[bool]:
    """Whether each node depends on a model input (heuristic, shapes only).

    A node reads a model input directly when one of its input shapes equals a model input
    shape and is not accounted for by the outputs of its predecessor nodes. Dependence then
    propagates along edges, except through constant-creating ops (``new_zeros(x, ...)``,
    ``zeros_like``, ``Shape``, ``ConstantOfShape``), which read only static shapes. (A parameter or buffer with exactly a model input's shape would be
    mistaken for that input; for ONNX graphs pass the model to use the exact analysis.)
    """
    model_inputs = {tuple(s) for s in graph.meta.input_shapes if s}
    dep = [False] * len(graph.nodes)
    for i in _topo_order(len(graph.nodes), preds):
        if _ops.category(graph.nodes[i].op) == "constant":
            continue  # zeros_like/new_zeros/ConstantOfShape/Shape: only the (static) shape is read
        if any(dep[p] for p in preds[i]):
            dep[i] = True
            continue
        node = graph.nodes[i]
        available = Counter(tuple(s) for p in preds[i] for s in graph.nodes[p].output_shapes)
        for s in node.input_shapes:
            s = tuple(s)
            if available.get(s, 0) > 0:
                available[s] -= 1
            elif s in model_inputs:
                dep[i] = True
                break
    return dep


def onnx_constant_nodes(model: Any) -> list[bool] | None:
    """Exact "computed from constants only" flags for the nodes of an ONNX model.

    ``model`` is a path or a ``ModelProto``. Local functions are inlined as
    :func:`~perfcast.frontends.onnx.graph_from_onnx` does, so index ``i`` is node ``i``
    of the ModelGraph built from the same file. Ops of the ``constant`` category (``Shape``,
    ``ConstantOfShape``, ``Range``…) read only static shapes, so they start no dependence.
    Returns ``None`` if the model cannot be read.
    """
    import onnx
    import onnx.inliner

    from perfcast.frontends.onnx import map_op_type

    try:
        proto = model if isinstance(model, onnx.ModelProto) else onnx.load(
            os.fspath(model), load_external_data=False)
        if len(proto.functions):
            proto = onnx.inliner.inline_local_functions(proto)
    except Exception:  # noqa: BLE001 - unreadable: caller falls back to the heuristic
        return None
    g = proto.graph
    inits = {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    live = {vi.name for vi in g.input if vi.name not in inits}

    def sub_inputs(node) -> list[str]:
        names: list[str] = []
        for a in node.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else (
                list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else [])
            for sg in subs:
                names += [x for n in sg.node for x in n.input]
        return names

    flags: list[bool] = []
    for n in g.node:
        reads = [x for x in list(n.input) + sub_inputs(n) if x]
        shape_only = _ops.category(map_op_type(n.op_type, n.domain)) == "constant"
        dependent = not shape_only and any(x in live for x in reads)
        if dependent:
            live.update(o for o in n.output if o)
        flags.append(not dependent)
    return flags


def _is_mutation(node: Node) -> bool:
    """Whether ``node`` is an in-place ATen op (``aten.fill_.Tensor``, ``aten.copy_.default``)."""
    parts = node.target.split(".")
    return len(parts) >= 2 and parts[0] == "aten" and parts[1].endswith("_") \
        and not parts[1].endswith("__")


def _live_nodes(graph: ModelGraph, succ: list[list[int]], preds: list[list[int]],
                output_shapes: set[tuple[int, ...]] | None) -> list[bool]:
    """Nodes from which some model output is reachable.

    For every shape in ``output_shapes`` (the ONNX graph's outputs) the producing node is the
    sink with that output shape, or else the last node that produces it (an output that is also
    read by dead code, like BERT's last hidden state feeding the unused pooler). In-place ATen
    ops (``fill_``, ``copy_``: their effect is a mutation, not an edge) are kept live too. With
    no shapes, or no node producing them, every node counts as live.
    """
    n = len(graph.nodes)
    if not output_shapes:
        return [True] * n
    outputs: list[int] = []
    for shape in output_shapes:
        producers = [i for i, nd in enumerate(graph.nodes)
                     if nd.output_shapes and tuple(nd.output_shapes[0]) == shape]
        sinks = [i for i in producers if not succ[i]]
        outputs += sinks or producers[-1:]
    if not outputs:
        return [True] * n
    roots = outputs + [i for i, nd in enumerate(graph.nodes) if _is_mutation(nd)]
    live = [False] * n
    stack = list(roots)
    while stack:
        i = stack.pop()
        if live[i]:
            continue
        live[i] = True
        stack.extend(p for p in preds[i] if not live[p])
    return live


@dataclass
class _Side:
    """One graph with its per-node classification."""

    graph: ModelGraph
    preds: list[list[int]]
    succ: list[list[int]]
    constant: list[bool]
    live: list[bool]
    counts: Counter = field(default_factory=Counter)  # compared nodes, by group
    const_counts: Counter = field(default_factory=Counter)
    dead_counts: Counter = field(default_factory=Counter)
    raw_counts: Counter = field(default_factory=Counter)

    def compared(self, i: int) -> bool:
        return self.live[i] and not self.constant[i]

    def nodes_of(self, *ops: str) -> list[int]:
        return [i for i, nd in enumerate(self.graph.nodes) if nd.op in ops and self.compared(i)]


def _side(graph: ModelGraph, constant: list[bool] | None,
          output_shapes: set[tuple[int, ...]] | None) -> _Side:
    preds, succ = _in_edges(graph), _out_edges(graph)
    if constant is None or len(constant) != len(graph.nodes):
        constant = [not d for d in _input_dependent(graph, preds)]
    if graph.nodes and all(constant):  # no model input found (unknown input shapes): keep all
        constant = [False] * len(graph.nodes)
    live = _live_nodes(graph, succ, preds, output_shapes)
    s = _Side(graph, preds, succ, constant, live)
    for i, nd in enumerate(graph.nodes):
        g = comparison_group(nd.op)
        s.raw_counts[g] += 1
        if not live[i]:
            s.dead_counts[g] += 1
        elif constant[i]:
            s.const_counts[g] += 1
        else:
            s.counts[g] += 1
    return s


# ---------------------------------------------------------------------------------- rules


@dataclass
class Rule:
    """A documented decomposition: ``apply`` returns (instances, candidates, group deltas)."""

    name: str
    doc: str
    apply: Callable[["_State"], tuple[int, int, dict[str, int]]]


@dataclass
class _State:
    torch: _Side
    onnx: _Side
    expected: Counter  # ONNX counts predicted so far (starts as the PyTorch counts)

    def excess(self, group: str) -> int:
        """How many more nodes of ``group`` the ONNX graph has than predicted so far."""
        return self.onnx.counts.get(group, 0) - self.expected.get(group, 0)


RULES: list[Rule] = []


def _rule(name: str):
    """Register a rule; the first line of its docstring is its documented explanation."""
    def deco(fn: Callable[[_State], tuple[int, int, dict[str, int]]]):
        doc = (fn.__doc__ or name).strip().splitlines()[0].strip()
        RULES.append(Rule(name, doc, fn))
        _document(name, doc)
        return fn
    return deco


def _spatial_ones(shape: Iterable[int]) -> bool:
    s = tuple(shape)
    return len(s) >= 3 and all(int(d) == 1 for d in s[2:])


@_rule("batchnorm_folding")
def _bn_fold(st: _State) -> tuple[int, int, dict[str, int]]:
    """Eval-mode BatchNorm right after a Conv/Linear whose only consumer it is gets folded into that Conv/Gemm's weights."""
    t = st.torch
    cands = 0
    for i in t.nodes_of("batch_norm"):
        p = [q for q in t.preds[i] if not t.constant[q]]
        if len(p) == 1 and comparison_group(t.graph.nodes[p[0]].op) in ("conv", "dense") \
                and len(t.succ[p[0]]) == 1:
            cands += 1
    n = max(0, min(cands, -st.excess("batch_norm")))
    return n, cands, {"batch_norm": -n}


@_rule("adaptive_avg_pool_as_mean")
def _gap_mean(st: _State) -> tuple[int, int, dict[str, int]]:
    """Global adaptive average pooling (output 1x1) is exported as ReduceMean over the spatial axes."""
    t = st.torch
    cands = sum(1 for i in t.nodes_of("adaptive_avg_pool")
                if t.graph.nodes[i].output_shapes
                and _spatial_ones(t.graph.nodes[i].output_shapes[0]))
    n = max(0, min(cands, -st.excess("adaptive_avg_pool"), st.excess("mean")))
    return n, cands, {"adaptive_avg_pool": -n, "mean": n}


@_rule("adaptive_avg_pool_as_avg_pool")
def _aap_avgpool(st: _State) -> tuple[int, int, dict[str, int]]:
    """Adaptive average pooling whose input size is a multiple of its output size is exported as AveragePool (kernel = stride = input / output; 1 when equal)."""
    t = st.torch
    cands = 0
    for i in t.nodes_of("adaptive_avg_pool"):
        nd = t.graph.nodes[i]
        if nd.input_shapes and nd.output_shapes:
            a, b = tuple(nd.input_shapes[0])[2:], tuple(nd.output_shapes[0])[2:]
            if a and len(a) == len(b) and all(y and x % y == 0 for x, y in zip(a, b)) \
                    and not _spatial_ones(nd.output_shapes[0]):
                cands += 1
    n = max(0, min(cands, -st.excess("adaptive_avg_pool"), st.excess("avg_pool")))
    return n, cands, {"adaptive_avg_pool": -n, "avg_pool": n}


@_rule("adaptive_avg_pool_identity")
def _aap_identity(st: _State) -> tuple[int, int, dict[str, int]]:
    """Adaptive average pooling whose output size equals its input size is an identity and may be dropped."""
    t = st.torch
    cands = 0
    for i in t.nodes_of("adaptive_avg_pool"):
        nd = t.graph.nodes[i]
        if nd.input_shapes and nd.output_shapes and \
                tuple(nd.input_shapes[0]) == tuple(nd.output_shapes[0]):
            cands += 1
    n = max(0, min(cands, -st.excess("adaptive_avg_pool")))
    return n, cands, {"adaptive_avg_pool": -n}


@_rule("silu_as_sigmoid_mul")
def _silu(st: _State) -> tuple[int, int, dict[str, int]]:
    """SiLU/Swish is exported as Sigmoid followed by Mul (x * sigmoid(x))."""
    cands = len(st.torch.nodes_of("silu"))
    n = max(0, min(cands, -st.excess("silu")))
    return n, cands, {"silu": -n, "sigmoid": n, "mul": n}


@_rule("linear_nd_as_matmul_add")
def _linear_nd(st: _State) -> tuple[int, int, dict[str, int]]:
    """nn.Linear with a bias on an input of rank != 2 is exported as MatMul + Add (rank 2 is one Gemm)."""
    t = st.torch
    cands = 0
    for i in t.nodes_of("linear"):
        nd = t.graph.nodes[i]
        if nd.attrs.get("bias") and nd.input_shapes and len(nd.input_shapes[0]) != 2:
            cands += 1
    n = max(0, min(cands, st.excess("add")))
    return n, cands, {"add": n}


@_rule("gelu_decomposed")
def _gelu(st: _State) -> tuple[int, int, dict[str, int]]:
    """Below opset 20 GELU is decomposed: erf form = Div+Erf+Add+2 Mul, tanh form = Pow+Tanh+2 Add+4 Mul."""
    cands = len(st.torch.nodes_of("gelu"))
    n = max(0, min(cands, -st.excess("gelu")))
    if not n:
        return 0, cands, {}
    n_erf = max(0, min(n, st.excess("erf"), st.excess("div")))
    n_tanh = n - n_erf
    return n, cands, {"gelu": -n, "erf": n_erf, "div": n_erf, "tanh": n_tanh, "pow": n_tanh,
                      "add": n_erf + 2 * n_tanh, "mul": 2 * n_erf + 4 * n_tanh}


@_rule("sdpa_decomposed")
def _sdpa(st: _State) -> tuple[int, int, dict[str, int]]:
    """Below opset 23 scaled_dot_product_attention is decomposed: 2 MatMul + Softmax + 2 Mul (scale), plus Add for a mask and IsNaN+Where for a boolean mask."""
    t = st.torch
    idx = t.nodes_of("sdpa")
    n = max(0, min(len(idx), -st.excess("attention")))
    if not n:
        return 0, len(idx), {}
    deltas = Counter({"attention": -n, "dense": 2 * n, "softmax": n, "mul": 2 * n})
    for i in idx[:n]:
        nd = t.graph.nodes[i]
        if len(nd.input_shapes) > 3 and nd.input_shapes[3]:  # attn_mask given
            deltas["add"] += 1
            if len(nd.input_dtypes) > 3 and nd.input_dtypes[3] == "bool":
                deltas["compare"] += 1
                deltas["where"] += 1
    return n, len(idx), dict(deltas)


# ---------------------------------------------------------------------------------- compare


def _macs_by_group(graph: ModelGraph) -> dict[str, float]:
    out: dict[str, float] = {}
    for nd in graph.nodes:
        if nd.macs:
            g = comparison_group(nd.op)
            out[g] = out.get(g, 0.0) + float(nd.macs)
    return out


def _graph_output_shapes(side_graph: ModelGraph) -> set[tuple[int, ...]]:
    """Output shapes of an ONNX graph's sinks (its graph outputs after dead-code removal)."""
    succ = _out_edges(side_graph)
    return {tuple(nd.output_shapes[0]) for i, nd in enumerate(side_graph.nodes)
            if not succ[i] and nd.output_shapes and nd.output_shapes[0]}


def compare_graphs(torch_graph: ModelGraph, onnx_graph: ModelGraph, *,
                   onnx_model: Any = None, macs_tolerance: float = MACS_TOLERANCE) -> dict:
    """Compare the PyTorch and ONNX graphs of one model (see the module docstring).

    ``onnx_model`` (optional): the ``.onnx`` path or ``ModelProto`` the ONNX graph was built
    from, for an exact constant-subgraph analysis (otherwise a shape heuristic is used).

    Returns a JSON-safe dict::

        model, torch_macs, onnx_macs, macs_rel_diff, macs_agree,
        groups: {group: {torch, onnx, expected_onnx, compute, agree}}   # compared nodes only
        macs_by_group: {group: {torch, onnx}},
        rules: {rule: {applied, candidates, deltas}},
        differences: [{group, torch, onnx, delta, rule}]   # rule is a documented name or
                                                           # "unexplained"; deltas add up to
                                                           # onnx - torch for every group
        excluded: {constant_folding: {torch, onnx}, dead_code_elimination: {torch, onnx}},
        explained: [rule names used], unexplained: [differences], ops_agree, agree
    """
    constant = onnx_constant_nodes(onnx_model) if onnx_model is not None else None
    if constant is not None and len(constant) != len(onnx_graph.nodes):
        constant = None  # not the file this graph was built from: use the heuristic
    o = _side(onnx_graph, constant, None)
    t = _side(torch_graph, None, _graph_output_shapes(onnx_graph))
    st = _State(t, o, Counter(t.counts))

    rules_out: dict[str, dict[str, Any]] = {}
    rule_deltas: list[tuple[str, str, int]] = []
    for rule in RULES:
        n, cands, deltas = rule.apply(st)
        deltas = {g: d for g, d in deltas.items() if d}
        if n:
            for g, d in deltas.items():
                st.expected[g] += d
                rule_deltas.append((rule.name, g, d))
            rules_out[rule.name] = {"applied": n, "candidates": cands, "deltas": deltas}

    groups: dict[str, dict[str, Any]] = {}
    all_groups = sorted(set(t.raw_counts) | set(o.raw_counts) | set(st.expected))
    differences: list[dict[str, Any]] = []
    unexplained: list[dict[str, Any]] = []
    for g in all_groups:
        compute = is_compute_group(g)
        tc, oc, ec = t.counts.get(g, 0), o.counts.get(g, 0), st.expected.get(g, 0)
        raw_t, raw_o = t.raw_counts.get(g, 0), o.raw_counts.get(g, 0)
        agree = (oc == ec) if compute else True
        groups[g] = {"torch": tc, "onnx": oc, "expected_onnx": ec if compute else tc,
                     "raw_torch": raw_t, "raw_onnx": raw_o, "compute": compute, "agree": agree}

        def add(delta: int, rule: str) -> None:
            if delta:
                d = {"group": g, "torch": raw_t, "onnx": raw_o, "delta": int(delta), "rule": rule}
                differences.append(d)
                if rule == "unexplained":
                    unexplained.append(d)

        if not compute:
            add(raw_o - raw_t, "shape_plumbing")
            continue
        add(o.const_counts.get(g, 0) - t.const_counts.get(g, 0), "constant_folding")
        add(o.dead_counts.get(g, 0) - t.dead_counts.get(g, 0), "dead_code_elimination")
        for name, rg, d in rule_deltas:
            if rg == g:
                add(d, name)
        add(oc - ec, "unexplained")

    tm, om = float(torch_graph.macs), float(onnx_graph.macs)
    rel = (om - tm) / tm if tm else (0.0 if om == 0 else math.inf)
    macs_agree = abs(rel) <= macs_tolerance
    ops_agree = not unexplained
    mt, mo = _macs_by_group(torch_graph), _macs_by_group(onnx_graph)
    used = list(dict.fromkeys(d["rule"] for d in differences if d["rule"] != "unexplained"))
    return {
        "model": torch_graph.meta.model_id,
        "torch_macs": tm, "onnx_macs": om, "macs_rel_diff": rel, "macs_agree": macs_agree,
        "macs_tolerance": macs_tolerance,
        "torch_params": int(torch_graph.params), "onnx_params": int(onnx_graph.params),
        "groups": groups,
        "macs_by_group": {g: {"torch": mt.get(g, 0.0), "onnx": mo.get(g, 0.0)}
                          for g in sorted(set(mt) | set(mo))},
        "rules": rules_out,
        "differences": differences,
        "excluded": {
            "constant_folding": {"torch": dict(t.const_counts), "onnx": dict(o.const_counts)},
            "dead_code_elimination": {"torch": dict(t.dead_counts), "onnx": dict(o.dead_counts)},
        },
        "constant_analysis": "exact" if constant is not None else "heuristic",
        "unmapped_ops": {"torch": list(torch_graph.meta.unmapped_ops),
                         "onnx": list(onnx_graph.meta.unmapped_ops)},
        "explained": used,
        "unexplained": unexplained,
        "ops_agree": ops_agree,
        "agree": ops_agree and macs_agree,
    }


def _fmt_diff(d: dict[str, Any]) -> str:
    return f"{d['group']} {d['delta']:+d}"


def format_comparison(result: dict) -> str:
    """A few human-readable lines summarising :func:`compare_graphs`'s result."""
    lines = [f"{result['model']}: MACs torch {result['torch_macs'] / 1e9:.4f} G, "
             f"onnx {result['onnx_macs'] / 1e9:.4f} G ({100 * result['macs_rel_diff']:+.3f} %), "
             f"compute groups {'agree' if result['ops_agree'] else 'DISAGREE'}"]
    by_rule: dict[str, list[str]] = {}
    for d in result["differences"]:
        by_rule.setdefault(d["rule"], []).append(_fmt_diff(d))
    for rule, items in by_rule.items():
        lines.append(f"  {rule}: {', '.join(items)}")
    um = result.get("unmapped_ops", {})
    for side in ("torch", "onnx"):
        if um.get(side):
            lines.append(f"  unmapped {side} ops: {', '.join(um[side])}")
    return "\n".join(lines)
