"""The ``perfcast`` command line: the root ``app``, :func:`main` (one-line errors, documented
exit codes) and :func:`_entry` (the console script).

The commands live in one sub-app per audience, merged into the root (no group prefix:
``perfcast predict``, ``perfcast collect``) and grouped by help panel in ``perfcast --help``:

* :mod:`perfcast.faces.cli.commands` — Predict & decide: one module per command (predict, mig, fit,
  cost, rank, plan, memory, devices, power-limit), its options generated from the request
  schema (:mod:`perfcast.faces.cli.options`), its answer from :func:`perfcast.decisions.answer.answer`;
* :mod:`perfcast.faces.cli.data` — Data & measurement: inspect, collect, corpus;
* :mod:`perfcast.faces.cli.present` — Predict & decide, for people: report (HTML page), ui (web page);
* :mod:`perfcast.faces.cli.research` — Research: train, evaluate, pretrain;

plus ``version`` here. Shared options, formatting and the progress display are in
:mod:`perfcast.faces.cli._common`.

Exit codes: 0 success · 1 internal error · 2 bad input (model, file, device, option) ·
3 the model could not be traced · 130 interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import os
import sys

import typer

from perfcast.faces.cli import data, present, research
from perfcast.faces.cli.commands import cost, devices, fit, memory, mig, plan, power_limit, predict, rank
from perfcast.faces.cli._common import err, out
from perfcast.errors import PerfcastError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Forecast a deep-learning model's time, memory, energy and cost on "
                       "hardware before it runs there.",
                  epilog="Examples:\n\nperfcast predict timm:resnet50 --device rtx4090 "
                         "--batch-size 256 --precision amp\n\nperfcast COMMAND --help\n\n"
                         "Exit codes: 0 ok · 1 internal error · 2 bad input · 3 the model "
                         "could not be traced · 130 interrupted.")
# add_typer without a name merges the sub-app's commands into the root (typer.main
# get_group_from_info); each command carries its audience's rich_help_panel.
for _sub in (predict.app, mig.app, fit.app, cost.app, rank.app, plan.app, memory.app,
             devices.app, power_limit.app, present.app, data.app, research.app):
    app.add_typer(_sub)


def _reflow(doc: str) -> str:
    """A docstring as help: paragraphs kept, the lines of each joined (the terminal and the
    reference pages wrap them)."""
    import inspect

    return "\n\n".join(" ".join(line.strip() for line in para.splitlines())
                        for para in inspect.cleandoc(doc).split("\n\n"))


def _reflow_help(typer_app: typer.Typer) -> None:
    """Every command's docstring reflowed into its help (:func:`_reflow`)."""
    infos = list(typer_app.registered_commands)
    if typer_app.registered_callback is not None:
        infos.append(typer_app.registered_callback)
    for info in infos:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = _reflow(info.callback.__doc__)
    for group in typer_app.registered_groups:
        cb = group.typer_instance.registered_callback
        if cb is not None and cb.callback is not None and cb.callback.__doc__:
            group.help = _reflow(cb.callback.__doc__)  # a group's help is its callback's
        _reflow_help(group.typer_instance)


@app.command(epilog="Examples:\n\nperfcast version")
def version():
    """Print perfcast's version."""
    from perfcast._version import __version__

    out.print(__version__)


_reflow_help(app)


def _notes_to_stderr() -> None:
    """Library warnings (logger ``perfcast``, e.g. a damaged cache entry that was rebuilt) as
    one-line ``note:`` messages on stderr."""
    import logging

    class _CurrentStderr(logging.StreamHandler):
        """Writes to ``sys.stderr`` as it is at each message (not as it was at set-up)."""

        @property
        def stream(self):
            return sys.stderr

        @stream.setter
        def stream(self, value) -> None:
            pass

    log = logging.getLogger("perfcast")
    if not any(getattr(h, "_perfcast_cli", False) for h in log.handlers):
        h = _CurrentStderr()
        h.setFormatter(logging.Formatter("note: %(message)s"))
        h._perfcast_cli = True
        log.addHandler(h)
        log.setLevel(logging.WARNING)
        log.propagate = False


#: Options whose value may be left out (typer has no optional option values): given last or
#: followed by another option, they take this value — ``--ray`` alone starts a local cluster.
OPTIONAL_VALUES = {"--ray": "local"}


def _fill_optional_values(argv: list[str]) -> list[str]:
    """``[…, "--ray", "--limit", "3"]`` → ``[…, "--ray", "local", "--limit", "3"]``."""
    out: list[str] = []
    for i, a in enumerate(argv):
        out.append(a)
        if a == "--":
            return out + argv[i + 1:]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if a in OPTIONAL_VALUES and (nxt is None or nxt.startswith("-")):
            out.append(OPTIONAL_VALUES[a])
    return out


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one-line errors, documented exit codes."""
    from perfcast._signals import install

    install()  # `kill` cleans up like Ctrl-C (already done by the console script; idempotent)
    _notes_to_stderr()
    argv = _fill_optional_values(list(sys.argv[1:] if argv is None else argv))
    try:
        rc = app(args=argv, standalone_mode=False)  # typer returns Exit codes (130 on Ctrl-C)
        if rc == 130:
            err.print("interrupted", highlight=False)
        return rc if isinstance(rc, int) else 0
    except PerfcastError as exc:
        from rich.markup import escape

        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, markup=True,
                  soft_wrap=True)  # (escaped: "perfcast[ray]" is not a style)
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("interrupted", highlight=False)
        return 130
    except SystemExit as exc:
        return int(exc.code or 0)
    except Exception as exc:  # click usage errors and anything unexpected
        import click

        # typer ≥ 0.20 vendors its own copy of click (typer._click): check both
        aborts, usage = (click.exceptions.Abort,), (click.ClickException,)
        try:
            from typer import exceptions as _te
            from typer._click import exceptions as _tce

            aborts += tuple(c for c in (getattr(_te, "Abort", None),) if c)
            usage += (_tce.ClickException,)
        except ImportError:
            pass
        if isinstance(exc, aborts):
            err.print("interrupted", highlight=False)
            return 130
        if isinstance(exc, usage):
            err.print(f"error: {exc.format_message()}", highlight=False, markup=False, soft_wrap=True)
            return 2
        if os.environ.get("PERFCAST_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        err.print(f"internal error: {type(exc).__name__}: {first[:300]} "
                  "(set PERFCAST_DEBUG=1 for the traceback)", highlight=False, markup=False,
                  soft_wrap=True)
        return 1


def _entry() -> None:
    sys.exit(main())


__all__ = ["app", "main"]
