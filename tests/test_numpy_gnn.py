"""Issue #40, deliverable 1: the GNN predictors answer in numpy (:mod:`perfcast.predictors.
numpy_gnn`) what their torch networks compute.

* every shipped model of a GNN kind (dippm, nnlqp, trappm with its frozen encoder, dnnperf's
  ANEE, gnnllm with MiniLM and its LoRA adapters) against its own torch forward on real graphs (the session's small CPU feature set);
* the layers no shipped model uses (GCN, GAT, GIN convolutions; GraphMAE's GIN encoder; ANEE
  without attention and with the scaled readout) on networks fitted for one epoch here;
* a fitted predictor answers the same before and after a save / load round trip, and a loaded
  one builds no torch network to answer.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

GNN_KINDS = ("dippm", "dippm-gcn", "dippm-gat", "dippm-gin", "nnlqp", "trappm", "dnnperf", "gnnllm")


def _shipped_gnns() -> list[str]:
    from perfcast.paths import package_data

    out = []
    for cfg in sorted(package_data("shipped").glob("*/config.json")):
        if json.loads(cfg.read_text()).get("predictor") in GNN_KINDS:
            out.append(cfg.parent.name)
    return out


def _torch_answers(pred, fs) -> np.ndarray:
    """The predictor's answers through its torch network(s) (eval mode), as before issue #40."""
    from perfcast.predictors.dnnperf import DNNPerf
    from perfcast.predictors.gnnllm import GNNLLM

    if isinstance(pred, DNNPerf):
        g = pred._normalised(pred._graphs(fs))
        z = np.stack([pred._eval(net, g) for net in pred.nets_], axis=1)
    elif isinstance(pred, GNNLLM):  # GIN + projection + MiniLM with peft's LoRA + head
        z = pred._eval_z(pred._tensors(fs, None)).double().numpy()
    else:
        z = pred._eval_z(pred.net_, pred._tensors(fs, None)).double().numpy()
    return pred.target_scaler_.inverse(z)


@pytest.fixture(scope="module")
def few_records(tiny_feature_set):
    """One record per graph of the session's small real feature set (6 graphs: CNNs and a
    ViT at 3×64×64), batch 8, on an RTX 3090 in training — a device dnnperf knows."""
    fs = tiny_feature_set
    _, first = np.unique(fs.graph_index, return_index=True)
    sub = fs.subset(np.sort(first))
    sub.rows = sub.rows.assign(device="rtx3090")
    return sub


def test_every_shipped_gnn_answers_in_numpy_what_its_torch_network_computes(few_records):
    from perfcast.predictors import load_predictor
    from perfcast.paths import package_data

    shipped = _shipped_gnns()
    kinds = set()
    for name in shipped:
        pred = load_predictor(package_data("shipped", name))
        kinds.add(pred.name)
        assert pred.__dict__.get("_net") is None and pred.__dict__.get("_nets") is None, name
        ours = pred._predict(few_records)
        assert pred.__dict__.get("_net") is None and pred.__dict__.get("_nets") is None, \
            f"{name}: answering built the torch network"
        theirs = _torch_answers(pred, few_records)
        assert np.isfinite(ours).all() and ours.shape == theirs.shape == (len(few_records), 1)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, err_msg=name)
    assert {"dippm", "nnlqp", "trappm", "dnnperf", "gnnllm"} <= kinds, kinds


@pytest.mark.parametrize("kind, params", [
    ("dippm-gcn", {}), ("dippm-gat", {}), ("dippm-gin", {}),
    ("trappm", {"encoder": "random", "encoder_method": "graphmae", "encoder_hidden": 16,
                "encoder_layers": 2}),
    ("dnnperf", {"attention": False, "readout_norm": "scale", "hidden": 16, "mlp": "16"}),
    ("dnnperf", {"readout": "mean", "rounds": 1, "hidden": 16, "mlp": "16,8"}),
])
def test_every_layer_in_numpy_equals_pyg_and_survives_save_and_load(kind, params, few_records,
                                                                     tmp_path):
    from perfcast.predictors import create_predictor, load_predictor

    fit = dict(epochs=1, hidden=16) if kind != "dnnperf" else dict(epochs=1, batch_size=4)
    pred = create_predictor(kind, **{**fit, **params}).fit(few_records, targets=["time_ms"])
    fitted = pred.predict(few_records)
    np.testing.assert_allclose(pred._predict(few_records), _torch_answers(pred, few_records),
                               rtol=1e-5)
    pred.save(tmp_path / kind)
    loaded = load_predictor(tmp_path / kind)
    assert np.array_equal(loaded.predict(few_records), fitted)
    np.testing.assert_allclose(loaded._predict(few_records),
                               _torch_answers(loaded, few_records), rtol=1e-5)


def test_saved_weights_that_do_not_match_the_architecture_are_one_line(tmp_path):
    from safetensors.numpy import load_file, save_file

    from perfcast.errors import PerfcastError
    from perfcast.paths import package_data
    from perfcast.predictors import load_predictor

    src = package_data("shipped", "rtx4090-infer-amp-dippm")
    dst = tmp_path / "broken"
    dst.mkdir()
    (dst / "config.json").write_text((src / "config.json").read_text())
    tensors = load_file(str(src / "weights.safetensors"))
    tensors["net.fcs.0.weight"] = tensors["net.fcs.0.weight"][:, :-1].copy()
    save_file(tensors, str(dst / "weights.safetensors"))
    with pytest.raises(PerfcastError, match="do not match the architecture.*fcs.0.weight"):
        load_predictor(dst)
