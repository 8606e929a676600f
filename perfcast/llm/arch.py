"""What an LLM's serving cost depends on, read from its Hugging Face config: :class:`LLMArch`
(layers, widths, attention heads and KV heads, experts, positions, parameter counts), and the
arithmetic of its KV cache and weights.

Parameter counts are exact: the architecture is built on the ``meta`` device (no weights, no
memory, :func:`perfcast.zoo.hf.build_hf_model`) and its parameters counted; parameters of routed
experts (names containing ``experts``) are counted apart, so that a mixture-of-experts model's
*active* parameters per token are ``dense + experts × k / E``. The summary is cached as JSON in
``cache_dir()/../llm/`` (a 70B model takes seconds to build once, milliseconds after).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from perfcast.errors import ModelSpecError, PerfcastError

#: Bytes per weight by serving precision: ``int8`` / ``int4`` are weight-only quantization
#: (activations and the KV cache stay 16-bit); int4 adds one fp16 scale per group of 128
#: weights (GPTQ / AWQ's common layout).
WEIGHT_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "amp": 2.0, "int8": 1.0 + 2 / 128,
                "int4": 0.5 + 2 / 128}
#: Bits per weight of llama.cpp's GGUF formats (:data:`perfcast.workload.GGUF_PRECISIONS`),
#: averaged over a whole file as llama.cpp's ``quantize`` tool lists them for Llama-3-8B
#: (8.03 B parameters; GiB × 2³⁰ × 8 / parameters): a K-quant "M" mix keeps some tensors at
#: 6 bits (Q4_K_M: 4.58 GiB → 4.90 bits; Q5_K_M: 5.33 GiB → 5.70; Q6_K: 6.14 GiB → 6.57; Q4_0:
#: 4.34 GiB → 4.64; Q8_0: 7.96 GiB → 8.51, its 34-byte blocks of 32 weights); 16/32-bit formats
#: as stored.
GGUF_BITS = {"F32": 32.0, "F16": 16.0, "BF16": 16.0, "Q8_0": 8.51, "Q6_K": 6.57,
             "Q5_K_M": 5.70, "Q4_K_M": 4.90, "Q4_0": 4.64}
WEIGHT_BYTES.update({k: v / 8.0 for k, v in GGUF_BITS.items()})
#: Bytes per KV-cache element by serving precision (weight-only quantization keeps 16-bit KV;
#: llama.cpp's cache is F16 by default, F32 for an F32 model).
KV_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "amp": 2, "int8": 2, "int4": 2,
            **{k: 4 if k == "F32" else 2 for k in GGUF_BITS}}
#: FP8 serving (W8A8-FP8: vLLM ``--quantization fp8``, TensorRT-LLM FP8): one byte a weight (its
#: per-tensor or per-channel fp32 scales are < 0.1 % of it, not counted), GEMMs at the FP8
#: tensor peak, the KV cache in 16 bits unless ``--kv-cache-dtype fp8``.
WEIGHT_BYTES["fp8"] = 1.0
KV_BYTES["fp8"] = 2
#: The KV cache's dtype beside a serving precision (``--kv-cache-dtype``) makes a *priced*
#: precision, ``<precision><suffix>``: weights and compute as ``<precision>``, the KV cache at
#: one byte an element (``fp8``: vLLM's and TensorRT-LLM's FP8 KV cache) or two (``fp16`` /
#: ``bf16``) — what the arithmetic (:mod:`perfcast.llm.physics`, the prefill, the memory) reads.
KV_SUFFIX = {"fp8": "+kv-fp8", "fp16": "+kv-16", "bf16": "+kv-16"}
for _p in list(KV_BYTES):
    for _suffix, _b in (("+kv-fp8", 1), ("+kv-16", 2)):
        WEIGHT_BYTES[_p + _suffix] = WEIGHT_BYTES[_p]
        KV_BYTES[_p + _suffix] = _b


def priced_precision(precision: str, kv_cache_dtype: str | None) -> str:
    """The priced precision of a serving ``precision`` with its KV cache's dtype (``None`` /
    ``auto``: the precision's own)."""
    if kv_cache_dtype in (None, "auto"):
        return precision
    return precision + KV_SUFFIX[kv_cache_dtype]


def base_precision(priced: str) -> str:
    """The serving precision of a priced precision (:func:`priced_precision`)."""
    return priced.split("+", 1)[0]
