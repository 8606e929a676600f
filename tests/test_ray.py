"""The Ray backend (issue 18, item 1): ``collect``, ``corpus`` and ``evaluate`` with ``--ray``
on a local Ray cluster — end to end, results written as each task finishes, a driver killed
midway (SIGKILL) and re-run losing and duplicating nothing: ``perfcast collect --ray`` measuring
for real into SQLite, collect into PostgreSQL (a fixed runner), ``perfcast corpus --ray``;
``--limit 20`` and ``--retry-failed``; a crashed task as a failed row; evaluate as the serial run.

One local cluster serves the module (2 CPUs, loopback only, the CPU-profiler slot, the
repository on the workers' PYTHONPATH): commands run in this process use it as it is, drivers in
subprocesses join it by its address; one test starts a command's own local cluster
(``--ray`` alone). Skipped, with the reason, where Ray is not installed
(``pip install 'perfcast[ray]'``).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfcast.faces.cli import main
from perfcast.store import MeasurementStore

REPO = Path(__file__).resolve().parents[1]
TINY = "tests.models_for_tests:tiny_cnn"


def test_ray_missing_or_bad_address_is_exit_2(tmp_path, capsys, monkeypatch):
    assert main(["collect", "--models", TINY, "--ray", "not an address", "--db",
                 str(tmp_path / "m.db")]) == 2
    err = capsys.readouterr().err
    assert "--ray takes no value (start a local cluster), auto, HOST:PORT" in err
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    assert main(["corpus", "--out", str(tmp_path / "c"), "--families", "resnet",
                 "--variants-per-family", "1", "--input-sizes", "32", "--ray"]) == 2
    err = capsys.readouterr().err
    assert "--ray needs Ray, which is not installed: pip install 'perfcast[ray]'" in err
    assert len(err.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory):
    """The module's local Ray cluster; its GCS address (``127.0.0.1:PORT``)."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'perfcast[ray]')")
    env = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
           # Ray's memory monitor kills tasks when the machine (shared with other jobs) is
           # nearly full: that would be Ray's doing, not perfcast's, and fail these tests
           "RAY_memory_monitor_refresh_ms": "0",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p),
           "PERFCAST_CACHE_DIR": str(tmp_path_factory.mktemp("ray-graph-cache"))}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import ray

    from perfcast.distributed import CPU_PROFILER

    ray.init(address="local", num_cpus=2, resources={CPU_PROFILER: 1}, include_dashboard=False,
             log_to_driver=False, configure_logging=False, object_store_memory=256 * 2**20)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _rows(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT id, config_key, status, time_ms_median, host, created_at "
                           "FROM measurements ORDER BY id").fetchall()
    finally:
        con.close()


# --------------------------------------------------------------------------- collect
def test_collect_on_ray_failed_task_is_a_failed_row(ray_address, tmp_path, capsys):
    from perfcast.profiler.collect import CollectSettings, Sweep, collect

    store = MeasurementStore(tmp_path / "m.db")
    cfgs = Sweep(models=[TINY], batch_sizes=[1, 2], input_sizes=["3,8,8"]).configs("cpu", None)
    from tests.ray_helpers import die, slow_runner

    counts = collect(store, cfgs, CollectSettings(cooldown_s=0), runner=die,
                     ray_address=ray_address)  # the worker process dies mid-task
    assert counts["failed"] == 2
    df = store.to_dataframe()
    assert set(df["status"]) == {"failed"}
    assert all(r.startswith("ray task failed: ") for r in df["reason"]), list(df["reason"])
    # Ray's own "(raylet) A worker died …" message goes to stderr, never into stdout (--json)
    seen = ""
    for _ in range(30):
        cap = capsys.readouterr()
        assert "worker died" not in cap.out.lower(), cap.out
        seen += cap.err
        if "worker died" in seen.lower():
            break
        time.sleep(0.1)

    counts = collect(store, cfgs, CollectSettings(cooldown_s=0, retry_failed=True),
                     runner=slow_runner, ray_address=ray_address)
    assert counts["ok"] == 2 and store.count() == 2
    assert set(store.to_dataframe()["status"]) == {"ok"}


_DRIVER = textwrap.dedent("""
    import sys
    from perfcast.profiler.collect import CollectSettings, Sweep, collect
    from perfcast.store import MeasurementStore
    from tests.ray_helpers import slow_runner
    url, address = sys.argv[1], sys.argv[2]
    cfgs = Sweep(models=["tests.models_for_tests:tiny_cnn"], batch_sizes=list(range(1, 13)),
                 input_sizes=["3,8,8"]).configs("cpu", None)
    print(collect(MeasurementStore(url), cfgs, CollectSettings(cooldown_s=0),
                  runner=slow_runner, ray_address=address))
""")


def _until(cond, proc, timeout_s: float = 240) -> None:
    """Wait until ``cond()`` or ``proc`` ended or the time is up."""
    deadline = time.time() + timeout_s
    while not cond() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)


