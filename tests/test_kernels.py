"""Operator-level kernel model: the NeuSight ops loader (perfcast.datasets.kernels), the work and
roofline formulas and KernelModel (perfcast.predictors.kernels)."""

from __future__ import annotations

import csv
import math

import numpy as np
import pandas as pd
import pytest

from perfcast.datasets.kernels import DEVICE_KEYS, load_kernels
from perfcast.devices import get_device
from perfcast.errors import PerfcastError
from perfcast.paths import package_data, public_data_dir
from perfcast.predictors.kernels import (
    CLASS_DIMS,
    KernelModel,
    WINOGRAD_GAIN,
    kernel_roofline_ms,
    kernel_work,
    roofline_ms,
)

LN_FILES = [f"neusight/ops/train/ln/{g}.csv" for g in
            ("Tesla_P4", "Tesla_P100-PCIE-16GB", "Tesla_T4", "Tesla_V100-PCIE-32GB",
             "NVIDIA_A100-PCIE-40GB")]
DEVICES = ("t4", "l4", "p4", "v100-32gb-pcie", "a100-80gb-pcie", "h100-sxm")


# --------------------------------------------------------------------------- loader
@pytest.mark.shared_data(*LN_FILES)
def test_loader_counts_on_layer_norm(tmp_path):
    # a data dir holding only the layer-norm training files (links, not copies)
    dest = tmp_path / "neusight" / "ops" / "train" / "ln"
    dest.mkdir(parents=True)
    for rel in LN_FILES:
        (dest / rel.rsplit("/", 1)[-1]).symlink_to(public_data_dir() / rel)
    df = load_kernels("train", data_dir=tmp_path)
    rep = df.attrs["report"]
    raw_rows = sum(len(list(csv.DictReader(open(public_data_dir() / f)))) for f in LN_FILES)
    assert rep.rows_in == raw_rows == 7000
    assert rep.rows_out == len(df) == 6985  # 3 repeated (op, device, dims) rows per GPU file
    assert rep.dropped == {"duplicate row (same op, device and dimensions as an earlier row of "
                           "the file)": 15}
    assert len(rep.parts) == 5
    assert set(df["op"]) == {"ln"} and set(df["kernel_class"]) == {"norm"}
    assert df.groupby("device_key").size().to_dict() == {
        k: 1397 for k in ("p4", "p100-16gb-pcie", "t4", "v100-32gb-pcie", "a100-40gb-pcie")}
    assert (df["latency_ms"] > 0).all() and df[["B", "H"]].notna().all().all()
    assert df[["M", "N", "K", "Input_Channel"]].isna().all().all()
    assert set(df["source"].str.rsplit("/", n=1).str[0]) == {"neusight/ops/train/ln"}


