"""The batch rule and the support of learned models (perfcast.routing, perfcast.predictors.support).

* **Throughput is monotone, not time alone**: for every predictor kind, device kind, mode and
  precision, time per batch never falls *and* samples/s never falls as the batch grows —
  checked exactly (no noise allowance) on the answers ``perfcast.predict`` gives.
* A learned per-device model answers only inside its training data: far from it the physics base
  on the same device answers, and the notes say which answer was used and why.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfcast
from perfcast.predictors.support import Support
from perfcast.routing import BATCH_GRID, curve_at, monotone_curve

#: Relative round-off allowed in the exact checks.
EPS = 1e-9


def _obeys_batch_rule(batches, times) -> list[str]:
    """The violations of the batch rule along ascending ``batches``."""
    bad = []
    for (b1, t1), (b2, t2) in zip(zip(batches, times), zip(batches[1:], times[1:])):
        if t2 < t1 * (1 - EPS):
            bad.append(f"time falls: batch {b1} {t1:.6g} ms > batch {b2} {t2:.6g} ms")
        if t2 / b2 > t1 / b1 * (1 + EPS):
            bad.append(f"throughput falls: batch {b1} {b1 / t1 * 1e3:.6g}/s > batch {b2} "
                       f"{b2 / t2 * 1e3:.6g}/s")
    return bad


# ------------------------------------------------------------------------------ the projection
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.floats(min_value=-8, max_value=8), min_size=len(BATCH_GRID),
                max_size=len(BATCH_GRID)))
def test_monotone_curve_obeys_the_batch_rule(logs):
    t = np.exp(np.asarray(logs))
    out = monotone_curve(BATCH_GRID, t)
    assert np.all(np.isfinite(out))
    assert not _obeys_batch_rule(list(BATCH_GRID), list(out))
    # between grid points and beyond the grid too (log-log interpolation, linear beyond)
    probe = [1, 5, 7, 100, 1000, 5000, 65536, 100_000, 1_000_000]
    assert not _obeys_batch_rule(probe, [curve_at(BATCH_GRID, out, b) for b in probe])


def test_monotone_curve_keeps_a_curve_that_obeys_it_and_fills_gaps():
    b = np.asarray(BATCH_GRID, dtype=float)
    ok = 3.0 + 0.01 * b  # launch-bound, then linear: obeys the rule
    assert np.allclose(monotone_curve(b, ok), ok)
    gappy = ok.copy()
    gappy[[0, 5, 20]] = np.nan
    out = monotone_curve(b, gappy)
    assert np.all(np.isfinite(out)) and not _obeys_batch_rule(list(b), list(out))


def test_monotone_curve_weights_decide_who_moves():
    """A learned model's curve (support weights): the least-squares projection moves the points
    it trusts least."""
    b = np.array([1.0, 2.0, 4.0])
    t = np.array([10.0, 5.0, 20.0])  # time falls from 1 to 2
    heavy_first = monotone_curve(b, t, np.array([100.0, 1.0, 1.0]))
    heavy_second = monotone_curve(b, t, np.array([1.0, 100.0, 1.0]))
    assert heavy_first[1] > 9.0 and heavy_second[0] < 6.0


def test_monotone_curve_moves_only_the_larger_batch():
    """A physics model's curve (no weights): small batches keep their answers; a larger batch
    slower per sample is capped at the smaller batch's rate (it could run as chunks of it); a
    larger batch faster than a smaller one is raised to that time."""
    b = np.array([1.0, 2.0, 4.0, 8.0])
    t = np.array([10.0, 30.0, 25.0, 100.0])  # per sample 10, 15, 6.25, 12.5; time falls 2 → 4
    out = monotone_curve(b, t)
    assert out[0] == 10.0 and out[1] == pytest.approx(20.0)  # capped at 10 per sample
    assert out[2] == pytest.approx(25.0)  # unchanged: ≥ 20 and 6.25 per sample
    assert out[3] == pytest.approx(50.0)  # capped at 6.25 per sample (chunks of 4)
    assert not _obeys_batch_rule(list(b), list(out))


# ------------------------------------------------------------------------------ the support
def test_support_distance_weight_and_round_trip():
    act = 50e6  # activation bytes per sample of every record here
    sup = Support.of([256, 512, 128], [4.1e9, 4.1e9, 1.8e9], [act] * 3, ["train"] * 3,
                     ["amp"] * 3, ["timm:resnet50", "timm:resnet50", "timm:resnet18"])
    assert sup.batch_min == 128 and sup.batch_max == 512 and sup.records == 3
    assert sup.kinds == ("timm",)
    size = (4.1e9, act)
    assert sup.distance([256], size)[0] == pytest.approx(0.0, abs=0.01)
    # batch 1 at 4.1 GMACs: nearest is batch 128 at 1.8 GMACs, 7 octaves of batch away
    assert sup.distance([1], size)[0] == pytest.approx(math.hypot(7, math.log2(4.1 / 1.8)),
                                                       abs=0.01)
    # a model of the same work but 8× the activations is 3 octaves away at the same batch
    assert sup.distance([256], (4.1e9, 8 * act))[0] == pytest.approx(3.0, abs=0.01)
    w = sup.weight(np.array([1, 32, 64, 256]), size, "train", "amp", "timm")
    assert w[0] == 0.0 and w[-1] == 1.0 and 0.0 <= w[1] <= w[2] <= 1.0
    assert sup.weight([256], size, "infer", "amp")[0] == 0.0  # a mode it never saw
    assert sup.weight([256], size, "train", "amp", "hf")[0] == 0.0  # a kind it never saw
    again = Support.from_json(sup.to_json())
    assert again.to_json() == sup.to_json()
    assert sup.nearest(300, (4e9, act)) == (256, pytest.approx(4.1e9, rel=0.01))


def test_a_learned_model_far_outside_its_data_fades_to_physics():
    """The RTX 3090 training data (timm) measured ResNet-sized models at batches of 128–512:
    batch 1 is far outside, so the physics base answers — with a note saying why."""
    from perfcast import shipped

    entry = shipped.find("rtx3090", "train", "amp", "time_ms")
    pred = shipped.load_entry(entry)
    if getattr(pred, "support_", None) is None:
        pytest.fail("the shipped rtx3090 train model has no support recorded "
                    "(perfcast train --recipe default --out perfcast/shipped "
                    "--support-only)")
    p1 = perfcast.predict("timm:resnet50", device="rtx3090", mode="train", precision="amp",
                          batch_size=1)
    assert p1.predictor["time_ms"] == "crossdevice"
    assert any("outside its support" in n for n in p1.notes), p1.notes
    p512 = perfcast.predict("timm:resnet50", device="rtx3090", mode="train", precision="amp",
                            batch_size=512)
    assert p512.predictor["time_ms"] == entry["predictor"]
    assert any("inside the rtx3090 train amp records" in n for n in p512.notes), p512.notes
    assert p1.time_ms < p512.time_ms / 20  # one image, not a full batch's step


# ------------------------------------------------------------------------------ end to end
#: (device, mode, precision, predictor): every predictor kind that answers time by default or
#: by --predictor, on a labeled GPU, a GPU given by its spec only and this CPU.
CASES = [
    ("rtx4090", "infer", "amp", None),
    ("rtx4090", "infer", "amp", "xgboost"),
    ("rtx3090", "train", "amp", None),
    ("rtx3090", "train", "amp", "dippm"),
    ("titan-rtx", "train", "fp32", None),
    ("a100-80gb", "train", "amp", None),
    ("h100-sxm", "infer", "bf16", None),
    ("t4", "infer", "fp16", None),
    ("a100-80gb", "infer", "fp32", "roofline"),
    ("cpu", "infer", "fp32", None),
]
BATCHES = (1, 2, 3, 7, 16, 48, 100, 256, 1000, 4096)
#: The fast tier's batches: each answer costs the same at any batch (the curve over the grid),
#: so it reads every case at five of them, from the first to the last; the slow tier reads all.
FAST_BATCHES = (1, 3, 48, 1000, 4096)


#: The fast tier's cases: each predictor kind once (the default of a labeled GPU, XGBoost,
#: dippm, crossdevice for a GPU given by its spec, the roofline, this CPU); the slow tier reads
#: every case at every batch.
FAST_CASES = {("rtx4090", "infer", "amp", None), ("rtx4090", "infer", "amp", "xgboost"),
              ("rtx3090", "train", "amp", "dippm"), ("h100-sxm", "infer", "bf16", None),
              ("a100-80gb", "infer", "fp32", "roofline"), ("cpu", "infer", "fp32", None)}


def _batch_rule_cases():
    for case in CASES:
        d, m, p, k = case
        name = f"{d}-{m}-{p}-{k or 'default'}"
        yield pytest.param(*case, FAST_BATCHES, id=f"{name}-5-batches",
                           marks=() if case in FAST_CASES else pytest.mark.slow)
        yield pytest.param(*case, BATCHES, id=f"{name}-10-batches", marks=pytest.mark.slow)


@pytest.mark.parametrize("device,mode,precision,predictor,batches", list(_batch_rule_cases()))
def test_time_and_throughput_never_fall_with_the_batch(device, mode, precision, predictor,
                                                       batches):
    model = "timm:resnet18"
    times = []
    for b in batches:
        p = perfcast.predict(model, device=device, mode=mode, precision=precision, batch_size=b,
                             input_size=(3, 64, 64), predictor=predictor)
        assert p.time_ms is not None and math.isfinite(p.time_ms), p.notes
        times.append(p.time_ms)
    bad = _obeys_batch_rule(list(batches), times)
    assert not bad, bad
