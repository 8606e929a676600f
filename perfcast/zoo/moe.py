"""Mixture-of-experts models on the meta device: traceable routing, experts costed as executed.

A mixture-of-experts (MoE) layer routes every token to ``k`` of its ``E`` experts (Switch
Transformer: ``k = 1``). The experts' parameters are all stored — the graph's parameter count
includes every expert — but each token only passes through ``k`` of them, so a layer's expert
MLPs cost ``tokens × k × (FLOPs of one expert)``, not ``tokens × E × ...``.

Which tokens reach which expert depends on the data (the router's logits), so the number of
tokens an expert processes has no value at trace time: under ``torch.export`` a routing op
(``nonzero`` / ``where(mask)``) returns an *unbacked* symbolic size. perfcast builds graphs
from fake tensors (no data), so it binds each expert's token count to an **expected value**:

**Assumption — balanced routing.** Every sequence of ``s`` tokens sends ``s × k`` token-expert
pairs, spread evenly over the ``E`` experts (``⌊s·k/E⌋`` each, the remainder one each to the
first experts — so the counts add up to exactly ``s × k``), then capped per expert at the
expert capacity (tokens over capacity are dropped: they skip the experts and keep only the
residual path). Expert ``e`` of a batch of ``b`` sequences therefore processes
``b × min(share_e, capacity)`` tokens (:func:`expected_expert_tokens`); an expert with no
expected token is skipped, as the eager loop skips experts no token was routed to. This is an
expectation, not a measurement: a real router (random-init or trained) loads experts unevenly,
so per-expert counts differ and, under a capacity cap, fewer tokens may be processed in total —
never more than ``tokens × k``. The routing node of each expert carries the bound in its
attributes (``routed_tokens``, ``size_assumption`` = :data:`ROUTING_ASSUMPTION`; see
:mod:`perfcast.frontends.fx_convert`).

How each family traces (transformers 5):

* **Switch Transformers** (``model_type: switch_transformers``, NeuSight's ``switchxl4``):
  the eager experts loop iterates over the experts hit by the data, and the router casts its
  classifier in place (``self.classifier = self.classifier.to(...)``) — neither traces, and
  the encoder stack subscripts a ``None`` attention mask under ``torch.export`` (the
  ``'NoneType' object is not subscriptable`` error: transformers builds the default all-ones
  mask only when it is *not* compiling). :func:`patch_for_tracing` gives the meta model
  (only: the profiler's real model runs the original code) the same computation in a
  traceable form: the all-ones encoder mask that eager builds, a router that casts the weight
  instead of the module, and a loop over every expert whose ``where(mask)`` token count is
  bound with ``torch._check(count == expected)`` (a runtime assertion node in the graph; the
  shape environment then treats the count as that constant, in the forward graph and when
  the joint training graph is retraced). Capacity is Hugging Face's ``expert_capacity``
  (tokens per expert per sequence). Like T5, the model specialises on the batch size, so
  :func:`perfcast.frontends.build_graphs` (one symbolic-batch trace) refuses it and each
  batch is traced on its own.
* **Experts stored as 3-D tensors** (Mixtral and the other models using transformers 5's
  experts interface; tested on Mixtral): they run through ``grouped_mm`` by default — tokens
  sorted by expert, one grouped matmul over the ``tokens × k`` selected rows — so shapes are
  static and already count the executed work; :mod:`perfcast.frontends.aten_map` maps the
  grouped matmul (and its backward) to ``linear`` so its MACs are counted. Nothing is patched.
"""

from __future__ import annotations

import types
from typing import Any

import torch
from torch import nn

__all__ = ["ROUTING_ASSUMPTION", "expected_expert_tokens", "is_moe_config", "patch_for_tracing"]

#: What a routing node's ``size_assumption`` attribute says (see the module docstring).
ROUTING_ASSUMPTION = ("expected value under balanced routing: each sequence's tokens x top_k "
                      "spread evenly over the experts, capped at the expert capacity")


def expected_expert_tokens(batch: Any, seq_len: int, num_experts: int, top_k: int = 1,
                           capacity: int | None = None) -> list[Any]:
    """Tokens each expert processes under balanced routing, for ``batch`` sequences of
    ``seq_len`` tokens (``batch`` may be a symbolic size).

    Per sequence, the ``seq_len × top_k`` token-expert pairs are spread evenly (remainder to
    the first experts), then capped at ``capacity`` (``None``: no cap); times ``batch``.
    """
    if num_experts <= 0 or top_k <= 0 or seq_len < 0:
        raise ValueError(f"bad MoE sizes: num_experts={num_experts}, top_k={top_k}, "
                         f"seq_len={seq_len}")
    pairs = int(seq_len) * int(top_k)
    base, extra = divmod(pairs, int(num_experts))
    shares = [base + (1 if e < extra else 0) for e in range(int(num_experts))]
    if capacity is not None and capacity >= 0:
        shares = [min(s, int(capacity)) for s in shares]
    return [batch * s for s in shares]


