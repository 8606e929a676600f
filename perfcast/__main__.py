from perfcast.cli import _entry

_entry()
