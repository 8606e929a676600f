"""Hostile and contradictory command lines a fresh-eyes audit found answered silently (exit 0
with an option ignored, a nonsense figure, or a bad row stored): each now ends in a one-line
error (exit 2) before any work, or in an answer that says what it is."""

from __future__ import annotations

import pytest

from perfcast.faces.cli import main
from tests.reliability_cases import one_line_error, strict_json

SQUEEZE = "torchvision:squeezenet1_1"


def _refused(argv, capsys, *needles):
    rc = main(argv)
    err = capsys.readouterr().err
    problem = one_line_error(2, *needles)(rc, "", err, None)
    assert problem is None, problem


def test_threads_on_a_gpu_is_refused(capsys):
    """--threads sets a CPU run's threads; on a GPU it was ignored without a word."""
    _refused(["predict", SQUEEZE, "--device", "rtx4090", "--threads", "4"], capsys,
             "--threads", "rtx4090 is a GPU")


def test_fit_refuses_a_batch_size_it_would_ignore(capsys):
    """fit searches the batch: a given --batch-size was dropped silently (generate mode already
    refused it with --input-len)."""
    _refused(["fit", SQUEEZE, "--device", "rtx4090", "-b", "8", "--limit", "64"], capsys,
             "--batch-size does not apply", "--limit")


def test_cost_refuses_more_power_than_the_gpu_can_draw(capsys):
    """--power-w is one GPU's mean draw; 100 kW on an RTX 4090 (450 W) priced a nonsense job."""
    _refused(["cost", "--device", "rtx4090", "--iterations", "10", "--time-ms", "10",
              "--power-w", "100000"], capsys, "--power-w 100000 W", "450 W")
    assert main(["cost", "--device", "rtx4090", "--iterations", "10", "--time-ms", "10",
                 "--power-w", "450", "--json"]) == 0
    assert strict_json(capsys.readouterr().out)["power_w"] == 450


@pytest.mark.slow  # a full prediction (seconds); the fast tier keeps the refusals
def test_cost_says_a_given_power_limit_is_given(capsys):
    """The energy source called a --power-limit the user gave 'the default power limit'."""
    assert main(["cost", SQUEEZE, "--device", "a100-40gb", "--iterations", "10",
                 "--power-limit", "300", "--json"]) == 0
    src = strict_json(capsys.readouterr().out)["sources"]["energy"]
    assert "300 W given power limit" in src, src


def test_rank_names_a_device_once(capsys):
    assert main(["rank", SQUEEZE, "--devices", "rtx4090,RTX4090", "--json"]) == 0
    assert [d["device"] for d in strict_json(capsys.readouterr().out)["devices"]] == ["rtx4090"]


@pytest.mark.slow  # a full prediction (seconds); the fast tier keeps the refusals
def test_serving_plan_beyond_the_replica_cap_prices_no_token(capsys):
    """A rate beyond what the most replicas serve: the rows said 'needs 4,096 GPUs' and priced
    a token at ~0 USD, as if those GPUs carried the rate."""
    from perfcast.decisions.serving import MAX_REPLICAS

    assert main(["plan", "hf:gpt2", "--mode", "generate", "--device", "a100-80gb", "--gpus",
                 "2", "--input-len", "100", "--output-len", "10", "--rate", "1e12",
                 "--json"]) == 0
    d = strict_json(capsys.readouterr().out)
    assert d["winner"] is None and d["rows"]
    for row in d["rows"]:
        assert not row["meets_slo"]
        if row["replicas"] == MAX_REPLICAS:
            assert row["why"].startswith("needs more than"), row["why"]
            assert row["usd_per_1m_output_tokens"] is None
            assert row["energy_j_per_output_token"] is None


