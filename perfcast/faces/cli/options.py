"""The command line's options, generated from the request schema (:data:`perfcast.request.
fields.FIELDS`): :func:`command` gives a function the typer signature of a command's fields —
each option's flags, help (with its choices, unit and default), in the schema's order — and
hands the values the user gave, by field name, to the command's body. The options a command
only shows on the terminal (``--json``, ``--plot`` …) are its own keyword parameters.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from perfcast.request.fields import Field, fields_of

_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": str}


def help_text(f: Field, command: str) -> str:
    """A field's help on the command line (:meth:`~perfcast.request.fields.Field.describe`)."""
    return f.describe(command)


def parameter(f: Field, command: str) -> inspect.Parameter:
    """The typer parameter of field ``f`` for ``command`` (default ``None``: not given; a
    required one has none)."""
    required = command in f.required
    if f.argument:
        typ = str if required else str | None
        ann = Annotated[typ, typer.Argument(help=help_text(f, command), show_default=False,
                                            metavar="MODEL")]
        default = inspect.Parameter.empty if required else None
        return inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                 annotation=ann, default=default)
    if f.kind == "bool":
        flag = f.flag.lstrip("-")
        decl = f"--{flag}/--no-{flag.removeprefix('use-')}"
        ann = Annotated[bool | None, typer.Option(decl, help=help_text(f, command),
                                                  show_default=False)]
    else:
        decls = [f.flag, *(a for a in f.aliases if a.startswith("--"))]
        if f.short:
            decls.append(f.short)
        typ = _TYPES[f.kind] if required else _TYPES[f.kind] | None
        ann = Annotated[typ, typer.Option(*decls, help=help_text(f, command),
                                          show_default=False)]
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=ann,
                             default=inspect.Parameter.empty if required else None)


def command(name: str, *, own: list[inspect.Parameter] = ()
            ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command body ``body(values: dict, **own)``: the result is a function whose
    signature is the schema's fields of ``name`` (then ``own``, the command's display
    options) and which calls ``body`` with the fields given (by name; ``None`` = not given)."""
    fields = fields_of(name)

    def wrap(body: Callable[..., Any]) -> Callable[..., Any]:
        own_names = [p.name for p in own]

        @functools.wraps(body)
        def cli(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            values = {k: v for k, v in bound.arguments.items() if k not in own_names}
            rest = {k: v for k, v in bound.arguments.items() if k in own_names}
            return body({k: v for k, v in values.items() if v is not None}, **rest)

        params = [parameter(f, name) for f in fields]
        params = [p for p in params if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD] + \
            [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params
             if p.kind != inspect.Parameter.POSITIONAL_OR_KEYWORD] + \
            [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        sig = inspect.Signature(params)
        cli.__signature__ = sig
        cli.__annotations__ = {}
        cli.__wrapped__ = None  # typer must read __signature__, not body's own
        del cli.__wrapped__
        return cli

    return wrap


def own_option(name: str, typ: Any, default: Any, *decls: str, help: str) -> inspect.Parameter:
    """A command's own display option (not a request field)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[typ, typer.Option(*decls, help=help)])


JSON = own_option("as_json", bool, False, "--json", help="Print JSON.")

__all__ = ["JSON", "command", "help_text", "own_option", "parameter"]
