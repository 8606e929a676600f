"""perfcast corpus: graphs written, index kept, resumable, --limit respected."""

import csv
import json

from perfcast.cli import main
from perfcast.graph import ModelGraph


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


def test_corpus_bad_input(tmp_path):
    assert main(["corpus", "--out", str(tmp_path), "--families", "no_such_family"]) == 2
    assert main(["corpus", "--out", str(tmp_path), "--workers", "0"]) == 2
    assert main(["corpus", "--out", str(tmp_path), "--modes", "fly"]) == 2
