"""Issue #21: the machine profile, kernelsum (answers that scale with FLOPs, batch and threads),
threads on predict, and ``perfcast calibrate`` end to end with a tiny budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from perfcast.errors import PerfcastError
from perfcast.profiler.micro import MachineProfile, measure_machine

TINY = ["timm:resnet10t", "timm:mobilenetv3_small_100", "timm:lcnet_100",
        "torchvision:squeezenet1_1"]


def _profile() -> MachineProfile:
    return MachineProfile(device="cpu", cpu="test", gflops={1: 80.0, 2: 150.0},
                          bandwidth_gbs={1: 20.0, 2: 30.0})


def test_machine_profile_measured_and_round_trips(tmp_path):
    p = measure_machine([1])
    assert p.gflops[1] > 1 and p.bandwidth_gbs[1] > 0.1  # any real CPU does better than that
    p.save(tmp_path / "m.json")
    q = MachineProfile.load(tmp_path / "m.json")
    assert q.gflops == p.gflops and q.bandwidth_gbs == p.bandwidth_gbs
    # an unmeasured count is scaled from the nearest one: compute with threads, bandwidth held
    assert q.at(4) == (p.gflops[1] * 4, p.bandwidth_gbs[1])
    with pytest.raises(PerfcastError, match="threads"):
        q.at(0)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(PerfcastError, match="not a machine profile"):
        MachineProfile.load(tmp_path / "bad.json")
    with pytest.raises(PerfcastError, match="not found"):
        MachineProfile.load(tmp_path / "missing.json")


def test_gpu_profile_refused_without_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: covered by test_gpu_profile_on_cuda")
    with pytest.raises(PerfcastError, match="no CUDA device"):
        measure_machine(device="a100-40gb")


def test_gpu_profile_on_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine (the CUDA path uses torch.cuda events)")
    p = measure_machine(device="gpu")
    assert p.gflops[1] > 100 and p.bandwidth_gbs[1] > 50


@pytest.fixture(scope="module")
def cpu_fs(session_graph_cache):
    """A few measured CPU records of small models (the project's dataset) with kernel plans —
    their graphs from the session's store of labeled graphs (``tiny_feature_set`` builds the
    same records' graphs)."""
    from perfcast.datasets import load_local_cpu
    from perfcast.labeled import feature_set

    store = session_graph_cache.parent / "labeled"
    old = os.environ.get("PERFCAST_GRAPH_STORE")
    os.environ["PERFCAST_GRAPH_STORE"] = str(store)
    try:
        df = load_local_cpu()
        df = df[df["model"].isin(TINY) & (df["input_size"] == "3,64,64")].reset_index(drop=True)
        fs = feature_set(df, workers=1, plans=True)
    finally:
        if old is None:
            os.environ.pop("PERFCAST_GRAPH_STORE", None)
        else:
            os.environ["PERFCAST_GRAPH_STORE"] = old
    assert len(fs) >= 20
    return fs


def _at(fs, **changes):
    out = fs.subset(np.arange(len(fs)))
    out.rows = fs.rows.copy()
    for k, v in changes.items():
        out.rows[k] = v
    return out


@pytest.mark.parametrize("correction", ["none", "xgboost"])
def test_kernelsum_scales_with_batch_and_threads(cpu_fs, correction, tmp_path):
    from perfcast.predictors import create_predictor, load_predictor

    p = create_predictor("kernelsum", machine=_profile().to_dict(), correction=correction)
    p.fit(cpu_fs, targets=["time_ms"])
    y, yhat = cpu_fs.target("time_ms"), p.predict(cpu_fs)[:, 0]
    assert np.mean(np.abs(yhat / y - 1)) < 0.5  # it learned something, on its own data
    assert (p.coef_ >= 0).all()
    # never flat beyond the trained batches: every prediction grows with the batch
    preds = [p.predict(_at(cpu_fs, batch_size=b))[:, 0] for b in (1, 8, 64, 512)]
    for a, b in zip(preds, preds[1:]):
        assert (b > a).all()
    assert (preds[-1] / preds[-2] > 4).all()  # ~linear far out: the kernels carry the scale
    # more threads → more peak → faster (this profile: 2 threads ≈ 1.9× the FLOPs)
    t1 = p.predict(_at(cpu_fs, threads=1))[:, 0]
    t2 = p.predict(_at(cpu_fs, threads=2))[:, 0]
    assert (t2 < t1).all()
    why = p.out_of_range(_at(cpu_fs, batch_size=512))
    assert all("batch 512" in w for w in why)
    assert not any(p.out_of_range(cpu_fs))
    p.save(tmp_path / "ks")
    q = load_predictor(tmp_path / "ks")
    np.testing.assert_allclose(q.predict(cpu_fs), p.predict(cpu_fs), rtol=1e-9)
    assert q.machine_.gflops == {1: 80.0, 2: 150.0}
    eff = q.efficiencies()
    assert set(eff["class"]) >= {"gemm", "conv", "stream"}


def test_kernelsum_warm_start_moves_towards_new_machine(cpu_fs):
    import copy

    from perfcast.predictors import create_predictor

    p = create_predictor("kernelsum", machine=_profile().to_dict(), correction="none")
    p.fit(cpu_fs, targets=["time_ms"])
    slower = copy.deepcopy(cpu_fs)
    slower.y = cpu_fs.y * 2.0  # the same models on a machine twice as slow
    q = copy.deepcopy(p).set_params(warm_start=True, prior_records=1.0)
    q.fit(slower, targets=["time_ms"])
    ratio = np.median(q.predict(cpu_fs)[:, 0] / p.predict(cpu_fs)[:, 0])
    assert 1.6 < ratio < 2.4


def test_kernelsum_needs_plans(tiny_feature_set):
    from perfcast.predictors import create_predictor

    with pytest.raises(PerfcastError, match="kernel plans"):
        create_predictor("kernelsum", machine=_profile().to_dict()).fit(
            tiny_feature_set, targets=["time_ms"])


def test_predict_threads_validated_and_noted():
    import perfcast

    with pytest.raises(PerfcastError, match="threads"):
        perfcast.predict("timm:resnet10t", device="cpu", input_size="3,64,64", threads=0)
    p = perfcast.predict("timm:resnet10t", device="cpu", input_size="3,64,64", threads=1)
    if p.predictor.get("time_ms") == "kernelsum":
        assert any("1 CPU thread" in n for n in p.notes)


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "perfcast", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=900)


