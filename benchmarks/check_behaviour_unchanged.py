"""Same requests, same answers: predict a fixed set of requests and compare with a reference.

    # answers of the code in this checkout, in EMPTY caches, written to a file
    .venv/bin/python benchmarks/check_behaviour_unchanged.py --out /tmp/after.json
    # compare two answer files (exit 1 on a difference not listed as expected)
    .venv/bin/python benchmarks/check_behaviour_unchanged.py --compare reports/behaviour/before.json /tmp/after.json
    # both at once: run, then compare with the recorded reference
    .venv/bin/python benchmarks/check_behaviour_unchanged.py --against reports/behaviour/before.json

The reference ``reports/behaviour/before.json`` was produced by this script on commit 700913d
(before the redesign of issue #12) with ``PYTHONPATH`` pointing at a worktree of that commit.
50 predictions (timm CNNs and ViTs, torchvision, ``hf:`` transformers, an ONNX file; inference
and training; 12 devices; shipped, user-chosen and fallback predictors) plus the decisions
(MIG, fit, cost, rank) and a few refused requests, each through the public Python API. Values
are compared exactly (JSON floats), notes included. ``EXPECTED_CHANGES`` lists the requests
whose answer is meant to change, and why.

Issue #33 (one request for every mode) added the LLM-generation requests of ``CLI_REQUESTS``
(``predict`` / ``fit`` / ``cost --mode generate`` and their refusals, through the command line
with ``--json``, so that the same arguments run before and after the API changed) and
``UI_REQUESTS`` (the web page's handler). ``reports/behaviour/before_issue33.json`` holds all
90 answers of commit 8e7884e (the one before that change, ``PYTHONPATH`` at a worktree of it),
``after_issue33.json`` those with the change (the same command on a worktree with it)::

    .venv/bin/python benchmarks/check_behaviour_unchanged.py --against reports/behaviour/before_issue33.json

A request missing from the reference file is reported as new, not as a difference.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

IMG = "3,224,224"

# (id, model, keywords of perfcast.predict)
PREDICTIONS: list[tuple[str, str, dict]] = [
    # timm CNNs on the devices with learned models
    ("resnet18-rtx4090-infer-amp-b1", "timm:resnet18", dict(device="rtx4090", precision="amp")),
    ("resnet50-rtx4090-infer-amp-b256", "timm:resnet50",
     dict(device="rtx4090", batch_size=256, precision="amp")),
    ("resnet50-rtx4090-infer-amp-b8-dippm", "timm:resnet50",
     dict(device="rtx4090", batch_size=8, precision="amp", predictor="dippm")),
    ("mobilenetv3-rtx3090-infer-amp-b32", "timm:mobilenetv3_large_100",
     dict(device="rtx3090", batch_size=32, precision="amp")),
    ("efficientnet_b0-rtx3090-train-auto-b64", "timm:efficientnet_b0",
     dict(device="rtx3090", batch_size=64, mode="train")),
    ("resnet50-rtx3090-train-amp-b32-trappm", "timm:resnet50",
     dict(device="rtx3090", batch_size=32, mode="train", precision="amp", predictor="trappm")),
    ("convnext_tiny-rtx3090-train-amp-b16-dippm", "timm:convnext_tiny",
     dict(device="rtx3090", batch_size=16, mode="train", precision="amp", predictor="dippm")),
    ("resnet50-a100-train-fp32-b32", "timm:resnet50",
     dict(device="a100-40gb", batch_size=32, mode="train")),
    ("resnet50-a100-train-fp32-b256", "timm:resnet50",
     dict(device="a100-40gb", batch_size=256, mode="train")),
    ("resnet50-a100-train-fp32-b32-trappm", "timm:resnet50",
     dict(device="a100-40gb", batch_size=32, mode="train", predictor="trappm")),
    ("convnext_tiny-a100-train-adam-b16", "timm:convnext_tiny",
     dict(device="a100-40gb", batch_size=16, mode="train", optimizer="adam")),
    ("resnet18-a100-infer-b64", "timm:resnet18", dict(device="a100-40gb", batch_size=64)),
    ("efficientnet_b0-i9-infer-b1", "timm:efficientnet_b0", dict(device="i9-10940x")),
    ("efficientnet_b0-i9-infer-b1-nnlqp", "timm:efficientnet_b0",
     dict(device="i9-10940x", predictor="nnlqp")),
    ("regnety_008-i7-infer-b1", "timm:regnety_008", dict(device="i7-12700h")),
    ("regnety_008-i7-infer-b1-mlp", "timm:regnety_008", dict(device="i7-12700h", predictor="mlp")),
    ("resnet50-cpu-infer-b1", "timm:resnet50", dict(device="cpu")),
    ("mobilenetv3-cpu-infer-b4", "timm:mobilenetv3_large_100", dict(device="cpu", batch_size=4)),
    ("resnet18-cpu-train-b8", "timm:resnet18", dict(device="cpu", batch_size=8, mode="train")),
    ("resnet18-cpu-infer-160px-b2", "timm:resnet18",
     dict(device="cpu", batch_size=2, input_size="3,160,160")),
    ("resnet50-h100-infer-fp32-b32", "timm:resnet50", dict(device="h100-sxm", batch_size=32)),
    ("resnet50-h100-train-bf16-b64", "timm:resnet50",
     dict(device="h100-sxm", batch_size=64, mode="train", precision="bf16")),
    ("mobilenetv3-l4-infer-fp16-b16", "timm:mobilenetv3_large_100",
     dict(device="l4", batch_size=16, precision="fp16")),
    ("resnet50-rtx4090-roofline-b64", "timm:resnet50",
     dict(device="rtx4090", batch_size=64, precision="amp", predictor="roofline")),
    ("resnet50-v100-train-amp-b32", "timm:resnet50",
     dict(device="v100-16gb", batch_size=32, mode="train", precision="amp")),
    # ViTs
    ("vit_tiny-rtx4090-infer-amp-b32", "timm:vit_tiny_patch16_224",
     dict(device="rtx4090", batch_size=32, precision="amp")),
    ("vit_small-cpu-infer-b2", "timm:vit_small_patch16_224", dict(device="cpu", batch_size=2)),
    ("vit_small-rtx3090-train-amp-b32", "timm:vit_small_patch16_224",
     dict(device="rtx3090", batch_size=32, mode="train", precision="amp")),
    ("deit_tiny-a100-train-fp32-b64", "timm:deit_tiny_patch16_224",
     dict(device="a100-40gb", batch_size=64, mode="train")),
    ("swin_tiny-rtx4090-infer-amp-b8", "timm:swin_tiny_patch4_window7_224",
     dict(device="rtx4090", batch_size=8, precision="amp")),
    ("vit_tiny-h100-infer-320px", "timm:vit_tiny_patch16_224",
     dict(device="h100-sxm", input_size="3,320,320")),
    ("vit_tiny-a100-train-288px-b16", "timm:vit_tiny_patch16_224",
     dict(device="a100-40gb", batch_size=16, mode="train", input_size="3,288,288")),
    # torchvision (the shipped TITAN / 2080 Ti models learned from torchvision records)
    ("tv-resnet18-titan-rtx-infer-fp32-b12", "torchvision:resnet18",
     dict(device="titan-rtx", batch_size=12, precision="fp32")),
    ("tv-resnet50-titan-xp-train-fp16-b12", "torchvision:resnet50",
     dict(device="titan-xp", batch_size=12, mode="train", precision="fp16")),
    ("tv-mobilenet_v2-2080ti-infer-fp16-b12", "torchvision:mobilenet_v2",
     dict(device="rtx2080ti", batch_size=12, precision="fp16")),
    ("tv-densenet121-2080ti-train-fp32-b64", "torchvision:densenet121",
     dict(device="rtx2080ti", batch_size=64, mode="train", precision="fp32")),
    ("tv-resnet18-cpu-infer-b1", "torchvision:resnet18", dict(device="cpu")),
    # Hugging Face transformers
    ("bert-base-cpu-infer-seq128", "hf:bert-base-uncased", dict(device="cpu", seq_len=128)),
    ("bert-base-a100-train-seq128-b16", "hf:bert-base-uncased",
     dict(device="a100-40gb", batch_size=16, mode="train", seq_len=128)),
    ("gpt2-rtx4090-infer-amp-seq256-b4", "hf:gpt2",
     dict(device="rtx4090", batch_size=4, seq_len=256, precision="amp")),
    ("gpt2-h100-infer-fp16-seq512", "hf:gpt2", dict(device="h100-sxm", seq_len=512, precision="fp16")),
    ("distilbert-a100-train-adamw-b8", "hf:distilbert-base-uncased",
     dict(device="a100-40gb", batch_size=8, mode="train", optimizer="adamw")),
    ("t5-small-cpu-infer-seq64", "hf:t5-small", dict(device="cpu", seq_len=64)),
    ("llama2-7b-h100-infer-bf16-seq2048", "hf:meta-llama/Llama-2-7b-hf",
     dict(device="h100-sxm", seq_len=2048, precision="bf16")),
    # ONNX
    ("onnx-cpu-infer-b1", "ONNX", dict(device="cpu")),
    ("onnx-rtx4090-infer-amp-b16", "ONNX", dict(device="rtx4090", batch_size=16, precision="amp")),
    ("onnx-a100-infer-b4", "ONNX", dict(device="a100-40gb", batch_size=4)),
    ("onnx-i9-infer-b1-xgboost", "ONNX", dict(device="i9-10940x", predictor="xgboost")),
    ("onnx-cpu-train-b1", "ONNX", dict(device="cpu", mode="train", batch_size=1)),
    # defaults chosen by perfcast (batch, precision)
    ("resnet18-rtx3090-train-defaults", "timm:resnet18", dict(device="rtx3090", mode="train")),
    ("resnet18-a100-train-defaults", "timm:resnet18", dict(device="a100-40gb", mode="train")),
]

# (id, model, keywords) that must be refused; the error class and message are recorded
REFUSALS: list[tuple[str, str, dict]] = [
    ("refuse-negative-batch", "timm:resnet18", dict(device="cpu", batch_size=-1)),
    ("refuse-unknown-device", "timm:resnet18", dict(device="no-such-gpu")),
    ("refuse-unknown-precision", "timm:resnet18", dict(device="cpu", precision="fp8")),
    ("refuse-seq-len-on-image-model", "timm:resnet18", dict(device="cpu", seq_len=128)),
    ("refuse-two-dim-image-input", "timm:resnet18", dict(device="cpu", input_size="3,224")),
]

LLAMA = "hf:meta-llama/Llama-2-7b-hf"
_GEN = ["--mode", "generate", "--json"]
# (id, argv of the command line): LLM generation (issue #33 folded it into the Workload)
CLI_REQUESTS: list[tuple[str, list[str]]] = [
    ("cli-gen-llama2-h100-b16", ["predict", LLAMA, "--device", "h100-sxm", "--input-len", "512",
                                 "--output-len", "512", "--batch-size", "16", *_GEN]),
    ("cli-gen-llama2-a100-tp2-bf16", ["predict", LLAMA, "--device", "a100-80gb", "--input-len",
                                      "1024", "--output-len", "128", "--batch-size", "8",
                                      "--tensor-parallel", "2", "--precision", "bf16", *_GEN]),
    ("cli-gen-llama2-a100-int4", ["predict", LLAMA, "--device", "a100-40gb", "--input-len", "256",
                                  "--output-len", "256", "--precision", "int4", *_GEN]),
    ("cli-gen-llama2-llamacpp-tp2", ["predict", LLAMA, "--device", "rtx4090", "--input-len", "128",
                                     "--output-len", "64", "--batch-size", "32", "--framework",
                                     "llama.cpp", "--tensor-parallel", "2", *_GEN]),
    ("cli-gen-llama3-70b-trtllm-tp8", ["predict", "hf:meta-llama/Meta-Llama-3-70B", "--device",
                                       "h100-sxm", "--input-len", "2048", "--output-len", "256",
                                       "--batch-size", "4", "--framework", "trt-llm",
                                       "--tensor-parallel", "8", *_GEN]),
    ("cli-gen-mistral-mi300x-fp32", ["predict", "hf:mistralai/Mistral-7B-v0.1", "--device",
                                     "mi300x", "--input-len", "64", "--output-len", "64",
                                     "--precision", "fp32", *_GEN]),
    ("cli-fit-gen-batch", ["fit", LLAMA, "--device", "a100-40gb", "--input-len", "1024",
                           "--output-len", "1024", *_GEN]),
    ("cli-fit-gen-context", ["fit", LLAMA, "--device", "a100-40gb", "--batch-size", "32",
                             "--output-len", "256", *_GEN]),
    ("cli-cost-gen", ["cost", LLAMA, "--device", "a100-40gb", "--requests", "1000",
                      "--input-len", "512", "--output-len", "128", "--batch-size", "8",
                      "--region", "FRA", *_GEN]),
    ("cli-cost-gen-tp2", ["cost", LLAMA, "--device", "h100-sxm", "--requests", "500",
                          "--input-len", "512", "--output-len", "512", "--tensor-parallel", "2",
                          *_GEN]),
    ("cli-train-resnet18-a100", ["predict", "timm:resnet18", "--device", "a100-40gb", "--mode",
                                 "train", "--batch-size", "32", "--json"]),
    ("cli-infer-gpt2-rtx4090", ["predict", "hf:gpt2", "--device", "rtx4090", "--seq-len", "128",
                                "--precision", "amp", "--json"]),
    # refusals (exit code and the one-line message)
    ("cli-refuse-gen-tp3", ["predict", LLAMA, "--device", "h100-sxm", "--input-len", "16",
                            "--output-len", "16", "--tensor-parallel", "3", *_GEN]),
    ("cli-refuse-gen-output0", ["predict", LLAMA, "--device", "h100-sxm", "--input-len", "16",
                                "--output-len", "0", *_GEN]),
    ("cli-refuse-gen-no-output", ["predict", LLAMA, "--device", "h100-sxm", "--input-len", "16",
                                  *_GEN]),
    ("cli-refuse-gen-seq-len", ["predict", LLAMA, "--device", "h100-sxm", "--input-len", "16",
                                "--output-len", "16", "--seq-len", "8", *_GEN]),
    ("cli-refuse-gen-engine", ["predict", LLAMA, "--device", "h100-sxm", "--input-len", "16",
                               "--output-len", "16", "--framework", "vlm", *_GEN]),
    ("cli-refuse-gen-timm", ["predict", "timm:resnet18", "--device", "h100-sxm", "--input-len",
                             "16", "--output-len", "16", *_GEN]),
    ("cli-refuse-gen-encoder", ["predict", "hf:bert-base-uncased", "--device", "h100-sxm",
                                "--input-len", "16", "--output-len", "16", *_GEN]),
    ("cli-refuse-output-len-infer", ["predict", "timm:resnet18", "--device", "rtx4090",
                                     "--output-len", "5"]),
    ("cli-refuse-tp-infer", ["predict", "timm:resnet18", "--device", "rtx4090",
                             "--tensor-parallel", "2"]),
    ("cli-refuse-cost-gen-no-requests", ["cost", LLAMA, "--device", "a100-40gb",
                                         "--input-len", "16", "--output-len", "16", *_GEN]),
]
# (id, keywords of perfcast.faces.ui.Request): the web page's handler
UI_REQUESTS: list[tuple[str, dict]] = [
    ("ui-gen-llama2", dict(model=LLAMA, mode="generate", input_len=256, output_len=64,
                           batch_size=4, devices=["a100-40gb", "h100-sxm"], iterations=100)),
    ("ui-gen-refuse-timm", dict(model="resnet50", mode="generate", input_len=8, output_len=8,
                                devices=["a100-40gb"])),
    ("ui-gen-refuse-no-input", dict(model=LLAMA, mode="generate", devices=["a100-40gb"])),
    ("ui-refuse-input-len-infer", dict(model="resnet50", input_len=5, devices=["a100-40gb"])),
]

#: Issue #33 renamed keys of the generation answer; an answer listed with this reason must be
#: the reference's with the keys renamed and nothing else.
RENAMES = {"framework": "engine"}
ISSUE39_MESSAGE = ("issue #39: one validation for every surface — the request's one-line message "
                   "(a flag outside its modes, a required option)")
RENAMED_ONLY = ("issue #33: the serving engine is `engine` in the answer, as in the request "
                "(was `framework`); every value unchanged")


def _renamed(obj):
    if isinstance(obj, dict):
        return {RENAMES.get(k, k): _renamed(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_renamed(v) for v in obj]
    return obj


EXPECTED_CHANGES = {
    "vit_tiny-h100-infer-320px": "issue #12: the simulation's model builder dropped img_size "
                                 "('Input height (320) doesn't match model (224)'); "
                                 "memory_mb now answers",
    "vit_tiny-a100-train-288px-b16": "issue #12: same bug — the simulation failed at 288 px, so "
                                     "the A100 memory model that reads it was skipped; now it "
                                     "answers with the simulation",
    "refuse-seq-len-on-image-model": "issue #12: --seq-len on an image model was silently "
                                     "ignored; now refused",
    "refuse-two-dim-image-input": "issue #12: '3,224' was read as a 1-channel input and failed "
                                  "as a trace error; now refused as bad input",
    "refuse-unknown-device": "issue #13: the message now says a device spec file is accepted",
    **{rid: RENAMED_ONLY
       for rid in ("cli-fit-gen-batch", "cli-fit-gen-context", "cli-gen-llama2-a100-int4",
                   "cli-gen-llama2-a100-tp2-bf16", "cli-gen-llama2-h100-b16",
                   "cli-gen-llama2-llamacpp-tp2", "cli-gen-llama3-70b-trtllm-tp8",
                   "cli-gen-mistral-mi300x-fp32", "ui-gen-llama2")},
    "cli-refuse-gen-engine": "issue #33: the option is the engine (--engine, alias --framework)",
    **{rid: ISSUE39_MESSAGE for rid in ("cli-refuse-gen-seq-len", "cli-refuse-output-len-infer",
                                        "cli-refuse-cost-gen-no-requests",
                                        "ui-gen-refuse-no-input", "ui-refuse-input-len-infer")},
    "cli-cost-gen": "issue #39: the generation cost says what PUE 1.0 counts, as every cost does",
    "cli-cost-gen-tp2": "issue #39: the generation cost says what PUE 1.0 counts, as every cost "
                        "does",
    **{rid: "issue #39: fit --mode generate answers with the FitResult of every mode (the "
            "same max_batch_size / max_input_len and prediction, more fields)"
       for rid in ("cli-fit-gen-batch", "cli-fit-gen-context")},
    "rank-resnet18-3dev-b64": "issue #39: the RTX 4090's time differs by 1.1e-7 relative (one "
                              "float32 rounding in the dippm GNN's batch of grid records)",
    "cli-refuse-tp-infer": "issue #33: --tensor-parallel now applies to --mode train too",
    "resnet50-h100-train-bf16-b64": "issue #41: bf16 training is bf16 autocast with fp32 master "
                                    "weights (the memory of fp32 weights, gradients and state; "
                                    "a note says which bf16), bf16-pure the old pure answer",
}


def _onnx_file(folder: Path) -> str:
    """A small conv net as an ONNX file, built from ``onnx.helper`` (same bytes every run)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name, shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    inits = [init("w1", (16, 3, 3, 3)), init("b1", (16,)), init("w2", (32, 16, 3, 3)),
             init("b2", (32,)), init("fc_w", (10, 32)), init("fc_b", (10,))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="perfcast-behaviour-check")
    path = folder / "convnet.onnx"
    onnx.save(model, str(path))
    return str(path)


