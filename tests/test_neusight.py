"""NeuSight's whole-model labels and peers' predictions (perfcast.datasets.neusight)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcast.datasets import (
    COLUMNS,
    attach_graph_keys,
    load_all,
    load_gpumemnet,
    load_neusight,
    load_neusight_peers,
    load_timm_benchmarks,
    load_torchvision_benchmark,
    record_workload,
)
from perfcast.datasets import neusight as ns
from perfcast.devices import get_device
from perfcast.errors import PerfcastError
from perfcast.paths import public_data_dir

LABELS = "neusight/labels.csv"
PEERS = "neusight/peer_predictions.csv"
needs_neusight = pytest.mark.shared_data(LABELS, PEERS, "neusight/model_configs/bert_large.json")


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def labels():
    return load_neusight()


@pytest.fixture(scope="module")
def peers():
    return load_neusight_peers()


# --------------------------------------------------------------------------- the labels
@needs_neusight
def test_counts_and_drop_reasons(labels):
    raw = _csv(public_data_dir() / LABELS)
    rep = labels.attrs["report"]
    assert rep.rows_in == len(raw) == 112
    assert rep.rows_out == len(labels) == 103
    assert rep.rows_out + sum(rep.dropped.values()) == rep.rows_in
    variant_drops = {k: v for k, v in rep.dropped.items() if k.startswith("variant")}
    by_variant: dict[str, int] = {}
    for r in raw:
        if r["variant"]:
            by_variant[r["variant"]] = by_variant.get(r["variant"], 0) + 1
    assert sorted(variant_drops.values()) == sorted(by_variant.values())
    assert by_variant == {"fusion": 8}
    assert "fused kernels" in next(iter(variant_drops))
    assert rep.dropped[f"no model config {ns.CONFIG_DIR}/switch4.json"] == 1
    assert list(labels.columns[: len(COLUMNS)]) == list(COLUMNS)
    assert set(labels["device"]) == {"a100-40gb-pcie", "a100-80gb-pcie", "l4", "t4", "p4",
                                     "p100-16gb-pcie", "v100-32gb-pcie", "mi100", "mi210", "mi250"}
    assert set(labels["family"]) == {"bert", "gpt2", "gpt3", "opt", "switch"}


@needs_neusight
def test_record_values(labels):
    root = public_data_dir()
    raw = _csv(root / LABELS)
    for rec in labels.to_dict("records"):
        row = raw[rec["source_row"]]
        assert rec["device"] == ns.DEVICE_KEYS[row["device"]] == get_device(rec["device"]).key
        assert rec["model"] == f"hf:{root / 'neusight' / 'model_configs' / row['model']}.json"
        assert rec["model_config"] == f"neusight/model_configs/{row['model']}.json"
        assert (root / rec["model_config"]).is_file()
        assert rec["raw_model"] == row["model"] and rec["raw_device"] == row["device"]
        assert rec["mode"] == {"inf": "infer", "train": "train"}[row["mode"]]
        assert rec["optimizer"] == ("none" if rec["mode"] == "train" else None)
        assert rec["precision"] == "fp32" and rec["input_size"] is None
        assert (rec["batch_size"], rec["seq_len"]) == (int(row["batch_size"]), int(row["seq_len"]))
        assert rec["time_ms"] == float(row["e2e_latency_ms"])
        assert rec["fw_latency_ms"] == float(row["fw_latency_ms"])
        assert rec["bw_latency_ms"] == float(row["bw_latency_ms"])
        # forward + backward, no optimizer step: e2e is exactly fw + bw
        assert rec["time_ms"] == pytest.approx(rec["fw_latency_ms"] + rec["bw_latency_ms"])
        assert rec["variant"] == "" and rec["num_gpus"] == 1 and rec["source"] == LABELS
    assert labels.loc[labels["raw_model"] == "gpt3_xl", "family"].eq("gpt3").all()
    assert labels.loc[labels["raw_model"] == "switchxl4", "family"].eq("switch").all()


@needs_neusight
def test_records_join_to_workloads(labels):
    train = labels[labels["mode"] == "train"].iloc[0]
    w = record_workload(train)
    assert (w.mode, w.optimizer, w.precision, w.seq_len) == ("train", "none", "fp32",
                                                             int(train["seq_len"]))
    assert w.model.kind == "hf"
    keyed = attach_graph_keys(labels)
    assert keyed["graph_key"].notna().all()


# --------------------------------------------------------------------------- the peers
@needs_neusight
def test_peers_join_row_for_row(labels, peers):
    raw = _csv(public_data_dir() / PEERS)
    rep = peers.attrs["report"]
    assert rep.rows_in == len(raw) == len(peers) == 500 and not rep.dropped
    assert set(peers["predictor"]) == {"neusight", "habitat", "micro", "roofline"}
    assert not peers.duplicated([*ns.CONFIG_KEY, "predictor"]).any()
    # the measured label of each peer row, found independently in labels.csv
    lab = {(r["device"], r["model"], r["mode"], r["seq_len"], r["batch_size"], r["variant"]):
           (i, float(r["e2e_latency_ms"])) for i, r in enumerate(_csv(public_data_dir() / LABELS))}
    for rec in peers.to_dict("records"):
        row = raw[rec["source_row"]]
        assert rec["time_ms"] == float(row["e2e_latency_ms"])
        hit = lab.get((row["device"], row["model"], row["mode"], row["seq_len"],
                       row["batch_size"], row["variant"]))
        if hit is None:
            assert np.isnan(rec["label_time_ms"]) and rec["label_row"] == -1
        else:
            assert (rec["label_row"], rec["label_time_ms"]) == hit
    assert rep.flags["no measured label for the configuration in labels.csv"] == int(
        peers["label_time_ms"].isna().sum())
    # the examples: joined on the configuration, the label is the record's time
    ex = peers[peers["in_examples"]]
    both = ex.merge(labels, on=list(ns.CONFIG_KEY), suffixes=("_peer", ""), validate="many_to_one")
    assert len(both) == len(ex) > 0
    assert (both["label_time_ms"] == both["time_ms"]).all()
    assert set(ex["label_row"]) <= set(labels["source_row"])
    assert not peers.loc[peers["variant"] == "fusion", "in_examples"].any()
    wide = peers.pivot_table(index=list(ns.CONFIG_KEY), columns="predictor", values="time_ms")
    assert len(wide) == peers[list(ns.CONFIG_KEY)].drop_duplicates().shape[0]


# --------------------------------------------------------------------------- load_all
@pytest.mark.shared_data(LABELS, "gpumemnet-timm-train-memory-a100.csv",
                         "pytorch-gpu-benchmark-torchvision.csv")
def test_load_all_adds_neusight_and_leaves_every_task_unchanged():
    from perfcast.evaluation.tasks import TASKS

    new = load_all()
    old = pd.concat([load_timm_benchmarks("all"), load_gpumemnet(), load_torchvision_benchmark()],
                    ignore_index=True)
    dlperf = int((new["source"] == "dlperf/dp_scaling.csv").sum())  # load_dlperf_single_gpu
    assert len(new) == len(old) + len(load_neusight()) + dlperf
    assert LABELS in {r.source for r in new.attrs["report"].files()}
    schema = [c for c in old.columns]
    for name, task in TASKS.items():
        if task.loader != "all" or any("neusight" in src for src in task.sources):
            continue  # tasks built on NeuSight's labels (e.g. "gpu") need them
        a, b = task.frame(df=new), task.frame(df=old)
        assert len(a) == len(b), name
        assert LABELS not in set(a["source"]), name
        pd.testing.assert_frame_equal(a[schema].reset_index(drop=True),
                                      b[schema].reset_index(drop=True), check_dtype=False)


# --------------------------------------------------------------------------- synthetic data
def _tiny_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "neusight" / "model_configs").mkdir(parents=True)
    (root / "neusight" / "model_configs" / "bert_tiny.json").write_text(json.dumps(
        {"model_type": "bert", "num_hidden_layers": 1, "hidden_size": 32,
         "num_attention_heads": 2, "intermediate_size": 64, "vocab_size": 100}))
    head = "device,model,mode,seq_len,batch_size,variant,e2e_latency_ms,fw_latency_ms,bw_latency_ms\n"
    rows = [
        "NVIDIA_L4,bert_tiny,inf,128,2,,1.5,1.5,0.0",          # kept
        "NVIDIA_L4,bert_tiny,train,128,2,,4.0,1.5,2.5",        # kept
        "NVIDIA_L4,bert_tiny,inf,128,2,dp4,1.0,1.0,0.0",       # variant
        "NVIDIA_L4,bert_tiny,inf,128,2,tp4,1.0,1.0,0.0",       # variant
        "Fancy_GPU_9000,bert_tiny,inf,128,2,,1.0,1.0,0.0",     # device
        "NVIDIA_L4,gpt9_huge,inf,128,2,,1.0,1.0,0.0",          # no config
        "NVIDIA_L4,bert_tiny,inf,128,0,,1.0,1.0,0.0",          # batch
        "NVIDIA_L4,bert_tiny,inf,128,4,,,,",                   # no label
        "NVIDIA_L4,bert_tiny,inf,128,2,,1.6,1.6,0.0",          # duplicate
    ]
    (root / "neusight" / "labels.csv").write_text(head + "\n".join(rows) + "\n")
    (root / "neusight" / "peer_predictions.csv").write_text(
        "device,predictor,model,mode,seq_len,batch_size,variant,e2e_latency_ms\n"
        "NVIDIA_L4,neusight,bert_tiny,inf,128,2,,1.4\n"
        "NVIDIA_L4,roofline,bert_tiny,train,128,2,,2.0\n"
        "NVIDIA_L4,neusight,bert_tiny,inf,128,2,dp4,0.9\n"
        "NVIDIA_L4,neusight,bert_tiny,inf,128,8,,5.0\n")
    return root


def test_synthetic_drops_and_specs(tmp_path):
    root = _tiny_dir(tmp_path)
    df = load_neusight(data_dir=root)
    rep = df.attrs["report"]
    assert (rep.rows_in, rep.rows_out) == (9, 2)
    assert rep.rows_out + rep.n_dropped == rep.rows_in
    d = rep.dropped
    assert d["variant 'dp4' (4-GPU data parallel): not a single-device unfused PyTorch run"] == 1
    assert d["variant 'tp4' (4-GPU tensor parallel): not a single-device unfused PyTorch run"] == 1
    assert d["device 'Fancy_GPU_9000' not in perfcast's device registry"] == 1
    assert d["no model config neusight/model_configs/gpt9_huge.json"] == 1
    assert d["missing or invalid batch_size"] == 1
    assert d["missing target value (e2e_latency_ms missing or not > 0)"] == 1
    assert sum(v for k, v in d.items() if k.startswith("duplicate")) == 1
    assert set(df["model"]) == {f"hf:{root}/neusight/model_configs/bert_tiny.json"}
    assert df.set_index("mode")["optimizer"].to_dict() == {"infer": None, "train": "none"}
    peers = load_neusight_peers(data_dir=root)
    assert len(peers) == 4
    got = peers.set_index(["predictor", "mode", "batch_size", "variant"])
    assert got.loc[("neusight", "infer", 2, ""), "label_time_ms"] == 1.5
    assert got.loc[("roofline", "train", 2, ""), "label_time_ms"] == 4.0
    assert got.loc[("neusight", "infer", 2, "dp4"), "label_time_ms"] == 1.0  # joined, not an example
    assert not got.loc[("neusight", "infer", 2, "dp4"), "in_examples"]
    assert np.isnan(got.loc[("neusight", "infer", 8, ""), "label_time_ms"])


def test_missing_files_are_one_line_errors(tmp_path):
    with pytest.raises(PerfcastError) as exc:
        load_neusight(data_dir=tmp_path)
    assert "neusight/labels.csv" in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(PerfcastError, match="peer_predictions.csv"):
        load_neusight_peers(data_dir=tmp_path)


def test_every_mapped_device_is_registered():
    for raw, key in ns.DEVICE_KEYS.items():
        assert get_device(key).key == key, raw
    assert ns.family_of("gpt3_27") == "gpt3" and ns.family_of("switchxl4") == "switch"
    assert ns.family_of("opt_13") == "opt" and ns.family_of("t5_small") is None
