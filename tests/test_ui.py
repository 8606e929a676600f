"""perfcast ui without a browser: what the model box and the uploads accept, errors as messages,
the generic prediction table, two requests at once through Gradio's queue (gradio_client), and
the fine-tuning boxes (the commands' refusals, the API's memory)."""

from __future__ import annotations

import html
import json
import socket
from pathlib import Path

import pytest

from perfcast.faces.ui import (
    Request,
    UIError,
    device_from_upload,
    model_from_text,
    model_from_upload,
    prediction_table,
    run_request,
)


def _tiny_onnx(path: Path) -> Path:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("text, spec", [
    ("resnet50", "resnet50"), (" timm:resnet18 ", "timm:resnet18"),
    ("torchvision:resnet18", "torchvision:resnet18"), ("hf:BERT-base-uncased",
                                                       "hf:bert-base-uncased"),
])
def test_model_box_accepts_names(text, spec):
    assert model_from_text(text) == spec


@pytest.mark.parametrize("text, message", [
    ("", "give a model name"),
    ("/etc/passwd", "file paths are not accepted"),
    ("../../model.onnx", "file paths are not accepted"),
    ("model.onnx", "file paths are not accepted"),
    ("~/x", "file paths are not accepted"),
    ("os.path:join", "module:callable specs"),
    ("module:os.system", "module:callable specs"),
    ("keras:ResNet50", "module:callable specs"),
    ("hf:../../config.json", "unknown Hugging Face model"),
    ("hf:someone/private-model", "unknown Hugging Face model"),
    ("resnet50; rm -rf /", "file paths are not accepted"),
    ("resnet50; rm -rf x", "not a model name"),
    ("pyproject", None),  # a bare name that is no file is a timm name (checked later)
])
def test_model_box_refuses_paths_and_callables(text, message, tmp_path, monkeypatch):
    if message is None:
        assert model_from_text(text) == text
        return
    with pytest.raises(UIError, match=message):
        model_from_text(text)


def test_model_box_refuses_an_existing_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret").write_text("x")
    with pytest.raises(UIError, match="names a file here"):
        model_from_text("secret")


def test_uploads_are_checked_and_deleted(tmp_path):
    work = tmp_path / "work"
    work.mkdir()

    def upload(name: str, data: bytes) -> Path:
        p = tmp_path / name
        p.write_bytes(data)
        return p

    ok = _tiny_onnx(tmp_path / "tiny.onnx")
    spec, label = model_from_upload(ok, work, 1)
    assert label == "tiny.onnx" and Path(spec) == work / "model.onnx" and not ok.exists()
    for name, data, message in [
        ("notes.onnx", b"not a model\n" * 50, "not an ONNX model"),
        ("big.onnx", b"\0" * (2**20 + 1), "over the upload limit of 1 MB"),
        ("empty.onnx", b"", "the file is empty"),
        ("model.pt", b"x", "only .onnx or .json"),
        ("config.json", b"{not json", "not valid JSON"),
        ("config.json", json.dumps({"key": "my-gpu"}).encode(), "not a Hugging Face config"),
    ]:
        p = upload(name, data)
        with pytest.raises(UIError, match=message):
            model_from_upload(p, work, 1)
        assert not p.exists()  # the server's copy is gone either way
    cfg = upload("config.json", json.dumps({"model_type": "bert", "hidden_size": 64,
                                            "num_hidden_layers": 2,
                                            "num_attention_heads": 2,
                                            "intermediate_size": 128}).encode())
    spec, _ = model_from_upload(cfg, work, 1)
    assert spec == f"hf:{work / 'config.json'}"


