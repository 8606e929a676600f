"""``python -m perfcast.cli ...``: the ``perfcast`` command."""

from perfcast.cli import _entry

_entry()
