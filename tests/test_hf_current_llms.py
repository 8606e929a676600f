"""Current LLMs by their current Hugging Face ids resolve offline from the shipped configs
(``perfcast/zoo/hf_configs``), with the architecture their publishers describe.

The parameter counts below are the models' published sizes (model cards and the hub's
safetensors totals, in billions) — facts about the models, not measurements perfcast is fitted
to. Each shipped config, built on the meta device, must land within 2 % of them.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from perfcast.faces.cli import main  # noqa: E402
from perfcast.llm.arch import llm_arch  # noqa: E402

#: id or alias → published parameter count (billions).
PUBLISHED_B = {
    "meta-llama/Llama-3.1-8B": 8.03,
    "meta-llama/Meta-Llama-3.1-8B": 8.03,
    "meta-llama/Llama-3.1-70B": 70.6,
    "meta-llama/Llama-3.3-70B-Instruct": 70.6,
    "meta-llama/Llama-3.2-1B": 1.24,
    "meta-llama/Llama-3.2-1B-Instruct": 1.24,
    "meta-llama/Llama-3.2-3B": 3.21,
    "meta-llama/Llama-3.2-3B-Instruct": 3.21,
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": 8.03,
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": 70.6,
    "Qwen/Qwen2.5-0.5B": 0.494,
    "Qwen/Qwen2.5-1.5B-Instruct": 1.54,
    "Qwen/Qwen2.5-3B": 3.09,
    "Qwen/Qwen2.5-7B": 7.62,
    "Qwen/Qwen2.5-7B-Instruct": 7.62,
    "Qwen/Qwen2.5-14B": 14.7,
    "Qwen/Qwen2.5-32B-Instruct": 32.8,
    "Qwen/Qwen2.5-72B": 72.7,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": 7.62,
    "Qwen/Qwen3-30B-A3B": 30.5,
    # chat / instruct twins of shipped base models (same architecture)
    "meta-llama/Meta-Llama-3-8B-Instruct": 8.03,
    "meta-llama/Llama-2-7b-chat-hf": 6.74,
    "Qwen/Qwen2-72B-Instruct": 72.7,
    "google/gemma-2-9b": 9.24,
    "codellama/CodeLlama-34b-Instruct-hf": 33.7,
    "mistralai/Mistral-7B-Instruct-v0.2": 7.24,
    "mistralai/Mixtral-8x22B-v0.1": 141.0,
    "microsoft/Phi-3-mini-128k-instruct": 3.82,
    "qwen3-235b-a22b": 235.1,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": 14.8,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": 32.8,
    "Qwen/Qwen3-0.6B": 0.596,
    "Qwen/Qwen3-1.7B": 1.72,
    "Qwen/Qwen3-4B": 4.02,
    "Qwen/Qwen3-8B": 8.19,
    "Qwen/Qwen3-14B": 14.8,
    "Qwen/Qwen3-32B": 32.8,
    "mistralai/Mistral-Small-24B-Instruct-2501": 23.6,
    "microsoft/Phi-3.5-mini-instruct": 3.82,
    "microsoft/phi-4": 14.7,
}


def test_current_ids_have_their_published_sizes():
    off = {}
    for model_id, billions in PUBLISHED_B.items():
        params = llm_arch(f"hf:{model_id}").params
        if abs(params / (billions * 1e9) - 1) > 0.02:
            off[model_id] = (params, billions)
    assert not off, off


def test_current_ids_keep_their_distinguishing_fields():
    """What separates these models from their neighbours: tied LM heads on the small ones
    (Llama 3.2, Qwen2.5 ≤ 3B, Qwen3 ≤ 4B), Qwen2.5's two vocabularies, explicit head sizes."""
    tied = {m: llm_arch(f"hf:{m}").tied_head_params > 0 for m in (
        "meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-3B", "Qwen/Qwen2.5-0.5B",
        "Qwen/Qwen2.5-3B", "Qwen/Qwen2.5-7B", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B",
        "microsoft/phi-4")}
    assert tied == {"meta-llama/Llama-3.2-1B": True, "meta-llama/Llama-3.2-3B": True,
                    "Qwen/Qwen2.5-0.5B": True, "Qwen/Qwen2.5-3B": True,
                    "Qwen/Qwen2.5-7B": False, "Qwen/Qwen3-4B": True, "Qwen/Qwen3-8B": False,
                    "microsoft/phi-4": False}
    assert llm_arch("hf:qwen2.5-3b").vocab == 151936
    assert llm_arch("hf:qwen2.5-7b-instruct").vocab == 152064
    a = llm_arch("hf:llama-3.2-1b")
    assert (a.layers, a.hidden, a.heads, a.kv_heads, a.head_dim) == (16, 2048, 32, 8, 64)
    q = llm_arch("hf:qwen3-32b")  # 64 heads of 128 on a width of 5120: head_dim is explicit
    assert (q.layers, q.hidden, q.heads, q.kv_heads, q.head_dim) == (64, 5120, 64, 8, 128)
    assert q.model_type == "qwen3"
    assert llm_arch("hf:llama-3.3-70b-instruct").model_id == \
        "meta-llama/Meta-Llama-3.1-70B-Instruct"


def test_generate_with_a_current_id(capsys):
    rc = main(["predict", "hf:meta-llama/Llama-3.1-8B", "--mode", "generate", "--device",
               "h100-sxm", "--input-len", "512", "--output-len", "128", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["model"] == "hf:meta-llama/Llama-3.1-8B"
    assert out["time_ms"] > out["ttft_ms"] > 0 and out["fits"] is True
    # 8.03 B weights in 16 bits are ≈ 15,300 MiB of the memory needed
    assert out["memory_breakdown_mb"]["weights"] == pytest.approx(8.03e9 * 2 / 2**20, rel=0.01)


@pytest.mark.parametrize("spec,total_b,active_b,width", [("hf:Qwen/Qwen3-30B-A3B", 30.5, 3.3, 768),
                                                         ("hf:Qwen/Qwen3-235B-A22B", 235.1, 22.2, 1536)])
def test_a_moe_model_has_its_experts_width_and_active_parameters(spec, total_b, active_b, width):
    """A Qwen-MoE config's intermediate_size is a dense layer's (unused here); its experts are
    moe_intermediate_size wide — what prefill prices an expert GEMM at (it read 6,144, 8× too
    wide for Qwen3-30B-A3B). Active parameters per token: dense + experts × k / E."""
    a = llm_arch(spec)
    assert a.intermediate == width and a.experts == 128 and a.experts_per_token == 8
    assert a.params / 1e9 == pytest.approx(total_b, rel=0.02)
    active = (a.dense_params + a.expert_params * a.experts_per_token / a.experts) / 1e9
    assert active == pytest.approx(active_b, rel=0.03)
