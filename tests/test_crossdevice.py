"""crossdevice (issue #13): kernel lowering at any batch, kernel prices never below their roofline,
a GPU given by its spec answered by the device-conditioned model, save/load identity."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import perfcast
from perfcast.cache import get_graph
from perfcast.features.kernels import KernelPlan, lower_graph
from perfcast.features.records import plan_workloads
from perfcast.workload import Workload


@pytest.fixture(autouse=True)
def _forget_spec_devices():
    """Spec files registered by a test must not leak into the registry of later tests."""
    yield
    for key in ("my-gpu-xyz", "h100-clone-xyz"):
        try:
            perfcast.devices.unregister_device(key)
        except Exception:  # not registered by this test
            pass


def _plan(spec, **kw):
    g2, g3 = (get_graph(w) for w in plan_workloads(Workload.of(spec, **kw)))
    return KernelPlan.from_graphs(g2, g3)


@pytest.mark.parametrize("spec,kw", [("timm:resnet10t", {"input_size": 64}),
                                     ("hf:gpt2", {"seq_len": 16})])
def test_plan_from_two_batches_equals_the_graph_at_any_batch(spec, kw):
    plan = _plan(spec, **kw)
    g7 = get_graph(Workload.of(spec, batch_size=7, **kw))
    for mode in ("infer", "train"):
        a = plan.kernels(7, mode=mode, precision="amp")
        b = lower_graph(g7, mode=mode, precision="amp")
        assert [(k.op, k.dims, k.dtype_bytes, k.phase) for k in a] == \
               [(k.op, k.dims, k.dtype_bytes, k.phase) for k in b]
    train = plan.kernels(4, mode="train", optimizer="adam")
    assert {k.phase for k in train} == {"forward", "backward", "optimizer"}
    assert sum(k.phase == "optimizer" for k in train) == 4  # adam: 4 passes
    assert not any(k.phase == "optimizer"
                   for k in plan.kernels(4, mode="train", optimizer="none"))


def test_no_kernel_time_below_its_roofline(tmp_path):
    from perfcast.paths import package_data
    from perfcast.predictors.crossdevice import _kernel_row, price_kernels
    from perfcast.predictors.kernels import KernelModel

    spec = json.loads(json.dumps(perfcast.devices.get_device("l4").to_dict()))
    spec.update(key="my-gpu-xyz", name="hand-written spec", bandwidth_gbs=500.0)
    path = tmp_path / "my-gpu.json"
    path.write_text(json.dumps(spec))
    km = KernelModel.load(package_data("predictors", "shipped_kernels"))
    plan = _plan("timm:resnet10t", input_size=64)
    for device in ("t4", "a100-40gb", "h100-sxm", "mi250", str(path)):
        dev = perfcast.devices.get_device(device).key
        for prec in ("fp32", "amp", "bf16"):
            kf = pd.DataFrame([_kernel_row(k, 0, dev, prec)
                               for k in plan.kernels(32, mode="train", precision=prec)])
            ms, roof = price_kernels(km, kf)
            assert np.isfinite(ms).all() and (roof > 0).all()
            assert (ms >= roof * (1 - 1e-12)).all(), (device, prec)


def test_new_gpu_from_its_spec_is_answered_by_crossdevice(tmp_path):
    spec = perfcast.devices.get_device("h100-sxm").to_dict()
    spec.update(key="h100-clone-xyz", name="H100 as written by hand")
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(spec))
    p = perfcast.predict("timm:resnet10t", device=str(path), input_size="3,64,64",
                         batch_size=16, precision="amp")
    assert p.predictor["time_ms"] == "crossdevice" and p.time_ms > 0
    assert any("crossdevice" in n for n in p.notes)
    ref = perfcast.predict("timm:resnet10t", device="h100-sxm", input_size="3,64,64",
                           batch_size=16, precision="amp")
    assert ref.time_ms == pytest.approx(p.time_ms)  # the same spec, the same answer
    assert p.route.answers["time_ms"].source == "learned"
    # the roofline is still there when asked for
    roof = perfcast.predict("timm:resnet10t", device=str(path), input_size="3,64,64",
                            batch_size=16, precision="amp", predictor="roofline")
    assert roof.predictor["time_ms"] == "roofline" and roof.time_ms < p.time_ms


@pytest.mark.shared_data("pytorch-gpu-benchmark-torchvision.csv")
def test_fit_save_load_predicts_identically(tmp_path, monkeypatch):
    from perfcast.datasets import load_torchvision_benchmark
    from perfcast.labeled import feature_set
    from perfcast.predictors import create_predictor, load_predictor

    monkeypatch.setenv("PERFCAST_GRAPH_STORE", str(tmp_path / "store"))
    df = load_torchvision_benchmark()
    df = df[df["model"].isin(["torchvision:resnet18", "torchvision:squeezenet1_1"])
            & (df["num_gpus"] == 1) & df["precision"].isin(["fp32", "fp16"])]
    fs = feature_set(df.reset_index(drop=True), workers=1, plans=True)
    assert len(fs) >= 12 and all(p is not None for p in fs.plans)
    pred = create_predictor("crossdevice", correction="xgboost", xgb_rounds=20)
    pred.fit(fs, targets=["time_ms"])
    before = pred.predict(fs)
    assert np.isfinite(before).all() and (before > 0).all()
    after = load_predictor(pred.save(tmp_path / "xd")).predict(fs)
    np.testing.assert_array_equal(before, after)
    # the composition is ≥ the roofline of every kernel: the answer too
    comp = pred.compose(fs)
    assert (before[:, 0] >= comp["roofline_ms"].to_numpy() * (1 - 1e-12)).all()
