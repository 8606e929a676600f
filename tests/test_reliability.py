"""Issue #23: nothing a user types or leaves behind breaks perfcast — every row of the issue's
table (``tests/reliability_cases.py``), strict JSON from every command, signals in forked
children, interrupted writes, output paths checked before work."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfcast.faces.cli import main
from tests.helpers import ctrl_c_as_usual
from tests.reliability_cases import CASES, strict_json


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_table_row(case, tmp_path, capsys, monkeypatch):
    argv = case.setup(tmp_path)
    capsys.readouterr()
    if case.cwd:
        monkeypatch.chdir(tmp_path / case.cwd)
    rc = main(argv)
    cap = capsys.readouterr()
    problem = case.check(rc, cap.out, cap.err, tmp_path)
    assert problem is None, f"{case.does}: {problem}"


# --------------------------------------------------------------------------- strict JSON
#: One cheap invocation of every command that has ``--json`` (the costly ones — collect,
#: corpus, train --recipe, evaluate, pretrain, calibrate — print their summary through the
#: same printer, checked by ``test_cli_prints_json_one_way``).
JSON_COMMANDS = {
    "predict": ["predict", "torchvision:squeezenet1_1", "--device", "rtx4090"],
    "predict-cpu": ["predict", "torchvision:squeezenet1_1", "--device", "cpu"],
    "predict-train": ["predict", "torchvision:squeezenet1_1", "--device", "a100-40gb", "--mode",
                      "train", "-b", "4"],
    "mig": ["mig", "torchvision:squeezenet1_1", "--device", "a100-40gb"],
    "fit": ["fit", "torchvision:squeezenet1_1", "--device", "rtx4090", "--limit", "64"],
    "cost": ["cost", "torchvision:squeezenet1_1", "--device", "a100-40gb", "--iterations", "10"],
    "cost-overflow": ["cost", "--time-ms", "1e308", "--device", "a100-40gb", "--iterations",
                      "10000000000"],
    "rank": ["rank", "torchvision:squeezenet1_1", "--devices", "rtx4090,a100-40gb,cpu"],
    "power-limit": ["power-limit", "torchvision:squeezenet1_1", "--device", "a40", "-b", "4"],
    "memory": ["memory", "torchvision:squeezenet1_1"],
    "report": ["report", "torchvision:squeezenet1_1", "--device", "a100-40gb", "-b", "4",
               "--out", "{tmp}/r.html"],
    "devices": ["devices"],
    "inspect": ["inspect", "torchvision:squeezenet1_1"],
    "train-list": ["train", "--list"],
    "query": ["query", "torchvision:squeezenet1_1", "--device", "rtx4090", "--db", "{tmp}/q.db"],
    "plan": ["plan", "torchvision:squeezenet1_1", "--gpus", "2", "--device", "a100-80gb"],
}


@pytest.mark.parametrize("name", [  # report's own JSON: tests/test_report.py; all: the slow tier
    pytest.param(n, marks=pytest.mark.slow) if n == "report" else n for n in JSON_COMMANDS])
def test_json_output_is_strict(name, capsys, tmp_path):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in JSON_COMMANDS[name]]
    if name == "query":  # an empty store: every answer is the prediction, marked as such
        from perfcast.store.db import MeasurementStore

        MeasurementStore(str(tmp_path / "q.db"))
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    strict_json(capsys.readouterr().out)  # raises on NaN / Infinity / anything not JSON


def test_every_json_command_is_covered():
    """A new command with ``--json`` needs its row above (or is one of the costly ones)."""
    from typer.main import get_command

    from perfcast.faces.cli import app

    # (serve: a server — its JSON is the commands', checked in tests/test_serve.py)
    costly = {"collect", "corpus", "evaluate", "pretrain", "calibrate", "serve"}
    root = get_command(app)
    names = set()
    for name, cmd in root.commands.items():
        subs = getattr(cmd, "commands", None) or {}
        for c in [cmd, *subs.values()]:
            if any("--json" in p.opts for p in c.params):
                names.add(name)
    covered = {v[0] for v in JSON_COMMANDS.values()}
    assert names - covered - costly == set()


def test_cli_prints_json_one_way():
    """Every CLI module prints JSON through ``_common.print_json`` (strict); none calls
    ``json.dumps`` / ``print_json`` of rich on its own."""
    cli = Path(__import__("perfcast.faces.cli", fromlist=["x"]).__file__).parent
    for f in cli.glob("*.py"):
        if f.name == "_common.py":
            continue
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("dumps", "dump"):
                pytest.fail(f"{f.name}:{node.lineno} writes JSON itself; use print_json")
            if (isinstance(node, ast.Attribute) and node.attr == "print_json"
                    and not (isinstance(node.value, ast.Name) and node.value.id == "_common")):
                pytest.fail(f"{f.name}:{node.lineno} calls rich's print_json; use print_json")


def test_strict_json_nested_nan():
    from perfcast.faces.cli._common import strict_json as dump

    d = json.loads(dump({"a": [1.0, float("nan")], "b": {"c": float("-inf")}, "notes": []}))
    assert d["a"] == [1.0, None] and d["b"]["c"] is None
    assert d["notes"] == ["a[1], b.c: not a finite number (overflow, or an unbounded value) — null"]


# --------------------------------------------------------------------------- signals
def test_sigterm_in_forked_child_is_quiet():
    """The CLI's SIGTERM handler runs in the main process only: a forked child (pool worker,
    overlapped memory simulation) that gets SIGTERM ends by the signal, printing nothing."""
    code = (
        "import os, signal, sys, time\n"
        "import perfcast._signals as c\n"
        "c._MAIN_PID = os.getpid()\n"
        "signal.signal(signal.SIGTERM, c._terminate)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
        "os.kill(pid, signal.SIGTERM)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.WIFSIGNALED(status), os.WTERMSIG(status) if os.WIFSIGNALED(status) else None)\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)\n"
        "except KeyboardInterrupt:\n"
        "    print('parent-interrupted')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["True", str(int(signal.SIGTERM)), "parent-interrupted"], p
    assert "Traceback" not in p.stderr and p.stderr.strip() == "", p.stderr


def _wait_for(path: Path, timeout: float) -> None:
    t0 = time.time()
    while not path.exists() and time.time() - t0 < timeout:
        time.sleep(0.05)


@pytest.mark.slow  # interrupted at three moments, twice
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_save_leaves_no_half_file(tmp_path, sig):
    """SIGINT / SIGTERM while ``inspect --save`` builds and writes: exit 130, one line, and the
    output is either absent or a whole graph; no temporary file left."""
    out = tmp_path / "g.npz"
    env = {**os.environ, "PERFCAST_CACHE_DIR": str(tmp_path / "cache")}
    results = []
    for delay in (0.5, 2.0, 3.5):
        out.unlink(missing_ok=True)
        p = subprocess.Popen([sys.executable, "-m", "perfcast", "inspect", "timm:resnet50",
                              "--save", str(out), "--no-cache"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=ctrl_c_as_usual)  # noqa: PLW1509
        time.sleep(delay)
        p.send_signal(sig)
        _, err = p.communicate(timeout=120)
        results.append(p.returncode)
        if p.returncode == -sig and err == "":
            # the signal came while the interpreter itself was starting, before perfcast's first
            # line (a loaded CI machine), or while it was finishing after the work (an idle one:
            # Python restores the default handlers last): default action, nothing printed, and
            # the output absent or whole
            if out.exists():
                from perfcast.graph import ModelGraph

                assert len(ModelGraph.load(out).nodes) > 100
            assert [f.name for f in tmp_path.iterdir() if f.name.startswith(".")] == []
            continue
        # -SIGINT after "interrupted": CPython ends a `python -m` run by SIGINT when a
        # KeyboardInterrupt passed through an exec'd string on its way (e.g. a dataclass being
        # created during an import); a shell reports that as exit status 130 too
        assert p.returncode in (0, 130, -signal.SIGINT), err
        assert "Traceback" not in err
        if p.returncode != 0:
            assert err.strip().splitlines()[-1] == "interrupted", err
        if out.exists():
            from perfcast.graph import ModelGraph

            assert len(ModelGraph.load(out).nodes) > 100
        assert [f.name for f in tmp_path.iterdir() if f.name.startswith(".")] == []
    assert 130 in results


# --------------------------------------------------------------------------- output paths
@pytest.mark.parametrize("argv,needle", [
    (["inspect", "torchvision:squeezenet1_1", "--save", "{tmp}/x.txt"], "must end in .npz"),
    (["inspect", "torchvision:squeezenet1_1", "--save", "{tmp}/no/such/x.npz"], "does not exist"),
    (["rank", "torchvision:squeezenet1_1", "--plot", "{tmp}/x.gif"], "must end in .png"),
    (["rank", "torchvision:squeezenet1_1", "--plot", "{tmp}"], "is a directory"),
    (["evaluate", "-t", "a", "-s", "random", "--out", "{tmp}/file.txt/sub"], "is a file"),
    (["corpus", "--out", "{tmp}/file.txt"], "not a directory"),
    (["collect", "--models", "torchvision:squeezenet1_1", "--db", "{tmp}/m.db", "--export",
      "{tmp}/no/x.csv"], "does not exist"),
    (["collect", "--models", "torchvision:squeezenet1_1", "--db", "{tmp}/m.db", "--export",
      "{tmp}/x.xlsx"], "must end in .parquet or .csv"),
    (["train", "--data", "x.csv", "--out", "{tmp}/file.txt"], "not a directory"),
    (["pretrain", "--corpus", "{tmp}", "--out", "{tmp}/file.txt"], "not a directory"),
])
def test_output_paths_checked_before_work(argv, needle, tmp_path, capsys, isolated_cache):
    (tmp_path / "file.txt").write_text("x")
    t0 = time.perf_counter()
    rc = main([a.format(tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert time.perf_counter() - t0 < 5  # refused before any graph / training
    assert not any(isolated_cache.iterdir())  # nothing was built


def test_atomic_writer_keeps_old_file_on_failure(tmp_path):
    from perfcast.paths import write_file_atomically

    f = tmp_path / "a.json"
    write_file_atomically(f, '{"v": 1}')
    assert oct(f.stat().st_mode & 0o777) == oct(0o666 & ~_umask())

    def boom(tmp):
        Path(tmp).write_text('{"v": 2, "half')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file_atomically(f, boom)
    assert json.loads(f.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def test_corpus_index_partial_line_is_cut(tmp_path):
    """A corpus run killed mid-append leaves half a line; the next run cuts it (and rebuilds
    that graph) instead of gluing the next row to it."""
    from perfcast.store.corpus import _drop_partial_line

    index = tmp_path / "index.csv"
    index.write_text("key,status\nabc,ok\ndef,o")
    _drop_partial_line(index)
    assert index.read_text() == "key,status\nabc,ok\n"
    _drop_partial_line(index)  # a whole file stays as it is
    assert index.read_text() == "key,status\nabc,ok\n"


def test_simulation_job_after_autograd_in_this_process():
    """A forked simulation child cannot run autograd once the parent used autograd's threads
    (torch refuses); the job then simulates in the parent instead of failing the prediction."""
    import torch

    from perfcast.memory.cache import MemsimCache, SimulationJob
    from perfcast.workload import Workload

    x = torch.ones(3, requires_grad=True)
    (x * 2).sum().backward()  # autograd's engine now runs in this process
    w = Workload.of("torchvision:squeezenet1_1", batch_size=2, mode="train",
                    input_size="3,64,64")
    job = SimulationJob.start(w)
    value = job.result() if job is not None else MemsimCache.simulate(w)
    assert value > 0
