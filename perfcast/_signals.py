"""Signal handling of the command line, importable before anything heavy.

The console script and ``python -m perfcast`` (:func:`perfcast.__main__.entry`) call
:func:`install` as their very first code, before typer, rich, torch or the predictors load, so
that Ctrl-C or ``kill`` during start-up is the one line ``interrupted`` and exit code 130, not a
traceback. A signal
that arrives while the interpreter itself is still starting (before any perfcast code runs) ends
the process by the signal's default action: nothing was written then, and the exit status is
non-zero.
"""

from __future__ import annotations

import os
import signal

#: The process that installed the handlers (the CLI's own process); forked children differ.
_MAIN_PID: int | None = None


def _terminate(signum, frame):
    """SIGTERM in the CLI's own process: clean up like Ctrl-C. A forked child (a process
    pool worker, the overlapped memory simulation) inherits the handler: there it restores
    the default action and re-sends the signal — the child ends quietly, no traceback."""
    if os.getpid() != _MAIN_PID:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise KeyboardInterrupt


def install() -> None:
    """SIGTERM behaves like Ctrl-C (``KeyboardInterrupt``) in this process; no-op outside the
    main thread (where ``signal.signal`` is not allowed)."""
    global _MAIN_PID
    try:
        _MAIN_PID = os.getpid()
        signal.signal(signal.SIGTERM, _terminate)
        if signal.getsignal(signal.SIGINT) is signal.SIG_DFL:  # e.g. started with SIGINT ignored
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread
        pass
