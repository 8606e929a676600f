"""Errors perfcast raises for bad input. The CLI prints them as one line and exits non-zero."""


class PerfcastError(Exception):
    """A user-facing error: the message says what is wrong and what to do."""

    exit_code = 2


class ModelSpecError(PerfcastError):
    """The model spec could not be resolved (unknown name, missing file, corrupt model)."""


class TraceError(PerfcastError):
    """The model was found but could not be traced into a graph."""

    exit_code = 3
