"""PyTorch frontend: ``nn.Module`` → ``ModelGraph`` through ``torch.export``.

Nothing is computed and no weight is materialised: parameters built on the ``meta`` device are
turned into FakeTensors (on a fake CPU device, so that autocast follows real dtype rules), the
model is exported, and shapes come from each FX node's FakeTensor metadata.

* ``mode="infer"``: ``torch.export.export`` → ``run_decompositions({})`` — functional ATen IR that
  keeps high-level ops (``conv2d``, ``linear``, ``layer_norm``, ``scaled_dot_product_attention``)
  and inlines higher-order ops.
* ``mode="train"``: the joint forward + backward graph of ``aot_export_module`` (core ATen:
  ``convolution`` / ``convolution_backward``, ``addmm`` / ``mm``…), plus one optimizer-update node
  per parameter tensor (SGD, SGD-momentum, Adam, AdamW). Forward nodes are those the loss, the
  outputs or buffer updates depend on; the rest are backward.

Structural no-ops (``getitem``, ``alias``, ``detach``, assertions, symbolic-size ops) are not
nodes; edges go through them. View ops applied only to weights (``t(weight)`` feeding ``mm``) are
folded into their consumer, as ONNX folds them into ``Gemm``.
"""

from __future__ import annotations

import contextlib
import math
import operator
import warnings
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from perfcast import ops as _ops
from perfcast.errors import TraceError
from perfcast.flops import cost
from perfcast.frontends import aten_map
from perfcast.graph import Edge, GraphMeta, ModelGraph, Node

OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")
_OPTIMIZER_OP = {"sgd": "sgd_update", "sgd-momentum": "sgd_momentum_update",
                 "adam": "adam_update", "adamw": "adamw_update"}
PRECISIONS = ("fp32", "amp", "fp16", "bf16")

_PASS_THROUGH = {"alias", "detach", "detach_", "lift_fresh", "_assert_tensor_metadata", "_assert_async",
                 "_assert_scalar", "sym_constrain_range_for_size", "sym_constrain_range",
                 "_functional_assert_async", "_functional_sym_constrain_range",
                 "sym_size", "sym_numel", "sym_stride", "sym_storage_offset", "dropout_identity"}
_WEIGHT_VIEWS = {"t", "transpose", "permute", "view", "reshape", "_unsafe_view", "unsqueeze",
                 "squeeze", "expand", "alias", "detach", "flatten"}


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


def _flat_nodes(args: Iterable[Any]) -> list[torch.fx.Node]:
    found: list[torch.fx.Node] = []
    for a in args:
        if isinstance(a, torch.fx.Node):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(_flat_nodes(a))
        elif isinstance(a, dict):
            found.extend(_flat_nodes(a.values()))
    return found


# --------------------------------------------------------------------------- faking the module
class _Fakeifier:
    """Turns meta/real tensors into FakeTensors on a fake ``cpu`` device (no storage)."""

    def __init__(self, mode: Any):
        self.mode = mode
        self.memo: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id -> (original, fake)

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        key = id(t)
        if key not in self.memo:
            src = t.detach()
            if src.device.type == "meta":
                fake = self.mode.fake_tensor_converter.from_meta_and_device(
                    self.mode, src, torch.device("cpu"))
            else:
                fake = self.mode.from_tensor(src)
            self.memo[key] = (t, fake)  # keep the original alive so its id is not reused
        return self.memo[key][1]

    def module(self, module: nn.Module) -> None:
        """Replace every parameter and buffer of ``module`` in place (tied weights stay tied)."""
        params: dict[int, nn.Parameter] = {}
        for mod in module.modules():
            for k, p in list(mod._parameters.items()):
                if p is None:
                    continue
                if id(p) not in params:
                    params[id(p)] = nn.Parameter(self(p), requires_grad=p.requires_grad)
                mod._parameters[k] = params[id(p)]
            for k, b in list(mod._buffers.items()):
                if b is not None:
                    mod._buffers[k] = self(b)


