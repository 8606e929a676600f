"""MIG advice (DIPPM Table 5), largest batch that fits, device ranking, the decision CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import perfcast
from perfcast.faces.cli import app
from perfcast.decisions.mig import choose_profile, mig_profiles, recommend_mig
from perfcast.errors import PerfcastError

TINY = "timm:resnet10t"
SMALL = {"input_size": "3,64,64"}


@pytest.mark.parametrize("model,batch,measured_mb,profile", [
    ("densenet121", 8, 3272, "1g.5gb"),
    ("densenet121", 32, 6294, "2g.10gb"),
    ("swin_base_patch4", 2, 2944, "1g.5gb"),
    ("swin_base_patch4", 16, 6156, "2g.10gb"),
    ("convnext_base", 4, 1652, "1g.5gb"),
    ("convnext_base", 128, 30996, "7g.40gb"),
])
def test_dippm_table5_measured_memory_as_prediction(model, batch, measured_mb, profile):
    """DIPPM Table 5 (A100-40GB inference): the measured memory, used as the prediction, maps to
    the profile the paper reports — with no margin and with perfcast's default 10 %."""
    for margin in (0.0, 0.1):
        a = recommend_mig(None, device="a100-40gb", memory_mb=measured_mb, margin=margin)
        assert a.profile == profile
        assert a.usable_mb >= measured_mb * (1 + margin)
        assert a.headroom_mb == pytest.approx(a.usable_mb - measured_mb)


def test_mig_tables_and_rules():
    names = [p.name for p in mig_profiles("a100-40gb")]
    assert names[0] == "1g.5gb" and names[-1] == "7g.40gb"
    assert {"1g.5gb+me", "1g.10gb", "4g.20gb"} <= set(names)
    assert [p.name for p in mig_profiles("h100-sxm")][-1] == "7g.80gb"
    assert [p.name for p in mig_profiles("a100-80gb")][0] == "1g.10gb"
    h200 = mig_profiles("h200")
    assert h200[-1].name == "7g.141gb" and all(p.usable_is_estimate for p in h200)
    with pytest.raises(PerfcastError, match="no MIG profiles"):
        mig_profiles("rtx4090")
    # 6 GB: the standard rule answers 2g.10gb; among all profiles 1g.10gb (one compute slice)
    a = recommend_mig(None, device="a100-40gb", memory_mb=6000, margin=0)
    assert a.profile == "2g.10gb" and "1g.10gb" in [x["profile"] for x in a.alternatives]
    assert any("1g.10gb" in n for n in a.notes)
    assert recommend_mig(None, device="a100-40gb", memory_mb=6000, margin=0,
                         all_profiles=True).profile == "1g.10gb"
    # nothing fits
    none = recommend_mig(None, device="a100-40gb", memory_mb=45000)
    assert none.profile is None and none.usable_mb is None and any("no a100" in n for n in none.notes)
    # latency SLO scaled by SMs: 10 ms on the full GPU → ×108/14 on a 1g slice
    profs = mig_profiles("a100-40gb")
    from perfcast.devices import get_device

    chosen, verdicts = choose_profile(1000, profs, margin=0, time_ms=10, latency_slo_ms=30,
                                      device=get_device("a100-40gb"))
    assert chosen.name == "3g.20gb"  # 1g: 77 ms, 2g: 38.6 ms, 3g: 25.7 ms
    assert "latency" in dict((p.name, r) for p, r in verdicts)["2g.10gb"]
    with pytest.raises(PerfcastError, match="margin"):
        recommend_mig(None, device="a100-40gb", memory_mb=100, margin=-1)


def test_mig_end_to_end_prediction():
    a = recommend_mig(TINY, device="a100-40gb", batch_size=4, latency_slo_ms=1e6, **SMALL)
    assert a.profile == "1g.5gb"
    assert a.predictor["memory_mb"] == "simulation"
    p = perfcast.predict(TINY, device="a100-40gb", batch_size=4, **SMALL)
    # planned with the calibrated upper bound by default (--risk safe), the point on request
    assert a.risk == "safe" and a.memory_mb_central == pytest.approx(p.memory_mb)
    assert a.memory_mb == pytest.approx(p.memory_mb_high)
    assert a.required_mb == pytest.approx(p.memory_mb_high * 1.1)
    central = recommend_mig(TINY, device="a100-40gb", batch_size=4, risk="central", **SMALL)
    assert central.memory_mb == pytest.approx(p.memory_mb)
    assert a.slice_time_ms == pytest.approx(p.time_ms * 108 / 14)
    # the simulation on a GPU includes the measured runtime overhead
    from perfcast.memory.overhead import runtime_overhead_mb

    bare = perfcast.predict(TINY, device="a100-40gb", batch_size=4, runtime_overhead_mb=0,
                            **SMALL)
    assert p.memory_mb == pytest.approx(bare.memory_mb + runtime_overhead_mb())


