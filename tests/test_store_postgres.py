"""The measurement store on a real PostgreSQL server (and the same contract on SQLite): schema
creation and versioned migration, concurrent openers and writers (unique keys and upserts: no
duplicate, no lost row), two collectors on two "hosts" splitting one sweep through claims, the
look-up index, read-only opening, and no password in any message.

The server is the session's throwaway cluster (conftest ``postgres_server``, tests/
postgres_server.py); each test gets a database of its own (``pg_url``). Without PostgreSQL's
binaries these tests skip with the reason (CI installs them and sets
``PERFCAST_REQUIRE_POSTGRES=1``, which turns a skip into a failure). Measuring is faked (a
runner returning a fixed row, with a sleep where overlap matters): these tests are about the
store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfcast.faces.cli import main
from perfcast.errors import PerfcastError
from perfcast.profiler.collect import CollectSettings, Sweep, collect
from perfcast.store import Measurement, MeasureConfig, MeasurementStore
from perfcast.store.db import SCHEMA_VERSION, _table

REPO = Path(__file__).resolve().parents[1]
TINY = "tests.models_for_tests:tiny_cnn"


def fake_runner(cfg, **kw):
    return Measurement(config=cfg, time_ms_median=1.0 + cfg.batch_size, n=kw["iters"],
                       warmup=kw["warmup"])


def configs(n: int, device: str = "cpu") -> list[MeasureConfig]:
    return Sweep(models=[TINY], batch_sizes=list(range(1, n + 1)),
                 input_sizes=["3,8,8"]).configs(device, None)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """The same test on a SQLite file and on a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "m.db")
    return request.getfixturevalue("pg_url")