class _Step(nn.Module):
    """What is traced: the model's forward (under autocast for AMP) and, to train, a loss."""

    def __init__(self, model: nn.Module, precision: str, train: bool, kwargs: dict):
        super().__init__()
        self.model = model
        self.precision = precision
        self.train_step = train
        self.extra_kwargs = kwargs

    def forward(self, *args):
        ctx = (torch.autocast("cpu", dtype=torch.float16) if self.precision == "amp"
               else contextlib.nullcontext())
        with ctx:
            out = self.model(*args, **self.extra_kwargs)
        if not self.train_step:
            return out
        tensors = [t for t in _leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        if not tensors:
            raise TraceError("the model returns no floating-point tensor to train on")
        loss = tensors[0].float().mean()
        return (loss,)


def _leaves(out: Any) -> list[Any]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict) or hasattr(out, "values") and not isinstance(out, (list, tuple)):
        try:
            return [x for v in out.values() for x in _leaves(v)]
        except Exception:  # noqa: BLE001 - not a mapping after all
            return []
    if isinstance(out, (list, tuple)):
        return [x for v in out for x in _leaves(v)]
    return []


# --------------------------------------------------------------------------- public entry point
def graph_from_module(module: nn.Module, args: tuple, kwargs: dict | None = None, *,
                      model_id: str = "module", batch_size: int | None = None,
                      mode: str = "infer", precision: str = "fp32",
                      optimizer: str = "sgd-momentum", frontend: str = "torch") -> ModelGraph:
    """Trace ``module(*args, **kwargs)`` into a :class:`ModelGraph` without running it.

    ``args`` may be meta, fake or real tensors; parameters may be on ``meta`` (recommended: a 7B
    model never materialises). The module is modified in place (its tensors become fake).
    """
    traced = _Traced(module, args, kwargs, model_id, mode, precision, optimizer, frontend)
    return traced.graph(batch_size)


def graphs_for_batches(module: nn.Module, args: tuple, batch_sizes: Iterable[int],
                       kwargs: dict | None = None, *, model_id: str = "module",
                       mode: str = "infer", precision: str = "fp32",
                       optimizer: str = "sgd-momentum",
                       frontend: str = "torch") -> dict[int, ModelGraph]:
    """One trace, many batch sizes: ``{batch: ModelGraph}`` equal to tracing each batch alone.

    ``module`` is exported once with a symbolic batch dimension (dim 0 of ``args[0]``; every
    batch size ≥ 2) and each graph binds the symbol — several times faster than a trace per
    batch. Raises :class:`TraceError` when the model does not export with a dynamic batch (it
    specialises on it); trace each batch with :func:`graph_from_module` then.
    """
    batch_sizes = sorted({int(b) for b in batch_sizes})
    if not batch_sizes or batch_sizes[0] < 2:
        raise TraceError("graphs_for_batches needs batch sizes >= 2 (batch 1 is specialised)")
    traced = _Traced(module, args, kwargs, model_id, mode, precision, optimizer, frontend,
                     dynamic_batch=True)
    return {b: traced.graph(b) for b in batch_sizes}


@contextlib.contextmanager
def _quiet_fake_tensor_log():
    """FakeTensor logs an op's failure with a traceback at ERROR before raising it; the
    exception itself becomes our one-line TraceError (and a failed symbolic-batch attempt is
    expected: the caller falls back), so keep that log off the user's terminal."""
    import logging

    log = logging.getLogger("torch._subclasses.fake_tensor")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


