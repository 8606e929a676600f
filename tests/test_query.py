"""perfcast query (issue 18, item 3): measured values with spread and date when the store has
them, otherwise the prediction marked as such; --measure-missing queues for collect --queued;
predict --store uses measured values. Stores hold hand-made rows (fixed numbers, so every
assertion is exact); the prediction is the real one of a tiny test model."""

from __future__ import annotations

import json
import socket

import pytest

from perfcast.faces.cli import main
from perfcast.store import Measurement, MeasureConfig, MeasurementStore

TINY = "tests.models_for_tests:tiny_cnn"
Q = ["query", TINY, "--device", "cpu", "--input-size", "3,8,8", "--batch-size", "2", "--json"]


def cfg(batch: int = 2, repeat: int = 0, threads: int | None = None) -> MeasureConfig:
    return MeasureConfig.of(TINY, batch_size=batch, input_size="3,8,8", threads=threads,
                            repeat=repeat)


def measured(c: MeasureConfig, t: float, when: str, **kw) -> Measurement:
    base = dict(time_ms_median=t, time_ms_p10=t - 0.5, time_ms_p90=t + 1.0, time_ms_std=0.25,
                n=30, peak_tensor_mb=12.0, energy_j=0.5, energy_source="rapl", created_at=when)
    return Measurement(config=c, **{**base, **kw})


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def no_prediction(monkeypatch):
    """A query answered from the store alone must not predict (no graph, no model)."""
    def fail(*a, **k):
        raise AssertionError("predicted although everything was measured")

    monkeypatch.setattr("perfcast.api.predict_workload", fail)


def test_measured_with_spread_and_date(tmp_path, capsys, no_prediction):
    db = tmp_path / "m.db"
    st = MeasurementStore(db)
    st.add(measured(cfg(), 10.0, "2026-05-01T10:00:00+00:00"))
    st.add(measured(cfg(repeat=1), 12.0, "2026-05-03T09:30:00+00:00", peak_tensor_mb=14.0,
                    energy_j=0.7, time_ms_p10=11.0, time_ms_p90=13.5))
    st.add(measured(cfg(batch=4), 99.0, "2026-05-01T10:00:00+00:00"))  # another batch size
    st.close()
    assert main([*Q, "--store", str(db)]) == 0
    r = _json(capsys)
    assert r["source"] == "measured" and r["rows"] == 2 and r["fits"] is True
    t = r["answers"]["time_ms"]
    assert t["source"] == "measured" and t["value"] == 11.0 and t["unit"] == "ms per batch"
    assert t["spread"] == {"p10": 9.5, "p90": 13.5, "std": 0.25, "n": 60, "repeats": 2,
                           "repeat_min": 10.0, "repeat_max": 12.0}
    assert t["measured_at"] == "2026-05-03T09:30:00+00:00" and t["host"] == socket.gethostname()
    m = r["answers"]["memory_mb"]
    assert m["value"] == 13.0 and m["kind"] == "peak of live tensors"
    assert m["spread"] == {"min": 12.0, "max": 14.0, "repeats": 2}
    e = r["answers"]["energy_j"]
    assert e["value"] == pytest.approx(0.6) and e["kind"] == "rapl" and e["source"] == "measured"
    assert r["queued"] is None
    # the table names the source of each value
    assert main([*Q[:-1], "--store", str(db)]) == 0
    text = capsys.readouterr().out
    assert "measured" in text and "predicted" not in text and "11.000 ms" in text
    assert "2026-05-03" in text


@pytest.mark.slow
def test_not_measured_is_predicted_then_queued_then_measured(tmp_path, capsys, monkeypatch):
    db = tmp_path / "m.db"
    st = MeasurementStore(db)
    st.add(measured(cfg(batch=4), 99.0, "2026-05-01T10:00:00+00:00"))
    st.close()
    assert main([*Q, "--store", str(db)]) == 0
    r = _json(capsys)
    assert r["source"] == "predicted" and r["rows"] == 0 and r["queued"] is None
    t = r["answers"]["time_ms"]
    assert t["source"] == "predicted" and t["value"] > 0 and t["predictor"]
    assert t["measured_at"] is None and t["spread"] is None
    assert r["answers"]["energy_j"]["source"] == "none"  # no CPU energy model: said, not invented
    assert main([*Q, "--store", str(db), "--measure-missing"]) == 0
    assert _json(capsys)["queued"] == "queued"
    assert main([*Q, "--store", str(db), "--measure-missing"]) == 0
    assert _json(capsys)["queued"] == "already queued"
    st = MeasurementStore(db)
    assert [c.key() for c in st.queued("cpu")] == [cfg().key()] and st.queued("rtx4090") == []
    st.close()

    def runner(c, **kw):
        return measured(c, 3.0, "2026-06-01T00:00:00+00:00")

    monkeypatch.setattr("perfcast.profiler.runner.run_isolated", runner)
    assert main(["collect", "--queued", "--db", str(db), "--device", "cpu", "--cooldown", "0",
                 "--json"]) == 0
    c = _json(capsys)
    assert c["configs"] == 1 and c["ok"] == 1 and c["rows_in_store"] == 2
    st = MeasurementStore(db)
    assert st.queued() == []  # measured: off the queue
    st.close()
    assert main([*Q, "--store", str(db), "--measure-missing"]) == 0
    r = _json(capsys)
    assert r["source"] == "measured" and r["answers"]["time_ms"]["value"] == 3.0
    assert r["queued"] == "measured"