def test_uploaded_device_spec(tmp_path):
    from perfcast.devices import get_device, unregister_device

    row = {"key": "ui-test-gpu", "name": "UI test GPU", "kind": "gpu",
           "peak_fp32_tflops": 20.0, "memory_gb": 24, "bandwidth_gbs": 900, "sm_count": 80}
    p = tmp_path / "gpu.json"
    p.write_text(json.dumps(row))
    added = []
    try:
        dev, note = device_from_upload(p, tmp_path, 1)
        added.append(dev.key)
        assert dev.key == "ui-test-gpu" and note is None and get_device("ui-test-gpu") == dev
        # the same key with other values: kept apart under a new key, never overriding
        p.write_text(json.dumps({**row, "memory_gb": 48}))
        dev2, note2 = device_from_upload(p, tmp_path, 1)
        added.append(dev2.key)
        assert dev2.key.startswith("ui-test-gpu-") and "is taken" in note2
        assert get_device("ui-test-gpu").memory_gb == 24 and dev2.memory_gb == 48
        p.write_text(json.dumps({**row, "key": "a100-40gb"}))
        dev3, _ = device_from_upload(p, tmp_path, 1)
        added.append(dev3.key)
        assert dev3.key != "a100-40gb" and get_device("a100-40gb").memory_gb == 40
        assert not p.exists()
    finally:
        for k in added:
            unregister_device(k)


def test_errors_are_messages_not_tracebacks(tmp_path):
    """Every refusal is one line in the status box — the page's own (names only, registry
    devices, uploads) and the request's, with the command's message."""
    bad = tmp_path / "bad.onnx"
    bad.write_text("hello")
    llama = "hf:meta-llama/Llama-2-7b-hf"
    for req, message in [
        (Request(model="/etc/passwd", devices=["a100-40gb"]), "file paths are not accepted"),
        (Request(model="resnet50", devices=[]), "choose at least one device"),
        (Request(model="resnet50", devices=["/tmp/x.json"]), "unknown device"),
        (Request(model="resnet50", devices=["a100-40gb"], batch_size=-3),
         "batch size must be a positive integer"),
        (Request(model="resnet50", devices=["a100-40gb"], batch_size="many"),
         "--batch-size must be a number"),
        (Request(model="resnet50", devices=["a100-40gb"], batch_size=2.5),
         "--batch-size must be an integer"),
        (Request(model="resnet50", devices=["a100-40gb"], input_len=5),
         "--input-len does not apply to --mode infer"),
        (Request(model="resnet50", devices=["a100-40gb"], engine="llama.cpp"),
         "--engine does not apply to --mode infer"),
        (Request(model="resnet50", devices=["a100-40gb"], mode="generate", input_len=8,
                 output_len=8), "Hugging Face decoder LLMs"),
        (Request(model=llama, devices=["a100-40gb"], mode="generate"),
         "--mode generate needs --input-len"),
        (Request(model=llama, devices=["a100-40gb"], mode="generate", input_len=8),
         "--mode generate needs --output-len"),
        (Request(model="resnet50", devices=["a100-40gb"], iterations=-1),
         "--iterations must be ≥ 1"),
        (Request(model="resnet50", devices=["a100-40gb"], objective="speed"), "speed"),
        (Request(model="resnet50", devices=["a100-40gb"], mode="fly"), "fly"),
        (Request(model=None, model_file=str(bad), devices=["a100-40gb"]), "not an ONNX model"),
    ]:
        r = run_request(req)
        assert 'class="pc-error"' in r.status and message in r.status, (message, r.status)
        assert "Traceback" not in r.status and r.table == ""
        assert len(r.status.splitlines()) == 1
    assert not bad.exists()