#: vLLM's KV-cache block (tokens): a sequence's cache is allocated in whole blocks.
VLLM_BLOCK_TOKENS = 16


#: Class-name endings of the heads that generate text token by token (``architectures``).
GENERATIVE_HEADS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
#: Encoder-only model types, refused when a config names no ``architectures``.
ENCODER_TYPES = frozenset({"bert", "roberta", "distilbert", "deberta", "deberta-v2", "albert",
                           "electra", "xlm-roberta", "camembert", "mpnet", "modernbert"})


@dataclass(frozen=True)
class LLMArch:
    """A decoder LLM's shape. Widths in elements, counts in parameters (not bytes)."""

    model_id: str
    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    max_positions: int | None
    experts: int  # routed experts per MoE layer (0: dense)
    experts_per_token: int  # experts each token is routed to (0: dense)
    sliding_window: int | None  # tokens of KV kept by windowed layers
    windowed_layers: int  # layers with a sliding window (0: none)
    params: int  # all parameters
    expert_params: int  # parameters of the routed experts (all of them)
    embedding_params: int  # input embedding (a lookup, no FLOPs)
    tied_head_params: int  # an LM head sharing the input embedding's weights (counted once)

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def dense_params(self) -> int:
        return self.params - self.expert_params

    def active_params(self, tokens: int = 1) -> float:
        """Parameters read from memory by one forward step over ``tokens`` tokens: every dense
        weight, and of each MoE layer's experts the expected number touched when ``tokens``
        tokens pick ``k`` of ``E`` each (uniform routing: ``E·(1 − (1 − k/E)^tokens)``)."""
        if not self.moe:
            return float(self.params)
        e, k = self.experts, self.experts_per_token
        touched = e * (1.0 - (1.0 - k / e) ** max(1, tokens))
        return self.dense_params + self.expert_params * touched / e

    def flops_per_token(self) -> float:
        """Matmul FLOPs per token outside attention: 2 × the parameters each token multiplies
        (dense weights but the input embedding, plus ``k`` of ``E`` experts; an LM head tied to
        the embedding multiplies it although its parameters are counted once, as the
        embedding)."""
        per_token = self.dense_params - self.embedding_params + self.tied_head_params
        if self.moe:
            per_token += self.expert_params * self.experts_per_token / self.experts
        return 2.0 * per_token

    def attention_flops(self, query_tokens: int, context: float) -> float:
        """FLOPs of QKᵀ and AV for ``query_tokens`` new tokens attending to ``context`` tokens
        (per sequence, all layers)."""
        return 4.0 * self.layers * self.heads * self.head_dim * query_tokens * context

    def kv_bytes_per_token(self, precision: str = "fp16") -> float:
        """KV-cache bytes one token adds in one sequence (K and V, all layers, all KV heads)."""
        return 2.0 * self.layers * self.kv_heads * self.head_dim * KV_BYTES[precision]

    def kv_cache_bytes(self, batch: int, context: int, precision: str = "fp16",
                       block: int | None = None) -> float:
        """KV cache of ``batch`` sequences of ``context`` tokens: windowed layers keep at most
        ``sliding_window`` tokens; with ``block`` (vLLM: 16) each sequence's tokens are rounded
        up to whole blocks."""
        per_layer = 2.0 * self.kv_heads * self.head_dim * KV_BYTES[precision]

        def tokens(n: int) -> int:
            return math.ceil(n / block) * block if block else n

        full = (self.layers - self.windowed_layers) * tokens(context)
        windowed = self.windowed_layers * tokens(min(context, self.sliding_window or context))
        return batch * per_layer * (full + windowed)

    def weight_bytes(self, precision: str = "fp16") -> float:
        return self.params * WEIGHT_BYTES[precision]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _get(config, *names, default=None):
    for n in names:
        v = getattr(config, n, None)
        if v is not None:
            return v
    return default


def mlp_shape(text, hidden: int) -> tuple[int, int, int]:
    """``(MLP width, routed experts, experts per token)`` of a transformers (text) config: a
    mixture-of-experts model's width is its experts' (``moe_intermediate_size`` of Qwen-MoE /
    DeepSeek / OLMoE configs, whose ``intermediate_size`` is a dense layer's; Mixtral's
    ``intermediate_size`` is already the experts'); dense models have 0 experts."""
    experts = int(_get(text, "num_local_experts", "num_experts", "n_routed_experts",
                       default=0) or 0)
    k = int(_get(text, "num_experts_per_tok", "num_experts_per_token", "moe_top_k",
                 default=0) or 0)
    inter = _get(text, "intermediate_size", "n_inner", "ffn_dim", "d_ff") or 4 * hidden
    if experts > 1:
        inter = _get(text, "moe_intermediate_size", default=None) or inter
    return int(inter), experts, k


