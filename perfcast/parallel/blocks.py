"""A transformer's work per layer, from its own graph: one traced block with Megatron's splits.

Nothing is hand-written for GPT: the model's Hugging Face config is traced twice, with one and
with two layers (forward, batch 1, the request's sequence length; :func:`perfcast.load_graph`,
cached like every graph), and every node is given what Megatron-LM's tensor parallelism does to
it by following the data through the graph (:func:`split`):

* a tensor is *replicated* (``R``: every tensor-parallel GPU holds it whole), *sharded*
  (``S``: each holds ``1/T`` of it — heads, the MLP's inner width, the vocabulary) or *partial*
  (``P``: each holds a partial sum that an all-reduce completes);
* a linear layer reading a replicated input is **column-parallel** (weight and output split
  ``T`` ways: QKV, the MLP's up / gate projections); one reading a sharded input is
  **row-parallel** (weight split, output partial → one all-reduce: the attention output and the
  MLP's down projection); the word embedding is **vocabulary-parallel** (a partial lookup →
  one all-reduce) and so is the LM head (its logits stay split, the loss is computed on the
  shards);
* element-wise ops, attention (``sdpa``, batched matmuls, softmax) and views on sharded
  tensors run on ``1/T`` of the data; layer norms, residual adds and position embeddings on
  replicated ones run whole on every GPU (no sequence parallelism).

The one-layer graph minus (two-layer − one-layer) is what lies outside the blocks (embeddings,
final norm, head); two-layer − one-layer is one block. Per node the table keeps FLOPs, bytes,
the GEMM's output dimensions, parameters and the activations autograd saves for the backward
pass (per op: a linear its input, a norm its input, ``sdpa`` q, k, v and its output, an
element-wise op its inputs — views share their base's storage), all at batch 1: the
micro-batch multiplies them. :mod:`perfcast.parallel.model` prices them.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfcast.errors import ModelSpecError, PerfcastError
from perfcast.ops import VIEW_OPS

#: Node classes of the table.
VIEW, GEMM, ATTN, MEM = 0, 1, 2, 3
#: Ops whose FLOPs run on matrix units (tensor cores at 16 bits).
GEMM_OPS = frozenset({"linear", "matmul", "bmm", "sdpa", "conv1d", "conv2d", "conv3d",
                      "einsum"})
#: Ops of the attention core that selective recomputation recomputes (Korthikanti et al.:
#: the QKᵀ scores, softmax, dropout and the score-times-V product).
ATTENTION_CORE = frozenset({"sdpa", "softmax", "dropout"})
#: Ops whose inputs autograd saves (those it needs for the gradient); others save nothing,
#: except ``OUTPUT_SAVERS`` which keep their output.
INPUT_SAVERS = frozenset({"linear", "matmul", "bmm", "layer_norm", "rms_norm", "norm", "mul",
                          "div", "pow", "gelu", "silu", "relu", "sigmoid", "softplus", "mish",
                          "embedding", "conv1d", "conv2d", "einsum", "group_norm"})
OUTPUT_SAVERS = frozenset({"tanh", "exp", "softmax", "log_softmax", "sqrt", "rsqrt"})
#: Element-wise ops that a training framework fuses into one kernel when they follow one
#: another (Megatron's bias-GeLU and bias-dropout-add, torch.compile): the tensors between
#: them are never written to memory, and autograd keeps only what enters the chain.
FUSIBLE_CATEGORIES = frozenset({"elementwise", "activation", "regularization"})
FUSIBLE_OPS = frozenset({"copy", "cast", "masked_fill"})
#: Config keys that hold the layer count (transformers' names and aliases).
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


@dataclass(frozen=True)
class ModelShape:
    """What the layout rules and the arithmetic read from the config."""

    model_id: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    vocab: int
    intermediate: int
    encoder_decoder: bool = False
    experts: int = 0
    #: experts each token is routed to (top-k; 0: dense)
    experts_per_token: int = 0
    #: width of one attention head (the config's ``head_dim``, else hidden / heads)
    head_dim: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _get(cfg, *names, default=None):
    for n in names:
        v = getattr(cfg, n, None)
        if v is not None:
            return v
    return default


def model_shape(spec: str) -> tuple[ModelShape, Any]:
    """``(shape, transformers config)`` of ``hf:ID`` / ``hf:path/config.json``."""
    from perfcast.zoo.hf_config import resolve_hf_config

    config, model_id = resolve_hf_config(spec)
    text = getattr(config, "text_config", None) or config
    layers = _get(text, *LAYER_KEYS)
    hidden = _get(text, "hidden_size", "n_embd", "d_model")
    heads = _get(text, "num_attention_heads", "n_head", "num_heads")
    if not (layers and hidden and heads):
        raise ModelSpecError(f"{model_id}: the config names no layer count, hidden size or "
                             f"attention heads; tensor and pipeline parallelism split a "
                             f"transformer's layers")
    kv = _get(text, "num_key_value_heads", "num_kv_heads", "n_head_kv")
    if kv is None:
        kv = 1 if getattr(text, "multi_query", False) else heads
    from perfcast.llm.arch import mlp_shape

    inter, experts, k = mlp_shape(text, int(hidden))
    shape = ModelShape(model_id=str(model_id), layers=int(layers), hidden=int(hidden),
                       heads=int(heads), kv_heads=int(kv),
                       vocab=int(_get(text, "vocab_size", default=0) or 0),
                       intermediate=int(inter),
                       encoder_decoder=bool(getattr(text, "is_encoder_decoder", False)),
                       experts=experts, experts_per_token=k,
                       head_dim=int(_get(text, "head_dim", default=0) or hidden // heads))
    return shape, config


def variant_spec(config, layers: int) -> str:
    """``hf:<file>``: ``config`` with ``layers`` layers (every per-layer list cut to it),
    written once into the cache (``<cache>/../parallel``)."""
    from perfcast.paths import cache_dir, write_file_atomically

    doc = config.to_dict()
    text = doc.get("text_config") if isinstance(doc.get("text_config"), dict) else doc
    n0 = next((text[k] for k in LAYER_KEYS if isinstance(text.get(k), int)), None)
    found = False
    for k in LAYER_KEYS:
        if k in text:
            text[k] = layers
            found = True
    if not found:
        text["num_hidden_layers"] = layers
    if n0:
        for k, v in list(text.items()):
            if isinstance(v, list) and len(v) == n0 and n0 != layers:
                text[k] = v[:layers]
    raw = json.dumps(doc, sort_keys=True, default=str)
    key = hashlib.sha256(raw.encode()).hexdigest()[:20]
    path = cache_dir().parent / "parallel" / f"{key}.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file_atomically(path, raw)
    return f"hf:{path}"


# --------------------------------------------------------------------------------- the table
@dataclass
class NodeTable:
    """Per node of one traced graph (batch 1), arrays of equal length:

    * ``cls`` — :data:`VIEW` (no work), :data:`GEMM` (a layer's matrix product, on matrix
      units), :data:`ATTN` (attention products and ``sdpa``, on matrix units),
      :data:`MEM` (element-wise, norms, embeddings: bandwidth);
    * ``flops``, ``act_in`` / ``act_out`` (activation elements read / written), ``weights``
      (parameter elements read), ``m_dim`` / ``n_dim`` (a GEMM's output rows / columns);
    * ``div_flops`` — whether the node's work is divided by T (it runs on a shard);
      ``div_weights`` — whether its parameters are; ``out_div`` — whether its output is;
    * ``saved`` (activation elements autograd keeps for the backward pass, counted once per
      tensor; ``saved_div`` whether they are sharded), ``core`` (selective recomputation
      recomputes it);
    * ``allreduce`` — elements all-reduced after the node in the forward pass (row-parallel
      outputs, the vocabulary-parallel embedding);
    * ``launches`` — kernels launched (0 for views and for element-wise nodes fused into the
      chain's last one); ``scores`` — elements of an attention's score matrix (``sdpa``);
    * ``expert`` — a mixture of experts' expert GEMM (a grouped product over the bank of
      experts: its weight is ``experts × in × out``), whose weights expert parallelism splits.
    """

    op: list[str]
    cls: np.ndarray
    flops: np.ndarray
    act_in: np.ndarray
    act_out: np.ndarray
    weights: np.ndarray
    params: np.ndarray
    m_dim: np.ndarray
    n_dim: np.ndarray
    div_flops: np.ndarray
    div_weights: np.ndarray
    in_div: np.ndarray
    out_div: np.ndarray
    saved: np.ndarray
    saved_div: np.ndarray
    core: np.ndarray
    allreduce: np.ndarray
    launches: np.ndarray
    scores: np.ndarray
    total_params: int = 0
    notes: list[str] = field(default_factory=list)
    expert: np.ndarray | None = None

    def expert_mask(self) -> np.ndarray:
        """:attr:`expert`, all false when the table has none."""
        return self.expert if self.expert is not None else np.zeros(len(self.op), bool)


def _numel(shape) -> float:
    return float(math.prod(int(d) for d in shape)) if shape else 1.0


#: Ops that reduce over the hidden width: their input must be whole, so a column-parallel
#: linear layer whose split output would reach one before a row-parallel layer is left whole
#: (Megatron's BERT head: the transform dense layer before the layer norm is not split).
NORM_OPS = frozenset({"layer_norm", "rms_norm", "norm", "group_norm", "batch_norm"})


def split(graph, shape: ModelShape) -> NodeTable:
    """The :class:`NodeTable` of a traced forward ``graph`` under Megatron's tensor-parallel
    split (see the module docstring)."""
    whole: set[int] = set()
    for _ in range(8):
        table, bad = _split(graph, shape, whole)
        if not bad:
            return table
        whole |= bad
    return table


def _split(graph, shape: ModelShape, whole: set[int]) -> tuple[NodeTable, set[int]]:  # noqa: C901
    """One pass of :func:`split` with the linear layers ``whole`` left unsplit; also returns
    the column-parallel layers whose split output reaches a norm (to be left whole)."""
    from perfcast.ops import category

    nodes = graph.nodes
    n = len(nodes)
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for e in graph.edges:
        if e.kind == "forward" and 0 <= e.src < n and 0 <= e.dst < n:
            preds[e.dst].append(e.src)
            succs[e.src].append(e.dst)
    fusible = [nd.op in FUSIBLE_OPS or category(nd.op) in FUSIBLE_CATEGORIES for nd in nodes]
    # an element-wise node whose every consumer is element-wise (through views) is inside a
    # fused chain: its output is never materialised
    consumers = [_consumers(i, succs, nodes) for i in range(n)]
    internal = [fusible[i] and bool(consumers[i]) and all(fusible[c] for c in consumers[i])
                for i in range(n)]
    state = ["R"] * n  # output state: R replicated, S sharded, P partial (after all-reduce R)
    base = list(range(n))  # the storage a view's output shares
    cols = {k: np.zeros(n) for k in ("flops", "act_in", "act_out", "weights", "params",
                                     "m_dim", "n_dim", "saved", "allreduce", "scores")}
    cls = np.full(n, MEM, dtype=np.int8)
    div_flops = np.zeros(n, bool)
    div_weights = np.zeros(n, bool)
    in_div = np.zeros(n, bool)
    out_div = np.zeros(n, bool)
    core = np.zeros(n, bool)
    expert = np.zeros(n, bool)
    saved_by: dict[int, bool] = {}  # storage node → sharded?
    origin: dict[int, set[int]] = {}  # a sharded tensor → the column-parallel layers it is from
    bad: set[int] = set()
    vocab = shape.vocab
    for i, nd in enumerate(nodes):
        op = nd.op
        ins = [state[p] for p in preds[i]]
        sharded_in = "S" in ins
        act_shapes = list(nd.input_shapes)
        w_elems = 0.0
        if nd.params:
            # parameter inputs: the weight (2-D for linear / embedding) and bias
            if op == "linear" and len(act_shapes) >= 2:
                w_elems = sum(_numel(s) for s in act_shapes[1:])
                # a grouped product over the experts' bank (experts × in × out)
                expert[i] = shape.experts > 1 and len(act_shapes[1]) == 3 \
                    and int(act_shapes[1][0]) == shape.experts
                act_shapes = act_shapes[:1]
            elif op == "embedding" and act_shapes:
                w_elems = _numel(act_shapes[0])
                act_shapes = act_shapes[1:]
            else:
                w_elems = float(nd.params)
        out_elems = sum(_numel(s) for s in nd.output_shapes)
        in_elems = sum(_numel(s) for s in act_shapes)
        if fusible[i]:  # inside a fused chain: read only what comes from outside it
            from_chain = sum(_numel(nodes[p].output_shapes[0]) for p in set(preds[i])
                             if internal[base[p]] and nodes[p].output_shapes)
            in_elems = max(0.0, in_elems - from_chain)
            if internal[i]:
                out_elems = 0.0
        cols["flops"][i] = float(nd.flops)
        cols["act_in"][i] = in_elems if op not in VIEW_OPS else 0.0
        cols["act_out"][i] = out_elems if op not in VIEW_OPS else 0.0
        cols["weights"][i] = w_elems
        cols["params"][i] = float(nd.params)
        in_div[i] = sharded_in
        if op in VIEW_OPS or op in ("constant",):
            cls[i] = VIEW
            state[i] = "S" if sharded_in else "R"
            if preds[i]:
                base[i] = base[preds[i][0]]
            out_div[i] = state[i] == "S"
            if sharded_in:
                origin[i] = set().union(*(origin.get(p, set()) for p in preds[i]))
            continue
        if op == "embedding":
            rows = nd.input_shapes[0][0] if nd.input_shapes and nd.input_shapes[0] else 0
            if vocab and rows == vocab:  # vocabulary-parallel lookup: partial, all-reduced
                div_weights[i] = True
                cols["allreduce"][i] = out_elems
            state[i] = "R"
        elif op == "linear" and nd.params:
            out_dims = nd.output_shapes[0] if nd.output_shapes else ()
            cols["n_dim"][i] = float(out_dims[-1]) if out_dims else 1.0
            cols["m_dim"][i] = _numel(out_dims[:-1]) if out_dims else 1.0
            cls[i] = GEMM
            div_flops[i] = div_weights[i] = True
            origin[i] = {i}
            if shape.experts > 1 and cols["n_dim"][i] == shape.experts and not sharded_in:
                whole.add(i)  # the router of a mixture of experts stays whole
            if i in whole and not sharded_in:  # left whole: replicated work
                div_flops[i] = div_weights[i] = False
                state[i] = "R"
            elif sharded_in:  # row-parallel: partial sums → all-reduce
                cols["allreduce"][i] = out_elems
                state[i] = "R"
            else:  # column-parallel (the LM head too: vocabulary-split logits)
                state[i] = "S"
                out_div[i] = True
        else:
            if op == "sdpa" and len(nd.input_shapes) >= 2 and len(nd.input_shapes[0]) >= 2 \
                    and len(nd.input_shapes[1]) >= 2:
                q, k = nd.input_shapes[0], nd.input_shapes[1]
                cols["scores"][i] = _numel(q[:-1]) * float(k[-2])  # batch·heads·s_q·s_k
            if op in GEMM_OPS:
                cls[i] = ATTN if not nd.params else GEMM
                out_dims = nd.output_shapes[0] if nd.output_shapes else ()
                cols["n_dim"][i] = float(out_dims[-1]) if out_dims else 1.0
                cols["m_dim"][i] = _numel(out_dims[:-1]) if out_dims else 1.0
            state[i] = "S" if sharded_in else "R"
            div_flops[i] = out_div[i] = sharded_in
            if nd.params:
                div_weights[i] = sharded_in
            core[i] = op in ATTENTION_CORE
            if sharded_in and op in NORM_OPS:  # a norm over a split width: not Megatron's
                bad |= set().union(*(origin.get(p, set()) for p in preds[i]))
        if state[i] == "S" and op != "linear":
            origin[i] = set().union(*(origin.get(p, set()) for p in preds[i]))
        # what autograd keeps of this node's inputs / output (each storage once)
        if op in INPUT_SAVERS or op in GEMM_OPS:
            for p in preds[i]:
                b = base[p]
                if b not in saved_by and cls[b] != VIEW and nodes[b].op != "constant" \
                        and not internal[b]:
                    saved_by[b] = state[b] == "S" or out_div[b]
        if (op in OUTPUT_SAVERS or op == "sdpa") and not internal[i]:
            saved_by.setdefault(i, bool(out_div[i]))
    saved_div = np.zeros(n, bool)
    for b, sh in saved_by.items():
        cols["saved"][b] = cols["act_out"][b]
        saved_div[b] = sh
        if nodes[b].op == "sdpa":
            core[b] = True
    cols["launches"] = np.array([0.0 if (cls[i] == VIEW or internal[i]) else 1.0
                                 for i in range(n)])
    table = NodeTable(op=[nd.op for nd in nodes], cls=cls, div_flops=div_flops,
                      div_weights=div_weights, in_div=in_div, out_div=out_div,
                      saved_div=saved_div, core=core, total_params=int(graph.params),
                      expert=expert, **cols)
    return table, bad - whole


#: Parts of the one-layer table.
PRE, BLOCK, POST = 0, 1, 2


def _consumers(i: int, succs: list[list[int]], nodes) -> list[int]:
    """The nodes that read ``i``'s output, looking through views."""
    out, todo, seen = [], list(succs[i]), set()
    while todo:
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        if nodes[j].op in VIEW_OPS:
            todo.extend(succs[j])
        else:
            out.append(j)
    return out


@dataclass
class TracedModel:
    """A model's one- and two-layer tables (``one``, ``two``). One block is what ``two`` has
    more than ``one`` (any additive cost: ``cost(two) − cost(one)``, exact whatever the
    layers' order); the outside (embeddings, final norm, head) is ``cost(one) − block``. For a
    pipeline the outside is split between the first and the last stage by ``part`` (per node
    of ``one``: :data:`PRE` — embeddings, masks — :data:`BLOCK` or :data:`POST` — final norm,
    head), found by aligning the two graphs (``None`` when they do not align: no pipeline).
    ``causal``: a decoder's attention (:func:`is_causal`), each token attending to those before
    it."""

    spec: str
    seq_len: int
    shape: ModelShape
    one: NodeTable
    two: NodeTable
    part: np.ndarray | None
    notes: list[str] = field(default_factory=list)
    causal: bool = False

    @property
    def block_params(self) -> float:
        return float(self.two.total_params - self.one.total_params)

    @property
    def outside_params(self) -> float:
        return float(self.one.total_params) - self.block_params

    @property
    def params(self) -> float:
        return self.outside_params + self.shape.layers * self.block_params


def _parts(one: NodeTable, two: NodeTable) -> np.ndarray | None:
    """The part of every node of ``one`` (see :class:`TracedModel`), ``None`` when the graphs
    do not align (a model whose layers differ from one another)."""
    a_ops, b_ops = one.op, two.op
    n, k = len(a_ops), len(b_ops) - len(a_ops)
    if k <= 0:
        return None
    pre = 0
    while pre < n and a_ops[pre] == b_ops[pre]:
        pre += 1
    suf = 0
    while suf < n and a_ops[n - 1 - suf] == b_ops[-1 - suf]:
        suf += 1
    rows = np.nonzero((one.cls == GEMM) & (one.allreduce > 0))[0]
    lo = max(n - suf, k, int(rows[-1]) + 1 if len(rows) else 0)
    for a in range(lo, min(pre, n) + 1):
        if a_ops[a - k:a] == b_ops[a:a + k]:
            part = np.full(n, POST, dtype=np.int8)
            part[:a - k] = PRE
            part[a - k:a] = BLOCK
            return part
    return None


def is_causal(config) -> bool:
    """Whether a transformer's self-attention is causal (a decoder: ``is_decoder``, or an
    ``…ForCausalLM`` / ``…LMHeadModel`` architecture; with no architecture named, a model
    type transformers maps to causal language modelling and not to masked)."""
    text = getattr(config, "text_config", None) or config
    if getattr(text, "is_decoder", False):
        return True
    archs = [str(a) for a in (getattr(config, "architectures", None) or [])]
    if archs:
        return any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)
    try:
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
            MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        )
    except ImportError:  # pragma: no cover - transformers is a dependency of hf: specs
        return False
    mt = getattr(text, "model_type", None)
    return mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and mt not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def trace(spec: str, seq_len: int, *, use_cache: bool = True) -> TracedModel:
    """Trace ``spec`` (``hf:…``) with one and with two layers at ``seq_len`` tokens, split both
    (:func:`split`) and find the block (:func:`_parts`)."""
    shape, config = model_shape(spec)
    if shape.encoder_decoder:
        raise PerfcastError(f"{shape.model_id} is an encoder-decoder model: tensor and pipeline "
                            f"parallelism of its two stacks are not modelled (use "
                            f"--data-parallel only)")
    one, two = (split(_graph(variant_spec(config, n), seq_len, use_cache), shape)
                for n in (1, 2))
    return TracedModel(spec=spec, seq_len=seq_len, shape=shape, one=one, two=two,
                       part=_parts(one, two), causal=is_causal(config))


def _graph(spec: str, seq_len: int, use_cache: bool):
    from perfcast.cache import get_graph
    from perfcast.workload import Workload

    w = Workload.of(spec, batch_size=1, seq_len=seq_len, mode="infer", precision="fp32")
    return get_graph(w, use_cache=use_cache)


__all__ = ["ATTN", "BLOCK", "GEMM", "MEM", "ModelShape", "NodeTable", "POST", "PRE",
           "TracedModel", "VIEW", "is_causal", "model_shape", "split", "trace", "variant_spec"]
