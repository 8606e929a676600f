"""Issue #40, deliverable 4: this machine, measured. The first CPU prediction on a machine runs a
short probe (GEMM, copy bandwidth, per-op dispatch) and caches it by the machine's key; the
shipped CPU model is scaled by the ratio of that probe to the one of the machine it was trained
on (stored with it); a calibrated model is not scaled.

Cheap: the cache tests run the probe at a tiny setting; one test runs the real probe in a new
process (torch's import included) against its budget; the CLI tests reuse the session's graph.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfcast.devices import probe as P

#: The real probe's settings, shrunk: a fraction of a second, the same code.
TINY = dict(gemm_sizes=(64, 128), stream_elements=4096, reps=1, dispatch_elements=(8,),
            dispatch_calls=3)
IMAGE = ["timm:resnet10t", "--input-size", "3,64,64", "--batch-size", "8", "--device", "cpu",
         "--threads", "1"]
SHIPPED = Path(__file__).resolve().parent.parent / "perfcast" / "shipped" / \
    "cpu-fp32-time-kernelsum"


@pytest.fixture
def probe_dir(tmp_path, monkeypatch):
    """A fresh probe cache, and this process's memo of probes emptied."""
    d = tmp_path / "machine"
    monkeypatch.setenv(P.PROBE_DIR_ENV, str(d))
    monkeypatch.setattr(P, "_SEEN", {})
    return d


