"""Errors perfcast raises for bad input. The CLI prints them as one line and exits non-zero."""


class PerfcastError(Exception):
    """A user-facing error: the message says what is wrong and what to do."""

    exit_code = 2


class ModelSpecError(PerfcastError):
    """The model spec could not be resolved (unknown name, missing file, corrupt model)."""


class TraceError(PerfcastError):
    """The model was found but could not be traced into a graph."""

    exit_code = 3


def unknown_keys(given, allowed) -> str | None:
    """``"bandwith_gbs (did you mean bandwidth_gbs?), foo"`` for the keys of ``given`` not in
    ``allowed`` (sorted, each with its nearest allowed key when one is close), ``None`` when
    every key is allowed — what every reader of a user's YAML / JSON file puts in its error."""
    import difflib

    allowed = [str(a) for a in allowed]
    unknown = sorted(str(k) for k in given if str(k) not in allowed)
    if not unknown:
        return None
    hints = []
    for u in unknown:
        close = difflib.get_close_matches(u, allowed, n=1, cutoff=0.6)
        hints.append(f"{u} (did you mean {close[0]}?)" if close else u)
    return ", ".join(hints)


def reraise_interrupt(exc: BaseException) -> None:
    """Raise :class:`KeyboardInterrupt` when ``exc`` happened while handling one (Ctrl-C /
    SIGTERM inside a library that then failed on its way out, e.g. torch's tracer): call it
    first in an ``except Exception`` that turns failures into a :class:`PerfcastError`, so an
    interrupt stays an interrupt (exit 130), not a "could not trace"."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            raise KeyboardInterrupt
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__


def unknown_choice(what: str, value, allowed, cls: type[PerfcastError] = PerfcastError
                   ) -> PerfcastError:
    """The error of a value outside ``allowed``: ``unknown split 'unseen-famly' — did you mean
    'unseen-family'? (use random, family-mc, unseen-family)`` — one wording for every option
    and file field (raise what it returns)."""
    import difflib

    allowed = [str(a) for a in allowed]
    near = difflib.get_close_matches(str(value), allowed, n=1)
    return cls(f"unknown {what} {value!r}" + (f" — did you mean {near[0]!r}?" if near else "")
               + f" (use {', '.join(allowed)})")
