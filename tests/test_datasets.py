"""perfcast.datasets: loaders for the shared public measurements (values checked against the CSVs)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd
import pytest

from perfcast.datasets import (
    COLUMNS,
    ENV_VAR,
    attach_graph_keys,
    default_data_dir,
    record_workload,
    load_all,
    load_gpumemnet,
    load_timm_benchmarks,
    load_torchvision_benchmark,
)
from perfcast.errors import PerfcastError
from perfcast.workload import Workload

DATA = default_data_dir()
TIMM = DATA / "timm-benchmarks"
TRAIN = "benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv"
INFER_4090_OLD = "benchmark-infer-amp-nchw-pt240-cu124-rtx4090.csv"
INFER_4090_NEW = "benchmark-infer-amp-nchw-pt291-cu128-4090.csv"
CPU_I7 = "benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv"
GPUMEM = "gpumemnet-timm-train-memory-a100.csv"
TV = "pytorch-gpu-benchmark-torchvision.csv"

# skipped without the shared data, failed with PERFCAST_REQUIRE_DATA=1 (tests/conftest.py)
needs_data = pytest.mark.shared_data(f"timm-benchmarks/{TRAIN}", GPUMEM, TV)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _record(df: pd.DataFrame, source: str, row: int) -> pd.Series:
    hit = df[(df["source"] == source) & (df["source_row"] == row)]
    assert len(hit) == 1, f"{source} row {row}: {len(hit)} records"
    return hit.iloc[0]


@pytest.fixture(scope="module")
def timm_df() -> pd.DataFrame:
    return load_timm_benchmarks()


@pytest.fixture(scope="module")
def gpumem_df() -> pd.DataFrame:
    return load_gpumemnet()


@pytest.fixture(scope="module")
def tv_df() -> pd.DataFrame:
    return load_torchvision_benchmark()


# --------------------------------------------------------------------------- known values
@needs_data
def test_train_first_row_matches_csv(timm_df):
    text = (TIMM / TRAIN).read_text().splitlines()[1]
    assert text == "tinynet_e,10001.12,50.423,512,106,2.04"  # the row this test is about
    raw = _csv_rows(TIMM / TRAIN)[0]
    rec = _record(timm_df, TRAIN, 0)
    assert rec["raw_model"] == raw["model"] == "tinynet_e"
    assert rec["model"] == "timm:tinynet_e"
    assert rec["time_ms"] == float(raw["train_step_time"]) == 50.423
    assert rec["batch_size"] == int(raw["train_batch_size"]) == 512
    assert rec["input_size"] == "3,106,106"
    assert (rec["device"], rec["mode"], rec["precision"]) == ("rtx3090", "train", "amp")
    assert rec["software"] == "torch-1.12/cu113"
    assert rec["optimizer"] == "sgd-momentum"
    assert rec["family"] == "efficientnet"
    assert not rec["compiled"] and not rec["censored"] and rec["num_gpus"] == 1
    assert pd.isna(rec["memory_mb"]) and pd.isna(rec["seq_len"])


@pytest.mark.parametrize("source, device, software, compiled, precision", [
    (INFER_4090_OLD, "rtx4090", "torch-2.4/cu124", False, "amp"),
    (INFER_4090_NEW, "rtx4090", "torch-2.9.1/cu128", False, "amp"),
    (CPU_I7, "i7-12700h", "torch-2.4/cpu", True, "fp32"),
])
@needs_data
def test_infer_rows_match_csv(timm_df, source, device, software, compiled, precision):
    rows = _csv_rows(TIMM / source)
    for i in (0, 1, len(rows) // 2, len(rows) - 1):
        raw, rec = rows[i], _record(timm_df, source, i)
        assert rec["raw_model"] == raw["model"]
        assert rec["time_ms"] == float(raw["infer_step_time"])
        assert rec["batch_size"] == int(raw["infer_batch_size"])
        size = int(raw["infer_img_size"])
        assert rec["input_size"] == f"3,{size},{size}"
        assert rec["ref_gmacs"] == float(raw["infer_gmacs"])
        assert (rec["device"], rec["mode"], rec["precision"]) == (device, "infer", precision)
        assert rec["software"] == software and bool(rec["compiled"]) is compiled


@needs_data
def test_two_4090_files_are_told_apart(timm_df):
    sub = timm_df[timm_df["device"] == "rtx4090"]
    assert set(sub["software"]) == {"torch-2.4/cu124", "torch-2.9.1/cu128"}
    assert set(sub["source"]) == {INFER_4090_OLD, INFER_4090_NEW}


@needs_data
def test_gpumemnet_rows_match_csv(gpumem_df):
    rows = _csv_rows(DATA / GPUMEM)
    idx = next(i for i, r in enumerate(rows) if r["model"] == "beit_base_patch16_224" and r["batch_size"] == "8")
    raw, rec = rows[idx], _record(gpumem_df, GPUMEM, idx)
    assert rec["memory_mb"] == float(raw["max_gpu_memory_mib"]) == 3627.0  # MiB, stored unchanged
    assert rec["faketensor_estimate_mb"] == float(raw["faketensor_estimate_mb"])
    assert rec["batch_size"] == 8 and rec["model"] == "timm:beit_base_patch16_224"
    assert (rec["device"], rec["mode"], rec["precision"]) == ("a100-40gb", "train", "fp32")
    assert rec["input_size"] == "3,224,224" and pd.isna(rec["time_ms"])
    assert not rec["censored"] and rec["family"] == "beit"
    # the *_384 model's default input size is used (documented assumption)
    i384 = next(i for i, r in enumerate(rows) if r["model"] == "beit_base_patch16_384" and r["batch_size"] == "8")
    assert _record(gpumem_df, GPUMEM, i384)["input_size"] == "3,384,384"


@needs_data
def test_gpumemnet_censoring(gpumem_df):
    rows = _csv_rows(DATA / GPUMEM)
    high = [i for i, r in enumerate(rows) if float(r["max_gpu_memory_mib"]) >= 40000]
    assert high, "expected saturated rows in the GPUMemNet file"
    for i in high[:20]:
        rec = _record(gpumem_df, GPUMEM, i)
        assert rec["censored"] and rec["memory_mb"] == float(rows[i]["max_gpu_memory_mib"])
        assert rec["censor_at_mb"] == 40000.0 and rec["censor_reason"] == "reading >= 40000 MiB"
    assert int((gpumem_df["memory_mb"] >= 40000).sum()) == len(high)
    assert gpumem_df.loc[gpumem_df["memory_mb"] >= 40000, "censored"].all()
    # below threshold and no censored smaller batch: not censored
    low = gpumem_df[(gpumem_df["memory_mb"] < 40000) & (gpumem_df["censor_reason"].isna())]
    assert len(low) > 3000 and not low["censored"].any()


@needs_data
def test_gpumemnet_implied_censoring_and_failed_runs(gpumem_df):
    rows = _csv_rows(DATA / GPUMEM)
    find = {(r["model"], int(r["batch_size"])): i for i, r in enumerate(rows)}
    # 40321 MiB at batch 32, then 6487 at 64: a larger batch than a censored run is censored too
    i = find[("eva02_large_patch14_clip_336", 64)]
    assert rows[i]["max_gpu_memory_mib"] == "6487"
    rec = _record(gpumem_df, GPUMEM, i)
    assert rec["censored"] and rec["censor_reason"] == "larger batch than a censored run of the same model"
    # 28523 MiB at batch 64, then 3125 at 128: a failed run, dropped with its reason
    i = find[("beit_base_patch16_384", 128)]
    assert rows[i]["max_gpu_memory_mib"] == "3125"
    assert not ((gpumem_df["source_row"] == i).any())
    reasons = gpumem_df.attrs["report"].dropped
    assert any(k.startswith("failed run") for k in reasons)
    kept = load_gpumemnet(drop_failed=False)
    assert len(kept) == kept.attrs["report"].rows_in
    assert _record(kept, GPUMEM, i)["suspect"]


@needs_data
def test_torchvision_rows_match_csv(tv_df):
    rows = _csv_rows(DATA / TV)
    raw, rec = rows[0], _record(tv_df, TV, 0)
    assert raw["model"] == "mnasnet0_5" and raw["precision"] == "double"
    assert rec["model"] == "torchvision:mnasnet0_5" and rec["family"] == "mnasnet"
    assert rec["time_ms"] == float(raw["median_ms"]) == 21.8132
    assert rec["time_ms_p10"] == float(raw["p10_ms"]) and rec["time_ms_p90"] == float(raw["p90_ms"])
    assert rec["time_ms_mean"] == float(raw["mean_ms"])
    assert (rec["device"], rec["mode"], rec["precision"]) == ("titan-xp", "infer", "fp64")
    assert rec["batch_size"] == 12 and rec["num_gpus"] == 1 and rec["input_size"] == "3,224,224"
    multi = next(i for i, r in enumerate(rows) if r["num_gpus"] == "4" and r["precision"] == "half"
                 and r["mode"] == "train" and r["gpu"] == "GeForce RTX 2080 Ti")
    rec = _record(tv_df, TV, multi)
    assert rec["time_ms"] == float(rows[multi]["median_ms"])
    assert (rec["device"], rec["precision"], rec["mode"]) == ("rtx2080ti", "fp16", "train")
    assert rec["num_gpus"] == 4 and rec["batch_size"] == 12 and rec["global_batch_size"] == 48
    assert set(tv_df["device"]) == {"titan-xp", "titan-rtx", "rtx2080ti"}


# --------------------------------------------------------------------------- names
@needs_data
def test_pre_1_0_name_resolved_through_deprecation_mapping(timm_df):
    from timm.models import get_deprecated_models

    mapping = get_deprecated_models()
    train_names = [r["model"] for r in _csv_rows(TIMM / TRAIN)]
    assert "tv_resnet50" in train_names and mapping["tv_resnet50"]
    rec = timm_df[(timm_df["source"] == TRAIN) & (timm_df["raw_model"] == "tv_resnet50")].iloc[0]
    assert rec["model"] == f"timm:{mapping['tv_resnet50']}" == "timm:resnet50.tv_in1k"
    assert rec["arch"] == "resnet50" and rec["family"] == "resnet" and rec["renamed"]
    renamed = timm_df[(timm_df["source"] == TRAIN) & timm_df["renamed"]]
    assert len(renamed) > 50 and (renamed["raw_model"].isin(list(mapping))).all()


@needs_data
def test_unresolvable_names_are_dropped_with_reason(timm_df):
    rep = next(r for r in timm_df.attrs["report"].files() if r.source == TRAIN)
    reason = next(k for k in rep.dropped if k.startswith("timm name not resolvable"))
    assert rep.dropped[reason] >= 1
    assert "convnext_nano_hnf" in rep.examples[reason]
    assert "densenet264" not in set(timm_df.loc[timm_df["source"] == TRAIN, "raw_model"])


@needs_data
def test_families_are_timm_modules(timm_df):
    fam = dict(zip(timm_df["arch"], timm_df["family"]))
    assert fam["resnet50"] == "resnet"
    assert fam["vit_base_patch16_224"] == "vision_transformer"
    assert timm_df["family"].notna().all() and timm_df["model"].str.startswith("timm:").all()


# --------------------------------------------------------------------------- reports
@needs_data
def test_report_counts_add_up():
    df = load_all()
    rep = df.attrs["report"]
    leaves = rep.files()
    assert {r.source for r in leaves} >= {TRAIN, INFER_4090_OLD, INFER_4090_NEW, CPU_I7, GPUMEM, TV}
    for r in leaves:
        assert r.rows_out + sum(r.dropped.values()) == r.rows_in
        assert r.rows_in == len(_csv_rows(Path(r.path)))
        assert r.rows_out == int((df["source"] == r.source).sum())
    assert rep.rows_in == sum(r.rows_in for r in leaves) and rep.rows_out == len(df)
    assert list(df.columns[: len(COLUMNS)]) == list(COLUMNS)
    assert not df.duplicated(["source", "source_row"]).any()
    md = rep.to_markdown()
    assert TRAIN in md and "rows in" in md


# --------------------------------------------------------------------------- joining to graphs
@needs_data
def test_record_workload_and_keys(timm_df, tv_df):
    rec = _record(timm_df, TRAIN, 0)
    w = record_workload(rec)
    assert w == Workload.of("timm:tinynet_e", batch_size=512, input_size=(3, 106, 106),
                           mode="train", precision="amp", optimizer="sgd-momentum")
    with pytest.raises(PerfcastError, match="fp64"):
        record_workload(_record(tv_df, TV, 0))
    keyed = attach_graph_keys(tv_df)
    assert keyed.loc[keyed["precision"] == "fp64", "graph_key"].isna().all()
    keys = keyed.loc[keyed["precision"] != "fp64", "graph_key"]
    assert keys.notna().all() and keys.map(lambda k: bool(re.fullmatch(r"[0-9a-f]{24}", k))).all()
    # data-parallel rows share the per-GPU graph of the single-GPU row
    one = keyed[(keyed["num_gpus"] == 1) & (keyed["precision"] == "fp32")]
    four = keyed[(keyed["num_gpus"] == 4) & (keyed["precision"] == "fp32")]
    assert set(four["graph_key"]) == set(one["graph_key"])


# --------------------------------------------------------------------------- data directory
GPUMEM_SAMPLE = ("model,batch_size,max_gpu_memory_mib,faketensor_estimate_mb\n"
                 "resnet50,8,4000,1000.0\nresnet50,16,41000,2000.0\nresnet50,32,3000,4000.0\n"
                 "resnet18,8,,10.0\nno_such_model_xyz,8,100,1.0\nresnet18,8,2500,10.0\n")


def test_data_dir_override_argument_and_env(tmp_path, monkeypatch):
    (tmp_path / GPUMEM).write_text(GPUMEM_SAMPLE)
    df = load_gpumemnet(data_dir=tmp_path)
    rep = df.attrs["report"]
    assert rep.path == str(tmp_path / GPUMEM)
    assert (rep.rows_in, rep.rows_out) == (6, 4)
    assert rep.rows_out + sum(rep.dropped.values()) == rep.rows_in
    assert any("missing target" in k for k in rep.dropped)
    assert any("not resolvable" in k for k in rep.dropped)
    r50 = df[df["model"] == "timm:resnet50"].set_index("batch_size")
    assert r50.loc[16, "censored"] and r50.loc[32, "censored"]  # 32: larger than a censored batch
    assert not r50.loc[8, "censored"]
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert default_data_dir() == tmp_path
    assert load_gpumemnet().attrs["report"].rows_in == 6


def test_paths_defaults_and_overrides(tmp_path, monkeypatch):
    from perfcast import paths

    for var in ("PERFCAST_DATA_HOME", "PERFCAST_DATA", "PERFCAST_DATASETS", "PERFCAST_CACHE_DIR",
                "PERFCAST_GRAPH_STORE", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    home = tmp_path / ".local" / "share" / "perfcast"
    assert paths.data_home() == home and not home.exists()  # never created on read
    assert default_data_dir() == paths.public_data_dir() == home / "public"
    assert paths.local_cpu_db() == home / "datasets" / "cpu" / "measurements.db"
    assert paths.cache_dir() == tmp_path / ".cache" / "perfcast" / "graphs"
    assert paths.graph_store_dir() == tmp_path / ".cache" / "perfcast" / "labeled"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdgc"))
    assert paths.public_data_dir() == tmp_path / "xdg" / "perfcast" / "public"
    assert paths.cache_dir() == tmp_path / "xdgc" / "perfcast" / "graphs"
    monkeypatch.setenv("PERFCAST_DATA_HOME", str(tmp_path / "dh"))
    assert paths.local_datasets_dir() == tmp_path / "dh" / "datasets"
    for var, fn in (("PERFCAST_DATA", paths.public_data_dir),
                    ("PERFCAST_DATASETS", paths.local_datasets_dir),
                    ("PERFCAST_CACHE_DIR", paths.cache_dir),
                    ("PERFCAST_GRAPH_STORE", paths.graph_store_dir)):
        monkeypatch.setenv(var, str(tmp_path / var))
        assert fn() == tmp_path / var
    assert paths.package_data("paths.py") == Path(paths.__file__).resolve()
    assert paths.package_data().is_dir()


def test_missing_dir_and_file_errors(tmp_path, monkeypatch):
    missing = tmp_path / "nope"
    with pytest.raises(PerfcastError) as exc:
        load_gpumemnet(data_dir=missing)
    msg = str(exc.value)
    assert str(missing) in msg and ENV_VAR in msg and "\n" not in msg
    monkeypatch.setenv(ENV_VAR, str(missing))
    with pytest.raises(PerfcastError, match=ENV_VAR):
        load_all()
    with pytest.raises(PerfcastError) as exc:
        load_torchvision_benchmark(data_dir=tmp_path)  # the directory exists, the file does not
    assert TV in str(exc.value) and ENV_VAR in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(PerfcastError, match="timm-benchmarks"):
        load_timm_benchmarks(data_dir=tmp_path)


@needs_data
def test_which_selects_timm_files():
    df = load_timm_benchmarks(TRAIN)
    assert set(df["source"]) == {TRAIN}
    df = load_timm_benchmarks("*cpu*")
    assert set(df["device"]) == {"i9-10940x", "i7-12700h"} and df["compiled"].all()
    with pytest.raises(PerfcastError, match="no timm benchmark file matches"):
        load_timm_benchmarks("benchmark-nothing")
