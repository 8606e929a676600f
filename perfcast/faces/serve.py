"""``perfcast serve``: perfcast as an HTTP JSON API for programs (FastAPI + uvicorn).

A scheduler placing jobs, a notebook sweeping batch sizes or a CI gate asks a long-running
process instead of paying a cold start per question: the shipped predictors stay loaded
(:func:`perfcast.training.shipped.load_entry` keeps them) and graphs come from the graph cache
(built once, on the first request that needs them).

Endpoints — each the command's answer (:func:`perfcast.decisions.answer.answer`, what the
command line calls), its body generated from the request schema: the command's options by
their names (``batch_size``, ``input_size`` …; see ``/docs``):

==================  ===========================================================================
``POST /predict``   ``perfcast predict --json`` — every mode and layout
``POST /fit``       ``perfcast fit --json``
``POST /rank``      ``perfcast rank --json``
``POST /cost``      ``perfcast cost --json``
``POST /plan``      ``perfcast plan --json``
``POST /mig``       ``perfcast mig --json``
``POST /power-limit`` ``perfcast power-limit --json``
``GET /devices``    :func:`perfcast.devices.list_devices` — ``perfcast devices --json``
``GET /healthz``    liveness and counters
``GET /docs``       the OpenAPI page (``/openapi.json``: the schema)
==================  ===========================================================================

Errors are what the command says, as JSON ``{"error": <the command's one-line message>,
"exit_code": <the command's exit code>}``: HTTP **422** for bad input (exit code 2) and a model
that cannot be traced (3) — a body that is not a JSON object, a value of the wrong JSON type
(strict: ``"4"`` is not a number, ``1`` not ``true``), an unknown key —, **404** / **405** for
an unknown path or method, **413** for a body over the size limit, **503** when the queue is
full (with ``Retry-After``), **500** for an internal error (one line; the server keeps serving).

A model spec is what the command takes, files on this machine's disk included, except
``module.path:callable`` and ``jax:module.path:callable`` specs, which are refused: they import
and call Python code in the server (:data:`CODE_SPEC_KINDS`).

Bounds: request bodies of at most ``max_body`` bytes; at most ``max_concurrency`` requests
compute at once (threads; graph building — torch.export — runs one at a time) and at most
``max_queue`` more wait. It listens on 127.0.0.1 unless told otherwise (there is no
authentication). SIGTERM or Ctrl-C stops accepting connections, lets the requests in flight
finish (up to ``graceful_s`` seconds) and exits 0.
"""

# (no ``from __future__ import annotations``: FastAPI reads the request models' annotations
# at definition time, and they are local classes)
import logging
import signal
import threading
import time
from contextlib import contextmanager
from typing import Any

from perfcast.errors import PerfcastError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
#: Largest request body accepted (bytes): a request is a model spec and a few options.
MAX_BODY_BYTES = 64 * 1024
#: Requests computing at once (threads) and waiting beyond them.
MAX_CONCURRENCY = 4
MAX_QUEUE = 64
#: Seconds the requests in flight get to finish after SIGTERM.
GRACEFUL_S = 30.0
#: Graphs kept in memory between requests (:func:`perfcast.cache.keep_warm`).
WARM_GRAPHS = 128

log = logging.getLogger("perfcast.faces.serve")


def _require_fastapi():
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise PerfcastError(f"perfcast serve needs FastAPI and uvicorn, which are not "
                            f"installed ({exc.name}): pip install 'perfcast[serve]'") from None


def _json_response(obj: Any, status: int = 200, headers: dict | None = None):
    """Strict JSON (no NaN: ``null`` and a note, as the command prints it)."""
    from starlette.responses import Response

    from perfcast.jsonout import strict_json

    return Response(strict_json(obj), status_code=status, media_type="application/json",
                    headers=headers)


def _error(message: str, exit_code: int, status: int, headers: dict | None = None):
    return _json_response({"error": message, "exit_code": exit_code}, status, headers)


def _status_of(exc: PerfcastError) -> int:
    """HTTP status of a perfcast error by its exit code: bad input (2) and a model that cannot
    be traced (3) are the client's (422); anything else is the server's (500)."""
    return 422 if exc.exit_code in (2, 3) else 500


