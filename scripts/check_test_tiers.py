"""Does the fast test tier touch every CLI command and every room? (issue #31, item 1)

    PERFCAST_TIER_REPORT=/tmp/tier.json .venv/bin/python -m pytest     # the fast tier
    .venv/bin/python scripts/check_test_tiers.py /tmp/tier.json

The report is written by ``tests/tier_report.py`` at the end of the run: every ``perfcast``
command the tests ran (in-process through ``perfcast.faces.cli.main`` or as a subprocess) and every
``perfcast`` module loaded in the test process. This script lists the commands of the CLI (the
typer app, sub-commands included) and the rooms (packages under ``perfcast/``), and exits 1
naming any the run did not touch. ``.ci/run`` runs it after the fast tier.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli_commands() -> list[tuple[str, ...]]:
    """Every command path of ``perfcast`` (``("devices", "add")`` …)."""
    import typer.main

    from perfcast.faces.cli import app

    out: list[tuple[str, ...]] = []

    def walk(cmd, prefix: tuple[str, ...]) -> None:
        for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
            out.append((*prefix, name))
            walk(sub, (*prefix, name))

    walk(typer.main.get_command(app), ())
    return out


def rooms() -> list[str]:
    """The packages directly under ``perfcast/`` (the rooms of scripts/check_layers.py)."""
    return sorted(p.parent.name for p in (ROOT / "perfcast").glob("*/__init__.py"))


def touched_commands(argvs: list[list[str]], commands: list[tuple[str, ...]]) -> set:
    """The command paths the argv lists ran (options and arguments skipped; ``--help`` runs
    do not count)."""
    paths = set(commands)
    hit = set()
    for argv in argvs:
        if any(a in ("--help", "-h") for a in argv):
            continue
        words = [a for a in argv if not a.startswith("-")]
        best = None
        for n in range(1, 3):  # the longest command path the positional words start with
            if tuple(words[:n]) in paths:
                best = tuple(words[:n])
        if best is not None:
            hit.add(best)
            if len(best) == 1 and any(p[:1] == best and len(p) > 1 for p in paths):
                hit.add(best)  # a group's own callback (``perfcast devices`` lists)
    return hit


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    report = json.loads(Path(argv[0]).read_text())
    commands = cli_commands()
    hit = touched_commands(report["commands"], commands)
    missing_cmds = [" ".join(c) for c in commands if c not in hit]
    loaded = {m.split(".")[1] for m in report["modules"] if m.count(".") >= 1}
    missing_rooms = [r for r in rooms() if r not in loaded]
    print(f"commands: {len(commands) - len(missing_cmds)}/{len(commands)} run by the fast tier;"
          f" rooms: {len(rooms()) - len(missing_rooms)}/{len(rooms())} loaded")
    if missing_cmds:
        print("  commands not run: " + ", ".join(missing_cmds))
    if missing_rooms:
        print("  rooms not loaded: " + ", ".join(missing_rooms))
    return 1 if missing_cmds or missing_rooms else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
