"""Small work on a GPU given by its spec: an LLM layer's operators (Vidur's shapes) are never
priced slower on a GPU that beats another in the numbers the kernel runs on, never below their
roofline, and the cross-device correction scales only the kinds of work it learned from.

The H100 case (reports/crossdevice/small_work.md): the correction, learned from half-precision
CNNs only, multiplied an H100's fp16 LLM layer operators by 2–2.8 — slower than an A100 measures
them."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

#: Every how-many-th distinct operator shape of the profile the property runs on (≈ 700 shapes
#: of the 16,000: all classes, decode and prefill, every model and TP degree).
SHAPE_STRIDE = 24


def _shapes() -> pd.DataFrame:
    from perfcast.datasets.vidur import load_vidur_ops

    ops = load_vidur_ops("a100-80gb")
    cols = ["op", "kernel_class", "B", "M", "N", "K", "H", "dtype_bytes"]
    shapes = ops.drop_duplicates(cols)[cols].reset_index(drop=True)
    return shapes.iloc[::SHAPE_STRIDE].reset_index(drop=True)


def _frame(shapes: pd.DataFrame, device: str) -> pd.DataFrame:
    kf = shapes.copy()
    kf["device_key"], kf["precision"], kf["tf32"] = device, "fp16", "default"
    kf["record"] = np.arange(len(kf))
    kf["stream_bytes"], kf["stream_flops"] = 0.0, 0.0
    return kf


def _rates(device: str, shapes: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per shape, the peak (TFLOP/s) of the units that run the kernel on ``device`` and its
    bandwidth: what the kernel's compute and memory times divide by."""
    from perfcast.predictors.crossdevice import peak_unit
    from perfcast.predictors.crossdevice.pricing import _device

    dev = _device(device)
    peak = np.array([float(dev.peak_tflops(peak_unit(kc, "fp16", dev)) or dev.peak_fp32_tflops)
                     for kc in shapes["kernel_class"]])
    return peak, np.full(len(shapes), float(dev.bandwidth_gbs))


@pytest.mark.slow
@pytest.mark.shared_data("vidur/compute/mlp-a100.csv")
def test_a_gpu_that_beats_another_prices_every_vidur_operator_no_slower():
    """For every pair of registry GPUs and every sampled operator: where X's peak of the
    kernel's units and X's bandwidth are both at least A's, X's time is at most A's; every time
    is at least its roofline. The H100 (which beats the A100 in every number) is one pair."""
    from perfcast.devices import list_devices
    from perfcast.paths import package_data
    from perfcast.predictors.crossdevice import price_kernels
    from perfcast.predictors.kernels import KernelModel

    km = KernelModel.load(package_data("predictors", "shipped_kernels"))
    shapes = _shapes()
    gpus = [d.key for d in list_devices() if d.is_gpu and d.peak_fp32_tflops and d.bandwidth_gbs]
    assert {"h100-sxm", "a100-80gb", "a40"} <= set(gpus)
    t, rates = {}, {}
    for g in gpus:
        pr = price_kernels(km, _frame(shapes, g))
        assert np.isfinite(pr.ms).all()
        assert (pr.ms >= pr.roofline_ms * (1 - 1e-12)).all(), g
        t[g], rates[g] = pr.ms, _rates(g, shapes)
    pairs = 0
    for x, a in itertools.permutations(gpus, 2):
        beats = (rates[x][0] >= rates[a][0]) & (rates[x][1] >= rates[a][1])
        pairs += int(beats.any())
        bad = beats & (t[x] > t[a] * (1 + 1e-9))
        assert not bad.any(), (x, a, shapes[bad].head(3).to_dict("records"),
                               t[x][bad][:3], t[a][bad][:3])
    assert pairs > 100
    # the issue's case, by name: every operator on the H100 at most the A100's
    assert (t["h100-sxm"] <= t["a100-80gb"]).all()


def test_the_correction_scales_only_the_kinds_of_work_it_learned_from(tmp_path):
    """An fp16 record without convolutions — an LLM layer's operator — when the correction
    learned from CNNs in half precision: ``s = 1``, said by ``out_of_range``; a kind it learned
    keeps its correction; the kinds are saved with the model."""
    from perfcast.paths import package_data
    from perfcast.predictors import load_predictor
    from perfcast.predictors.crossdevice import CORRECTION_FEATURES, correction_regime

    pred = load_predictor(package_data("shipped", "crossdevice-gpu"))
    col = {n: j for j, n in enumerate(CORRECTION_FEATURES)}
    X = np.zeros((2, len(CORRECTION_FEATURES)))
    X[:, col["precision=fp16"]] = 1.0
    X[:, col["log_tdp_w"]] = np.log(700.0)
    X[:, col["log_ref_ms"]] = np.log(0.5)
    X[0, col["kernel_share_gemm"]] = X[0, col["tc_share"]] = 1.0  # one GEMM
    X[1, col["has_conv"]] = X[1, col["kernel_share_conv"]] = X[1, col["tc_share"]] = 1.0
    assert list(correction_regime(X)) == ["fp16, no convolutions", "fp16, convolutions"]
    pred.regimes_ = None  # a model saved before the kinds were recorded corrects every record
    learned = pred._correct(X)
    pred.regimes_ = ["amp, convolutions", "fp16, convolutions", "fp32, convolutions",
                     "fp32, no convolutions"]
    got = pred._correct(X)
    assert got[0] == 0.0 and got[1] == pytest.approx(learned[1])
    again = load_predictor(pred.save(tmp_path / "xd"))
    assert again.regimes_ == pred.regimes_
    np.testing.assert_array_equal(again._correct(X), got)


def test_an_fp16_linear_layer_on_an_h100_is_its_kernel_time(tmp_path):
    """The issue's reproduction: one nn.Linear(4096, 4096) in fp16 on the H100 — with the kinds
    recorded, the answer is the kernel's GPU time (no correction), and the notes say why."""
    import perfcast
    from perfcast.paths import package_data
    from perfcast.predictors import load_predictor

    pred = load_predictor(package_data("shipped", "crossdevice-gpu"))
    pred.regimes_ = None
    old = pred.save(tmp_path / "old")
    pred.regimes_ = ["amp, convolutions", "fp16, convolutions", "fp32, convolutions",
                     "fp32, no convolutions"]
    new = pred.save(tmp_path / "new")
    kw = dict(device="h100-sxm", precision="fp16", input_size=(4096,), batch_size=1024)
    p_old = perfcast.predict("tests.models_for_tests:linear_4096", predictor=str(old), **kw)
    p_new = perfcast.predict("tests.models_for_tests:linear_4096", predictor=str(new), **kw)
    assert p_new.time_ms < p_old.time_ms / 1.5
    assert any("none fp16, no convolutions" in n and "uncorrected" in n for n in p_new.notes)
    # 2·1024·4096·4096 FLOPs at the H100's dense FP16 peak, and not much more
    roof = 2 * 1024 * 4096 * 4096 / 989.4e12 * 1e3
    assert roof <= p_new.time_ms < 2.5 * roof
