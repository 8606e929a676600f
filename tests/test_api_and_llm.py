"""Python API and the 7B-LLM memory budget."""

import json
import os
import resource
import subprocess
import sys

import pytest
import torch
from torch import nn

import perfcast
from perfcast.errors import PerfcastError


def test_load_graph_from_spec_and_module():
    g = perfcast.load_graph("torchvision:resnet18", batch_size=2)
    assert g.meta.batch_size == 2 and g.op_counts()["conv2d"] == 20
    with torch.device("meta"):
        m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    h = perfcast.load_graph(m, input_size=(3, 8, 8), batch_size=3, mode="train")
    assert h.meta.batch_size == 3 and h.phase_counts()["backward"] > 0
    with pytest.raises(PerfcastError):
        perfcast.load_graph(m)
    with pytest.raises(PerfcastError):
        perfcast.load_graph(42)


@pytest.mark.slow  # a 7B model's graph in a cold process
def test_llama2_7b_graph_without_network_within_memory_budget():
    """`perfcast inspect hf:meta-llama/Llama-2-7b-hf --seq-len 2048 --json`: no weights, < 4 GB."""
    r = subprocess.run([sys.executable, "-m", "perfcast", "inspect", "hf:meta-llama/Llama-2-7b-hf",
                        "--seq-len", "2048", "--json", "--no-cache"], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    d = json.loads(r.stdout)
    assert d["params"] == pytest.approx(6.74e9, rel=0.01)
    assert d["op_counts"]["sdpa"] == 32
    assert peak_mb < 4096  # max RSS over this and earlier child processes


def test_predict_answers_every_mode_as_the_command_does(capsys):
    """Issue #33: ``perfcast.predict`` takes ``--mode generate`` like the command (one
    Workload), and the decisions that cover one device's step say where generation is."""
    import json

    import perfcast
    from perfcast.faces.cli import main

    kw = dict(device="h100-sxm", mode="generate", input_len=256, output_len=32, batch_size=4,
              tensor_parallel=2, engine="vllm")
    p = perfcast.predict("hf:meta-llama/Llama-2-7b-hf", **kw)
    assert main(["predict", "hf:meta-llama/Llama-2-7b-hf", "--device", "h100-sxm", "--mode",
                 "generate", "--input-len", "256", "--output-len", "32", "--batch-size", "4",
                 "--tensor-parallel", "2", "--engine", "vllm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(p.to_dict()))
    assert p.engine == "vllm" and p.tensor_parallel == 2 and p.precision == "fp16"
    with pytest.raises(PerfcastError, match="does not apply to --mode generate"):
        perfcast.predict("hf:meta-llama/Llama-2-7b-hf", predictor="xgboost", **kw)
    with pytest.raises(PerfcastError, match="--mode generate needs --output-len"):
        perfcast.predict("hf:meta-llama/Llama-2-7b-hf", device="h100-sxm", mode="generate",
                         input_len=8)
    # every decision takes every mode, with the same request (rank --mode generate too)
    assert main(["rank", "hf:gpt2", "--mode", "generate"]) == 2
    assert "--mode generate needs --input-len" in capsys.readouterr().err