class _Traced:
    """An exported step (fake tensors, optionally with a symbolic batch) ready for conversion."""

    def __init__(self, module: nn.Module, args: tuple, kwargs: dict | None, model_id: str,
                 mode: str, precision: str, optimizer: str, frontend: str,
                 dynamic_batch: bool = False):
        from torch._subclasses.fake_tensor import FakeTensorMode

        if mode not in ("infer", "train"):
            raise TraceError(f"unknown mode {mode!r}: use infer or train")
        if precision not in PRECISIONS:
            raise TraceError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}")
        if mode == "train" and optimizer not in OPTIMIZERS:
            raise TraceError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
        if dynamic_batch and mode != "infer":
            raise TraceError("a symbolic batch is supported for inference graphs only")
        self.model_id, self.mode, self.precision = model_id, mode, precision
        self.optimizer, self.frontend = optimizer, frontend
        kwargs = dict(kwargs or {})

        if precision in ("fp16", "bf16"):
            dtype = torch.float16 if precision == "fp16" else torch.bfloat16
            module = module.to(dtype)
            args = tuple(a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point()
                         else a for a in args)

        self.total_params = sum(p.numel() for p in module.parameters())
        self.total_param_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
        shape_env = None
        if dynamic_batch:
            from torch.fx.experimental.symbolic_shapes import ShapeEnv
            shape_env = ShapeEnv()
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=shape_env)
        fakeify = _Fakeifier(fake_mode)
        fakeify.module(module)
        fargs = tuple(fakeify(a) if isinstance(a, torch.Tensor) else a for a in args)
        self.fargs = fargs
        module.train(mode == "train")
        step = _Step(module, precision, mode == "train", kwargs)
        dynamic_shapes = None
        if dynamic_batch:
            from torch.export import Dim
            if not fargs or not isinstance(fargs[0], torch.Tensor) or not fargs[0].dim():
                raise TraceError("a symbolic batch needs a tensor as the first input")
            batch = Dim("batch", min=2, max=1 << 20)
            dynamic_shapes = (tuple({0: batch} if i == 0 else None
                                    for i in range(len(fargs))),)
        self.batch_symbol = None

        try:
            with fake_mode, warnings.catch_warnings(), _quiet_fake_tensor_log():
                warnings.simplefilter("ignore")
                ep = torch.export.export(step, fargs, strict=False, dynamic_shapes=dynamic_shapes)
                if mode == "infer":
                    # Fast path: the pre-dispatch graph, dead code removed, HOPs inlined by
                    # _convert. Functionalize (slower) when autocast must show its casts or when
                    # an in-place op mutates a view or an input (its data flow is only explicit
                    # once functional).
                    if precision == "amp" or _mutates_views(ep.graph_module):
                        ep = ep.run_decompositions({})
                    else:
                        ep.graph_module.graph.eliminate_dead_code()
                    gm = ep.graph_module
                    sig = ep.graph_signature
                    param_inputs = {s.arg.name: s.target for s in sig.input_specs
                                    if s.kind.name == "PARAMETER"}
                    grads: dict[str, str] = {}
                    roots: set[str] = set()
                    if dynamic_batch:
                        user = next(s.arg.name for s in sig.input_specs
                                    if s.kind.name == "USER_INPUT")
                        ph = next(n for n in gm.graph.nodes if n.name == user)
                        dim0 = ph.meta["val"].shape[0]
                        if not isinstance(dim0, torch.SymInt) or not dim0.node.expr.is_Symbol:
                            raise TraceError(f"{model_id} specialises on the batch size")
                        self.batch_symbol = dim0.node.expr
                else:
                    from torch._functorch.aot_autograd import aot_export_module
                    gm, jsig = aot_export_module(ep.module(), fargs, trace_joint=True,
                                                 output_loss_index=0)
                    param_inputs = dict(jsig.inputs_to_parameters)
                    bw = jsig.backward_signature
                    grads = dict(bw.gradients_to_parameters) if bw is not None else {}
                    out_node = next(n for n in gm.graph.nodes if n.op == "output")
                    outs = _flat_nodes(out_node.args)
                    grad_names = set(grads)
                    roots = {n.name for n in outs if n.name not in grad_names}
        except TraceError:
            raise
        except Exception as exc:  # torch raises many exception types while tracing
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TraceError(f"could not trace {model_id}: {type(exc).__name__}: {msg[:300]}") from exc
        self.gm, self.param_inputs, self.grads, self.roots = gm, param_inputs, grads, roots

    def graph(self, batch_size: int | None) -> ModelGraph:
        """The ModelGraph (for a symbolic batch: at ``batch_size``)."""
        subs = None
        if self.batch_symbol is not None:
            if batch_size is None:
                raise TraceError("give the batch size of a symbolic-batch trace")
            subs = {self.batch_symbol: int(batch_size)}
        graph = _convert(self.gm, self.param_inputs, self.grads, self.roots, self.mode,
                         self.optimizer, subs)
        input_shapes = [tuple(int(d) for d in a.shape) for a in self.fargs
                        if isinstance(a, torch.Tensor)]
        if subs and input_shapes:
            input_shapes[0] = (int(batch_size), *input_shapes[0][1:])
        if batch_size is None:
            batch_size = input_shapes[0][0] if input_shapes and input_shapes[0] else 1
        graph.meta = GraphMeta(
            model_id=self.model_id, batch_size=int(batch_size), input_shapes=input_shapes,
            mode=self.mode, precision=self.precision, frontend=self.frontend,
            frontend_version=f"torch-{torch.__version__}",
            optimizer=self.optimizer if self.mode == "train" else None,
            unmapped_ops=graph.meta.unmapped_ops,
            total_params=int(self.total_params), total_param_bytes=int(self.total_param_bytes))
        return graph


_VIEW_BASES = {"slice", "select", "view", "as_strided", "diagonal", "transpose", "permute", "t",
               "expand", "narrow", "unsqueeze", "squeeze", "unflatten", "flatten", "view_as",
               "reshape", "alias", "detach", "split", "split_with_sizes", "chunk", "unbind",
               "tensor_split", "movedim", "swapaxes", "unfold", "real", "imag"}


