"""What the traced graphs of the shipped LLMs say (``graph_summaries.json``, written by
``benchmarks/llm_graphs.py``), so that any request is evaluated without tracing:

* the **prefill graph** (batch 1) at two prompt lengths: FLOPs ``α·T + β·T²`` (layers + causal
  attention), activation peak ``c + d·T`` (MiB, the tensor simulation), graph nodes and edges
  (the thesis' TN / TE features);
* the **decode-step graph** (one token over a KV cache of ``c`` tokens) at a few cache lengths:
  FLOPs ``α_d + β_d·c`` (the line through the traces). A request's ``O − 1`` decode steps at
  cache lengths ``I … I+O−2`` are summed from the line (:func:`request_graph_flops`); a model
  whose decode graph was not traced falls back to the prefill's ``α + 2·β·c`` (one token
  attending ``c`` keys).

A model without a summary (a user's config.json) falls back to closed forms (the widest tensors
of a layer for the activations; 2 × active parameters + attention for the FLOPs); the functions
say which was used.
"""

from __future__ import annotations

import json
from functools import lru_cache

from perfcast.llm.arch import KV_BYTES, LLMArch, base_precision


@lru_cache(maxsize=1)
def _summaries() -> dict:
    from perfcast.paths import package_data

    path = package_data("llm", "graph_summaries.json")
    try:
        return json.loads(path.read_text()).get("models", {})
    except (OSError, ValueError):
        return {}


def graph_summary(model_id: str) -> dict | None:
    """The traced summary of a shipped model (``None``: never traced), with the fitted
    coefficients ``flops_alpha``, ``flops_beta``, ``act_c_mb``, ``act_d_mb``."""
    row = _summaries().get(model_id)
    if not row:
        return None
    (t1, t2), (f1, f2), (a1, a2) = row["lengths"], row["flops"], row["activation_peak_mb"]
    beta = (f2 * t1 - f1 * t2) / (t1 * t2 * (t2 - t1))
    alpha = (f1 - beta * t1 * t1) / t1
    d = (a2 - a1) / (t2 - t1)
    out = {**row, "flops_alpha": alpha, "flops_beta": beta, "act_d_mb": d,
           "act_c_mb": a1 - d * t1}
    if "decode_alpha" not in row:  # decode step from the prefill: one token over c keys
        out["decode_alpha"], out["decode_beta"] = alpha, 2.0 * beta
        out["decode_source"] = "interpolated from the prefill graph (α + 2β·c)"
    else:
        out["decode_source"] = "the traced decode-step graph (α_d + β_d·c)"
    return out


def request_graph_flops(arch: LLMArch, sequences: int, input_len: int, output_len: int
                        ) -> tuple[float, str]:
    """(FLOPs, source) of a request batch from the traced graphs: ``sequences`` × (the prefill
    at ``input_len`` tokens + ``output_len − 1`` decode steps at cache lengths ``input_len …
    input_len + output_len − 2``); closed forms for a model never traced."""
    steps = max(0, output_len - 1)
    cache_sum = steps * input_len + steps * (steps - 1) / 2.0  # Σ c over the decode steps
    s = graph_summary(arch.model_id)
    if s is None:
        pre = input_len * arch.flops_per_token() + arch.attention_flops(input_len,
                                                                         input_len / 2.0)
        dec = steps * arch.flops_per_token() + arch.attention_flops(1, 1.0) * cache_sum
        return sequences * (pre + dec), "closed form (model not traced)"
    pre = s["flops_alpha"] * input_len + s["flops_beta"] * input_len ** 2
    dec = steps * s["decode_alpha"] + s["decode_beta"] * cache_sum
    return sequences * (pre + dec), (f"the traced prefill graph at {input_len:,} tokens + "
                                     f"{s['decode_source']}, summed over the cache lengths")


def prefill_flops(model_id: str, tokens: int) -> float | None:
    """FLOPs of a batch-1 prefill of ``tokens`` tokens from the traced graphs (``None``: no
    summary)."""
    s = graph_summary(model_id)
    return None if s is None else s["flops_alpha"] * tokens + s["flops_beta"] * tokens ** 2


def activation_peak_mb(arch: LLMArch, tokens: int, precision: str = "fp16"
                       ) -> tuple[float, str]:
    """(MiB, source) of the activation peak of a prefill over ``tokens`` prompt tokens (all
    sequences of the batch): the tensor simulation's ``c + d·tokens`` for a traced model
    (fp16; fp32 doubles it), else the widest tensors of a layer (MLP intermediate or QKV)
    plus the logits of the last positions."""
    precision = base_precision(precision)  # a KV cache dtype changes no activation
    scale = KV_BYTES[precision] / 2.0
    s = graph_summary(arch.model_id)
    if s is not None:
        return (max(0.0, s["act_c_mb"] + s["act_d_mb"] * tokens) * scale,
                "the tensor simulation of the prefill graph (benchmarks/llm_graphs.py)")
    width = max(2 * arch.intermediate, 4 * arch.hidden)
    mb = (tokens * width * KV_BYTES[precision] + tokens * arch.vocab * 4) / 2 ** 20
    return mb, "a closed form (widest layer tensors + logits; model not traced)"


__all__ = ["activation_peak_mb", "graph_summary", "prefill_flops", "request_graph_flops"]
