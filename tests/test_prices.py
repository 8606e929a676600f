"""GPU prices (perfcast.decisions.prices): the public price table, validated in one place; which
row prices a device (--provider, the default rule, --price-per-hour, spec-sheet names); no
price → USD empty with one note, never 0; every registry datacenter GPU priced or listed.

Tests on the rules write their own small tables ($PERFCAST_PRICES); tests on the shared table
check properties of whatever it holds, never numbers copied from it."""

from __future__ import annotations

import json

import pytest

from perfcast.faces.cli import main
from perfcast.decisions import prices as P
from perfcast.decisions.cost import estimate_cost
from perfcast.devices import device_keys, device_origin, get_device, list_devices
from perfcast.errors import PerfcastError

SHARED = pytest.mark.shared_data("prices/gpu_prices.csv")
HEADER = ",".join(P.COLUMNS)
#: The issue's acceptance devices (perfcast rank ... --objective cost)
ACCEPTANCE = ("h100-sxm", "l4", "a100-80gb", "t4")


@pytest.fixture(autouse=True)
def _shared_table(monkeypatch):
    """The shared table (no $PERFCAST_PRICES), and no spec-file device left registered."""
    from perfcast.devices import unregister_device

    monkeypatch.delenv(P.PRICES_ENV, raising=False)
    before = set(device_keys())
    yield
    for key in set(device_keys()) - before:
        unregister_device(key)


def _table(tmp_path, monkeypatch, *rows: str, name: str = "prices.csv"):
    """A price CSV of ``rows`` as $PERFCAST_PRICES; returns its path."""
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    monkeypatch.setenv(P.PRICES_ENV, str(path))
    return path


def row(provider="aws", inst="box.1", region="us-east-1", gpu="t4", gpus=1, usd_gpu=1.0,
        as_of="2026-01-01", source="https://example.org/prices", pricing="on-demand") -> str:
    return (f"{provider},{inst},{region},{gpu},{gpus},{usd_gpu * gpus:g},{usd_gpu:g},{pricing},"
            f"{as_of},{source}")


def _builtin_gpus():
    return [d for d in list_devices() if d.is_gpu and device_origin(d.key) == "built-in"]


# --------------------------------------------------------------------------- the shared table
@SHARED
def test_every_row_carries_its_source_and_date():
    t = P.load_price_table()
    assert t.path == str(P.prices_path()) and len(t.rows) > 0
    for r in t.rows:
        assert r.source.startswith("https://"), r
        assert r.provider and r.instance_type and r.region and r.gpu_model
        assert r.gpus_per_instance >= 1 and r.usd_per_gpu_hour > 0
        assert r.usd_per_gpu_hour == pytest.approx(r.usd_per_hour_instance / r.gpus_per_instance,
                                                   rel=1e-3)
        if r.as_of is None:  # an undated catalog snapshot: the README pins its commit in the URL
            assert r.commit and r.as_of_text == f"undated catalog snapshot (commit {r.commit})"
        else:
            assert r.as_of_text == f"as of {r.as_of}"
        assert r.to_dict()["source"] == r.source


@SHARED
def test_every_datacenter_gpu_has_a_price_or_a_stated_reason():
    """Each built-in datacenter GPU (not a desktop / workstation card) is priced by the table,
    or listed in NOT_IN_PRICE_TABLE with its reason — never both: a GPU that gains a row must
    leave the list, a new registry GPU without a row must join it."""
    t = P.load_price_table()
    priced = {g for g in t.gpu_models if t.rows_for(g)}
    gpus = {d.key for d in _builtin_gpus()}
    assert set(P.NOT_IN_PRICE_TABLE) <= gpus, "listed GPUs must be registry GPUs"
    assert all(len(why) > 20 for why in P.NOT_IN_PRICE_TABLE.values())
    for key in sorted(gpus - P.DESKTOP_GPUS):
        listed = key in P.NOT_IN_PRICE_TABLE
        assert (key in priced) != listed, (key, "priced" if listed else "no price, no reason")
        c = P.choose_price(key)
        assert (c.usd_per_gpu_hour is not None) == (key in priced)
        if listed:
            assert c.notes == [f"price: none for {key} ({P.NOT_IN_PRICE_TABLE[key]}); pass "
                               f"--price-per-hour (USD per GPU-hour) for USD"]
    assert set(P.unpriced_gpus(t)) == gpus - priced


