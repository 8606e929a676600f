"""One meaning per option (issue 38, item 5): ``--batch-size`` is concurrent requests in every
engine, llama.cpp included; llama.cpp's logical and physical batch are ``--n-batch`` /
``--n-ubatch`` (defaults 2,048 / 512 as llama-bench), validated in one place
(:meth:`perfcast.workload.Workload._validate_llama_batches`) and the same through the CLI, the
Python API and HTTP; LLM-Inference-Bench's llama.cpp "Batch Size" is read into ``n_batch``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfcast.faces.cli import main

LLAMA3 = "hf:meta-llama/Meta-Llama-3-8B"
#: the issue's request: one Llama-3-8B Q4_K_M request of 1,024 prompt tokens on an RTX 4090
ONE = ["predict", LLAMA3, "--mode", "generate", "--engine", "llama.cpp", "--precision", "int4",
       "--device", "rtx4090", "--input-len", "1024", "--output-len", "1"]
KW = dict(mode="generate", engine="llama.cpp", precision="int4", device="rtx4090",
          input_len=1024, output_len=1)


def _json(capsys, *argv) -> dict:
    capsys.readouterr()
    rc = main([*argv, "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def test_one_request_prices_the_prompt_in_ubatches(capsys):
    """The issue's acceptance: --batch-size 1 is one request, its 1,024-token prompt in two
    passes of min(n_batch, n_ubatch) = 512 tokens — TTFT below 0.5 s (it was 1,024 passes of
    one token, 10 s, when --batch-size was read as n_batch) — and a note gives both."""
    d = _json(capsys, *ONE, "--batch-size", "1")
    assert d["batch_size"] == 1 and (d["n_batch"], d["n_ubatch"]) == (2048, 512)
    assert d["prefill"]["passes"] == 2 and d["prefill"]["tokens_per_pass"] == 512
    assert (d["prefill"]["n_batch"], d["prefill"]["n_ubatch"]) == (2048, 512)
    assert 0 < d["ttft_ms"] < 500
    assert any("n_batch 2,048 / n_ubatch 512" in n for n in d["notes"])
    # without --batch-size: the same single request
    assert _json(capsys, *ONE)["ttft_ms"] == pytest.approx(d["ttft_ms"])


def test_a_small_n_batch_is_a_slower_prompt(capsys):
    """--n-batch 64 (n_ubatch clamped to it, as llama.cpp does): 16 passes that each stream the
    weights — slower than the default's two."""
    base = _json(capsys, *ONE)
    small = _json(capsys, *ONE, "--n-batch", "64")
    assert (small["n_batch"], small["n_ubatch"]) == (64, 64)
    assert small["prefill"]["passes"] == 16 and small["prefill"]["tokens_per_pass"] == 64
    assert small["ttft_ms"] > base["ttft_ms"]
    # a smaller physical batch alone does the same
    ub = _json(capsys, *ONE, "--n-ubatch", "128")
    assert (ub["n_batch"], ub["n_ubatch"]) == (2048, 128) and ub["prefill"]["passes"] == 8
    assert ub["ttft_ms"] > base["ttft_ms"]


def test_batch_size_is_concurrent_sequences_on_llama_cpp(capsys):
    """--batch-size 4 on llama.cpp serves 4 sequences (llama-server -np 4): 4 × 1,024 prompt
    tokens in passes of 512, 4 sequences' KV cache, each decode step 4 tokens — the learned
    one-sequence decode scaled by the arithmetic bound's ratio, said in a note."""
    one = _json(capsys, *ONE[:-2], "--output-len", "64", "--batch-size", "1")
    four = _json(capsys, *ONE[:-2], "--output-len", "64", "--batch-size", "4")
    assert four["batch_size"] == 4 and four["n_batch"] == 2048
    assert four["prefill"]["passes"] == 8 and four["prefill"]["tokens_per_pass"] == 512
    assert four["ttft_ms"] > one["ttft_ms"]
    assert four["memory_breakdown_mb"]["kv_cache"] == pytest.approx(
        4 * one["memory_breakdown_mb"]["kv_cache"], rel=0.01)
    # one decode step of 4 sequences: slower than one sequence's, faster than 4 of them
    assert one["tpot_ms"] < four["tpot_ms"] < 4 * one["tpot_ms"]
    assert four["output_tokens_per_s"] > one["output_tokens_per_s"]
    assert four["throughput_tokens_per_s"] == pytest.approx(
        4 * (1024 + 64) / four["time_ms"] * 1e3)
    assert any("one sequence only" in n and "ratio of their arithmetic bounds" in n
               for n in four["notes"])
    assert not any("one sequence only" in n for n in one["notes"])


