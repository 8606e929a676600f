"""Every registered predictor honours the contract: fit a few steps on real data, save, load,
predict identically; no work in __init__; unknown hyper-parameters rejected."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfcast.errors import PerfcastError
from perfcast.predictors import create_predictor, get_predictor_class, list_predictors, load_predictor

FAST = {"epochs": 2, "n_estimators": 10, "grid": False}


def _builtin() -> list[str]:
    # predictors that price kernel plans have their fit/save/load tests beside them:
    # crossdevice in tests/test_crossdevice.py, kernelsum in tests/test_cpu_calibration.py
    return [n for n in list_predictors() if not n.startswith("test-")
            and n not in ("crossdevice", "kernelsum")]


def test_registry_lists_the_papers_predictors():
    assert {"dippm", "dippm-gcn", "dippm-gat", "dippm-gin", "nnlqp", "mlp", "xgboost",
            "roofline", "memsim"} <= set(_builtin())
    with pytest.raises(PerfcastError, match="unknown predictor"):
        create_predictor("no-such-predictor")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "gnnllm" else n
                                  for n in _builtin()])  # gnnllm's LM: slow tier (tests/test_gnnllm.py)
def test_fit_save_load_predict_identically(name, tiny_feature_set, tmp_path):
    cls = get_predictor_class(name)
    params = {k: v for k, v in FAST.items() if k in cls.default_params()}
    pred = create_predictor(name, **params)
    assert not hasattr(pred, "targets_")  # __init__ stores hyper-parameters only
    fs = tiny_feature_set
    if name == "memsim":  # reads the tensor-memory simulation: a set that carries it
        from perfcast.labeled.frames import feature_set

        with pytest.raises(PerfcastError, match="simulation"):
            create_predictor(name).fit(fs)
        fs = feature_set(fs.rows.iloc[[0, 4]], workers=1, memsim=True)  # infer + train
    targets = [t for t in fs.labeled_targets()
               if cls.supported_targets is None or t in cls.supported_targets]
    pred.fit(fs, targets=targets)
    before = pred.predict(fs)
    assert before.shape == (len(fs), len(pred.targets_))
    path = pred.save(tmp_path / name)
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["predictor"] == name and cfg["feature_layout"]
    after = load_predictor(path).predict(fs)
    if name == "gnnllm":  # trained in torch, loaded it answers in numpy (perfcast.predictors.minilm)
        np.testing.assert_allclose(after, before, rtol=1e-5)
    else:
        np.testing.assert_array_equal(before, after)
    assert np.isfinite(before).all() and (before > 0).all()


def test_unknown_hyper_parameter_rejected(tiny_feature_set):
    with pytest.raises(PerfcastError, match="hyper-parameter"):
        create_predictor("xgboost", no_such_knob=3).fit(tiny_feature_set)