def _clean(obj, onnx_path: str):
    """JSON-able copy with the temporary ONNX path replaced by ``ONNX``."""
    if isinstance(obj, dict):
        return {k: _clean(v, onnx_path) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v, onnx_path) for v in obj]
    if isinstance(obj, str):
        return obj.replace(onnx_path, "ONNX")
    return obj


def run_all(only: list[str] | None = None) -> dict:
    import perfcast
    from perfcast.errors import PerfcastError

    folder = Path(tempfile.mkdtemp(prefix="perfcast-behaviour-"))
    onnx_path = _onnx_file(folder)
    results: dict[str, dict] = {}

    def record(rid: str, fn) -> None:
        if only and rid not in only:
            return
        t = time.perf_counter()
        try:
            value = {"ok": fn()}
        except PerfcastError as exc:
            value = {"error": type(exc).__name__, "message": str(exc)}
        results[rid] = _clean(value, onnx_path)
        print(f"{time.perf_counter() - t:6.1f} s  {rid}", file=sys.stderr, flush=True)

    for rid, model, kw in PREDICTIONS + REFUSALS:
        spec = onnx_path if model == "ONNX" else model
        record(rid, lambda spec=spec, kw=kw: perfcast.predict(spec, **kw).to_dict())
    record("mig-densenet121-a100-b32", lambda: perfcast.recommend_mig(
        "timm:densenet121", device="a100-40gb", batch_size=32).to_dict())
    record("mig-resnet50-a100-b64-slo", lambda: perfcast.recommend_mig(
        "timm:resnet50", device="a100-40gb", batch_size=64, latency_slo_ms=50).to_dict())
    record("fit-resnet18-a100-infer-1g", lambda: perfcast.max_batch_size(
        "timm:resnet18", device="a100-40gb", mode="infer", mig_profile="1g.5gb").to_dict())
    record("fit-resnet50-a100-train", lambda: perfcast.max_batch_size(
        "timm:resnet50", device="a100-40gb", mode="train").to_dict())
    record("cost-resnet18-a100-train-10ep", lambda: perfcast.estimate_cost(
        "timm:resnet18", device="a100-40gb", mode="train", batch_size=64, epochs=10,
        dataset_size=1_281_167, region="FRA").to_dict())
    record("cost-given-time", lambda: perfcast.estimate_cost(
        device="a100-40gb", time_ms=350, iterations=200_000, price_per_hour=2.934).to_dict())
    record("rank-resnet18-3dev-b64", lambda: perfcast.rank(
        "timm:resnet18", devices="rtx3090,rtx4090,a100-40gb", batch_size=64).to_dict())
    record("rank-resnet50-all-train-b64", lambda: perfcast.rank(
        "timm:resnet50", devices="all", batch_size=64, mode="train").to_dict())
    for rid, argv in CLI_REQUESTS:
        if not only or rid in only:
            t = time.perf_counter()
            results[rid] = _clean(_run_cli(argv), onnx_path)
            print(f"{time.perf_counter() - t:6.1f} s  {rid}", file=sys.stderr, flush=True)
    for rid, kw in UI_REQUESTS:
        record(rid, lambda kw=kw: _run_ui(kw))
    return results