def test_collect_cli_on_ray_killed_midway_then_rerun_measures_each_config_once(
        ray_address, tmp_path, capsys):
    """``perfcast collect --ray ADDRESS`` measuring for real (pinned to one CPU per
    ``--threads 1``) is SIGKILLed after its first row; the re-run (in this process, on the same
    cluster) measures only the rest: each configuration once, the first rows unchanged."""
    db = tmp_path / "m.db"
    args = ["collect", "--models", TINY, "--batch-sizes", "1,2,3,4", "--input-sizes", "3,8,8",
            "--iters", "3", "--warmup", "0", "--cooldown", "0", "--threads", "1", "--db",
            str(db), "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "perfcast", *args, "--ray", ray_address],
                         cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    def written() -> int:
        try:
            return len(_rows(db))
        except sqlite3.OperationalError:  # not created yet
            return 0

    _until(lambda: written() >= 1, p)
    assert p.poll() is None, p.communicate()[1][-800:]  # still running: killed midway
    p.send_signal(signal.SIGKILL)
    p.wait()
    before = _rows(db)
    assert 1 <= len(before) < 4
    assert main([*args, "--ray"]) == 0  # (this process is the module cluster's driver)
    s = json.loads(capsys.readouterr().out)
    assert s["skipped"] == len(before) and s["ok"] == 4 - len(before) and s["failed"] == 0
    assert s["rows_in_store"] == 4
    after = _rows(db)
    assert len(after) == 4 and len({r[1] for r in after}) == 4  # each configuration once
    assert after[:len(before)] == before  # what the killed driver wrote, unchanged
    df = MeasurementStore(db, readonly=True).to_dataframe()
    assert (df["status"] == "ok").all() and (df["time_ms_median"] > 0).all()
    assert (df["threads"] == 1).all()
    assert (df["n"] == 3).all() and df["host"].notna().all()
    first_cpu = min(os.sched_getaffinity(0))
    assert all(json.loads(e)["affinity"] == [first_cpu] for e in df["env_json"])  # pinned
    assert main([*args, "--ray", ray_address]) == 0  # by address: nothing left to measure
    assert json.loads(capsys.readouterr().out)["skipped"] == 4


def test_pinned_cpus():
    from perfcast.profiler.collect import pinned_cpus

    assert pinned_cpus(2, {5, 3, 9}) == [3, 5]
    assert pinned_cpus(8, {1, 0}) == [0, 1]
    assert pinned_cpus(None, {0, 1}) is None  # torch's default threads: not pinned


def test_collect_on_ray_driver_killed_midway_loses_and_duplicates_nothing(ray_address,
                                                                         pg_url):
    """The same on a PostgreSQL store, through the Python API (a fixed 0.4 s runner: 12
    configurations, killed after 3); the CLI on SQLite is tested above."""
    store_url = pg_url

    def rows():
        st = MeasurementStore(store_url, readonly=True)
        try:
            df = st.to_dataframe()
        finally:
            st.close()
        return [tuple(r) for r in df[["id", "config_key", "status", "time_ms_median",
                                      "created_at"]].itertuples(index=False)]

    MeasurementStore(store_url).close()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-c", _DRIVER, store_url, ray_address], cwd=REPO,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while len(rows()) < 3 and p.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert p.poll() is None, p.communicate()[1][-800:]  # still running: killed midway
    p.send_signal(signal.SIGKILL)
    p.wait()
    before = rows()
    assert 3 <= len(before) < 12
    r = subprocess.run([sys.executable, "-c", _DRIVER, store_url, ray_address], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    after = rows()
    assert len(after) == 12 and len({k for _, k, *_ in after}) == 12  # each once
    assert set(before) <= set(after)  # what the killed driver wrote is still there, unchanged
    assert all(s == "ok" and t == 1.0 + i for i, (_, _, s, t, _) in
               enumerate(sorted(after, key=lambda x: x[3]), start=1))
    assert f"'ok': {12 - len(before)}" in r.stdout and f"'skipped': {len(before)}" in r.stdout


@pytest.mark.slow  # Ray (the other Ray tests are slow by their ray_address fixture)
def test_collect_ray_starts_and_stops_its_own_local_cluster(tmp_path):
    """``--ray`` alone in a fresh process: a local cluster for the command, gone afterwards."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'perfcast[ray]')")
    import psutil

    def rayprocs(root: int) -> list:
        try:
            return [c for c in psutil.Process(root).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    db = tmp_path / "m.db"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = str(REPO)
    p = subprocess.Popen([sys.executable, "-m", "perfcast", "collect", "--ray", "--models", TINY,
                          "--input-sizes", "3,8,8", "--iters", "2", "--warmup", "0",
                          "--cooldown", "0", "--db", str(db), "--json"], cwd=REPO, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[int] = set()
    while p.poll() is None:
        seen |= {c.pid for c in rayprocs(p.pid)}
        time.sleep(0.2)
    out, err = p.communicate()
    assert p.returncode == 0, err[-800:]
    assert json.loads(out)["ok"] == 1
    assert "Traceback" not in err
    assert seen, "no cluster process was started"
    deadline = time.time() + 30
    while any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
              for pid in seen) and time.time() < deadline:
        time.sleep(0.2)
    left = [pid for pid in seen if psutil.pid_exists(pid)
            and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not left, f"cluster processes outlived the command: {left}"


# --------------------------------------------------------------------------- corpus
CORPUS = ["corpus", "--families", "resnet", "--variants-per-family", "4", "--input-sizes", "64",
          "--batch-sizes", "2,4,8,16,32", "--json"]


def _index(out: Path) -> list[dict]:
    with open(out / "index.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_corpus_on_ray_limit_20(ray_address, tmp_path, capsys):
    from perfcast.graph import ModelGraph

    out = tmp_path / "c"
    assert main([*CORPUS, "--out", str(out), "--ray", ray_address, "--limit", "20"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["ok"] == 20 and s["failed"] == 0
    rows = _index(out)
    assert len(rows) == 20 and len({r["key"] for r in rows}) == 20
    assert len({r["model"] for r in rows}) == 4
    for r in rows:
        g = ModelGraph.load(out / "graphs" / f"{r['key']}.npz")
        assert g.num_nodes == int(r["nodes"]) and g.meta.batch_size == int(r["batch_size"])
    assert main([*CORPUS, "--out", str(out), "--ray", ray_address]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == 20
    # --retry-failed builds again what failed (here: two lines marked failed, graphs gone)
    failed = [rows[2]["key"], rows[10]["key"]]
    for r in rows:
        if r["key"] in failed:
            (out / "graphs" / f"{r['key']}.npz").unlink()
            r.update(nodes="", edges="", macs="", params="", seconds="", status="failed",
                     reason="ray task failed: WorkerCrashedError: (test)")
    with open(out / "index.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert main([*CORPUS, "--out", str(out), "--ray", ray_address]) == 0  # without: skipped
    assert json.loads(capsys.readouterr().out)["skipped"] == 20
    assert main([*CORPUS, "--out", str(out), "--ray", ray_address, "--retry-failed"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["ok"] == 2 and s["skipped"] == 18
    again = _index(out)
    assert len(again) == 20 and len({r["key"] for r in again}) == 20
    assert {r["status"] for r in again} == {"ok"} and {r["key"] for r in again[-2:]} == set(failed)
    assert all((out / "graphs" / f"{k}.npz").exists() for k in failed)


def test_corpus_on_ray_driver_killed_midway_resumes(ray_address, tmp_path, capsys):
    from perfcast.graph import ModelGraph

    out = tmp_path / "c"
    cmd = [*CORPUS[:-1], "--variants-per-family", "2", "--batch-sizes", "2,4",
           "--input-sizes", "32,48", "--out", str(out), "--ray", ray_address, "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "perfcast", *cmd], cwd=REPO, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _until(lambda: (out / "index.csv").exists() and len(_index(out)) >= 2, p)
    assert p.poll() is None, p.communicate()[1][-800:]
    p.send_signal(signal.SIGKILL)
    p.wait()
    before = _index(out)
    assert 2 <= len(before) < 8
    assert main(cmd) == 0  # the re-run, in this process (on the same cluster)
    s = json.loads(capsys.readouterr().out)
    assert s["skipped"] == len(before) and s["ok"] == 8 - len(before)
    rows = _index(out)
    assert len(rows) == 8 and len({x["key"] for x in rows}) == 8  # each once
    assert rows[:len(before)] == before
    for x in rows:
        assert ModelGraph.load(out / "graphs" / f"{x['key']}.npz").num_nodes == int(x["nodes"])


# --------------------------------------------------------------------------- evaluate
def test_evaluate_on_ray_matches_the_serial_run(ray_address, tiny_feature_set):
    import numpy as np

    from perfcast.evaluation import evaluate

    kw = dict(predictors=["xgboost", "mlp"], seeds=[1, 2], out_dir=None, task_name="tiny",
              plots=False)
    serial = evaluate(tiny_feature_set, "random", **kw)
    on_ray = evaluate(tiny_feature_set, "random", ray_address=ray_address, **kw)
    keys = ["predictor", "fold", "record", "target"]
    a = serial.predictions.sort_values(keys).reset_index(drop=True)
    b = on_ray.predictions.sort_values(keys).reset_index(drop=True)
    assert len(a) == len(b) > 0 and (a[keys].values == b[keys].values).all()
    np.testing.assert_allclose(b["predicted"], a["predicted"], rtol=1e-3)
    assert set(on_ray.fits["predictor"]) == {"xgboost", "mlp"} and len(on_ray.fits) == 4
