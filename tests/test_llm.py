"""Issue #14: LLM generation — KV-cache arithmetic against hand-computed values (MHA and GQA),
the bounds, the data loaders' definitions, the generation prediction and its bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfcast.faces.cli import main


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
    # throughput = sequences × (input + output) / latency, as the source computes it, on
    # every row of the file: B sequences for every engine but llama.cpp, whose rows are one
    # sequence (its "Batch Size" is the prompt chunk, n_batch)
    raw = pd.read_csv(public_data_dir() / "llm-inference-bench.csv")
    tl = raw["Throughput"] * raw["Latency"]
    io = raw["Input Output Length"]
    llama = (raw["Framework"] == "llama.cpp").to_numpy()
    assert np.allclose(tl[~llama], (raw["Batch Size"] * 2 * io)[~llama], rtol=1e-5)
    assert np.allclose(tl[llama], (2 * io)[llama], rtol=1e-5)
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
    # the prefill yields the first token, then 511 decode steps
    assert d["ttft_ms"] + d["tpot_ms"] * 511 == pytest.approx(d["time_ms"], rel=1e-6)
    mb = d["memory_breakdown_mb"]
    assert mb["kv_cache"] == pytest.approx(16 * 1024 * 524_288 / 2**20, rel=1e-3)  # 8 GiB
    assert 70 <= d["power_w"] <= 700  # within [idle, TDP] of the H100
    assert d["energy_j"] == pytest.approx(d["power_w"] * d["time_ms"] / 1e3)
    assert d["energy_per_token_j"] == pytest.approx(d["energy_j"] / (16 * 512))
    assert d["energy_per_1k_tokens_j"] == pytest.approx(1000 * d["energy_per_token_j"])
    assert d["energy_per_request_j"] == pytest.approx(d["energy_j"] / 16)
    # vLLM shows its gpu_memory_utilization reservation; the need is the sum of the parts
    assert d["memory_mb"] == pytest.approx(0.9 * 81_920)
    assert d["memory_needed_mb"] == pytest.approx(sum(mb.values()), abs=0.5)
    assert any("gpu_memory_utilization" in n for n in d["notes"])
    # the batch's FLOPs from the traced prefill and decode-step graphs
    assert "traced decode-step graph" in d["predictor"]["flops"]
    assert d["flops"] == pytest.approx(16 * (512 * 13.3e9 + 511 * 13.5e9), rel=0.05)


def test_generate_on_a_spec_file(tmp_path, capsys):
    assert main(["devices", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out) if r["key"] == "h100-sxm")
    row.update(key="spec-h100", name="H100 from a spec", mig_profiles=[])
    (tmp_path / "gpu.json").write_text(json.dumps(row))
    assert main([*GEN, "--device", str(tmp_path / "gpu.json")]) == 0, capsys.readouterr().err
    d = json.loads(capsys.readouterr().out)
    assert d["device"] == "spec-h100" and d["time_ms"] > 0
    assert any("not among the measured accelerators" in n for n in d["notes"])


@pytest.mark.parametrize("device,engine", [
    ("mi300x", "vllm"), pytest.param("rtx4090", "trt-llm", marks=pytest.mark.slow),
    ("a100-40gb", "llama.cpp")])
def test_more_work_never_serves_faster(device, engine):
    """A longer prompt, a longer output or more sequences (in every engine, llama.cpp's too:
    --batch-size is concurrent requests) never make a request faster, nor its time per output
    token with the prompt or the sequences: the learned decode steps through their monotone
    envelope
    (the learned model alone breaks this: reports/llm/consistency.md)."""
    import perfcast

    def p(**kw):
        kw = {"batch_size": 1, "input_len": 512, "output_len": 128, **kw}
        return perfcast.predict("hf:meta-llama/Llama-2-7b-hf", mode="generate", device=device,
                                engine=engine, **kw)

    def check(seq, name, keys):
        for a, b in zip(seq, seq[1:]):
            for k in keys:
                assert getattr(b, k) >= getattr(a, k) * (1 - 1e-9), (name, k)

    for batch in (1, 16):
        check([p(batch_size=batch, input_len=i) for i in (64, 128, 200, 256, 700, 1024, 2048)],
              "input", ("ttft_ms", "tpot_ms", "time_ms"))
        check([p(batch_size=batch, output_len=o) for o in (2, 16, 100, 128, 512, 1500)],
              "output", ("time_ms",))
    check([p(batch_size=b) for b in (1, 2, 3, 8, 16, 48, 64, 256)], "batch",
          ("ttft_ms", "tpot_ms", "time_ms"))


@pytest.mark.parametrize("engine", ["vllm", "llama.cpp"])
def test_a_better_gpu_never_serves_slower(engine, tmp_path):
    """An H200 (an H100 SXM with more memory and bandwidth) and a spec sheet twice an H100 in
    every number: no slower than the H100 in TTFT, TPOT and the whole request, at a small and a
    large batch; the planner's decode steps likewise. The H100, measured, is never capped."""
    import perfcast
    from perfcast.devices import get_device, unregister_device
    from perfcast.generation import decode_step_seconds
    from perfcast.workload import Workload

    ref = get_device("h100-sxm")
    numbers = ("peak_fp32_tflops", "peak_tf32_tflops", "peak_fp16_tflops", "peak_bf16_tflops",
               "memory_gb", "bandwidth_gbs", "sm_count", "fp32_cores_per_sm",
               "boost_clock_mhz", "l2_mb", "tdp_w")
    spec = {"key": "twice-h100", "name": "Twice an H100", "kind": "gpu", "vendor": "NVIDIA",
            "compute_capability": "9.0", **{n: 2 * getattr(ref, n) for n in numbers}}
    (tmp_path / "twice.json").write_text(json.dumps(spec))
    model = "hf:meta-llama/Llama-2-7b-hf"
    try:
        for batch in (1, 64):
            kw = dict(mode="generate", engine=engine, batch_size=batch, input_len=512,
                      output_len=128)
            base = perfcast.predict(model, device="h100-sxm", **kw)
            assert not any("capped" in n for n in base.notes)
            for better in ("h200", str(tmp_path / "twice.json")):
                p = perfcast.predict(model, device=better, **kw)
                assert p.ttft_ms <= base.ttft_ms * (1 + 1e-9), (better, batch)
                assert p.tpot_ms <= base.tpot_ms * (1 + 1e-9), (better, batch)
                assert p.time_ms <= base.time_ms * (1 + 1e-9), (better, batch)
        if engine == "vllm":
            req = Workload.of(model, mode="generate", engine=engine, input_len=512,
                              output_len=128)
            a = decode_step_seconds(req, get_device("h100-sxm"), [1, 8, 64])
            b = decode_step_seconds(req, get_device("h200"), [1, 8, 64])
            assert all(y <= x * (1 + 1e-9) for x, y in zip(a, b))
    finally:
        unregister_device("twice-h100")


