"""Load test of ``perfcast serve`` (issue #31, item 4) — loopback only, bounded.

    .venv/bin/python benchmarks/load_serve.py [--clients 8] [--seconds 30] [--requests 10000]
        [--json reports/serve_load.json]

Starts ``perfcast serve`` on a free 127.0.0.1 port (``--url`` uses a running one instead) and
runs three phases, each with ``--clients`` client threads holding one keep-alive connection
each:

1. **steady** — ``--seconds`` of ``POST /predict`` on cached graphs (a fixed mix of models,
   devices and batch sizes, each answered once before timing): throughput, p50 / p99 latency;
2. **memory** — ``--requests`` more of the same; the server's RSS sampled every 1,000 requests
   (growth = last sample − the first, after the first 1,000);
3. **mix** — cached requests, bad requests (batch size 0, an unknown device, an unknown option,
   broken JSON, a body over the size limit) and requests for models whose graph is not cached
   yet, all at once: every bad request must be answered 4xx with the command's message, every
   other one 200 — no 5xx, no dropped connection.

Prints the figures; exits 1 when any request went wrong (an error status where 200 was due, a
4xx without the expected message, a dropped connection). The numbers in BENCHMARKS.md come
from this script.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]

#: Requests on cached graphs (each sent once before timing, so graph and simulation are cached).
CACHED = [
    {"model": "timm:resnet50", "device": "rtx4090", "batch_size": b, "precision": "amp"}
    for b in (1, 32, 256)
] + [
    {"model": "timm:resnet50", "device": "rtx3090", "mode": "train", "batch_size": b}
    for b in (16, 64)
] + [
    {"model": "timm:resnet10t", "device": d, "batch_size": 8, "input_size": "3,64,64"}
    for d in ("a100-40gb", "h100-sxm", "cpu", "rtx2080ti")
]

#: Bad requests: (body bytes, expected status, a fragment the error must contain).
BAD = [
    (b'{"model": "timm:resnet50", "device": "rtx4090", "batch_size": 0}', 422, "batch size"),
    (b'{"model": "timm:resnet50", "device": "nosuchgpu"}', 422, "nosuchgpu"),
    (b'{"model": "timm:resnet50", "device": "rtx4090", "bogus": 1}', 422, "unknown option"),
    (b'{"model": "timm:resnet50", "device": ', 422, "JSON"),
    (b'{"model": "timm:nosuchmodel_xyz", "device": "rtx4090"}', 422, "nosuchmodel_xyz"),
    (b'{"model": "' + b"x" * 70_000 + b'", "device": "rtx4090"}', 413, "bytes"),
]

#: Models whose graphs the mix phase asks for uncached (small, so that they build quickly).
UNCACHED = ["timm:lcnet_050", "timm:mobilenetv3_small_050", "timm:regnetx_002",
            "torchvision:squeezenet1_1"]


class Client:
    """One keep-alive connection; ``post`` returns ``(status, body bytes, seconds)``."""

    def __init__(self, url: str) -> None:
        u = urlparse(url)
        self.host, self.port = u.hostname, u.port
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=600)

    def post(self, path: str, body: bytes) -> tuple[int, bytes, float]:
        t0 = time.perf_counter()
        for attempt in (0, 1):
            try:
                self.conn.request("POST", path, body=body,
                                  headers={"Content-Type": "application/json"})
                r = self.conn.getresponse()
                data = r.read()
                return r.status, data, time.perf_counter() - t0
            except (http.client.HTTPException, ConnectionError, OSError):
                # the server closed this connection (e.g. after a 413): one reconnect; a
                # second failure counts as a dropped request
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
                if attempt:
                    return -1, b"", time.perf_counter() - t0
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.conn.close()


def _rss_mb(pid: int) -> float:
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


def start_server(env: dict, max_concurrency: int) -> tuple[subprocess.Popen, str]:
    cli = [sys.executable, "-m", "perfcast", "serve", "--port", "0", "--max-concurrency",
           str(max_concurrency)]
    proc = subprocess.Popen(cli, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 300
    seen = []
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep draining
            return proc, m.group(1).rstrip(".,")
    proc.kill()
    raise SystemExit(f"perfcast serve did not start:\n{''.join(seen)}")


def run_clients(url: str, n: int, make_body, *, seconds: float | None = None,
                total: int | None = None, on_count=None) -> list[tuple[int, float, str]]:
    """``n`` threads sending ``make_body(rng)`` → (path, body, expect) until ``seconds`` passed or
    ``total`` requests were sent; returns ``(status, seconds, problem)`` per request."""
    results: list[tuple[int, float, str]] = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds if seconds else None
    sent = [0]

    def worker(i: int) -> None:
        rng = random.Random(i)
        c = Client(url)
        try:
            while True:
                with lock:
                    if (total is not None and sent[0] >= total) or \
                            (stop is not None and time.perf_counter() >= stop):
                        return
                    sent[0] += 1
                    k = sent[0]
                path, body, expect = make_body(rng)
                status, data, dt = c.post(path, body)
                problem = _check(status, data, expect)
                with lock:
                    results.append((status, dt, problem))
                if on_count is not None:
                    on_count(k)
        finally:
            c.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _check(status: int, data: bytes, expect) -> str:
    """'' when the answer is what ``expect`` says (``None``: 200 with a time; else ``(status,
    fragment)``), else what went wrong."""
    if status == -1:
        return "connection dropped"
    try:
        d = json.loads(data)
    except ValueError:
        return f"HTTP {status}: not JSON"
    if expect is None:
        if status != 200:
            return f"HTTP {status}: {d.get('error', '')[:120]}"
        return "" if d.get("time_ms") else "200 without time_ms"
    want, fragment = expect
    if status != want:
        return f"HTTP {status} (wanted {want}): {str(d)[:120]}"
    if fragment.lower() not in str(d.get("error", "")).lower():
        return f"HTTP {status} without {fragment!r}: {d.get('error')}"
    return ""


def _stats(results, seconds: float | None = None) -> dict:
    lat = sorted(dt for s, dt, _ in results)
    out = {"requests": len(results), "errors": sum(1 for *_, p in results if p)}
    if lat:
        out.update({"p50_ms": round(1e3 * lat[len(lat) // 2], 2),
                    "p99_ms": round(1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 2),
                    "max_ms": round(1e3 * lat[-1], 1)})
    if seconds:
        out["throughput_rps"] = round(len(results) / seconds, 1)
    problems = sorted({p for *_, p in results if p})
    if problems:
        out["problems"] = problems[:10]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--max-concurrency", type=int, default=4)
    ap.add_argument("--url", default=None, help="a running server instead of starting one")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    tmp = None
    if not os.environ.get("PERFCAST_CACHE_DIR") and not args.url:
        tmp = tempfile.mkdtemp(prefix="perfcast-load-")  # the mix phase's graphs are new
        env["PERFCAST_CACHE_DIR"] = str(Path(tmp) / "graphs")
    proc = None
    if args.url:
        url, pid = args.url.rstrip("/"), None
    else:
        proc, url = start_server(env, args.max_concurrency)
        pid = proc.pid
    report: dict = {"url": url, "clients": args.clients,
                    "max_concurrency": args.max_concurrency, "cpu_count": os.cpu_count()}
    try:
        c = Client(url)
        t0 = time.perf_counter()
        for body in CACHED:  # graphs and simulations into the cache
            status, data, _ = c.post("/predict", json.dumps(body).encode())
            if status != 200:
                raise SystemExit(f"warm-up request {body} failed: HTTP {status} {data[:300]!r}")
        c.close()
        report["warm_up_s"] = round(time.perf_counter() - t0, 1)
        print(f"server {url}; {len(CACHED)} cached requests warmed in {report['warm_up_s']} s",
              flush=True)

        def cached(rng):
            return "/predict", json.dumps(rng.choice(CACHED)).encode(), None

        steady = run_clients(url, args.clients, cached, seconds=args.seconds)
        report["steady"] = _stats(steady, args.seconds)
        print(f"steady ({args.clients} clients, {args.seconds:g} s): {report['steady']}",
              flush=True)
        # one client, each cached request alone: the service time per kind of request
        c = Client(url)
        alone = {}
        for body in CACHED:
            raw = json.dumps(body).encode()
            times = sorted(c.post("/predict", raw)[2] for _ in range(20))
            alone[f"{body['model']} {body['device']} {body.get('mode', 'infer')} "
                  f"b{body['batch_size']}"] = round(1e3 * times[len(times) // 2], 2)
        c.close()
        report["one_client_p50_ms"] = alone
        print(f"one client, p50 per request: {alone}", flush=True)

        rss = []
        if pid is not None:
            rss.append((0, _rss_mb(pid)))
            mark = threading.Lock()

            def on_count(k: int) -> None:
                if k % 1000 == 0:
                    with mark:
                        rss.append((k, _rss_mb(pid)))
        else:
            on_count = None
        t0 = time.perf_counter()
        mem = run_clients(url, args.clients, cached, total=args.requests, on_count=on_count)
        secs = time.perf_counter() - t0
        report["memory"] = _stats(mem, secs)
        if rss:
            rss.append((args.requests, _rss_mb(pid)))
            after_first = [m for k, m in rss if k >= 1000] or [rss[-1][1]]
            report["memory"].update({
                "rss_mb": [[k, round(m, 1)] for k, m in rss],
                "growth_mb_after_1000": round(after_first[-1] - after_first[0], 1),
                "growth_mb_total": round(rss[-1][1] - rss[0][1], 1)})
        print(f"memory ({args.requests:,} requests): {report['memory']}", flush=True)

        uncached = [{"model": m, "device": "rtx4090", "batch_size": 4, "input_size": "3,96,96"}
                    for m in UNCACHED]
        queue = ([("/predict", json.dumps(b).encode(), None) for b in uncached]
                 + [("/predict", body, (st, frag)) for body, st, frag in BAD] * 3)
        qlock = threading.Lock()

        def mixed(rng):
            with qlock:
                if queue:
                    return queue.pop(rng.randrange(len(queue)))
            return cached(rng)

        n_mix = max(200, 10 * args.clients)
        t0 = time.perf_counter()
        mix = run_clients(url, args.clients, mixed, total=n_mix)
        secs = time.perf_counter() - t0
        report["mix"] = _stats(mix, secs)
        report["mix"].update({"bad": 3 * len(BAD), "uncached": len(uncached),
                              "statuses": {str(s): sum(1 for x, *_ in mix if x == s)
                                           for s in sorted({x for x, *_ in mix})}})
        print(f"mix ({n_mix} requests: {3 * len(BAD)} bad, {len(uncached)} uncached models, "
              f"the rest cached): {report['mix']}", flush=True)
        c = Client(url)  # still alive and answering
        status, data, _ = c.post("/predict", json.dumps(CACHED[0]).encode())
        c.close()
        report["alive_after"] = status == 200
    finally:
        if proc is not None:
            proc.terminate()  # SIGTERM: graceful
            try:
                report["exit_code"] = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                report["exit_code"] = None
        if tmp:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    ok = (report["steady"]["errors"] == 0 and report["memory"]["errors"] == 0
          and report["mix"]["errors"] == 0 and report["alive_after"]
          and report.get("exit_code", 0) == 0)
    report["ok"] = ok
    print(f"{'OK' if ok else 'FAILED'}: server exit code {report.get('exit_code')}", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
