"""GNN predictors (dippm + Table-4 variants, nnlqp): fit, predict, save/load, warm start."""

import json

import numpy as np
import pytest

from perfcast.errors import PerfcastError
from perfcast.predictors import create_predictor, list_predictors, load_predictor

GNNS = ("dippm", "dippm-gcn", "dippm-gat", "dippm-gin", "nnlqp")
SMALL = {"hidden": 16, "fc_hidden": 16, "batch_size": 8, "lr": 3e-3}


def _fit(name, fs, **params):
    return create_predictor(name, **{**SMALL, "epochs": 6, **params}).fit(fs)


def test_registered():
    assert set(GNNS) <= set(list_predictors())
    assert create_predictor("dippm-gat").get_params()["conv"] == "gat"
    assert create_predictor("nnlqp").get_params()["conv_layers"] == 2


@pytest.mark.parametrize("name", GNNS)
def test_fit_predict_save_load(name, tiny_feature_set, tmp_path):
    fs = tiny_feature_set
    m = _fit(name, fs)
    targets = fs.labeled_targets()
    assert m.targets_ == targets
    pred = m.predict(fs)
    assert pred.shape == (len(fs), len(targets))
    assert np.isfinite(pred).all() and (pred > 0).all()
    losses = [h["train_loss"] for h in m.history_]
    assert len(losses) == 6 and losses[-1] < losses[0]
    # deterministic given the seed
    np.testing.assert_array_equal(_fit(name, fs).predict(fs), pred)

    m.save(tmp_path / "p")
    back = load_predictor(tmp_path / "p")
    assert type(back) is type(m) and back.targets_ == targets
    np.testing.assert_array_equal(back.predict(fs), pred)
    # prediction on a subset matches (embeddings do not depend on the batch composition)
    idx = np.arange(0, len(fs), 3)
    np.testing.assert_allclose(back.predict(fs.subset(idx)), pred[idx], rtol=1e-5)


def test_valid_early_stopping_restores_best(tiny_feature_set):
    fs = tiny_feature_set
    va_g = {0, 5}
    is_va = np.isin(fs.graph_index, list(va_g))
    tr, va = fs.subset(np.flatnonzero(~is_va)), fs.subset(np.flatnonzero(is_va))
    m = create_predictor("dippm", **{**SMALL, "epochs": 30, "patience": 3, "lr": 3e-2})
    m.fit(tr, va)
    vl = [h["valid_loss"] for h in m.history_]
    assert all("train_loss" in h for h in m.history_)
    best = int(np.argmin(vl))
    assert len(vl) <= 30 and (len(vl) == 30 or len(vl) - 1 - best == 3)
    # the restored weights give the best validation loss
    t = m._tensors(va, m.targets_)
    assert m._eval_loss(m.net_, t, m._loss_fn("huber")) == pytest.approx(vl[best], rel=1e-5)


def test_warm_start_continues(tiny_feature_set, tmp_path):
    fs = tiny_feature_set
    m = _fit("dippm", fs)
    m.save(tmp_path / "p")
    loaded = load_predictor(tmp_path / "p")
    before = loaded.predict(fs)
    scaler_mean = loaded.target_scaler_.mean.copy()
    # fine-tune on one target (a subset of the fitted ones) and half the records
    sub = fs.subset(np.arange(0, len(fs), 2))
    mem_row = loaded.net_.out.weight[m.targets_.index("memory_mb")].detach().clone()
    loaded.set_params(warm_start=True, epochs=3, lr=1e-3)
    loaded.fit(sub, targets=["time_ms"])
    # memory_mb is not trained: its output row gets no gradient
    assert loaded.net_.out.weight[m.targets_.index("memory_mb")].detach().equal(mem_row)
    assert loaded.targets_ == m.targets_  # all outputs kept
    assert [h["epoch"] for h in loaded.history_] == list(range(1, 10))
    assert loaded.history_[6]["train_loss"] < m.history_[0]["train_loss"]
    assert loaded.trained_on_["records"] == len(sub)
    assert loaded.trained_on_["warm_start_from"]["records"] == len(fs)
    np.testing.assert_array_equal(loaded.target_scaler_.mean, scaler_mean)
    after = loaded.predict(fs)
    assert after.shape == before.shape and not np.array_equal(after, before)
    # without warm_start, fit starts over
    fresh = _fit("dippm", fs, epochs=2)
    assert len(fresh.history_) == 2


def test_warm_start_rejects_new_targets_and_architecture(tiny_feature_set):
    fs = tiny_feature_set
    m = _fit("nnlqp", fs, epochs=1, warm_start=True)
    m.targets_ = ["time_ms"]  # pretend it was fitted on time only
    hist = list(m.history_)
    with pytest.raises(PerfcastError, match="cannot add target"):
        m.fit(fs, targets=["time_ms", "memory_mb"])
    assert m.targets_ == ["time_ms"] and m.history_ == hist  # a failed fit changes nothing
    m2 = _fit("nnlqp", fs, epochs=1, warm_start=True)
    m2.set_params(hidden=32)
    with pytest.raises(PerfcastError, match="architecture"):
        m2.fit(fs)


def test_bad_hyper_parameters(tiny_feature_set):
    with pytest.raises(PerfcastError, match="unknown hyper-parameter"):
        create_predictor("dippm", hiden=64).fit(tiny_feature_set)
    with pytest.raises(PerfcastError, match="unknown conv"):
        create_predictor("dippm", conv="transformer", epochs=1).fit(tiny_feature_set)


def test_tampered_feature_layout(tiny_feature_set, tmp_path):
    m = _fit("dippm", tiny_feature_set, epochs=1)
    m.save(tmp_path / "p")
    cfg_path = tmp_path / "p" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["feature_layout"] = "0-ops1-static0"
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(PerfcastError, match="feature layout .*retrain"):
        load_predictor(tmp_path / "p")


def test_unlabeled_target_rejected(tiny_feature_set):
    assert "energy_j" not in tiny_feature_set.labeled_targets()
    with pytest.raises(PerfcastError, match="no (training )?label"):
        create_predictor("nnlqp", epochs=1).fit(tiny_feature_set, targets=["time_ms", "energy_j"])
