"""perfcast predict / train: shipped-model lookup, fallbacks with honest notes, fine-tuning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import perfcast
from perfcast.predictors import create_predictor, load_predictor
from perfcast.training.trainer import write_manifest

KEYS = {"model", "device", "mode", "precision", "batch_size", "time_ms",
        "throughput_samples_per_s", "memory_mb", "energy_j", "power_w", "predictor", "trained_on",
        "notes"}


@pytest.fixture(scope="module")
def shipped(tiny_feature_set, tmp_path_factory):
    """A shipped directory holding one xgboost model of this machine's CPU (time + memory)."""
    root = tmp_path_factory.mktemp("shipped")
    pred = create_predictor("xgboost", grid=False, n_estimators=50)
    pred.fit(tiny_feature_set, targets=["time_ms", "memory_mb"])
    pred.save(root / "cpu-fp32")
    entries = [{"id": f"cpu-fp32:{m}", "device": "cpu", "mode": m, "precision": "fp32",
                "targets": pred.targets_, "predictor": "xgboost", "path": "cpu-fp32",
                "memsim": False} for m in ("infer", "train")]
    write_manifest(entries, root)
    return root


@pytest.fixture
def use_shipped(shipped, monkeypatch):
    monkeypatch.setenv("PERFCAST_SHIPPED_DIR", str(shipped))
    return shipped


def _one_record(spec, device, batch_size, input_size, mode="infer", precision="fp32"):
    """The one-record FeatureSet perfcast.predict feeds a shipped model (see perfcast/api.py):
    the forward fp32 graph at the reference batch, static features at ``batch_size``; no
    memory simulation (the entry's ``memsim`` is false)."""
    import pandas as pd

    from perfcast.cache import get_graph
    from perfcast.features.records import (TARGETS, FeatureSet, GraphSummary, graph_data,
                                           learning_workload, static_features)
    from perfcast.workload import Workload

    w = Workload.of(spec, batch_size=batch_size, input_size=input_size, mode=mode,
                    precision=precision)
    graph = get_graph(learning_workload(w))
    summary = GraphSummary.of(graph)
    static = static_features(summary, w, None)
    rows = pd.DataFrame([{"model": spec, "family": "", "device": device, "mode": mode,
                          "precision": precision, "batch_size": batch_size, "optimizer": None}])
    return FeatureSet(rows=rows, static=static[None, :], graph_index=np.zeros(1, np.int64),
                      graphs=[graph_data(graph)], y=np.full((1, len(TARGETS)), np.nan),
                      summaries=[summary])


def test_predict_learned(use_shipped):
    p = perfcast.predict("timm:resnet10t", device="cpu", batch_size=4, input_size="3,64,64")
    d = p.to_dict()
    assert KEYS <= set(d)
    assert p.predictor == {"time_ms": "xgboost", "memory_mb": "xgboost"}
    assert p.time_ms > 0 and p.memory_mb > 0
    assert p.throughput_samples_per_s == pytest.approx(4 / p.time_ms * 1e3)
    assert p.energy_j is None and p.power_w is None
    assert any("energy_j" in n for n in p.notes)
    assert p.trained_on["time_ms"]["records"] > 0
    # same as running the shipped model on the record by hand — for time where the request is
    # the batch nearest the model's training records (its support), else the note says how far
    # the learned answer was carried along the physics base (perfcast.predictors.support)
    pred = load_predictor(use_shipped / "cpu-fp32")
    assert pred.targets_ == ["time_ms", "memory_mb"] and pred.support_ is not None
    values = pred.predict(_one_record(p.model, p.device, 4, (3, 64, 64)))
    assert p.memory_mb == float(values[0, pred.targets_.index("memory_mb")])
    time_notes = [n for n in p.notes if n.startswith("time_ms:") and "records the xgboost" in n]
    assert len(time_notes) == 1, p.notes
    t = p.route.answers["time_ms"]
    if "inside" in time_notes[0] and "carried" not in time_notes[0] and not t.bounds:
        assert p.time_ms == float(values[0, pred.targets_.index("time_ms")])
    # batch size reaches the model: larger batch, more time
    p8 = perfcast.predict("timm:resnet10t", device="cpu", batch_size=32, input_size="3,64,64")
    assert p8.time_ms > p.time_ms


def test_predict_unlabeled_device_falls_back(use_shipped):
    p = perfcast.predict("timm:resnet10t", device="h100-sxm", batch_size=8, input_size="3,64,64",
                         precision="amp")
    assert p.predictor["time_ms"] == "roofline" and p.time_ms > 0
    assert p.predictor["memory_mb"] == "simulation" and p.memory_mb > 0
    assert any("roofline" in n for n in p.notes)
    assert any("simulation" in n for n in p.notes)


