"""Issue #15: power and energy — the power model's physical bounds and monotonicity in the
power limit, the power-limit decision on a toy table, the CLI acceptance (predict --power-limit,
power-limit), the Zeus workloads and loader, the one energy code path, and the power fields
collect records (with a mocked NVML: no GPU on this project's machines)."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest

from perfcast import energy as E
from perfcast.faces.cli import main
from perfcast.devices import get_device
from perfcast.errors import PerfcastError
from perfcast.shipped import artefact_path, load_shipped


def _model(**kw) -> E.PowerModel:
    n = len(E.FEATURES)
    base = dict(families={}, pooled=[0.5, 0.4, 0.4, 0.0], u0=0.1,
                step_coef=[0.0, 2.2] + [0.0] * (n - 1), step_mean=[0.0] * n,
                step_scale=[1.0] * n, step_families={},
                k=6.0, c=0.95, gamma=1.2, beta=2.0, trained_on={})
    base.update(kw)
    return E.PowerModel(**base)


# --------------------------------------------------------------------------- bounds, physics
@pytest.mark.parametrize("key", ["a40", "v100-32gb-pcie", "quadro-rtx-6000", "h100-sxm"])
def test_power_within_idle_and_min_of_limit_and_tdp(key):
    dev = get_device(key)
    m = load_shipped("power-model")
    r = E.limit_range(dev)
    idle, tdp, _ = E.power_bounds(dev)
    rng = np.random.default_rng(0)
    for _ in range(200):
        feats = [rng.uniform(-4, 0.6), rng.uniform(-4, 0.6), rng.uniform(-4, 0.6),
                 rng.uniform(-3, 3), rng.uniform(0, 10), float(rng.integers(0, 2))]
        lim = rng.uniform(r.low, r.high)
        p, slow, p0 = m.step(feats, dev, lim)
        assert idle <= p0 <= tdp
        assert idle - 1e-9 <= p <= min(lim, tdp) + 1e-9 and p <= p0 + 1e-9
        assert slow >= 1.0


def test_monotone_in_the_limit():
    """A higher limit never gives less power or more time; the default limit changes
    nothing."""
    dev = get_device("a40")
    m = load_shipped("power-model")
    feats = [-0.2, -0.3, -2.0, 0.0, 6.0, 0.0]  # a busy step: log10 utilisations 0.6, 0.5
    p0 = m.unconstrained_power(feats, dev)
    rows = E.sweep(m, feats, dev, 0.2, eta=0.5, limits=list(np.arange(100, 301, 5.0)))
    powers = [r["power_w"] for r in rows]
    times = [r["time_s"] for r in rows]
    assert all(b >= a - 1e-9 for a, b in zip(powers, powers[1:]))
    assert all(b <= a + 1e-12 for a, b in zip(times, times[1:]))
    assert rows[-1]["power_w"] == pytest.approx(p0) and rows[-1]["slowdown"] == 1.0
    assert times[0] > times[-1] * 1.2  # at 100 W a 300 W card running flat out slows down


def test_limit_range_and_errors():
    assert E.limit_range(get_device("a40")) == E.LimitRange(100.0, 300.0, 300.0,
                                                            E.limit_range(get_device("a40")).source)
    r = E.limit_range(get_device("a100-40gb"))  # no range on file: assumed, said so
    assert r.high == 400.0 and 100 <= r.low < 400 and "assumed" in r.source
    with pytest.raises(PerfcastError, match="outside a40's range 100-300 W"):
        E.check_power_limit(get_device("a40"), 50)
    with pytest.raises(PerfcastError, match="CPU"):
        E.check_power_limit(get_device("cpu"), 100)
    assert E.check_power_limit(get_device("a40"), None) == 300.0


def test_registry_rows_for_the_zeus_gpus():
    q = get_device("quadro-rtx-6000")
    assert (q.tdp_w, q.power_limit_min_w, q.power_limit_max_w, q.sm_count) == (260, 100, 260, 72)
    assert "Zeus" in q.source and "datasheet" in q.source
    with pytest.raises(PerfcastError, match="power_limit_min_w"):
        from perfcast.devices.registry import Device

        Device(key="x", name="x", kind="gpu", peak_fp32_tflops=1, memory_gb=1,
               bandwidth_gbs=1, sm_count=1, tdp_w=100, power_limit_min_w=200,
               power_limit_max_w=150)


def test_model_file_is_json_and_round_trips(tmp_path):
    m = load_shipped("power-model")
    assert artefact_path("power-model").suffix == ".json"
    m2 = E.PowerModel.load(m.save(tmp_path))
    assert m2.to_dict() == m.to_dict()
    assert m.trained_on["command"] == "perfcast train --recipe power --out perfcast/shipped"
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(PerfcastError, match="not a perfcast power model"):
        E.PowerModel.load(tmp_path / "bad.json")


# --------------------------------------------------------------------------- the decision
def test_decision_on_a_toy_table():
    """η = 1 (energy only) picks the limit of least energy, η = 0 (time only) the highest;
    the cost is Zeus's."""
    dev = get_device("a40")
    m = _model()
    feats = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # activity σ(2.2) = 0.9: ≈ 280 W at 300 W
    rows = E.sweep(m, feats, dev, 1.0, eta=1.0)
    assert [r["limit_w"] for r in rows] == E.candidate_limits(dev) == \
        [100.0, 125.0, 150.0, 175.0, 200.0, 225.0, 250.0, 275.0, 300.0]
    energy_only = min(rows, key=lambda r: r["cost"])
    assert energy_only["energy_j"] == min(r["energy_j"] for r in rows)
    time_only = min(E.sweep(m, feats, dev, 1.0, eta=0.0), key=lambda r: r["cost"])
    assert time_only["limit_w"] == 300.0
    assert E.zeus_cost(10.0, 2.0, 0.5, 300.0) == 0.5 * 10 + 0.5 * 300 * 2
    with pytest.raises(PerfcastError, match="eta"):
        E.sweep(m, feats, dev, 1.0, eta=1.5)