def is_moe_config(config: Any) -> bool:
    """Whether ``config`` describes a model that :func:`patch_for_tracing` changes."""
    return getattr(config, "model_type", None) == "switch_transformers"


def _tracing() -> bool:
    return bool(torch.compiler.is_compiling())


# --------------------------------------------------------------------------- Switch Transformers


def _switch_encoder_mask(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Forward pre-hook of the encoder stack: the all-ones mask eager builds when none is given.

    (transformers builds it only when not compiling, then subscripts ``None`` under export.)
    """
    if kwargs.get("attention_mask") is not None or getattr(module, "is_decoder", False):
        return args, kwargs
    ref = kwargs.get("input_ids")
    if ref is None:
        ref = kwargs.get("inputs_embeds")
    if ref is None and args:
        ref = args[0]
    if not isinstance(ref, torch.Tensor) or ref.dim() < 2:
        return args, kwargs
    kwargs = dict(kwargs)
    kwargs["attention_mask"] = torch.ones(ref.shape[0], ref.shape[1], device=ref.device)
    return args, kwargs


def _switch_router_forward(self, hidden_states: torch.Tensor):
    """``SwitchTransformersTop1Router.forward`` without re-assigning ``self.classifier``
    (a module ``.to`` while tracing would swap fake parameters): the weight is cast instead."""
    self.input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(self.dtype)
    if self.training and self.jitter_noise > 0:
        hidden_states *= torch.empty_like(hidden_states).uniform_(1.0 - self.jitter_noise,
                                                                   1.0 + self.jitter_noise)
    weight, bias = self.classifier.weight, self.classifier.bias
    if weight.dtype != self.dtype:
        weight = weight.to(self.dtype)
        bias = None if bias is None else bias.to(self.dtype)
    router_logits = nn.functional.linear(hidden_states, weight, bias)
    router_probs = nn.functional.softmax(router_logits, dim=-1, dtype=self.dtype).to(self.input_dtype)
    expert_index = torch.argmax(router_probs, dim=-1)
    expert_index = nn.functional.one_hot(expert_index, num_classes=self.num_experts)
    token_priority = torch.cumsum(expert_index, dim=-2)
    expert_capacity_mask = token_priority <= self.expert_capacity
    expert_index = expert_index * expert_capacity_mask
    router_probs = torch.max(router_probs, dim=-1).values.unsqueeze(-1)
    return expert_index, router_probs, router_logits


def _switch_sparse_mlp_forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
    """``SwitchTransformersSparseMLP.forward`` with a traceable experts loop (every expert with
    an expected token; its token count bound to :func:`expected_expert_tokens`)."""
    batch_size, sequence_length, hidden_dim = hidden_states.shape
    selected_experts, routing_weights, _ = self.router(hidden_states)
    num_experts = self.router.num_experts
    hidden_states = hidden_states.view(-1, hidden_dim)
    selected_experts = selected_experts.view(-1, 1, num_experts)
    routing_weights = routing_weights.view(-1, 1)
    per_sequence = expected_expert_tokens(1, int(sequence_length), num_experts, 1,
                                          self.router.expert_capacity)
    experts = self.experts
    final_hidden_states = torch.zeros_like(hidden_states)
    expert_mask = selected_experts.permute(2, 1, 0)
    for e in range(num_experts):
        if per_sequence[e] == 0:
            continue  # no token expected: eager skips the experts no token was routed to
        idx, top_x = torch.where(expert_mask[e])
        if _tracing():
            torch._check(top_x.shape[0] == batch_size * per_sequence[e])
        current_state = hidden_states[None, top_x].reshape(-1, hidden_states.shape[-1])
        current_hidden_states = experts[f"expert_{e}"](current_state) * routing_weights[top_x, idx, None]
        final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
    return final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)


def _patch_switch(model: nn.Module) -> int:
    patched = 0
    for mod in model.modules():
        name = type(mod).__name__
        if name == "SwitchTransformersStack" and not getattr(mod, "is_decoder", False):
            mod.register_forward_pre_hook(_switch_encoder_mask, with_kwargs=True)
        elif name == "SwitchTransformersTop1Router":
            mod.forward = types.MethodType(_switch_router_forward, mod)
        elif name == "SwitchTransformersSparseMLP":
            mod.forward = types.MethodType(_switch_sparse_mlp_forward, mod)
            patched += 1
    return patched


def patch_for_tracing(model: nn.Module, config: Any) -> int:
    """Make an MoE model built on ``meta`` traceable with its experts costed as executed
    (see the module docstring); returns the number of MoE layers patched (0: not MoE, the
    model is untouched). Only for the meta model that is traced — never for a model run on data.
    """
    if not is_moe_config(config):
        return 0
    return _patch_switch(model)
