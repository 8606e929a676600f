"""Cost and carbon estimates (perfcast.decisions.cost): arithmetic, tables, lookups, errors."""

import json
import math

import pytest

from perfcast.api import DEFAULT_BATCH, Prediction
from perfcast.decisions import tables
from perfcast.decisions.cost import CostEstimate, estimate_cost
from perfcast.decisions.prices import choose_price
from perfcast.decisions.tables import carbon_intensity, load_carbon
from perfcast.devices import get_device
from perfcast.errors import PerfcastError


@pytest.fixture(autouse=True)
def _shipped_tables(monkeypatch):
    monkeypatch.delenv("PERFCAST_PRICES", raising=False)
    monkeypatch.delenv("PERFCAST_CARBON", raising=False)


def test_trappm_worked_example():
    """TraPPM §VI-D: 350 ms × 2×10⁵ iterations ≈ 19.44 h; × 2.934 USD/h ≈ 57.04 USD."""
    e = estimate_cost(device="a100-40gb", time_ms=350, iterations=200_000, price_per_hour=2.934)
    assert e.hours == pytest.approx(19.4444, abs=1e-4)
    # exact: 19.444… × 2.934 = 57.05; the paper rounded the hours first (19.44 × 2.934 = 57.04)
    assert e.usd == pytest.approx(57.05, abs=0.01)
    assert e.usd == pytest.approx(57.04, abs=0.03)
    assert e.sources["time"] == "given" and e.sources["price"] == "given"
    assert e.iterations == 200_000 and e.gpus == 1 and e.batch_size == DEFAULT_BATCH["train"]


def test_epochs_times_dataset_size():
    e = estimate_cost(device="a100-40gb", time_ms=100, epochs=3, dataset_size=1000, batch_size=64,
                      price_per_hour=1.0)
    assert e.iterations == 3 * 16  # ⌈1000 / 64⌉ = 16
    assert e.hours == pytest.approx(48 * 0.1 / 3600)
    assert e.usd == pytest.approx(e.hours * 1.0)
    assert any("epochs" in n for n in e.notes)
    inf = estimate_cost(device="a100-40gb", time_ms=5, epochs=1, dataset_size=10, mode="infer")
    assert inf.batch_size == DEFAULT_BATCH["infer"] and inf.iterations == 10


@pytest.mark.parametrize("kwargs, match", [
    (dict(time_ms=1), "--iterations, or --epochs and --dataset-size"),
    (dict(time_ms=1, epochs=2), "--iterations, or --epochs and --dataset-size"),
    (dict(time_ms=1, iterations=10, epochs=1, dataset_size=5), "not both"),
    (dict(time_ms=1, iterations=0), "--iterations must be ≥ 1"),
    (dict(time_ms=1, iterations=2.5), "--iterations must be an integer"),
    (dict(time_ms=1, epochs=1, dataset_size=-3), "--dataset-size must be ≥ 1"),
    (dict(time_ms=1, iterations=1, batch_size=0), "batch size must be a positive integer"),
    (dict(time_ms=-1, iterations=1), "--time-ms must be positive"),
    (dict(time_ms=1, iterations=1, pue=0.5), "--pue must be ≥ 1"),
    (dict(time_ms=1, iterations=1, price_per_hour=-2), "--price-per-hour must be ≥ 0"),
    (dict(time_ms=1, iterations=1, mode="serve"), "unknown mode"),
    (dict(iterations=1), "give a model"),
])
def test_bad_input_is_one_line_perfcast_error(kwargs, match):
    with pytest.raises(PerfcastError, match=match) as info:
        estimate_cost(device="a100-40gb", **kwargs)
    assert "\n" not in str(info.value)


def test_unknown_device_is_perfcast_error():
    with pytest.raises(PerfcastError, match="unknown device"):
        estimate_cost(device="a100-41gb", time_ms=1, iterations=1)