# --------------------------------------------------------------------------- CLI acceptance
def _predict(capsys, *extra):
    assert main(["predict", "timm:resnet18", "--device", "a40", "--mode", "train",
                 "--batch-size", "64", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_predict_fills_energy_and_the_limit_changes_it(capsys):
    d = _predict(capsys)
    assert d["energy_j"] > 0 and 30 <= d["power_w"] <= 300 and d["power_limit_w"] == 300
    assert d["energy_j"] == pytest.approx(d["power_w"] * d["time_ms"] / 1e3)
    assert d["predictor"]["energy_j"] == "power-model × time_ms"
    assert any(n.startswith("energy_j: power") for n in d["notes"])
    low = _predict(capsys, "--power-limit", "150")
    assert low["power_limit_w"] == 150 and low["power_w"] <= 150
    assert low["power_w"] < d["power_w"] and low["time_ms"] > d["time_ms"]
    assert low["energy_j"] != d["energy_j"]


def test_predict_limit_outside_range_is_one_line_exit_2(capsys):
    assert main(["predict", "timm:resnet18", "--device", "a40", "--power-limit", "50"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "100-300 W" in err


def test_cpu_energy_stays_null_and_says_so(capsys):
    assert main(["predict", "timm:resnet18", "--device", "cpu", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["energy_j"] is None and d["power_w"] is None
    assert any("no power model for CPUs" in n for n in d["notes"])


def test_power_limit_command(capsys, tmp_path):
    png = tmp_path / "pl.png"
    assert main(["power-limit", "timm:resnet18", "--device", "v100-32gb-pcie", "--mode",
                 "train", "--batch-size", "64", "--json", "--png", str(png)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["limit_w"] for r in d["table"]][0] == 100 and d["table"][-1]["limit_w"] == 250
    assert d["limit_w"] in [r["limit_w"] for r in d["table"]]
    assert d["cost"] == min(r["cost"] for r in d["table"])
    assert png.stat().st_size > 1000
    assert main(["power-limit", "timm:resnet18", "--device", "v100-32gb-pcie", "-b", "64"]) == 0
    text = capsys.readouterr().out
    assert "power limit:" in text and "chosen" in text
    assert main(["power-limit", "timm:resnet18", "--device", "cpu"]) == 2
    assert main(["power-limit", "timm:resnet18", "--device", "a40", "--eta", "2"]) == 2


def test_python_api():
    import perfcast

    c = perfcast.choose_power_limit("timm:resnet18", device="a40", batch_size=32, eta=0.5)
    assert c.table and c.limit_w in [r["limit_w"] for r in c.table]
    p = perfcast.predict("timm:resnet18", device="a40", mode="train", batch_size=32,
                         power_limit_w=200)
    assert p.power_limit_w == 200 and p.power_w <= 200


def test_rank_and_cost_say_which_energy(capsys):
    assert main(["rank", "timm:resnet18", "--devices", "a40,cpu", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    src = {r["device"]: r["energy_source"] for r in d["devices"]}
    assert src["a40"] == "power-model"
    assert main(["cost", "timm:resnet18", "--device", "a40", "--iterations", "10", "--json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert "power-model" in c["sources"]["energy"]


def test_one_energy_code_path():
    """The LLM generation path bounds and multiplies with perfcast.energy's functions."""
    import perfcast.llm.energy as L

    assert L.bounded_power is E.bounded_power and L.energy_j is E.energy_j
    assert L.power_bounds is E.power_bounds


# --------------------------------------------------------------------------- Zeus data
@pytest.mark.slow
def test_zeus_workloads_build_and_count_lstm_flops():
    from perfcast.cache import get_graph
    from perfcast.features.records import GraphSummary, learning_workload
    from perfcast.workload import Workload
    from perfcast.zoo.zeus import ZEUS_WORKLOADS

    assert len(ZEUS_WORKLOADS) == 6
    ds = next(z for z in ZEUS_WORKLOADS if z.network == "deepspeech2")
    w = Workload.of(ds.spec, batch_size=2, input_size=(1, 161, 200), mode="train")
    s = GraphSummary.of(get_graph(learning_workload(w)))
    # 5 bidirectional LSTM layers (4 gates × 1024) over 100 frames after the stride-2 conv
    lstm = 100 * 2 * 4 * 1024 * ((1312 + 1024) + 4 * (1024 + 1024)) * 2
    assert s.flops / s.batch > lstm


@pytest.mark.shared_data("zeus-power/summary_power_a40.csv")
def test_zeus_loader():
    from perfcast.datasets.zeus import load_zeus

    df = load_zeus()
    assert len(df) == 1609 and set(df["device"]) == {"a40", "p100-16gb-pcie",
                                                     "quadro-rtx-6000", "v100-32gb-pcie"}
    assert df["workload"].nunique() == 6
    r = df.iloc[0]
    assert r["time_ms"] == pytest.approx(r["time_per_epoch_s"] / r["steps_per_epoch"] * 1e3)


# --------------------------------------------------------------------------- collect (mocked NVML)
def test_collect_records_power_limit_and_idle_with_mocked_nvml(monkeypatch):
    """``_Nvml.power_info`` through a mocked ``pynvml`` (the real API's names and units:
    milliwatts), and the fields kept in the stored row's env."""
    readings = iter([61_000, 59_000, 60_000, 62_000, 58_000])
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: "h",
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 250_000,
        nvmlDeviceGetPowerManagementDefaultLimit=lambda h: 300_000,
        nvmlDeviceGetPowerManagementLimitConstraints=lambda h: (100_000, 300_000),
        nvmlDeviceGetPowerUsage=lambda h: next(readings),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    from perfcast.profiler.measure import _Nvml

    info = _Nvml(0).power_info(interval_s=0.0)
    assert info == {"power_limit_w": 250.0, "default_power_limit_w": 300.0,
                    "power_limit_min_w": 100.0, "power_limit_max_w": 300.0, "idle_w": 60.0}
    # a driver without the call: None, not an error
    del fake.nvmlDeviceGetPowerManagementDefaultLimit
    readings = iter([50_000] * 5)
    fake.nvmlDeviceGetPowerUsage = lambda h: next(readings)
    assert _Nvml(0).power_info(interval_s=0.0)["default_power_limit_w"] is None


def test_collect_row_keeps_gpu_power(tmp_path):
    from perfcast.store.db import MeasureConfig, Measurement, MeasurementStore
    from perfcast.workload import Workload

    cfg = MeasureConfig(workload=Workload.of("timm:resnet18", batch_size=2), device="a40")
    m = Measurement(config=cfg, time_ms_median=1.0)
    m.env = {"gpu_power": {"power_limit_w": 250.0, "idle_w": 60.0}}
    MeasurementStore(str(tmp_path / "m.db")).add(m)
    import sqlite3

    with sqlite3.connect(tmp_path / "m.db") as conn:
        env = conn.execute("select env_json from measurements").fetchone()[0]
    assert json.loads(env)["gpu_power"] == {"power_limit_w": 250.0, "idle_w": 60.0}


# --------------------------------------------------------------------------- intervals (#16)
def test_predict_energy_interval_is_the_shipped_end_to_end_calibration(capsys):
    """energy_j on a GPU gets a conformal interval from the power model's leave-one-GPU-out
    end-to-end residuals (benchmarks/energy_report.py --end-to-end → uncertainty_report.py):
    low ≤ energy ≤ high at the stated coverage, exactly the stored quantiles (the high one capped
    by the power ceiling over the time interval), narrower at 80 %."""
    import math

    from perfcast import uncertainty as U

    cal = U.find_calibration("power-model", "energy_j")
    assert cal is not None and cal.n >= 100
    assert "leave-one-GPU-out" in cal.meta["calibrated_on"]
    d = _predict(capsys)
    assert d["predictor"]["energy_j"] == "power-model × time_ms"
    assert d["energy_j_low"] <= d["energy_j"] <= d["energy_j_high"]
    assert 0 < d["energy_j_low"] < d["energy_j_high"]
    iv = d["intervals"]["energy_j"]
    assert iv["coverage"] == 0.9 and d["coverage"] == 0.9
    assert iv["calibration_records"] == cal.n
    q_lo, q_hi, _ = cal.bounds(None, 0.9)
    # the calibrated bound, capped at what the GPU may draw (min(limit, TDP)) over the upper
    # time bound — the end-to-end epochs include data loading the time interval does not
    top = min(get_device("a40").tdp_w, d["power_limit_w"]) * d["time_ms_high"] / 1e3
    assert d["energy_j_high"] == pytest.approx(
        max(min(d["energy_j"] * math.exp(max(q_hi, 0.0)), top), d["energy_j"]))
    assert d["energy_j_low"] >= d["energy_j"] * math.exp(min(q_lo, 0.0)) * (1 - 1e-9)
    d8 = _predict(capsys, "--coverage", "0.8")
    assert d["energy_j_low"] <= d8["energy_j_low"] <= d8["energy_j"] <= d8["energy_j_high"] \
        <= d["energy_j_high"]


def test_energy_low_bound_is_at_least_idle_power_times_the_time_floor(monkeypatch):
    """A calibration whose residuals would put the low bound near 0 J is raised to the GPU's
    idle power × the request's roofline time floor (a step cannot cost less)."""
    import perfcast
    from perfcast import uncertainty as U

    toy = U.Calibration.build("energy_j", np.full(200, -20.0))
    real = U.find_calibration
    monkeypatch.setattr("perfcast.uncertainty.attach.find_calibration",
                        lambda mid, key: toy if key == "energy_j" else real(mid, key))
    p = perfcast.predict("timm:resnet18", device="a40", mode="train", batch_size=64)
    idle = E.power_bounds(get_device("a40"))[0]
    floor = idle * p.route.request.time_floor() / 1e3
    assert floor > 0
    assert p.energy_j_low == pytest.approx(floor)
    assert p.energy_j_low <= p.energy_j == p.energy_j_high