@SHARED
def test_every_row_prices_a_registry_gpu_or_is_reported_unmapped(tmp_path):
    """A row's gpu_model is a registry key, or unmapped_gpu_models names it; either way a spec
    file whose name is that gpu_model is priced from it."""
    t = P.load_price_table()
    keys = set(device_keys())
    assert set(P.unmapped_gpu_models(t)) == set(t.gpu_models) - keys
    base = get_device("l4").to_dict()
    for model in t.gpu_models:
        if model in keys:
            assert P.choose_price(model).gpu_model == model
        spec = tmp_path / f"spec-{model}.json"
        spec.write_text(json.dumps({**base, "key": f"spec-{model}", "name": model.upper()}))
        c = P.choose_price(str(spec))
        assert c.gpu_model == model and c.usd_per_gpu_hour is not None
        assert c.notes[0].startswith(f"price: spec-{model} is priced as {model}")


@SHARED
@pytest.mark.parametrize("device", ACCEPTANCE)
def test_acceptance_gpus_are_priced_with_provider_and_date(device):
    c = P.choose_price(device)
    assert c.usd_per_gpu_hour > 0 and c.provider and c.row is not None
    assert c.price_source == c.row.source and c.price_as_of in (c.row.as_of, c.row.as_of_text)
    (note,) = c.notes
    assert f" {c.provider} " in note and c.row.as_of_text in note and "\n" not in note


@SHARED
def test_provider_and_default_rules_on_the_shared_table():
    """--provider P: one of P's rows, of its latest date; no provider: no provider's pick is
    cheaper (whole-instance prices), and the note names every provider compared."""
    t = P.load_price_table()
    for model in t.gpu_models:
        rows = t.rows_for(model)
        if model not in device_keys():
            continue
        picks = {}
        for prov in sorted({r.provider for r in rows}):
            c = P.choose_price(model, prov)
            mine = [r for r in rows if r.provider == prov]
            assert c.provider == prov and c.row in mine
            assert (c.row.as_of or "") == max(r.as_of or "" for r in mine)
            picks[prov] = c
        best = P.choose_price(model)
        whole = [c for c in picks.values() if not c.row.gpu_charge_only] or list(picks.values())
        assert best.usd_per_gpu_hour == min(c.usd_per_gpu_hour for c in whole)
        assert best.row == picks[best.provider].row
        if len(picks) > 1:
            assert "--provider to choose one" in best.notes[-1]


