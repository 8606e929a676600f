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


@pytest.mark.slow
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


# --------------------------------------------------------------------- issue #33: one request
GPT3_XL = "hf:/work/shared/data/neusight/model_configs/gpt3_xl.json"


def test_generation_is_a_workload():
    w = Workload.of("hf:meta-llama/Llama-2-7b-hf", mode="generate", input_len=512,
                    output_len=64, batch_size=8, tensor_parallel=2)
    assert (w.engine, w.precision, w.tensor_parallel) == ("vllm", "fp16", 2)
    assert w.to_dict()["engine"] == "vllm" and w.to_dict()["input_len"] == 512
    assert w.replace(engine="llama.cpp").engine == "llama.cpp"
    assert Workload.of("hf:gpt2", mode="generate", precision="int4").precision == "int4"
    with pytest.raises(PerfcastError, match="a graph is traced for one device"):
        w.key()


@pytest.mark.parametrize("model,kw,needle", [
    ("timm:resnet18", {"mode": "generate"}, "Hugging Face decoder LLMs"),
    ("hf:gpt2", {"mode": "generate", "precision": "amp"}, "generation precision 'amp'"),
    ("hf:gpt2", {"precision": "int4"}, "weight-only quantization"),
    ("hf:gpt2", {"mode": "generate", "engine": "vlm"}, "did you mean 'vllm'"),
    ("hf:gpt2", {"mode": "generate", "output_len": 0}, "--output-len must be a positive"),
    ("hf:gpt2", {"mode": "generate", "seq_len": 8}, "do not apply to --mode generate"),
    ("hf:gpt2", {"input_len": 8}, "--input-len apply to --mode generate only"),
    ("hf:gpt2", {"engine": "vllm", "mode": "train"}, "--engine apply to --mode generate only"),
    ("hf:gpt2", {"mode": "generate", "tensor_parallel": 65}, "≤ 64"),
    ("hf:gpt2", {"mode": "generate", "data_parallel": 2}, "--data-parallel apply to --mode train"),
    ("hf:gpt2", {"tensor_parallel": 2}, "--tensor-parallel applies to --mode train (--tensor-parallel also"),
])
def test_generation_options_are_validated_once(model, kw, needle):
    with pytest.raises(PerfcastError, match=needle.replace("(", r"\(")) as info:
        Workload.of(model, **kw)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)


def test_serving_layout_against_the_llm():
    from perfcast.llm.arch import llm_arch

    a = llm_arch("hf:Qwen/Qwen2-7B")  # 28 heads, 4 KV heads
    w = Workload.of("hf:Qwen/Qwen2-7B", mode="generate", input_len=16, output_len=16)
    w.replace(tensor_parallel=4).check_serving(a)
    with pytest.raises(PerfcastError, match="KV heads"):
        w.replace(tensor_parallel=7).check_serving(a)
    with pytest.raises(PerfcastError, match="does not divide"):
        w.replace(tensor_parallel=3).check_serving(a)
    w.replace(tensor_parallel=7, engine="llama.cpp").check_serving(a)  # layers split
    with pytest.raises(PerfcastError, match="positions"):
        w.replace(input_len=10**6).check_serving(a)


@pytest.mark.parametrize("model,kw,needle", [
    ("hf:gpt2", {"mode": "train", "batch_size": 6, "data_parallel": 4}, "does not divide among"),
    ("hf:gpt2", {"mode": "train", "batch_size": 12, "data_parallel": 2, "micro_batch_size": 4},
     "not a multiple of D·m = 2 × 4"),
    ("hf:gpt2", {"mode": "train", "pipeline_parallel": 2, "zero": 2}, "ZeRO-2/3"),
    ("hf:gpt2", {"mode": "train", "schedule": "gpipe"}, "needs --pipeline-parallel > 1"),
    ("timm:resnet50", {"mode": "train", "tensor_parallel": 2}, "takes --data-parallel"),
    ("hf:gpt2", {"data_parallel": 2}, "--data-parallel applies to --mode train, not --mode infer"),
    ("hf:gpt2", {"mode": "train", "zero": 4}, "unknown ZeRO stage 4"),
    ("hf:gpt2", {"mode": "train", "recompute": "some"}, "unknown recompute"),
    ("hf:gpt2", {"mode": "train", "data_parallel": 0}, "--data-parallel must be a positive"),
    ("hf:gpt2", {"mode": "train", "micro_batch_size": -1}, "--micro-batch-size must be"),
    ("hf:gpt2", {"mode": "train", "data_parallel": 2**20, "tensor_parallel": 2}, "at most"),
    ("hf:gpt2", {"mode": "train", "batch_size": 16, "data_parallel": 2, "micro_batch_size": 4,
                 "pipeline_parallel": 4, "schedule": "interleaved"}, "Megatron's rule"),
])
def test_layout_rules(model, kw, needle):
    with pytest.raises(PerfcastError, match=needle) as info:
        Workload.of(model, **kw)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)


def test_layout_against_the_model_shape():
    w = Workload.of("hf:gpt2", mode="train", batch_size=8, data_parallel=2, tensor_parallel=3,
                    pipeline_parallel=2)
    shape = dict(layers=24, heads=24, hidden=2304)
    w.check_layout(**shape)
    with pytest.raises(PerfcastError, match="hidden size 2,048"):
        w.check_layout(**{**shape, "hidden": 2048})  # 3 divides the 24 heads, not the width
    with pytest.raises(PerfcastError, match="does not divide gpt's hidden size 2,047"):
        w.check_layout(**{**shape, "hidden": 2047}, name="gpt")
    with pytest.raises(PerfcastError, match="does not divide gpt's 16 attention heads"):
        w.check_layout(**{**shape, "heads": 16}, name="gpt")
    with pytest.raises(PerfcastError, match="more stages than gpt's 1 layers"):
        w.check_layout(**{**shape, "layers": 1}, name="gpt")
    with pytest.raises(PerfcastError, match="does not divide gpt's 25 layers"):
        w.check_layout(**{**shape, "layers": 25}, name="gpt")
    with pytest.raises(PerfcastError, match=r"T·P·D = 3·2·2 = 12 GPUs, not the 8 of --gpus"):
        w.check_layout(**shape, gpus=8)
    with pytest.raises(PerfcastError, match="key/value heads"):
        w.check_layout(**{**shape, "kv_heads": 4}, name="gpt")
    assert w.gpus == 12 and w.distributed and w.layout.micro_batch is None
    assert w.single_device().layout.gpus == 1
    assert w.to_dict()["pipeline_parallel"] == 2