def test_calibrate_budget_too_small_keeps_what_it_measured(tmp_path, monkeypatch, capsys):
    """The fast tier's `perfcast calibrate` (the whole run is the slow test below): the machine
    profile is measured and kept; a budget too small for three models is a one-line exit 2
    that says where the measurements are; bad input is exit 2 before any work."""
    from perfcast.faces.cli import main

    monkeypatch.setenv("PERFCAST_USER_MODELS", str(tmp_path / "models"))
    args = ["calibrate", "--device", "cpu", "--models", " ".join(TINY[:3]), "--batch-sizes",
            "1", "--input-size", "3,32,32", "--threads", "1", "--max-seconds", "0.1"]
    assert main([*args, "--minutes", "0.001"]) == 2
    err = capsys.readouterr().err
    assert "raise --minutes" in err and "calibration-cpu.db" in err and "Traceback" not in err
    prof = MachineProfile.load(tmp_path / "models" / "machine-cpu.json")
    assert prof.device == "cpu" and prof.gflops[1] > 1 and prof.bandwidth_gbs[1] > 0.1
    assert main(["calibrate", "--minutes", "-1"]) == 2
    assert main(["calibrate", "--device", "nosuchgpu"]) == 2
    err = capsys.readouterr().err
    assert "minutes" in err and "nosuchgpu" in err and "Traceback" not in err


