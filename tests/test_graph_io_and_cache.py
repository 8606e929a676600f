"""ModelGraph persistence, the graph cache, and feature encoders."""

import json
import time

import numpy as np
import pytest

from perfcast import ops
from perfcast.cache import cache_dir, get_graph
from perfcast.errors import PerfcastError
from perfcast.features import (EDGE_FEATURES, NODE_FEATURES, STATIC_NAMES, TRAPPM_NODE_DIM,
                               GraphSummary, edge_matrix, node_matrix, static_features, to_pyg)
from perfcast.workload import Workload
from perfcast.graph import ModelGraph


def test_save_load_roundtrip(tmp_path, resnet18_train):
    g = resnet18_train
    p = g.save(tmp_path / "g.npz")
    h = ModelGraph.load(p)
    assert h.summary() == g.summary()
    assert [n.__dict__ for n in h.nodes] == [n.__dict__ for n in g.nodes]
    assert [e.__dict__ for e in h.edges] == [e.__dict__ for e in g.edges]
    # plain numpy file, no pickle
    with np.load(p, allow_pickle=False) as z:
        assert "json" in z.files
        json.loads(z["json"].tobytes())


def test_load_errors(tmp_path):
    with pytest.raises(PerfcastError, match="not found"):
        ModelGraph.load(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(PerfcastError, match="not a perfcast graph"):
        ModelGraph.load(bad)


def test_cache_hit_is_fast_and_identical():
    req = Workload.of("torchvision:resnet18", batch_size=2)
    g1 = get_graph(req)
    assert (cache_dir() / f"{req.key()}.npz").exists()
    t = time.perf_counter()
    g2 = get_graph(req)
    assert time.perf_counter() - t < 0.5  # the benchmark records the real figure (~ms)
    assert g2.summary() == g1.summary()


def test_cache_key_distinguishes_requests():
    base = Workload.of("timm:resnet50")
    keys = {base.key(), Workload.of("timm:resnet50", batch_size=2).key(),
            Workload.of("timm:resnet50", mode="train").key(),
            Workload.of("timm:resnet50", precision="amp").key(),
            Workload.of("timm:resnet50", input_size=(3, 160, 160)).key()}
    assert len(keys) == 5
    assert Workload.of("timm:resnet50").key() == base.key()


def test_corrupt_cache_entry_is_rebuilt():
    req = Workload.of("torchvision:resnet18")
    g = get_graph(req)
    (cache_dir() / f"{req.key()}.npz").write_bytes(b"garbage")
    assert get_graph(req).summary() == g.summary()


def test_feature_shapes_and_layout(resnet18_train, resnet18_infer):
    g = resnet18_train
    x = node_matrix(g)
    assert x.shape == (g.num_nodes, len(NODE_FEATURES)) and x.dtype == np.float32
    assert TRAPPM_NODE_DIM == len(ops.OPS) + 15
    assert np.isfinite(x).all()
    # one-hot block is exactly one-hot
    assert (x[:, : len(ops.OPS)].sum(1) == 1).all()
    ei, ea = edge_matrix(g, bandwidth_gbs=1555.0)
    assert ei.shape == (2, g.num_edges) and ea.shape == (g.num_edges, len(EDGE_FEATURES))
    assert ea[:, 1].sum() == sum(e.kind == "backward" for e in g.edges)
    # record level: the forward graph (batch 2) rescaled to a training record at batch 8
    summary = GraphSummary.of(resnet18_infer)
    w = Workload.of("torchvision:resnet18", batch_size=8, mode="train", precision="amp",
                    optimizer="adam")
    s = static_features(summary, w, memsim_mb=100.0)
    assert s.shape == (len(STATIC_NAMES),) and s.dtype == np.float32
    col = {n: s[i] for i, n in enumerate(STATIC_NAMES)}
    assert col["log1p_conv_count"] == pytest.approx(np.log1p(20))
    assert col["log1p_macs"] == pytest.approx(np.log1p(resnet18_infer.macs * 8 / 2), rel=1e-6)
    assert col["log1p_params"] == pytest.approx(np.log1p(resnet18_infer.params), rel=1e-6)
    assert col["mode=train"] == 1.0 and col["precision=amp"] == 1.0 and col["optimizer=adam"] == 1
    assert col["precision=fp32"] == 0.0 and col["optimizer=sgd"] == 0.0
    assert col["log1p_memsim_mb"] == pytest.approx(np.log1p(100.0)) and col["has_memsim"] == 1
    # a record that does not say which optimizer: one-hot all zero ("unknown")
    unknown = static_features(summary, w.replace(optimizer=None))
    assert not any(unknown[STATIC_NAMES.index(f"optimizer={o}")] for o in
                   ("sgd", "sgd-momentum", "adam", "adamw"))


def test_to_pyg(resnet18_infer):
    from perfcast.devices import get_device

    d = to_pyg(resnet18_infer, get_device("a100-40gb"), y={"time_ms": 3.5, "memory_mb": 900})
    assert d.num_nodes == resnet18_infer.num_nodes
    assert d.edge_index.shape[1] == resnet18_infer.num_edges
    assert not hasattr(d, "static") or d.static is None  # record statics: FeatureSet.static
    assert d.edge_attr[:, 3].unique().tolist() == [pytest.approx(np.log1p(1555.0))]
    assert d.y.tolist() == [[3.5, 900.0]] and d.y_names == ["time_ms", "memory_mb"]
    assert d.edge_index.max() < d.num_nodes


# --------------------------------------------------------------------------- damaged cache entries
@pytest.mark.slow  # two cold processes each (the fast tier: the reliability table's three
#                   cache-* rows, tests/reliability_cases.py)
@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage"])
def test_damaged_cache_entry_is_removed_and_rebuilt(tmp_path, damage):
    """Issue #23: a truncated / empty / overwritten graph-cache entry heals with a one-line note."""
    import os
    import subprocess
    import sys

    from perfcast.cache import cache_path
    from perfcast.graph import ModelGraph
    from perfcast.workload import Workload

    env = {**os.environ, "PERFCAST_CACHE_DIR": str(tmp_path / "cache")}
    args = [sys.executable, "-m", "perfcast", "inspect", "timm:resnet10t", "--input-size",
            "3,32,32", "--json"]
    first = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    os.environ["PERFCAST_CACHE_DIR"] = env["PERFCAST_CACHE_DIR"]
    try:
        path = cache_path(Workload.of("timm:resnet10t", input_size="3,32,32"))
    finally:
        del os.environ["PERFCAST_CACHE_DIR"]
    assert path.exists()
    raw = path.read_bytes()
    path.write_bytes({"truncate": raw[: len(raw) // 2], "empty": b"",
                      "garbage": b"not a zip file at all"}[damage])
    again = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    notes = [ln for ln in again.stderr.splitlines() if ln.startswith("note:")]
    assert len(notes) == 1 and "rebuilt" in notes[0]
    assert again.stdout == first.stdout  # the same graph, rebuilt
    ModelGraph.load(path)  # and the entry is whole again