def test_predict_explicit_roofline_and_unknown_predictor(use_shipped):
    p = perfcast.predict("timm:resnet10t", device="cpu", batch_size=2, input_size="3,64,64",
                         predictor="roofline")
    assert p.predictor["time_ms"] == "roofline"
    assert p.predictor["memory_mb"] == "xgboost"
    q = perfcast.predict("timm:resnet10t", device="cpu", batch_size=2, input_size="3,64,64",
                         predictor="dippm")
    assert q.predictor["time_ms"] == "xgboost"
    assert any("no shipped 'dippm'" in n for n in q.notes)


def test_predict_onnx_and_module(use_shipped, tmp_path):
    from tests.helpers import cnn_graph, save_onnx

    path = save_onnx(cnn_graph(), tmp_path / "cnn.onnx")
    p = perfcast.predict(str(path), device="cpu", batch_size=4)
    # the learned CPU model, or — this 8×8 CNN being far smaller than anything it learned
    # from — the physics base, with a note saying which (perfcast.predictors.support)
    assert p.time_ms > 0 and p.predictor["time_ms"] in ("xgboost", "roofline")
    assert any("records the xgboost model learned from" in n for n in p.notes), p.notes
    assert p.input_size == [3, 8, 8]
    q = perfcast.predict(str(path), device="a100-40gb", batch_size=4)
    assert q.predictor["time_ms"] == "roofline"
    assert q.memory_mb is None and any("ONNX" in n for n in q.notes)

    import torch

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten())
    r = perfcast.predict(model, device="cpu", batch_size=2, input_size=(3, 32, 32))
    assert r.model == "Sequential" and r.time_ms > 0


def test_predict_bad_input(use_shipped):
    with pytest.raises(perfcast.PerfcastError, match="unknown device"):
        perfcast.predict("timm:resnet10t", device="no-such-gpu")
    with pytest.raises(perfcast.PerfcastError, match="batch size"):
        perfcast.predict("timm:resnet10t", device="cpu", batch_size=-1)
    with pytest.raises(perfcast.PerfcastError, match="precision"):
        perfcast.predict("timm:resnet10t", device="cpu", precision="int3")


def _cli(*args, env=None):
    e = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "perfcast", *args], capture_output=True,
                          text=True, env=e, timeout=300)