def _run_cli(argv: list[str]) -> dict:
    """``perfcast ARGV`` in this process: exit code, the JSON printed (or the text) and the
    first line of stderr."""
    import contextlib
    import io

    from perfcast.faces.cli import main

    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        rc = main(list(argv))
    text = so.getvalue()
    try:
        printed = json.loads(text) if text.strip() else None
    except ValueError:
        printed = text
    err = [ln for ln in se.getvalue().splitlines() if ln.strip()]
    return {"rc": rc, "out": printed, "err": err[0] if rc else None}


def _run_ui(kw: dict) -> dict:
    """The web page's handler: its status line and the predictions it shows."""
    import re

    from perfcast.faces.ui import Request, run_request

    r = run_request(Request(**kw))
    status = re.sub(r'data-serial="\d+"', 'data-serial="N"', r.status)
    return {"status": status, "predictions": r.predictions}


def _crossdevice_change(a, b) -> str | None:
    """Issue #13: a GPU without its own labels is answered by ``crossdevice`` instead of the
    roofline — its time and what follows from it (throughput, cost, ranking, SLO checks)
    change. Recognised by ``crossdevice`` appearing in the answer where it did not before."""
    import json as _json

    if "crossdevice" in _json.dumps(b) and "crossdevice" not in _json.dumps(a):
        return "issue #13: crossdevice answers time on GPUs without their own labels"
    return None


