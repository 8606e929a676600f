"""The two rules of scripts/check_layers.py: no room imports a higher one, and the runtime never
imports the research stack (the dependency picture and its check)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _check_layers():
    spec = importlib.util.spec_from_file_location("check_layers",
                                                  ROOT / "scripts" / "check_layers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_upward_imports_and_no_research_imports_from_the_runtime():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_layers.py")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert ("0 upward imports, 0 runtime-to-research imports, 0 unranked rooms"
            in p.stderr)


def test_the_stack_rule_finds_each_kind_of_violation(tmp_path):
    """A small tree with one violation of each kind, and the imports the rules allow."""
    C = _check_layers()
    files = {
        "routing.py": "def f():\n    from perfcast.training import trainer\n",  # lazy: still
        "api.py": "MODS = ('perfcast.store.db',)\n",  # a name handed to importlib
        "faces/serve.py": "from perfcast.faces.cli import research\n",  # a research face, not from the CLI
        "faces/cli/__init__.py": "from perfcast.faces.cli import data, research\n",  # the registration: ok
        "faces/cli/research.py": "import perfcast.evaluation\n"  # a face importing eagerly
                           "def train():\n    from perfcast.training import trainer\n",  # ok
        "faces/cli/data.py": "def collect():\n    from perfcast.store import MeasurementStore\n",
        "training/__init__.py": "from perfcast.routing import route\n",  # research uses runtime
        "store/__init__.py": "from perfcast.measured import StoreReader\n",
    }
    for name, text in files.items():
        path = tmp_path / "perfcast" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    violations, edges, unknown = C.analyse(tmp_path)
    stack = sorted(v.split(": ", 1)[0] for v in violations if "(a higher room" not in v)
    assert stack == ["perfcast/api.py:1", "perfcast/faces/cli/research.py:1",
                     "perfcast/faces/serve.py:1", "perfcast/routing.py:2"], violations
    # the research stack ranks above the runtime rooms it uses, so the rank rule agrees (the
    # faces are one room, ranked above it: serve's import breaks the stack rule only)
    assert [v.split(": ", 1)[0] for v in violations if "(a higher room" in v] == \
        ["perfcast/routing.py:2"]
    assert ("training", "routing") in edges and unknown == []


#: The graph prediction of the test below (a training step: learned model, crossdevice, energy).
GRAPH_PREDICTION = ['predict', 'tests.models_for_tests:tiny_cnn', '--device', 'rtx3090', '--mode',
                    'train', '--precision', 'amp', '--batch-size', '2', '--input-size', '3,8,8',
                    '--json']


@pytest.mark.parametrize("cache", [
    "warm",  # the graph and its simulation cached by this process first, as a user's second call
    # a cold cache: the new process also builds the graph (torch's tracer, ~4 s of CPU); the
    # build path's modules are also held to the stack rule statically (check_layers.py)
    pytest.param("cold", marks=pytest.mark.slow),
])
def test_a_prediction_loads_nothing_of_the_research_stack(cache, request, capsys):
    """Importing the CLI registers the research commands without loading the research rooms;
    a prediction of a graph (learned per-device models, crossdevice, energy) and an LLM
    generation answer (the shipped LLM models) load none either."""
    from perfcast.faces.cli import main

    if cache == "cold":
        request.getfixturevalue("isolated_cache")
    else:
        assert main(GRAPH_PREDICTION) == 0
        capsys.readouterr()
    C = _check_layers()
    code = (
        "import sys\n"
        "from perfcast.faces.cli import main\n"
        f"assert main({GRAPH_PREDICTION!r}) == 0\n"
        "assert main(['predict', 'hf:meta-llama/Llama-2-7b-hf', '--mode', 'generate', "
        "'--device', 'a100-80gb', '--batch-size', '4', '--input-len', '512', '--output-len', "
        "'128', '--json']) == 0\n"
        f"research = {tuple(C.RESEARCH)!r}\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'perfcast' "
        "and m.split('.')[1:2] and m.split('.')[1] in research)\n"
        "print('LOADED', loaded)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "LOADED []"