#: What a body key of each kind of field holds, as the messages say it.
_KIND_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false",
               "str": "a string", "list": "a comma-separated string or a list of strings"}


def _shown(value: Any) -> str:
    """A value in a message: as JSON writes it for null and booleans, else its repr, cut to 60
    characters."""
    if value is None or isinstance(value, bool):
        text = "null" if value is None else str(value).lower()
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true / false",
            int: "a number", float: "a number", type(None): "null"}.get(
        type(value), "not JSON")


def _one_line_validation(errors, command: str | None = None, content_type: str = "") -> str:
    """FastAPI's validation errors as one line, in the command's words: ``batch_size: must be
    an integer, got '4'; …`` (``command``: whose body it was — the field kinds, aliases and
    names for a "did you mean"; ``content_type``: the request's)."""
    import difflib

    from perfcast.request.fields import ALIASES, BY_NAME, fields_of

    taken = {f.name: f for f in fields_of(command)} if command else {}
    spellings = {k: n for n in taken for k in (n, *BY_NAME[n].http_aliases())}
    parts = []
    for e in errors:
        loc = [str(x) for x in e.get("loc", ()) if x != "body"]
        kind = e.get("type", "")
        if kind == "json_invalid":
            parts.append(f"body: not valid JSON ({e.get('ctx', {}).get('error', 'parse error')})")
            continue
        if not loc:  # the body itself: not an object, or none
            if "json" not in content_type.lower():
                parts.append(f"body: send the options as a JSON object with Content-Type: "
                             f"application/json (got {content_type or 'no Content-Type'})")
            elif kind == "missing":
                parts.append("body: empty; send the options as a JSON object")
            else:
                parts.append(f"body: must be a JSON object of the options (like "
                             f"{{\"model\": …, \"device\": …}}), got "
                             f"{_json_type(e.get('input'))}")
            continue
        key = loc[0]
        if kind == "extra_forbidden":
            name = spellings.get(key) or ALIASES.get(key)
            if name in taken:  # another spelling of an option already given
                parts.append(f"{key}: the same option as {name}, given twice")
                continue
            near = difflib.get_close_matches(key, list(spellings), n=1)
            parts.append(f"{key}: unknown option of perfcast {command or 'this endpoint'}"
                         + (f" — did you mean {near[0]!r}?" if near else "")
                         + " (the options: /docs)")
        elif kind == "missing":
            parts.append(f"{key}: required")
        elif key in taken:  # a value of the wrong JSON type (strict: "4" is not 4)
            if any(p.startswith(f"{key}: must be") for p in parts):
                continue  # the other member of a union (input_size: a string or a list)
            words = ("a string like \"3,224,224\" or a list of integers"
                     if key == "input_size" else _KIND_WORDS[taken[key].kind])
            parts.append(f"{key}: must be {words}, got {_shown(e.get('input'))}")
        else:
            parts.append(f"{'.'.join(loc)}: {e.get('msg', 'invalid')}")
    return "; ".join(dict.fromkeys(parts)) or "invalid request"


class BodyLimit:
    """ASGI middleware: a request body over ``max_body`` bytes is refused with 413 — by its
    ``Content-Length`` before anything is read, or as soon as a chunked body passes the limit."""

    def __init__(self, app, max_body: int) -> None:
        self.app, self.max_body = app, int(max_body)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.exceptions import HTTPException

        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_big = f"request body over {self.max_body:,} bytes"
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            return await _error(too_big, 2, 413)(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    # an HTTPException: FastAPI passes it on while reading the body (any other
                    # exception there becomes its 400 "error parsing the body"); the app's
                    # handler answers it as 413
                    raise HTTPException(413, too_big)
            return message

        await self.app(scope, limited, send)


class Stats:
    """What ``/healthz`` reports; updated under a lock by the request handlers."""

    def __init__(self) -> None:
        self.started = time.time()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.served = 0
        self.errors = 0
        self.rejected = 0

    def to_dict(self) -> dict[str, Any]:
        from perfcast._version import __version__

        with self.lock:
            return {"status": "ok", "version": __version__,
                    "uptime_s": round(time.time() - self.started, 1),
                    "in_flight": self.in_flight, "served": self.served, "errors": self.errors,
                    "rejected_busy": self.rejected}


#: The routes of the commands (``POST /<route>``), each answering as ``perfcast <command>
#: --json``.
ROUTES = {"predict": "predict", "fit": "fit", "rank": "rank", "cost": "cost", "plan": "plan",
          "mig": "mig", "power-limit": "power-limit"}
#: JSON types of the schema's kinds (an input size may be a list, a device list too).
_JSON_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "list": str | list[str]}


