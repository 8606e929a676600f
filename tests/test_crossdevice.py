"""crossdevice (issue #13): kernel lowering at any batch, kernel prices never below their roofline,
a GPU given by its spec answered by the device-conditioned model, save/load identity."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import perfcast
import perfcast.devices
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


def test_kernel_table_equals_lowering_each_batch():
    """The batch grid's kernel table (three lowerings, the rest arithmetic) is the kernel list
    of every batch, batch 1 and repeated batches included."""
    from perfcast.features.kernels import kernel_row

    for spec, kw in (("timm:resnet10t", {"input_size": 64}), ("hf:gpt2", {"seq_len": 16})):
        plan = _plan(spec, **kw)
        batches = [1, 2, 7, 7, 64, 3, 1000]
        for mode, prec in (("infer", "amp"), ("train", "fp32")):
            t = plan.kernel_table(batches, mode=mode, precision=prec, optimizer="adam")
            for i, b in enumerate(batches):
                got = t[t["item"] == i].drop(columns=["batch", "item"]).reset_index(drop=True)
                want = pd.DataFrame([kernel_row(k) for k in plan.kernels(
                    b, mode=mode, precision=prec, optimizer="adam")])
                pd.testing.assert_frame_equal(got[want.columns], want, check_dtype=False)


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
    loaded = load_predictor(pred.save(tmp_path / "xd"))
    after = loaded.predict(fs)
    np.testing.assert_array_equal(before, after)
    # the composition is ≥ the roofline of every kernel: the answer too
    comp = pred.compose(fs)
    assert (before[:, 0] >= comp["roofline_ms"].to_numpy() * (1 - 1e-12)).all()
    # fp16 rows ran on tensor cores: η was fitted from them, a fraction of the peak
    assert 0.05 <= pred.eta_ <= 1.0 and loaded.eta_ == pred.eta_
    # few-shot: the loaded model keeps its training rows and refits its correction with a
    # device's records, moving its answers towards them (and saved again, identically)
    dev = fs.rows["device"].astype(str).to_numpy()
    one = np.flatnonzero(dev == dev[0])
    y = fs.target("time_ms")[one]
    err0 = np.mean(np.abs(loaded.predict(fs.subset(one))[:, 0] / y - 1))
    loaded.recalibrate(fs.subset(one))
    err1 = np.mean(np.abs(loaded.predict(fs.subset(one))[:, 0] / y - 1))
    assert err1 < err0 and loaded.trained_on_["adapted"]["records"] == len(one)
    again = load_predictor(loaded.save(tmp_path / "xd2"))
    np.testing.assert_array_equal(again.predict(fs), loaded.predict(fs))


def test_tensor_core_kernels_and_amd_matrix_cores():
    """amp GEMMs / convolutions are tensor-core work (wave-quantised bound ≥ the roofline);
    fp32 GEMMs run on FP32 matrix cores on AMD CDNA, not on NVIDIA; fp32 SIMT kernels are the
    operator model's."""
    from perfcast.predictors.crossdevice import _kernel_row, _peak_precision, tensor_core_work

    plan = _plan("timm:resnet10t", input_size=64)
    for device, prec, expect in (("a100-40gb", "amp", True), ("a100-40gb", "fp32", True),
                                 ("rtx2080ti", "fp32", False), ("mi250", "fp32", True),
                                 ("v100-32gb-pcie", "fp32", False)):
        kf = pd.DataFrame([_kernel_row(k, 0, device, prec) for k in plan.kernels(8, precision=prec)])
        tc, roof_q = tensor_core_work(kf)
        heavy = kf["kernel_class"].isin(["gemm", "conv"]).to_numpy()
        # A100 fp32: convolutions on TF32 (cuDNN's default), GEMMs on the SIMT units; AMD
        # fp32: GEMMs on matrix cores (rocBLAS), convolutions priced on the vector units
        if device == "a100-40gb" and prec == "fp32":
            assert (tc == (kf["kernel_class"] == "conv").to_numpy()).all()
        elif device == "mi250":
            assert (tc == (kf["kernel_class"] == "gemm").to_numpy()).all()
        else:
            assert (tc == (heavy & expect)).all(), (device, prec)
        assert (roof_q[tc] > 0).all() and (roof_q[~tc] == 0).all()
    dev = perfcast.devices.get_device
    assert _peak_precision("gemm", "fp32", dev("mi210")) == "fp32_matrix"
    assert dev("mi210").peak_tflops("fp32_matrix") == pytest.approx(45.3)
    assert _peak_precision("gemm", "fp32", dev("a100-40gb")) == "fp32"
    assert dev("a100-40gb").peak_tflops("fp32_matrix") == dev("a100-40gb").peak_fp32_tflops


def test_attention_fused_in_half_precision_only():
    plan = _plan("hf:gpt2", seq_len=16)
    ops = lambda prec: [k.kernel_class for k in plan.kernels(2, precision=prec)]  # noqa: E731
    # fp32: bmm → softmax → bmm per layer (eager attention); amp: one fused kernel per layer
    assert ops("fp32").count("softmax") == 12 and ops("amp").count("softmax") == 0
    assert ops("fp32").count("gemm") - ops("amp").count("gemm") == 12


def test_operator_model_stays_in_its_measured_domain():
    """A GEMM far larger than any measured one is priced as in-domain chunks: its utilization
    does not collapse with the size (it did: 0.81 at M = 4,096 → 0.25 at M = 590,848); a
    convolution of a shape never measured (1×1, stride 2) is priced as its implicit GEMM."""
    from perfcast.paths import package_data
    from perfcast.predictors.kernels import KernelModel

    km = KernelModel.load(package_data("predictors", "shipped_kernels"))
    assert km.domain_["gemm"]["M"] >= 4096 and (3, 1) in map(tuple, km.domain_["conv"]["shapes"])
    f = pd.DataFrame({"op": "linear", "B": 1, "M": [4096, 65536, 590848], "N": 3072, "K": 768,
                      "device_key": "a100-40gb-pcie"})
    u = km.predict_utilization(f)
    assert u[2] >= 0.8 * u[0] and u[1] >= 0.8 * u[0], u
    conv = pd.DataFrame({"op": "conv", "B": 32, "Input_Channel": 256, "Output_Channel": 512,
                         "Kernel_Szie": 1, "Input_Size": 28, "Stride": 2, "Padding": 0,
                         "device_key": "t4"}, index=[0])
    out = km.predict_frame(conv)
    assert 0 < out["utilization"].iloc[0] <= 1 and out["latency_ms"].iloc[0] >= out[
        "roofline_ms"].iloc[0]