#: Issue #39 (one request, one answer): every answer gains the Estimate's common keys, and the
#: shipped models moved to perfcast/shipped (the rebuild command in ``trained_on`` says so). An
#: answer differing from the reference by these only is the same answer.
ISSUE39_KEYS = ("kind", "gpus", "throughput_per_s", "throughput_unit")


def _issue39(obj, top: bool = True):
    """``obj`` as the reference wrote it: without the Estimate's added keys (at the top of an
    answer) and with the shipped models' rebuild commands at their new path."""
    if isinstance(obj, dict):
        estimate = "throughput_unit" in obj  # an Estimate's JSON (a prediction, nested or not)
        return {k: _issue39(v, False) for k, v in obj.items()
                if not (estimate and k in ISSUE39_KEYS)}
    if isinstance(obj, list):
        return [_issue39(v, False) for v in obj]
    if isinstance(obj, str) and "--out perfcast/shipped" in obj:
        old = "perfcast/energy" if "--recipe power" in obj else "perfcast/training/shipped"
        return obj.replace("--out perfcast/shipped", f"--out {old}")
    return obj


def compare(before: dict, after: dict) -> int:
    """Print differences; return the number of unexpected ones. The after answers are read
    through :func:`_issue39` first when the reference predates it."""
    if not any("throughput_per_s" in json.dumps(v) for v in before.values()):
        after = {rid: _issue39_answer(b) for rid, b in after.items()}
    bad = 0
    new = sorted(set(after) - set(before))
    for rid in new:
        print(f"new: {rid} (not in the reference)")
    for rid in sorted(set(before) | set(after)):
        a, b = before.get(rid), after.get(rid)
        if a == b or rid in new:
            continue
        why = EXPECTED_CHANGES.get(rid) or _crossdevice_change(a, b)
        if why == RENAMED_ONLY and _renamed(a) != b:
            why = None  # more than the renamed keys changed
        tag = "expected" if why else "CHANGED"
        bad += why is None
        print(f"{tag}: {rid}" + (f" ({why})" if why else ""))
        if isinstance(a, dict) and isinstance(b, dict):
            for part in ("ok", "error", "message"):
                x, y = a.get(part), b.get(part)
                if isinstance(x, dict) and isinstance(y, dict):
                    for k in sorted(set(x) | set(y)):
                        if x.get(k) != y.get(k):
                            print(f"    {k}: {x.get(k)!r}\n{'':>{len(k) + 6}}→ {y.get(k)!r}")
                elif x != y:
                    print(f"    {part}: {x!r}\n{'':>{len(part) + 6}}→ {y!r}")
        else:
            print(f"    {a!r} → {b!r}")
    both = set(before) | (set(after) - set(new))
    same = sum(before.get(r) == after.get(r) for r in both)
    print(f"{same} identical, {len(both) - same} different ({bad} unexpected) of {len(both)} "
          f"requests" + (f"; {len(new)} new" if new else ""))
    return bad


