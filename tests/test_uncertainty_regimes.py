"""Intervals by regime with a locally-adaptive width and the unusual-request flag (issue 42):
regime selection, widening when flagged, the calibration file's round trip, coverage monotone in
the level asked. Synthetic residuals only (no data set), a few milliseconds each."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfcast import uncertainty as U
from perfcast.uncertainty import regimes as R


def _synthetic(n: int = 1200, seed: int = 0):
    """Records whose |log residual| grows with the architecture distance; a quarter in each
    regime, the device-unseen ones with a GPU distance."""
    rng = np.random.default_rng(seed)
    arch = rng.uniform(0, 4, n)
    regimes = np.array(R.REGIMES)[np.arange(n) % 4]
    dev = np.where(np.char.startswith(regimes.astype(str), "device-unseen"),
                   rng.uniform(0.5, 2, n), 0.0)
    scale = 0.03 * np.exp(0.6 * arch) * np.where(dev > 0, 1.5, 1.0)
    r = rng.normal(0.0, scale)
    X = np.stack([R.feature_vector({"arch": a, "device_dist": d}, 64, "infer", "amp", False, g)
                  for a, d, g in zip(arch, dev, regimes)])
    return X, r, regimes


def _fit(seed: int = 0) -> R.RegimeCalibration:
    X, r, g = _synthetic(seed=seed)
    return R.RegimeCalibration.fit(X, r, g, devices=["rtx4090", "rtx3090"],
                                   names={"timm:resnet50": "resnet",
                                          "timm:seresnext26d_32x4d": "resnet"})


def test_regime_selection_from_device_and_family():
    rc = _fit()
    assert rc.regime("rtx4090", "timm:resnet50") == "device-seen/family-seen"
    # another model of a trained family: its stem is a trained one
    assert rc.regime("rtx3090", "timm:resnet18") == "device-seen/family-seen"
    assert rc.regime("rtx3090", "timm:seresnext50_32x4d") == "device-seen/family-seen"
    assert rc.regime("rtx4090", "timm:vit_base_patch16_224") == "device-seen/family-unseen"
    assert rc.regime("h100-sxm", "timm:resnet50") == "device-unseen/family-seen"
    assert rc.regime("h100-sxm", "hf:gpt2") == "device-unseen/family-unseen"
    # the strict rule: only the trained models count as a seen family (hf: by stem)
    strict = R.RegimeCalibration.from_json({**rc.to_json(), "family_rule": "name"})
    assert strict.regime("rtx4090", "timm:resnet50") == "device-seen/family-seen"
    assert strict.regime("rtx4090", "timm:resnet18") == "device-seen/family-unseen"
    assert R.stem("timm:tf_efficientnet_b0") == "timm:efficientnet"
    assert R.stem("hf:meta-llama/Llama-2-7b-hf") == "hf:llama"
    assert R.stem("tv:resnet50") == "torchvision:resnet"


def test_regimes_have_their_own_width_and_difficulty_widens():
    rc = _fit()
    assert rc.difficulty.coef[R.FEATURES.index("arch")] > 0  # farther is harder
    near = R.feature_vector({"arch": 0.2}, 64, "infer", "amp", False, R.REGIMES[0])
    far = R.feature_vector({"arch": 3.5}, 64, "infer", "amp", False, R.REGIMES[0])
    a, b = rc.bounds(near, R.REGIMES[0], 0.9), rc.bounds(far, R.REGIMES[0], 0.9)
    assert b["q_hi"] - b["q_lo"] > 2 * (a["q_hi"] - a["q_lo"])
    # an unseen device costs width at the same architecture distance
    x_u = R.feature_vector({"arch": 0.2, "device_dist": 1.0}, 64, "infer", "amp", False, R.REGIMES[2])
    u = rc.bounds(x_u, R.REGIMES[2], 0.9)
    assert u["q_hi"] - u["q_lo"] > a["q_hi"] - a["q_lo"]


def test_interval_widens_when_the_flag_is_raised():
    rc = _fit()
    assert rc.threshold is not None
    g = R.REGIMES[1]
    archs = np.linspace(0, 4, 81)
    out = [rc.bounds(R.feature_vector({"arch": a}, 64, "infer", "amp", False, g), g, 0.9)
           for a in archs]
    flags = [o["flagged"] for o in out]
    assert any(flags) and not all(flags)
    w = np.array([o["q_hi"] - o["q_lo"] for o in out])
    f = np.array(flags)
    assert w[f].min() > w[~f].max()  # every flagged interval is wider than every unflagged one
    # beyond every calibration record: flagged, and the difficulty does not extrapolate — it is
    # the difficulty at the edge of the calibration range, no wider
    x = R.feature_vector({"arch": 40.0, "batch_oct": 12.0}, 64, "infer", "amp", False, g)
    b = rc.bounds(x, g, 0.9)
    assert b["flagged"] and "batch_oct" in b["beyond"] and "arch" in b["beyond"]
    d = rc.difficulty
    edge = np.array([min(v, hi) for v, hi in zip(x, d.x_max)])
    e = rc.bounds(edge, g, 0.9)
    assert b["sigma"] == pytest.approx(e["sigma"])
    assert b["q_hi"] - b["q_lo"] == pytest.approx(e["q_hi"] - e["q_lo"])
    farther = R.feature_vector({"arch": 400.0, "batch_oct": 120.0}, 64, "infer", "amp", False, g)
    assert rc.bounds(farther, g, 0.9)["sigma"] == pytest.approx(b["sigma"])
    assert b["q_hi"] - b["q_lo"] > w[~f].max()  # flagged: wider than every unflagged one


def test_calibration_file_round_trip(tmp_path):
    rc = _fit()
    cal = U.Calibration.build("time_ms", np.zeros(10), None, adaptive=rc,
                              meta={"calibrated_on": "synthetic"})
    path = U.write_calibrations({"toy": {"time_ms": cal}}, tmp_path / U.CALIBRATION_FILE)
    try:
        text = path.read_text()
        assert '"adaptive"' in text and "pickle" not in text
        back = U._load_file(str(path))["toy"]["time_ms"].adaptive
        for g in R.REGIMES:
            x = R.feature_vector({"arch": 1.3, "device_dist": 0.7 * ("unseen" in g)}, 256, "train",
                                 "fp32", True, g)
            a, b = rc.bounds(x, g, 0.9), back.bounds(x, g, 0.9)
            assert (b["q_lo"], b["q_hi"], b["flagged"]) == pytest.approx(
                (a["q_lo"], a["q_hi"], a["flagged"]), abs=1e-3)
        assert back.regime("h100-sxm", "timm:resnet18") == rc.regime("h100-sxm", "timm:resnet18")
    finally:
        U._load_file.cache_clear()


def test_coverage_monotone_in_the_level_asked():
    rc = _fit(seed=0)
    X, r, g = _synthetic(n=2000, seed=1)  # fresh records, same law
    levels = (0.5, 0.7, 0.8, 0.9, 0.95)
    cov, width = [], []
    for lv in levels:
        b = [rc.bounds(x, gg, lv) for x, gg in zip(X, g)]
        lo, hi = np.array([t["q_lo"] for t in b]), np.array([t["q_hi"] for t in b])
        cov.append(float(((lo <= r) & (r <= hi)).mean()))
        width.append(float(np.median(hi - lo)))
    assert all(a <= b for a, b in zip(cov, cov[1:]))
    assert all(a <= b for a, b in zip(width, width[1:]))
    assert abs(cov[3] - 0.9) < 0.04  # the 90 % interval covers about 90 % of fresh records
    # more coverage than the regime's records can give: no finite bound, never a made-up one
    assert not math.isfinite(rc.bounds(X[0], g[0], 0.9999)["q_hi"])


def test_a_seen_stratum_gets_its_own_centre_and_scale():
    """A trained GPU whose held-out residuals sit 30 % high and spread little gets an interval
    around +0.3 that is narrower than the pooled one; an unseen GPU does not."""
    rng = np.random.default_rng(3)
    n = 800
    g = np.array([R.REGIMES[0]] * n)
    strata = np.where(np.arange(n) % 2, "a|infer|amp", "b|infer|amp")
    r = np.where(strata == "a|infer|amp", 0.3 + rng.normal(0, 0.02, n), rng.normal(0, 0.3, n))
    X = np.stack([R.feature_vector({}, 64, "infer", "amp", False, R.REGIMES[0])] * n)
    rc = R.RegimeCalibration.fit(X, r, g, strata=strata)
    a = rc.bounds(X[0], R.REGIMES[0], 0.9, "a|infer|amp")
    b = rc.bounds(X[0], R.REGIMES[0], 0.9, "b|infer|amp")
    assert a["q_lo"] < 0.3 < a["q_hi"] and a["q_lo"] > 0.1
    assert a["q_hi"] - a["q_lo"] < 0.5 * (b["q_hi"] - b["q_lo"])
    u = rc.bounds(X[0], R.REGIMES[2], 0.9, "a|infer|amp")  # not a trained GPU: no own centre
    assert u["q_lo"] < 0.0
