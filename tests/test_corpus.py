"""perfcast corpus: graphs written, index kept, resumable, --limit respected."""

import csv
import json

import pytest

from perfcast.faces.cli import main
from perfcast.graph import ModelGraph


@pytest.mark.slow  # fast-tier budget: the fast tier keeps a cheaper test of the same command/room
def test_corpus_build_limit_and_resume(tmp_path, capsys):
    args = ["corpus", "--out", str(tmp_path), "--families", "resnet", "--variants-per-family", "1",
            "--input-sizes", "64", "--batch-sizes", "1,2", "--workers", "1", "--json"]
    assert main([*args, "--limit", "1"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["planned"] == 2 and first["ok"] == 1
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["skipped"] == 1 and second["ok"] == 1
    rows = list(csv.DictReader(open(tmp_path / "index.csv")))
    assert len(rows) == 2 and {r["batch_size"] for r in rows} == {"1", "2"}
    for r in rows:
        g = ModelGraph.load(tmp_path / "graphs" / f"{r['key']}.npz")
        assert g.num_nodes == int(r["nodes"]) and g.meta.batch_size == int(r["batch_size"])
    # a failed line is skipped by a re-run, built again with --retry-failed (one line per graph)
    (tmp_path / "graphs" / f"{rows[0]['key']}.npz").unlink()
    rows[0].update(nodes="", edges="", macs="", params="", status="failed",
                   reason="RuntimeError: (test)")
    with open(tmp_path / "index.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == 2
    assert main([*args, "--retry-failed"]) == 0
    third = json.loads(capsys.readouterr().out)
    assert third["skipped"] == 1 and third["ok"] == 1
    again = list(csv.DictReader(open(tmp_path / "index.csv")))
    assert len(again) == 2 and {r["status"] for r in again} == {"ok"}
    assert again[0] == rows[1] and again[1]["key"] == rows[0]["key"]
    assert (tmp_path / "graphs" / f"{rows[0]['key']}.npz").exists()


def test_corpus_bad_input(tmp_path):
    assert main(["corpus", "--out", str(tmp_path), "--families", "no_such_family"]) == 2
    assert main(["corpus", "--out", str(tmp_path), "--workers", "0"]) == 2
    assert main(["corpus", "--out", str(tmp_path), "--modes", "fly"]) == 2


def _signature(g: ModelGraph):
    nodes = [(n.op, n.input_shapes, n.output_shapes, n.flops, n.macs, n.params, n.output_bytes,
              n.attrs, n.phase) for n in g.nodes]
    edges = [(e.src, e.dst, e.bytes, e.kind) for e in g.edges]
    m = g.meta
    return nodes, edges, m.batch_size, m.input_shapes, m.total_params, m.model_id


@pytest.mark.slow  # graph for graph equality at several batches (the sweep below: fast)
def test_symbolic_batch_graphs_equal_one_trace_per_batch():
    """One symbolic-batch export gives, at every batch, the graph a trace at that batch gives —
    CNN (conv/bn/pool), ViT (class token expanded to the batch, attention) and a pure MLP."""
    from perfcast.frontends import build_graph, build_graphs
    from perfcast.workload import Workload

    for name, size in (("resnet10t", 64), ("vit_tiny_patch16_224", 64), ("mixer_s32_224", 64)):
        graphs = build_graphs(Workload.of(f"timm:{name}", input_size=size), [2, 5, 32])
        assert sorted(graphs) == [2, 5, 32]
        for b, g in graphs.items():
            ref = build_graph(Workload.of(f"timm:{name}", batch_size=b,
                                           input_size=(3, size, size)))
            assert _signature(g) == _signature(ref), (name, b)
        assert graphs[32].activation_bytes > graphs[2].activation_bytes


def test_symbolic_batch_rejects_batch_one():
    import pytest

    from perfcast.errors import TraceError
    from perfcast.frontends import build_graphs
    from perfcast.workload import Workload

    with pytest.raises(TraceError, match=">= 2"):
        build_graphs(Workload.of("timm:resnet10t", input_size=64), [1, 4])


def test_corpus_batch_sweep_uses_one_trace(tmp_path, capsys):
    args = ["corpus", "--out", str(tmp_path), "--families", "resnet", "--variants-per-family", "1",
            "--input-sizes", "64", "--batch-sizes", "4,16", "--workers", "1", "--json"]
    assert main(args) == 0  # (batch 1, a trace of its own: test_corpus_build_limit_and_resume)
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] == 2
    rows = {int(r["batch_size"]): r for r in csv.DictReader(open(tmp_path / "index.csv"))}
    # batch 4 and 16 share one trace: the same time share is recorded for both
    assert rows[4]["seconds"] == rows[16]["seconds"]
    for b, r in rows.items():
        g = ModelGraph.load(tmp_path / "graphs" / f"{r['key']}.npz")
        assert g.meta.batch_size == b and g.meta.input_shapes[0][0] == b
