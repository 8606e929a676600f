"""Calibrated intervals and the OOD score (issue #16), the roofline clamp and the fits flag."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import perfcast
from perfcast import uncertainty as U
from perfcast.predictors import register_predictor
from perfcast.predictors.base import Predictor
from perfcast.training.trainer import write_manifest


@register_predictor
class ToyConstant(Predictor):
    """Predicts the constants ``time_ms`` and ``memory_mb`` for every record."""

    name = "test-toy-constant"
    uses_graphs = False

    @classmethod
    def default_params(cls):
        return {"time_ms": 50.0, "memory_mb": 1000.0}

    def _fit(self, train, valid, progress):
        pass

    def _predict(self, data):
        row = [self.p(t) for t in self.targets_]
        return np.tile(np.asarray(row, np.float64), (len(data), 1))


def _ship(root, tiny_feature_set, device, mode, precision, **params):
    pred = ToyConstant(**params).fit(tiny_feature_set, targets=["time_ms", "memory_mb"])
    # no support recorded (as a model saved before supports existed): it answers every request
    # as it is, so the interval arithmetic below is about its own answer
    pred.support_ = None
    pred.save(root / "toy")
    write_manifest([{"id": "toy", "device": device, "mode": mode, "precision": precision,
                     "targets": pred.targets_, "predictor": pred.name, "path": "toy",
                     "memsim": False}], root)
    return pred


# -- split conformal, exactly -------------------------------------------------------------------

def test_conformal_bounds_order_statistics():
    r = np.linspace(-0.38, 0.38, 39)  # n = 39, shuffled below: order must not matter
    rng = np.random.default_rng(0)
    shuffled = r[rng.permutation(len(r))]
    # 90 %: k = ceil(40 · 0.95) = 38 → the 38th smallest and the 38th largest
    assert U.conformal_bounds(shuffled, 0.90) == (r[1], r[37])
    # 95 %: k = ceil(40 · 0.975) = 39 = n → the extremes
    assert U.conformal_bounds(shuffled, 0.95) == (r[0], r[38])
    # 80 %: k = ceil(40 · 0.9) = 36
    assert U.conformal_bounds(shuffled, 0.80) == (r[3], r[35])
    # 99 %: k = 40 > n → no finite interval
    assert U.conformal_bounds(shuffled, 0.99) == (-math.inf, math.inf)


def test_toy_predictor_interval_exact(tiny_feature_set, tmp_path, monkeypatch):
    """A shipped toy model answering 50 ms whose 39 calibration residuals are known: the
    prediction's interval is 50·e^{r(2)} … 50·e^{r(38)} at 90 %, exactly."""
    monkeypatch.setenv("PERFCAST_SHIPPED_DIR", str(tmp_path))
    _ship(tmp_path, tiny_feature_set, "rtx4090", "infer", "fp32", time_ms=50.0)
    r = np.linspace(-0.38, 0.38, 39)
    # residuals log(actual / predicted) of 39 held-out records of the toy model
    predicted = np.full(39, 50.0)
    actual = predicted * np.exp(r)
    cal = U.Calibration.build("time_ms", np.log(actual / predicted), None,
                              meta={"calibrated_on": "toy"})
    U.write_calibrations({"toy": {"time_ms": cal}}, tmp_path / U.CALIBRATION_FILE)
    try:
        p = perfcast.predict("timm:resnet18", device="rtx4090", batch_size=1, precision="fp32")
        assert p.predictor["time_ms"] == "test-toy-constant"
        assert p.time_ms == 50.0
        assert p.coverage == 0.9
        assert p.time_ms_low == pytest.approx(50.0 * math.exp(r[1]), rel=1e-12)
        assert p.time_ms_high == pytest.approx(50.0 * math.exp(r[37]), rel=1e-12)
        assert p.intervals["time_ms"]["calibration_records"] == 39
        q = perfcast.predict("timm:resnet18", device="rtx4090", batch_size=1, precision="fp32",
                             coverage=0.8)
        assert (q.time_ms_low, q.time_ms_high) == pytest.approx(
            (50.0 * math.exp(r[3]), 50.0 * math.exp(r[35])), rel=1e-12)
        # too few residuals for 99 %: no interval, said so (never an infinite one in JSON)
        z = perfcast.predict("timm:resnet18", device="rtx4090", batch_size=1, precision="fp32",
                             coverage=0.99)
        assert z.time_ms_low is None and z.time_ms_high is None
        assert "too few" in z.intervals["time_ms"]["note"]
        json.dumps(z.to_dict(), allow_nan=False)
        # memory of the toy model has no calibration: coverage null with a note, no interval
        assert p.memory_mb_low is None and p.intervals["memory_mb"]["coverage"] is None
        assert "no calibration" in p.intervals["memory_mb"]["note"]
        with pytest.raises(perfcast.PerfcastError, match="coverage"):
            perfcast.predict("timm:resnet18", device="rtx4090", batch_size=1, coverage=1.5)
    finally:
        U._load_file.cache_clear()


