"""TraPPM end to end on a tiny unlabeled corpus: load, pre-train (GAE, GraphMAE), checkpoint and
resume, the frozen encoder, the trappm predictor with a pre-trained and a random encoder."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from perfcast.errors import PerfcastError

SMALL = {"hidden": 16, "batch_size": 2, "seed": 3, "lr": 1e-2, "n_threads": 1}
FIT = {"hidden": 16, "fc_hidden": 16, "batch_size": 8, "epochs": 4, "lr": 3e-3}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    """Four tiny timm graphs (three infer at 64 px batch 1, one training graph) and one failure."""
    import csv
    from perfcast.frontends import build_graph
    from perfcast.store.corpus import INDEX_FIELDS, CorpusItem, build_corpus

    out = tmp_path_factory.mktemp("corpus")
    items = [CorpusItem.of(m, m.split(":")[1], 1, 64) for m in
             ("timm:resnet10t", "timm:mobilenetv3_small_050", "timm:lcnet_050")]
    items.append(CorpusItem.of("timm:no_such_model_here", "none", 1, 64))
    counts = build_corpus(items, out, workers=1)
    assert counts["ok"] == 3 and counts["failed"] == 1, (out / "index.csv").read_text()
    # the training graph is built in this process: build_corpus forks its workers, and a forked
    # child cannot run autograd once the parent has (earlier tests in the same session)
    item = CorpusItem.of("timm:resnet10t", "resnet", 2, 64, "train")
    key = item.key()
    g = build_graph(item.workload)
    g.save(out / "graphs" / f"{key}.npz")
    with open(out / "index.csv", "a", newline="") as f:
        csv.DictWriter(f, INDEX_FIELDS, extrasaction="ignore").writerow(
            {"key": key, "model": item.workload.spec, "family": item.family, "batch_size": 2,
             "input_size": 64, "mode": "train", "precision": "fp32", "nodes": g.num_nodes,
             "edges": g.num_edges, "status": "ok"})
    return out


@pytest.fixture(scope="module")
def graphs(corpus_dir):
    from perfcast.pretrain import load_corpus

    return load_corpus(corpus_dir)


@pytest.fixture(scope="module")
def gae_dir(graphs, tmp_path_factory):
    from perfcast.pretrain import pretrain

    out = tmp_path_factory.mktemp("gae")
    pretrain(graphs, out, method="gae", epochs=5, **SMALL)
    return out


@pytest.mark.slow
def test_load_corpus_matches_graph_data(corpus_dir, graphs, tmp_path):
    import csv

    import torch

    from perfcast.graph import ModelGraph
    from perfcast.features.records import graph_data
    from perfcast.pretrain import load_corpus, node_stats

    rows = [r for r in csv.DictReader(open(corpus_dir / "index.csv")) if r["status"] == "ok"]
    assert len(graphs) == len(rows) == 4
    for r, d in zip(rows, graphs):
        ref = graph_data(ModelGraph.load(corpus_dir / "graphs" / f"{r['key']}.npz"))
        assert set(d.keys()) == {"x", "edge_index", "batch_size"}
        assert d.batch_size == ModelGraph.load(corpus_dir / "graphs" / f"{r['key']}.npz").meta.batch_size
        assert d.x.dtype == torch.float16  # half the RAM; features are logs and one-hots
        np.testing.assert_allclose(d.x.float().numpy(), ref.x.numpy(), rtol=1e-3, atol=1e-3)
        assert np.array_equal(d.edge_index.numpy(), ref.edge_index.numpy())
    assert len(load_corpus(corpus_dir, limit=2, workers=2)) == 2
    mean, std = node_stats(graphs)
    assert mean.shape == std.shape == (graphs[0].x.shape[1],) and (std >= 1e-2).all()
    # a plain directory of .npz graphs (no index.csv) also works
    plain = tmp_path / "plain"
    shutil.copytree(corpus_dir / "graphs", plain)
    assert len(load_corpus(plain)) == 4
    with pytest.raises(PerfcastError, match="not found"):
        load_corpus(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PerfcastError, match="no graphs"):
        load_corpus(tmp_path / "empty")


@pytest.mark.slow
def test_gae_pretraining_learns_and_checkpoints(gae_dir, graphs):
    from perfcast.features.records import FEATURE_LAYOUT_VERSION
    from perfcast.pretrain import load_encoder
    from perfcast.pretrain.checkpoint import collate, message_edges

    meta = json.loads((gae_dir / "encoder.json").read_text())
    losses = [h["loss"] for h in meta["history"]]
    assert meta["epoch"] == 5 and [h["epoch"] for h in meta["history"]] == [1, 2, 3, 4, 5]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert meta["method"] == "gae" and meta["params"]["hidden"] == 16
    assert meta["feature_layout"] == FEATURE_LAYOUT_VERSION and meta["corpus"]["graphs"] == 4
    assert len(meta["node_mean"]) == meta["in_dim"] == graphs[0].x.shape[1]
    for f in ("encoder.safetensors", "optimizer.safetensors"):
        assert (gae_dir / f).stat().st_size > 0
    assert not list(gae_dir.glob(".*tmp"))

    enc = load_encoder(gae_dir)
    assert enc.method == "gae" and enc.dim == 16 and not enc.module.training
    x, ei, batch = collate([d.x for d in graphs], [message_edges(d.edge_index) for d in graphs])
    emb = enc.embed(x, ei, batch, len(graphs))
    assert emb.shape == (4, 16) and np.isfinite(emb.numpy()).all() and not emb.requires_grad
    np.testing.assert_allclose(enc.embed_graphs(graphs).numpy(), emb.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.slow  # a training recipe (the fast tier: the encoder and corpus tests above)
def test_graphmae_pretraining(graphs, tmp_path):
    from perfcast.pretrain import load_encoder, pretrain

    res = pretrain(graphs, tmp_path, method="graphmae", epochs=2, **SMALL)
    assert res.epochs == 2 and res.method == "graphmae" and res.encoder_mb > 0
    losses = [h["loss"] for h in res.history]
    assert np.isfinite(losses).all() and all(0 <= v <= 2 ** 2 for v in losses)  # (1 - cos)^2
    enc = load_encoder(tmp_path)
    assert enc.method == "graphmae" and type(enc.module.convs[0]).__name__ == "GINConv"
    assert enc.embed_graphs(graphs).shape == (4, 16)
    # the pretext head (mask token, decoder) is kept for resuming, not in encoder.safetensors
    from safetensors.torch import load_file

    assert any(k.startswith("pretext.") for k in load_file(str(tmp_path / "optimizer.safetensors")))
    assert not any("decoder" in k for k in load_file(str(tmp_path / "encoder.safetensors")))


def _weights(path):
    from safetensors.torch import load_file

    return {k: v.numpy() for k, v in load_file(str(path / "encoder.safetensors")).items()}


@pytest.mark.slow  # a pre-training recipe stopped and resumed
@pytest.mark.parametrize("method", ["gae", "graphmae"])
def test_resume_continues_exactly(graphs, tmp_path, method):
    from perfcast.pretrain import pretrain

    a, b = tmp_path / "a", tmp_path / "b"
    first = pretrain(graphs, a, method=method, epochs=2, **SMALL)
    two = _weights(a)
    res = pretrain(graphs, a, method=method, epochs=4, **SMALL)
    assert res.epochs == 4 and res.epochs_run == 2
    assert [h["epoch"] for h in res.history] == [1, 2, 3, 4]
    assert res.history[:2] == first.history
    four = _weights(a)
    assert any(not np.array_equal(two[k], four[k]) for k in two)  # it trained on
    straight = pretrain(graphs, b, method=method, epochs=4, **SMALL)  # uninterrupted run
    np.testing.assert_allclose([h["loss"] for h in straight.history],
                               [h["loss"] for h in res.history], rtol=1e-5)
    for k, v in _weights(b).items():
        np.testing.assert_allclose(four[k], v, rtol=1e-4, atol=1e-6)
    # nothing left to do; another architecture needs --no-resume; --no-resume starts over
    assert pretrain(graphs, a, method=method, epochs=4, **SMALL).epochs_run == 0
    with pytest.raises(PerfcastError, match="hidden=16"):
        pretrain(graphs, a, method=method, epochs=5, **{**SMALL, "hidden": 8})
    other = "graphmae" if method == "gae" else "gae"
    with pytest.raises(PerfcastError, match="no-resume"):
        pretrain(graphs, a, method=other, epochs=5, **SMALL)
    again = pretrain(graphs, a, method=method, epochs=1, resume=False, **{**SMALL, "hidden": 8})
    assert again.epochs == 1 and json.loads((a / "encoder.json").read_text())["epoch"] == 1


def test_interrupt_keeps_last_complete_checkpoint(graphs, tmp_path):
    from perfcast.pretrain import load_encoder, pretrain

    pretrain(graphs, tmp_path, epochs=2, **SMALL)
    before = _weights(tmp_path)

    def stop(i, n, info):
        if info.get("epoch") == 3 and i == n - 1:  # mid-way through epoch 3
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pretrain(graphs, tmp_path, epochs=3, progress=stop, **SMALL)
    assert json.loads((tmp_path / "encoder.json").read_text())["epoch"] == 2
    after = _weights(tmp_path)
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert load_encoder(tmp_path).meta["epoch"] == 2
    assert pretrain(graphs, tmp_path, epochs=3, **SMALL).epochs == 3


def test_encoder_errors(gae_dir, tmp_path):
    from perfcast.pretrain import load_encoder, pretrain

    with pytest.raises(PerfcastError, match="not a pre-trained encoder"):
        load_encoder(tmp_path)
    bad = tmp_path / "old"
    shutil.copytree(gae_dir, bad)
    meta = json.loads((bad / "encoder.json").read_text())
    meta["graph_layout"] = "0-ops1"
    (bad / "encoder.json").write_text(json.dumps(meta))
    with pytest.raises(PerfcastError, match="retrain it"):
        load_encoder(bad)
    with pytest.raises(PerfcastError, match="unknown pre-training method"):
        pretrain([], tmp_path / "x", method="vae")


def test_trappm_with_pretrained_encoder(gae_dir, tiny_feature_set, tmp_path):
    from perfcast.predictors import create_predictor, load_predictor

    fs = tiny_feature_set
    enc_copy = tmp_path / "enc"
    shutil.copytree(gae_dir, enc_copy)
    m = create_predictor("trappm", encoder=str(enc_copy), **FIT).fit(fs)
    assert m.trained_on_["encoder"]["method"] == "gae"
    assert m.trained_on_["encoder"]["random"] is False and m.trained_on_["encoder"]["epoch"] == 5
    pred = m.predict(fs)
    assert pred.shape == (len(fs), len(m.targets_)) and np.isfinite(pred).all() and (pred > 0).all()
    losses = [h["train_loss"] for h in m.history_]
    assert len(losses) == 4 and losses[-1] < losses[0]
    # deterministic
    np.testing.assert_array_equal(
        create_predictor("trappm", encoder=str(enc_copy), **FIT).fit(fs).predict(fs), pred)
    m.save(tmp_path / "p")
    shutil.rmtree(enc_copy)  # a saved trappm carries its encoder
    back = load_predictor(tmp_path / "p")
    np.testing.assert_allclose(back.predict(fs), pred, rtol=1e-6)
    cfg = json.loads((tmp_path / "p" / "config.json").read_text())
    assert cfg["state"]["encoder"]["method"] == "gae" and cfg["state"]["encoder"]["epoch"] == 5
    # fine-tuning a loaded trappm keeps its encoder (the directory is gone)
    back.set_params(warm_start=True, epochs=2).fit(fs.subset(np.arange(10)))
    assert len(back.history_) == 6 and np.isfinite(back.predict(fs)).all()


def test_trappm_random_encoder_ablation(tiny_feature_set, gae_dir, tmp_path):
    from perfcast.predictors import create_predictor, load_predictor

    fs = tiny_feature_set
    rnd = create_predictor("trappm", encoder="random", encoder_hidden=16, **FIT).fit(fs)
    info = rnd.trained_on_["encoder"]
    assert info == {"method": "gae", "hidden": 16, "random": True, "epoch": 0}
    pred = rnd.predict(fs)
    assert np.isfinite(pred).all() and (pred > 0).all()
    rnd.save(tmp_path / "r")
    np.testing.assert_allclose(load_predictor(tmp_path / "r").predict(fs), pred, rtol=1e-6)
    mae = create_predictor("trappm", encoder=None, encoder_method="graphmae", encoder_hidden=16,
                           **FIT).fit(fs)
    assert type(mae.encoder_.module.convs[0]).__name__ == "GINConv"
    pre = create_predictor("trappm", encoder=str(gae_dir), **FIT).fit(fs)
    assert not np.allclose(pre.predict(fs), pred)
    with pytest.raises(PerfcastError, match="not a pre-trained encoder"):
        create_predictor("trappm", encoder=str(tmp_path / "none"), **FIT).fit(fs)


def test_cli_pretrain(corpus_dir, tmp_path, capsys):
    from perfcast.faces.cli import main

    args = ["pretrain", "--corpus", str(corpus_dir), "--out", str(tmp_path / "e"), "--hidden", "8",
            "--batch-size", "3", "--workers", "1", "--json"]
    assert main([*args, "--epochs", "1"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["epochs"] == 1 and first["graphs"] == 4 and first["encoder_mb"] > 0
    assert main([*args, "--epochs", "2", "--method", "gae"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["epochs"] == 2 and second["epochs_run"] == 1 and np.isfinite(second["final_loss"])
    assert main(["pretrain", "--corpus", str(tmp_path / "none"), "--out", str(tmp_path / "x")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main([*args, "--method", "vae"]) == 2


def test_shipped_encoder_is_the_default(tiny_feature_set):
    """The corpus encoder ships with the package (TraPPM's GAE, c = 128) and is trappm's default."""
    from perfcast.features.encode import GRAPH_LAYOUT_VERSION as FEATURE_LAYOUT_VERSION
    from perfcast.predictors import create_predictor
    from perfcast.pretrain import load_encoder
    from perfcast.predictors.encoder import shipped_encoder_dir

    d = shipped_encoder_dir()
    enc = load_encoder(d)
    assert enc.meta["method"] == "gae" and enc.dim == 128 and enc.meta["epoch"] >= 1
    assert enc.meta["graph_layout"] == FEATURE_LAYOUT_VERSION
    assert (d / "encoder.safetensors").stat().st_size < 2_000_000
    assert not (d / "optimizer.safetensors").exists()  # resuming state is not shipped
    m = create_predictor("trappm", **FIT).fit(tiny_feature_set)
    assert m.trained_on_["encoder"]["random"] is False
    assert m.trained_on_["encoder"]["source"] == "shipped"
