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
                                     pytest.param("hf:gpt2", {"seq_len": 16},
                                                  marks=pytest.mark.slow)])
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


@pytest.mark.parametrize("spec,kw", [("timm:resnet10t", {"input_size": 64}),
                                     pytest.param("hf:gpt2", {"seq_len": 16},
                                                  marks=pytest.mark.slow)])
def test_kernel_table_equals_lowering_each_batch(spec, kw):
    """The batch grid's kernel table (three lowerings, the rest arithmetic) is the kernel list
    of every batch, batch 1 and repeated batches included."""
    from perfcast.features.kernels import kernel_row

    plan = _plan(spec, **kw)
    batches = [1, 2, 7, 7, 64, 3, 1000]
    for mode, prec in (("infer", "amp"), ("train", "fp32")):
        t = plan.kernel_table(batches, mode=mode, precision=prec,
                              optimizer="adam").to_pandas()
        for i, b in enumerate(batches):
            got = t[t["item"] == i].drop(columns=["batch", "item"]).reset_index(drop=True)
            want = pd.DataFrame([kernel_row(k) for k in plan.kernels(
                b, mode=mode, precision=prec, optimizer="adam")])
            pd.testing.assert_frame_equal(got[want.columns], want, check_dtype=False)


def test_no_kernel_time_below_its_roofline(tmp_path):
    from perfcast.paths import package_data
    from perfcast.predictors.crossdevice import price_kernels
    from perfcast.predictors.crossdevice.composition import _kernel_row
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
            pr = price_kernels(km, kf)
            ms, roof = pr.ms, pr.roofline_ms
            assert np.isfinite(ms).all() and (roof > 0).all()
            assert (ms >= roof * (1 - 1e-12)).all(), (device, prec)
            assert (ms <= pr.upper_ms * (1 + 1e-12)).all(), (device, prec)


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
    # the roofline is still there when asked for (both answers may be capped at the RTX 4090's
    # own: an H100 is at least as good as it in what an amp run uses — perfcast.anchors)
    roof = perfcast.predict("timm:resnet10t", device=str(path), input_size="3,64,64",
                            batch_size=16, precision="amp", predictor="roofline")
    assert roof.predictor["time_ms"] == "roofline"
    # both at least the physical floor (the roofline predictor adds an assumed 5 µs launch per
    # kernel, so the anchored crossdevice answer may be below it, never below the floor)
    floor = p.route.request.time_floor()
    assert p.time_ms >= floor * (1 - 1e-9) and roof.time_ms >= floor * (1 - 1e-9)


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
    # the kinds of work the correction learned from (it scales no other), saved with it
    assert pred.regimes_ == loaded.regimes_ == ["fp16, convolutions", "fp32, convolutions"]
    # every answer lies between Σ roofline and Σ K·(roofline + launch)
    lo, hi = pred.bounds(fs).T
    assert (before[:, 0] >= lo * (1 - 1e-12)).all() and (before[:, 0] <= hi * (1 + 1e-12)).all()
    # the dispatch time per kernel is one of the candidates, per mode
    assert set(pred.host_ms_) == {"infer", "train"}
    assert all(v * 1e3 in pred.p("host_us") for v in pred.host_ms_.values())
    # few-shot: a device's records rescale the answers towards them (and save identically)
    dev = fs.rows["device"].astype(str).to_numpy()
    one = np.flatnonzero(dev == dev[0])
    y = fs.target("time_ms")[one]
    err0 = np.mean(np.abs(loaded.predict(fs.subset(one))[:, 0] / y - 1))
    loaded.recalibrate(fs.subset(one))
    err1 = np.mean(np.abs(loaded.predict(fs.subset(one))[:, 0] / y - 1))
    assert err1 < err0
    again = load_predictor(loaded.save(tmp_path / "xd2"))
    np.testing.assert_array_equal(again.predict(fs), loaded.predict(fs))


