"""Tests for the model-building half of the ``hf:`` frontend (no network, no weights)."""

from __future__ import annotations

import json
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from perfcast.errors import ModelSpecError  # noqa: E402
from perfcast.zoo import hf, hf_config  # noqa: E402
from perfcast.zoo.hf import (  # noqa: E402
    HFWrapper,
    build_hf_model,
    hf_example_inputs,
    load_hf,
    resolve_hf_config,
    shipped_model_ids,
)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights counted once


def _all_meta(model) -> bool:
    return all(p.device.type == "meta" for p in model.parameters()) and all(
        b.device.type == "meta" for b in model.buffers()
    )


# ----------------------------------------------------------------- parameter-count formulas


def _bert_mlm_params(v, h, layers, inter, pos=512, types=2) -> int:
    emb = (v + pos + types) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * inter + inter) + (inter * h + h) + 2 * h
    head = (h * h + h) + 2 * h + v  # transform + LayerNorm + decoder bias (weight tied)
    return emb + layers * layer + head


def _gpt2_params(v, pos, h, layers) -> int:
    layer = 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + 2 * h + (h * 4 * h + 4 * h) + (4 * h * h + h)
    return (v + pos) * h + layers * layer + 2 * h  # lm_head tied to wte


def _llama_params(v, h, layers, inter, heads, kv_heads) -> int:
    head_dim = h // heads
    attn = h * h * 2 + 2 * h * kv_heads * head_dim
    layer = attn + 3 * h * inter + 2 * h
    return 2 * v * h + layers * layer + h  # untied embedding + lm_head, final norm


EXPECTED = {
    # id: (expected count, relative tolerance)
    "bert-base-uncased": (_bert_mlm_params(30522, 768, 12, 3072), 0.02),
    "gpt2": (_gpt2_params(50257, 1024, 768, 12), 0.01),
    "meta-llama/Llama-2-7b-hf": (_llama_params(32000, 4096, 32, 11008, 32, 32), 0.01),
    "mistralai/Mistral-7B-v0.1": (_llama_params(32000, 4096, 32, 14336, 32, 8), 0.01),
}


def test_formulas_match_published_sizes():
    assert EXPECTED["bert-base-uncased"][0] == 109_514_298
    assert EXPECTED["gpt2"][0] == 124_439_808
    assert abs(EXPECTED["meta-llama/Llama-2-7b-hf"][0] / 6.74e9 - 1) < 0.01
    assert abs(EXPECTED["mistralai/Mistral-7B-v0.1"][0] / 7.24e9 - 1) < 0.01


# ----------------------------------------------------------------- shipped table


def test_index_lists_every_config_file():
    files = {p.name for p in hf_config.CONFIG_DIR.glob("*.json")} - {"index.json"}
    index = json.loads((hf_config.CONFIG_DIR / "index.json").read_text())
    assert set(index["models"].values()) == files
    for model_id, fname in index["models"].items():
        assert fname == model_id.replace("/", "--") + ".json"
    for required in (
        "bert-base-uncased",
        "bert-large-uncased",
        "roberta-base",
        "roberta-large",
        "distilbert-base-uncased",
        "microsoft/deberta-v3-base",
        "microsoft/deberta-v3-large",
        "gpt2",
        "gpt2-medium",
        "gpt2-large",
        "meta-llama/Llama-2-7b-hf",
        "meta-llama/Llama-2-13b-hf",
        "mistralai/Mistral-7B-v0.1",
        "t5-small",
        "facebook/opt-1.3b",
    ):
        assert required in shipped_model_ids()


@pytest.mark.parametrize("model_id", shipped_model_ids())
def test_every_shipped_config_builds_on_meta(model_id):
    config, resolved = resolve_hf_config(model_id)
    assert resolved == model_id
    model = build_hf_model(config)
    assert _all_meta(model)
    assert not model.training
    assert model.config.use_cache is False
    n = _params(model)
    assert n > 1_000_000
    if model_id in EXPECTED:
        expected, tol = EXPECTED[model_id]
        assert abs(n / expected - 1) <= tol, (model_id, n, expected)
    arch = (config.architectures or [None])[0]
    if arch and arch != "T5WithLMHeadModel":
        assert type(model).__name__ == arch


