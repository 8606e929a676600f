"""The README is a landing page that tells the truth: at most 200 lines, no issue numbers, its
set-up commands are the ones CI runs, and every ``perfcast`` command it shows runs — parsed
against the command line in the fast tier (the cheap ones run there too), each run for real in
the slow tier with the output the README shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import parse_command, shown_commands

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
COMMANDS = shown_commands(README)
#: The README's commands cheap enough for the fast tier (an LLM from its shipped config: no
#: graph is traced, about a second each).
FAST = [c for c in COMMANDS if "--mode generate" in c]


def _shown_output(command: str) -> list[str]:
    """The output lines the README shows under ``$ command`` (up to the next command or the end
    of the block)."""
    lines = README.splitlines()
    i = next(n for n, line in enumerate(lines) if line.strip() == f"$ {command}")
    out = []
    for line in lines[i + 1:]:
        if line.startswith(("$ ", "```")):
            break
        out.append(line)
    return out


def _words(text: str) -> str:
    return " ".join(text.split())


def test_readme_is_a_short_landing_page():
    assert len(README.splitlines()) <= 200
    assert not re.search(r"issues?\s*#\s*\d|\(issue\s+\d", README, re.I)
    assert len(COMMANDS) >= 6  # the five questions
    for section in ("## Set up", "## Five questions", "## Where to go next"):
        assert section in README


def test_set_up_commands_are_the_ones_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    block = re.search(r"## Set up\s*```bash\n(.*?)```", README, re.S)
    assert block, "README lost its set-up block"
    lines = [x.strip() for x in block.group(1).splitlines() if x.strip()]
    assert len(lines) == 2
    assert lines[0] in ci, "the README's install command is not the one .ci/run runs"
    assert lines[1] in ci, "the README's test command is not the one .ci/run runs"


def test_every_readme_command_parses():
    for line in COMMANDS:
        parse_command(line)
    spec = re.search(r"--device (docs/examples/\S+\.json)", README)
    assert spec and (ROOT / spec.group(1)).is_file()


@pytest.mark.parametrize("command", FAST)
def test_cheap_readme_commands_run(command, capsys, monkeypatch):
    import shlex

    from perfcast.faces.cli import main

    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)[1:]) == 0
    out = _words(capsys.readouterr().out)
    assert _words(_shown_output(command)[0]) in out


@pytest.mark.slow  # graph builds, the batch search of fit, a layout search: ≈ 30–60 s together
@pytest.mark.parametrize("command", COMMANDS)
def test_every_readme_command_runs_as_shown(command):
    import shlex

    env = {**os.environ, "COLUMNS": "100"}
    r = subprocess.run([sys.executable, "-m", "perfcast", *shlex.split(command)[1:]], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    shown = [line for line in _shown_output(command) if line.strip() and line.strip() != "…"]
    assert shown, command
    assert _words(shown[0]) in _words(r.stdout), (shown[0], r.stdout[:500])