def test_kv_cache_per_device_under_tensor_parallelism_by_hand():
    """Llama-3-70B (GQA, 8 KV heads): TP 8 holds one KV head per GPU; TP 16 cannot split 8
    heads further, so each is replicated (vLLM) — the per-device cache stays one head's."""
    from perfcast.generation import memory_per_device, resolve
    from perfcast.llm.arch import kv_heads_per_device, llm_arch
    from perfcast.workload import Workload

    a = llm_arch("hf:meta-llama/Meta-Llama-3-70B")
    assert (a.layers, a.kv_heads, a.head_dim) == (80, 8, 128)
    per_head = 2 * 80 * 128 * 2  # K and V × 80 layers × 128 dims × 2 bytes, per token
    for tp, heads in ((1, 8), (2, 4), (8, 1), (16, 1)):
        assert kv_heads_per_device(a, tp) == heads
        r = resolve(Workload.of("hf:meta-llama/Meta-Llama-3-70B", mode="generate",
                                input_len=1000, output_len=24, batch_size=4,
                                tensor_parallel=tp))
        kv = memory_per_device(a, r)["kv_cache"]
        assert kv == pytest.approx(4 * 1024 * heads * per_head / 2**20)  # 1,024 = 64 blocks
        assert memory_per_device(a, r)["weights"] == pytest.approx(
            a.params * 2 / tp / 2**20)


