"""Issue #14: LLM generation — KV-cache arithmetic against hand-computed values (MHA and GQA),
the bounds, the data loaders' definitions, the generation prediction and its bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfcast.cli import main


def _arch(config, params=7_000_000_000, experts=0, emb=0):
    from perfcast.llm.arch import arch_from_config

    return arch_from_config(config, "test", params, experts, emb)


def test_kv_cache_mha_llama2_7b_by_hand():
    from transformers import LlamaConfig

    a = _arch(LlamaConfig())  # the defaults are Llama-2-7B: 32 layers, 32 heads of 128, MHA
    assert (a.layers, a.heads, a.kv_heads, a.head_dim) == (32, 32, 32, 128)
    # K and V × 32 layers × 32 heads × 128 dims × 2 bytes
    assert a.kv_bytes_per_token("fp16") == 2 * 32 * 32 * 128 * 2 == 524_288
    assert a.kv_cache_bytes(16, 1024, "fp16") == 16 * 1024 * 524_288  # 8 GiB
    # vLLM: whole blocks of 16 tokens — 1000 tokens take 63 blocks = 1008 tokens
    assert a.kv_cache_bytes(1, 1000, "fp16", block=16) == 1008 * 524_288
    assert a.kv_bytes_per_token("fp32") == 2 * 524_288
    assert a.kv_bytes_per_token("int4") == 524_288  # weight-only: the KV cache stays 16-bit


def test_kv_cache_gqa_llama3_70b_by_hand():
    from transformers import LlamaConfig

    cfg = LlamaConfig(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                      num_attention_heads=64, num_key_value_heads=8, vocab_size=128256,
                      max_position_embeddings=8192)
    a = _arch(cfg, params=70_553_706_496)
    assert (a.heads, a.kv_heads, a.head_dim) == (64, 8, 128)
    assert a.kv_bytes_per_token("bf16") == 2 * 80 * 8 * 128 * 2 == 327_680
    assert a.weight_bytes("fp16") == 2 * 70_553_706_496
    assert a.weight_bytes("int8") == pytest.approx(70_553_706_496 * (1 + 2 / 128))


def test_sliding_window_caps_the_cache():
    from transformers import MistralConfig

    a = _arch(MistralConfig(sliding_window=4096))  # Mistral-7B: every layer windowed
    assert a.kv_cache_bytes(1, 10_000) == a.kv_cache_bytes(1, 4096)
    assert a.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2


def test_moe_active_params():
    from transformers import MixtralConfig

    a = _arch(MixtralConfig(), params=46_702_792_704, experts=45_097_156_608)
    assert a.experts == 8 and a.experts_per_token == 2
    # one token reads 2 of 8 experts; many tokens touch nearly all
    assert a.active_params(1) == pytest.approx(a.dense_params + a.expert_params / 4)
    assert a.active_params(256) == pytest.approx(a.params, rel=1e-6)


def test_bound_is_physics():
    from perfcast.devices import get_device
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.physics import generation_bound

    a = llm_arch("hf:meta-llama/Llama-2-7b-hf")
    dev = get_device("a100-40gb")
    g = generation_bound(a, dev, batch=1, input_len=512, output_len=512)
    # each of 512 decode steps streams the fp16 weights at 1555 GB/s (+ the KV cache)
    floor = 512 * a.params * 2 / 1555e9
    assert floor < g.decode_s < 1.1 * floor
    assert g.waves == 1 and g.compute_bound_fraction == 0.0
    # 64 sequences of 4096 tokens: 128 GiB of KV cache — not beside 13 GB of weights in 40 GB
    big = generation_bound(a, dev, batch=64, input_len=2048, output_len=2048)
    assert big.waves > 1 and big.concurrent * big.waves >= 64
    two = generation_bound(a, dev, batch=1, input_len=512, output_len=512, n_devices=2)
    assert two.decode_s == pytest.approx(g.decode_s / 2, rel=0.01)


@pytest.mark.shared_data("llm-inference-bench.csv", "mlenergy-leaderboard-v2.csv")
def test_loaders_and_throughput_definition():
    import pandas as pd

    from perfcast.datasets.llm import load_llm_bench, load_mlenergy
    from perfcast.paths import public_data_dir

    d = load_llm_bench()
    rep = d.attrs["report"]
    assert rep.rows_in == rep.rows_out + rep.n_dropped and rep.rows_out > 3000
    assert set(d["device"]) == {"a100-40gb", "h100-sxm", "max1550", "mi250", "mi300x"}
    # throughput = sequences × (input + output) / latency, as the source computes it
    raw = pd.read_csv(public_data_dir() / "llm-inference-bench.csv")
    raw = raw[raw["Framework"] == "vLLM"].iloc[:50]
    tl = raw["Throughput"] * raw["Latency"]
    assert np.allclose(tl, raw["Batch Size"] * 2 * raw["Input Output Length"], rtol=1e-9)
    assert (d["latency_s"] > 0).all() and d["n_devices"].isin([1, 2, 4, 8]).all()
    e = load_mlenergy()
    assert (e["power_per_device_w"] <= 700).all() and (e["power_per_device_w"] > 50).all()


GEN = ["predict", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--input-len", "512",
       "--output-len", "512", "--batch-size", "16", "--framework", "vllm", "--precision",
       "fp16", "--json"]
KEYS = ("time_ms", "ttft_ms", "tpot_ms", "throughput_tokens_per_s", "memory_mb", "energy_j",
        "energy_per_token_j", "power_w")


def test_generate_answers_every_key(capsys):
    assert main([*GEN, "--device", "h100-sxm"]) == 0, capsys.readouterr().err
    d = json.loads(capsys.readouterr().out)
    for k in KEYS:
        assert d[k] is not None and d[k] > 0, k
    assert d["predictor"]["time_ms"].startswith("llm-xgboost")
    assert d["time_ms"] >= d["bound_ms"]  # never faster than physics
    assert d["throughput_tokens_per_s"] == pytest.approx(16 * 1024 / (d["time_ms"] / 1e3))
    assert d["ttft_ms"] + d["tpot_ms"] * 512 == pytest.approx(d["time_ms"], rel=1e-6)
    mb = d["memory_breakdown_mb"]
    assert mb["kv_cache"] == pytest.approx(16 * 1024 * 524_288 / 2**20, rel=1e-3)  # 8 GiB
    assert d["power_w"] <= 700  # ≤ the H100's TDP


def test_generate_on_a_spec_file(tmp_path, capsys):
    assert main(["devices", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out) if r["key"] == "h100-sxm")
    row.update(key="spec-h100", name="H100 from a spec", mig_profiles=[])
    (tmp_path / "gpu.json").write_text(json.dumps(row))
    assert main([*GEN, "--device", str(tmp_path / "gpu.json")]) == 0, capsys.readouterr().err
    d = json.loads(capsys.readouterr().out)
    assert d["device"] == "spec-h100" and d["time_ms"] > 0
    assert any("not among the measured accelerators" in n for n in d["notes"])


@pytest.mark.parametrize("extra,needle", [
    (["--input-len", "16", "--output-len", "0"], "--output-len must be a positive integer"),
    (["--input-len", "4000", "--output-len", "200"], "at most 4,096 positions"),
    (["--input-len", "16", "--output-len", "16", "--tensor-parallel", "3"],
     "does not divide"),
    (["--input-len", "16", "--output-len", "16", "--framework", "vlm"],
     "did you mean 'vllm'"),
    (["--input-len", "16"], "needs --output-len"),
    (["--input-len", "16", "--output-len", "16", "--seq-len", "8"], "do not apply"),
])
def test_generate_bad_input(extra, needle, capsys):
    rc = main(["predict", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--device",
               "h100-sxm", *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1, err


def test_generation_options_refused_outside_generate(capsys):
    rc = main(["predict", "timm:resnet18", "--device", "rtx4090", "--output-len", "5"])
    assert rc == 2 and "--mode generate only" in capsys.readouterr().err


def test_llm_model_round_trip(tmp_path):
    import pandas as pd

    from perfcast.predictors.llm import LLMGenerationPredictor, features

    rows = pd.DataFrame([{"model": "meta-llama/Llama-2-7b-hf", "device": d, "n_devices": 1,
                          "framework": "vllm", "precision": "fp16", "batch_size": b,
                          "input_len": 256, "output_len": 256}
                         for d in ("a100-40gb", "h100-sxm") for b in (1, 4, 16, 32)])
    X = features(rows)
    y = X["bound_s"].to_numpy() * np.linspace(1.5, 3.0, len(rows))
    m = LLMGenerationPredictor(n_estimators=20).fit(X, y)
    m.save(tmp_path / "m")
    m2 = LLMGenerationPredictor.load(tmp_path / "m")
    assert np.array_equal(m.predict(X), m2.predict(X))
    assert (m.predict(X) >= X["bound_s"].to_numpy()).all()


def test_fit_generate_by_hand(capsys):
    """Llama-2-7B, 1,024 + 1,024 tokens on an A100-40GB with vLLM: weights 12,852 MiB, 1 GiB of
    KV cache per request (2,048 tokens × 512 KiB), 0.9 × 38,147 MiB usable → 20 requests."""
    assert main(["fit", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--input-len",
                 "1024", "--output-len", "1024", "--device", "a100-40gb", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    weights = 6_738_415_616 * 2 / 2**20
    assert d["prediction"]["memory_breakdown_mb"]["weights"] == pytest.approx(weights, abs=0.1)
    assert d["max_batch_size"] == int((0.9 * 40e9 / 2**20 - weights) // 1024) == 20
    # a 70B model does not fit one 40 GB card at all
    assert main(["fit", "hf:meta-llama/Meta-Llama-3-70B", "--mode", "generate", "--input-len",
                 "1024", "--output-len", "1024", "--device", "a100-40gb", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_batch_size"] == 0
