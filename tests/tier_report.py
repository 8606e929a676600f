"""What a test run touched, for ``scripts/check_test_tiers.py``: the ``perfcast`` CLI commands
it ran (in this process through :func:`perfcast.faces.cli.main`, or in a subprocess ``python -m
perfcast …`` / the ``perfcast`` console script) and the rooms (packages under ``perfcast/``)
whose code it loaded in this process.

Active only when ``$PERFCAST_TIER_REPORT`` names a file (``.ci/run`` sets it for the fast
tier); :func:`start` is called from ``pytest_configure`` and :func:`write` from
``pytest_sessionfinish`` (tests/conftest.py). Costs nothing measurable: one wrapper around the
CLI's typer app and one around ``subprocess.Popen``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ENV = "PERFCAST_TIER_REPORT"

#: argv lists of the CLI commands run (the arguments after ``perfcast``).
_COMMANDS: list[list[str]] = []
_started = False


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def _record(argv) -> None:
    _COMMANDS.append([str(a) for a in argv])


def _cli_argv(args) -> list[str] | None:
    """The arguments after ``perfcast`` when ``args`` (a Popen argument list) runs the CLI."""
    if isinstance(args, (str, bytes, os.PathLike)):
        return None
    args = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    for i, a in enumerate(args):
        if a == "-m" and i + 1 < len(args) and args[i + 1] in ("perfcast", "perfcast.faces.cli"):
            return args[i + 2:]
        if i == 0 and Path(a).name == "perfcast":
            return args[1:]
    return None


class _RecordingApp:
    """The CLI's typer app, recording each argv it is called with."""

    def __init__(self, app) -> None:
        self._app = app

    def __call__(self, *a, **kw):
        _record(kw.get("args") if "args" in kw else (a[0] if a else sys.argv[1:]))
        return self._app(*a, **kw)

    def __getattr__(self, name):
        return getattr(self._app, name)


def start() -> None:
    """Install the two recorders (once)."""
    global _started
    if _started or not enabled():
        return
    _started = True
    import perfcast.faces.cli as cli

    cli.app = _RecordingApp(cli.app)  # main() looks ``app`` up at each call
    init = subprocess.Popen.__init__

    def popen_init(self, args, *a, **kw):
        argv = _cli_argv(args)
        if argv is not None:
            _record(argv)
        return init(self, args, *a, **kw)

    subprocess.Popen.__init__ = popen_init


def write() -> None:
    """Write the report: ``{"commands": [[argv…], …], "modules": [perfcast modules loaded]}``."""
    if not enabled():
        return
    mods = sorted(m for m in sys.modules if m == "perfcast" or m.startswith("perfcast."))
    Path(os.environ[ENV]).write_text(json.dumps({"commands": _COMMANDS, "modules": mods},
                                                indent=1) + "\n")
