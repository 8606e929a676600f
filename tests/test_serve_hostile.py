"""``perfcast serve`` against hostile requests: every bad request is a 4xx whose body is strict
JSON ``{"error": <one line>, "exit_code": …}`` — never a 500, a traceback, FastAPI's
``{"detail": …}`` or a value coerced into another type; ``module:callable`` specs are refused
(they run code in the server). Each request here is refused before any graph is built."""

from __future__ import annotations

import json

import pytest

from perfcast.faces.cli import main

pytest.importorskip("fastapi", reason="perfcast serve needs pip install 'perfcast[serve]'")

SMALL = {"model": "timm:resnet10t", "input_size": "3,64,64", "batch_size": 2, "device": "cpu"}


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from perfcast.faces.serve import create_app

    with TestClient(create_app(warm=False),
                    raise_server_exceptions=False) as c:
        yield c


def _no_constant(name):
    raise AssertionError(f"{name} in a response body (not strict JSON)")


def _refused(r, status: int = 422, needle: str = "") -> str:
    """The response is ``status`` with one strict-JSON error line (containing ``needle``)."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"] == "application/json", r.headers
    body = json.loads(r.text, parse_constant=_no_constant)
    assert set(body) == {"error", "exit_code"}, body
    err = body["error"]
    assert err and "\n" not in err and "Traceback" not in err, err
    assert body["exit_code"] == (2 if status < 500 else 1)
    assert needle in err, err
    return err


def _post(client, body, path="/predict", content_type="application/json"):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(path, content=data,
                       headers={"content-type": content_type} if content_type else {})


@pytest.mark.parametrize("data,content_type,needle", [
    ("[1, 2]", "application/json", "body: must be a JSON object of the options"),
    ("null", "application/json", "got null"),
    ("", "application/json", "body: empty"),
    (json.dumps(SMALL), "text/plain", "Content-Type: application/json (got text/plain)"),
    (json.dumps(SMALL), None, "got no Content-Type"),
    (b'{"model": "\xff\xfe"}', "application/json", "body: not valid JSON (not UTF-8 text)"),
    ('{"batch_size": ' + "9" * 5000 + "}", "application/json", "body: not valid JSON"),
])
def test_a_body_that_is_not_a_json_object(client, data, content_type, needle):
    """(Bad UTF-8 and a 5,000-digit number were FastAPI's 400 {"detail": …}; a list "Input
    should be a valid dictionary or object to extract fields from".)"""
    _refused(_post(client, data, content_type=content_type), 422, needle)


@pytest.mark.parametrize("key,value,needle", [
    ("batch_size", "4", "batch_size: must be an integer, got '4'"),
    ("batch_size", True, "batch_size: must be an integer, got true"),
    ("batch_size", 2.0, "batch_size: must be an integer, got 2.0"),
    ("batch_size", [2], "batch_size: must be an integer, got [2]"),
    ("use_cache", "yes", "use_cache: must be true or false, got 'yes'"),
    ("use_cache", 1, "use_cache: must be true or false, got 1"),
    ("coverage", "0.5", "coverage: must be a number, got '0.5'"),
    ("model", {"a": 1}, "model: must be a string"),
    ("input_size", [[3]], "input_size: must be a string like"),
])
def test_a_value_of_the_wrong_json_type_is_refused_not_coerced(client, key, value, needle):
    """The body is strict: "4" was taken as batch 4, true as 1, "yes" and 1 as true — values
    the command refuses (--batch-size true)."""
    err = _refused(_post(client, {**SMALL, key: value}), 422, needle)
    assert err.count(f"{key}:") == 1, err  # one message for a field, even of a union


@pytest.mark.parametrize("literal,needle", [
    ('"coverage": NaN', "--coverage must be a number, got nan"),
    ('"power_limit_w": Infinity', "--power-limit-w must be a number, got inf"),
    ('"runtime_overhead_mb": -Infinity', "got -inf"),
    ('"batch_size": NaN', "batch_size: must be an integer, got nan"),
])
def test_non_finite_literals_are_refused(client, literal, needle):
    body = '{"model": "timm:resnet10t", "device": "a100-40gb", ' + literal + "}"
    _refused(_post(client, body), 422, needle)


def test_unknown_and_doubled_keys(client):
    _refused(_post(client, {**SMALL, "batch-size": 4}), 422,
             "batch-size: unknown option of perfcast predict — did you mean 'batch_size'?")
    _refused(_post(client, {**SMALL, "device": "a100-40gb", "power_limit_w": 300,
                            "power_limit": 200}), 422,
             "power_limit: the same option as power_limit_w, given twice")


def test_unknown_paths_and_methods_answer_in_the_errors_shape(client):
    """(They were FastAPI's {"detail": "Not Found"} / {"detail": "Method Not Allowed"}.)"""
    _refused(client.get("/nope"), 404, "no GET /nope (endpoints: POST /predict")
    r = client.get("/predict")
    _refused(r, 405, "GET /predict is not allowed (use POST)")
    assert r.headers["allow"] == "POST"
    _refused(client.post("/healthz"), 405, "use GET")
    h = client.head("/healthz")  # liveness probes (load balancers, curl -I) use HEAD
    assert h.status_code == 200 and h.content == b""
    _refused(client.get("/" + "a" * 5000), 404, "…")  # the path cut in the message


def test_a_chunked_body_over_the_limit_is_413(client):
    """(A body without Content-Length passing the limit was FastAPI's 400 "There was an error
    parsing the body".)"""
    chunks = (b"x" * 10_000 for _ in range(10))
    r = client.post("/predict", content=chunks, headers={"content-type": "application/json"})
    _refused(r, 413, "request body over 65,536 bytes")


@pytest.mark.parametrize("model", ["builtins:exit", "os:getcwd", "jax:builtins:exit"])
def test_module_callable_specs_are_refused(client, model):
    """They imported and called any function of the server's Python (builtins:exit answered
    a plain-text 500; os:abort would stop the server)."""
    _refused(_post(client, {**SMALL, "model": model}), 422,
             f"perfcast serve does not import and call {model!r}")


@pytest.mark.parametrize("body,needle", [
    ({**SMALL, "model": "a" * 300}, "--model is too long to name anything (300 bytes"),
    ({**SMALL, "model": "é" * 200}, "--model is too long"),
    ({**SMALL, "model": "a" * 30000}, "at most 4,096 bytes"),
    ({**SMALL, "device": "/tmp/" + "a" * 300 + ".json"}, "--device is too long"),
    ({**SMALL, "store": "b" * 300}, "--store is too long"),
])
def test_a_name_too_long_for_the_file_system(client, body, needle):
    """(OSError "File name too long" was a 500 here and an internal error, exit 1, on the
    command line.)"""
    _refused(_post(client, body), 422, needle)


def test_a_device_list_entry_too_long_and_a_long_list(client):
    r = _post(client, {"model": "timm:resnet10t", "input_size": "3,64,64",
                       "devices": ["a100-40gb", "x" * 300]}, "/rank")
    _refused(r, 422, "--devices is too long")
    # a long comma-separated list of short names is not "too long"
    devices = ",".join(["nosuchgpu"] * 40)
    r = _post(client, {"model": "timm:resnet10t", "input_size": "3,64,64", "devices": devices},
              "/rank")
    _refused(r, 422, "unknown device 'nosuchgpu'")


@pytest.mark.parametrize("key", ["model", "device", "store"])
def test_a_lone_surrogate_is_refused(client, key):
    """JSON's "\\ud800" is a Python string no file name can hold (--store was a 500)."""
    body = json.dumps({**SMALL, key: "\ud800x"})
    _refused(_post(client, body), 422, f"--{key} is not valid text: it holds a lone surrogate")


def test_the_command_line_refuses_a_name_too_long_in_one_line(capsys):
    assert main(["predict", "a" * 300, "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: --model is too long to name anything"), err


def test_an_internal_error_is_one_json_line_and_the_server_keeps_serving(client, monkeypatch):
    """A SystemExit from a request's work, or an exception outside it, is a 500 with one JSON
    line (they were uvicorn's plain-text "Internal Server Error")."""
    from perfcast.faces import serve

    def leaves():
        raise SystemExit(3)

    def breaks(body):
        raise RuntimeError("a bug\non two lines")

    monkeypatch.setattr(serve, "do_devices", leaves)
    _refused(client.get("/devices"), 500, "internal error: SystemExit: 3")
    monkeypatch.setattr(serve, "_given", breaks)
    _refused(_post(client, SMALL), 500, "internal error: RuntimeError: a bug")
    assert client.get("/healthz").json()["status"] == "ok"