def _sql(url: str, *queries: str) -> list[tuple]:
    """Run ``queries`` in one transaction; the rows of the last."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    from perfcast.store.db import _url

    eng = create_engine(_url(url), poolclass=NullPool)
    try:
        with eng.begin() as conn:
            for q in queries:
                res = conn.execute(text(q))
            return [tuple(r) for r in res] if res.returns_rows else []
    finally:
        eng.dispose()


def _legacy_store(url: str, n: int) -> None:
    """A store as perfcast wrote it before schema versions (version 1), with ``n`` rows."""
    from sqlalchemy import MetaData, create_engine

    from perfcast.store.db import _url

    md = MetaData()
    t = _table(md, 1)
    eng = create_engine(_url(url))
    with eng.begin() as conn:
        md.create_all(conn)
        for c in configs(n):
            conn.execute(t.insert().values(**c.to_dict(), config_key=c.key(), status="ok",
                                           time_ms_median=2.0, env_json="{}"))
    eng.dispose()


# --------------------------------------------------------------------------- schema
def test_new_store_is_created_at_the_current_version(pg_url):
    store = MeasurementStore(pg_url)
    assert store.schema_version == SCHEMA_VERSION == 2
    assert store.engine.dialect.name == "postgresql"
    assert _sql(pg_url, "SELECT version, note FROM perfcast_schema") == [
        (2, "created at this version")]
    idx = {r[0]: r[1] for r in _sql(pg_url, "SELECT indexname, indexdef FROM pg_indexes "
                                            "WHERE tablename = 'measurements'")}
    assert "UNIQUE" in idx["ix_measurements_config_key"]
    assert "(model, device, mode, \"precision\", batch_size)" in idx["ix_measurements_lookup"]
    # the look-up of perfcast query (MeasurementStore.find) uses that index on a store of
    # 6,000 rows (300 models × 10 batch sizes × 2 modes on 7 devices), statistics up to date
    _sql(pg_url, "INSERT INTO measurements (config_key, model, batch_size, mode, precision, "
                 "device, repeat, status) SELECT md5(i::text), 'm' || (i % 300), i % 10 + 1, "
                 "CASE WHEN i % 2 = 0 THEN 'infer' ELSE 'train' END, 'fp32', 'd' || (i % 7), 0, "
                 "'ok' FROM generate_series(1, 6000) AS i", "ANALYZE measurements")
    from sqlalchemy.dialects import postgresql

    t = store.table
    q = (t.select().where(t.c.model == "m5", t.c.device == "d5", t.c.mode == "train",
                          t.c.precision == "fp32", t.c.batch_size == 6)
         .compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    plan = " ".join(r[0] for r in _sql(pg_url, f"EXPLAIN {q}"))
    assert "ix_measurements_lookup" in plan, plan
    store.close()


def test_legacy_store_is_migrated_rows_kept(store_url):
    _legacy_store(store_url, 3)
    ro = MeasurementStore(store_url, readonly=True)  # a reader changes nothing
    assert ro.schema_version == 1 and ro.count() == 3
    assert len(ro.find(model=TINY, device="cpu", mode="infer", precision="fp32", batch_size=2,
                       input_size="3,8,8")) == 1
    ro.close()
    assert "perfcast_schema" not in {r[0] for r in _sql(
        store_url, "SELECT name FROM sqlite_master WHERE type = 'table'"
        if "://" not in store_url else
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    store = MeasurementStore(store_url)
    assert store.schema_version == 2 and store.count() == 3
    versions = _sql(store_url, "SELECT version, note FROM perfcast_schema ORDER BY version")
    assert [v for v, _ in versions] == [1, 2] and "existing store" in versions[0][1]
    df = store.to_dataframe()
    assert "host" in df.columns and df["host"].isna().all()  # old rows: host unknown
    assert sorted(df["time_ms_median"]) == [2.0, 2.0, 2.0]
    new = configs(4)[3]
    assert store.add(fake_runner(new, iters=3, warmup=0))
    row = store.find(model=TINY, device="cpu", mode="infer", precision="fp32", batch_size=4,
                     input_size="3,8,8")
    assert len(row) == 1 and row[0]["host"] == __import__("socket").gethostname()
    assert store.enqueue(configs(6)) == 2  # batch 5 and 6: the others are measured
    store.close()
    again = MeasurementStore(store_url)  # up to date: nothing applied twice
    assert len(_sql(store_url, "SELECT version FROM perfcast_schema")) == 2
    assert again.count() == 4
    again.close()


def test_newer_schema_is_refused_for_writing(store_url):
    MeasurementStore(store_url).close()
    _sql(store_url, "INSERT INTO perfcast_schema (version, applied_at) VALUES (9, 'later')")
    with pytest.raises(PerfcastError, match="schema version 9, newer than this perfcast knows "
                                            r"\(2\): upgrade perfcast") as e:
        MeasurementStore(store_url)
    assert e.value.exit_code == 2
    assert MeasurementStore(store_url, readonly=True).count() == 0  # reading still works


def test_readonly_needs_a_store(tmp_path, pg_url):
    with pytest.raises(PerfcastError, match="measurement store not found"):
        MeasurementStore(tmp_path / "none.db", readonly=True)
    assert not (tmp_path / "none.db").exists()
    with pytest.raises(PerfcastError, match="is not a measurement store"):
        MeasurementStore(pg_url, readonly=True)
    store = MeasurementStore(pg_url)
    ro = MeasurementStore(pg_url, readonly=True)
    with pytest.raises(PerfcastError, match="opened read-only"):
        ro.add(fake_runner(configs(1)[0], iters=1, warmup=0))
    store.close()
    ro.close()


def test_readonly_sqlite_file_is_left_byte_for_byte(tmp_path):
    db = tmp_path / "m.db"
    _legacy_store(str(db), 2)
    before = db.read_bytes()
    ro = MeasurementStore(db, readonly=True)
    assert ro.count() == 2 and ro.done_keys() == {c.key() for c in configs(2)}
    ro.close()
    assert db.read_bytes() == before


_OPENER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    while not Path(sys.argv[2]).exists():
        time.sleep(0.005)
    from perfcast.store import MeasurementStore
    MeasurementStore(sys.argv[1]).close()
    print("opened")
""")


def test_concurrent_openers_create_the_schema_once(store_url, tmp_path):
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _OPENER, store_url, str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    time.sleep(1.0)
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "opened", err[-800:]
    assert _sql(store_url, "SELECT version FROM perfcast_schema") == [(2,)]


# --------------------------------------------------------------------------- writes
def test_upsert_keeps_one_row_per_configuration(store_url):
    store = MeasurementStore(store_url)
    cfg = configs(1)[0]
    assert store.add(Measurement(config=cfg, status="failed", reason="boom"))
    assert not store.add(Measurement(config=cfg, time_ms_median=5.0))  # present: kept
    assert store.find(model=TINY, device="cpu", mode="infer", precision="fp32", batch_size=1,
                      input_size="3,8,8")[0]["status"] == "failed"
    assert store.add(Measurement(config=cfg, time_ms_median=5.0, n=7), replace=True)
    rows = store.find(model=TINY, device="cpu", mode="infer", precision="fp32", batch_size=1,
                      input_size="3,8,8")
    assert len(rows) == 1 and rows[0]["status"] == "ok" and rows[0]["reason"] is None
    assert rows[0]["time_ms_median"] == 5.0 and rows[0]["n"] == 7
    assert store.count() == 1
    store.close()


