"""Issue #40, deliverable 2: a cached prediction through the command line imports no torch,
torch_geometric or pandas — on every default route: a GPU with its own labels (the RTX 4090,
answered by the GraphSAGE ``dippm``), a GPU without (the H100, ``crossdevice``'s per-kernel
composition), ``--mode generate`` (the LLM models), this CPU (``kernelsum``) and an ``hf:``
graph asked past its config's positions (the note reads the config without transformers).

The graphs and the memory simulation are put into the session's cache first (in this process);
a new process then runs the four commands through :func:`perfcast.faces.cli.main` and reports which
of the heavy packages each one imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "torch_geometric", "pandas")
IMAGE = ["timm:resnet10t", "--input-size", "3,64,64", "--batch-size", "8"]
COMMANDS = {
    "rtx4090 (dippm)": ["predict", *IMAGE, "--device", "rtx4090", "--precision", "amp"],
    "h100-sxm (crossdevice)": ["predict", *IMAGE, "--device", "h100-sxm"],
    "generate (llm)": ["predict", "hf:meta-llama/Llama-2-7b-hf", "--device", "h100-sxm",
                       "--mode", "generate", "--input-len", "128", "--output-len", "32",
                       "--batch-size", "4"],
    "cpu (kernelsum)": ["predict", *IMAGE, "--device", "cpu", "--threads", "1"],
}

PROBE = """
import contextlib, io, json, sys
from perfcast.faces.cli import main
commands, heavy = json.loads(sys.argv[1]), %r
out = {}
for name, argv in commands.items():
    before = {m for m in heavy if m in sys.modules}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main([*argv, "--json"])
    answer = json.loads(buf.getvalue()) if rc == 0 else None
    out[name] = {"rc": rc, "imported": sorted({m for m in heavy if m in sys.modules} - before),
                 "time_by": (answer or {}).get("predictor", {}).get("time_ms"),
                 "numpy_gnn": "perfcast.predictors.numpy_gnn" in sys.modules}
print(json.dumps(out))
""" % (HEAVY,)


#: A two-layer Llama of 256 positions, asked for 512: an hf: graph on the graph route, with the
#: note its config's positions give (read without transformers).
TINY_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "intermediate_size": 172, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 2, "vocab_size": 128, "max_position_embeddings": 256,
              "rms_norm_eps": 1e-6, "tie_word_embeddings": False}


def test_cached_predictions_import_no_torch_pyg_or_pandas(tmp_path):
    from perfcast.faces.cli import main
    from tests.helpers import hf_spec

    commands = {**COMMANDS, "hf: graph past its positions": [
        "predict", hf_spec(tmp_path, "tiny_llama", TINY_LLAMA), "--device", "h100-sxm",
        "--seq-len", "512", "--batch-size", "2"]}
    for argv in commands.values():  # graphs and simulations into the session's cache
        assert main([*argv, "--json"]) == 0
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(commands)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for name, got in out.items():
        assert got["rc"] == 0, (name, r.stderr[-2000:])
        assert got["imported"] == [], f"{name} imported {got['imported']}"
    # the routes are the ones named: on the RTX 4090 the GraphSAGE network ran (in numpy) —
    # its answer, or the physics base it fades to outside its training data, answers
    assert out["rtx4090 (dippm)"]["numpy_gnn"]
    assert out["rtx4090 (dippm)"]["time_by"] in ("dippm", "crossdevice")
    assert out["h100-sxm (crossdevice)"]["time_by"] == "crossdevice"
    assert out["cpu (kernelsum)"]["time_by"] == "kernelsum"