def arch_from_config(config, model_id: str, params: int, expert_params: int,
                     embedding_params: int, tied_head_params: int = 0) -> LLMArch:
    """:class:`LLMArch` of a transformers ``config`` (text part of a vision-language one) with
    the parameter counts given."""
    text = getattr(config, "text_config", None) or config
    if getattr(text, "is_encoder_decoder", False):
        raise ModelSpecError(f"{model_id} is an encoder-decoder model; --mode generate covers "
                             f"decoder-only LLMs")
    archs = [a for a in (getattr(config, "architectures", None) or []) if isinstance(a, str)]
    mtype0 = str(getattr(text, "model_type", "") or getattr(config, "model_type", ""))
    if (archs and not any(a.endswith(GENERATIVE_HEADS) for a in archs)) or \
            (not archs and mtype0 in ENCODER_TYPES):
        what = ", ".join(archs) if archs else f"model_type {mtype0}"
        raise ModelSpecError(f"{model_id} is an encoder ({what}), not a decoder LLM; --mode "
                             f"generate covers decoder-only LLMs")
    layers = _get(text, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _get(text, "hidden_size", "n_embd", "d_model")
    heads = _get(text, "num_attention_heads", "n_head")
    if not (layers and hidden and heads):
        raise ModelSpecError(f"{model_id}: the config has no layer count, hidden size or heads; "
                             f"not a decoder LLM perfcast can serve")
    kv = _get(text, "num_key_value_heads", "num_kv_heads", "n_head_kv")
    if kv is None:
        kv = 1 if getattr(text, "multi_query", False) else heads
    head_dim = _get(text, "head_dim") or hidden // heads
    inter, experts, k = mlp_shape(text, int(hidden))
    window = _get(text, "sliding_window")
    mtype = str(getattr(text, "model_type", "") or getattr(config, "model_type", ""))
    windowed = 0
    if window and getattr(text, "use_sliding_window", True) is not False:
        # Gemma-2 alternates local (windowed) and global layers; Mistral/Mixtral window all
        windowed = layers // 2 if mtype.startswith("gemma2") else layers
    maxpos = _get(text, "max_position_embeddings", "n_positions", "max_sequence_length",
                  "seq_length")
    return LLMArch(model_id=model_id, model_type=mtype, layers=int(layers), hidden=int(hidden),
                   heads=int(heads), kv_heads=int(kv), head_dim=int(head_dim),
                   intermediate=int(inter), vocab=int(_get(text, "vocab_size", default=0)),
                   max_positions=int(maxpos) if maxpos else None, experts=experts,
                   experts_per_token=k if experts > 1 else 0,
                   sliding_window=int(window) if windowed else None, windowed_layers=windowed,
                   params=int(params), expert_params=int(expert_params),
                   embedding_params=int(embedding_params),
                   tied_head_params=int(tied_head_params))


def _count(model) -> tuple[int, int, int, int]:
    """(all, routed-expert, input-embedding, tied-LM-head) parameters of a model built on
    ``meta``; tied weights counted once (the last: the head's parameters when the LM head *is*
    the input embedding's matrix, else 0)."""
    seen, total, experts = set(), 0, 0
    for name, p in model.named_parameters(remove_duplicate=True):
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        if ".experts." in name or name.split(".")[-2:-1] == ["experts"]:
            experts += p.numel()
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    emb_params = sum(p.numel() for p in emb.parameters()) if emb is not None else 0
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    w_in, w_out = getattr(emb, "weight", None), getattr(head, "weight", None)
    tied = int(w_out.numel()) if w_in is not None and w_out is w_in else 0
    return total, experts, emb_params, tied


def _raw_config(text: str) -> tuple[str, str] | None:
    """``(identity, raw JSON text)`` of a shipped id / alias or a local config file, read
    without transformers (what the summary cache is keyed on); ``None`` for a hub id."""
    from pathlib import Path

    from perfcast.paths import package_data

    spec = text.strip()
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        try:
            return f"file:{path.resolve()}", path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
    index = _shipped_index()
    fname = index.get(spec.lower())
    if fname is None:
        return None
    return f"shipped:{fname}", (package_data("zoo", "hf_configs") / fname).read_text()


def positions_note(spec: str, seq_len: int) -> str | None:
    """What to say of a training sequence longer than the ``max_position_embeddings`` (or
    ``n_positions``) a shipped or local config states — read by :func:`_raw_config`, without
    transformers, so a cached prediction stays torch-free (a model with a learned position table
    refuses it when traced; a RoPE model computes its positions and runs it, as long-context
    training with RoPE scaling does); ``None`` within, or for a hub-only id."""
    text = spec.strip()
    raw = _raw_config(text[3:].strip() if text.startswith("hf:") else text)
    try:
        data = json.loads(raw[1]) if raw is not None else {}
    except json.JSONDecodeError:
        return None  # the trace says what is wrong with the file
    if not isinstance(data, dict):
        return None
    data = data.get("text_config") if isinstance(data.get("text_config"), dict) else data
    n = data.get("max_position_embeddings", data.get("n_positions"))
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0 or seq_len <= n:
        return None
    return (f"seq_len: {seq_len:,} tokens is beyond the model's {n:,} positions "
            f"(max_position_embeddings): priced as given — its positions are computed (rotary, "
            f"ALiBi or relative), so it runs, as long-context training with RoPE scaling does; "
            f"the model was not trained for it (a config.json with rope_scaling and a larger "
            f"max_position_embeddings says so)")


@lru_cache(maxsize=1)
def _shipped_index() -> dict[str, str]:
    """Lower-cased id / alias / file name → shipped file (``zoo/hf_configs/index.json``, read
    as :func:`perfcast.zoo.hf_config._index` reads it)."""
    from perfcast.paths import package_data

    data = json.loads((package_data("zoo", "hf_configs") / "index.json").read_text())
    files: dict[str, str] = dict(data["models"])
    out: dict[str, str] = {}
    for model_id, fname in files.items():
        for name in (model_id, model_id.replace("/", "--"), fname, fname[: -len(".json")]):
            out[name.lower()] = fname
    for alias, model_id in data.get("aliases", {}).items():
        if model_id in files:
            out[alias.lower()] = files[model_id]
    return out


def _cache_file(identity: str, raw: str):
    from perfcast.paths import cache_dir

    key = hashlib.sha256(f"{CACHE_VERSION}\n{identity}\n{raw}".encode()).hexdigest()[:24]
    return cache_dir().parent / "llm" / f"{key}.json"


#: Bumped when :class:`LLMArch` or its derivation changes (old cache entries are then unused).
CACHE_VERSION = "arch-4"


@lru_cache(maxsize=64)
def llm_arch(spec: str) -> LLMArch:
    """:class:`LLMArch` of ``hf:ID`` / ``hf:path/config.json`` (shipped configs offline; see
    :func:`perfcast.zoo.hf_config.resolve_hf_config`). A shipped or local config whose summary is in
    the cache is answered without importing transformers or torch."""
    from perfcast.paths import write_file_atomically

    text = spec[3:] if spec.startswith("hf:") else spec
    raw = _raw_config(text)
    path = _cache_file(*raw) if raw else None
    if path is not None and path.is_file():
        try:
            return LLMArch(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)  # damaged: rebuilt below
    from perfcast.zoo.hf import build_hf_model, resolve_hf_config

    config, model_id = resolve_hf_config(text)
    model = build_hf_model(config, "infer")
    total, experts, emb, tied = _count(model)
    arch = arch_from_config(config, model_id, total, experts, emb, tied)
    if path is not None:
        try:
            write_file_atomically(path, json.dumps(arch.to_dict(), indent=1))
        except OSError:
            pass  # a read-only cache only costs time
    return arch


def kv_heads_per_device(arch: LLMArch, tensor_parallel: int) -> int:
    """KV heads each device holds under ``tensor_parallel``-way tensor parallelism: the heads
    are split, and when there are fewer KV heads than devices each is replicated (vLLM's
    ``max(1, kv_heads // tp)``; an MQA model keeps its one KV head on every device)."""
    return max(1, arch.kv_heads // max(1, tensor_parallel))


__all__ = ["GGUF_BITS", "KV_BYTES", "KV_SUFFIX", "LLMArch", "VLLM_BLOCK_TOKENS", "WEIGHT_BYTES",
           "base_precision", "priced_precision", "arch_from_config",
           "kv_heads_per_device", "llm_arch", "mlp_shape", "positions_note"]
