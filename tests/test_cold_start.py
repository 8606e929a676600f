"""Issue #31, item 2: a cached prediction imports only what its answer needs.

* tree models (``xgboost``, the ``kernelsum`` / ``crossdevice`` corrections, the LLM models)
  answer through :mod:`perfcast.trees` — bit for bit XGBoost's answers, without
  importing XGBoost (≈ 1 s: scikit-learn, scipy);
* the ``mlp`` answers with numpy from its saved weights (no torch);
* the roofline bounds read the graph itself (no PyG ``Data``, no torch);
* a graph and a simulation from the cache: no torch, no torch_geometric, no transformers.

The per-command import times are benchmarks (``benchmarks/bench_cold_start.py``), not tests.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

HEAVY = ("torch", "torch_geometric", "transformers", "xgboost", "sklearn")


def _shipped_boosters():
    """Every XGBoost booster shipped with perfcast: (predictor, tensor name, raw bytes)."""
    from safetensors.numpy import load_file

    from perfcast.paths import package_data

    out = []
    for w in sorted(package_data("shipped").glob("*/weights.safetensors")):
        for name, v in load_file(str(w)).items():
            raw = v.tobytes()
            if v.dtype == np.uint8 and raw[:1] == b"{" and b"learner" in raw[:64]:
                out.append((w.parent.name, name, raw))
    return out


def _one_of_each_kind(boosters):
    """The first booster of each (format, tensor kind): json/ubj × ``booster``/``op``…"""
    seen, out = set(), []
    for b in boosters:
        kind = (b[2][1:2] == b'"', b[1].split(".")[0])
        if kind not in seen:
            seen.add(kind)
            out.append(b)
    return out


@pytest.mark.parametrize("which", [
    "one of each kind",  # the fast tier: every format and tensor kind once
    pytest.param("every", marks=pytest.mark.slow),  # ~4 s of CPU
])
def test_trees_answer_bit_for_bit_as_xgboost_on_every_shipped_booster(which):
    xgb = pytest.importorskip("xgboost")
    from perfcast.trees import TreeEnsemble

    rng = np.random.default_rng(0)
    boosters = _shipped_boosters()
    assert len(boosters) >= 25 and {b[1].split(".")[0] for b in boosters} >= {"booster", "op"}
    if which != "every":
        boosters = _one_of_each_kind(boosters)
    formats = set()
    for where, name, raw in boosters:
        ours = TreeEnsemble.from_json(raw)
        theirs = xgb.Booster()
        theirs.load_model(bytearray(raw))
        formats.add("json" if raw[1:2] == b'"' else "ubj")
        x = rng.normal(size=(400, ours.num_feature)) * rng.choice([0.1, 1.0, 30.0], (400, 1))
        x[rng.random(x.shape) < 0.05] = np.nan  # missing values take the default branch
        margin = rng.normal(size=400)
        assert np.array_equal(ours.predict(x), theirs.inplace_predict(x)), (where, name)
        assert np.array_equal(ours.inplace_predict(x, base_margin=margin),
                              theirs.inplace_predict(x, base_margin=margin)), (where, name)
        assert ours.num_boosted_rounds() == theirs.num_boosted_rounds()
        assert bytes(ours.save_raw(formats and ("json" if raw[1:2] == b'"' else "ubj"))) == raw
    assert formats == {"json", "ubj"}


def test_trees_refuse_what_they_do_not_implement():
    xgb = pytest.importorskip("xgboost")
    from perfcast.trees import TreeEnsemble, UnsupportedModel, load_booster

    x = np.random.default_rng(1).normal(size=(64, 3))
    y = (x[:, 0] > 0).astype(float)
    bst = xgb.train({"objective": "binary:logistic", "max_depth": 2}, xgb.DMatrix(x, label=y), 5)
    raw = bytes(bst.save_raw("json"))
    with pytest.raises(UnsupportedModel, match="objective"):
        TreeEnsemble.from_json(raw)
    fallback = load_booster(raw)  # XGBoost itself answers then
    assert isinstance(fallback, xgb.Booster)
    assert np.array_equal(fallback.inplace_predict(x), bst.inplace_predict(x))
    with pytest.raises(UnsupportedModel):
        TreeEnsemble.from_json(b"not a model")


def test_numpy_mlp_equals_its_torch_module(tiny_feature_set, tmp_path):
    import torch

    from perfcast.predictors import create_predictor, load_predictor

    m = create_predictor("mlp", epochs=3).fit(tiny_feature_set)
    m.save(tmp_path / "m")
    loaded = load_predictor(tmp_path / "m")
    assert loaded.net_ is None  # answers from the weights, no module built
    ours = loaded.predict(tiny_feature_set)
    assert np.array_equal(ours, m.predict(tiny_feature_set))
    net = loaded._net_from_weights()
    with torch.no_grad():
        z = net(torch.from_numpy(loaded.x_scaler_.transform(
            tiny_feature_set.static.astype(np.float32)))).double().numpy()
    np.testing.assert_allclose(ours, loaded.y_scaler_.inverse(z), rtol=1e-5)


def test_graph_cost_from_the_graph_equals_the_one_from_pyg(resnet18_infer):
    from perfcast.features.records import GraphSummary, graph_data
    from perfcast.predictors.roofline import GraphCost

    s = GraphSummary.of(resnet18_infer)
    a, b = GraphCost.of(graph_data(resnet18_infer), s), GraphCost.of_graph(resnet18_infer, s)
    for f in ("flops", "act_bytes", "param_bytes", "is_dropout"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert (a.ref_batch, a.params, a.param_bytes_total, a.param_nodes) == \
        (b.ref_batch, b.params, b.param_bytes_total, b.param_nodes)


PROBE = """
import json, sys
import perfcast
out = []
# each request inside the support of the learned model that answers it (issue #38)
for device, mode, size, batch in (("rtx3090", "train", "3,224,224", 256),
                                  ("cpu", "infer", "3,64,64", 8)):
    p = perfcast.predict("timm:resnet10t", input_size=size, batch_size=batch, device=device,
                         mode=mode)
    out.append({"predictor": p.predictor, "time_ms": p.time_ms, "memory_mb": p.memory_mb})
print(json.dumps({"loaded": [m for m in %r if m in sys.modules], "answers": out}))
""" % (HEAVY,)


@pytest.mark.slow  # fast-tier budget: the fast tier keeps a cheaper test of the same command/room
def test_cached_prediction_imports_no_torch():
    """Once the graphs (and the simulation) are cached, a new process answers with a tree model
    (xgboost on the RTX 3090; kernelsum's trees on this CPU), the numpy MLP and the simulation
    cache without importing torch, PyG, transformers, XGBoost or scikit-learn — and gives the
    same answers as the process that built them."""
    def run():
        r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    first = run()  # builds (or finds) the graphs and the simulation in the session cache
    cached = run()
    assert cached["loaded"] == [], cached
    kinds = [{"time_ms": "xgboost", "memory_mb": "simulation"},
             {"time_ms": "kernelsum", "memory_mb": "mlp"}]
    for answer, kind in zip(cached["answers"], kinds):
        assert {t: answer["predictor"][t] for t in kind} == kind
    assert cached["answers"] == first["answers"]
