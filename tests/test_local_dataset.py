"""The project's own CPU dataset (datasets/cpu/, part of the checkout; tests/conftest.py sets
PERFCAST_DATASETS to it) loads through perfcast.datasets."""

import pytest

from perfcast.datasets import load_local_cpu, load_measurements, local_cpu_db
from perfcast.errors import PerfcastError


def test_local_cpu_db_is_the_checkouts_dataset():
    assert local_cpu_db().is_file()


def test_missing_local_dataset_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFCAST_DATASETS", str(tmp_path))
    assert local_cpu_db() == tmp_path / "cpu" / "measurements.db"
    with pytest.raises(PerfcastError) as exc:
        load_local_cpu()
    msg = str(exc.value)
    assert "PERFCAST_DATASETS" in msg and str(local_cpu_db()) in msg and "\n" not in msg


def test_local_cpu_dataset_size_and_coverage():
    df = load_local_cpu()
    rep = df.attrs["report"]
    assert rep.rows_out == len(df) >= 600
    assert rep.rows_out + rep.n_dropped == rep.rows_in
    assert df.family.nunique() >= 10
    assert set(df["mode"]) == {"infer", "train"}
    assert df.batch_size.nunique() >= 3 and df.input_size.nunique() >= 3
    assert (df.device == "cpu").all()
    assert (df.time_ms > 0).all() and (df.memory_mb > 0).all()
    # one row per configuration
    keys = ["model", "batch_size", "input_size", "seq_len", "mode", "precision", "threads"]
    assert not df.duplicated(keys).any()
    # wave 2 (issue #21): everyday models at their default input, up to batch 32
    everyday = df[df["input_size"].isna()]
    assert len(everyday) >= 200 and everyday["batch_size"].max() >= 16
    assert everyday["seq_len"].notna().any() and set(everyday["mode"]) == {"infer", "train"}


def test_repeats_are_kept_apart():
    first = load_local_cpu()
    both = load_local_cpu(include_repeats=True)
    assert len(both) >= len(first)
    assert (first["repeat"] == 0).all()


def test_load_measurements_from_export(tmp_path):
    from perfcast.store import Measurement, MeasureConfig, MeasurementStore

    store = MeasurementStore(tmp_path / "m.db")
    store.add(Measurement(config=MeasureConfig.of("timm:resnet18", batch_size=2,
                                               input_size="3,64,64"), time_ms_median=5.0,
                          peak_tensor_mb=40.0))
    store.add(Measurement(config=MeasureConfig.of("timm:resnet18", batch_size=512,
                                               input_size="3,64,64"), status="oom",
                          reason="out of memory"))
    store.export(tmp_path / "m.parquet")
    for src in (tmp_path / "m.db", tmp_path / "m.parquet"):
        df = load_measurements(src)
        rep = df.attrs["report"]
        assert len(df) == 1 and rep.rows_in == 2 and rep.n_dropped == 1
        assert df.time_ms[0] == 5.0 and df.memory_mb[0] == 40.0 and df.family[0] == "resnet"