@pytest.mark.slow  # a training recipe: 2 minutes of measuring, then fitting
def test_calibrate_end_to_end_tiny_budget(tmp_path):
    env = {"PERFCAST_USER_MODELS": str(tmp_path / "models"),
           "PERFCAST_GRAPH_STORE": str(tmp_path / "store")}
    models = " ".join(TINY[:3])
    r = _cli("calibrate", "--device", "cpu", "--minutes", "2", "--models", models,
             "--batch-sizes", "1,2", "--input-size", "3,64,64", "--threads", "1",
             "--max-seconds", "0.3", "--json", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["device"] == "cpu" and res["threads"] == 1
    # the first round measures every model once (infer) before any second configuration
    assert res["measured"] >= 3 and len(res["models"]) == 3
    assert res["held_out"] and set(res["held_out"]) < set(res["models"])
    assert res["mape_before"] is not None and res["mape_after"] is not None
    assert res["recipe"] in ("recalibrate", "finetune", "scratch")
    man = json.loads((tmp_path / "models" / "manifest.json").read_text())
    assert {e["mode"] for e in man["models"]} == {"infer", "train"}
    # the next prediction for the device uses the calibrated model
    r = _cli("predict", "timm:resnet10t", "--device", "cpu", "--input-size", "3,64,64",
             "--threads", "1", "--json", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    pred = json.loads(r.stdout)
    assert pred["trained_on"]["time_ms"].get("calibrated", {}).get("device") == "cpu"
    # a re-run keeps what was measured (resumable store): no budget left, it still fits
    r = _cli("calibrate", "--device", "cpu", "--minutes", "0.001", "--models", models,
             "--batch-sizes", "1,2", "--input-size", "3,64,64", "--threads", "1", "--json",
             env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    again = json.loads(r.stdout)
    assert again["measured"] >= res["measured"] and again["stopped_by"] == "budget"
    # bad input: one line, exit 2
    r = _cli("calibrate", "--minutes", "-1", env=env)
    assert r.returncode == 2 and "minutes" in r.stderr and "Traceback" not in r.stderr
    r = _cli("calibrate", "--device", "nosuchgpu", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr


# --------------------------------------------------------------------------- operator model
def _bench_csv(path, fs) -> str:
    """Time every distinct node of ``fs``'s plans at batch 1 and 4 (forward and backward)."""
    import csv

    import torch

    from perfcast.ops import op_group
    from perfcast.profiler.opbench import time_node

    torch.set_num_threads(1)
    rows, seen = [], set()
    for plan in fs.plans:
        for b in (1, 4):
            for op, ins, outs, attrs, flops, _ in plan.nodes_at(b):
                key = json.dumps([op, ins, outs, sorted(attrs.items())], default=str)
                if op_group(op) is None or key in seen:
                    continue
                seen.add(key)
                r = time_node(op, ins, outs, attrs, backward=True, max_seconds=0.002)
                if r is not None:
                    rows.append({"op": op, "in_shapes": json.dumps([list(s) for s in ins]),
                                 "out_shapes": json.dumps([list(s) for s in outs]),
                                 "attrs": json.dumps(attrs), "flops": flops, "threads": 1,
                                 **r})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return str(path)


def test_op_calls_time_real_ops():
    from perfcast.profiler.opbench import op_call, time_node

    conv = time_node("conv_depthwise", [(1, 8, 16, 16), (8, 1, 3, 3)], [(1, 8, 16, 16)],
                     {"stride": [1, 1], "padding": [1, 1], "groups": 8, "kernel": [3, 3]},
                     backward=True)
    assert conv["fwd_ms"] > 0 and conv["bwd_ms"] > 0
    lin = time_node("linear", [(4, 32), (16, 32), (16,)], [(4, 16)], {"bias": True})
    assert lin["fwd_ms"] > 0 and "bwd_ms" not in lin
    assert op_call("gather", [(4, 4)], [(4, 4)], {}) is None  # no call: priced on its roofline


@pytest.mark.slow
def test_kernelsum_with_operator_model(cpu_fs, tmp_path):
    from perfcast.predictors import create_predictor, load_predictor

    csv_path = _bench_csv(tmp_path / "ops.csv", cpu_fs)
    p = create_predictor("kernelsum", machine=_profile().to_dict(), correction="none",
                         ops=csv_path)
    p.fit(cpu_fs, targets=["time_ms"])
    yhat = p.predict(cpu_fs)[:, 0]
    assert np.isfinite(yhat).all() and (yhat > 0).all()
    assert np.mean(np.abs(yhat / cpu_fs.target("time_ms") - 1)) < 0.5
    preds = [p.predict(_at(cpu_fs, batch_size=b))[:, 0] for b in (1, 8, 64, 512)]
    for a, b in zip(preds, preds[1:]):
        assert (b > a).all()
    eff = p.efficiencies()
    assert list(eff["column"])[0] == "conv.fwd"
    p.save(tmp_path / "ks")
    q = load_predictor(tmp_path / "ks")  # the operator model travels inside
    np.testing.assert_allclose(q.predict(cpu_fs), p.predict(cpu_fs), rtol=1e-9)