def body_model(command: str):
    """The request body of ``command`` (pydantic), generated from the request schema
    (:func:`perfcast.request.fields.fields_of`): every field by its name, its help as the
    description, its flag aliases accepted as keys; unknown keys are refused. Values are
    checked by :meth:`perfcast.request.Request.of` — the command's checks and messages."""
    from pydantic import AliasChoices, ConfigDict, Field, create_model

    from perfcast.request.fields import fields_of

    spec = {}
    for f in fields_of(command):
        typ = _JSON_TYPES[f.kind]
        if f.name == "input_size":
            typ = str | list[int]
        required = command in f.required
        alias = AliasChoices(f.name, *f.http_aliases()) if f.http_aliases() else None
        spec[f.name] = (typ if required else typ | None,
                        Field(... if required else None, description=f.describe(command),
                              validation_alias=alias))
    name = "".join(p.title() for p in command.split("-")) + "Request"
    # strict: a JSON string is not a number nor 1 a boolean (the command refuses them too)
    return create_model(name, __config__=ConfigDict(extra="forbid", strict=True), **spec)


def _given(body) -> dict[str, Any]:
    """The request's keys that were set (the unset ones take the schema's defaults, as an
    option not given); an input size given as a list becomes a tuple."""
    d = body.model_dump(exclude_unset=True)
    if isinstance(d.get("input_size"), list):
        d["input_size"] = tuple(d["input_size"])
    return d


#: Model spec kinds that import a Python module and call a function of it (``module.path:
#: callable``, ``jax:module.path:callable``): the server refuses them (any client could run
#: any function of the server's Python — ``os:abort`` stops it).
CODE_SPEC_KINDS = ("module", "jax")


def refuse_code_specs(d: dict[str, Any]) -> None:
    """A ``module:callable`` model spec is refused over HTTP (:data:`CODE_SPEC_KINDS`), with
    what to give instead; the command line and the Python API still take them."""
    model = d.get("model")
    if not isinstance(model, str):
        return
    from perfcast.workload.spec import ModelSpec

    try:
        kind = ModelSpec.parse(model).kind
    except (PerfcastError, OSError, ValueError):
        return  # not a callable spec; the request's validation says what is wrong with it
    if kind in CODE_SPEC_KINDS:
        raise PerfcastError(f"perfcast serve does not import and call {model!r} (a "
                            f"module:callable spec runs code in the server); export the model "
                            f"to ONNX and give its path, or use the command line / Python API")


# ------------------------------------------------------------------------------ the handlers
def do_command(command: str, d: dict[str, Any]) -> dict[str, Any]:
    """``perfcast <command> --json``: :func:`perfcast.decisions.answer.answer` (the graph built
    in this process, no forked simulation: the server is threaded)."""
    from perfcast.decisions.answer import answer

    refuse_code_specs(d)
    r = answer(command, d)
    return r.to_dict(top=d.get("top") or 15) if command == "plan" else r.to_dict()


def do_devices() -> list[dict[str, Any]]:
    from perfcast.devices import list_devices

    return [dev.to_dict() for dev in list_devices()]


