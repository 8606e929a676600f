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
  outputs or buffer updates depend on; the rest are backward. A tied weight (GPT-2's
  ``lm_head`` = ``wte``) is one parameter (see :func:`_untie_parameters`).

Structural no-ops (``getitem``, ``alias``, ``detach``, assertions, symbolic-size ops) are not
nodes; edges go through them. View ops applied only to weights (``t(weight)`` feeding ``mm``) are
folded into their consumer, as ONNX folds them into ``Gemm``.

This module traces; the FX → ModelGraph conversion is :mod:`perfcast.frontends.fx_convert`.
"""

from __future__ import annotations

import contextlib
import operator
import warnings
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from perfcast.errors import TraceError, reraise_interrupt
from perfcast.frontends import aten_map
from perfcast.frontends.fx_convert import convert_fx_graph, flat_nodes
from perfcast.graph import GraphMeta, ModelGraph
from perfcast.workload import OPTIMIZERS, PRECISIONS


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
        # A ShapeEnv holds the symbols of a symbolic batch and the unbacked sizes of
        # data-dependent ops (the token count of a mixture-of-experts expert: ``nonzero``).
        # torch.export makes its own for the forward; the joint trace of a training step
        # runs in this mode, so give it one too — with static shapes, so that no input
        # dimension becomes symbolic.
        from torch.fx.experimental.symbolic_shapes import ShapeEnv
        if dynamic_batch:
            fake_mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())
        elif mode == "train":
            fake_mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv(),
                                       static_shapes=True)
        else:
            fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
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
                    # convert_fx_graph. Functionalize (slower) when autocast must show its casts or when
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
                    gm, jsig = aot_export_module(_untie_parameters(ep.module()), fargs,
                                                 trace_joint=True, output_loss_index=0)
                    param_inputs = dict(jsig.inputs_to_parameters)
                    bw = jsig.backward_signature
                    grads = dict(bw.gradients_to_parameters) if bw is not None else {}
                    out_node = next(n for n in gm.graph.nodes if n.op == "output")
                    outs = flat_nodes(out_node.args)
                    grad_names = set(grads)
                    roots = {n.name for n in outs if n.name not in grad_names}
        except TraceError:
            raise
        except Exception as exc:  # torch raises many exception types while tracing
            reraise_interrupt(exc)
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
        graph = convert_fx_graph(self.gm, self.param_inputs, self.grads, self.roots, self.mode,
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


def _untie_parameters(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """One name per parameter tensor in the unlifted module (``aot_export_module`` requires it).

    A tied weight (GPT-2's ``lm_head`` = ``wte``, BERT's decoder, T5 / Switch's shared
    embedding) is registered under every name it is used by; the joint trace then binds each
    name to its own input, only one of which receives the gradient ("Found a parameter that
    did not receive a gradient"). Every ``get_attr`` of a duplicate name is pointed at the
    first name and the duplicate registration removed. A module without tied parameters is
    returned unchanged.
    """
    first: dict[int, str] = {}
    dup: dict[str, str] = {}
    for name, p in gm.named_parameters(remove_duplicate=False):
        if id(p) in first:
            dup[name] = first[id(p)]
        else:
            first[id(p)] = name
    if not dup:
        return gm
    for n in gm.graph.nodes:
        if n.op == "get_attr" and n.target in dup:
            n.target = dup[n.target]
    for name in dup:
        owner_name, _, leaf = name.rpartition(".")
        owner = gm.get_submodule(owner_name) if owner_name else gm
        del owner._parameters[leaf]
    gm.recompile()
    return gm


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