@pytest.mark.parametrize("extra, needles", [
    (["--threads", "0"], ("--threads must be in 1..4096",)),
    (["--cooldown", "-1"], ("--cooldown",)),
    (["--cooldown", "nan"], ("--cooldown",)),
    (["--memory-limit-mb", "-5"], ("--memory-limit-mb",)),
    (["--timeout", "nan"], ("timeout must be positive",)),
    (["--max-seconds", "nan"], ("--max-seconds",)),
    (["--cpus", "99999"], ("--cpus 99999",)),
    (["--batch-sizes", ""], ("no configuration to measure",)),
    (["--device", "rtx4090"], ("no CUDA device visible",)),
])
def test_collect_refuses_before_storing_a_bad_row(extra, needles, tmp_path, capsys):
    """Each stored a row (threads 0 'ok', an OOM below a negative limit, 'failed' for a CPU or
    GPU this machine does not have) or measured nothing with exit 0."""
    if "rtx4090" in extra:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a CUDA device")
    db = tmp_path / "m.db"
    _refused(["collect", "--models", SQUEEZE, "--input-sizes", "3,16,16", "--iters", "1",
              "--warmup", "0", "--db", str(db), *extra], capsys, *needles)
    assert not db.exists()


@pytest.mark.parametrize("extra, needles", [
    (["--transfer", "magic"], ("unknown --transfer 'magic'",)),
    (["--max-seconds", "0"], ("--max-seconds",)),
])
def test_calibrate_checks_its_options_before_measuring(extra, needles, tmp_path, capsys,
                                                       monkeypatch):
    """--transfer was read only after the measurements (ten minutes by default)."""
    monkeypatch.setenv("PERFCAST_USER_MODELS", str(tmp_path / "models"))
    _refused(["calibrate", *extra], capsys, *needles)
    assert not (tmp_path / "models").exists()



@pytest.mark.parametrize("extra", [["--precision", "bf16"], ["--kv-cache-dtype", "bf16"]])
def test_bf16_serving_below_ampere_is_refused(extra, capsys):
    """vLLM / TensorRT-LLM refuse bfloat16 below compute capability 8.0; a V100 / T4 bf16
    serving request was answered without a word."""
    _refused(["predict", "hf:gpt2", "--mode", "generate", "--device", "v100-32gb-pcie",
              "--input-len", "64", "--output-len", "8", *extra], capsys,
             "bf16", "compute capability ≥ 8.0", "use fp16")


@pytest.mark.parametrize("doc,needle", [("{}", "non-empty \"entries\""),
                                        ("[1, 2]", "non-empty \"entries\""),
                                        ('{"entries": [{"id": "x"}]}', "lacks predictor"),
                                        ('{"entries": ["x"]}', "entries[0] is not an object")])
def test_train_refuses_a_file_that_is_not_a_recipe(tmp_path, capsys, doc, needle):
    """A JSON file of the wrong shape as --recipe crashed with KeyError: 'entries' (exit 1)."""
    f = tmp_path / "recipe.json"
    f.write_text(doc)
    _refused(["train", "--recipe", str(f), "--out", str(tmp_path / "out")], capsys,
             "not a training recipe", needle)
    assert not (tmp_path / "out").exists()