def test_loader_drop_reasons(tmp_path):
    dest = tmp_path / "neusight" / "ops" / "test"
    dest.mkdir(parents=True)
    head = ["OPName", "Latency", "Device", "Kernel Name", "B", "H"]
    rows = [["add", "0.5", "Tesla T4", "k", "4", "8"],
            ["add", "0.6", "Tesla T4", "k", "4", "8"],           # repeat of the row above
            ["add", "0.5", "NVIDIA H100 80GB HBM3", "k", "4", "8"],  # not in the table
            ["relu", "0", "Tesla T4", "k", "4", "8"],            # latency not > 0
            ["relu", "0.2", "Tesla T4", "k", "4", ""],           # missing H
            ["frobnicate", "0.2", "Tesla T4", "k", "4", "8"],    # unknown op
            ["relu", "0.2", "NVIDIA L4", "k", "4", "8"]]
    with open(dest / "elem.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([head, *rows])
    df = load_kernels("test", data_dir=tmp_path)
    rep = df.attrs["report"]
    assert rep.rows_in == 7 and rep.rows_out == len(df) == 2
    assert sum(rep.dropped.values()) == 5
    assert df["device_key"].tolist() == ["t4", "l4"]
    assert df["latency_ms"].tolist() == [0.5, 0.2]  # the first of repeated rows is kept
    with pytest.raises(PerfcastError):
        load_kernels("valid", data_dir=tmp_path)


def test_device_table_maps_to_registry():
    for name, key in DEVICE_KEYS.items():
        assert get_device(key).kind == "gpu", name


# --------------------------------------------------------------------------- work and roofline
def test_kernel_work_by_hand():
    assert kernel_work("gemm", dict(B=2, M=3, N=4, K=5)) == (240.0, 4 * 2 * (15 + 20 + 12))
    assert kernel_work("linear", dict(B=1, M=3, N=4, K=5)) == (120.0, 4 * (15 + 20 + 12))
    # conv 3x3, stride 1, pad 1 on 5x5: out 5x5; implicit GEMM M = 25, N = 3, K = 2*9
    conv = dict(B=1, Input_Channel=2, Output_Channel=3, Kernel_Szie=3, Input_Size=5, Stride=1,
                Padding=1)
    assert kernel_work("conv", conv) == (2 * 25 * 3 * 18, 4 * (2 * 25 + 3 * 2 * 9 + 3 * 25))
    # stride 2, no padding on 7x7: out 3x3
    conv2 = dict(conv, Input_Size=7, Stride=2, Padding=0)
    assert kernel_work("conv", conv2)[0] == 2 * 9 * 3 * 18
    assert kernel_work("ln", dict(B=2, H=3)) == (48.0, 4 * (12 + 6) + 4 * 2 * 2)
    assert kernel_work("softmax", dict(B=2, H=3)) == (30.0, 48.0)
    assert kernel_work("add", dict(B=2, H=3)) == (6.0, 72.0)       # two inputs + output
    assert kernel_work("relu", dict(B=2, H=3)) == (6.0, 48.0)      # one input + output
    assert kernel_work("elementwise", dict(B=2, H=3), op="mul") == (6.0, 72.0)
    assert kernel_work("gemm", dict(B=1, M=2, N=2, K=2), precision="fp16")[1] == 24.0
    f, b = kernel_work("gemm", dict(B=[1, 2], M=[2, 2], N=[2, 2], K=[2, 2]))
    assert f.tolist() == [16.0, 32.0] and b.tolist() == [48.0, 96.0]
    with pytest.raises(PerfcastError):
        kernel_work("gemm", dict(B=1, M=2, N=2))
    with pytest.raises(PerfcastError):
        kernel_work("scan", dict(B=1))


def test_roofline_by_hand():
    t4 = get_device("t4")
    flops, moved = 8.1e12, 320e9 / 2  # 1 s of compute, 0.5 s of memory on a T4
    assert roofline_ms(flops, moved, "t4") == pytest.approx(
        1e3 * max(flops / (t4.peak_tflops("fp32") * 1e12), moved / (t4.bandwidth_gbs * 1e9)))
    conv = dict(B=8, Input_Channel=256, Output_Channel=256, Kernel_Szie=3, Input_Size=28,
                Stride=1, Padding=1)
    f, b = kernel_work("conv", conv)
    assert kernel_roofline_ms("conv", conv, t4) == pytest.approx(
        roofline_ms(f / WINOGRAD_GAIN, b, t4))
    assert kernel_roofline_ms("conv", dict(conv, Stride=2), t4) == pytest.approx(
        roofline_ms(*kernel_work("conv", dict(conv, Stride=2)), t4))


# --------------------------------------------------------------------------- the model
def _random_dims(kc: str, n: int, rng) -> dict[str, np.ndarray]:
    if kc == "gemm":
        return {d: rng.integers(1, 4096, n) for d in CLASS_DIMS[kc]}
    if kc == "conv":
        return dict(B=rng.integers(1, 64, n), Input_Channel=rng.integers(3, 1024, n),
                    Output_Channel=rng.integers(3, 1024, n), Kernel_Szie=np.full(n, 3),
                    Input_Size=rng.integers(5, 128, n), Stride=np.ones(n, int),
                    Padding=np.ones(n, int))
    return dict(B=rng.integers(1, 1 << 16, n), H=rng.integers(1, 1 << 14, n))


_OPS = {"gemm": ["bmm", "linear"], "conv": ["conv"], "norm": ["ln"], "softmax": ["softmax"],
        "elementwise": ["add", "relu", "gelu"]}


def _rows(n: int, seed: int, devices=DEVICES) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for kc, ops in _OPS.items():
        frame = pd.DataFrame(_random_dims(kc, n, rng))
        frame["op"] = rng.choice(ops, n)
        frame["kernel_class"] = kc
        frame["device_key"] = rng.choice(list(devices), n)
        parts.append(frame)
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def small_model():
    """A tiny model on synthetic rows whose 'utilization' reaches 1.5 (so the u <= 1 clip has
    work to do) — a unit fixture for the mechanics, not a measurement."""
    rows = _rows(300, 0, devices=("t4", "p4", "v100-32gb-pcie", "a100-40gb-pcie"))
    rng = np.random.default_rng(1)
    roof = np.concatenate([
        kernel_roofline_ms(kc, {d: rows.loc[rows.kernel_class == kc, d].to_numpy()
                                for d in CLASS_DIMS[kc]}, "t4")
        for kc in _OPS])  # a bound per row (device numbers do not matter for the mechanics)
    rows["latency_ms"] = roof / rng.uniform(0.05, 1.5, len(rows))
    return KernelModel(rounds=15, max_depth=3).fit(rows)


def test_never_below_roofline(small_model):
    rows = _rows(200, 7)
    frame = small_model.predict_frame(rows)
    assert np.isfinite(frame["latency_ms"]).all()
    assert (frame["utilization"] <= 1.0).all() and (frame["utilization"] > 0).all()
    assert (frame["latency_ms"] >= frame["roofline_ms"] * (1 - 1e-12)).all()
    for dev in DEVICES:
        for kc, ops in _OPS.items():
            one = {k: int(v[0]) for k, v in _random_dims(kc, 1, np.random.default_rng(3)).items()}
            t = small_model.predict_ms(ops[0], one, dev)
            assert isinstance(t, float) and t >= kernel_roofline_ms(ops[0], one, dev) * (1 - 1e-12)
    with pytest.raises(PerfcastError):
        small_model.predict_ms("bmm", dict(B=1, M=2, N=2, K=2), "t4", precision="fp16")


def test_save_load_identical(small_model, tmp_path):
    rows = _rows(100, 11)
    path = small_model.save(tmp_path / "km")
    assert sorted(p.name for p in path.iterdir()) == sorted(
        ["config.json", *[f"{kc}.json" for kc in _OPS]])
    loaded = KernelModel.load(path)
    assert np.array_equal(loaded.predict(rows), small_model.predict(rows))
    assert loaded.get_params() == small_model.get_params()
    with pytest.raises(PerfcastError):
        KernelModel.load(tmp_path)
    with pytest.raises(PerfcastError):
        KernelModel().predict(rows)


def test_shipped_model_bounds():
    path = package_data("predictors", "shipped_kernels")
    if not (path / "config.json").is_file():
        pytest.skip("no shipped kernel model (benchmarks/kernel_model.py writes it)")
    model = KernelModel.load(path)
    rows = _rows(100, 5)
    out = model.predict_frame(rows)
    assert (out["latency_ms"] >= out["roofline_ms"] * (1 - 1e-12)).all()
    assert math.isfinite(model.predict_ms("linear", dict(B=1, M=1024, N=4096, K=1024), "l4"))