def test_exact_parameter_counts():
    # Known published sizes (parameters() counts tied weights once).
    known = {
        "bert-large-uncased": 335_174_458,
        "roberta-base": 124_697_433,
        "distilbert-base-uncased": 66_985_530,
        "gpt2-medium": 354_823_168,
        "gpt2-large": 774_030_080,
        "t5-small": 60_506_624,
        "google/flan-t5-small": 76_961_152,  # untied lm_head
        "facebook/opt-1.3b": 1_315_758_080,
        "meta-llama/Llama-2-13b-hf": 13_015_864_320,
    }
    for model_id, expected in known.items():
        config, _ = resolve_hf_config(model_id)
        assert _params(build_hf_model(config)) == expected, model_id


@pytest.mark.parametrize(
    "alias, expected",
    [
        ("llama-2-7b", "meta-llama/Llama-2-7b-hf"),
        ("LLAMA-2-7B", "meta-llama/Llama-2-7b-hf"),
        ("meta-llama/llama-2-7b-hf", "meta-llama/Llama-2-7b-hf"),
        ("mistral-7b", "mistralai/Mistral-7B-v0.1"),
        ("bert-base", "bert-base-uncased"),
        ("Deberta-V3-Base", "microsoft/deberta-v3-base"),
        ("hf:gpt2", "gpt2"),
        ("  gpt2 ", "gpt2"),
    ],
)
def test_aliases_are_case_insensitive(alias, expected):
    config, model_id = resolve_hf_config(alias)
    assert model_id == expected
    assert config.name_or_path == expected


def test_shipped_configs_hold_real_architecture_fields():
    llama, _ = resolve_hf_config("llama-2-7b")
    assert (llama.hidden_size, llama.num_hidden_layers, llama.num_attention_heads) == (4096, 32, 32)
    assert (llama.num_key_value_heads, llama.intermediate_size, llama.vocab_size) == (32, 11008, 32000)
    mistral, _ = resolve_hf_config("mistral-7b")
    assert (mistral.num_key_value_heads, mistral.intermediate_size, mistral.sliding_window) == (8, 14336, 4096)
    gpt2, _ = resolve_hf_config("gpt2")
    assert (gpt2.n_embd, gpt2.n_layer, gpt2.n_head, gpt2.n_positions) == (768, 12, 12, 1024)
    deberta, _ = resolve_hf_config("microsoft/deberta-v3-large")
    assert (deberta.hidden_size, deberta.num_hidden_layers, deberta.vocab_size) == (1024, 24, 128100)


# ----------------------------------------------------------------- local files and errors


def test_local_config_json_file_and_directory(tmp_path):
    data = json.loads((hf_config.CONFIG_DIR / "gpt2.json").read_text())
    data["n_layer"] = 2
    model_dir = tmp_path / "tiny-gpt2"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(data))

    for spec in (str(model_dir / "config.json"), str(model_dir)):
        config, model_id = resolve_hf_config(spec)
        assert model_id == "tiny-gpt2"
        assert config.n_layer == 2
        model = build_hf_model(config)
        assert type(model).__name__ == "GPT2LMHeadModel"
        assert _all_meta(model)

    named = tmp_path / "other.json"
    named.write_text(json.dumps({**data, "_name_or_path": "me/my-gpt"}))
    assert resolve_hf_config(str(named))[1] == "me/my-gpt"


def test_bad_local_files(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ModelSpecError, match="not valid JSON"):
        resolve_hf_config(str(broken))
    no_type = tmp_path / "notype.json"
    no_type.write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(ModelSpecError, match="model_type"):
        resolve_hf_config(str(no_type))
    weird = tmp_path / "weird.json"
    weird.write_text(json.dumps({"model_type": "no-such-architecture"}))
    with pytest.raises(ModelSpecError, match="unknown to transformers"):
        resolve_hf_config(str(weird))
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(ModelSpecError, match="no config.json"):
        resolve_hf_config(str(empty_dir))
    with pytest.raises(ModelSpecError, match="no such file"):
        resolve_hf_config(str(tmp_path / "missing" / "config.json"))


@pytest.mark.parametrize("spec", ["", "   ", "hf:", "hf: "])
def test_empty_spec(spec):
    with pytest.raises(ModelSpecError, match="empty"):
        resolve_hf_config(spec)


def test_unknown_id_offline_fails_fast_with_one_line(monkeypatch):
    def no_network(*a, **k):  # pragma: no cover - must not be reached
        raise AssertionError("network touched")

    monkeypatch.setattr(hf_config.socket, "create_connection", no_network)
    start = time.monotonic()
    with pytest.raises(ModelSpecError) as info:
        resolve_hf_config("some-org/not-a-shipped-model")
    assert time.monotonic() - start < 2
    msg = str(info.value)
    assert "\n" not in msg
    assert "some-org/not-a-shipped-model" in msg
    assert "HF_HUB_OFFLINE" in msg
    assert "configs ship with perfcast" in msg and "bert-base-uncased" in msg
    assert "config.json" in msg
    assert len(msg) < 500  # a line, not the list of every shipped id
    with pytest.raises(ModelSpecError, match="did you mean meta-llama/Llama-2-7b-hf"):
        resolve_hf_config("meta-llama/Llama-2-7b")  # a near miss gets its suggestion


