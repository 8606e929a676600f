"""Issue 18 benchmarks: concurrent writers and collectors on PostgreSQL and SQLite-WAL, and the
corpus build on Ray (2 local workers) vs the process pool — the per-task costs the scaling plan
in BENCHMARKS.md starts from.

    .venv/bin/python benchmarks/distributed_bench.py
        [--part store|collect|collect-ray|ray|driver-io|measure|corpus|all] [--rounds 2]
        [--json reports/distributed/bench.json]

PostgreSQL: a throwaway cluster from Debian's server binaries (tests/postgres_server.py, as the
tests use it; ``fsync=off``, loopback) or ``$PERFCAST_TEST_POSTGRES_URL``. SQLite: WAL, as
perfcast opens it (``synchronous=NORMAL``). Measuring is faked in the collector part (a runner
returning a fixed row at once; those rows are thrown away with the throwaway stores): what is
timed is the store and claim overhead of a collector per configuration (``collect-ray``: of the
Ray driver, 8 measuring slots on a local cluster). Two collectors on one
SQLite store: the second waits for the first (``--wait``; one collector per store and machine
by design), so its row is the serialized case. ``ray``: a local cluster's start, a no-op task's
round trip, a task returning a graph-sized result, a fresh worker's first graph task (imports).
``measure``: the real per-configuration cost of measuring, read from the project's CPU dataset
(``duration_s`` of its rows; nothing is measured here). ``corpus``: real graphs (timm, meta
device) built by ``perfcast corpus`` into fresh directories, pool and Ray alternated (pool, Ray,
Ray, pool, …: the machine is shared, so load drifts), Ray's memory monitor off unless
``--ray-memory-monitor`` (the pool has none; on this shared machine other jobs' memory made it
kill perfcast's tasks). ``--json`` with one ``--part``: that part's entries are replaced in the
file, the others kept.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WRITER = textwrap.dedent("""
    import json, random, sys, time
    from pathlib import Path
    from perfcast.profiler.collect import Sweep
    from perfcast.store import Measurement, MeasurementStore
    url, seed, go, n = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    cfgs = Sweep(models=[f"timm:m{i}" for i in range(n // 20)], batch_sizes=list(range(1, 11)),
                 modes=["infer", "train"]).configs("cpu", None)
    random.Random(seed).shuffle(cfgs)
    store = MeasurementStore(url)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    t = time.perf_counter()
    won = sum(store.add(Measurement(config=c, time_ms_median=1.0)) for c in cfgs)
    print(json.dumps({"won": won, "s": time.perf_counter() - t}), flush=True)
""")

COLLECTOR = textwrap.dedent("""
    import json, socket, sys, time
    from pathlib import Path
    url, host, go, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    socket.gethostname = lambda: host
    from perfcast.profiler.collect import CollectSettings, Sweep, collect
    from perfcast.store import Measurement, MeasurementStore
    cfgs = Sweep(models=[f"timm:m{i}" for i in range(n // 20)], batch_sizes=list(range(1, 11)),
                 modes=["infer", "train"]).configs("cpu", None)
    store = MeasurementStore(url)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    t = time.perf_counter()
    counts = collect(store, cfgs, CollectSettings(cooldown_s=0, wait_for_lock=True,
                                                  lock_poll_s=0.2),
                     runner=lambda c, **kw: Measurement(config=c, time_ms_median=1.0))
    print(json.dumps({**counts, "s": time.perf_counter() - t}), flush=True)
""")


def _race(code: str, url: str, argv: list[list[str]], tmp: Path) -> tuple[float, list[dict]]:
    """Start one process per argv (each ready before any begins), release them together."""
    go = Path(tempfile.mkdtemp(dir=tmp)) / "go"
    procs = [subprocess.Popen([sys.executable, "-c", code, url, *a[:1], str(go), *a[1:]],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for a in argv]
    for p in procs:
        line = p.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(p.stderr.read()[-2000:])
    t = time.perf_counter()
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(err[-2000:])
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return time.perf_counter() - t, outs


def _rows(url: str) -> tuple[int, int]:
    from sqlalchemy import text

    from perfcast.store import MeasurementStore

    st = MeasurementStore(url, readonly=True)
    with st.engine.connect() as c:
        n, distinct = c.execute(text("SELECT count(*), count(DISTINCT config_key) "
                                     "FROM measurements")).one()
    st.close()
    return int(n), int(distinct)


def _stores(pg_admin: str, tmp: Path, tag: str) -> dict[str, str]:
    from tests.postgres_server import new_database

    return {"postgresql": new_database(pg_admin), "sqlite-wal": str(tmp / f"{tag}.db")}


def bench_store(pg_admin: str, tmp: Path, n: int = 2000) -> list[dict]:
    """1 and 2 processes each writing the same n configurations (shuffled) with store.add."""
    out = []
    for writers in (1, 2):
        for kind, url in _stores(pg_admin, tmp, f"w{writers}").items():
            from perfcast.store import MeasurementStore

            MeasurementStore(url).close()
            argv = [[str(seed), str(n)] for seed in range(1, writers + 1)]
            wall, res = _race(WRITER, url, argv, tmp)
            rows, distinct = _rows(url)
            out.append({"part": "store.add", "store": kind, "processes": writers,
                        "attempts": n * writers, "rows": rows, "duplicates": rows - distinct,
                        "won": [r["won"] for r in res], "wall_s": round(wall, 2),
                        "rows_per_s": round(rows / wall, 1),
                        "attempts_per_s": round(n * writers / wall, 1)})
            print(out[-1], flush=True)
    return out


def bench_collect(pg_admin: str, tmp: Path, n: int = 600) -> list[dict]:
    """Collectors with an instant runner: 1 on each store, 2 ("hosts") on PostgreSQL, 2 on one
    SQLite store (the second waits for the collector lock, by design, then skips everything)."""
    out = []
    for collectors in (1, 2):
        for kind, url in _stores(pg_admin, tmp, f"c{collectors}").items():
            from perfcast.store import MeasurementStore

            MeasurementStore(url).close()
            try:
                wall, res = _race(COLLECTOR, url, [[f"host-{i}", str(n)]
                                                   for i in range(collectors)], tmp)
            except RuntimeError as exc:
                last = str(exc).strip().splitlines()[-1]
                out.append({"part": "collect", "store": kind, "collectors": collectors,
                            "refused": last[:200]})
                print(out[-1], flush=True)
                continue
            rows, distinct = _rows(url)
            out.append({"part": "collect", "store": kind, "collectors": collectors,
                        "configs": n, "rows": rows, "duplicates": rows - distinct,
                        "ok": [r["ok"] for r in res],
                        "skipped": [r["skipped"] for r in res],
                        "claimed_elsewhere": [r.get("claimed_elsewhere", 0) for r in res],
                        "wall_s": round(wall, 2), "rows_per_s": round(rows / wall, 1),
                        "ms_per_config_per_collector": round(
                            1e3 * max(r["s"] for r in res) / max(1, max(r["ok"] for r in res)),
                            2)})
            print(out[-1], flush=True)
    return out


RAY_TASKS = textwrap.dedent("""
    import json, os, sys, time
    t = time.perf_counter()
    from perfcast.distributed import cluster
    out = {}
    with cluster("local", num_cpus=2) as ray:
        out["cluster_start_s"] = time.perf_counter() - t

        @ray.remote(num_cpus=1)
        def noop(i):
            return i

        @ray.remote(num_cpus=1)
        def blob(n):
            return b"x" * n

        @ray.remote(num_cpus=1)
        def graph_twice():
            from perfcast.frontends import build_graph
            from perfcast.workload import Workload
            times = []
            for _ in range(2):  # a fresh worker (imports torch, timm), then warm
                t = time.perf_counter()
                build_graph(Workload.of("timm:resnet18", batch_size=2, input_size=64))
                times.append(time.perf_counter() - t)
            return times

        ray.get([noop.remote(i) for i in range(4)])  # workers up
        for name, fn, arg, n in (("noop", noop, None, 400), ("blob_150kb", blob, 150_000, 200)):
            t = time.perf_counter()
            ray.get([fn.remote(arg if arg is not None else i) for i in range(n)])
            out[f"{name}_ms_per_task"] = 1e3 * (time.perf_counter() - t) / n
            t = time.perf_counter()
            for i in range(50):
                ray.get(fn.remote(arg if arg is not None else i))
            out[f"{name}_ms_round_trip"] = 1e3 * (time.perf_counter() - t) / 50
        cold, warm = ray.get(graph_twice.remote())
        out["graph_resnet18_fresh_worker_s"], out["graph_resnet18_warm_worker_s"] = cold, warm
        t = time.perf_counter()
    out["cluster_stop_s"] = time.perf_counter() - t
    print(json.dumps(out))
""")


def bench_ray(reps: int = 3) -> list[dict]:
    """A local cluster's fixed and per-task costs (see the module docstring), ``reps`` times."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = []
    for _ in range(reps):
        r = subprocess.run([sys.executable, "-c", RAY_TASKS], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(r.stderr[-2000:])
        d = json.loads(r.stdout.strip().splitlines()[-1])
        out.append({"part": "ray", **{k: round(v, 3) for k, v in d.items()}})
        print(out[-1], flush=True)
    return out


RAY_COLLECT = textwrap.dedent("""
    import json, sys, time
    url, n = sys.argv[1], int(sys.argv[2])
    import ray
    from perfcast.distributed import CPU_PROFILER
    ray.init(address="local", num_cpus=8, resources={CPU_PROFILER: 8}, include_dashboard=False,
             log_to_driver=False, configure_logging=False, object_store_memory=256 * 2**20)
    from perfcast.profiler.collect import CollectSettings, Sweep, collect
    from perfcast.store import Measurement, MeasurementStore
    cfgs = Sweep(models=[f"timm:m{i}" for i in range(n // 20 + 1)],
                 batch_sizes=list(range(1, 11)), modes=["infer", "train"]).configs("cpu", 1)
    store = MeasurementStore(url)
    def instant(c, **kw):
        return Measurement(config=c, time_ms_median=1.0)
    collect(store, cfgs[:20], CollectSettings(cooldown_s=0), runner=instant,
            ray_address="auto")  # workers up
    t = time.perf_counter()
    counts = collect(store, cfgs[20:20 + n], CollectSettings(cooldown_s=0), runner=instant,
                     ray_address="auto")
    print(json.dumps({**counts, "s": time.perf_counter() - t, "n": n}))
    ray.shutdown()
""")


def bench_collect_ray(pg_admin: str, tmp: Path, n: int = 400) -> list[dict]:
    """The Ray collect driver's own cost per configuration: an instant runner on a local
    cluster of 8 measuring slots (so that the driver, not the slots, is the limit), into each
    store: how many measuring slots one driver can keep busy."""
    from perfcast.store import MeasurementStore

    env = {**os.environ, "PYTHONWARNINGS": "ignore", "RAY_memory_monitor_refresh_ms": "0"}
    out = []
    for kind, url in _stores(pg_admin, tmp, "cr").items():
        MeasurementStore(url).close()
        r = subprocess.run([sys.executable, "-c", RAY_COLLECT, url, str(n)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=1200)
        if r.returncode != 0:
            raise RuntimeError(r.stderr[-2000:])
        d = json.loads(r.stdout.strip().splitlines()[-1])
        rows, distinct = _rows(url)
        out.append({"part": "collect-ray", "store": kind, "configs": d["n"], "ok": d["ok"],
                    "rows": rows, "duplicates": rows - distinct, "wall_s": round(d["s"], 2),
                    "driver_ms_per_config": round(1e3 * d["s"] / d["n"], 2)})
        print(out[-1], flush=True)
    return out


def driver_io(tmp: Path, n: int = 300, size: int = 6800) -> list[dict]:
    """What the corpus driver does per graph a task returns: an atomic, fsync'ed write of the
    graph file (mean size of the benchmark corpus) and an index line flushed and fsync'ed."""
    from perfcast.paths import write_file_atomically

    d = tmp / "io"
    (d / "graphs").mkdir(parents=True)
    blob = os.urandom(size)
    t = time.perf_counter()
    with open(d / "index.csv", "a") as f:
        for i in range(n):
            write_file_atomically(d / "graphs" / f"{i}.npz", blob)
            f.write(f"{i},ok\n")
            f.flush()
            os.fsync(f.fileno())
    ms = 1e3 * (time.perf_counter() - t) / n
    out = [{"part": "driver-io", "graphs": n, "bytes": size, "ms_per_graph": round(ms, 2)}]
    print(out[-1], flush=True)
    return out


def measurement_costs() -> list[dict]:
    """Per-configuration wall time of real measurements (``duration_s``: subprocess start,
    model build, warm-up and timed iterations) in the project's CPU dataset, by mode."""
    import statistics

    from perfcast.paths import local_cpu_db
    from perfcast.store import MeasurementStore

    st = MeasurementStore(local_cpu_db(), readonly=True)
    df = st.to_dataframe()
    st.close()
    out = []
    for mode in ("infer", "train", "all"):
        d = df if mode == "all" else df[df["mode"] == mode]
        v = sorted(float(x) for x in d["duration_s"].dropna())
        out.append({"part": "measure", "source": "datasets/cpu/measurements.db", "mode": mode,
                    "configs": len(v), "median_s": round(statistics.median(v), 2),
                    "p10_s": round(v[int(0.1 * len(v))], 2),
                    "p90_s": round(v[int(0.9 * len(v))], 2),
                    "total_h": round(sum(v) / 3600, 2)})
        print(out[-1], flush=True)
    return out


CORPUS = ["--families", "resnet,mobilenetv3,efficientnet,vision_transformer,convnext",
          "--variants-per-family", "5", "--input-sizes", "64,96", "--batch-sizes", "1,2,4,8",
          "--workers", "2", "--json"]


def bench_corpus(tmp: Path, rounds: int = 2, memory_monitor: bool = False) -> list[dict]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = []
    order = [b for r in range(rounds) for b in (("pool", "ray") if r % 2 == 0 else
                                                ("ray", "pool"))]
    for i, backend in enumerate(order):
        d = tmp / f"corpus-{i}"
        cmd = [sys.executable, "-m", "perfcast", "corpus", "--out", str(d), *CORPUS]
        run_env = env
        if backend == "ray":
            cmd.append("--ray")
            if not memory_monitor:  # as the pool, which has none (see the module docstring)
                run_env = {**env, "RAY_memory_monitor_refresh_ms": "0"}
        t = time.perf_counter()
        r = subprocess.run(cmd, cwd=REPO, env=run_env, capture_output=True, text=True,
                           timeout=3600)
        wall = time.perf_counter() - t
        if r.returncode != 0:
            raise RuntimeError(r.stderr[-2000:])
        s = json.loads(r.stdout)
        import csv

        with open(d / "index.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        worker_s = sum(float(x["seconds"] or 0) for x in rows)
        npz = [p.stat().st_size for p in (d / "graphs").glob("*.npz")]
        out.append({"part": "corpus", "backend": backend, "graphs": s["ok"],
                    "failed": s["failed"] + s["timeout"], "wall_s": round(wall, 1),
                    "worker_s": round(worker_s, 1),
                    "npz_mean_kb": round(sum(npz) / max(1, len(npz)) / 1024, 1),
                    "loadavg_1m_after": round(os.getloadavg()[0], 2)})
        print(out[-1], flush=True)
    pool = [r["wall_s"] for r in out if r["backend"] == "pool"]
    ray = [r["wall_s"] for r in out if r["backend"] == "ray"]
    out.append({"part": "corpus-summary", "pool_wall_s": pool, "ray_wall_s": ray,
                "ray_memory_monitor": memory_monitor,
                "ray_overhead_pct": round(100 * (sum(ray) / sum(pool) - 1), 1)})
    print(out[-1], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["store", "collect", "collect-ray", "ray", "driver-io",
                                       "measure", "corpus", "all"], default="all")
    ap.add_argument("--rounds", type=int, default=2,
                    help="corpus: pool/Ray pairs (alternating order)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--ray-memory-monitor", action="store_true",
                    help="corpus: leave Ray's memory monitor on")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    results: list[dict] = []
    tmp = Path(tempfile.mkdtemp(prefix="perfcast-dist-bench-"))
    server = None
    if a.part in ("store", "collect", "collect-ray", "all"):
        from tests import postgres_server

        server = postgres_server.start()
    try:
        if a.part in ("store", "all"):
            results += bench_store(server.admin_url, tmp)
        if a.part in ("collect", "all"):
            results += bench_collect(server.admin_url, tmp)
        if a.part in ("collect-ray", "all"):
            results += bench_collect_ray(server.admin_url, tmp)
        if a.part in ("ray", "all"):
            results += bench_ray()
        if a.part in ("driver-io", "all"):
            results += driver_io(tmp)
        if a.part in ("measure", "all"):
            results += measurement_costs()
        if a.part in ("corpus", "all"):
            results += bench_corpus(tmp, a.rounds, a.ray_memory_monitor)
    finally:
        if server is not None:
            server.stop()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        from perfcast.paths import write_file_atomically

        if a.part != "all" and Path(a.json).exists():  # keep the other parts' entries
            parts = {"store": {"store.add"}, "collect": {"collect"},
                     "collect-ray": {"collect-ray"}, "ray": {"ray"}, "driver-io": {"driver-io"},
                     "measure": {"measure"}, "corpus": {"corpus", "corpus-summary"}}[a.part]
            old = json.loads(Path(a.json).read_text())
            results = [r for r in old if r.get("part") not in parts] + results
        write_file_atomically(a.json, json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    random.seed(0)
    main()