@pytest.mark.parametrize("extra,needle", [
    (["--n-batch", "512"], "--engine vllm takes --batch-size"),  # not llama.cpp
    (["--engine", "trt-llm", "--n-ubatch", "128"], "--engine trt-llm takes --batch-size"),
    (["--engine", "llama.cpp", "--n-batch", "0"], "--n-batch must be a positive integer"),
    (["--engine", "llama.cpp", "--n-ubatch", "-1"], "--n-ubatch must be a positive integer"),
    (["--engine", "llama.cpp", "--n-batch", "64", "--n-ubatch", "128"],
     "--n-ubatch 128 is larger than --n-batch 64"),
    (["--engine", "llama.cpp", "--n-ubatch", "4096"], "larger than --n-batch 2,048 (the default)"),
])
def test_bad_llama_batches_are_one_line_errors(extra, needle, capsys):
    rc = main(["predict", LLAMA3, "--mode", "generate", "--device", "rtx4090", "--input-len",
               "64", "--output-len", "8", *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1, err


def test_llama_batches_outside_generate_are_refused(capsys):
    rc = main(["predict", "timm:resnet10t", "--device", "rtx4090", "--n-batch", "64"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--n-batch does not apply to --mode infer" in err
    assert len(err.splitlines()) == 1


def test_cli_api_and_http_give_the_same_llama_batches(capsys):
    """The same request through the command, perfcast.predict and POST /predict: the same JSON
    n_batch / n_ubatch and the same answer."""
    pytest.importorskip("fastapi")
    import perfcast
    from fastapi.testclient import TestClient

    from perfcast.faces.serve import create_app

    cli = _json(capsys, *ONE, "--batch-size", "2", "--n-batch", "256", "--n-ubatch", "128")
    api = perfcast.predict(LLAMA3, batch_size=2, n_batch=256, n_ubatch=128, **KW).to_dict()
    with TestClient(create_app(warm=False)) as c:
        r = c.post("/predict", json={"model": LLAMA3, "batch_size": 2, "n_batch": 256,
                                     "n_ubatch": 128, **KW})
        assert r.status_code == 200, r.text
        http = r.json()
        bad = c.post("/predict", json={"model": LLAMA3, "n_batch": 256,
                                       **{**KW, "engine": "vllm", "precision": "fp16"}})
    for d in (cli, api, http):
        assert (d["batch_size"], d["n_batch"], d["n_ubatch"]) == (2, 256, 128)
        assert d["prefill"]["passes"] == 16  # 2 × 1,024 tokens in passes of 128
    assert api["ttft_ms"] == pytest.approx(cli["ttft_ms"]) == pytest.approx(http["ttft_ms"])
    assert bad.status_code == 422 and "--engine vllm takes --batch-size" in bad.json()["error"]


def test_fit_and_plan_take_the_llama_batches(capsys):
    """fit --mode generate searches llama.cpp's concurrent sequences (it was 1 or 0); plan
    --mode generate offers llama.cpp's server slots and carries n_batch / n_ubatch."""
    f = _json(capsys, "fit", LLAMA3, "--mode", "generate", "--engine", "llama.cpp",
              "--precision", "int4", "--device", "rtx4090", "--input-len", "512",
              "--output-len", "128", "--n-ubatch", "256")
    assert f["max_batch_size"] > 1 and (f["n_batch"], f["n_ubatch"]) == (2048, 256)
    assert f["prediction"]["batch_size"] == f["max_batch_size"]
    p = _json(capsys, "plan", LLAMA3, "--mode", "generate", "--engine", "llama.cpp",
              "--precision", "int4", "--device", "rtx4090", "--rate", "1", "--input-len",
              "512", "--output-len", "128", "--tensor-parallel", "1", "--max-batch", "4",
              "--n-ubatch", "256")
    assert (p["n_batch"], p["n_ubatch"]) == (2048, 256)
    assert {r["max_batch"] for r in p["rows"]} == {4}


@pytest.mark.shared_data("llm-inference-bench.csv")
def test_llm_inference_bench_llama_cpp_batch_size_is_n_batch():
    """LLM-Inference-Bench's llama.cpp "Batch Size" is n_batch with one sequence: the records
    keep it in n_batch (batch_size and concurrent 1), and the learned model's features read it
    from there — what the shipped models were trained on."""
    import pandas as pd

    from perfcast.datasets.llm import load_llm_bench
    from perfcast.llm.model import features
    from perfcast.paths import public_data_dir

    d = load_llm_bench()
    lc = d[d["framework"] == "llama.cpp"]
    assert len(lc) > 100
    assert (lc["batch_size"] == 1).all() and (lc["concurrent"] == 1).all()
    raw = pd.read_csv(public_data_dir() / "llm-inference-bench.csv")
    raw.columns = [c.strip() for c in raw.columns]
    src = raw.loc[lc["source_row"].to_numpy(), "Batch Size"].to_numpy(float)
    assert np.array_equal(lc["n_batch"].to_numpy(float), src)
    assert (lc["n_ubatch"] == np.minimum(lc["n_batch"], 512)).all()
    others = d[d["framework"] != "llama.cpp"]
    assert others["n_batch"].isna().all()
    assert np.array_equal(others["batch_size"].to_numpy(float),
                          raw.loc[others["source_row"].to_numpy(), "Batch Size"]
                          .to_numpy(float))
    sample = lc.groupby("n_batch").head(1)
    X = features(sample, "latency_s")
    assert np.array_equal(X["batch_size"].to_numpy(), sample["n_batch"].to_numpy(float))
    assert (X["concurrent"] == 1).all()


def test_the_page_takes_the_engine_and_llama_batches():
    """perfcast ui: the engine and llama.cpp's n_batch / n_ubatch boxes reach the request; the
    same refusals as the command, one line in the status box."""
    from perfcast.faces.ui import Request, run_request

    base = dict(model=LLAMA3, mode="generate", devices=["rtx4090"], input_len=1024,
                output_len=1)
    r = run_request(Request(**base, engine="llama.cpp", n_batch=64))
    assert "pc-ok" in r.status and "n_batch 64, n_ubatch 64" in r.status, r.status
    assert (r.predictions[0]["n_batch"], r.predictions[0]["n_ubatch"]) == (64, 64)
    assert r.predictions[0]["prefill"]["passes"] == 16
    bad = run_request(Request(**base, engine="vllm", n_batch=64))
    assert "pc-error" in bad.status and "--engine vllm takes --batch-size" in bad.status
    infer = run_request(Request(model="resnet50", devices=["rtx4090"], n_ubatch=64))
    assert "pc-error" in infer.status and "--n-ubatch does not apply to --mode infer" in infer.status