def test_calibrating_a_gpu_without_one_leaves_nothing_behind(tmp_path, capsys, monkeypatch):
    """calibrate --device rtx4090 here refused only after creating its measurement store."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: calibrating it is allowed")
    monkeypatch.setenv("PERFCAST_DATA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PERFCAST_USER_MODELS", raising=False)
    _refused(["calibrate", "--device", "rtx4090", "--minutes", "0.1"], capsys,
             "no CUDA device visible")
    assert not (tmp_path / "home").exists()


@pytest.mark.slow
def test_calibrate_uses_only_what_it_was_asked_to_measure(tmp_path, capsys, monkeypatch):
    """Every asked model failing installed a calibrated model fitted on rows an earlier run had
    left in the calibration store; now it is an error that says the configurations failed, and
    nothing is installed."""
    monkeypatch.setenv("PERFCAST_DATA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PERFCAST_USER_MODELS", raising=False)
    _refused(["calibrate", "--models", "timm:no_such_model", "--minutes", "0.1"], capsys,
             "configuration(s) failed", "check --models")
    assert not (tmp_path / "home" / "calibrated" / "manifest.json").exists()


def test_training_beyond_the_positions_of_a_rope_model_says_so():
    """--mode train --seq-len beyond a RoPE model's max_position_embeddings answered without a
    word, while --mode generate refuses it: training can run it (long-context training with
    RoPE scaling does), so it is priced as given, with a note; a learned position table still
    refuses it."""
    from perfcast.llm.arch import positions_note

    note = positions_note("hf:meta-llama/Llama-2-7b-hf", 100_000)
    assert "100,000 tokens is beyond the model's 4,096 positions" in note
    assert positions_note("hf:meta-llama/Llama-2-7b-hf", 4096) is None


@pytest.mark.slow  # a full prediction (seconds); the fast tier keeps the refusals
def test_training_a_rope_model_past_its_positions_is_noted_in_the_answer(capsys):
    assert main(["predict", "hf:meta-llama/Llama-2-7b-hf", "--mode", "train", "--device",
                 "h100-sxm", "--seq-len", "8192", "--data-parallel", "8", "--batch-size", "8",
                 "--json"]) == 0
    notes = strict_json(capsys.readouterr().out)["notes"]
    assert any("8,192 tokens is beyond the model's 4,096 positions" in n for n in notes), notes


def test_bf16_on_a_gpu_without_bf16_units_says_how_it_is_priced():
    """bf16 on a V100 / P100 was answered faster than fp32 without a word: those GPUs have no
    bf16 units, so it runs on the FP32 units (priced at the FP32 peak on half the bytes)."""
    from perfcast.devices import get_device
    from perfcast.devices.fp8 import bf16_units_note

    note = bf16_units_note("bf16", get_device("v100-32gb"))
    assert "no bf16 tensor or matrix units" in note and "15.7 TFLOPS" in note
    assert bf16_units_note("bf16", get_device("a100-80gb")) is None
    assert bf16_units_note("fp16", get_device("v100-32gb")) is None
    assert bf16_units_note("bf16", get_device("cpu")) is None


@pytest.mark.slow  # a full prediction (seconds); the fast tier keeps the refusals
def test_a_gpu_memory_interval_keeps_the_runtime_it_assumes():
    """The memory interval's low bound fell below the runtime overhead its own answer holds
    (ResNet-18 batch 1 on an RTX 4090: 166 MiB against 1,833 MiB, 1,765 of them CUDA context
    and workspaces): it now stays above the weights and inputs + the measured runs' 10th
    percentile of that overhead (or the overhead given)."""
    import perfcast
    from perfcast.memory.overhead import runtime_overhead

    p10 = runtime_overhead()["p10_mb"]
    p = perfcast.predict("timm:resnet18", device="rtx4090", batch_size=1, precision="amp")
    assert p.memory_mb_low >= p10 and p.memory_mb_low <= p.memory_mb
    q = perfcast.predict("timm:resnet18", device="rtx4090", batch_size=1, precision="amp",
                         runtime_overhead_mb=0.0)
    assert q.memory_mb_low is None or q.memory_mb_low < p10


@pytest.mark.parametrize("argv, option", [
    (["rank", SQUEEZE, "--devices", "rtx4090", "--plot"], "--plot"),
    (["power-limit", SQUEEZE, "--device", "a100-40gb", "--png"], "--png"),
    (["report", SQUEEZE, "--device", "rtx4090", "--out"], "--out"),
    (["inspect", SQUEEZE, "--save"], "--save"),
])
def test_an_output_path_under_a_file_says_it_is_a_file(argv, option, tmp_path, capsys):
    """An output path under an existing regular file (file/x.png) said "folder 'file' does not
    exist"; every output-file option shares perfcast.paths.check_output_file."""
    file = tmp_path / "file"
    file.write_text("")
    suffix = {"--out": ".html", "--save": ".npz"}.get(option, ".png")
    _refused([*argv, str(file / "sub" / f"x{suffix}")], capsys, option,
             f"'{file}' is a file, not a folder")
    _refused([*argv, str(tmp_path / "nodir" / f"x{suffix}")], capsys, option,
             "does not exist (create it first)")


def test_cost_names_the_iteration_flags(capsys):
    """The error said 'give iterations, or epochs and dataset_size' (field names) on the CLI."""
    _refused(["cost", "--device", "rtx4090", "--time-ms", "10", "--epochs", "3"], capsys,
             "give --iterations, or --epochs and --dataset-size")
    _refused(["cost", "--device", "rtx4090", "--time-ms", "10", "--iterations", "5",
              "--epochs", "3", "--dataset-size", "100"], capsys,
             "give either --iterations or --epochs and --dataset-size, not both")