class CountingRunner:
    """The real probe at the tiny setting, counting its runs."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, threads: int) -> P.Probe:
        self.calls += 1
        return P.run_probe(threads, **TINY)


def test_first_probe_measures_and_caches_then_reuses(probe_dir, monkeypatch):
    run = CountingRunner()
    first = P.probe_for(1, runner=run)
    assert (first.status, run.calls) == ("measured", 1)
    assert "no probe of this machine cached" in first.why
    doc = json.loads(first.path.read_text())
    assert doc["format"] == P.PROBE_FORMAT and doc["key"] == P.machine_key(1)
    assert first.path.parent == probe_dir
    p = first.probe
    assert p.threads == 1 and set(p.gemm_gflops) == {64, 128}
    assert all(v > 0 for v in p.gemm_gflops.values())
    assert p.bandwidth_gbs > 0 and 0 < p.dispatch_fwd_us < 1e5 and 0 < p.dispatch_bwd_us < 1e5
    # the same process asks again: no new run
    assert P.probe_for(1, runner=run).probe == p and run.calls == 1
    # a new process (the memo emptied) reads the file: no new run
    monkeypatch.setattr(P, "_SEEN", {})
    again = P.probe_for(1, runner=run)
    assert (again.status, run.calls) == ("cached", 1)
    assert again.probe.to_dict() == p.to_dict()


@pytest.mark.parametrize("content", ["{not json", json.dumps([1, 2]),
                                     json.dumps({"format": 0, "key": {}, "probe": {}}),
                                     "KEY", json.dumps({"format": P.PROBE_FORMAT, "key": "KEY",
                                                        "probe": {"threads": 1}})])
def test_bad_cache_file_is_probed_again_never_a_crash(probe_dir, content):
    run = CountingRunner()
    path = P.probe_path(P.machine_key(1))
    path.parent.mkdir(parents=True)
    key = json.dumps(P.machine_key(1))
    path.write_text(content.replace('"KEY"', key) if content != "KEY" else "")
    res = P.probe_for(1, runner=run)
    assert (res.status, run.calls) == ("measured", 1)
    assert res.why  # why it ran: another format, unreadable …
    assert P.read_cached(path, P.machine_key(1))[0] is not None  # rewritten, readable


def test_a_changed_key_is_probed_again(probe_dir, monkeypatch):
    run = CountingRunner()
    P.probe_for(1, runner=run)
    assert P.probe_for(2, runner=run).status == "measured" and run.calls == 2  # threads
    monkeypatch.setattr(P, "clock_mhz", lambda: (9999.0, "test clock"))  # another clock
    res = P.probe_for(1, runner=run)
    assert (res.status, run.calls) == ("measured", 3)
    assert len(list(probe_dir.glob("probe-*.json"))) == 3
    # a file at the key's path holding another machine's key (a copied cache) is not trusted
    key = P.machine_key(1)
    P.write_cached(P.probe_path(key), {**key, "cpu": "another CPU"}, res.probe)
    monkeypatch.setattr(P, "_SEEN", {})
    res = P.probe_for(1, runner=run)
    assert res.status == "measured" and "another machine key" in res.why and run.calls == 4


@pytest.mark.slow  # a new process; the fast tier's CLI acceptance below runs the same real probe
def test_real_probe_fits_its_budget_in_a_new_process(tmp_path):
    """The probe as a first CPU prediction runs it: a new process, torch imported by it."""
    code = ("import json, time; t = time.perf_counter()\n"
            "from perfcast.devices.probe import probe_for\n"
            "r = probe_for(1)\n"
            "print(json.dumps({'status': r.status, 'wall': time.perf_counter() - t, "
            "'probe': r.probe.to_dict()}))")
    env = {**os.environ, P.PROBE_DIR_ENV: str(tmp_path / "machine")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["status"] == "measured"
    p = P.Probe.from_dict(got["probe"])
    assert set(p.gemm_gflops) == set(P.GEMM_SIZES) and 0 < p.seconds <= got["wall"]
    # its wall time against the 3 s budget (P.BUDGET_S) is a benchmark's figure, not a timed
    # test: the probe's note and BENCHMARKS.md ("This machine, measured") report it


def test_reference_is_the_training_machines_records():
    """The reference stored with the shipped model is what its training data's records give
    (the dataset's machine profile and operator benchmark), reproducibly."""
    from perfcast.predictors.kernelsum import local_dataset_reference

    shipped = json.loads((SHIPPED / "config.json").read_text())["state"]["reference_probe"]
    assert local_dataset_reference() == shipped
    machine = json.loads((Path(os.environ.get("PERFCAST_DATASETS", SHIPPED.parents[2] /
                                              "datasets")) / "cpu" / "machine.json").read_text())
    for t, p in shipped["probes"].items():
        assert p["gemm_gflops"]["1024"] == machine["gflops"][t]
        assert p["bandwidth_gbs"] == machine["bandwidth_gbs"][t]
        assert p["dispatch_fwd_us"] > 0
    # the machine the labels came from, as its measurements recorded it
    assert shipped["about"]["cpu_model"] and shipped["about"]["platform"]


def test_ratios_and_column_kinds():
    from perfcast.predictors.kernelsum import COLUMNS, OP_COLUMNS, _column_kinds

    ref = P.Probe(threads=1, gemm_gflops={1024: 100.0}, bandwidth_gbs=30.0, dispatch_fwd_us=2.0,
                  dispatch_bwd_us=20.0)
    here = P.Probe(threads=1, gemm_gflops={512: 60.0, 1024: 50.0}, bandwidth_gbs=60.0,
                   dispatch_fwd_us=3.0, dispatch_bwd_us=float("nan"))
    r = P.time_ratios(here, ref)
    assert r["compute"] == pytest.approx(2.0) and r["gemm_sizes"] == [1024]
    assert r["memory"] == pytest.approx(0.5) and r["dispatch_fwd"] == pytest.approx(1.5)
    assert r["dispatch_bwd"] == 1.0  # not measured on one side: not scaled
    kinds = dict(zip(OP_COLUMNS, _column_kinds(OP_COLUMNS)))
    assert kinds["conv.fwd"] == ("compute", "dispatch_fwd")
    assert kinds["gemm.bwd"] == ("compute", "dispatch_bwd")
    assert kinds["dwconv.fwd"] == ("memory", "dispatch_fwd")
    assert kinds["elementwise.bwd"] == ("memory", "dispatch_bwd")
    assert kinds["nodes.forward"] == ("dispatch_fwd", "dispatch_fwd")
    assert kinds["nodes.backward"] == ("dispatch_bwd", "dispatch_bwd")
    roof = dict(zip(COLUMNS, _column_kinds(COLUMNS)))
    assert roof["gemm.forward.compute"][0] == "compute"
    assert roof["norm.backward.memory"] == ("memory", "dispatch_bwd")
    assert roof["conv.backward.launches"] == ("dispatch_bwd", "dispatch_bwd")
    # an unmeasured thread count: the reference's GEMM scaled linearly, the rest held
    reference = {"probes": {"1": ref.to_dict()}}
    at4, note = P.reference_at(reference, 4)
    assert at4.gemm_gflops[1024] == pytest.approx(400.0) and at4.bandwidth_gbs == 30.0
    assert "not 4" in note


def test_calibrated_model_is_not_scaled():
    from perfcast.predictors import load_predictor

    pred = load_predictor(SHIPPED)
    assert pred.probe_off() == "" and pred.reference_probe_ is not None
    pred.trained_on_ = {**pred.trained_on_, "calibrated": {"records": 30}}
    assert "perfcast calibrate" in pred.probe_off()
    assert pred._scalings(None) == {}  # nothing probed, nothing scaled


def _predict(env: dict, extra=()) -> dict:
    out = subprocess.run([sys.executable, "-m", "perfcast", "predict", *IMAGE, *extra, "--json"],
                         capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def _notes(ans: dict) -> list[str]:
    return [n for n in ans["notes"] if n.startswith("time_ms: ")]


def test_cli_first_prediction_probes_second_reuses(tmp_path, monkeypatch):
    """The acceptance, on a small model: a fresh machine's first CPU prediction runs the probe
    (the notes say so and give both probes and the ratios), the second reuses it and answers
    the same."""
    from perfcast.faces.cli import main

    monkeypatch.setenv("PERFCAST_PROBE", "off")  # the graph into the session's cache
    assert main(["predict", *IMAGE, "--json"]) == 0
    env = {P.PROBE_DIR_ENV: str(tmp_path / "machine"), "PERFCAST_PROBE": "auto"}
    first, second = _predict(env), _predict(env)
    assert first["predictor"]["time_ms"] == "kernelsum"
    n1, n2 = " | ".join(_notes(first)), " | ".join(_notes(second))
    assert "probed on its first CPU prediction" in n1 and "reused" not in n1
    assert "reused from the cache" in n2 and "first CPU prediction" not in n2
    for n in (n1, n2):
        assert "this machine, probed" in n and "the training machine" in n
        assert "scaled by the probes' ratio" in n and "perfcast calibrate" in n
    cached = list((tmp_path / "machine").glob("probe-*.json"))
    assert len(cached) == 1
    assert second["time_ms"] == pytest.approx(first["time_ms"], rel=1e-9)
    # the real probe the new process measured: every GEMM size, a positive duration
    probe = P.Probe.from_dict(json.loads(cached[0].read_text())["probe"])
    assert set(probe.gemm_gflops) == set(P.GEMM_SIZES) and probe.seconds > 0


def _slower_machine(tmp_path, k: float) -> tuple[dict, dict]:
    """``(scaled, plain)`` answers of :data:`IMAGE` on a machine whose cached probe is ``k``
    times slower than the training machine's in every respect: with the probe, and with
    ``PERFCAST_PROBE=off``."""
    from perfcast.predictors import load_predictor

    ref, _ = P.reference_at(load_predictor(SHIPPED).reference_probe_, 1)
    slow = P.Probe(threads=1, gemm_gflops={n: v / k for n, v in ref.gemm_gflops.items()},
                   bandwidth_gbs=ref.bandwidth_gbs / k, dispatch_fwd_us=ref.dispatch_fwd_us * k,
                   dispatch_bwd_us=ref.dispatch_bwd_us * k, source=f"test: 1/{k:g} speed")
    d = tmp_path / "machine"
    os.environ[P.PROBE_DIR_ENV] = str(d)
    try:
        P.write_cached(P.probe_path(P.machine_key(1)), P.machine_key(1), slow)
    finally:
        del os.environ[P.PROBE_DIR_ENV]
    return (_predict({P.PROBE_DIR_ENV: str(d), "PERFCAST_PROBE": "auto"}),
            _predict({P.PROBE_DIR_ENV: str(d), "PERFCAST_PROBE": "off"}))


def test_answer_scales_with_the_probe(tmp_path):
    """A machine twice as slow as the training machine in every respect gets answers twice as
    long (every term scaled by 2, the batch rule shift-equivariant in log time); with the probe
    off the answer is the training machine's."""
    scaled, plain = _slower_machine(tmp_path, 2.0)
    assert scaled["time_ms"] / plain["time_ms"] == pytest.approx(2.0, rel=1e-6)
    assert any("×2 forward" in n for n in _notes(scaled))
    assert any("PERFCAST_PROBE=off" in n for n in _notes(plain))
    assert not any("scaled by the probes' ratio" in n for n in _notes(plain))
    assert math.isfinite(plain["time_ms"])


@pytest.mark.slow
def test_probe_ratios_are_bounded(tmp_path):
    """A probe four times slower than the training machine in every respect scales the answer
    by at most ×2 (``MAX_RATIO``: a larger ratio is more likely a disturbed measurement than
    another machine of the same kind); the note says which ratio was held."""
    from perfcast.predictors.kernelsum_probe import MAX_RATIO

    scaled, plain = _slower_machine(tmp_path, 4.0)
    assert scaled["time_ms"] / plain["time_ms"] == pytest.approx(MAX_RATIO, rel=1e-6)
    assert any("held within" in n for n in _notes(scaled))


def test_a_probe_taken_on_a_busy_machine_is_replaced_when_quieter(probe_dir, monkeypatch):
    run = CountingRunner()
    busy = P.run_probe(1, **TINY)
    busy.load_1m = 10.0 * (os.cpu_count() or 1)
    key = P.machine_key(1)
    P.write_cached(P.probe_path(key), key, busy)
    monkeypatch.setattr(P, "_load_now", lambda: busy.load_1m)  # still busy: kept
    assert P.probe_for(1, runner=run).status == "cached" and run.calls == 0
    monkeypatch.setattr(P, "_SEEN", {})
    monkeypatch.setattr(P, "_load_now", lambda: 0.0)  # quiet now: probed again
    res = P.probe_for(1, runner=run)
    assert (res.status, run.calls) == ("measured", 1) and "quieter now" in res.why