def test_form_values_by_field_name():
    """One rule for every box: empty, 0 and "auto" are not given; a box left at its starting
    value is not sent for a mode it does not apply to (generate's lengths start at the schema's
    page defaults), changed it is — and refused by the request."""
    from perfcast.request.fields import BY_NAME
    from perfcast.faces.ui.form import INPUTS, SHOWN, form_values, start_value

    page = {n: start_value(BY_NAME[n]) for n in SHOWN}
    assert page["input_len"] == 512 and page["output_len"] == 128
    assert page["precision"] == "auto" and page["engine"] == "auto"
    assert form_values(Request(**page)) == {"model": "resnet50", "mode": "infer",
                                            "devices": page["devices"], "iterations": 1000,
                                            "objective": "time"}
    gen = form_values(Request(**{**page, "mode": "generate", "model": "hf:gpt2"}))
    assert (gen["input_len"], gen["output_len"], "engine" in gen) == (512, 128, False)
    v = form_values(Request(**{**page, "batch_size": 0, "seq_len": "", "input_size": " ",
                               "n_batch": 0.0, "input_len": 5, "iterations": "20"}))
    assert v["input_len"] == 5 and v["iterations"] == 20
    assert not {"batch_size", "seq_len", "input_size", "n_batch"} & set(v)
    assert form_values(Request(batch_size=64.0, devices="a, b")) == {"batch_size": 64,
                                                                    "devices": ["a", "b"]}
    assert set(INPUTS) == set(SHOWN) | {"model_file", "device_file"}


def test_prediction_table_is_generic():
    preds = [{"model": "m", "device": "gpu-a", "precision": "fp32", "batch_size": 8,
              "time_ms": 1.25, "time_ms_low": 1.0, "time_ms_high": 1.5, "fits": True,
              "energy_j": None, "ood": "no", "predictor": {"time_ms": "xgboost"}, "notes": []},
             {"model": "m", "device": "gpu-b", "precision": "amp", "batch_size": 8,
              "time_ms": 0.5, "future_key": 3.0, "predictor": {}, "notes": []}]
    t = prediction_table(preds)
    assert 'data-device="gpu-a" data-key="time_ms" data-value="1.25"' in t
    assert "1.250 ms" in t and "(1.00–1.50 ms)" in t and "xgboost" in t
    assert 'data-key="time_ms_low"' not in t  # shown as the interval, not a row
    for label in ("fits in memory", "energy per batch", "how unusual is the request",
                  "future key"):
        assert f'<th scope="row">{label}</th>' in t, label


def test_prediction_table_speaks_human():
    """Intervals as "16.4 ms (11.5–20.9 ms, 90 %)", the OOD verdict as one sentence with its
    reason, units on every number — never the raw dicts."""
    pred = {"model": "m", "device": "a100-40gb", "precision": "fp32", "batch_size": 64,
            "time_ms": 16.408, "time_ms_low": 11.52, "time_ms_high": 20.92, "memory_mb": 2536.6,
            "memory_mb_low": 771.4, "memory_mb_high": 3315.4, "energy_j": 5.25, "power_w": 320.0,
            "fits": True, "coverage": 0.9,
            "intervals": {"time_ms": {"coverage": 0.9, "low": 11.52, "high": 20.92, "bucket": 0,
                                      "buckets": 3, "calibrated_on": "held-out GPUs"}},
            "ood": {"score": 0.0, "reasons": ["time_ms: a100-40gb not among the trained GPUs"],
                    "threshold": 1.634, "flagged": False},
            "predictor": {"time_ms": "crossdevice", "energy_j": "power-model × time_ms"},
            "notes": ["time_ms: priced kernel by kernel", "memory_mb: simulated"]}
    t = prediction_table([pred])
    assert "16.41 ms" in t and "(11.5–20.9 ms, 90 %)" in t
    assert "2,537 MiB" in t and "5.250 J" in t and "320.0 W" in t
    assert "power-model × time per batch" in t
    assert ("Close to the training data (distance 0.00, flagged from 1.63); time per batch: "
            "a100-40gb not among the trained GPUs.") in t
    for raw in ("coverage:", "bucket:", "calibration_records", "{", "time_ms:"):
        assert raw not in t, raw
    flagged = {**pred, "ood": {"score": 2.5, "reasons": ["time_ms: op classes never trained "
                                                          "on: fft"], "threshold": 1.6,
                               "flagged": True}}
    assert ("Far from the training data (distance 2.50, at or above 1.60) — expect a larger "
            "error: time per batch: op classes never trained on: fft.") in prediction_table(
                [flagged])