def test_mondrian_buckets_widen_with_distance():
    rng = np.random.default_rng(1)
    scores = np.repeat([0.5, 1.5, 3.0], 200)
    residuals = rng.normal(0, np.repeat([0.05, 0.2, 0.1], 200))  # the far bucket is narrower
    cal = U.Calibration.build("time_ms", residuals, scores, min_bucket=100)
    assert len(cal.residuals) == 3
    widths = [cal.bounds(s, 0.9)[1] - cal.bounds(s, 0.9)[0] for s in (0.5, 1.5, 3.0, 99.0)]
    assert widths[0] < widths[1]
    assert widths[1] <= widths[2] <= widths[3]  # hulled: never narrower farther out
    lo, hi, j = cal.bounds(1.5, 0.9)
    assert j == 1
    assert (lo, hi) == (min(U.conformal_bounds(cal.residuals[0], 0.9)[0],
                            U.conformal_bounds(cal.residuals[1], 0.9)[0]),
                        max(U.conformal_bounds(cal.residuals[0], 0.9)[1],
                            U.conformal_bounds(cal.residuals[1], 0.9)[1]))
    # round trip through JSON
    back = U.Calibration.from_json(json.loads(json.dumps(cal.to_json())))
    assert back.bounds(3.0, 0.9) == pytest.approx(cal.bounds(3.0, 0.9), abs=1e-5)


def test_ood_reference_reasons():
    rng = np.random.default_rng(2)
    D = rng.normal(size=(50, 10 + 4))
    D[:, 10:] = np.abs(D[:, 10:])
    ops = np.zeros((50, 6))
    ops[:, :3] = 1
    ref = U.OODReference.fit(D, ops, batches=[1, 256], inputs=[3 * 224 * 224, 3 * 288 * 288],
                             dims=4)
    s_in, why_in = ref.score(D[0], ops[0], 64, 3 * 224 * 224)
    assert s_in == pytest.approx(0.0, abs=1e-6) and why_in == []
    new_ops = ops[0].copy()
    new_ops[5] = 2
    s, why = ref.score(D[0], new_ops, 1024, 3 * 448 * 448)
    assert s == pytest.approx(1.0 + 2.0 + math.log2(448 * 448 / (288 * 288)), rel=1e-6)
    assert any("op classes never seen" in w for w in why)
    assert any("batch 1,024 outside" in w for w in why)
    assert any("input" in w for w in why)
    far, why_far = ref.score(D[0] + 25.0, ops[0], 64, 3 * 224 * 224)
    assert far > 2 and any("architecture far" in w for w in why_far)
    back = U.OODReference.from_json(json.loads(json.dumps(ref.to_json())))
    assert back.score(D[0], new_ops, 1024, 3 * 448 * 448)[0] == pytest.approx(s, rel=1e-4)


def test_auroc_and_threshold():
    assert U.auroc([1, 2, 3, 4], [False, False, True, True]) == 1.0
    assert U.auroc([1, 2, 3, 4], [True, True, False, False]) == 0.0
    assert U.auroc([1, 1], [True, False]) == 0.5
    assert U.youden_threshold([0.1, 0.2, 0.9, 1.0], [False, False, True, True]) == 0.9


# -- roofline clamp and fits ---------------------------------------------------------------------

def test_roofline_clamp_and_fits(tiny_feature_set, tmp_path, monkeypatch):
    """A learned answer below physics is raised to the bound with a note; throughput never
    exceeds the device's peak; a batch whose memory exceeds the device says it does not fit and
    that its time is hypothetical."""
    from perfcast.devices import get_device
    from perfcast.routing import MEMORY_WEIGHTS_BOUND, TIME_LOWER_BOUND

    monkeypatch.setenv("PERFCAST_SHIPPED_DIR", str(tmp_path))
    _ship(tmp_path, tiny_feature_set, "rtx4090", "infer", "fp32", time_ms=1e-6, memory_mb=1e-3)
    g = perfcast.load_graph("timm:resnet18", batch_size=1)
    dev = get_device("rtx4090")
    b = 256
    p = perfcast.predict("timm:resnet18", device="rtx4090", batch_size=b, precision="fp32")
    assert p.predictor["time_ms"] == "test-toy-constant"
    ans = p.route.answers
    assert TIME_LOWER_BOUND in ans["time_ms"].bounds
    assert any("raised to that lower bound" in n for n in ans["time_ms"].notes)
    # no throughput above the device's peak: direct FLOPs per second ≤ the fastest fp32 peak
    # ÷ the documented allowance for fast convolution algorithms (Winograd does fewer
    # multiplications than the direct count; 0.8, measured in roofline.BOUND_COMPUTE_ALLOWANCE)
    from perfcast.predictors.roofline import BOUND_COMPUTE_ALLOWANCE

    peak = max(v for v in (dev.peak_tflops("fp32"), dev.peak_tflops("tf32")) if v) * 1e12
    assert g.flops * b / (p.time_ms / 1e3) <= peak / BOUND_COMPUTE_ALLOWANCE * (1 + 1e-9)
    # memory: at least weights + the input batch
    assert MEMORY_WEIGHTS_BOUND in ans["memory_mb"].bounds or p.memory_mb >= 1.0
    assert p.memory_mb * 2**20 >= g.param_bytes + 3 * 224 * 224 * 4 * b
    assert p.fits is True and p.capacity_mb == dev.memory_mb
    # the case: batch 10⁹ cannot run; its time is hypothetical and says so
    q = perfcast.predict("timm:resnet18", device="rtx4090", batch_size=10**9, precision="fp32")
    assert q.fits is False and q.capacity_mb == dev.memory_mb
    assert q.memory_mb > q.capacity_mb
    assert any(n.startswith("fits: no") for n in q.notes)
    assert any("hypothetical" in n for n in q.notes)