_WRITER = textwrap.dedent("""
    import json, random, sys, time
    from pathlib import Path
    from perfcast.profiler.collect import Sweep
    from perfcast.store import Measurement, MeasurementStore
    url, go, seed = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    cfgs = Sweep(models=["tests.models_for_tests:tiny_cnn"], batch_sizes=list(range(1, 61)),
                 input_sizes=["3,8,8"], modes=["infer", "train"]).configs("cpu", None)
    random.Random(seed).shuffle(cfgs)
    store = MeasurementStore(url)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.005)
    won = sum(store.add(Measurement(config=c, time_ms_median=float(seed))) for c in cfgs)
    print(json.dumps({"won": won}), flush=True)
""")


def test_concurrent_writers_no_duplicate_no_lost_row(store_url, tmp_path):
    """Two processes write the same 120 configurations at once, in different orders, without
    any lock: every configuration ends up exactly once, each row whole, and every insert either
    won or was told it lost — none failed."""
    MeasurementStore(store_url).close()
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, store_url, str(go), str(seed)],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for seed in (1, 2)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()[-800:]
    go.touch()
    won = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-800:]
        won.append(json.loads(out)["won"])
    assert sum(won) == 120 and min(won) > 0, won  # each row won once, by one of them
    rows = _sql(store_url, "SELECT config_key, time_ms_median FROM measurements")
    assert len(rows) == 120 and len({k for k, _ in rows}) == 120
    assert sorted({t for _, t in rows}) == [1.0, 2.0]


# --------------------------------------------------------------------------- collectors
_COLLECTOR = textwrap.dedent("""
    import socket, sys, time
    from pathlib import Path
    url, host, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    socket.gethostname = lambda: host  # another machine
    import perfcast.profiler.runner as runner
    from perfcast.store import Measurement

    def measure(cfg, **kw):
        time.sleep(0.3)
        return Measurement(config=cfg, time_ms_median=1.0, n=kw["iters"])

    runner.run_isolated = measure
    from perfcast.faces.cli import main
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.005)
    sys.exit(main(["collect", "--models", "tests.models_for_tests:tiny_cnn",
                   "--batch-sizes", "1,2,3,4,5,6,7,8,9,10,11,12", "--input-sizes", "3,8,8",
                   "--cooldown", "0", "--db", url, "--json"]))
""")


