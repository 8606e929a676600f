"""One collector per store and machine (perfcast.store.lock), crash safety of the store, and no
password in any message.

Fast tests fake the measuring subprocess (``perfcast.profiler.runner.run_isolated``) and set
``PERFCAST_LOCK_POLL`` (seconds between two looks at a busy lock) to 0.1 s. The slow test kills
a real ``perfcast collect`` with SIGKILL 20 times at seeded random moments, then resumes it.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from perfcast.faces.cli import main
from perfcast.errors import PerfcastError
from perfcast.profiler.collect import CollectSettings, Sweep, collect, load_spec
from perfcast.store import Measurement, MeasurementStore
from perfcast.store.db import display_url, scrub

TINY = "tests.models_for_tests:tiny_cnn"
ARGS = ["collect", "--models", TINY, "--batch-sizes", "1,2", "--input-sizes", "3,8,8",
        "--cooldown", "0", "--json"]


def fake_runner(cfg, **kw):
    return Measurement(config=cfg, time_ms_median=1.0, n=kw["iters"], warmup=kw["warmup"])


@pytest.fixture
def fast(monkeypatch):
    """No measuring subprocess, a 0.1 s lock poll; yields the ``note:`` messages logged."""
    monkeypatch.setattr("perfcast.profiler.runner.run_isolated", fake_runner)
    monkeypatch.setenv("PERFCAST_LOCK_POLL", "0.1")
    notes: list[str] = []
    h = logging.Handler(logging.WARNING)
    h.emit = lambda rec: notes.append(rec.getMessage())
    log = logging.getLogger("perfcast")
    log.addHandler(h)
    yield notes
    log.removeHandler(h)


def _rows(db):
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT config_key, status, n, time_ms_median, env_json "
                           "FROM measurements").fetchall()
    finally:
        con.close()


def _hold_lock(db, seconds: float) -> subprocess.Popen:
    """Another process holding the store's collector lock for ``seconds`` (after 'held')."""
    code = ("import sys, time\nfrom perfcast.store import MeasurementStore\n"
            "with MeasurementStore(sys.argv[1]).collector_lock().acquire():\n"
            "    print('held', flush=True)\n    time.sleep(float(sys.argv[2]))\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(db), str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_second_collector_refused_names_holder(tmp_path, fast, capsys):
    db = tmp_path / "m.db"
    holder = _hold_lock(db, 60)
    try:
        t = time.perf_counter()
        assert main([*ARGS, "--db", str(db)]) == 2
        assert time.perf_counter() - t < 10  # refused at once
        err = capsys.readouterr().err
        line = " ".join(err.split())  # rich may wrap
        assert f"pid {holder.pid} on host {socket.gethostname()}, since " in line, err
        assert "--wait" in line and "Traceback" not in err
        assert len(err.strip().splitlines()) <= 2  # one line (wrapped at most once)
        assert not db.exists() or not _rows(db)  # nothing measured
        lock = json.loads((tmp_path / "m.db.lock").read_text())
        assert lock["pid"] == holder.pid  # the holder's record untouched
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_wait_waits_until_free_then_collects(tmp_path, fast, capsys):
    db = tmp_path / "m.db"
    hold = 1.5
    holder = _hold_lock(db, hold)
    t0 = time.perf_counter()
    assert main([*ARGS, "--db", str(db), "--wait"]) == 0
    assert time.perf_counter() - t0 >= hold - 0.3  # it did wait for the holder
    assert holder.wait(timeout=30) == 0
    assert len(_rows(db)) == 2
    waiting = [n for n in fast if "waiting" in n]
    assert len(waiting) == 1 and f"pid {holder.pid}" in waiting[0], fast
    assert "checking every 0.1 s" in waiting[0]
    assert not (tmp_path / "m.db.lock").exists()  # released


@pytest.mark.slow
def test_stale_lock_of_dead_process_taken_over(tmp_path, fast, capsys):
    db = tmp_path / "m.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "m.db.lock").write_text(json.dumps(
        {"pid": dead.pid, "host": socket.gethostname(), "started": "2026-01-01T00:00:00+00:00"}))
    assert main([*ARGS, "--db", str(db)]) == 0
    stale = [n for n in fast if "stale" in n]
    assert len(stale) == 1 and f"pid {dead.pid}" in stale[0] and "is gone" in stale[0], fast
    assert len(_rows(db)) == 2
    assert not (tmp_path / "m.db.lock").exists()