def test_pick_by_risk():
    class P:
        memory_mb, memory_mb_low, memory_mb_high = 100.0, 80.0, 130.0

    assert U.pick(P, "memory_mb", "safe") == 130.0
    assert U.pick(P, "memory_mb", "central") == 100.0
    assert U.pick(P, "memory_mb", "optimistic") == 80.0
    P.memory_mb_high = None
    assert U.pick(P, "memory_mb", "safe") == 100.0
    with pytest.raises(perfcast.PerfcastError, match="risk"):
        U.pick(P, "memory_mb", "reckless")


def test_flag_threshold_picks_the_large_errors():
    scores = np.arange(100, dtype=float)
    large = np.zeros(100, bool)
    large[85:] = True  # the 15 farthest records are the large errors
    large[10] = True
    t = U.flag_threshold(scores, large)
    assert t == 85.0  # flags exactly the 15 large errors (≥ 10 % of the records)
    assert U.flag_threshold(scores, np.zeros(100, bool)) is None


# -- the shipped calibration, through the command line -------------------------------------------

def test_acceptance_predict_json_has_interval_coverage_ood(capsys):
    """The issue's acceptance command: the shipped RTX 4090 model's interval brackets its
    answer, with the coverage and the OOD score; a flagged request prints one warning line."""
    from perfcast.faces.cli import main

    assert U.find_calibration("rtx4090-infer-amp-dippm", "time_ms") is not None
    assert main(["predict", "timm:resnet50", "--device", "rtx4090", "--batch-size", "256",
                 "--precision", "amp", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["time_ms_low"] <= d["time_ms"] <= d["time_ms_high"]
    assert d["coverage"] == 0.9 and d["intervals"]["time_ms"]["coverage"] == 0.9
    assert set(d["ood"]) >= {"score", "reasons", "flagged"} and d["ood"]["flagged"] is False
    assert main(["predict", "timm:resnet50", "--device", "rtx4090", "--batch-size", "256",
                 "--precision", "amp", "--json", "--coverage", "0.8"]) == 0
    d8 = json.loads(capsys.readouterr().out)
    assert d["time_ms_low"] <= d8["time_ms_low"] <= d8["time_ms_high"] <= d["time_ms_high"]
    # far outside the trained batches: flagged, one warning line, the time hypothetical
    assert main(["predict", "timm:resnet50", "--device", "rtx4090", "--batch-size", "100000",
                 "--precision", "amp"]) == 0
    text = capsys.readouterr().out
    assert text.count("warning: out of distribution") == 1
    assert "hypothetical" in text


def test_a_bare_timm_name_is_the_same_model_as_its_prefixed_spec():
    """`resnet18` is `timm:resnet18` (a bare name is a timm name): the same regime, the same
    interval and no "family not among the trained ones" — the records name it with its kind."""
    from perfcast.workload.spec import ModelSpec

    assert ModelSpec.parse("resnet18").canonical == "timm:resnet18"
    assert ModelSpec.parse("tv:resnet18").canonical == "torchvision:resnet18"
    assert ModelSpec.parse("pkg.mod:Net").canonical == "pkg.mod:Net"
    bare = perfcast.predict("resnet18", device="h100-sxm", batch_size=8, precision="amp")
    full = perfcast.predict("timm:resnet18", device="h100-sxm", batch_size=8, precision="amp")
    assert bare.intervals["time_ms"]["regime"] == full.intervals["time_ms"]["regime"]
    assert bare.intervals["time_ms"]["regime"].endswith("family-seen")
    assert (bare.time_ms_low, bare.time_ms_high) == (full.time_ms_low, full.time_ms_high)
    assert not any("family of" in r for r in bare.ood["reasons"])
