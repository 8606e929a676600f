"""``perfcast serve`` (issue #31, item 3): the HTTP JSON API over the same functions as the
commands — the same JSON as ``--json``, HTTP 422 with the command's message where the command
exits 2, bounded bodies and queue, graceful SIGTERM; and (slow) a short run of the load test
``benchmarks/load_serve.py``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from perfcast.faces.cli import main

pytest.importorskip("fastapi", reason="perfcast serve needs pip install 'perfcast[serve]'")

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"model": "timm:resnet10t", "input_size": "3,64,64", "batch_size": 8}


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from perfcast.faces.serve import create_app

    with TestClient(create_app(warm=False, max_body=4096)) as c:
        yield c


def _cli_json(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _cli_error(capsys, *argv) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 2
    # the message line (a progress bar may come before it)
    return capsys.readouterr().err.strip().splitlines()[-1].removeprefix("error: ")


def test_predict_is_the_commands_json(client, capsys):
    r = client.post("/predict", json={**SMALL, "device": "a100-40gb", "mode": "train"})
    assert r.status_code == 200, r.text
    cli = _cli_json(capsys, "predict", SMALL["model"], "--device", "a100-40gb", "--mode",
                    "train", "--input-size", "3,64,64", "--batch-size", "8")
    assert r.json() == cli
    assert r.headers["content-type"] == "application/json"
    # a list input size is the same request
    again = client.post("/predict", json={**SMALL, "input_size": [3, 64, 64],
                                          "device": "a100-40gb", "mode": "train"})
    assert again.json() == cli


def test_bad_input_is_422_with_the_commands_message(client, capsys):
    r = client.post("/predict", json={**SMALL, "device": "a100-40gb", "batch_size": 0})
    assert r.status_code == 422
    msg = _cli_error(capsys, "predict", SMALL["model"], "--device", "a100-40gb",
                     "--batch-size", "0")
    assert r.json() == {"error": msg, "exit_code": 2}
    r = client.post("/predict", json={**SMALL, "device": "nosuchgpu"})
    assert r.status_code == 422 and r.json()["error"] == _cli_error(
        capsys, "predict", SMALL["model"], "--device", "nosuchgpu")
    # what the command's parser refuses: a type, an unknown option, a missing one, not JSON
    for body, needle in ((json.dumps({**SMALL, "device": "cpu", "batch_size": "many"}),
                          "batch_size: must be an integer, got 'many'"),
                         (json.dumps({**SMALL, "device": "cpu", "colour": "red"}),
                          "colour: unknown option"),
                         (json.dumps(SMALL), "device: required"),
                         ('{"model": ', "not valid JSON")):
        r = client.post("/predict", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422 and needle in r.json()["error"], r.text
        assert r.json()["exit_code"] == 2 and "\n" not in r.json()["error"]


def test_body_size_is_bounded(client):
    r = client.post("/predict", content=json.dumps({**SMALL, "device": "cpu",
                                                    "model": "x" * 5000}),
                    headers={"content-type": "application/json"})
    assert r.status_code == 413 and "4,096 bytes" in r.json()["error"]


def test_decisions_and_devices_are_the_commands_json(client, capsys):
    fit = client.post("/fit", json={**SMALL, "device": "a100-40gb", "limit": 64,
                                    "batch_size": None})
    assert fit.status_code == 200, fit.text
    assert fit.json() == _cli_json(capsys, "fit", SMALL["model"], "--device", "a100-40gb",
                                   "--input-size", "3,64,64", "--limit", "64")
    rank = client.post("/rank", json={**SMALL, "devices": ["a100-40gb", "h100-sxm"]})
    assert rank.status_code == 200, rank.text
    assert rank.json() == _cli_json(capsys, "rank", SMALL["model"], "--devices",
                                    "a100-40gb,h100-sxm", "--input-size", "3,64,64",
                                    "--batch-size", "8")
    cost = client.post("/cost", json={"device": "a100-40gb", "time_ms": 100.0,
                                      "iterations": 1000, "model": None})
    assert cost.status_code == 200, cost.text
    assert cost.json() == _cli_json(capsys, "cost", "--device", "a100-40gb", "--time-ms",
                                    "100", "--iterations", "1000")
    r = client.post("/cost", json={"device": "a100-40gb", "time_ms": 100.0, "iterations": -5})
    assert r.status_code == 422 and r.json()["error"] == _cli_error(
        capsys, "cost", "--device", "a100-40gb", "--time-ms", "100", "--iterations", "-5")
    devices = client.get("/devices")
    assert devices.json() == _cli_json(capsys, "devices")


def test_health_openapi_and_offline_docs(client):
    h = client.get("/healthz").json()
    assert h["status"] == "ok" and h["served"] >= 0 and h["in_flight"] == 0
    spec = client.get("/openapi.json").json()
    assert {"/predict", "/fit", "/rank", "/cost", "/plan", "/devices", "/healthz"} <= \
        set(spec["paths"])
    assert "batch_size" in json.dumps(spec["components"])
    page = client.get("/docs")
    assert page.status_code == 200 and "/openapi.json" in page.text
    if "/docs-static/" in page.text:  # the Swagger UI files are served by the server itself
        assert client.get("/docs-static/swagger-ui-bundle.js").status_code == 200


def test_queue_is_bounded():
    """More requests than compute slots + queue: the rest are refused at once (503)."""
    import threading

    from fastapi.testclient import TestClient

    from perfcast.faces import serve

    gate = threading.Event()
    real = serve.do_devices

    def slow_devices():
        gate.wait(30)
        return real()

    serve.do_devices = slow_devices
    try:
        with TestClient(serve.create_app(warm=False, max_concurrency=1, max_queue=1)) as c:
            results = []
            threads = [threading.Thread(target=lambda: results.append(c.get("/devices")))
                       for _ in range(2)]
            for t in threads:
                t.start()
            deadline = time.time() + 30
            while c.get("/healthz").json()["in_flight"] < 2 and time.time() < deadline:
                time.sleep(0.05)
            busy = c.get("/devices")
            gate.set()
            for t in threads:
                t.join()
    finally:
        serve.do_devices = real
    assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
    assert "busy" in busy.json()["error"]
    assert [r.status_code for r in results] == [200, 200]


def _start(env=None, *args) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "perfcast", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    deadline = time.time() + 300
    while time.time() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"listening on (http://\S+?) ", line)
        if m:
            return proc, m.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"serve did not start: {proc.stderr.read()}")


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_serve_acceptance_resnet50_rtx4090_and_sigterm():
    """The issue's acceptance: `perfcast serve` answers /predict for timm:resnet50 on rtx4090
    with the JSON of `perfcast predict --json`, 422 with the command's message for batch size 0,
    and stops on SIGTERM (exit 0, one summary line)."""
    proc, url = _start()
    try:
        status, served = _post(f"{url}/predict", {"model": "timm:resnet50", "device": "rtx4090",
                                                  "batch_size": 256, "precision": "amp"})
        assert status == 200, served
        cli = subprocess.run([sys.executable, "-m", "perfcast", "predict", "timm:resnet50",
                              "--device", "rtx4090", "--batch-size", "256", "--precision", "amp",
                              "--json"], capture_output=True, text=True, timeout=600)
        assert cli.returncode == 0, cli.stderr
        assert served == json.loads(cli.stdout)
        status, bad = _post(f"{url}/predict", {"model": "timm:resnet50", "device": "rtx4090",
                                               "batch_size": 0})
        cli = subprocess.run([sys.executable, "-m", "perfcast", "predict", "timm:resnet50",
                              "--device", "rtx4090", "--batch-size", "0"], capture_output=True,
                             text=True, timeout=600)
        assert cli.returncode == 2 and status == 422
        assert bad == {"error": cli.stderr.strip().removeprefix("error: "), "exit_code": 2}
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "stopped (SIGTERM): 1 requests served" in err and "Traceback" not in err


def test_serve_refuses_a_busy_port_in_one_line():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        r = subprocess.run([sys.executable, "-m", "perfcast", "serve", "--port",
                            str(s.getsockname()[1])], capture_output=True, text=True,
                           timeout=120)
    finally:
        s.close()
    assert r.returncode == 2 and "cannot listen on 127.0.0.1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # the load test (benchmarks/load_serve.py), short
def test_load_test_short(tmp_path):
    out = tmp_path / "load.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "load_serve.py"), "--clients",
                        "4", "--seconds", "5", "--requests", "1000", "--json", str(out)],
                       capture_output=True, text=True, timeout=1800,
                       env={**os.environ, "PERFCAST_CACHE_DIR": str(tmp_path / "graphs")})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    d = json.loads(out.read_text())
    assert d["ok"] and d["alive_after"] and d["exit_code"] == 0
    for phase in ("steady", "memory", "mix"):
        assert d[phase]["errors"] == 0 and d[phase]["requests"] > 0, d[phase]
    assert d["mix"]["statuses"].get("422", 0) >= 15 and d["mix"]["statuses"].get("413") == 3


@pytest.mark.slow  # fit searches ~16 batch sizes (a simulation each) for ResNet-50
def test_docs_client_example_runs(capsys):
    """The documentation's Python client (docs/guides/programs.md), as written, against a
    server started as the page says."""
    text = (ROOT / "docs" / "guides" / "programs.md").read_text()
    m = re.search(r"<!-- serve-example -->\s*```python\n(.*?)```", text, re.S)
    assert m, "docs/guides/programs.md lost its perfcast serve client example"
    proc, url = _start()
    try:
        code = m.group(1).replace('URL = "http://127.0.0.1:8765"', f'URL = "{url}"')
        assert code != m.group(1)
        exec(compile(code, "docs/guides/programs.md", "exec"), {})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[:3]] == ["1", "8", "64"]
    assert all(line.endswith("MiB") for line in out[:3]) and int(out[3]) > 64


TINY_GPT = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 64,
            "n_head": 4, "n_layer": 4, "n_positions": 128, "vocab_size": 512,
            "activation_function": "gelu_new"}


def test_plan_is_the_commands_json(client, capsys, tmp_path):
    cfg = tmp_path / "tiny_gpt.json"
    cfg.write_text(json.dumps(TINY_GPT))
    model = f"hf:{cfg}"
    r = client.post("/plan", json={"model": model, "gpus": 4, "device": "a100-80gb",
                                   "precision": "bf16", "batch_size": 16, "seq_len": 64,
                                   "zero": 1, "top": 3})
    assert r.status_code == 200, r.text
    cli = _cli_json(capsys, "plan", model, "--gpus", "4", "--device", "a100-80gb",
                    "--precision", "bf16", "--batch-size", "16", "--seq-len", "64", "--zero",
                    "1", "--top", "3")
    served = r.json()
    assert served.pop("elapsed_s") >= 0 and cli.pop("elapsed_s") >= 0  # (the search's time)
    assert served == cli and len(cli["rows"]) == 3
    r = client.post("/plan", json={"model": model, "gpus": 0, "device": "a100-80gb"})
    assert r.status_code == 422 and r.json()["error"] == _cli_error(
        capsys, "plan", model, "--gpus", "0", "--device", "a100-80gb")
    # the serving planner: the same answer as perfcast plan --mode generate --json
    r = client.post("/plan", json={"model": model, "mode": "generate", "device": "a100-80gb",
                                   "rate": 5, "input_len": 64, "output_len": 32,
                                   "slo_tpot_ms": 50, "top": 3})
    assert r.status_code == 200, r.text
    cli = _cli_json(capsys, "plan", model, "--mode", "generate", "--device", "a100-80gb",
                    "--rate", "5", "--input-len", "64", "--output-len", "32", "--slo-tpot",
                    "50", "--top", "3")
    served = r.json()
    for d in (served, cli):
        d.pop("elapsed_s", None)
    assert served == cli
