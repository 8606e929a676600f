"""One schema, every surface: each option of the request schema (perfcast.request.fields.FIELDS)
is the same option on the command line, in the HTTP bodies of ``perfcast serve`` and in the web
page's form — same name, aliases, choices and modes — and no surface has an option the schema
does not declare (except the display-only ones listed here). Walked from the schema, so a field
added, renamed or given new choices shows up on every surface or fails here."""

from __future__ import annotations

import pytest
import typer.main

from perfcast.faces.cli import app, main
from perfcast.decisions.answer import COMMANDS, PARSED_ONLY
from perfcast.request.fields import ALL, BY_NAME, FIELDS, Field, _or, fields_of

#: Every command whose options are schema fields: the answers' commands, perfcast memory (the
#: request parsed, no answer) and perfcast report.
CLI_COMMANDS = (*COMMANDS, *PARSED_ONLY, "report")
#: Each command's own options, which only change how the answer is shown or written.
DISPLAY_ONLY = {name: {"as_json"} for name in CLI_COMMANDS}
DISPLAY_ONLY["rank"] |= {"plot"}
DISPLAY_ONLY["power-limit"] |= {"png"}
DISPLAY_ONLY["report"] |= {"out_path", "png"}
#: The page's inputs that are not request fields: the uploads.
UI_ONLY = {"model_file", "device_file"}


def _command(name: str):
    return typer.main.get_command(app).commands[name]


def _cli_params(name: str) -> dict:
    return {p.name: p for p in _command(name).params if p.name != "help"}


def _flags(f: Field) -> set[str]:
    return {f.flag, *(a for a in f.aliases if a.startswith("--")),
            *([f.short] if f.short else [])}


# ------------------------------------------------------------------------------ the CLI
@pytest.mark.parametrize("name", CLI_COMMANDS)
def test_every_field_is_a_cli_option(name):
    params = _cli_params(name)
    fields = fields_of(name)
    assert fields, name
    for f in fields:
        p = params.get(f.name)
        assert p is not None, (name, f.name)
        if f.argument:
            assert p.param_type_name == "argument" and p.required == (name in f.required)
            continue
        if f.kind == "bool":
            assert p.opts == [f.flag] and len(p.secondary_opts) == 1, (name, p.opts)
        else:
            assert set(p.opts) == _flags(f), (name, f.name, p.opts)
        assert p.required == (name in f.required), (name, f.name)
        assert p.help == f.describe(name), (name, f.name)
        allowed = f.allowed(name)
        if allowed and f.name != "precision":
            assert _or(allowed) in p.help, (name, f.name, p.help)
        elif f.name == "precision":  # its own sentence names the precisions of every mode
            # the graph precisions (the commands that answer training: bf16-pure, fp8 too)
            assert "fp32, amp, fp16 or bf16" in p.help or \
                "fp32, amp, fp16, bf16, bf16-pure or fp8" in p.help, (name, p.help)
            takes_generate = "generate" in (BY_NAME["mode"].allowed(name) or ALL)
            assert ("int8 / int4" in p.help) == takes_generate, (name, p.help)
        if f.modes != ALL:
            assert "--mode " + " / ".join(f.modes) in p.help, (name, f.name, p.help)
    extra = set(params) - {f.name for f in fields} - DISPLAY_ONLY[name]
    assert not extra, (name, extra)


def _sample(f: Field) -> list[str]:
    """Command-line words giving ``f`` a valid value other than its default."""
    if f.kind == "bool":
        return [f.flag] if not f.default else [f"--no-{f.flag[2:].removeprefix('use-')}"]
    allowed = f.allowed()
    if allowed:
        value = next(str(c) for c in allowed if c != f.default)
    elif f.kind in ("int", "float"):
        lo, hi = f.minimum, f.maximum
        x = (lo + (hi - lo) / 4 if lo is not None and hi is not None
             else (lo or 0) + 2 if f.kind == "int" else (lo or 0) + 1.5)
        assert x != f.default, f.name
        value = str(int(x) if f.kind == "int" else x)
    elif f.name == "input_size":
        value = "3,32,32"
    else:
        value = "x"
    return [f.flag, value]


def _refusals():
    """(command, field, mode): a field given in a mode it does not apply to — in each mode
    the command itself takes (report: infer and train)."""
    out = []
    for name in CLI_COMMANDS:
        modes = BY_NAME["mode"].allowed(name) if name in BY_NAME["mode"].commands else ALL
        for f in fields_of(name):
            outside = [m for m in modes if m not in f.modes]
            if outside and not f.argument:
                out.append((name, f.name, outside[0]))
    return out


