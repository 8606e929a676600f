"""Mixture-of-experts graphs: Switch Transformers traces (infer and train) on meta, its experts
cost tokens × k × (one expert) — as executed, under the balanced-routing assumption of
:mod:`perfcast.zoo.moe` — and its parameters count every expert (as stored)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from perfcast.frontends import build_graph
from perfcast.workload import Workload
from perfcast.zoo.moe import (
    ROUTING_ASSUMPTION,
    expected_expert_tokens,
    patch_for_tracing,
)

SWITCH = "neusight/model_configs/switchxl4.json"
#: NeuSight's switchxl4, shrunk: 2 + 2 layers, one sparse (MoE) layer in each stack
SMALL = {"num_layers": 2, "num_decoder_layers": 2, "num_sparse_encoder_layers": 1,
         "num_sparse_decoder_layers": 1, "d_model": 64, "d_ff": 256, "num_heads": 2, "d_kv": 32,
         "vocab_size": 1000}
BATCH, SEQ = 2, 16


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _switch_config(tmp_path, **changes) -> tuple[str, dict]:
    from perfcast.paths import public_data_dir

    cfg = json.loads((public_data_dir() / SWITCH).read_text())
    cfg.update(SMALL, **changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return f"hf:{path}", cfg


@pytest.fixture(scope="module")
def small_switch(tmp_path_factory):
    """(spec, config dict, inference graph) of the shrunk switchxl4 at BATCH x SEQ (tests using
    it are marked ``shared_data(SWITCH)``: skipped before this runs when the data is absent)."""
    spec, cfg = _switch_config(tmp_path_factory.mktemp("switch"))
    return spec, cfg, build_graph(Workload.of(spec, batch_size=BATCH, seq_len=SEQ))


def _expert_linears(g, cfg):
    """Forward linear nodes of the experts: 2-D token rows (gathered by the router) times a
    [d_ff, d_model] / [d_model, d_ff] weight (dense layers and attention see [batch, seq, d])."""
    w = {(cfg["d_ff"], cfg["d_model"]), (cfg["d_model"], cfg["d_ff"])}
    return [n for n in g.nodes if n.op == "linear" and len(n.input_shapes) > 1
            and len(n.input_shapes[0]) == 2 and tuple(n.input_shapes[1]) in w]


def test_expected_expert_tokens():
    assert expected_expert_tokens(2, 16, 4) == [8, 8, 8, 8]
    assert expected_expert_tokens(1, 10, 4) == [3, 3, 2, 2]  # remainder to the first experts
    assert sum(expected_expert_tokens(3, 10, 4, top_k=2)) == 3 * 10 * 2  # tokens × k in total
    assert expected_expert_tokens(2, 512, 4, capacity=64) == [128] * 4  # capped per sequence
    assert expected_expert_tokens(1, 2, 4) == [1, 1, 0, 0]
    with pytest.raises(ValueError):
        expected_expert_tokens(1, 16, 0)


@pytest.mark.shared_data(SWITCH)
def test_switch_infer_experts_cost_tokens_times_k(small_switch):
    spec, cfg, g = small_switch
    assert not g.meta.unmapped_ops
    E, k, d, f = cfg["num_experts"], 1, cfg["d_model"], cfg["d_ff"]
    sparse_layers = cfg["num_sparse_encoder_layers"] + cfg["num_sparse_decoder_layers"]
    tokens = BATCH * SEQ  # per stack (encoder and decoder inputs are both SEQ long)
    one_expert_macs_per_token = 2 * d * f  # wi then wo
    experts = _expert_linears(g, cfg)
    assert len(experts) == sparse_layers * E * 2  # every expert is in the graph ...
    executed = sum(n.macs for n in experts)
    assert executed == pytest.approx(sparse_layers * tokens * k * one_expert_macs_per_token)
    assert executed < sparse_layers * tokens * E * one_expert_macs_per_token  # ... not dense
    for n in experts:  # each expert runs on its expected share: tokens × k / E
        assert n.input_shapes[0][0] == tokens * k // E
    # the routing nodes say what was assumed
    routing = [n for n in g.nodes if "routed_tokens" in n.attrs]
    assert len(routing) == sparse_layers * E
    assert all(n.op == "nonzero" and n.attrs["routed_tokens"] == tokens * k // E
               and n.attrs["size_assumption"] == ROUTING_ASSUMPTION for n in routing)
    # parameters are stored for every expert: the graph reads each expert's weights, and the
    # total counts them all (router + E experts per sparse layer)
    assert sum(n.params for n in experts) == sparse_layers * E * 2 * d * f
    from perfcast.zoo import build_model

    module = build_model(Workload.of(spec, batch_size=1, seq_len=4), "meta").module
    stored = sum(p.numel() for p in module.parameters())  # tied embedding once
    experts_stored = sum(p.numel() for name, p in module.named_parameters()
                         if ".experts.expert_" in name)
    assert experts_stored == sparse_layers * E * 2 * d * f
    assert g.meta.total_params == g.params == stored


@pytest.mark.shared_data(SWITCH)
def test_switch_capacity_caps_expert_tokens(tmp_path):
    spec, cfg = _switch_config(tmp_path, expert_capacity=2)
    g = build_graph(Workload.of(spec, batch_size=BATCH, seq_len=SEQ))
    experts = _expert_linears(g, cfg)
    assert {n.input_shapes[0][0] for n in experts} == {BATCH * 2}  # min(16 / 4, 2) per sequence


@pytest.mark.slow  # fast-tier budget: the fast tier keeps a cheaper test of the same command/room
@pytest.mark.shared_data(SWITCH)
def test_switch_train_traces(small_switch):
    spec, cfg, infer = small_switch
    g = build_graph(Workload.of(spec, batch_size=BATCH, seq_len=SEQ, mode="train",
                                optimizer="sgd"))
    assert not g.meta.unmapped_ops
    phases = {n.phase for n in g.nodes}
    assert phases == {"forward", "backward", "optimizer"}
    fwd_macs = g.forward_macs()
    assert fwd_macs == pytest.approx(infer.macs)
    bwd_macs = sum(n.macs for n in g.nodes if n.phase == "backward")
    assert bwd_macs == pytest.approx(2 * fwd_macs, rel=0.02)  # dX and dW of every matmul
    # the experts' backward matmuls also run on the routed tokens only
    E, d, f = cfg["num_experts"], cfg["d_model"], cfg["d_ff"]
    rows = BATCH * SEQ // E
    expert_bwd = [n for n in g.nodes if n.phase == "backward" and n.op == "matmul"
                  and sorted(n.output_shapes[0]) in ([d, f], [rows, d], [rows, f])
                  and rows in (n.input_shapes[0] + n.input_shapes[1])]
    assert len(expert_bwd) == 2 * E * 2 * 2  # 2 sparse layers × E experts × 2 linears × (dX, dW)
    assert sum(n.macs for n in expert_bwd) == pytest.approx(2 * 2 * BATCH * SEQ * 2 * d * f)
    # one update per stored parameter tensor, every expert included (tied embedding once)
    updates = [n for n in g.nodes if n.phase == "optimizer"]
    assert sum(n.params for n in updates) == g.meta.total_params == infer.meta.total_params
    assert sum(1 for n in updates if ".experts.expert_" in n.attrs["param"]) == 2 * E * 2
    assert sum(1 for n in g.nodes if "routed_tokens" in n.attrs) == 2 * E


@pytest.mark.slow
def test_tied_embeddings_train(tmp_path):
    """A tied weight (GPT-2's lm_head = wte) is one parameter of the training graph."""
    from perfcast.zoo.hf import resolve_hf_config

    cfg = resolve_hf_config("gpt2")[0].to_dict()
    cfg.update(n_layer=1, n_embd=32, n_head=2, vocab_size=500, n_positions=64)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    g = build_graph(Workload.of(f"hf:{path}", batch_size=1, seq_len=8, mode="train"))
    updates = [n for n in g.nodes if n.phase == "optimizer"]
    assert sum(n.params for n in updates) == g.meta.total_params
    assert sum(1 for n in updates if n.attrs["param"].endswith(("wte.weight", "lm_head.weight"))) == 1


@pytest.mark.slow
def test_grouped_mm_experts_cost_tokens_times_k():
    """Experts stored as 3-D tensors (Mixtral …) run through transformers' grouped matmul over
    the tokens × k selected rows: counted as such, forward and backward."""
    from transformers import MixtralConfig

    from perfcast.frontends.torch_frontend import graph_from_module
    from perfcast.zoo.hf import HFWrapper, build_hf_model, hf_example_inputs

    d, f, E, k = 32, 64, 8, 2
    cfg = MixtralConfig(hidden_size=d, intermediate_size=f, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, num_local_experts=E,
                        num_experts_per_tok=k, vocab_size=100, architectures=["MixtralForCausalLM"])
    for mode in ("infer", "train"):
        model = build_hf_model(cfg, mode)
        if getattr(model.config, "_experts_implementation", None) != "grouped_mm":
            pytest.skip("transformers does not run these experts through grouped_mm here")
        args, _ = hf_example_inputs(cfg, model, 2, 8)
        g = graph_from_module(HFWrapper(model), args, mode=mode)
        assert not g.meta.unmapped_ops
        grouped = [n for n in g.nodes if "grouped_mm" in n.target]
        tokens = 2 * 8
        fwd = sum(n.macs for n in grouped if n.phase == "forward")
        assert fwd == tokens * k * (d * 2 * f + f * d)  # gate+up, then down
        if mode == "train":
            assert sum(n.macs for n in grouped if n.phase == "backward") == 2 * fwd


def test_non_moe_models_are_not_patched():
    from perfcast.zoo.hf import build_hf_model, resolve_hf_config

    cfg = resolve_hf_config("gpt2")[0]
    cfg.n_layer = 1
    model = build_hf_model(cfg, "infer")
    assert patch_for_tracing(model, cfg) == 0