def test_table_price_and_provider_in_estimate(tmp_path, monkeypatch):
    """The estimate takes the price table's choice (perfcast.decisions.prices, tested in
    tests/test_prices.py) with its provider, source and date."""
    prices = tmp_path / "prices.csv"
    prices.write_text("provider,instance_type,region,gpu_model,gpus_per_instance,"
                      "usd_per_hour_instance,usd_per_gpu_hour,pricing,as_of,source\n"
                      "azure,NC6s_v3,eastus,v100-16gb,1,3.06,3.06,on-demand,2026-01-02,"
                      "https://a.example\n"
                      "gcp,n1 v100,us-central1,v100-16gb,4,9.92,2.48,on-demand,,https://g.example"
                      "/blob/0123456789abcdef/x.csv\n")
    monkeypatch.setenv("PERFCAST_PRICES", str(prices))
    e = estimate_cost(device="v100-16gb", time_ms=1000, iterations=3600, provider="azure")
    assert e.hours == pytest.approx(1.0)
    assert e.usd_per_gpu_hour == 3.06 and e.usd == pytest.approx(3.06)
    assert e.provider == "azure" and "NC6s_v3" in e.sources["price"]
    assert (e.price_source, e.price_as_of) == ("https://a.example", "2026-01-02")
    cheapest = estimate_cost(device="v100-16gb", time_ms=1000, iterations=3600)
    assert cheapest.provider == "gcp" and cheapest.usd == pytest.approx(2.48)
    assert cheapest.price_as_of == "undated catalog snapshot (commit 0123456)"
    assert any("the lowest of 2 providers" in n for n in cheapest.notes)
    assert cheapest.to_dict() == json.loads(json.dumps(cheapest.to_dict()))
    with pytest.raises(PerfcastError, match=r"unknown provider 'oracle'.*known providers: "
                                            r"azure, gcp"):
        estimate_cost(device="v100-16gb", time_ms=1, iterations=1, provider="oracle")


def test_no_price_gives_null_usd_and_a_note():
    e = estimate_cost(device="p4", time_ms=10, iterations=100)
    assert e.usd is None and e.usd_per_gpu_hour is None
    assert [n for n in e.notes if n.startswith("price")] == choose_price("p4").notes
    assert any("--price-per-hour" in n for n in e.notes)
    assert "price" not in e.sources


def test_carbon_by_country_and_cloud_region():
    g, src = carbon_intensity("FRA")
    assert g == pytest.approx(56.039) and "France" in src
    assert carbon_intensity("france")[0] == g == carbon_intensity("fra")[0]
    assert carbon_intensity("United States")[0] == carbon_intensity("USA")[0]
    g, src = carbon_intensity("gcp:europe-west1")
    assert g == 122 and "cloud.google.com" in src
    assert carbon_intensity("europe-west1")[0] == 122  # bare region name
    assert carbon_intensity("GCP:us-west1")[0] == 94
    assert carbon_intensity("gcp:me-central1")[0] == 575  # fixed spelling of codecarbon's row
    g, src = carbon_intensity("world")
    assert g == 475 and "iea.org" in src


def test_unknown_region_suggests_close_matches():
    with pytest.raises(PerfcastError, match=r"unknown region 'Frnace'; did you mean France\?"):
        carbon_intensity("Frnace")
    with pytest.raises(PerfcastError, match=r"did you mean gcp:europe-west1"):
        carbon_intensity("europe-wst1")
    for name in ("us-east-1", "aws:us-east-1", "azure:westeurope"):
        with pytest.raises(PerfcastError, match="no per-region carbon intensity.*country"):
            carbon_intensity(name)
    with pytest.raises(PerfcastError, match="unknown region"):
        estimate_cost(device="a100-40gb", time_ms=1, iterations=1, region="Atlantis")


def test_carbon_and_tdp_power_estimate():
    e = estimate_cost(device="a100-40gb", time_ms=1000, iterations=3600, region="DEU", pue=1.2)
    dev = get_device("a100-40gb")
    assert e.power_w == dev.tdp_w == 400
    assert e.energy_kwh == pytest.approx(0.4 * 1.2)
    g, _ = carbon_intensity("DEU")
    assert e.region == "DEU" and e.carbon_g_per_kwh == g
    assert e.kg_co2e == pytest.approx(0.48 * g / 1000)
    assert "ESTIMATE" in e.sources["energy"]
    assert any("ESTIMATE" in n and "TDP" in n and "upper bound" in n for n in e.notes)


def test_default_region_is_world_average():
    e = estimate_cost(device="a100-40gb", time_ms=1000, iterations=3600)
    assert e.region == "world" and e.carbon_g_per_kwh == 475
    assert e.kg_co2e == pytest.approx(0.4 * 475 / 1000)
    assert any("world average" in n and "--region" in n for n in e.notes)


def test_given_power_and_missing_power():
    e = estimate_cost(device="a100-40gb", time_ms=1000, iterations=3600, power_w=250,
                      region="gcp:europe-west1")
    assert e.energy_kwh == pytest.approx(0.25) and e.sources["energy"] == "given power_w"
    assert e.kg_co2e == pytest.approx(0.25 * 122 / 1000)
    assert not any("ESTIMATE" in n for n in e.notes)
    cpu = estimate_cost(device="cpu", time_ms=10, iterations=10)
    assert cpu.energy_kwh is None and cpu.kg_co2e is None
    assert any("--power-w" in n for n in cpu.notes)


