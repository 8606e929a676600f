"""The Workload: one parse, one validation, one key — and refusal of what does not apply."""

import pytest

from perfcast.errors import ModelSpecError, PerfcastError
from perfcast.store.db import MeasureConfig
from perfcast.workload import DEFAULT_OPTIMIZER, ModelSpec, Workload, parse_input_size


def test_spec_parsing():
    assert ModelSpec.parse("resnet50") == ModelSpec("resnet50", "timm", "resnet50")
    assert ModelSpec.parse(" timm:resnet50 ").text == "timm:resnet50"
    assert ModelSpec.parse("tv:resnet18").kind == "torchvision"
    assert ModelSpec.parse("hf:gpt2").inputs == "tokens"
    assert ModelSpec.parse("my.pkg:make").kind == "module"
    with pytest.raises(ModelSpecError, match="file not found"):
        ModelSpec.parse("missing/model.onnx")
    with pytest.raises(ModelSpecError, match="empty"):
        ModelSpec.parse("  ")


@pytest.mark.parametrize("model,kw,needle", [
    ("timm:resnet18", {"seq_len": 128}, "image model"),
    ("timm:resnet18", {"input_size": "3,224"}, "C,H,W"),
    ("torchvision:resnet18", {"input_size": (1, 2, 3, 4)}, "C,H,W"),
    ("hf:gpt2", {"input_size": "3,224,224"}, "text model"),
    ("timm:resnet18", {"batch_size": 0}, "batch size"),
    ("timm:resnet18", {"batch_size": True}, "batch size"),
    ("timm:resnet18", {"batch_size": 10**30}, "≤"),
    ("timm:resnet18", {"mode": "fly"}, "mode"),
    ("timm:resnet18", {"precision": "fp8"}, "precision"),
    ("timm:resnet18", {"optimizer": "lion"}, "optimizer"),
    ("hf:gpt2", {"seq_len": -4}, "sequence length"),
    ("my.pkg:make", {"seq_len": 8}, "not --seq-len"),
])
def test_refuses_what_does_not_apply(model, kw, needle):
    with pytest.raises(PerfcastError, match=needle) as info:
        Workload.of(model, **kw)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)


def test_onnx_file_sizes_bind_symbolic_dims_only(tmp_path):
    # the file decides (tests/test_onnx_frontend.py::test_symbolic_dims_*): --input-size or
    # --seq-len bind its symbolic dimensions, never both at once
    f = tmp_path / "m.onnx"
    f.write_bytes(b"")
    assert Workload.of(str(f), batch_size=4).model.kind == "onnx"
    assert Workload.of(str(f), input_size="3,32,32").input_size == (3, 32, 32)
    with pytest.raises(PerfcastError, match="not both"):
        Workload.of(str(f), input_size="3,32,32", seq_len=8)


def test_any_shape_for_callables_and_defaults():
    w = Workload.of("my.pkg:make", input_size=(64,))
    assert w.input_size == (64,) and w.batch_size is None and w.precision == "fp32"
    assert w.optimizer == DEFAULT_OPTIMIZER and w.run_optimizer is None  # inference
    assert parse_input_size("224") == (3, 224, 224) == parse_input_size(224)


def test_replace_validates_and_keys():
    w = Workload.of("timm:resnet50", batch_size=8)
    assert w.replace(batch_size=16).batch_size == 16
    with pytest.raises(PerfcastError):
        w.replace(seq_len=5)
    keys = {w.key(), w.replace(batch_size=9).key(), w.replace(mode="train").key(),
            w.replace(mode="train", optimizer="adam").key(), w.replace(precision="amp").key()}
    assert len(keys) == 5
    # the optimizer is not part of an inference graph's key
    assert w.replace(optimizer="adam").key() == w.key()
    with pytest.raises(PerfcastError, match="precision"):
        w.replace(precision=None).key()


def test_from_record():
    rec = {"model": "timm:resnet18", "batch_size": 4.0, "input_size": "3,64,64",
           "seq_len": float("nan"), "mode": "train", "precision": "amp", "optimizer": None}
    w = Workload.from_record(rec)
    assert (w.batch_size, w.input_size, w.seq_len) == (4, (3, 64, 64), None)
    # not recorded: graph keys and simulations use the default, the features say "unknown"
    assert w.optimizer is None and w.run_optimizer == DEFAULT_OPTIMIZER
    assert w.key() == w.replace(optimizer=DEFAULT_OPTIMIZER).key()
    with pytest.raises(PerfcastError, match="fp64"):
        Workload.from_record({**rec, "precision": "fp64"})


def test_measure_config_keys_are_those_of_existing_stores():
    """Keys computed before the Workload existed (kept in measurement stores) still match."""
    assert MeasureConfig.of("timm:resnet18", batch_size=2,
                            input_size="3,64,64").key() == "79a96ba4eebcb82091703eb5c15f0ba0"
    cfg = MeasureConfig.of("hf:gpt2", batch_size=4, seq_len=128, mode="train", optimizer="adam",
                           threads=1, repeat=1)
    assert cfg.key() == "d18c7b2ef5bb28c1ab4d572a4e82358f"
    assert MeasureConfig.from_dict(cfg.to_dict()) == cfg


def test_optimizer_none_is_forward_and_backward_only():
    """``--optimizer none``: the training graph has no update nodes, the simulation no optimizer
    state, the profiler no step — what NeuSight labels as training."""
    from perfcast.frontends import build_graph
    from perfcast.memory import simulate_memory
    from perfcast.profiler.measure import measure

    w = Workload.of("tests.models_for_tests:tiny_cnn", batch_size=2, input_size=(3, 16, 16),
                    mode="train", optimizer="none")
    phases = build_graph(w).summary()["phase_counts"]
    assert "optimizer" not in phases and phases["backward"] > 0
    with_sgd = build_graph(w.replace(optimizer="sgd")).summary()["phase_counts"]
    assert with_sgd["optimizer"] > 0
    est = simulate_memory(w)
    assert est.optimizer_state_mb == 0 and est.grad_mb > 0
    m = measure(MeasureConfig(w), warmup=0, iters=2, device="cpu", track_memory=False)
    assert m.status == "ok" and m.time_ms_median > 0
