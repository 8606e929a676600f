"""Static-feature baselines (mlp, xgboost) and the analytical roofline: fit, predict,
save/load, warm start, family-grouped grid search, roofline physics."""

import dataclasses

import numpy as np
import pytest

from perfcast.errors import PerfcastError
from perfcast.predictors import create_predictor, list_predictors, load_predictor

FAST_GRID = {"max_depth": [2, 4], "subsample": [1.0], "colsample_bytree": [0.7, 1.0]}


def _split_by_family(fs, held=("vision_transformer",)):
    m = np.isin(fs.families(), list(held))
    return fs.subset(np.flatnonzero(~m)), fs.subset(np.flatnonzero(m))


def _with_rows(fs, **cols):
    rows = fs.rows.copy()
    for k, v in cols.items():
        rows[k] = v
    return dataclasses.replace(fs, rows=rows)


def test_registered():
    assert {"mlp", "xgboost", "roofline"} <= set(list_predictors())
    assert create_predictor("mlp").get_params()["epochs"] == 100
    assert create_predictor("roofline").learns is False


@pytest.mark.parametrize("name,params", [
    ("mlp", {"epochs": 30}),
    pytest.param("xgboost", {}, marks=pytest.mark.slow),  # default grid, family-grouped CV
    ("xgboost", {"grid": False, "n_estimators": 100}),
    ("roofline", {}),
])
def test_fit_predict_save_load(name, params, tiny_feature_set, tmp_path):
    fs = tiny_feature_set
    m = create_predictor(name, **params).fit(fs)
    targets = ["time_ms"] if name == "roofline" else fs.labeled_targets()
    assert m.targets_ == targets
    pred = m.predict(fs)
    assert pred.shape == (len(fs), len(targets))
    assert np.isfinite(pred).all() and (pred > 0).all()
    # deterministic given the seed
    np.testing.assert_array_equal(create_predictor(name, **params).fit(fs).predict(fs), pred)
    m.save(tmp_path / "p")
    back = load_predictor(tmp_path / "p")
    assert type(back) is type(m) and back.targets_ == targets
    np.testing.assert_array_equal(back.predict(fs), pred)
    assert back.predict(fs.subset([])).shape == (0, len(targets))


def test_mlp_learns_and_early_stops(tiny_feature_set):
    tr, va = _split_by_family(tiny_feature_set)
    m = create_predictor("mlp", epochs=200, patience=5, lr=1e-2).fit(tr, va)
    vl = [h["valid_loss"] for h in m.history_]
    assert m.history_[-1]["train_loss"] < m.history_[0]["train_loss"]
    assert len(vl) < 200 and len(vl) - 1 - int(np.argmin(vl)) == 5
    # the best epoch's weights are restored: in-sample fit is decent
    pred = m.predict(tr)
    err = np.abs(np.log(pred / tr.y[:, :2]))
    assert np.nanmedian(err) < 0.7
    with pytest.raises(PerfcastError, match="loss"):
        create_predictor("mlp", loss="l1", epochs=1).fit(tr)
    hub = create_predictor("mlp", loss="huber", epochs=3).fit(tr)
    assert np.isfinite(hub.predict(va)).all()


def test_mlp_warm_start_keeps_scalers_and_targets(tiny_feature_set, tmp_path):
    tr, new = _split_by_family(tiny_feature_set)
    m = create_predictor("mlp", epochs=20).fit(tr)
    m.save(tmp_path / "m")
    ft = load_predictor(tmp_path / "m")
    before = ft.predict(new)
    x_mean, y_mean = ft.x_scaler_.mean.copy(), ft.y_scaler_.mean.copy()
    only_time = dataclasses.replace(new, y=np.where(np.arange(new.y.shape[1]) == 0, new.y,
                                                    np.nan))
    ft.set_params(warm_start=True, epochs=30).fit(only_time)
    assert ft.targets_ == tr.labeled_targets()  # output layout kept (memory too)
    np.testing.assert_array_equal(ft.x_scaler_.mean, x_mean)
    np.testing.assert_array_equal(ft.y_scaler_.mean, y_mean)
    after = ft.predict(new)
    y = new.target("time_ms")
    e0 = np.mean(np.abs(np.log(before[:, 0] / y)))
    e1 = np.mean(np.abs(np.log(after[:, 0] / y)))
    assert e1 < e0  # fine-tuning on the new family's times helped on them