def test_notes_are_grouped_and_collapsible():
    from perfcast.faces.ui import notes_box

    pred = {"device": "a100-40gb", "intervals": {"time_ms": {"calibrated_on": "held-out GPUs"}}}
    box = notes_box([("a100-40gb", "time_ms: priced kernel by kernel"),
                     ("a100-40gb", "memory_mb: simulated"), "a general note"], [pred])
    assert box.count("<details") == 4  # time, memory, interval calibration, other
    assert "<summary>time per batch — 1 note</summary>" in box
    assert "a100-40gb: priced kernel by kernel" in box and "time_ms:" not in box
    assert "time per batch interval calibrated on held-out GPUs" in box


@pytest.mark.slow
def test_two_requests_at_once_are_queued(tmp_path):
    pytest.importorskip("gradio")
    from gradio_client import Client, handle_file

    from perfcast.faces.ui import build_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo = build_app(max_upload_mb=1)
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                quiet=True, ssr_mode=False, max_file_size=2**20)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        files = [_tiny_onnx(tmp_path / f"m{i}.onnx") for i in range(2)]
        form = {"model": "", "mode": "infer", "precision": "auto", "batch_size": 0,
                "input_size": "", "seq_len": 0, "input_len": 512, "output_len": 128,
                "engine": "auto", "n_batch": 0, "n_ubatch": 0, "devices": ["cpu"],
                "device_file": None, "iterations": 10, "region": "", "objective": "time"}
        # (by the inputs' names: the handler's parameters are the schema's field names)
        jobs = [client.submit(**form, model_file=handle_file(str(f)), api_name="/predict")
                for f in files]
        results = [j.result(timeout=300) for j in jobs]
        for r in results:
            assert 'class="pc-ok"' in r[0], r[0]
            assert 'data-device="cpu" data-key="time_ms"' in r[1]
    finally:
        demo.close()


def test_without_gradio_the_command_says_what_to_install(monkeypatch, capsys):
    import sys

    from perfcast.faces.cli import main

    monkeypatch.setitem(sys.modules, "gradio", None)  # import gradio → ImportError
    assert main(["ui", "--port", "7999"]) == 2
    assert "pip install 'perfcast[ui]'" in capsys.readouterr().err


# ------------------------------------------------------------------------------ fine-tuning
LLAMA3 = "hf:meta-llama/Meta-Llama-3-8B"


