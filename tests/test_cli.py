"""The command line: JSON keys, one-line errors and exit codes."""

import json
import os
import subprocess
import sys

import pytest

from perfcast.faces.cli import main

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def run(*args):
    return subprocess.run([sys.executable, "-m", "perfcast.faces.cli", *args], capture_output=True,
                          text=True, env=ENV, timeout=300)


def test_inspect_json_keys(capsys):
    assert main(["inspect", "torchvision:resnet18", "--json", "-b", "2"]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("nodes", "edges", "params", "macs", "flops", "activation_bytes", "param_bytes",
              "op_counts", "unmapped_ops"):
        assert k in d
    assert d["batch_size"] == 2 and d["op_counts"]["conv2d"] == 20


def test_inspect_human_output(capsys):
    assert main(["inspect", "timm:resnet10t", "--input-size", "3,64,64", "--mode", "train"]) == 0
    text = capsys.readouterr().out
    assert "backward" in text and "parameters" in text


def test_devices_json(capsys):
    assert main(["devices", "--json"]) == 0
    keys = {d["key"] for d in json.loads(capsys.readouterr().out)}
    assert {"a100-40gb", "h100-sxm", "rtx4090", "i9-10940x", "cpu"} <= keys


@pytest.mark.parametrize("args,needle", [
    (["inspect", "nosuchmodel_xyz"], "unknown timm model"),
    (["inspect", "resnet18", "--batch-size", "0"], "batch size"),
    (["inspect", "resnet18", "--batch-size", "-3"], "batch size"),
    (["inspect", "resnet18", "--input-size", "3,abc"], "input size"),
    (["inspect", "resnet18", "--input-size", "3,0,224"], "input size"),
    (["inspect", "resnet18", "--mode", "fly"], "mode"),
    (["inspect", "resnet18", "--precision", "int3"], "precision"),
    (["inspect", "missing/model.onnx"], "file not found"),
    (["inspect", "hf:no-such-model-anywhere"], "hf"),
])
def test_bad_input_one_line_error(args, needle, capsys):
    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error:") and needle in err.lower()
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_corrupt_onnx_one_line_error(tmp_path, capsys):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(os.urandom(256))
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "onnx" in err.lower() and len(err.splitlines()) == 1


@pytest.mark.parametrize("args", [
    ("inspect", "missing/model.onnx"),  # refused before torch or timm load: 0.3 s
    # resolving the name loads torch and timm first (~4 s of CPU in a new process)
    pytest.param(("inspect", "nosuchmodel_xyz"), marks=pytest.mark.slow),
], ids=["missing-file", "unknown-timm-model"])
def test_console_script_exit_code(args):
    r = run(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_memory_command_json(capsys):
    assert main(["memory", "torchvision:resnet18", "--mode", "train", "-b", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["tensor_peak_mb"] > d["param_mb"] > 0 and d["optimizer"] == "sgd-momentum"
    assert main(["memory", "torchvision:resnet18", "-b", "0"]) == 2


def test_version(capsys):
    from perfcast._version import __version__

    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == __version__


@pytest.mark.parametrize("args", [
    ("plan", "timm:resnet50", "--gpus", "0", "--device", "a100-80gb"),
    ("train", "--recipe", "no-such-recipe"),
])
def test_an_error_under_a_progress_bar_is_one_line(args):
    """A command that shows a progress bar and then fails prints its error alone on a
    non-interactive stderr: no half-drawn bar, no empty line before it."""
    r = run(*args)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), repr(r.stderr)