@SHARED
def test_unknown_provider_is_one_line_listing_the_known_ones(capsys):
    known = P.load_price_table().providers
    with pytest.raises(PerfcastError) as info:
        P.choose_price("t4", "oracle")
    assert str(info.value).endswith(f"known providers: {', '.join(known)}")
    assert P.check_provider(known[0].upper()) == known[0]
    rc = main(["cost", "--device", "t4", "--time-ms", "10", "--iterations", "10", "--provider",
               "oracle"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "unknown provider 'oracle'" in err and len(err.splitlines()) == 1


# --------------------------------------------------------------------------- the rules
def test_latest_row_of_an_offer_then_smallest_instance_then_price(tmp_path, monkeypatch):
    _table(tmp_path, monkeypatch,
           row("aws", "big.8", gpu="h100-sxm", gpus=8, usd_gpu=9.0, as_of="2025-01-01"),
           row("aws", "big.8", gpu="h100-sxm", gpus=8, usd_gpu=7.0, as_of="2026-05-01"),
           row("aws", "one.1", gpu="h100-sxm", gpus=1, usd_gpu=6.0, as_of=""),
           row("lab", "x.4", gpu="h100-sxm", gpus=4, usd_gpu=5.0, as_of="2026-02-01"),
           row("lab", "x.2", gpu="h100-sxm", gpus=2, usd_gpu=5.5, as_of="2026-02-01"),
           row("lab", "x.2b", gpu="h100-sxm", gpus=2, usd_gpu=5.2, as_of="2026-02-01"))
    aws = P.choose_price("h100-sxm", "aws")  # the dated row beats the undated snapshot
    assert (aws.usd_per_gpu_hour, aws.row.instance_type, aws.price_as_of) == \
        (7.0, "big.8", "2026-05-01")
    assert "aws's latest-dated of 2 offers" in aws.notes[0]
    lab = P.choose_price("h100-sxm", "LAB")  # same date: the smallest instance, then cheaper
    assert (lab.usd_per_gpu_hour, lab.row.instance_type) == (5.2, "x.2b")
    assert "lab's cheapest of 3 offers" in lab.notes[0]
    best = P.choose_price("h100-sxm")  # no provider: the lowest provider's pick
    assert (best.provider, best.usd_per_gpu_hour) == ("lab", 5.2)
    assert "the lowest of 2 providers' latest prices (aws 7, lab 5.2)" in best.notes[0]


def test_gpu_charge_only_rows_are_not_compared_with_instance_prices(tmp_path, monkeypatch):
    _table(tmp_path, monkeypatch,
           row("gcp", "n1 + 1x t4 (GPU charge only)", gpu="t4", usd_gpu=0.3),
           row("aws", "g.1", gpu="t4", usd_gpu=0.5),
           row("gcp", "n1 + 1x l4 (GPU charge only)", gpu="l4", usd_gpu=0.6))
    t4 = P.choose_price("t4")
    assert t4.provider == "aws" and "gcp 0.3: GPU charge only" in t4.notes[0]
    gcp = P.choose_price("t4", "gcp")
    assert gcp.usd_per_gpu_hour == 0.3 and "the VM (vCPUs, RAM) is billed on top" in \
        gcp.notes[0]
    assert P.choose_price("l4").provider == "gcp"  # the only price there is


def test_price_per_hour_overrides_the_table(tmp_path, monkeypatch):
    _table(tmp_path, monkeypatch, row("aws", gpu="t4", usd_gpu=0.5))
    c = P.choose_price("t4", price_per_hour=1.25)
    assert (c.usd_per_gpu_hour, c.price_source, c.row, c.provider) == (1.25, "given", None, None)
    assert c.notes == ["price: 1.25 USD per GPU-hour for t4, given (--price-per-hour)"]
    e = estimate_cost(device="t4", time_ms=1000, iterations=3600, price_per_hour=1.25,
                      provider="aws")
    assert e.usd == pytest.approx(1.25) and e.price_source == "given"
    assert e.sources["price"] == "given" and e.provider == "aws"
    with pytest.raises(PerfcastError, match="unknown provider"):
        P.choose_price("t4", "nope", price_per_hour=1.0)  # still a wrong provider


def test_no_price_is_none_with_one_note_never_zero(tmp_path, monkeypatch):
    _table(tmp_path, monkeypatch, row("aws", gpu="t4", usd_gpu=0.5))
    for kwargs in ({"device": "l4"}, {"device": "t4", "provider": "aws"}):
        e = estimate_cost(time_ms=1000, iterations=3600, **kwargs)
        if kwargs["device"] == "t4":
            assert e.usd == pytest.approx(0.5) and e.price_as_of == "2026-01-01"
            continue
        assert e.usd is None and e.usd_per_gpu_hour is None and e.usd_low is None
        assert e.price_source is None and e.price_as_of is None and "price" not in e.sources
        assert sum(n.startswith("price") for n in e.notes) == 1
    _table(tmp_path, monkeypatch, row("aws", gpu="t4", usd_gpu=0.5), row("lab", gpu="l4"))
    c = P.choose_price("t4", "lab")
    assert c.usd_per_gpu_hour is None
    assert c.notes == ["price: none for t4 (lab has no on-demand row for it (providers with "
                       "one: aws)); pass --price-per-hour (USD per GPU-hour) for USD"]
    cpu = P.choose_price("cpu")
    assert cpu.usd_per_gpu_hour is None and len(cpu.notes) == 1


def test_missing_shared_table_is_a_note_and_a_named_file_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFCAST_DATA", str(tmp_path / "no-data"))
    c = P.choose_price("t4")
    assert c.usd_per_gpu_hour is None and len(c.notes) == 1 and "no price table" in c.notes[0]
    e = estimate_cost(device="t4", time_ms=10, iterations=10)
    assert e.usd is None
    with pytest.raises(PerfcastError, match="no price table found"):
        P.choose_price("t4", "aws")
    assert P.price_providers() == ()
    monkeypatch.setenv(P.PRICES_ENV, str(tmp_path / "mine.csv"))
    with pytest.raises(PerfcastError, match=r"price table not found: .*mine\.csv"):
        P.choose_price("t4")


@pytest.mark.parametrize("line, match", [
    (row(usd_gpu=0.0), r"usd_per_hour_instance must be a number > 0, got '0'"),
    (row().replace(",1,1,", ",1,cheap,", 1), "usd_per_hour_instance must be a number"),
    (row(gpus=0), "gpus_per_instance must be a positive whole number"),
    (row(gpus=2).replace(",2,2,", ",2,3,", 1), r"is not usd_per_hour_instance 3 / 2 GPUs"),
    (row(as_of="2026-13-01"), "as_of must be a date YYYY-MM-DD"),
    (row(as_of="March 2026"), "as_of must be a date"),
    (row(source=""), "empty source"),
    (row(provider=""), "empty provider"),
    (row() + ",extra", "11 fields, the header has 10"),
])
def test_malformed_rows_are_one_line_errors_naming_file_and_line(tmp_path, monkeypatch, line,
                                                                  match):
    path = _table(tmp_path, monkeypatch, row(gpu="l4"), line)
    with pytest.raises(PerfcastError, match=match) as info:
        P.load_price_table()
    msg = str(info.value)
    assert msg.startswith(f"{path}:3: ") and "\n" not in msg


def test_malformed_files(tmp_path, monkeypatch):
    p = tmp_path / "p.csv"
    for text, match in (("", "empty price table"), ("provider,gpu_model\n", "missing column"),
                        (HEADER + "\n", "no rows"), (b"\xff\xfe".decode("latin-1"), None)):
        p.write_text(text, encoding="latin-1" if match is None else "utf-8")
        with pytest.raises(PerfcastError, match=match or "not UTF-8") as info:
            P.load_price_table(p)
        assert str(p) in str(info.value) and "\n" not in str(info.value)
    monkeypatch.setenv(P.PRICES_ENV, str(p))
    rc = main(["cost", "--device", "t4", "--time-ms", "10", "--iterations", "10"])
    assert rc == 2


def test_spec_sheet_name_matches_a_registry_gpu(tmp_path, monkeypatch):
    _table(tmp_path, monkeypatch, row("aws", gpu="h100-sxm", usd_gpu=4.0))
    h100 = get_device("h100-sxm").to_dict()
    same = tmp_path / "my-h100.json"
    same.write_text(json.dumps({**h100, "key": "my-h100", "name": h100["name"].upper()}))
    c = P.choose_price(str(same))
    assert c.usd_per_gpu_hour == 4.0 and c.gpu_model == "h100-sxm"
    assert c.notes[0] == (f"price: my-h100 is priced as h100-sxm: its spec name "
                          f"'{h100['name'].upper()}' is the registry's h100-sxm")
    e = estimate_cost(device=str(same), time_ms=1000, iterations=3600)
    assert e.usd == pytest.approx(4.0) and any("priced as h100-sxm" in n for n in e.notes)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**h100, "key": "other-gpu", "name": "Some Other GPU"}))
    assert P.choose_price(str(other)).usd_per_gpu_hour is None