def test_group_kfold_never_splits_a_family(tiny_feature_set):
    from perfcast.predictors.tabular import group_kfold

    fam = tiny_feature_set.families()
    folds = group_kfold(fam, 3)
    assert len(folds) == 3
    seen = np.concatenate([te for _, te in folds])
    assert sorted(seen) == list(range(len(fam)))
    for tr, te in folds:
        assert not set(fam[tr]) & set(fam[te])
    with pytest.raises(PerfcastError):
        group_kfold(np.array(["a"] * 5), 3)


def test_xgboost_grid_state_and_warm_start(tiny_feature_set, tmp_path):
    tr, new = _split_by_family(tiny_feature_set)
    m = create_predictor("xgboost", grid_space=FAST_GRID).fit(tr)
    for t in m.targets_:
        ch = m.chosen_[t]
        assert ch["params"]["max_depth"] in (2, 4) and ch["rounds"] >= 1
        assert ch["search"]["folds"] >= 2 and ch["search"]["combos"] == 4
    m.save(tmp_path / "x")
    import json
    cfg = json.loads((tmp_path / "x" / "config.json").read_text())
    assert cfg["state"]["chosen"]["time_ms"]["params"] == m.chosen_["time_ms"]["params"]
    # one family only → no grouped search possible: falls back to the fixed parameters
    one = tr.subset(np.flatnonzero(tr.families() == tr.families()[0]))
    solo = create_predictor("xgboost", n_estimators=20).fit(one)
    assert "skipped" in solo.chosen_["time_ms"]["search"]

    ft = load_predictor(tmp_path / "x")
    before = ft.predict(new)
    ft.set_params(warm_start=True, warm_start_rounds=30).fit(new)
    assert ft.targets_ == m.targets_
    after = ft.predict(new)
    for j in range(len(m.targets_)):
        y = new.y[:, j]
        assert np.mean(np.abs(np.log(after[:, j] / y))) < np.mean(np.abs(np.log(before[:, j] / y)))
    n0 = m.boosters_["time_ms"].num_boosted_rounds()
    assert ft.boosters_["time_ms"].num_boosted_rounds() == n0 + 30


def test_roofline_ignores_labels(tiny_feature_set):
    fs = tiny_feature_set
    ref = create_predictor("roofline").fit(fs).predict(fs)
    blind = dataclasses.replace(fs, y=np.full_like(fs.y, np.nan))
    m = create_predictor("roofline").fit(blind)
    assert m.targets_ == ["time_ms"]
    np.testing.assert_array_equal(m.predict(blind), ref)