def _mutates_views(gm: torch.fx.GraphModule) -> bool:
    """True if an in-place op writes to a view, a graph input or a subgraph's tensor."""
    for mod in gm.modules():
        if not isinstance(mod, torch.fx.GraphModule):
            continue
        for n in mod.graph.nodes:
            schema = getattr(n.target, "_schema", None)
            if n.op != "call_function" or schema is None or not schema.is_mutable:
                continue
            first = n.args[0] if n.args else None
            if not isinstance(first, torch.fx.Node):
                continue
            src = first.args[0] if first.target is operator.getitem and first.args else first
            if (first.op == "placeholder" or src.op == "placeholder"
                    or aten_map.aten_base_name(src.target) in _VIEW_BASES):
                return True
    return False


# --------------------------------------------------------------------------- FX → ModelGraph
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


def _is_sym(n: torch.fx.Node) -> bool:
    """Whether an FX node computes a (symbolic) size rather than a tensor."""
    return isinstance(n.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool))


def _convert(gm: torch.fx.GraphModule, param_inputs: dict[str, str], grads: dict[str, str],
             roots: set[str], mode: str, optimizer: str, subs: dict | None = None) -> ModelGraph:
    """FX graph → :class:`ModelGraph`. ``subs`` binds the symbols of a dynamic-shape export
    (symbol → int); its size arithmetic (SymInt-valued nodes) is not part of the model graph."""
    fx_nodes = list(gm.graph.nodes)
    index_of: dict[str, int] = {}          # qualified fx name -> ModelGraph node index
    alias_of: dict[str, str] = {}          # qualified fx name -> name it passes through to
    param_of: dict[str, str] = {}          # qualified fx name -> parameter name
    hop_outputs: dict[str, list[str]] = {}  # higher-order op -> qualified names of its outputs
    nodes: list[Node] = []
    fx_by_index: list[tuple[torch.fx.Node, str]] = []  # (fx node, name prefix of its graph)
    unmapped: set[str] = set()

    def resolve(name: str) -> str:
        while name in alias_of:
            name = alias_of[name]
        return name

    def walk(graph_nodes: list[torch.fx.Node], owner: torch.fx.GraphModule, prefix: str,
             operands: list[str] | None) -> list[str]:
        """Convert one FX graph; ``operands`` bind a subgraph's placeholders. Returns outputs."""
        placeholder_i = 0
        outputs: list[str] = []
        for n in graph_nodes:
            q = prefix + n.name
            if n.op == "placeholder":
                if operands is not None:
                    if placeholder_i < len(operands):
                        alias_of[q] = operands[placeholder_i]
                    placeholder_i += 1
                elif n.name in param_inputs:
                    param_of[q] = param_inputs[n.name]
                continue
            if n.op == "output":
                outputs = [prefix + x.name for x in _flat_nodes(n.args)]
                continue
            if n.op != "call_function":
                continue
            if n.target is operator.getitem:
                src = prefix + n.args[0].name
                idx = n.args[1] if len(n.args) > 1 else 0
                if src in hop_outputs and isinstance(idx, int) and idx < len(hop_outputs[src]):
                    alias_of[q] = hop_outputs[src][idx]
                else:
                    alias_of[q] = src
                continue
            sub = next((getattr(owner, a.target) for a in n.args
                        if isinstance(a, torch.fx.Node) and a.op == "get_attr"
                        and isinstance(getattr(owner, a.target, None), torch.fx.GraphModule)),
                       None)
            if sub is not None:  # higher-order op (autocast, set_grad_enabled…): inline its body
                ops_in = [prefix + a.name for a in _flat_nodes(n.args)
                          if not (a.op == "get_attr" and isinstance(getattr(owner, a.target, None),
                                                                    torch.fx.GraphModule))]
                hop_outputs[q] = walk(list(sub.graph.nodes), sub, q + ".", ops_in)
                continue
            if subs and _is_sym(n):
                continue  # size arithmetic of a dynamic-shape export, not a model op
            base = aten_map.aten_base_name(n.target)
            ins = _flat_nodes(list(n.args) + list(n.kwargs.values()))
            if subs:  # sizes computed from the symbolic batch are arguments, not data inputs
                ins = [x for x in ins if not _is_sym(x)]
            if base in _PASS_THROUGH or base.startswith(("sym_", "_assert")) or (
                    base in ("dropout", "dropout_", "feature_dropout", "feature_dropout_",
                                 "alpha_dropout", "alpha_dropout_")
                    and len(n.args) > 2 and n.args[2] is False):
                if ins:
                    alias_of[q] = prefix + ins[0].name
                continue
            in_resolved = [resolve(prefix + x.name) for x in ins]
            if base in _WEIGHT_VIEWS and ins and all(r in param_of for r in in_resolved):
                param_of[q] = param_of[in_resolved[0]]
                continue
            in_shapes, in_dtypes = [], []
            for x in ins:
                info = _tensor_info(x.meta.get("val"), subs)
                if info:
                    in_shapes.append(info[0][0])
                    in_dtypes.append(info[0][1])
            out = _tensor_info(n.meta.get("val"), subs)
            attrs: dict[str, Any] = {}
            op = _canonical(base, n, in_shapes, attrs)
            target = str(n.target)
            if op is None:
                op = "other"
                unmapped.add(target)
            params = 0
            pbytes = 0
            seen_params: set[str] = set()
            for x, r in zip(ins, in_resolved):
                if r in param_of and param_of[r] not in seen_params:
                    seen_params.add(param_of[r])
                    info = _tensor_info(x.meta.get("val"), subs)
                    if info:
                        params += math.prod(info[0][0]) if info[0][0] else 1
                        pbytes += info[0][2]
            flops, macs = cost(op, in_shapes, [o[0] for o in out], attrs)
            index_of[q] = len(nodes)
            fx_by_index.append((n, prefix))
            nodes.append(Node(
                name=q, op=op, target=target, input_shapes=in_shapes, input_dtypes=in_dtypes,
                output_shapes=[o[0] for o in out], output_dtypes=[o[1] for o in out],
                flops=flops, macs=macs, params=int(params), param_bytes=pbytes,
                output_bytes=sum(o[2] for o in out), attrs=attrs))
        return outputs

    walk(fx_nodes, gm, "", None)

    # phases: forward = ancestors of the loss/outputs/buffer updates (train mode only)
    if mode == "train":
        by_name = {n.name: n for n in fx_nodes}
        fwd: set[str] = set()
        stack = [r for r in roots if r in by_name]
        while stack:
            name = stack.pop()
            if name in fwd:
                continue
            fwd.add(name)
            stack.extend(x.name for x in _flat_nodes(list(by_name[name].args) +
                                                      list(by_name[name].kwargs.values())))
        for i, (fxn, _) in enumerate(fx_by_index):
            nodes[i].phase = "forward" if fxn.name in fwd else "backward"

    # edges (deduplicated per (src, dst))
    edges: list[Edge] = []
    seen: set[tuple[int, int]] = set()
    for dst, (fxn, prefix) in enumerate(fx_by_index):
        for x in _flat_nodes(list(fxn.args) + list(fxn.kwargs.values())):
            r = resolve(prefix + x.name)
            src = index_of.get(r)
            if src is None or (src, dst) in seen:
                continue
            seen.add((src, dst))
            info = _tensor_info(x.meta.get("val"), subs)
            nbytes = sum(i[2] for i in info)
            kind = "forward" if nodes[dst].phase == "forward" else "backward"
            edges.append(Edge(src, dst, nbytes, kind))

    # optimizer: one update node per parameter tensor, fed by its gradient
    if mode == "train":
        opt_op = _OPTIMIZER_OP[optimizer]
        by_name = {n.name: n for n in fx_nodes}
        for grad_name, pname in grads.items():
            gnode = by_name.get(grad_name)
            info = _tensor_info(gnode.meta.get("val"), subs) if gnode is not None else []
            if not info:
                continue
            shape, dtype, nbytes = info[0]
            numel = int(math.prod(shape)) if shape else 1
            attrs = {"param": pname, "state_tensors": {"sgd": 0, "sgd-momentum": 1}.get(optimizer, 2)}
            flops, _ = cost(opt_op, [shape, shape], [shape], attrs)
            idx = len(nodes)
            nodes.append(Node(name=f"opt.{pname}", op=opt_op, target=f"optim.{optimizer}",
                              input_shapes=[shape, shape], input_dtypes=[dtype, dtype],
                              output_shapes=[shape], output_dtypes=[dtype], flops=flops,
                              macs=0.0, params=numel, param_bytes=nbytes, output_bytes=nbytes,
                              attrs=attrs, phase="optimizer"))
            src = index_of.get(resolve(grad_name))
            if src is not None:
                edges.append(Edge(src, idx, nbytes, "backward"))

    meta = GraphMeta(model_id="", batch_size=1, input_shapes=[], unmapped_ops=sorted(unmapped))
    return ModelGraph(nodes, edges, meta)