def test_shipped_id_never_touches_hub(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")

    def no_network(*a, **k):  # pragma: no cover - must not be reached
        raise AssertionError("network touched")

    monkeypatch.setattr(hf_config.socket, "create_connection", no_network)
    monkeypatch.setattr("transformers.AutoConfig.from_pretrained", no_network)
    assert resolve_hf_config("gpt2")[1] == "gpt2"


def test_unreachable_hub_is_a_model_spec_error(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    monkeypatch.setattr(hf_config, "_hub_reachable", lambda timeout=2.0: False)
    with pytest.raises(ModelSpecError, match="unreachable"):
        resolve_hf_config("some-org/model")

    def boom(*a, **k):
        raise OSError("connection reset\nby peer")

    monkeypatch.setattr(hf_config, "_hub_reachable", lambda timeout=2.0: True)
    monkeypatch.setattr("transformers.AutoConfig.from_pretrained", boom)
    with pytest.raises(ModelSpecError) as info:
        resolve_hf_config("some-org/model")
    assert "\n" not in str(info.value) and "connection reset by peer" in str(info.value)


# ----------------------------------------------------------------- inputs and wrapper


def test_seq_len_validation():
    config, _ = resolve_hf_config("gpt2")
    model = build_hf_model(config)
    with pytest.raises(ModelSpecError, match="seq-len 4096 exceeds gpt2's n_positions 1024"):
        hf_example_inputs(config, model, 1, 4096)
    args, kwargs = hf_example_inputs(config, model, 1, 1024)
    assert args[0].shape == (1, 1024) and kwargs == {}
    for bad in ((0, 8), (1, 0), (-1, 8), (1, 2.5)):
        with pytest.raises(ModelSpecError, match="positive integer"):
            hf_example_inputs(config, model, *bad)

    roberta, _ = resolve_hf_config("roberta-base")
    rmodel = build_hf_model(roberta)
    hf_example_inputs(roberta, rmodel, 1, 512)
    with pytest.raises(ModelSpecError, match="seq-len 513 exceeds roberta-base's max_position_embeddings 514"):
        hf_example_inputs(roberta, rmodel, 1, 513)

    opt, _ = resolve_hf_config("opt-1.3b")
    omodel = build_hf_model(opt)
    hf_example_inputs(opt, omodel, 1, 2048)
    with pytest.raises(ModelSpecError, match="2049"):
        hf_example_inputs(opt, omodel, 1, 2049)

    # Rotary / relative positions have no hard table: long sequences are allowed.
    llama, _ = resolve_hf_config("llama-2-7b")
    llama.num_hidden_layers = 1
    hf_example_inputs(llama, build_hf_model(llama), 1, 8192)
    deberta, _ = resolve_hf_config("deberta-v3-base")
    hf_example_inputs(deberta, build_hf_model(deberta), 1, 1024)


def test_example_inputs_are_meta_long_zeros():
    config, _ = resolve_hf_config("t5-small")
    model = build_hf_model(config)
    args, kwargs = hf_example_inputs(config, model, 3, 16)
    assert len(args) == 2 and kwargs == {}  # input_ids, decoder_input_ids
    for a in args:
        assert a.shape == (3, 16) and a.dtype == torch.long and a.device.type == "meta"


def _small_llama():
    config, _ = resolve_hf_config("llama-2-7b")
    config.num_hidden_layers = 2
    return config


@pytest.mark.parametrize(
    "make_config, vocab_or_hidden",
    [
        (lambda: resolve_hf_config("bert-base-uncased")[0], 30522),
        (_small_llama, 32000),
    ],
    ids=["bert-base", "llama-2-layers"],
)
def test_wrapper_under_fake_tensor_mode(make_config, vocab_or_hidden):
    config = make_config()
    model = build_hf_model(config)
    args, _ = hf_example_inputs(config, model, 2, 32)
    wrapper = HFWrapper(model)
    with FakeTensorMode(allow_non_fake_inputs=True):
        out = wrapper(*args)
    assert isinstance(out, torch.Tensor)
    assert tuple(out.shape) == (2, 32, vocab_or_hidden)
    assert out.dtype == torch.float32
    assert _all_meta(model)


def test_deberta_wrapper_under_fake_tensor_mode():
    # DeBERTa's padding check reads input values; the wrapper must skip it.
    config, _ = resolve_hf_config("deberta-v3-base")
    config.num_hidden_layers = 1
    model = build_hf_model(config)
    args, _ = hf_example_inputs(config, model, 1, 16)
    with FakeTensorMode(allow_non_fake_inputs=True):
        out = HFWrapper(model)(*args)
    assert tuple(out.shape) == (1, 16, 768)  # no architectures in the real config: DebertaV2Model


def test_attention_implementation_and_modes():
    bert, _ = resolve_hf_config("bert-base")
    assert build_hf_model(bert).config._attn_implementation == "sdpa"
    deberta, _ = resolve_hf_config("deberta-v3-base")
    assert build_hf_model(deberta).config._attn_implementation == "eager"
    train = build_hf_model(resolve_hf_config("gpt2")[0], "train")
    assert train.training and all(m.training for m in train.modules())
    with pytest.raises(ModelSpecError, match="mode"):
        build_hf_model(resolve_hf_config("gpt2")[0], "serve")


def test_dtype_defaults_to_float32_and_can_be_set():
    config, _ = resolve_hf_config("llama-2-7b")  # real config says float16
    config.num_hidden_layers = 1
    assert {p.dtype for p in build_hf_model(config).parameters()} == {torch.float32}
    config, _ = resolve_hf_config("llama-2-7b")
    config.num_hidden_layers = 1
    assert {p.dtype for p in build_hf_model(config, dtype=torch.bfloat16).parameters()} == {torch.bfloat16}


def test_load_hf_end_to_end():
    wrapper, args, model_id = load_hf("gpt2", batch_size=2, seq_len=None, mode="infer")
    assert model_id == "gpt2"
    assert isinstance(wrapper, HFWrapper) and not wrapper.training
    assert len(args) == 1 and tuple(args[0].shape) == (2, hf.DEFAULT_SEQ_LEN)
    assert _all_meta(wrapper)
    with FakeTensorMode(allow_non_fake_inputs=True):
        out = wrapper(*args)
    assert tuple(out.shape) == (2, hf.DEFAULT_SEQ_LEN, 50257)
    with pytest.raises(ModelSpecError, match="exceeds"):
        load_hf("gpt2", batch_size=1, seq_len=2048)


@pytest.mark.parametrize("spec", [
    "bert-base", "gpt2",
    # 1.4-1.6 s of CPU each; DeBERTa's wrapper under fake tensors stays fast (the test above)
    pytest.param("t5-small", marks=pytest.mark.slow),
    pytest.param("deberta-v3-base", marks=pytest.mark.slow)])
def test_torch_export_under_fake_tensor_mode(spec):
    wrapper, args, _ = load_hf(spec, batch_size=1, seq_len=32)
    with FakeTensorMode(allow_non_fake_inputs=True):
        ep = torch.export.export(wrapper, args, strict=False)
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert any("linear" in t or "addmm" in t or "mm" in t for t in targets)


# --------------------------------------------------------------------------- nonsense values
# Fuzz findings (issue #23, tests/test_fuzz.py): config values transformers accepts but that no
# model has. Each was an internal error (exit 1), a hang, a silent exit 0 or a "could not trace"
# (exit 3); each is now exit 2, one line, naming the key as the file spells it.


def _tiny_gpt2(tmp_path, **changes) -> str:
    """``hf:<path>`` of the shipped gpt2 config shrunk to 1 layer × 32 wide, with ``changes``
    (a value ``...`` deletes the key)."""
    data = json.loads((hf_config.CONFIG_DIR / "gpt2.json").read_text())
    data.update(n_layer=1, n_embd=32, n_head=2, vocab_size=128, n_positions=64)
    for key, value in changes.items():
        if value is ...:
            del data[key]
        else:
            data[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return f"hf:{path}"


def _inspect(spec: str, capsys, *extra: str) -> tuple[int, str]:
    from perfcast.faces.cli import main

    rc = main(["inspect", spec, "--json", "--seq-len", "8", *extra])
    return rc, capsys.readouterr().err.strip()


@pytest.mark.parametrize("changes, message", [
    ({"architectures": [1, 2]}, "'architectures' must be a list of class names"),
    ({"architectures": 7}, "'architectures' must be a list of class names"),
    ({"architectures": "GPT2LMHeadModel"}, "'architectures' must be a list of class names"),
    ({"model_type": ["gpt2"]}, "'model_type' must be a string"),
])
def test_malformed_type_fields_are_bad_input(tmp_path, capsys, changes, message):
    """Was ``internal error: TypeError: 'int' object is not iterable`` / ``attribute name must
    be string`` / ``unhashable type: 'list'`` (exit 1)."""
    rc, err = _inspect(_tiny_gpt2(tmp_path, **changes), capsys)
    assert rc == 2, err
    assert message in err and "internal error" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("changes, message", [
    ({"n_layer": 2**31}, "'n_layer' (layers) is 2,147,483,648, beyond perfcast's limit of 1,024"),
    ({"n_layer": 10**12}, "'n_layer' (layers) is 1,000,000,000,000, beyond"),
    ({"n_layer": -1}, "'n_layer' (layers) must be an integer ≥ 1, got -1"),
    ({"n_head": -1}, "'n_head' (attention heads) must be an integer ≥ 1, got -1"),
    ({"n_embd": 0}, "'n_embd' (a size) must be an integer ≥ 1, got 0"),
    ({"vocab_size": 0}, "'vocab_size' (a size) must be an integer ≥ 1, got 0"),
    ({"n_embd": 2**31}, "'n_embd' (a size) is 2,147,483,648, beyond perfcast's limit"),
    ({"activation_function": "gelux"}, "'activation_function' is 'gelux', an activation "
                                       "transformers does not know — did you mean 'gelu'?"),
    ({"attn_pdrop": 2}, "'attn_pdrop' is a dropout probability: it must be between 0 and 1"),
    ({"n_head": [2, 0]}, "'n_head' (attention heads) must be an integer ≥ 1, got 0"),
    ({"text_config": {"num_hidden_layers": 0, "num_attention_heads": 2}},
     "'text_config.num_hidden_layers' (layers) must be an integer ≥ 1, got 0"),
    ({"text_config": {"num_attention_heads": 12, "num_key_value_heads": 5}},
     "'text_config.num_attention_heads' (12) is not divisible by "
     "'text_config.num_key_value_heads' (5)"),
])
def test_nonsense_config_values_name_the_key(tmp_path, capsys, changes, message):
    """n_layer 2**31 hung (the tracer built every layer); n_layer -1 and vocab_size 0 answered
    (exit 0); n_head -1 was "could not trace" (exit 3); the others named no key."""
    t0 = time.perf_counter()
    rc, err = _inspect(_tiny_gpt2(tmp_path, **changes), capsys, "--mode", "train", "-b", "2")
    assert rc == 2, err
    assert message in err and len(err.splitlines()) == 1, err
    assert time.perf_counter() - t0 < 10  # refused before building anything


def test_checks_leave_values_at_the_edge_of_the_limits_alone():
    hf_config._check_values({"n_layer": hf_config.MAX_LAYERS, "n_embd": 16384, "n_head": 128,
                      "num_key_value_heads": 8, "vocab_size": 256000,
                      "n_positions": 10_485_760}, "edge.json")


@pytest.mark.slow  # imports every config module transformers has (~2 s of CPU, 12 s wall loaded)
def test_checks_leave_real_configs_alone():
    """No false alarm: the default config of every model type transformers has (820+, among
    them per-stage head lists, a dict of layer counts, 16,384 experts, a float position count,
    a head_dim of 0 meaning "derived") and values at the edge of the limits pass the checks.
    (Every shipped config also builds: test_every_shipped_config_builds_on_meta.)"""
    from transformers import CONFIG_MAPPING

    checked = 0
    for model_type in list(CONFIG_MAPPING.keys()):
        try:
            data = CONFIG_MAPPING[model_type]().to_dict()
        except Exception:  # noqa: BLE001 - a few need arguments; not ours to judge
            continue
        hf_config._check_values(data, model_type)
        checked += 1
    assert checked > 500
    test_checks_leave_values_at_the_edge_of_the_limits_alone()


@pytest.mark.parametrize("changes", [{"n_head": ...}, {"n_head": 3}])
def test_config_the_model_constructor_refuses(tmp_path, capsys, changes):
    """The boundary with transformers' own constructor: a config that passes perfcast's checks
    but that the model raises on (here 32 wide with 12 — the default — or 3 heads: GPT-2 needs
    a whole head size, Llama-style models floor it) is the config's fault: exit 2 saying so,
    with the model's own reason."""
    rc, err = _inspect(_tiny_gpt2(tmp_path, **changes), capsys)
    assert rc == 2, err
    assert "the transformers model GPT2LMHeadModel refused it: `embed_dim` must be divisible " \
           "by num_heads" in err
    assert len(err.splitlines()) == 1 and f"hf config {tmp_path.name}: " in err  # the model id
