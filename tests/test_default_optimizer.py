"""The optimizer a request does not name, by the model's source (``perfcast.workload.
default_optimizer``): AdamW for an ``hf:`` model's training step (Hugging Face Trainer's
``adamw_torch``, Megatron-LM, llm-foundry), SGD with momentum for every other model (timm's and
torchvision's recipes, the measured vision data); a note says when the hf default was applied.

Fast: the workload and request rules, and one tiny Llama config (2 layers of width 64) over two
GPUs for the memory breakdown; timm:resnet10t at 3×64×64 for the unchanged vision default.
"""

import pytest

from perfcast.workload import (
    DEFAULT_OPTIMIZER,
    HF_DEFAULT_OPTIMIZER,
    OPTIMIZER_NOT_GIVEN,
    Workload,
)
from tests.helpers import hf_spec

TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
        "intermediate_size": 172, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 2, "vocab_size": 128, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": False}


def _tiny_params() -> int:
    """TINY's parameters from its config: embeddings and LM head (untied), per layer q, k, v, o
    (2 KV heads of 16), the gated MLP and two RMSNorms, then the final norm."""
    h, kv, inter, layers, vocab = 64, 2 * 16, 172, 2, 128
    layer = h * h + 2 * h * kv + h * h + 3 * h * inter + 2 * h
    return 2 * vocab * h + layers * layer + h


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return hf_spec(tmp_path_factory.mktemp("llama"), "tiny_llama", TINY)


def _optimizer_notes(est) -> list[str]:
    return [n for n in est.notes if n.startswith("optimizer:")]


def test_the_workload_decides_by_source():
    hf = Workload.of("hf:gpt2", mode="train")
    assert hf.optimizer == HF_DEFAULT_OPTIMIZER == "adamw" and hf.optimizer_defaulted
    (note,) = hf.optimizer_notes()
    assert note.startswith("optimizer: adamw (not given: the default for hf: models")
    assert "--optimizer to choose" in note
    # given explicitly, the old default is what it says, for an hf model too, and unremarked
    sgd = Workload.of("hf:gpt2", mode="train", optimizer="sgd-momentum")
    assert sgd.optimizer == "sgd-momentum" and sgd.optimizer_notes() == []
    assert hf.replace(optimizer="sgd-momentum").optimizer_notes() == []
    assert hf.key() != sgd.key()  # a training graph's key holds its optimizer
    # every other source keeps SGD with momentum, without a note (as before)
    for spec in ("timm:resnet50", "tv:resnet18"):
        w = Workload.of(spec, mode="train")
        assert w.optimizer == DEFAULT_OPTIMIZER == "sgd-momentum" and w.optimizer_notes() == []
    # a default follows the mode (an inference workload made a training one) …
    assert Workload.of("hf:gpt2").replace(mode="train").optimizer == "adamw"
    assert Workload.of("hf:gpt2").replace(optimizer=OPTIMIZER_NOT_GIVEN,
                                          mode="train").optimizer_defaulted
    # … and a dataset record's unknown optimizer stays "not recorded" (the learned models'
    # training features and the simulations' default are unchanged)
    rec = Workload.from_record({"model": "hf:gpt2", "seq_len": 128, "mode": "train",
                                "precision": "fp32"})
    assert rec.optimizer is None and rec.run_optimizer == DEFAULT_OPTIMIZER
    assert not rec.optimizer_defaulted and rec.optimizer_notes() == []


def test_every_surface_passes_not_given():
    from perfcast.api import as_workload
    from perfcast.request import Request
    from perfcast.request.fields import BY_NAME

    assert Request.of("predict", model="hf:gpt2", mode="train",
                      device="h100-sxm").workload.optimizer == "adamw"
    assert Request.of("predict", model="hf:gpt2", mode="train", device="h100-sxm",
                      optimizer="sgd-momentum").workload.optimizer == "sgd-momentum"
    assert Request.of("predict", model="timm:resnet50", mode="train",
                      device="h100-sxm").workload.optimizer == "sgd-momentum"
    # a mode changed on the request takes the new mode's default
    r = Request.of("predict", model="hf:gpt2", device="h100-sxm")
    assert r.replace(mode="train").workload.optimizer == "adamw"
    assert as_workload("hf:gpt2", mode="train").optimizer == "adamw"
    # a Workload given to the API keeps its optimizer defaulted (and the note)
    from perfcast.request.request import _workload_options

    assert "optimizer" not in _workload_options(Workload.of("hf:gpt2", mode="train"))
    # the schema's --optimizer help (CLI, HTTP, UI) says the rule
    help_text = BY_NAME["optimizer"].describe("predict")
    assert "adamw for hf: models" in help_text and "else sgd-momentum" in help_text
    assert BY_NAME["optimizer"].default is None


def test_hf_training_memory_holds_adamw_state(tiny):
    """bf16 AdamW: fp32 master weights + m + v = 12 bytes per parameter of optimizer state
    (bf16 weights and gradients 2 each: 16 in all); sgd-momentum given: 8 (master + momentum)."""
    from perfcast.api import predict

    kw = dict(mode="train", device="h100-sxm", seq_len=32, batch_size=2, data_parallel=2,
              precision="bf16")
    p = predict(tiny, **kw)
    params, mib = _tiny_params(), 2.0 ** 20
    mb = p.memory_breakdown_mb
    # the breakdown is rounded to 0.1 MiB
    assert mb["weights"] == pytest.approx(params * 2 / mib, abs=0.06)
    assert mb["optimizer_state"] == pytest.approx(params * 12 / mib, abs=0.06)
    (note,) = _optimizer_notes(p)
    assert note.startswith("optimizer: adamw (not given")
    given = predict(tiny, optimizer="adamw", **kw)
    assert given.memory_breakdown_mb == mb and _optimizer_notes(given) == []
    sgd = predict(tiny, optimizer="sgd-momentum", **kw)
    assert sgd.memory_breakdown_mb["optimizer_state"] == pytest.approx(params * 8 / mib,
                                                                       abs=0.06)
    assert sgd.memory_mb < p.memory_mb and _optimizer_notes(sgd) == []


def test_vision_default_unchanged():
    """timm's default is SGD with momentum, as before: the same answer as naming it, no note."""
    from perfcast.api import predict

    kw = dict(mode="train", device="rtx4090", input_size="3,64,64", batch_size=8,
              precision="amp")
    default = predict("timm:resnet10t", **kw)
    given = predict("timm:resnet10t", optimizer="sgd-momentum", **kw)
    assert default.to_dict() == given.to_dict()
    assert _optimizer_notes(default) == []