def _two_collectors(url: str, tmp_path: Path, hosts=("box-a", "box-b")):
    go = tmp_path / "go"
    go.unlink(missing_ok=True)
    procs = [subprocess.Popen([sys.executable, "-c", _COLLECTOR, url, h, str(go)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for h in hosts]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()[-800:]
    go.touch()
    return [(p.wait(timeout=300), *p.communicate()) for p in procs]


def test_two_collectors_on_two_hosts_split_one_sweep(pg_url, tmp_path):
    """The GPU-cluster case: collectors on two machines of the same device share one
    PostgreSQL store. Each configuration is measured once (claims), stored once, by one of
    them; both worked; a rerun has nothing left to do."""
    results = _two_collectors(pg_url, tmp_path)
    summaries = []
    for rc, out, err in results:
        assert rc == 0, err[-800:]
        summaries.append(json.loads(out))
    assert sum(s["ok"] for s in summaries) == 12, summaries
    assert all(s["ok"] > 0 for s in summaries), summaries  # both measured
    assert all(s["ok"] + s["claimed_elsewhere"] + s["skipped"] == 12 for s in summaries)
    rows = _sql(pg_url, "SELECT config_key, host FROM measurements")
    assert len(rows) == 12 and len({k for k, _ in rows}) == 12
    assert {h for _, h in rows} == {"box-a", "box-b"}
    again = _two_collectors(pg_url, tmp_path)
    assert [json.loads(out)["skipped"] for _, out, _ in again] == [12, 12]
    assert len(_sql(pg_url, "SELECT id FROM measurements")) == 12


def test_same_host_second_collector_refused_and_claims_die_with_the_holder(pg_url):
    a, b = MeasurementStore(pg_url), MeasurementStore(pg_url)
    with a.collector_lock().acquire() as held, pytest.raises(
            PerfcastError, match=f"pid {os.getpid()} on host"):
        assert held.claim("k1") and held.claim("k1")  # re-entrant
        b.collector_lock().acquire()
    with b.collector_lock().acquire():
        pass
    # a collector killed while measuring: its claim vanishes with its connection
    code = textwrap.dedent("""
        import socket, sys, time
        socket.gethostname = lambda: "box-dead"
        from perfcast.store import MeasurementStore
        lock = MeasurementStore(sys.argv[1]).collector_lock().acquire()
        assert lock.claim("k2")
        print("claimed", flush=True)
        time.sleep(120)
    """)
    p = subprocess.Popen([sys.executable, "-c", code, pg_url], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "claimed"
        with a.collector_lock().acquire() as held:
            assert not held.claim("k2")  # measured elsewhere right now
            assert held.claim("k3")
        p.kill()
        p.wait()
        deadline = time.time() + 20
        with a.collector_lock().acquire() as held:
            while not held.claim("k2") and time.time() < deadline:
                time.sleep(0.1)
            assert held.claim("k2"), "a killed collector's claim outlived it"
    finally:
        p.kill()
        p.wait()


def test_collect_resumes_into_postgres(pg_url, monkeypatch):
    """collect on PostgreSQL as on SQLite: resumable, --retry-failed upserts failed rows."""
    monkeypatch.setattr("perfcast.profiler.runner.run_isolated", fake_runner)
    store = MeasurementStore(pg_url)
    cfgs = configs(3)
    calls = []

    def flaky(cfg, **kw):
        calls.append(cfg)
        if len(calls) == 2:
            return Measurement(config=cfg, status="failed", reason="worker exited with code 1")
        return fake_runner(cfg, **kw)

    counts = collect(store, cfgs, CollectSettings(cooldown_s=0), runner=flaky)
    assert counts["ok"] == 2 and counts["failed"] == 1 and store.count() == 3
    assert collect(store, cfgs, CollectSettings(cooldown_s=0), runner=flaky)["skipped"] == 3
    counts = collect(store, cfgs, CollectSettings(cooldown_s=0, retry_failed=True),
                     runner=fake_runner)
    assert counts["ok"] == 1 and counts["skipped"] == 2
    df = store.to_dataframe()
    assert len(df) == 3 and set(df.status) == {"ok"} and df.config_key.is_unique
    store.close()


# --------------------------------------------------------------------------- messages
def test_wrong_password_is_exit_2_and_masked(postgres_server, capsys):
    from sqlalchemy.engine import make_url

    from tests import postgres_server as pg

    url = make_url(postgres_server.admin_url).set(password="wrong-pw-0815")
    url = url.render_as_string(hide_password=False)
    assert main(["collect", "--models", TINY, "--input-sizes", "3,8,8", "--db", url]) == 2
    err = capsys.readouterr().err
    assert "wrong-pw-0815" not in err and pg.PASSWORD not in err
    assert "password authentication failed" in err and ":***@127.0.0.1" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3


def test_training_records_from_postgres_equal_sqlite(pg_url, tmp_path):
    """perfcast train --data postgresql://… reads the same records as from a SQLite store, and
    names its source with the password masked."""
    from perfcast.datasets.local import load_labeled

    from tests import postgres_server as pg

    rows = [MeasureConfig.of("timm:resnet18", batch_size=b, input_size="3,64,64")
            for b in (1, 2, 4)]
    for target in (pg_url, str(tmp_path / "m.db")):
        store = MeasurementStore(target)
        for i, c in enumerate(rows):
            store.add(Measurement(config=c, time_ms_median=10.0 * (i + 1), peak_tensor_mb=3.0))
        store.add(Measurement(config=MeasureConfig.of("timm:resnet18", batch_size=512,
                                                      input_size="3,64,64"), status="oom"))
        store.close()
    a, b = load_labeled(pg_url), load_labeled(tmp_path / "m.db")
    cols = ["model", "family", "batch_size", "input_size", "time_ms", "memory_mb"]
    assert a[cols].sort_values("batch_size").values.tolist() == \
        b[cols].sort_values("batch_size").values.tolist()
    assert len(a) == 3 and a.attrs["report"].rows_in == 4
    assert pg.PASSWORD not in str(a["source"].iloc[0]) and ":***@" in a["source"].iloc[0]
    assert pg.PASSWORD not in a.attrs["report"].path


def test_train_from_a_postgres_store(pg_url, tmp_path, capsys):
    """perfcast train --data postgresql://… trains as from a SQLite file; the saved predictor
    names its source with the password masked."""
    from tests import postgres_server as pg

    store = MeasurementStore(pg_url)
    for b in (1, 2, 4, 8, 16, 32):
        for size in ("3,8,8", "3,16,16"):
            store.add(Measurement(config=MeasureConfig.of(TINY, batch_size=b, input_size=size),
                                  time_ms_median=0.1 * b, peak_tensor_mb=0.01 * b))
    store.close()
    out = tmp_path / "model"
    assert main(["train", "--data", pg_url, "--predictor", "xgboost", "--out", str(out),
                 "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["records"] == 12 and set(s["targets"]) == {"time_ms", "memory_mb"}
    cfg = (out / "config.json").read_text()
    assert pg.PASSWORD not in cfg
    source = json.loads(cfg)["trained_on"]["source"]
    assert len(source) == 1 and ":***@127.0.0.1" in source[0]