def test_reused_pid_is_not_the_holder(tmp_path, fast):
    """A record naming a live process that started after the record (the pid was reused) is
    stale too; a record that is just empty (its writer killed before writing) is taken
    silently."""
    db = tmp_path / "m.db"
    lock = tmp_path / "m.db.lock"
    lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                "started": "2000-01-01T00:00:00+00:00"}))
    store = MeasurementStore(db)
    configs = Sweep(models=[TINY], input_sizes=["3,8,8"]).configs("cpu", None)
    assert collect(store, configs, CollectSettings(cooldown_s=0), runner=fake_runner)["ok"] == 1
    assert any("stale" in n for n in fast)
    lock.write_text("")
    fast.clear()
    assert collect(store, configs, CollectSettings(cooldown_s=0),
                   runner=fake_runner)["skipped"] == 1
    assert not fast and not lock.exists()


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_lock_released_on_error_and_interrupt(tmp_path, fast, exc):
    store = MeasurementStore(tmp_path / "m.db")
    configs = Sweep(models=[TINY], batch_sizes=[1, 2], input_sizes=["3,8,8"]).configs("cpu", None)
    calls = []

    def runner(cfg, **kw):
        calls.append(cfg)
        if len(calls) == 2:
            raise exc
        return fake_runner(cfg, **kw)

    with pytest.raises(type(exc)):
        collect(store, configs, CollectSettings(cooldown_s=0), runner=runner)
    assert not (tmp_path / "m.db.lock").exists()
    assert store.count() == 1  # the first row, whole; nothing of the second
    with store.collector_lock().acquire():  # free again
        pass


@pytest.mark.slow
def test_retry_failed_keeps_old_rows_until_replaced(tmp_path, fast):
    """--retry-failed replaces a failed row in the same transaction as the new one: stopped
    midway, the rows it had not re-measured are still there."""
    store = MeasurementStore(tmp_path / "m.db")
    configs = Sweep(models=[TINY], batch_sizes=[1, 2, 3], input_sizes=["3,8,8"]).configs("cpu",
                                                                                        None)
    collect(store, configs, CollectSettings(cooldown_s=0),
            runner=lambda cfg, **kw: Measurement(config=cfg, status="failed", reason="x"))
    calls = []

    def runner(cfg, **kw):
        calls.append(cfg)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return fake_runner(cfg, **kw)

    with pytest.raises(KeyboardInterrupt):
        collect(store, configs, CollectSettings(cooldown_s=0, retry_failed=True), runner=runner)
    df = store.to_dataframe()
    assert len(df) == 3 and sorted(df.status) == ["failed", "failed", "ok"]
    counts = collect(store, configs, CollectSettings(cooldown_s=0, retry_failed=True),
                     runner=fake_runner)
    assert counts["ok"] == 2 and counts["skipped"] == 1 and store.count() == 3


def test_store_missing_its_unique_index_is_repaired(tmp_path):
    """A store whose creation was killed between CREATE TABLE and CREATE UNIQUE INDEX (possible
    before the schema was created in one transaction) gets its indexes back when opened."""
    db = tmp_path / "m.db"
    MeasurementStore(db).engine.dispose()
    con = sqlite3.connect(db)
    con.execute("DROP INDEX ix_measurements_config_key")
    con.commit()
    con.close()
    store = MeasurementStore(db)
    cfg = Sweep(models=[TINY], input_sizes=["3,8,8"]).configs("cpu", None)[0]
    assert store.add(Measurement(config=cfg)) and not store.add(Measurement(config=cfg))
    assert store.count() == 1


def test_password_never_printed(tmp_path, capsys):
    url = "postgresql://perfcast:secretpw@127.0.0.1:1/measurements"  # loopback, closed port
    assert main(["collect", "--models", TINY, "--db", url]) == 2
    err = capsys.readouterr().err
    assert "secretpw" not in err and "perfcast:***@127.0.0.1" in err, err
    assert display_url(url) == "postgresql://perfcast:***@127.0.0.1:1/measurements"
    assert display_url("m.db") == "m.db"
    assert scrub(f"failed for {url} (password secretpw)", url) == (
        "failed for postgresql://perfcast:***@127.0.0.1:1/measurements (password ***)")
    with pytest.raises(PerfcastError) as e:
        MeasurementStore("postgresql://u:p%40ss@127.0.0.1:1/db")
    assert "p%40ss" not in str(e.value) and "p@ss" not in str(e.value)


