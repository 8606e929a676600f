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
import sys

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


def _unraisable(info) -> None:
    """A ``KeyboardInterrupt`` raised where Python cannot propagate it (a weakref callback of the
    import machinery, a ``__del__``) would be printed as "Exception ignored" with a traceback and
    then lost. In the CLI's own process it is delivered again 10 ms later (a one-shot real-time
    timer, ``SIGALRM``, unless something else owns that signal), where it can propagate; every
    other unraisable exception goes to the previous hook."""
    if (info.exc_type is not None and issubclass(info.exc_type, KeyboardInterrupt)
            and os.getpid() == _MAIN_PID
            and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, _redeliver)):
        signal.signal(signal.SIGALRM, _redeliver)
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        return
    _previous_unraisablehook(info)


def _redeliver(signum, frame):
    """The deferred ``KeyboardInterrupt`` of :func:`_unraisable`."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    raise KeyboardInterrupt


_previous_unraisablehook = sys.unraisablehook


def install() -> None:
    """SIGTERM behaves like Ctrl-C (``KeyboardInterrupt``) in this process; no-op outside the
    main thread (where ``signal.signal`` is not allowed)."""
    global _MAIN_PID
    try:
        _MAIN_PID = os.getpid()
        signal.signal(signal.SIGTERM, _terminate)
        if signal.getsignal(signal.SIGINT) is signal.SIG_DFL:  # e.g. started with SIGINT ignored
            signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.unraisablehook = _unraisable
    except ValueError:  # not the main thread
        pass
