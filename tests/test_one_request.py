"""One request, one answer: the same options through the command line, the Python API and
``perfcast serve`` give identical JSON — for one device's inference and training step, LLM
generation and a training step over GPUs — and every surface refuses the same bad request with
the same one-line message."""

from __future__ import annotations

import json

import pytest

import perfcast
from perfcast.faces.cli import main

pytest.importorskip("fastapi")

IMG = "3,64,64"
#: (id, model, options by field name) — one request per mode and layout
REQUESTS = [
    ("infer", "timm:resnet18", {"device": "rtx4090", "batch_size": 8, "precision": "amp",
                                "input_size": IMG}),
    ("train", "timm:resnet18", {"device": "a100-80gb", "mode": "train", "batch_size": 16,
                                "precision": "amp", "input_size": IMG}),
    ("generate", "hf:meta-llama/Llama-2-7b-hf", {"device": "h100-sxm", "mode": "generate",
                                                 "input_len": 128, "output_len": 32,
                                                 "batch_size": 4}),
    ("parallel", "timm:resnet18", {"device": "a100-80gb", "mode": "train", "batch_size": 512,
                                   "data_parallel": 4, "precision": "amp",
                                   "input_size": IMG}),
]


def _argv(model: str, options: dict) -> list[str]:
    from perfcast.request.fields import BY_NAME

    argv = ["predict", model]
    for k, v in options.items():
        argv += [BY_NAME[k].flag, str(v)]
    return argv + ["--json"]


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from perfcast.faces.serve import create_app

    return TestClient(create_app(warm=False))


def _strict(d):
    """The JSON as a client reads it (strict: NaN → null)."""
    from perfcast.jsonout import strict_json

    return json.loads(strict_json(d))


@pytest.mark.parametrize("rid,model,options", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_the_same_request_gives_the_same_json_everywhere(rid, model, options, capsys, client):
    api = _strict(perfcast.predict(model, **options).to_dict())
    assert main(_argv(model, options)) == 0
    cli = json.loads(capsys.readouterr().out)
    body = {"model": model, **options}
    if "input_size" in body:
        body["input_size"] = [int(x) for x in body["input_size"].split(",")]
    r = client.post("/predict", json=body)
    assert r.status_code == 200, r.text
    http = r.json()
    assert cli == api
    assert http == api
    assert api["kind"] == {"infer": "single", "train": "single", "generate": "generation",
                           "parallel": "parallel"}[rid]
    assert api["throughput_per_s"] and api["time_ms"]


@pytest.mark.parametrize("options,needle", [
    ({"device": "rtx4090", "output_len": 5}, "--output-len does not apply to --mode infer"),
    ({"device": "rtx4090", "threads": 0}, "--threads must be in 1..4096"),
    ({"device": "rtx4090", "coverage": 1.5}, "--coverage must be between 0 and 1"),
])
def test_the_same_refusal_everywhere(options, needle, capsys, client):
    from perfcast.errors import PerfcastError

    model = "timm:resnet18"
    with pytest.raises(PerfcastError) as exc:
        perfcast.predict(model, **options)
    assert needle in str(exc.value)
    assert main(_argv(model, options)[:-1]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1
    r = client.post("/predict", json={"model": model, **options})
    assert r.status_code == 422 and needle in r.json()["error"]