def test_tensor_core_kernels_and_amd_matrix_cores():
    """amp GEMMs / convolutions run on tensor cores; in fp32 convolutions run on TF32 by
    default on Ampere and later and GEMMs only with --tf32 on; fp32 GEMMs run on FP32 matrix
    cores on AMD CDNA, not on NVIDIA; a GPU without tensor cores runs everything on SIMT."""
    from perfcast.paths import package_data
    from perfcast.predictors.crossdevice import peak_unit, price_kernels
    from perfcast.predictors.crossdevice.composition import _kernel_row
    from perfcast.predictors.kernels import KernelModel

    km = KernelModel.load(package_data("predictors", "shipped_kernels"))
    plan = _plan("timm:resnet10t", input_size=64)
    for device, prec, tf32 in (("a100-40gb", "amp", "default"), ("a100-40gb", "fp32", "default"),
                               ("a100-40gb", "fp32", "on"), ("a100-40gb", "fp32", "off"),
                               ("rtx2080ti", "fp32", "default"), ("rtx2080ti", "amp", "default"),
                               ("mi250", "fp32", "default"), ("titan-xp", "amp", "default")):
        kf = pd.DataFrame([_kernel_row(k, 0, device, prec, tf32)
                           for k in plan.kernels(8, precision=prec)])
        tc = price_kernels(km, kf).tc
        kc = kf["kernel_class"].to_numpy()
        heavy = np.isin(kc, ["gemm", "conv"])
        if device == "a100-40gb" and prec == "fp32":
            want = {"default": kc == "conv", "on": heavy, "off": np.zeros(len(kc), bool)}[tf32]
        elif device == "mi250":
            want = kc == "gemm"  # rocBLAS SGEMM on matrix cores; convolutions on vector units
        elif device == "titan-xp" or prec == "fp32":
            want = np.zeros(len(kc), bool)  # Pascal has no tensor cores, Turing no TF32
        else:
            want = heavy
        assert (tc == want).all(), (device, prec, tf32)
    dev = perfcast.devices.get_device
    assert peak_unit("gemm", "fp32", dev("mi210")) == "fp32_matrix"
    assert dev("mi210").peak_tflops("fp32_matrix") == pytest.approx(45.3)
    assert peak_unit("gemm", "fp32", dev("a100-40gb")) == "fp32"
    assert peak_unit("gemm", "fp32", dev("a100-40gb"), "on") == "tf32"
    assert peak_unit("conv", "fp32", dev("a100-40gb"), "off") == "fp32"


@pytest.mark.slow
def test_attention_fused_in_half_precision_only():
    plan = _plan("hf:gpt2", seq_len=16)
    ops = lambda prec: [k.kernel_class for k in plan.kernels(2, precision=prec)]  # noqa: E731
    # fp32: bmm → softmax → bmm per layer (eager attention); amp: one fused kernel per layer
    assert ops("fp32").count("softmax") == 12 and ops("amp").count("softmax") == 0
    assert ops("fp32").count("gemm") - ops("amp").count("gemm") == 12


def test_operator_model_extrapolates_by_its_physics():
    """A GEMM far larger than any measured one keeps its efficiency (the base τ + c/η + m/β
    carries the size, the shape factor stays at its learned edge); a tiny one costs its fixed
    GPU time, not the harness's dispatch; a convolution of a shape never measured (1×1,
    stride 2) is priced as its implicit GEMM."""
    from perfcast.paths import package_data
    from perfcast.predictors.kernels import KernelModel

    km = KernelModel.load(package_data("predictors", "shipped_kernels"))
    assert km.domain_["gemm"]["M"] >= 4096 and (3, 1) in map(tuple, km.domain_["conv"]["shapes"])
    f = pd.DataFrame({"op": "linear", "B": 1, "M": [4096, 65536, 590848], "N": 3072, "K": 768,
                      "device_key": "a100-40gb-pcie"})
    u = km.predict_utilization(f)
    assert u[2] >= 0.8 * u[0] and u[1] >= 0.8 * u[0], u
    tiny = pd.DataFrame({"op": "add", "B": 4, "H": 64, "device_key": "a100-40gb-pcie"},
                        index=[0])
    t = km.predict(tiny)[0]
    tau = km.gpu_time_constants()["elementwise"]["tau_ms"]
    assert tau <= t < 4 * tau, (t, tau)
    assert t < km.harness_floor_ms("elementwise") / 4
    conv = pd.DataFrame({"op": "conv", "B": 32, "Input_Channel": 256, "Output_Channel": 512,
                         "Kernel_Szie": 1, "Input_Size": 28, "Stride": 2, "Padding": 0,
                         "device_key": "t4"}, index=[0])
    out = km.predict_frame(conv)
    assert 0 < out["utilization"].iloc[0] <= 1 and out["latency_ms"].iloc[0] >= out[
        "roofline_ms"].iloc[0]
