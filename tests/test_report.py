"""perfcast report: the roofline / operators / phases / memory / decisions page (perfcast.faces.report)."""

from __future__ import annotations

import json
import re

import pytest

from perfcast.faces.cli import main
from perfcast.faces.report import build_report, fmt, prediction_rows, render_html, write_report

MODEL = "timm:resnet18"


@pytest.fixture(scope="module")
def infer_report():
    return build_report(MODEL, device="a100-40gb", batch_size=8)


def test_report_numbers_hang_together(infer_report):
    r = infer_report
    p = r.prediction
    assert r.operator_source == "crossdevice operator model"  # a100-40gb has no labels
    # the operators' predicted times add up to the predicted time, by phase and by class
    assert sum(r.phases_ms.values()) == pytest.approx(p["time_ms"], rel=1e-9)
    assert set(r.phases_ms) == {"forward"}
    assert sum(c["time_ms"] for c in r.operator_classes) == pytest.approx(p["time_ms"], rel=1e-9)
    conv = next(c for c in r.operator_classes if c["operator"] == "conv2d")
    assert conv["intensity"] == pytest.approx(conv["flops"] / conv["bytes"])
    assert conv["attainable_tflops"] == pytest.approx(
        conv["flops"] / (conv["time_ms"] * 1e-3) / 1e12)
    for c in r.operator_classes:
        assert c["bound"] in ("compute", "memory")
    # the element-wise classes sit far below the ridge: memory-bound
    relu = next(c for c in r.operator_classes if c["operator"] == "relu")
    assert relu["bound"] == "memory" and relu["intensity"] < 1
    times = [o["time_ms"] for o in r.top_operators]
    assert times == sorted(times, reverse=True) and len(times) <= 15
    # ceilings of the precision: fp32 SIMT and the TF32 tensor cores cuDNN may use
    assert r.peak_tflops == 19.5 and r.best_peak_tflops > r.peak_tflops
    # memory: the simulation's breakdown and its timeline, whose maximum is the peak
    m = r.memory
    assert max(pt[1] for pt in m["timeline"]) == pytest.approx(m["tensor_peak_mb"], rel=1e-9)
    assert m["predicted_device_mb"] == p["memory_mb"]
    # decisions: the fit agrees with predict (batch fits, batch + 1 does not)
    fit = r.decisions["fit"]
    assert fit["max_batch_size"] > r.batch_size
    assert r.decisions["mig"]["profile"]  # the A100 has MIG
    assert r.decisions["cost"]["iterations"] == 1000


def test_training_report_has_three_phases():
    r = build_report("timm:resnet10t", device="rtx3090", batch_size=4, input_size="3,64,64",
                     mode="train", decisions=False)
    assert list(r.phases_ms) == ["forward", "backward", "optimizer"]
    assert sum(r.phases_ms.values()) == pytest.approx(r.prediction["time_ms"], rel=1e-9)
    assert r.phases_ms["backward"] > r.phases_ms["forward"]
    phases = {pt[2] for pt in r.memory["timeline"]}
    assert {"forward", "backward", "optimizer"} <= phases
    assert r.decisions == {}


def test_page_is_self_contained(infer_report, tmp_path):
    page = render_html(infer_report)
    # nothing is fetched: no script, no stylesheet link, every image a data: URI
    assert "<script" not in page and "<link" not in page
    srcs = re.findall(r'src="([^"]+)"', page)
    assert len(srcs) == 3 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert not re.search(r"(src|href)=\"?(https?:)?//", page)
    assert "url(" not in page
    for text in ("Roofline", "Top operators", "Time per phase", "Memory", "Decisions",
                 "largest batch that fits", "MIG profile"):
        assert text in page
    written = write_report(infer_report, tmp_path / "r.html", png=True)
    assert set(written) == {"html", "roofline", "operators", "memory"}
    for name in ("roofline", "operators", "memory"):
        assert (tmp_path / f"r-{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_prediction_rows_show_every_key_with_intervals():
    d = {"model": "m", "device": "d", "time_ms": 2.0, "time_ms_low": 1.5, "time_ms_high": 3.0,
         "energy_j": None, "some_new_key": 7, "predictor": {"time_ms": "xgboost"}, "notes": []}
    rows = {r["quantity"]: r for r in prediction_rows(d)}
    assert set(rows) == {"time_ms", "energy_j", "some_new_key"}
    assert rows["time_ms"]["interval"] == "1.50–3.00 ms"
    assert rows["time_ms"]["text"] == "2.000 ms" and rows["time_ms"]["label"] == "time per batch"
    assert rows["time_ms"]["source"] == "xgboost"
    assert rows["energy_j"]["interval"] is None and fmt(None) == "—"
    assert fmt(1234.5678) == "1,235" and fmt(0.012345) == "0.01235" and fmt(True) == "yes"


def test_report_cli(tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["report", MODEL, "--device", "a100-40gb", "--batch-size", "8", "--out",
                 str(out), "--png", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["written"]["html"] == str(out) and out.exists()
    assert (tmp_path / "page-roofline.png").exists()
    assert d["report"]["model"] == MODEL and "timeline" not in d["report"]["memory"]


@pytest.mark.parametrize("args, message", [
    (["--out", "r.txt"], "must end in .html"),
    (["--out", "/nonexistent-dir/r.html"], "does not exist"),
    (["--mode", "generate"], "takes --mode infer or train"),
    (["--iterations", "0"], "--iterations must be ≥ 1"),
])
def test_report_cli_refuses_bad_input(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["report", MODEL, "--device", "a100-40gb", *args]) == 2
    assert message in capsys.readouterr().err


def test_report_fit_is_perfcast_fit(infer_report, capsys):
    """The report's largest batch is `perfcast fit --json`'s answer (the report asks
    ``answer("fit", …)`` with the request's options and the precision its prediction chose)."""
    r = infer_report
    assert main(["fit", MODEL, "--device", "a100-40gb", "--mode", "infer", "--precision",
                 r.precision, "--json"]) == 0
    want = json.loads(capsys.readouterr().out)
    got = r.decisions["fit"]
    for key in ("max_batch_size", "capacity_mb", "evaluations", "predictor"):
        assert got[key] == want[key], key
    # (the simulation cache keeps peaks to 1e-6 MiB: a value read back from it and one just
    # simulated differ in the 10th digit)
    for key in ("memory_mb", "next_memory_mb", "time_ms", "throughput_samples_per_s"):
        assert got[key] == pytest.approx(want[key], rel=1e-9), key
    assert set(got["notes"]) == set(want["notes"])