def test_out_of_memory_is_a_measurement(tmp_path, capsys, no_prediction):
    db = tmp_path / "m.db"
    st = MeasurementStore(db)
    st.add(Measurement(config=cfg(), status="oom", reason="RSS 900 MiB exceeded the memory "
                       "limit 800 MiB", created_at="2026-05-02T08:00:00+00:00"))
    st.close()
    assert main([*Q, "--store", str(db)]) == 0
    r = _json(capsys)
    assert r["source"] == "measured" and r["fits"] is False
    assert all(a["status"] == "oom" and a["value"] is None for a in r["answers"].values())
    assert any("out of memory on 2026-05-02T08:00:00+00:00" in n for n in r["notes"])


def test_failed_run_is_not_a_value(tmp_path, capsys):
    db = tmp_path / "m.db"
    st = MeasurementStore(db)
    st.add(Measurement(config=cfg(), status="timeout", reason="no result within 600 s",
                       created_at="2026-05-02T08:00:00+00:00"))
    st.close()
    assert main([*Q, "--store", str(db), "--measure-missing"]) == 0
    r = _json(capsys)
    assert r["source"] == "predicted" and r["queued"] == "failed before"
    assert any("timeout on 2026-05-02" in n and "--retry-failed" in n for n in r["notes"])


def test_threads_pick_one_measurement(tmp_path, capsys, no_prediction):
    db = tmp_path / "m.db"
    st = MeasurementStore(db)
    st.add(measured(cfg(threads=1), 20.0, "2026-05-01T10:00:00+00:00"))
    st.add(measured(cfg(threads=2), 11.0, "2026-05-01T11:00:00+00:00"))
    st.close()
    assert main([*Q, "--store", str(db)]) == 0
    r = _json(capsys)
    assert r["answers"]["time_ms"]["value"] == 11.0 and r["threads"] == 2
    assert any("measured at threads 1, 2: showing 2" in n for n in r["notes"])
    assert main([*Q, "--store", str(db), "--threads", "1"]) == 0
    assert _json(capsys)["answers"]["time_ms"]["value"] == 20.0


def test_default_input_matches_rows_collected_without_input_size(tmp_path, capsys,
                                                                 no_prediction):
    """A store row collected without --input-sizes (input_size NULL) answers a query that gives
    the model's default input, and the other way round."""
    db = tmp_path / "m.db"
    st = MeasurementStore(db)
    st.add(measured(MeasureConfig.of("timm:resnet18", batch_size=1), 30.0,
                    "2026-05-01T10:00:00+00:00"))
    st.close()
    base = ["query", "timm:resnet18", "--device", "cpu", "--store", str(db), "--json"]
    assert main(base) == 0
    assert _json(capsys)["answers"]["time_ms"]["value"] == 30.0
    assert main([*base, "--input-size", "3,224,224"]) == 0
    assert _json(capsys)["answers"]["time_ms"]["value"] == 30.0
    # a bare timm name is the same model, either way round
    assert main(["query", "resnet18", *base[2:]]) == 0
    assert _json(capsys)["answers"]["time_ms"]["value"] == 30.0
    st = MeasurementStore(db)
    st.add(measured(MeasureConfig.of("resnet34", batch_size=1), 40.0,
                    "2026-05-01T10:00:00+00:00"))
    st.close()
    assert main(["query", "timm:resnet34", *base[2:]]) == 0
    assert _json(capsys)["answers"]["time_ms"]["value"] == 40.0


def test_predict_store_uses_measured_values(tmp_path, capsys):
    db = tmp_path / "m.db"
    st = MeasurementStore(db)
    st.add(measured(cfg(), 4.0, "2026-05-01T10:00:00+00:00", energy_j=None))
    st.close()
    args = ["predict", TINY, "--device", "cpu", "--input-size", "3,8,8", "--batch-size", "2",
            "--json"]
    assert main(args) == 0
    plain = _json(capsys)
    assert main([*args, "--store", str(db)]) == 0
    p = _json(capsys)
    assert p["time_ms"] == 4.0 and p["predictor"]["time_ms"] == "measured"
    assert p["throughput_samples_per_s"] == pytest.approx(500.0)
    assert p["memory_mb"] == 12.0 and p["predictor"]["memory_mb"] == "measured"
    assert "time_ms" not in p["trained_on"] and plain["predictor"]["time_ms"] != "measured"
    assert any(n.startswith(f"time_ms: measured in {db} on 2026-05-01") for n in p["notes"])
    assert not any(n.startswith("time_ms:") and "measured in" not in n for n in p["notes"])


def test_query_errors_are_one_line_exit_2(tmp_path, capsys):
    assert main([*Q, "--store", str(tmp_path / "none.db")]) == 2
    err = capsys.readouterr().err
    assert "measurement store not found" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "none.db").exists()  # a reader creates nothing
    db = tmp_path / "m.db"
    MeasurementStore(db).close()
    assert main([*Q, "--store", str(db), "--threads", "0"]) == 2
    assert "threads must be an integer" in capsys.readouterr().err
    assert main(["query", TINY, "--device", "nosuchgpu", "--store", str(db)]) == 2


def test_query_a_postgres_store(pg_url, capsys, no_prediction):
    from tests import postgres_server as pg

    st = MeasurementStore(pg_url)
    st.add(measured(cfg(), 7.0, "2026-05-01T10:00:00+00:00"))
    st.close()
    assert main([*Q, "--store", pg_url]) == 0
    out = capsys.readouterr().out
    r = json.loads(out)
    assert r["source"] == "measured" and r["answers"]["time_ms"]["value"] == 7.0
    assert pg.PASSWORD not in out and ":***@127.0.0.1" in r["store"]