def test_rank_says_a_given_power_limit_is_given(capsys):
    """rank's energy note said 'default power limit = TDP' under --power-limit 300."""
    assert main(["rank", SQUEEZE, "--devices", "rtx4090,a100-80gb", "--power-limit", "300",
                 "--json"]) == 0
    notes = strict_json(capsys.readouterr().out)["notes"]
    energy = [n for n in notes if n.startswith("energy:")]
    assert len(energy) == 1 and "the given --power-limit 300 W" in energy[0], notes
    assert "default power limit" not in energy[0]
    assert main(["rank", SQUEEZE, "--devices", "rtx4090", "--json"]) == 0
    notes = strict_json(capsys.readouterr().out)["notes"]
    assert any(n.startswith("energy:") and "default power limit = TDP" in n for n in notes)


def test_cost_with_a_given_time_says_the_model_only_labels_the_job(capsys):
    """With --time-ms the model is not predicted (only a label): it was ignored without a word."""
    assert main(["cost", SQUEEZE, "--device", "rtx4090", "--time-ms", "10", "--iterations",
                 "100", "--json"]) == 0
    c = strict_json(capsys.readouterr().out)
    assert c["time_ms_per_iteration"] == 10 and c["sources"]["time"] == "given"
    assert any("--time-ms 10 ms" in n and f"{SQUEEZE} only labels the job" in n
               for n in c["notes"]), c["notes"]
    assert main(["cost", "--device", "rtx4090", "--time-ms", "10", "--iterations", "100",
                 "--json"]) == 0  # no model: nothing to say about one
    assert not any("only labels" in n for n in strict_json(capsys.readouterr().out)["notes"])


@pytest.mark.parametrize("field, value, needle", [
    ("peak_fp32_tflops", 1e-300, "peak_fp32_tflops 1e-300 TFLOPS is implausibly small "
                                 "(allowed: 0.001–1000 TFLOPS)"),
    ("peak_fp16_tflops", 1e-6, "peak_fp16_tflops 1e-06 TFLOPS is implausibly small "
                               "(allowed: ≥ 0.001 TFLOPS)"),
    ("memory_gb", 1e-9, "memory_gb 1e-09 GB is implausibly small (allowed: ≥ 0.001 GB)"),
    ("bandwidth_gbs", 0.01, "bandwidth_gbs 0.01 GB/s is implausibly small (allowed: ≥ 0.1 GB/s)"),
])
def test_a_device_spec_with_an_absurdly_small_value_is_refused(field, value, needle, tmp_path,
                                                               capsys):
    """A spec's peaks had an upper plausibility limit but no lower one: 1e-300 TFLOPS passed."""
    import json

    spec = {"key": "tiny-gpu", "name": "Tiny GPU", "kind": "gpu", "peak_fp32_tflops": 20.0,
            "peak_fp16_tflops": 80.0, "memory_gb": 24, "bandwidth_gbs": 1000, "sm_count": 80}
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({**spec, field: value}))
    _refused(["predict", SQUEEZE, "--device", str(path)], capsys, "device 'tiny-gpu'", needle)


def test_overhead_mb_has_an_upper_limit(capsys):
    """--overhead-mb 1e30 was accepted (and added 1e30 MiB to the memory answer)."""
    from perfcast.devices import get_device
    from perfcast.errors import PerfcastError
    from perfcast.request.fields import MAX_RUNTIME_OVERHEAD_MB
    from perfcast.request.single import predict_workload
    from perfcast.workload import Workload

    _refused(["predict", SQUEEZE, "--device", "rtx4090", "--overhead-mb", "1e30"], capsys,
             "--runtime-overhead-mb must be in 0..1,048,576 (MiB), got 1e+30")
    _refused(["fit", SQUEEZE, "--device", "rtx4090", "--overhead-mb", "1e30"], capsys,
             "--runtime-overhead-mb must be in 0..1,048,576")
    with pytest.raises(PerfcastError, match="runtime overhead must be in 0..1,048,576 MiB"):
        predict_workload(Workload.of(SQUEEZE), get_device("rtx4090"),
                         runtime_overhead_mb=MAX_RUNTIME_OVERHEAD_MB * 2.0)


def test_a_model_callable_that_exits_is_an_error(capsys):
    """`perfcast predict builtins:exit` exited 0 without a word: the callable raised SystemExit
    while perfcast built the model."""
    _refused(["predict", "builtins:exit", "--device", "cpu"], capsys,
             "builtins:exit exited", "torch.nn.Module")