def test_postgres_advisory_lock(pg_url):
    """On the session's real PostgreSQL server (conftest ``postgres_server``); more in
    tests/test_store_postgres.py."""
    a, b = MeasurementStore(pg_url), MeasurementStore(pg_url)
    with a.collector_lock().acquire(), pytest.raises(PerfcastError,
                                                     match=f"pid {os.getpid()} on host"):
        b.collector_lock().acquire()
    with b.collector_lock().acquire():
        pass


def _gone(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_worker_dies_with_its_collector(tmp_path):
    """A measuring worker asks the kernel to kill it when its collector dies (even by SIGKILL)."""
    (tmp_path / "worker.py").write_text(
        "import time\nfrom perfcast.profiler.worker import die_with_parent\n"
        "die_with_parent()\nprint('ready', flush=True)\ntime.sleep(120)\n")
    (tmp_path / "collector.py").write_text(
        "import os, subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, sys.argv[1]],\n"
        "                     env={**os.environ, 'PERFCAST_COLLECTOR_PID': str(os.getpid())})\n"
        "print(p.pid, flush=True)\np.wait()\n")
    parent = subprocess.Popen([sys.executable, str(tmp_path / "collector.py"),
                               str(tmp_path / "worker.py")], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert parent.stdout.readline().strip() == "ready"
    parent.kill()  # SIGKILL
    parent.wait()
    deadline = time.time() + 10
    while not _gone(child) and time.time() < deadline:
        time.sleep(0.05)
    assert _gone(child), "the worker outlived its collector"


def _orphans(pid: int) -> list:
    """Measuring workers started by the (killed) collector ``pid``."""
    import psutil

    found = []
    for p in psutil.process_iter():
        try:
            if (p.status() != psutil.STATUS_ZOMBIE
                    and p.environ().get("PERFCAST_COLLECTOR_PID") == str(pid)):
                found.append(p)
        except psutil.Error:
            pass
    return found


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_measures_each_config_once(tmp_path):
    """20 SIGKILLs of a real ``perfcast collect`` (12 tiny configurations, real profiler) at
    seeded random moments — before, while and after it takes the lock, inside the measuring
    worker, around the commit — then a run to completion: every configuration is in the store
    exactly once, whole; each kill released the lock (the next run took it over) and took its
    worker with it."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("device: cpu\nwarmup: 0\niters: 2\ncooldown: 0\ntimeout: 120\nsweeps:\n"
                    f"  - models: ['{TINY}']\n    batch_sizes: [1, 2, 3, 4, 5, 6]\n"
                    "    input_sizes: ['3,8,8']\n    modes: [infer, train]\n")
    sweeps, _ = load_spec(spec)
    wanted = {c.key() for s in sweeps for c in s.configs("cpu", None)}
    assert len(wanted) == 12
    db = tmp_path / "m.db"
    lock = tmp_path / "m.db.lock"
    cmd = [sys.executable, "-m", "perfcast", "collect", "--spec", str(spec), "--db", str(db),
           "--json"]
    rng = random.Random(23)
    takeovers, progress = 0, []
    for _ in range(20):
        delay = rng.uniform(0.5, 8.0)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.kill()  # SIGKILL
        err = proc.communicate(timeout=60)[1]
        assert proc.returncode in (0, -9), err[-500:]
        assert "in use by another collector" not in err, err  # a killed holder never blocks
        takeovers += "took over the stale collector lock" in err
        deadline = time.time() + 8  # a worker still starting Python exits when it finds us gone
        while _orphans(proc.pid) and time.time() < deadline:
            time.sleep(0.1)
        assert not _orphans(proc.pid), "a measuring worker outlived its killed collector"
        if db.exists():
            rows = _rows(db)
            assert len({r[0] for r in rows}) == len(rows) and {r[0] for r in rows} <= wanted
            assert all(r[1] == "ok" and r[2] == 2 and r[3] > 0 and r[4] for r in rows), rows
            progress.append(len(rows))
    assert takeovers >= 1 and any(0 < n < 12 for n in progress), (takeovers, progress)
    r = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-500:]
    rows = _rows(db)
    assert len(rows) == 12 and {k for k, *_ in rows} == wanted  # each exactly once
    assert all(s == "ok" and n == 2 and t > 0 and env for _, s, n, t, env in rows)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    assert not lock.exists()