def _issue39_answer(b):
    """One recorded answer (``{"ok": …}`` / ``{"error": …}``) through :func:`_issue39`."""
    if not isinstance(b, dict):
        return b
    return {k: _issue39(v) if isinstance(v, (dict, list, str)) else v for k, v in b.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write this checkout's answers here (JSON)")
    ap.add_argument("--against", help="run, then compare with this reference file")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"),
                    help="compare two answer files without running")
    ap.add_argument("--only", nargs="*", help="run only these request ids")
    ap.add_argument("--keep-cache", action="store_true",
                    help="use the user's caches instead of empty temporary ones")
    args = ap.parse_args()
    if args.compare:
        before, after = (json.loads(Path(p).read_text()) for p in args.compare)
        return 1 if compare(before, after) else 0
    if not args.keep_cache:
        tmp = Path(tempfile.mkdtemp(prefix="perfcast-behaviour-cache-"))
        os.environ["PERFCAST_CACHE_DIR"] = str(tmp / "graphs")
        os.environ["PERFCAST_GRAPH_STORE"] = str(tmp / "labeled")
    t = time.perf_counter()
    results = run_all(args.only)
    print(f"{len(results)} requests in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    if args.against:
        before = json.loads(Path(args.against).read_text())
        if args.only:
            before = {k: v for k, v in before.items() if k in args.only}
        return 1 if compare(before, results) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
