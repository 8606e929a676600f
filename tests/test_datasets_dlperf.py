"""perfcast.datasets.dlperf.load_dlperf_single_gpu: DLPerf's single-GPU PyTorch training rows as
labeled records (checked against the CSV's own columns), and their place in load_all."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcast.datasets import (
    COLUMNS,
    attach_graph_keys,
    default_data_dir,
    load_all,
    load_dlperf_single_gpu,
    record_workload,
)
from perfcast.datasets.dlperf import DLPERF_DEVICE, DLPERF_MODELS, DP_SCALING_FILE

needs_dlperf = pytest.mark.shared_data(DP_SCALING_FILE)

HEAD = ("framework,framework_version,implementation,source_readme,source_line,table_heading,"
        "row_kind,model,model_detail,seq_len,precision,precision_detail,xla,dali,other_settings,"
        "nodes,gpus_per_node,total_gpus,batch_size_per_device,samples_per_s,speedup,n_runs,"
        "aggregation,run_index,notes\n")
NGC = "NGC PyTorch,PyTorch 1.5.0a0+8f84ded (NGC 20.03 container)"
BARE = "PyTorch,PyTorch 1.6.0 (bare metal)"
BERT_IMPL = "DLE BERT (FusedLAMB replaced by FusedAdam)"
ROWS = [
    # kept: ResNet fp32 (NGC, DALI), ResNet AMP, BERT fp32, BERT fp16
    f"{NGC},DLE RN50,r.md,1,t,result,ResNet-50 v1.5,,,fp32,,n/a,yes (dali-cpu),,1,1,1,128,400.0,1,5,m,,",
    f"{NGC},DLE RN50,r.md,2,t,result,ResNet-50 v1.5,,,amp,dynamic loss scale,n/a,yes,,1,1,1,256,800.0,1,5,m,,",
    f"{NGC},{BERT_IMPL},b.md,3,t,result,BERT-Base,,128,fp32,,n/a,n/a,,1,1,1,32,100.0,1,5,m,,",
    f"{NGC},{BERT_IMPL},b.md,4,t,result,BERT-Base,,128,fp16,static loss scale,n/a,n/a,,1,1,1,64,400.0,1,5,m,,",
    # dropped, one reason each
    f"{NGC},DLE RN50,r.md,5,t,single_run,ResNet-50 v1.5,,,fp32,,n/a,yes,,1,1,1,128,401.0,1,1,m,1,",
    "OneFlow,OneFlow 0.2,of,o.md,6,t,result,ResNet-50 v1.5,,,fp32,,n/a,yes,,1,1,1,128,390.0,1,5,m,,",
    f"{NGC},DLE RN50,r.md,7,t,result,ResNet-50 v1.5,,,fp32,,n/a,yes,,1,8,8,128,3000.0,7.5,5,m,,",
    f"{BARE},examples,p.md,8,t,result,ResNet-50 v1.5,,,fp32,,no,no (torch.utils.data.DataLoader),workers=8,1,1,1,128,300.0,1,5,m,,",
    f"{NGC},DLE RN50,r.md,9,t,result,ResNet-101,,,fp32,,n/a,yes,,1,1,1,128,200.0,1,5,m,,",
    f"{NGC},DLE RN50,r.md,10,t,result,ResNet-50 v1.5,,,bf16,,n/a,yes,,1,1,1,128,500.0,1,5,m,,",
    f"{NGC},DLE RN50,r.md,11,t,result,ResNet-50 v1.5,,,fp32,,n/a,yes,x,1,1,1,128,,1,5,m,,",
    f"{NGC},{BERT_IMPL},b.md,12,t,result,BERT-Base,,,fp32,,n/a,n/a,,1,1,1,32,100.0,1,5,m,,",
    # the same configuration as the first row: a duplicate
    f"{NGC},DLE RN50,r.md,13,t,result,ResNet-50 v1.5,,,fp32,,n/a,yes (dali-cpu),,1,1,1,128,410.0,1,5,m,,",
]


def _tiny(tmp_path: Path) -> Path:
    (tmp_path / "dlperf").mkdir()
    (tmp_path / DP_SCALING_FILE).write_text(HEAD + "\n".join(ROWS) + "\n")
    return tmp_path


def test_rows_become_records_and_every_drop_is_counted(tmp_path):
    df = load_dlperf_single_gpu(data_dir=_tiny(tmp_path))
    rep = df.attrs["report"]
    assert (rep.rows_in, rep.rows_out) == (len(ROWS), 4)
    assert rep.rows_out + rep.n_dropped == rep.rows_in
    reasons = " | ".join(rep.dropped)
    for what in ("row_kind 'single_run'", "framework 'OneFlow'", "more than one GPU",
                 "DataLoader", "'ResNet-101'", "'bf16'", "samples_per_s", "seq_len",
                 "duplicate"):
        assert what in reasons, what
    assert all(v == 1 for v in rep.dropped.values()), rep.dropped
    assert list(df.columns[: len(COLUMNS)]) == list(COLUMNS)
    r = df.set_index("source_row")
    # time per step = the batch over the measured throughput
    assert r.loc[0, "time_ms"] == pytest.approx(128 / 400.0 * 1000)
    assert r.loc[3, "time_ms"] == pytest.approx(64 / 400.0 * 1000)
    assert (df["device"] == DLPERF_DEVICE).all() and (df["mode"] == "train").all()
    assert (df["num_gpus"] == 1).all() and (df["global_batch_size"] == df["batch_size"]).all()
    assert list(r["precision"]) == ["fp32", "amp", "fp32", "fp16"]
    assert r.loc[0, "model"] == "torchvision:resnet50" and r.loc[0, "input_size"] == "3,224,224"
    assert pd.isna(r.loc[0, "seq_len"]) and r.loc[2, "seq_len"] == 128
    assert r.loc[2, "model"] == "hf:bert-base-uncased" and r.loc[2, "family"] == "bert"
    # ResNet: the optimizer (and the crop) assumed; BERT: FusedAdam named by the row
    assert r.loc[0, "optimizer"] == "sgd-momentum" and "optimizer" in r.loc[0, "assumed"]
    assert r.loc[2, "optimizer"] == "adam" and pd.isna(r.loc[2, "assumed"])
    assert r.loc[0, "software"] == "torch-1.5.0a0+8f84ded/ngc-20.03"
    assert r.loc[1, "precision_detail"] == "dynamic loss scale"
    assert r.loc[0, "upstream_source"].endswith("r.md:1")
    assert set(df["source"]) == {DP_SCALING_FILE}


def test_records_join_to_workloads(tmp_path):
    df = load_dlperf_single_gpu(data_dir=_tiny(tmp_path))
    keyed = attach_graph_keys(df)
    assert keyed["graph_key"].notna().all()
    w = record_workload(df[df["family"] == "bert"].iloc[0])
    assert (w.seq_len, w.mode, w.optimizer, w.batch_size) == (128, "train", "adam", 32)


@needs_dlperf
def test_shared_file_single_gpu_pytorch_results():
    path = default_data_dir() / DP_SCALING_FILE
    with open(path, newline="", encoding="utf-8") as fh:
        raw = list(csv.DictReader(fh))
    df = load_dlperf_single_gpu()
    rep = df.attrs["report"]
    assert rep.rows_in == len(raw) and rep.rows_out == len(df) > 0
    for rec in df.itertuples():
        row = raw[rec.source_row]
        assert row["row_kind"] == "result" and row["total_gpus"] == "1"
        assert row["framework"] in ("PyTorch", "NGC PyTorch")
        assert "DataLoader" not in row["dali"]
        assert DLPERF_MODELS[row["model"]][0] == rec.model
        assert rec.batch_size == int(row["batch_size_per_device"])
        assert rec.time_ms == pytest.approx(rec.batch_size / float(row["samples_per_s"]) * 1000)
    # every single-GPU PyTorch result of a known model is either kept or dropped for its loader
    eligible = [i for i, r in enumerate(raw) if r["row_kind"] == "result"
                and r["total_gpus"] == "1" and r["framework"] in ("PyTorch", "NGC PyTorch")]
    fed = [i for i in eligible if "DataLoader" in raw[i]["dali"]]
    assert sorted(df["source_row"]) == sorted(set(eligible) - set(fed))
    assert set(df["precision"]) <= {"fp32", "amp", "fp16"} and set(df["device"]) == {"v100-16gb"}


@pytest.mark.slow
@pytest.mark.shared_data(DP_SCALING_FILE, "gpumemnet-timm-train-memory-a100.csv",
                         "pytorch-gpu-benchmark-torchvision.csv")
def test_load_all_adds_them_and_leaves_every_task_unchanged():
    from perfcast.evaluation.tasks import TASKS

    df = load_all()
    mine = df[df["source"] == DP_SCALING_FILE]
    assert len(mine) == len(load_dlperf_single_gpu()) > 0
    assert DP_SCALING_FILE in {r.source for r in df.attrs["report"].files()}
    rest = df[df["source"] != DP_SCALING_FILE].reset_index(drop=True)
    for name, task in TASKS.items():
        if task.loader != "all":
            continue
        # tasks select by source: none takes DLPerf's records (the shipped crossdevice-gpu
        # was trained without them), and the others' selection does not move
        a, b = task.frame(df=df), task.frame(df=rest)
        assert DP_SCALING_FILE not in set(a["source"]), name
        pd.testing.assert_frame_equal(a, b, check_dtype=False)
    assert np.isfinite(mine["time_ms"]).all()