@pytest.mark.slow  # ~6 searches (the fast tier: test_plausibility's fit vs predict)
def test_max_batch_size_consistent_with_predict():
    r = perfcast.max_batch_size(TINY, device="a100-40gb", mode="train", mig_profile="1g.5gb",
                                risk="central", **SMALL)
    assert r.max_batch_size and r.max_batch_size > 1
    cap = r.capacity_mb
    at = perfcast.predict(TINY, device="a100-40gb", mode="train", batch_size=r.max_batch_size,
                          **SMALL)
    nxt = perfcast.predict(TINY, device="a100-40gb", mode="train",
                           batch_size=r.max_batch_size + 1, **SMALL)
    assert at.memory_mb * 1.1 <= cap < nxt.memory_mb * 1.1
    assert r.memory_mb == pytest.approx(at.memory_mb)
    assert r.throughput_samples_per_s == pytest.approx(r.max_batch_size / r.time_ms * 1e3)
    # a bigger margin never allows a bigger batch
    r2 = perfcast.max_batch_size(TINY, device="a100-40gb", mode="train", mig_profile="1g.5gb",
                                 margin=0.5, risk="central", **SMALL)
    assert r2.max_batch_size < r.max_batch_size
    # planning with the calibrated upper memory bound (the default) never allows a bigger batch
    safe = perfcast.max_batch_size(TINY, device="a100-40gb", mode="train",
                                   mig_profile="1g.5gb", **SMALL)
    assert safe.risk == "safe" and safe.max_batch_size <= r.max_batch_size
    if safe.memory_mb_high is not None:
        assert safe.planned_memory_mb >= safe.memory_mb
    with pytest.raises(PerfcastError, match="MIG profile"):
        perfcast.max_batch_size(TINY, device="a100-40gb", mig_profile="9g.99gb", **SMALL)
    small = perfcast.max_batch_size(TINY, device="a100-40gb", mode="train", limit=4, **SMALL)
    assert small.max_batch_size == 4 and any("search limit" in n for n in small.notes)


def test_rank_orders_and_plots(tmp_path):
    r = perfcast.rank(TINY, devices="a100-40gb,h100-sxm,v100-16gb", objective="time",
                      batch_size=8, **SMALL)
    assert [d.rank for d in r.devices] == [1, 2, 3]
    times = [d.time_ms for d in r.devices]
    assert times == sorted(times)
    assert all(d.fits for d in r.devices)
    c = perfcast.rank(TINY, devices=["p4", "a100-40gb"], objective="cost", batch_size=8,
                      **SMALL)
    assert c.devices[1].device == "p4" and c.devices[1].usd is None  # no P4 price: last
    if c.devices[0].usd_per_gpu_hour is not None:  # the public price table is there
        assert c.devices[0].usd is not None and c.devices[0].provider
    png = r.plot(str(tmp_path / "rank.png"))
    assert (tmp_path / "rank.png").stat().st_size > 1000 and png.endswith(".png")
    json.dumps(r.to_dict())
    with pytest.raises(PerfcastError, match="objective"):
        perfcast.rank(TINY, objective="speed")
    with pytest.raises(PerfcastError, match="unknown device"):
        perfcast.rank(TINY, devices="a100-40gb,nope-9000")


def test_decision_cli_json_and_errors(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["mig", "--device", "a100-40gb", "--memory-mb", "6294", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["profile"] == "2g.10gb"
    assert {"profile", "memory_mb", "usable_mb", "headroom_mb", "alternatives"} <= set(d)
    res = runner.invoke(app, ["fit", TINY, "--device", "a100-40gb", "--mig-profile", "1g.5gb",
                              "--input-size", "3,64,64", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["max_batch_size"] > 1
    res = runner.invoke(app, ["cost", "--device", "a100-40gb", "--time-ms", "350",
                              "--iterations", "200000", "--price-per-hour", "2.934", "--json"])
    assert res.exit_code == 0, res.output
    c = json.loads(res.output)
    assert c["hours"] == pytest.approx(19.444, abs=1e-3) and c["usd"] == pytest.approx(57.05, abs=0.01)
    png = tmp_path / "r.png"
    res = runner.invoke(app, ["rank", TINY, "--devices", "a100-40gb,v100-16gb", "--input-size",
                              "3,64,64", "--plot", str(png)])
    assert res.exit_code == 0, res.output and png.exists()
    assert "a100-40gb" in res.output
    # bad input: one line, exit code 2
    from perfcast.faces.cli import main

    assert main(["mig", "--device", "rtx4090", "--memory-mb", "100"]) == 2
    assert main(["fit", TINY, "--device", "a100-40gb", "--margin", "-1"]) == 2
    assert main(["cost", "--device", "a100-40gb", "--time-ms", "10"]) == 2
    assert main(["rank", TINY, "--objective", "speed"]) == 2
    # usage errors (typer's vendored click) are bad input too, not internal errors
    assert main(["predict", TINY]) == 2  # missing --device
    assert main(["fit", TINY, "--device", "a100-40gb", "--bogus"]) == 2