def test_roofline_physics(tiny_feature_set):
    fs = _with_rows(tiny_feature_set, device="a100-40gb")
    rows = fs.rows
    pick = np.flatnonzero((rows["mode"] == "infer").to_numpy())
    sub = fs.subset(pick)
    m = create_predictor("roofline").fit(sub)

    def at(batch, **cols):
        return m.predict(_with_rows(sub, batch_size=batch, **cols))[:, 0]

    t256, t512 = at(256), at(512)
    assert np.all((t512 > t256) & (t512 <= 2 * t256))  # launches and weight reads are fixed
    # without launch overhead: ~linear in batch once activations dominate the weights
    pure_m = create_predictor("roofline", launch_us_gpu=0.0).fit(sub)
    t1k, t2k = (pure_m.predict(_with_rows(sub, batch_size=b))[:, 0] for b in (1024, 2048))
    r = t2k / t1k
    assert np.all((r > 1.8) & (r <= 2.0 + 1e-9))
    assert np.all(at(256, device="h100-sxm") < t256)  # faster device → lower time
    assert np.all(at(256, precision="amp") < t256)  # tensor cores + half the activation bytes
    assert np.all(at(256, mode="train") > 2.9 * t256)  # backward ≈ 2× forward + optimizer
    # efficiency scales both roofs (not the launch overhead)
    b256 = _with_rows(sub, batch_size=256)
    pure = create_predictor("roofline", launch_us_gpu=0.0).fit(sub).predict(b256)[:, 0]
    half = create_predictor("roofline", launch_us_gpu=0.0, efficiency=0.5).fit(sub)
    np.testing.assert_allclose(half.predict(b256)[:, 0], 2 * pure, rtol=1e-12)
    assert np.all(pure < t256)
    # unknown device → NaN, no crash; detected CPU (no bandwidth) → compute roof, finite
    assert np.isnan(at(8, device="no-such-gpu")).all()
    assert np.isfinite(at(8, device="cpu")).all()


def test_roofline_helper_matches_predictor(tiny_feature_set):
    from perfcast.devices import get_device
    from perfcast.predictors.roofline import roofline_time_ms

    fs = _with_rows(tiny_feature_set, device="rtx3090")
    m = create_predictor("roofline").fit(fs)
    pred = m.predict(fs)[:, 0]
    for i in (0, len(fs) // 2, len(fs) - 1):
        r = fs.rows.iloc[i]
        g = int(fs.graph_index[i])
        opt = r["optimizer"] if isinstance(r["optimizer"], str) else None
        t = roofline_time_ms(fs.graphs[g], fs.summaries[g], int(r["batch_size"]), r["mode"],
                             r["precision"], get_device("rtx3090"), optimizer=opt,
                             threads=r.get("threads"))
        assert t == pytest.approx(pred[i], rel=1e-12)
    # view ops launch nothing: a graph of only views costs nothing at infer
    g = fs.graphs[0].clone()
    from perfcast import ops

    g.op_index[:] = ops.op_index("reshape")
    assert roofline_time_ms(g, None, 4, "infer", "fp32", "a100-40gb") == 0.0
    with pytest.raises(PerfcastError):
        roofline_time_ms(fs.graphs[0], None, 0, "infer", "fp32", "a100-40gb")


def test_xgboost_memory_baseline_scales_with_simulation(tiny_feature_set, tmp_path):
    """memory_baseline: boosting starts from log(simulated tensors + offset), so a record whose
    simulation is larger gets a proportionally larger prediction — beyond any training label."""
    import numpy as np

    from perfcast.predictors import create_predictor, load_predictor

    j = list(tiny_feature_set.static_names).index("log1p_memsim_mb")

    def with_sim(mib: float):
        out = tiny_feature_set.subset(np.arange(len(tiny_feature_set)))
        out.static = tiny_feature_set.static.copy()
        out.static[:, j] = np.log1p(mib)
        return out

    fs = with_sim(1.0)  # a constant simulation: the trees cannot split on it
    pred = create_predictor("xgboost", grid=False, n_estimators=30, memory_baseline=True)
    pred.fit(fs, targets=["memory_mb"])
    off = pred.offset_mb_
    assert off > 0  # median measured − simulated over the smallest simulations
    base = pred.predict(fs)[:, 0]
    pred.save(tmp_path / "m")
    again = load_predictor(tmp_path / "m")
    assert again.offset_mb_ == off
    np.testing.assert_allclose(again.predict(fs)[:, 0], base, rtol=1e-6)
    # a simulated peak S multiplies the prediction by (S + offset) / (1 + offset)
    s_mib = 10 * off
    np.testing.assert_allclose(pred.predict(with_sim(s_mib))[:, 0],
                               base * (s_mib + off) / (1 + off), rtol=1e-4)