@pytest.mark.parametrize("form, argv", [
    # a LoRA box in infer mode, --finetune in infer / generate mode
    ({"lora_rank": 8}, ["--lora-rank", "8"]),
    ({"lora_targets": "q_proj"}, ["--lora-targets", "q_proj"]),
    ({"finetune": "qlora"}, ["--finetune", "qlora"]),
    ({"mode": "generate", "input_len": 8, "output_len": 8, "finetune": "lora"},
     ["--mode", "generate", "--input-len", "8", "--output-len", "8", "--finetune", "lora"]),
    # the adapters' boxes without --finetune lora / qlora
    ({"mode": "train", "lora_rank": 8}, ["--mode", "train", "--lora-rank", "8"]),
    ({"mode": "train", "finetune": "full", "lora_targets": "v_proj"},
     ["--mode", "train", "--finetune", "full", "--lora-targets", "v_proj"]),
    # the workload's rules
    ({"mode": "train", "finetune": "qlora", "precision": "fp32"},
     ["--mode", "train", "--finetune", "qlora", "--precision", "fp32"]),
    ({"mode": "train", "finetune": "lora", "lora_targets": "q_prj"},
     ["--mode", "train", "--finetune", "lora", "--lora-targets", "q_prj"]),
    ({"mode": "train", "finetune": "lora", "lora_rank": -2},
     ["--mode", "train", "--finetune", "lora", "--lora-rank", "-2"]),
    ({"mode": "train", "finetune": "lora", "model": "resnet50"},
     ["--mode", "train", "--finetune", "lora"]),
])
def test_finetune_refusals_are_the_commands(form, argv, capsys):
    """A bad fine-tuning combination gives the page the one-line message ``perfcast predict``
    gives for the same options (asked here, not copied)."""
    from perfcast.faces.cli import main

    model = form.pop("model", LLAMA3)
    assert main(["predict", model, "--device", "rtx4090", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    r = run_request(Request(model=model, devices=["rtx4090"], **form))
    assert 'class="pc-error"' in r.status and r.table == "", r.status
    assert html.escape(err[len("error: "):]) in r.status, (err, r.status)


def test_adapter_boxes_at_their_start_are_not_sent():
    """The rank box starts at the schema's default (16): left there it is not sent unless
    --finetune is lora / qlora, so a train request without fine-tuning is not refused."""
    from perfcast.faces.ui.form import SHOWN, form_values, start_value
    from perfcast.request.fields import BY_NAME

    page = {n: start_value(BY_NAME[n]) for n in SHOWN}
    assert (page["finetune"], page["lora_rank"], page["lora_targets"]) == ("auto", 16, None)
    for mode, finetune in (("infer", "auto"), ("train", "auto"), ("train", "full")):
        v = form_values(Request(**{**page, "mode": mode, "finetune": finetune}))
        assert "lora_rank" not in v and "lora_targets" not in v, (mode, finetune)
    v = form_values(Request(**{**page, "mode": "train", "finetune": "qlora",
                               "lora_targets": "q_proj, v_proj"}))
    assert (v["finetune"], v["lora_rank"], v["lora_targets"]) == ("qlora", 16, "q_proj, v_proj")


def test_qlora_through_the_page_is_the_apis_answer():
    """The page's QLoRA request is the API's: the same memory per GPU and breakdown (frozen
    base, adapters, their gradients and optimizer state, activations …), whether it fits, and
    the largest batch of perfcast fit; no roofline chart (a note says why)."""
    from perfcast.api import predict
    from perfcast.decisions.answer import answer
    from perfcast.faces.report import with_unit

    opts = {"mode": "train", "finetune": "qlora", "seq_len": 2048, "lora_rank": 16}
    api = predict(LLAMA3, device="rtx4090", **opts).to_dict()
    r = run_request(Request(model=LLAMA3, devices=["rtx4090"], iterations=10, **opts))
    assert 'class="pc-ok"' in r.status and "qlora fine-tuning (rank 16)" in r.status, r.status
    (got,) = r.predictions
    assert got["memory_mb"] == api["memory_mb"] and got["fits"] == api["fits"]
    assert got["memory_breakdown_mb"] == api["memory_breakdown_mb"]
    assert {"weights", "adapters", "gradients", "optimizer_state",
            "activations"} <= set(api["memory_breakdown_mb"])
    for key, mib in api["memory_breakdown_mb"].items():
        assert f'<td data-key="{key}">{html.escape(with_unit(mib, "MiB"))}</td>' in r.memory
    assert "weights (the frozen base)" in r.memory and "gradients (of the adapters)" in r.memory
    total = with_unit(api["memory_mb"], "MiB")
    fits = f"{'yes' if api['fits'] else 'no'} (of {with_unit(api['capacity_mb'], 'MiB')})"
    assert f'<td data-key="predicted_device_mb">{total}</td>' in r.memory
    assert f'<td data-key="fits">{fits}</td>' in r.memory
    fit = answer("fit", {"model": LLAMA3, "device": "rtx4090", "precision": got["precision"],
                         **opts}).to_dict()
    assert f"<td>{with_unit(fit['max_batch_size'], 'samples')}</td>" in r.decisions
    assert r.roofline_png is None and "no roofline chart" in r.notes
