"""``python -m perfcast.faces.cli ...``: the ``perfcast`` command."""

from perfcast.faces.cli import _entry

_entry()