@pytest.mark.parametrize("name", CLI_COMMANDS)
def test_the_cli_refuses_a_field_outside_its_modes(name, capsys):
    """Before any work: exit code 2 and one line naming the option and the mode."""
    cases = [(f, m) for c, f, m in _refusals() if c == name]
    assert cases or name == "rank", name
    for field_name, mode in cases:
        f = BY_NAME[field_name]
        device = ["--device", "a100-40gb"] if "device" in {x.name for x in fields_of(name)} \
            else []
        argv = [name, "timm:resnet18", *device, "--mode", mode, *_sample(f)]
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, (argv, err)
        assert f"{f.flag} does not apply to --mode {mode}" in err, (argv, err)


# ------------------------------------------------------------------------------ HTTP
def test_every_field_is_an_http_body_field():
    pytest.importorskip("pydantic")
    from perfcast.faces.serve import ROUTES, body_model

    assert set(ROUTES) == set(COMMANDS)
    for name in COMMANDS:
        body = body_model(name).model_fields
        fields = {f.name: f for f in fields_of(name)}
        assert set(body) == set(fields), (name, set(body) ^ set(fields))
        for key, info in body.items():
            f = fields[key]
            keys = set(info.validation_alias.choices) if info.validation_alias else {key}
            assert keys == {f.name, *f.http_aliases()}, (name, key, keys)
            assert info.description == f.describe(name), (name, key)
            assert info.is_required() == (name in f.required), (name, key)


def test_an_alias_is_the_same_field_on_both_surfaces():
    """A flag alias (``--slo-ttft``, ``--power-limit``) is an HTTP key too, and no alias is
    another field's name."""
    for f in FIELDS:
        for a in f.http_aliases():
            assert a not in BY_NAME, (f.name, a)
            assert f"--{a.replace('_', '-')}" in f.aliases


# ------------------------------------------------------------------------------ the web page
def test_every_page_input_is_a_schema_field():
    """The form's inputs are the schema fields the page shows (by name) and the uploads; each
    is taken by a command the page asks, and its choices are the field's."""
    from perfcast.faces.ui.form import AUTO, INPUTS, SHOWN, Request, choices, elem_id, label

    assert set(INPUTS) - set(SHOWN) == UI_ONLY
    assert set(Request.__dataclass_fields__) == set(INPUTS)
    asked = ("predict", "fit", "mig", "cost", "rank")
    for name in SHOWN:
        f = BY_NAME[name]
        assert any(name in {x.name for x in fields_of(c)} for c in asked), name
        allowed = f.allowed()
        if allowed and f.kind != "list":
            assert choices(f) == ([AUTO] if f.default is None else []) + list(allowed)
        assert elem_id(name) == "pc-" + name.replace("_", "-")
        assert label(f).startswith(name.replace("_", " "))


def test_the_page_is_built_from_the_schema():
    pytest.importorskip("gradio")
    from perfcast.devices.registry import device_keys
    from perfcast.faces.ui import build_app
    from perfcast.faces.ui.form import INPUTS, SHOWN, choices, elem_id, info, label, start_value

    demo = build_app()
    try:
        fn = next(f for f in demo.fns.values() if f.api_name == "predict")
        ids = [c.elem_id for c in fn.inputs]
        assert ids == [elem_id(n) for n in INPUTS]  # nothing the schema does not declare
        by_name = dict(zip(INPUTS, fn.inputs))
        for name in SHOWN:
            f, c = BY_NAME[name], by_name[name]
            assert (c.label, c.info) == (label(f), info(f)), name
            got = [x[1] if isinstance(x, tuple) else x for x in getattr(c, "choices", None)
                   or []]
            if f.kind == "list":
                assert got == device_keys() and c.multiselect
            elif choices(f):
                assert got == choices(f) and c.value == start_value(f), name
            elif f.kind in ("int", "float"):
                assert type(c).__name__ == "Number" and c.precision == (
                    0 if f.kind == "int" else None), name
                assert c.value == start_value(f), name
            else:
                assert type(c).__name__ == "Textbox", name
        for upload in UI_ONLY:
            assert type(by_name[upload]).__name__ == "File"
    finally:
        demo.close()


def test_the_page_refuses_a_field_outside_its_modes():
    """The page sends a changed box for a mode it does not apply to, and the request refuses
    it with the command's message — before any work."""
    from perfcast.faces.ui import Request, run_request
    from perfcast.faces.ui.form import SHOWN, start_value

    checked = 0
    for name in SHOWN:
        f = BY_NAME[name]
        outside = [m for m in ALL if m not in f.modes]
        if not outside:
            continue
        words = _sample(f)
        value = words[1] if len(words) > 1 else True
        if f.kind == "int":
            value = int(value) + (1 if int(value) == start_value(f) else 0)
        form = Request(model="resnet50", devices=["a100-40gb"], mode=outside[0],
                       **{name: value})
        r = run_request(form)
        assert f"{f.flag} does not apply to --mode {outside[0]}" in r.status, (name, r.status)
        checked += 1
    assert checked >= 7