# --------------------------------------------------------------------------- the surfaces
def test_cost_json_carries_the_price_fields(tmp_path, monkeypatch, capsys):
    _table(tmp_path, monkeypatch, row("lab", "rack.8", gpu="a100-40gb", gpus=8, usd_gpu=2.0,
                                      as_of="2026-03-04", source="https://lab.example/p"))
    assert main(["cost", "--device", "a100-40gb", "--time-ms", "1000", "--iterations", "7200",
                 "--provider", "lab", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["usd"] == pytest.approx(4.0) and d["usd_per_gpu_hour"] == 2.0
    assert (d["provider"], d["price_source"], d["price_as_of"]) == \
        ("lab", "https://lab.example/p", "2026-03-04")
    assert d["price_row"]["instance_type"] == "rack.8" and d["price_row"]["gpus_per_instance"] == 8
    assert any("lab rack.8 (8 GPUs, us-east-1), as of 2026-03-04" in n for n in d["notes"])


def test_rank_cost_prices_every_gpu_with_provider_and_date(tmp_path, monkeypatch, capsys):
    """The issue's acceptance (perfcast rank … --objective cost), on a small model: USD on
    every row, each price's provider and date in the notes."""
    offers = zip(ACCEPTANCE, ("aws", "gcp", "lab", "aws"), (4.0, 0.8, 2.0, 0.5))
    _table(tmp_path, monkeypatch, row("lab", gpu="p4"),
           *(row(prov, f"{k}.1", gpu=k, usd_gpu=u, as_of=f"2026-0{i + 1}-15")
             for i, (k, prov, u) in enumerate(offers)))
    assert main(["rank", "timm:resnet10t", "--devices", ",".join(ACCEPTANCE), "--objective",
                 "cost", "--mode", "train", "--batch-size", "8", "--input-size", "3,64,64",
                 "--iterations", "1000", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = {r["device"]: r for r in d["devices"]}
    assert set(rows) == set(ACCEPTANCE)
    for r in rows.values():
        hours = r["time_ms"] * 1000 / 3.6e6
        assert r["usd"] == pytest.approx(hours * r["usd_per_gpu_hour"])
        assert r["price_as_of"] and r["provider"] and r["price_source"]
        assert any(f"{r['provider']} " in n and f"as of {r['price_as_of']}" in n
                   for n in d["notes"] if n.startswith("price: ") and r["device"] in n)
    assert not any("--price-per-hour" in n for n in d["notes"])  # rank has no such option
    assert main(["rank", "timm:resnet10t", "--devices", "t4", "--provider", "nope"]) == 2


def test_plan_train_is_priced(tmp_path, monkeypatch, capsys):
    _table(tmp_path, monkeypatch, row("lab", gpu="t4", usd_gpu=0.5, as_of="2026-02-02"))
    assert main(["plan", "timm:resnet10t", "--gpus", "1", "--device", "t4", "--batch-size", "8",
                 "--provider", "lab", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["usd_per_gpu_hour"], d["usd_per_hour"], d["provider"], d["price_as_of"]) == \
        (0.5, 0.5, "lab", "2026-02-02")
    w = d["winner"]
    assert w["usd_per_1m_samples"] == pytest.approx(0.5 / (w["samples_per_s"] * 3600) * 1e6)
    assert main(["plan", "timm:resnet10t", "--gpus", "1", "--device", "t4", "--batch-size", "8",
                 "--price-per-hour", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["usd_per_hour"] == 2.0 and d["price_source"] == "given" and d["provider"] is None
    assert main(["plan", "timm:resnet10t", "--gpus", "1", "--device", "a40", "--batch-size", "8",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["usd_per_hour"] is None and d["winner"]["usd_per_1m_samples"] is None
    assert sum(n.startswith("price") for n in d["notes"]) == 1
