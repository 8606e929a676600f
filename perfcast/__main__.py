"""``python -m perfcast`` and the ``perfcast`` console script (:func:`entry`)."""

import sys

from perfcast._signals import install


def entry() -> None:
    """Signal handlers first (:mod:`perfcast._signals`), then the command line."""
    install()
    try:
        # numpy before anything imports torch: torch's C extension imports numpy during its
        # own initialisation and swallows any exception from it — a Ctrl-C that lands there
        # would be lost (the command would run on and exit 0)
        import numpy  # noqa: F401

        from perfcast.faces.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    sys.exit(main())


if __name__ == "__main__":
    entry()
