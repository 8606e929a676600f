"""perfcast collect: rows written, resumable, crash-safe, failures recorded."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from perfcast.faces.cli import main
from perfcast.errors import PerfcastError
from perfcast.profiler.collect import CollectSettings, Sweep, collect, load_spec
from perfcast.store import MeasureConfig, Measurement, MeasurementStore
from tests.helpers import ctrl_c_as_usual

TINY = "tests.models_for_tests:tiny_cnn"


def fake_runner(cfg, **kw):
    """Stands in for the subprocess runner in fast tests (no timing claims are made)."""
    if cfg.batch_size > 64:
        return Measurement(config=cfg, status="oom", reason="RuntimeError: out of memory")
    return Measurement(config=cfg, time_ms_median=1.0 * cfg.batch_size, n=kw["iters"],
                       warmup=kw["warmup"])


def test_store_roundtrip_and_export(tmp_path):
    store = MeasurementStore(tmp_path / "m.db")
    cfg = MeasureConfig.of("timm:resnet18", batch_size=2, input_size="3,64,64")
    assert store.add(Measurement(config=cfg, time_ms_median=12.5, n=30))
    assert not store.add(Measurement(config=cfg, time_ms_median=99.0, n=30))  # no duplicate
    df = store.to_dataframe()
    assert len(df) == 1 and df.time_ms_median[0] == 12.5 and df.status[0] == "ok"
    store.export(tmp_path / "m.parquet")
    store.export(tmp_path / "m.csv")
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "m.parquet")) == 1
    with pytest.raises(PerfcastError):
        store.export(tmp_path / "m.xlsx")
    # WAL journal on SQLite
    con = sqlite3.connect(tmp_path / "m.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.slow
def test_collect_is_resumable_and_records_failures(tmp_path):
    store = MeasurementStore(tmp_path / "m.db")
    # the tiny CNN: a graph key per configuration costs a trace of it, not of a ResNet
    sweep = Sweep(models=[TINY], batch_sizes=[1, 2, 128], input_sizes=["3,16,16"],
                  modes=["infer", "train"])
    configs = sweep.configs("cpu", threads=1)
    assert len(configs) == 6
    counts = collect(store, configs, CollectSettings(cooldown_s=0), runner=fake_runner)
    assert counts["ok"] == 4 and counts["oom"] == 2 and store.count() == 6
    df = store.to_dataframe()
    assert set(df.status) == {"ok", "oom"}
    assert df[df.status == "oom"].reason.str.contains("out of memory").all()
    assert df.graph_key.notna().all()
    again = collect(store, configs, CollectSettings(cooldown_s=0), runner=fake_runner)
    assert again["skipped"] == 6 and again["ok"] == 0 and store.count() == 6
    retry = collect(store, configs, CollectSettings(cooldown_s=0, retry_failed=True),
                    runner=fake_runner)
    assert retry["skipped"] == 4 and retry["oom"] == 2 and store.count() == 6


def test_sweep_validation(tmp_path):
    with pytest.raises(PerfcastError, match="batch"):
        Sweep(models=["timm:resnet18"], batch_sizes=[0]).configs("cpu", None)
    with pytest.raises(PerfcastError, match="mode"):
        Sweep(models=["timm:resnet18"], modes=["fly"]).configs("cpu", None)
    with pytest.raises(PerfcastError):
        CollectSettings(iters=0).validate()
    bad = tmp_path / "bad.yaml"
    bad.write_text("sweeps: [{batch_sizes: [1]}]")
    with pytest.raises(PerfcastError, match="models"):
        load_spec(bad)
    with pytest.raises(PerfcastError, match="not found"):
        load_spec(tmp_path / "none.yaml")


def test_yaml_spec(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("device: cpu\nwarmup: 1\niters: 2\nsweeps:\n"
                    "  - models: [timm:resnet18]\n    batch_sizes: [1, 2]\n"
                    "    input_sizes: ['3,64,64']\n    modes: [infer, train]\n")
    sweeps, opts = load_spec(spec)
    assert opts == {"device": "cpu", "warmup": 1, "iters": 2}
    assert len(sweeps[0].configs("cpu", None)) == 4


def _db_rows(path, missing_ok: bool = False):
    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT config_key, status, n FROM measurements").fetchall()
    except sqlite3.OperationalError:
        if not missing_ok:  # polling: the file can exist a moment before its table
            raise
        rows = []
    finally:
        con.close()
    return rows


@pytest.mark.slow  # fast-tier budget: the fast tier keeps a cheaper test of the same command/room
def test_collect_cli_real_measurement_and_rerun(tmp_path):
    """A real (tiny) measurement through the CLI and a subprocess; a rerun adds nothing."""
    db = tmp_path / "m.db"
    args = ["collect", "--models", TINY, "--batch-sizes", "2", "--input-sizes", "3,16,16",
            "--modes", "infer,train", "--warmup", "1", "--iters", "3", "--cooldown", "0",
            "--db", str(db), "--json"]
    assert main(args) == 0
    rows = _db_rows(db)
    assert len(rows) == 2 and all(r[1] == "ok" and r[2] == 3 for r in rows), rows
    assert main(args) == 0
    assert len(_db_rows(db)) == 2
    store = MeasurementStore(db)
    df = store.to_dataframe()
    assert (df.time_ms_median > 0).all() and (df.time_ms_p90 >= df.time_ms_p10).all()
    assert df.peak_tensor_mb.notna().all() and (df.peak_tensor_mb > 0).all()
    assert df.energy_j.isna().all() or (df.energy_source == "rapl").all()  # never invented
    assert df.env_json.str.contains("cpu_model").all()


@pytest.mark.slow  # kill and resume
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_collect_killed_midway_resumes_without_duplicates(tmp_path, sig):
    db = tmp_path / "m.db"
    args = [sys.executable, "-m", "perfcast", "collect", "--models", TINY,
            "--batch-sizes", "1,2,3,4,5,6,7,8", "--input-sizes", "3,16,16", "--modes", "infer",
            "--warmup", "1", "--iters", "2", "--cooldown", "0.3", "--db", str(db)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"},
                            preexec_fn=ctrl_c_as_usual)  # noqa: PLW1509
    deadline = time.time() + 240
    while time.time() < deadline:
        time.sleep(0.3)
        if db.exists() and len(_db_rows(db, missing_ok=True)) >= 2:
            break
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert proc.returncode == 130, proc.stderr.read().decode()[-500:]
    assert not (tmp_path / "m.db.lock").exists()  # the collector lock was released
    partial = _db_rows(db)
    assert 2 <= len(partial) < 8 and all(r[1] == "ok" for r in partial)
    r = subprocess.run(args, check=False, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr[-500:]
    rows = _db_rows(db)
    assert len(rows) == 8 and len({k for k, _, _ in rows}) == 8
    assert all(s == "ok" and n == 2 for _, s, n in rows)


def test_collect_bad_input(tmp_path, capsys):
    assert main(["collect", "--db", str(tmp_path / "m.db")]) == 2
    assert main(["collect", "--models", TINY, "--device", "tpu-v9", "--db",
                 str(tmp_path / "m.db")]) == 2
    assert main(["collect", "--models", TINY, "--batch-sizes", "1,x", "--db",
                 str(tmp_path / "m.db")]) == 2
    assert main(["collect", "--models", TINY, "--db", "/no/such/dir/m.db"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_worker_failure_becomes_failed_row(tmp_path):
    """The worker fails on a model it cannot build (a module's missing function: no timm to
    import in the new process) and a timeout kills it; both become rows."""
    from perfcast.profiler.runner import run_isolated

    m = run_isolated(MeasureConfig.of("tests.models_for_tests:no_such_model_xyz",
                                      input_size="3,16,16"), warmup=0, iters=1, timeout_s=120)
    assert m.status == "failed" and "no_such_model_xyz" in m.reason
    t = run_isolated(MeasureConfig.of(TINY, input_size="3,16,16"), warmup=0, iters=1,
                     timeout_s=0.01)
    assert t.status == "timeout"


@pytest.mark.slow  # timm and torch in a new process; the fast tier fails a cheaper model above
def test_worker_failure_on_an_unknown_timm_model_becomes_failed_row():
    from perfcast.profiler.runner import run_isolated

    m = run_isolated(MeasureConfig.of("timm:no_such_model_xyz"), warmup=0, iters=1,
                     timeout_s=120)
    assert m.status == "failed" and "unknown timm model" in m.reason


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_measurement_paths():
    """CUDA events, max_memory_allocated/reserved, NVML memory and energy (GPU machines only)."""
    from perfcast.profiler.measure import measure

    m = measure(MeasureConfig.of(TINY, input_size="3,32,32", device="rtx4090", mode="train"),
                warmup=1, iters=3, device="cuda")
    assert m.time_ms_median > 0 and m.cuda_max_allocated_mb > 0 and m.cuda_max_reserved_mb > 0
    assert m.nvml_used_mb is None or m.nvml_used_mb > 0