# ------------------------------------------------------------------------------ the app
def create_app(*, max_concurrency: int = MAX_CONCURRENCY, max_queue: int = MAX_QUEUE,
               max_body: int = MAX_BODY_BYTES, warm: bool = True):
    """The FastAPI application (see the module docstring). ``warm``: load the default shipped
    predictors when the server starts, not on the first request."""
    _require_fastapi()
    import anyio
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.openapi.docs import get_swagger_ui_html
    from starlette.exceptions import HTTPException

    from perfcast._version import __version__

    if max_concurrency < 1 or max_queue < 0 or max_body < 1:
        raise PerfcastError("perfcast serve: --max-concurrency and --max-body must be ≥ 1, "
                            "--max-queue ≥ 0")
    stats = Stats()
    limiter: list = []  # anyio.CapacityLimiter, made in the server's event loop

    app = FastAPI(title="perfcast", version=__version__, docs_url=None,
                  description="Forecast deep-learning model latency, step time, memory and "
                              "energy before running — the perfcast command line as JSON.")
    app.state.stats = stats

    async def run(fn, *args):
        """``fn(*args)`` in a worker thread, within the concurrency and queue bounds."""
        with stats.lock:
            if stats.in_flight >= max_concurrency + max_queue:
                stats.rejected += 1
                return _error(f"busy: {stats.in_flight} requests in flight (at most "
                              f"{max_concurrency} at once + {max_queue} waiting); retry", 1,
                              503, {"Retry-After": "1"})
            stats.in_flight += 1
        if not limiter:
            limiter.append(anyio.CapacityLimiter(max_concurrency))
        try:
            result = await anyio.to_thread.run_sync(fn, *args, limiter=limiter[0])
            with stats.lock:
                stats.served += 1
            return _json_response(result)
        except PerfcastError as exc:
            with stats.lock:
                stats.errors += 1
            return _error(str(exc), exc.exit_code, _status_of(exc))
        except (Exception, SystemExit) as exc:  # one line, like the command; the server
            # keeps serving (SystemExit: a model's code that calls exit())
            with stats.lock:
                stats.errors += 1
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            log.error("internal error: %s: %s", type(exc).__name__, first[:300], exc_info=True)
            return _error(f"internal error: {type(exc).__name__}: {first[:300]}", 1, 500)
        finally:
            with stats.lock:
                stats.in_flight -= 1

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        with stats.lock:
            stats.errors += 1
        command = {r: c for c, r in ROUTES.items()}.get(request.url.path.strip("/"))
        return _error(_one_line_validation(exc.errors(), command,
                                           request.headers.get("content-type", "")), 2, 422)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException):
        """Starlette's and FastAPI's own refusals (404, 405, 413, a body that is not text) in
        the errors' shape: ``{"error": <one line>, "exit_code": 2}``."""
        with stats.lock:
            stats.errors += 1
        status, message = exc.status_code, str(exc.detail)
        path = request.url.path if len(request.url.path) <= 100 else \
            request.url.path[:99] + "…"
        if status == 404:
            message = (f"no {request.method} {path} (endpoints: POST "
                       + ", ".join(f"/{r}" for r in ROUTES.values())
                       + "; GET /devices, /healthz, /docs)")
        elif status == 405:
            allowed = (exc.headers or {}).get("Allow") or "another method"
            message = f"{request.method} {path} is not allowed (use {allowed})"
        elif status == 400 and exc.__cause__ is not None:  # the body could not be decoded
            cause = exc.__cause__
            why = ("not UTF-8 text" if isinstance(cause, UnicodeDecodeError)
                   else str(cause).strip().splitlines()[0][:200] if str(cause).strip()
                   else type(cause).__name__)
            status, message = 422, f"body: not valid JSON ({why})"
        return _error(message, 2 if status < 500 else 1, status, exc.headers)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):  # (ServerErrorMiddleware: a bug)
        with stats.lock:
            stats.errors += 1
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return _error(f"internal error: {type(exc).__name__}: {first}", 1, 500)

    def route(command: str):
        Body = body_model(command)

        async def handler(body: Body):  # type: ignore[valid-type]
            return await run(do_command, command, _given(body))

        handler.__name__ = command.replace("-", "_")
        app.post(f"/{ROUTES[command]}", summary=f"perfcast {command} --json",
                 name=command)(handler)

    for command in ROUTES:
        route(command)

    @app.get("/devices", summary="perfcast devices --json")
    async def devices():
        return await run(do_devices)

    @app.get("/healthz", summary="liveness and counters")
    async def healthz():
        return _json_response(stats.to_dict())

    @app.head("/healthz", include_in_schema=False)
    async def healthz_head():  # load balancers and `curl -I` probe liveness with HEAD
        return _json_response(stats.to_dict())

    static = _swagger_static()
    if static is not None:
        from starlette.staticfiles import StaticFiles

        app.mount("/docs-static", StaticFiles(directory=static), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    async def docs():
        if static is None:  # FastAPI's default: Swagger UI from its CDN
            return get_swagger_ui_html(openapi_url="/openapi.json", title="perfcast API")
        return get_swagger_ui_html(openapi_url="/openapi.json", title="perfcast API",
                                   swagger_js_url="/docs-static/swagger-ui-bundle.js",
                                   swagger_css_url="/docs-static/swagger-ui.css",
                                   swagger_favicon_url="/docs-static/favicon-32x32.png")

    if warm:
        warm_up()
    from perfcast.cache import keep_warm

    keep_warm(WARM_GRAPHS)  # graphs stay in memory between requests (read once from the cache)
    return BodyLimit(app, max_body) if max_body else app


def _swagger_static() -> str | None:
    """Swagger UI's files from the ``swagger-ui-bundle`` package (so ``/docs`` works offline),
    or ``None`` (FastAPI's page then loads them from a CDN)."""
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        return None
    from pathlib import Path

    p = Path(swagger_ui_path)
    return str(p) if (p / "swagger-ui-bundle.js").is_file() else None


def warm_up() -> list[str]:
    """Load what every request reads: the device registry, the shipped manifest and the
    default shipped predictors (each loaded once per process and kept). Returns their ids."""
    from perfcast.devices import list_devices
    from perfcast import shipped

    list_devices()
    loaded = []
    seen = set()
    for e in shipped.manifest():
        key = (e["device"], e["mode"], e["precision"], tuple(e["targets"]))
        if key in seen:
            continue
        seen.add(key)
        try:
            shipped.load_entry(e)
            loaded.append(e["id"])
        except Exception as exc:  # a predictor that cannot load answers its error per request
            log.warning("could not preload %s: %s", e.get("id"), exc)
    return loaded


# ------------------------------------------------------------------------------ running it
def _server_class():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, stopping on SIGTERM / SIGINT without re-raising the signal
        afterwards (uvicorn does, for embedding): the command then exits 0."""

        signals: list[int] = []

        @contextmanager
        def capture_signals(self):
            if threading.current_thread() is not threading.main_thread():
                yield
                return

            def stop(sig, frame):
                self.signals.append(sig)
                if self.should_exit and sig == signal.SIGINT:
                    self.force_exit = True
                self.should_exit = True

            old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, h in old.items():
                    signal.signal(s, h)

    return Server


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
          max_concurrency: int = MAX_CONCURRENCY, max_queue: int = MAX_QUEUE,
          max_body: int = MAX_BODY_BYTES, graceful_s: float = GRACEFUL_S, warm: bool = True,
          access_log: bool = False, on_ready=None) -> dict[str, Any]:
    """Serve until SIGTERM / Ctrl-C; returns the final ``/healthz`` counters (and the signal).
    ``on_ready(url)`` is called once the socket listens."""
    _require_fastapi()
    import socket

    import uvicorn

    if not 0 <= int(port) <= 65535:
        raise PerfcastError(f"--port must be in 0..65535, got {port}")
    try:  # the address first: a busy port or an unknown host is a one-line exit 2
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                             socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
    except OSError as exc:
        raise PerfcastError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    app = create_app(max_concurrency=max_concurrency, max_queue=max_queue, max_body=max_body,
                     warm=warm)
    inner = getattr(app, "app", app)
    config = uvicorn.Config(app, log_level="warning", access_log=access_log,
                            timeout_graceful_shutdown=graceful_s, lifespan="off",
                            limit_concurrency=None)
    if access_log:  # one line per request: uvicorn's access log is at INFO
        logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    server = _server_class()(config)
    server.signals = []
    if on_ready is not None:
        bound = sock.getsockname()
        url = f"http://{host if ':' not in host else f'[{host}]'}:{bound[1]}"

        async def started():  # noqa: RUF029
            on_ready(url)

        _call_when_started(server, started)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    out = inner.state.stats.to_dict()
    out["status"] = "stopped"
    if server.signals:
        out["signal"] = signal.Signals(server.signals[0]).name
    return out


def _call_when_started(server, coro_fn) -> None:
    """Run ``coro_fn()`` once ``server`` has started listening (uvicorn sets ``started``)."""
    original = server.startup

    async def startup(*a, **kw):
        await original(*a, **kw)
        if server.started:
            await coro_fn()

    server.startup = startup


__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "MAX_BODY_BYTES", "MAX_CONCURRENCY", "MAX_QUEUE",
           "create_app", "serve", "warm_up"]