def test_user_carbon_table_via_env(tmp_path, monkeypatch):
    carbon = tmp_path / "carbon.json"
    carbon.write_text(json.dumps({"countries": [
        {"iso3": "ISL", "name": "Iceland", "g_per_kwh": 28, "year": 2023, "source": "mine"}],
        "regions": [{"provider": "mycloud", "region": "north-1", "g_per_kwh": 10,
                     "source": "mine"}]}))
    monkeypatch.setenv("PERFCAST_CARBON", str(carbon))
    assert carbon_intensity("iceland") == (28, "Iceland (ISL) grid, 2023: mine")
    assert carbon_intensity("mycloud:north-1")[0] == 10
    assert load_carbon()["world"] is None
    e = estimate_cost(device="h100-sxm", time_ms=1000, iterations=3600, price_per_hour=2.5)
    assert e.usd == pytest.approx(2.5)
    assert e.kg_co2e is None and any("pass --region" in n for n in e.notes)
    e = estimate_cost(device="h100-sxm", time_ms=1000, iterations=3600, region="ISL")
    assert e.kg_co2e == pytest.approx(0.7 * 28 / 1000)


def test_to_dict_is_json_serialisable():
    e = estimate_cost(device="a100-40gb", time_ms=350, iterations=200_000, region="gcp:us-west1",
                      price_per_hour=2.934)
    assert isinstance(e, CostEstimate)
    d = json.loads(json.dumps(e.to_dict()))
    assert d["usd"] == pytest.approx(57.0, abs=0.1) and d["region"] == "gcp:us-west1"
    assert set(d["sources"]) == {"time", "price", "energy", "carbon"}
    assert all(math.isfinite(d[k]) for k in ("hours", "usd", "energy_kwh", "kg_co2e"))


def test_predicted_energy_is_used(monkeypatch):
    import perfcast.request.single

    def fake_predict(w, dev, **opts):
        return Prediction(model=w.spec, device=dev.key, mode=w.mode, precision="fp32",
                          batch_size=w.batch_size, time_ms=200.0, energy_j=40.0,
                          power_w=200.0, predictor={"time_ms": "xgboost", "energy_j": "mlp"},
                          notes=["from the fake"])

    monkeypatch.setattr(perfcast.request.single, "predict_workload", fake_predict)
    e = estimate_cost("timm:whatever", device="a100-40gb", iterations=18_000, region="FRA")
    assert e.hours == pytest.approx(1.0) and e.sources["time"] == "predicted (xgboost)"
    assert e.energy_kwh == pytest.approx(40 * 18_000 / 3.6e6)
    assert e.power_w == 200 and e.sources["energy"] == "predicted (mlp)"
    assert "from the fake" in e.notes and not any("ESTIMATE" in n for n in e.notes)


def test_end_to_end_through_predict():
    """No time_ms: the step time comes from perfcast.predict (crossdevice for the H100)."""
    e = estimate_cost("timm:resnet10t", device="h100-sxm", input_size=(3, 64, 64), batch_size=8,
                      iterations=1000, price_per_hour=3.0, region="gcp:europe-west1")
    assert e.model == "timm:resnet10t" and e.device == "h100-sxm" and e.mode == "train"
    assert e.precision == "fp32" and e.batch_size == 8
    assert e.time_ms_per_iteration > 0 and e.sources["time"] == "predicted (crossdevice)"
    assert e.hours == pytest.approx(e.time_ms_per_iteration * 1000 / 3.6e6)
    assert e.usd == pytest.approx(e.hours * 3.0)
    # the energy is predicted (perfcast.energy's power model, issue #15), not TDP × time
    assert "power-model" in e.sources["energy"] and 70 <= e.power_w < 700
    assert e.energy_kwh == pytest.approx(e.power_w * e.hours / 1000)
    assert e.kg_co2e == pytest.approx(e.energy_kwh * 122 / 1000)
    assert any("crossdevice" in n for n in e.notes)  # the prediction's notes are carried over
    json.dumps(e.to_dict())


def test_shipped_carbon_table_is_documented():
    c = json.loads(tables.CARBON_FILE.read_text())
    assert {"source", "generated_by", "license", "as_of", "countries", "regions"} <= set(c)
    assert "MIT" in c["license"] and "codecarbon==3.3.2" in c["generated_by"]
    assert len(c["countries"]) > 200 and all(r["source"] for r in c["regions"])
