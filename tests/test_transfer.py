"""Few-shot transfer: Predictor.recalibrate and the recipes of perfcast train --init-from."""

import numpy as np
import pytest

from perfcast.errors import PerfcastError

FAST = {"epochs": 3}


def _log_mse(y, yhat):
    return float(np.mean((np.log(y) - np.log(yhat)) ** 2))


def test_recalibrate_is_least_squares_in_log_space(tiny_feature_set, tmp_path):
    from perfcast.predictors import create_predictor, load_predictor

    fs = tiny_feature_set
    m = create_predictor("mlp", **FAST).fit(fs, targets=["time_ms"])
    raw = m.predict(fs)[:, 0]
    y = fs.target("time_ms")
    m.recalibrate(fs)
    a, b, n = m.calibration_["time_ms"]
    ok = np.isfinite(y) & (y > 0)
    bb, aa = np.polyfit(np.log(raw[ok]), np.log(y[ok]), 1)
    assert n == int(ok.sum()) >= 32 and np.isclose(a, aa) and np.isclose(b, bb)
    cal = m.predict(fs)[:, 0]
    np.testing.assert_allclose(cal, np.exp(aa + bb * np.log(raw)), rtol=1e-9)
    assert _log_mse(y[ok], cal[ok]) <= _log_mse(y[ok], raw[ok]) + 1e-12
    # saved and loaded with the predictor; recalibrating again replaces (does not compound)
    m.save(tmp_path / "m")
    back = load_predictor(tmp_path / "m")
    np.testing.assert_allclose(back.predict(fs), m.predict(fs), rtol=1e-6)
    back.recalibrate(fs)
    assert np.allclose(back.calibration_["time_ms"][:2], (a, b))
    # a refit forgets the calibration
    back.fit(fs, targets=["time_ms"])
    assert back.calibration_ == {}


def test_recalibrate_few_records_is_a_pure_scale(tiny_feature_set):
    from perfcast.predictors import create_predictor

    fs = tiny_feature_set
    m = create_predictor("mlp", **FAST).fit(fs, targets=["time_ms"])
    few = fs.subset(np.arange(10))
    raw = m.predict(few)[:, 0]
    m.recalibrate(few)
    a, b, n = m.calibration_["time_ms"]
    y = few.target("time_ms")
    assert n == 10 and b == 1.0 and np.isclose(a, np.mean(np.log(y) - np.log(raw)))
    with pytest.raises(PerfcastError, match="does not predict"):
        m.recalibrate(few, targets=["energy_j"])
    with pytest.raises(PerfcastError, match="fitted"):
        create_predictor("mlp").recalibrate(few)


@pytest.mark.parametrize("recipe", ["recalibrate", "finetune", "scratch", "auto"])
def test_fine_tune_transfer_recipes(tiny_feature_set, tmp_path, recipe):
    from perfcast.predictors import create_predictor, load_predictor
    from perfcast.training.trainer import fine_tune

    fs = tiny_feature_set
    src = create_predictor("mlp", **FAST).fit(fs, targets=["time_ms"])
    src.save(tmp_path / "src")
    cols = ["model", "family", "device", "mode", "precision", "batch_size", "input_size",
            "optimizer", "time_ms", "memory_mb"]
    fs.rows[cols].to_csv(tmp_path / "mine.csv", index=False)
    pred, _ = fine_tune(str(tmp_path / "src"), tmp_path / "mine.csv", tmp_path / "out",
                        transfer=recipe, workers=1, epochs=2)
    tr = load_predictor(tmp_path / "out").trained_on_["transfer"]
    # six models: too few for auto to hold some out, so it fine-tunes
    assert tr["recipe"] == ("finetune" if recipe == "auto" else recipe)
    assert tr["records"] == len(fs) and tr["asked"] == recipe
    assert bool(pred.calibration_) == (tr["recipe"] == "recalibrate")
    with pytest.raises(PerfcastError, match="unknown transfer recipe"):
        fine_tune(str(tmp_path / "src"), tmp_path / "mine.csv", tmp_path / "x", transfer="magic")


def test_fine_tune_auto_scores_both_on_held_out_models(tiny_feature_set, tmp_path, monkeypatch):
    from perfcast.predictors import create_predictor
    from perfcast.training import trainer as T

    monkeypatch.setattr(T, "AUTO_MIN_MODELS", 4)
    fs = tiny_feature_set
    create_predictor("mlp", **FAST).fit(fs, targets=["time_ms"]).save(tmp_path / "src")
    cols = ["model", "family", "device", "mode", "precision", "batch_size", "input_size",
            "optimizer", "time_ms", "memory_mb"]
    fs.rows[cols].to_csv(tmp_path / "mine.csv", index=False)
    pred, _ = T.fine_tune(str(tmp_path / "src"), tmp_path / "mine.csv", tmp_path / "out",
                          workers=1, epochs=2)
    tr = pred.trained_on_["transfer"]
    scores = tr["held_out_mape"]
    assert set(scores) == {"recalibrate", "finetune", "scratch"}
    assert all(np.isfinite(list(scores.values())))
    assert tr["recipe"] == min(scores, key=scores.get)