@pytest.mark.parametrize("extra,needle", [
    (["--input-len", "16", "--output-len", "0"], "--output-len must be a positive integer"),
    (["--input-len", "16", "--output-len", "16", "--framework", "llama.cpp",
      "--tensor-parallel", "33"], "more devices than layers"),
    (["--input-len", "4000", "--output-len", "200"], "at most 4,096 positions"),
    (["--input-len", "16", "--output-len", "16", "--tensor-parallel", "3"],
     "does not divide"),
    (["--input-len", "16", "--output-len", "16", "--framework", "vlm"],
     "did you mean 'vllm'"),
    (["--input-len", "16"], "needs --output-len"),
    (["--input-len", "16", "--output-len", "16", "--seq-len", "8"],
     "--seq-len does not apply to --mode generate"),
])
def test_generate_bad_input(extra, needle, capsys):
    rc = main(["predict", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--device",
               "h100-sxm", *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("model,tp,needle", [
    ("hf:meta-llama/Meta-Llama-3-70B", 3, "does not divide"),  # 64 heads
    ("hf:Qwen/Qwen2-7B", 7, "KV heads"),  # 28 heads divide by 7, its 4 KV heads do not
])
def test_generate_tensor_parallel_vs_heads(model, tp, needle, capsys):
    rc = main(["predict", model, "--mode", "generate", "--device", "h100-sxm", "--input-len",
               "16", "--output-len", "16", "--tensor-parallel", str(tp)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1, err
    # llama.cpp splits layers, not heads: the same device count is fine there
    assert main(["predict", model, "--mode", "generate", "--device", "h100-sxm", "--input-len",
                 "16", "--output-len", "16", "--tensor-parallel", str(tp), "--framework",
                 "llama.cpp", "--json"]) == 0


@pytest.mark.parametrize("model,needle", [("hf:bert-base-uncased", "is an encoder"),
                                           ("hf:t5-small", "encoder-decoder")])
def test_generate_refuses_models_that_do_not_generate(model, needle, capsys):
    rc = main(["predict", model, "--mode", "generate", "--device", "h100-sxm", "--input-len",
               "16", "--output-len", "16"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1, err


def test_generation_options_refused_outside_generate(capsys):
    rc = main(["predict", "timm:resnet18", "--device", "rtx4090", "--output-len", "5"])
    assert rc == 2 and "--output-len does not apply to --mode infer (it applies to --mode generate)" \
        in capsys.readouterr().err


def test_llm_model_round_trip(tmp_path):
    import pandas as pd

    from perfcast.predictors.llm import LLMGenerationPredictor, features

    rows = pd.DataFrame([{"model": "meta-llama/Llama-2-7b-hf", "device": d, "n_devices": 1,
                          "framework": "vllm", "precision": "fp16", "batch_size": b,
                          "input_len": 256, "output_len": 256}
                         for d in ("a100-40gb", "h100-sxm") for b in (1, 4, 16, 32)])
    X = features(rows)
    y = X["bound_s"].to_numpy() * np.linspace(1.5, 3.0, len(rows))
    m = LLMGenerationPredictor(target_mode="residual", n_estimators=20).fit(X, y)
    m.save(tmp_path / "m")
    m2 = LLMGenerationPredictor.load(tmp_path / "m")
    assert np.array_equal(m.predict(X), m2.predict(X))
    assert (m.predict(X) >= X["bound_s"].to_numpy()).all()


def test_fit_generate_by_hand(capsys):
    """Llama-2-7B, 1,024 + 1,024 tokens on an A100-40GB with vLLM: weights 12,852.5 MiB,
    1 GiB of KV cache per request (2,048 tokens × 512 KiB), the simulated prefill activations
    c + d·tokens of one prefill pass (vLLM's chunk: 2,048 tokens from two requests on), the
    1,765 MiB runtime — all within 0.9 × 40,960 MiB."""
    from perfcast.llm.graphs import graph_summary

    assert main(["fit", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--input-len",
                 "1024", "--output-len", "1024", "--device", "a100-40gb", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    weights = 6_738_415_616 * 2 / 2**20
    assert d["prediction"]["memory_breakdown_mb"]["weights"] == pytest.approx(weights, abs=0.1)
    s = graph_summary("meta-llama/Llama-2-7b-hf")
    room = 0.9 * 40_960 - weights - 1765.2 - s["act_c_mb"] - s["act_d_mb"] * 2048
    assert d["max_batch_size"] == int(room // 1024) == 21
    assert d["prediction"]["fits"] is True
    # a 70B model does not fit one 40 GB card at all
    assert main(["fit", "hf:meta-llama/Meta-Llama-3-70B", "--mode", "generate", "--input-len",
                 "1024", "--output-len", "1024", "--device", "a100-40gb", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_batch_size"] == 0


def test_fit_generate_largest_context(capsys):
    from perfcast.devices import get_device
    from perfcast.generation import memory_per_device, resolve
    from perfcast.llm.arch import llm_arch
    from perfcast.workload import Workload

    # one request: Llama-2-7B's 4,096 positions bind before memory does
    assert main(["fit", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--device",
                 "a100-40gb", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["max_input_len"], d["max_context_tokens"], d["limited_by"]) == \
        (4095, 4096, "max_positions")
    # 32 requests generating 256 tokens each: memory binds; one more prompt token would not fit
    assert main(["fit", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--device",
                 "a100-40gb", "--batch-size", "32", "--output-len", "256", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["limited_by"] == "memory" and 256 < d["max_input_len"] < 4096 - 256
    arch, cap = llm_arch("hf:meta-llama/Llama-2-7b-hf"), 0.9 * get_device("a100-40gb").memory_mb

    def need(i):
        r = resolve(Workload.of("hf:meta-llama/Llama-2-7b-hf", mode="generate", input_len=i,
                                output_len=256, batch_size=32))
        return sum(memory_per_device(arch, r).values())

    assert need(d["max_input_len"]) <= cap < need(d["max_input_len"] + 1)
    assert d["prediction"]["fits"] is True
    rc = main(["fit", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--device",
               "a100-40gb", "--batch-size", "2", "--input-len", "8", "--output-len", "8"])
    assert rc == 2 and "not both" in capsys.readouterr().err


def test_llama_cpp_layer_split_and_prompt_chunks():
    """llama.cpp: one device's rates whatever the device count (layers are split, not
    sharded); the prompt is fed in ⌈I / n_batch⌉ passes that each stream the weights."""
    from perfcast.devices import get_device
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.physics import generation_bound, request_work

    a, dev = llm_arch("hf:meta-llama/Llama-2-7b-hf"), get_device("h100-sxm")
    kw = dict(batch=1, input_len=128, output_len=128, engine="llama.cpp")
    one = generation_bound(a, dev, n_devices=1, prompt_chunk=64, **kw)
    four = generation_bound(a, dev, n_devices=4, prompt_chunk=64, **kw)
    assert one.total_s == pytest.approx(four.total_s)
    vllm4 = generation_bound(a, dev, n_devices=4, batch=1, input_len=128, output_len=128)
    assert vllm4.decode_s == pytest.approx(one.decode_s / 4, rel=0.01)  # TP shards
    w = request_work(a, dev, prompt_chunk=16, **kw)
    prefill = ~w.decode
    assert w.count[prefill].sum() == 8  # 128 prompt tokens in chunks of 16
    assert w.count[w.decode].sum() == pytest.approx(127)  # the prefill yields token 1
    chunked = generation_bound(a, dev, prompt_chunk=1, **kw)
    assert chunked.prefill_s == pytest.approx(128 * a.params * 2 / 3350e9, rel=0.02)


@pytest.mark.shared_data("vidur/network/a100_dgx-all_reduce.csv")
def test_all_reduce_profile_is_vidurs():
    import pandas as pd
    from scipy.optimize import least_squares

    from perfcast.llm.physics import ALL_REDUCE_ALPHA_S, ALL_REDUCE_BETA
    from perfcast.paths import public_data_dir

    d = pd.read_csv(public_data_dir() / "vidur/network/a100_dgx-all_reduce.csv")
    d = d[(d["rank"] == 0) & (d["devices_per_node"] == d["num_workers"])]
    for n, beta in ALL_REDUCE_BETA.items():
        g = d[d["num_workers"] == n]
        s, t = g["size"].to_numpy(float), g["time_stats.all_reduce.median"].to_numpy(float)
        fit = least_squares(lambda p: np.log(np.exp(p[0]) + s / np.exp(p[1])) - np.log(t),
                            [np.log(0.02), np.log(1e8)]).x
        assert np.exp(fit[1]) * 1e3 == pytest.approx(beta, rel=0.01)  # bytes/ms → bytes/s
        assert np.exp(fit[0]) / 1e3 == pytest.approx(ALL_REDUCE_ALPHA_S, rel=0.1)


def _synthetic_rows():
    import pandas as pd

    return pd.DataFrame([{"model": m, "device": d, "n_devices": n, "framework": f,
                          "precision": "fp16", "batch_size": b, "input_len": i,
                          "output_len": i}
                         for m in ("meta-llama/Llama-2-7b-hf", "mistralai/Mistral-7B-v0.1")
                         for d in ("a100-40gb", "h100-sxm") for f in ("vllm", "trt-llm")
                         for n in (1, 2) for b in (1, 16, 64) for i in (128, 512)])


def test_blend_is_physics_bounded_and_round_trips(tmp_path):
    from perfcast.llm.model import ENGINE_FLOORS, ENGINE_PARAMS, LLMGenerationPredictor, features

    rows = _synthetic_rows()
    X = features(rows)
    rng = np.random.default_rng(0)
    y = X["bound_s"].to_numpy() * (1.3 + 0.2 * X["n_devices"].to_numpy()) \
        * np.exp(rng.normal(0, 0.05, len(X)))
    m = LLMGenerationPredictor(n_estimators=30).fit(X, y)
    for theta in m.engines_.values():
        assert all(v >= ENGINE_FLOORS[k] - 1e-12 for k, v in zip(ENGINE_PARAMS, theta))
    p, parts = m.predict(X, parts=True)
    assert (p >= X["bound_s"].to_numpy() * (1 - 1e-9)).all()
    assert parts["prefill_s"] + parts["decode_s"] == pytest.approx(p)
    assert np.median(np.abs(p / y - 1)) < 0.1
    m.save(tmp_path / "m")
    m2 = LLMGenerationPredictor.load(tmp_path / "m")
    assert np.array_equal(p, m2.predict(X))
    assert json.loads((tmp_path / "m" / "config.json").read_text())["members"]
    assert not list(tmp_path.glob("m/*.pkl"))


def test_energy_is_power_times_time_within_idle_and_tdp():
    from perfcast.devices import get_device
    from perfcast.llm.energy import bounded_power, energy_j, power_bounds

    h100 = get_device("h100-sxm")
    assert power_bounds(h100)[:2] == (70.0, 700.0)
    assert bounded_power(h100, 10) == 70.0 and bounded_power(h100, 1e4) == 700.0
    assert bounded_power(h100, 300) == 300.0
    assert energy_j(300, 4, 2.0) == 2400.0


def test_cost_generate(capsys):
    import math

    args = ["cost", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--device",
            "h100-sxm", "--input-len", "512", "--output-len", "256", "--batch-size", "32",
            "--price-per-hour", "2.5", "--region", "Germany", "--json"]
    assert main([*args, "--requests", "1000"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert main(["predict", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--device",
                 "h100-sxm", "--input-len", "512", "--output-len", "256", "--batch-size", "32",
                 "--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    batches = math.ceil(1000 / 32)
    assert c["iterations"] == batches and c["mode"] == "generate"
    assert c["hours"] == pytest.approx(p["time_ms"] * batches / 3.6e6)
    assert c["usd"] == pytest.approx(c["hours"] * 2.5)
    assert c["energy_kwh"] == pytest.approx(p["energy_j"] * batches / 3.6e6)
    assert c["kg_co2e"] == pytest.approx(c["energy_kwh"] * c["carbon_g_per_kwh"] / 1000)
    assert c["sources"]["energy"].startswith("predicted")
    # two devices: twice the GPU-hours priced
    assert main([*args, "--requests", "1000", "--tensor-parallel", "2"]) == 0
    c2 = json.loads(capsys.readouterr().out)
    assert c2["usd"] == pytest.approx(c2["hours"] * 2.5 * 2)


@pytest.mark.parametrize("extra,needle", [
    (["--input-len", "16", "--output-len", "8"], "needs --requests"),
    (["--requests", "0", "--input-len", "16", "--output-len", "8"],
     "--requests must be ≥ 1"),
    (["--requests", "5", "--input-len", "16", "--output-len", "8", "--iterations", "3"],
     "not both"),
])
def test_cost_generate_bad_input(extra, needle, capsys):
    rc = main(["cost", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--device",
               "h100-sxm", *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("engine,precision,bits", [
    ("vllm", "int4", 8 * (0.5 + 2 / 128)),  # GPTQ / AWQ: ½ byte + an fp16 scale per 128
    ("llama.cpp", "int4", 4.90),  # llama.cpp's 4-bit GGUF: Q4_K_M, its file average
    ("llama.cpp", "q8_0", 8.51),  # a GGUF name, any case
])
def test_int4_memory_exact_and_time_flagged(engine, precision, bits, capsys):
    assert main(["predict", "hf:meta-llama/Llama-2-7b-hf", "--mode", "generate", "--device",
                 "rtx4090", "--input-len", "128", "--output-len", "128", "--framework",
                 engine, "--precision", precision, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["memory_breakdown_mb"]["weights"] == pytest.approx(
        6_738_415_616 * bits / 8 / 2**20, abs=0.1)
    # 256 tokens of 512 KiB (whole 16-token blocks under vLLM)
    assert d["memory_breakdown_mb"]["kv_cache"] == pytest.approx(256 * 524_288 / 2**20)
    assert any("EXTRAPOLATED" in n for n in d["notes"])
    assert any("not among the measured accelerators" in n for n in d["notes"])
    if engine == "llama.cpp":
        assert d["precision"] == precision.upper() if precision != "int4" else "Q4_K_M"


def test_activations_from_the_simulation_or_a_closed_form(tmp_path):
    from transformers import LlamaConfig

    from perfcast.llm.arch import llm_arch
    from perfcast.llm.graphs import activation_peak_mb, graph_summary

    a = llm_arch("hf:meta-llama/Llama-2-7b-hf")
    s = graph_summary(a.model_id)
    mb, src = activation_peak_mb(a, 1000)
    assert "simulation" in src and mb == pytest.approx(s["act_c_mb"] + 1000 * s["act_d_mb"])
    # the two traced lengths are reproduced exactly
    for t, f in zip(s["lengths"], s["flops"]):
        assert s["flops_alpha"] * t + s["flops_beta"] * t * t == pytest.approx(f)
    cfg = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, vocab_size=1000)
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(cfg.to_json_string())
    t = llm_arch(f"hf:{path}")
    mb, src = activation_peak_mb(t, 10)
    assert "closed form" in src and mb == pytest.approx((10 * 1024 * 2 + 10 * 1000 * 4) / 2**20)


def test_generate_imports_neither_torch_nor_transformers_once_cached(tmp_path, monkeypatch):
    """The cold path of a cached model: no torch, no transformers (the < 3 s goal). The
    summary is written where the child process looks for it (building it is the other tests'
    business), so one child process suffices."""
    import os
    import subprocess
    import sys

    from perfcast.llm.arch import _cache_file, _raw_config, llm_arch

    arch = llm_arch("hf:mistralai/Mistral-7B-v0.1")
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(tmp_path / "graphs"))
    path = _cache_file(*_raw_config("mistralai/Mistral-7B-v0.1"))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(arch.to_dict()))
    env = {**os.environ, "PERFCAST_CACHE_DIR": str(tmp_path / "graphs")}
    code = ("import sys, json\n"
            "import perfcast\n"
            "p = perfcast.predict('hf:mistralai/Mistral-7B-v0.1', device='a100-40gb',"
            " mode='generate', input_len=64, output_len=64, batch_size=4)\n"
            "print(json.dumps([p.time_ms > 0, 'torch' in sys.modules,"
            " 'transformers' in sys.modules]))")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1]) == [True, False, False]


@pytest.mark.slow
@pytest.mark.shared_data("llm-inference-bench.csv", "mlenergy-leaderboard-v2.csv")
def test_shipped_llm_models_are_rebuilt_byte_for_byte(tmp_path):
    """The shipped llm-latency / llm-power are what `perfcast train --recipe llm --out
    perfcast/shipped` writes from the public data — never edited by hand."""
    from perfcast.training.llm import LLM_MODELS, train_llm
    from perfcast.shipped import shipped_dir

    train_llm(tmp_path)
    for _, _, name in LLM_MODELS.values():
        for f in ("config.json", "model.safetensors"):
            assert (tmp_path / name / f).read_bytes() == (shipped_dir() / name / f).read_bytes()


def test_request_flops_from_the_traced_graphs():
    """A request's FLOPs: the prefill graph at I tokens + the decode-step graph's line summed
    over the cache lengths I … I+O−2 — the same as stepping through them one by one; and the
    traced decode step agrees with the closed form the bound uses."""
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.graphs import graph_summary, request_graph_flops

    a = llm_arch("hf:meta-llama/Llama-2-7b-hf")
    s = graph_summary(a.model_id)
    assert len(s["decode_lengths"]) >= 2 and s["decode_linearity_error"] < 1e-6
    f, src = request_graph_flops(a, 3, 512, 5)
    pre = s["flops_alpha"] * 512 + s["flops_beta"] * 512 ** 2
    steps = sum(s["decode_alpha"] + s["decode_beta"] * c for c in (512, 513, 514, 515))
    assert f == pytest.approx(3 * (pre + steps)) and "traced decode-step graph" in src
    # the bound's decode FLOPs match the traced decode-step graphs — also for Gemma-2, whose LM
    # head is its embedding matrix (589,824,000 parameters counted once, multiplied per token)
    for m in ("meta-llama/Llama-2-7b-hf", "google/gemma-2-2b-it"):
        a, s = llm_arch(f"hf:{m}"), graph_summary(m)
        for c, traced in zip(s["decode_lengths"], s["decode_flops"]):
            closed = a.flops_per_token() + a.attention_flops(1, c)
            assert closed == pytest.approx(traced, rel=0.005), (m, c)
    assert llm_arch("hf:google/gemma-2-2b-it").tied_head_params == 256_000 * 2304


def test_decode_step_graph_traced_over_a_kv_cache(tmp_path):
    """benchmarks/llm_graphs.py traces one decode step over a DynamicCache of c tokens: on a
    tiny GQA Llama its FLOPs are a line in c whose slope is the attention's 4·L·H·d per cache
    token (QKᵀ and AV) plus the softmax's few FLOPs per score."""
    import importlib.util
    from pathlib import Path

    from transformers import LlamaConfig

    spec = importlib.util.spec_from_file_location(
        "llm_graphs", Path(__file__).resolve().parents[1] / "benchmarks" / "llm_graphs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
                      max_position_embeddings=2048, architectures=["LlamaForCausalLM"])
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(cfg.to_json_string())
    row = mod.summarize_decode(str(path))
    assert row["decode_lengths"] == [128, 512, 1024]
    assert row["decode_linearity_error"] < 1e-9
    attention = 4 * 2 * 4 * 64  # 4 · layers · heads · head_dim
    assert attention <= row["decode_beta"] <= 1.05 * attention