def test_cli_predict_json_and_errors(use_shipped):
    r = _cli("predict", "timm:resnet10t", "--device", "cpu", "--batch-size", "4",
             "--input-size", "3,64,64", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert KEYS <= set(d) and d["time_ms"] > 0
    r = _cli("predict", "timm:resnet10t", "--device", "nope")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    r = _cli("predict", "timm:resnet10t", "--device", "cpu", "--batch-size", "-3")
    assert r.returncode == 2 and "batch" in r.stderr


def _tiny_csv(tiny_feature_set, path: Path) -> Path:
    cols = ["model", "family", "device", "mode", "precision", "batch_size", "input_size",
            "optimizer", "time_ms", "memory_mb"]
    tiny_feature_set.rows[cols].to_csv(path, index=False)
    return path


@pytest.mark.slow  # fast-tier budget: the fast tier keeps a cheaper test of the same command/room
def test_train_data_and_fine_tune(use_shipped, tiny_feature_set, tmp_path):
    csv = _tiny_csv(tiny_feature_set, tmp_path / "mine.csv")
    r = _cli("train", "--data", str(csv), "--predictor", "mlp", "--epochs", "3", "--out",
             str(tmp_path / "mlp"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["records"] == len(tiny_feature_set)
    assert (tmp_path / "mlp" / "weights.safetensors").exists()
    # fine-tune the shipped model on the same measurements
    r = _cli("train", "--init-from", "cpu-fp32:infer", "--data", str(csv), "--out",
             str(tmp_path / "ft"), "--json")
    assert r.returncode == 0, r.stderr
    ft = load_predictor(tmp_path / "ft")
    assert ft.trained_on_["fine_tuned_from"] == "cpu-fp32:infer"
    p = perfcast.predict("timm:resnet10t", device="cpu", batch_size=4, input_size="3,64,64",
                         predictor=str(tmp_path / "ft"))
    assert p.predictor["time_ms"].startswith("xgboost (") and p.time_ms > 0
    # errors: missing file, unknown model id, missing --out
    assert _cli("train", "--data", str(tmp_path / "nope.csv"), "--out", "x").returncode == 2
    r = _cli("train", "--init-from", "no-such-model", "--data", str(csv), "--out", "x")
    assert r.returncode == 2 and "shipped" in r.stderr
    assert _cli("train", "--data", str(csv)).returncode == 2


def test_train_recipe(tmp_path, monkeypatch, tiny_feature_set):
    """A recipe entry trains on all its records and writes a manifest predict can use."""
    from perfcast import shipped as S
    from perfcast.training.trainer import train_recipe

    recipe = {"name": "t", "entries": [
        {"id": "cpu-fp32", "loader": "local_cpu", "sources": ["measurements.db"],
         "targets": ["time_ms"], "predictor": "xgboost", "params": {"grid": False,
                                                                   "n_estimators": 20}}]}
    rp = tmp_path / "r.json"
    rp.write_text(json.dumps(recipe))
    import perfcast.datasets as D

    small = D.load_local_cpu()
    small = small[small.model.isin(tiny_feature_set.rows.model.unique())
                  & small.input_size.isin(["3,64,64"])]
    monkeypatch.setattr(D, "load_local_cpu", lambda *a, **k: small)
    res = train_recipe(str(rp), out_dir=tmp_path / "out", workers=1)
    m = S.manifest(tmp_path / "out")
    assert {(e["device"], e["mode"]) for e in m} == {("cpu", "infer"), ("cpu", "train")}
    assert res["models"] and all(e["predictor"] == "xgboost" for e in m)
    assert S.find("cpu", "train", "fp32", "time_ms", root=tmp_path / "out")["path"] == "cpu-fp32"
    assert np.isfinite(load_predictor(tmp_path / "out" / "cpu-fp32").predict(tiny_feature_set)).all()


@pytest.mark.slow
def test_overlapped_simulation_matches_inline(use_shipped):
    """The CLI's cold path (simulation in a forked child while the graph is built) gives the
    same memory as the inline simulation, with and without an explicit input size."""
    for kw in ({"input_size": "3,64,64"}, {}):
        fork = perfcast.predict("timm:resnet10t", device="h100-sxm", batch_size=2,
                                overlap_simulation=True, **kw)
        inline = perfcast.predict("timm:resnet10t", device="h100-sxm", batch_size=2,
                                  use_cache=False, **kw)
        assert fork.predictor["memory_mb"] == "simulation"
        assert fork.memory_mb == pytest.approx(inline.memory_mb)
        assert fork.time_ms == pytest.approx(inline.time_ms)
    from perfcast.memory.cache import MemsimCache
    from perfcast.workload import Workload

    assert MemsimCache().contains(Workload.of("timm:resnet10t", batch_size=2,
                                              input_size="3,64,64"))


def test_simulation_job_reports_errors(monkeypatch):
    from perfcast.errors import PerfcastError
    from perfcast.memory.cache import SimulationJob
    from perfcast.workload import Workload

    # an earlier test may have marked forking unsafe in this process (autograd threads): the
    # job must still start, and report the error whichever side runs the simulation
    monkeypatch.setattr(SimulationJob, "_fork_unsafe", False)
    job = SimulationJob.start(Workload.of("timm:no_such_net_xyz", batch_size=1))
    assert job is not None
    with pytest.raises(PerfcastError, match="no_such_net_xyz"):
        job.result()


@pytest.mark.slow
def test_import_pyg_defers_datasets():
    code = ("import sys; from perfcast.features.pyg import import_pyg; import_pyg(); "
            "from torch_geometric.nn import SAGEConv; "
            "assert 'transformers' not in sys.modules and 'torch_geometric.llm' not in sys.modules; "
            "from torch_geometric.datasets import TUDataset; import torch_geometric as g; "
            "assert g.datasets.TUDataset is TUDataset and 'torch_geometric.llm' in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_unknown_predictor_name_is_an_error_with_the_nearest_name():
    """Issue #23: `--predictor dipm` (typo) → exit 2 naming the valid names; a known name
    without a model for the device still answers with the default one and a note."""
    r = _cli("predict", "timm:resnet10t", "--device", "cpu", "--input-size", "3,32,32",
             "--predictor", "dipm")
    assert r.returncode == 2, r.stderr
    assert "did you mean 'dippm'" in r.stderr and "xgboost" in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    p = perfcast.predict("timm:resnet10t", device="cpu", input_size="3,32,32",
                         predictor="dippm")
    assert any("no shipped 'dippm'" in n for n in p.notes)
