"""The CLI help tells the truth: every option with a fixed set of values lists exactly the
values the code takes (compared here with the sets the code checks against, so the two cannot
drift), every command has examples in its epilog that parse against its own options, and no
help text names an issue of the project's tracker."""

from __future__ import annotations

import re
import shlex

import pytest
import typer.main

from perfcast.faces.cli import _fill_optional_values, app, main
from perfcast.faces.cli._common import choices
from perfcast.workload import (
    ENGINES,
    GENERATE_PRECISIONS,
    GRAPH_MODES,
    MODEL_PRECISIONS,
    MODES,
    OBJECTIVES,
    OPTIMIZERS,
    PRECISIONS,
    PRETRAIN_METHODS,
    RECOMPUTE,
    RISKS,
    SCHEDULES,
    TF32_MODES,
    TRAIN_RECIPES,
    TRANSFER_RECIPES,
    ZERO_STAGES,
)


def _commands():
    """(path, click command) of every command, groups and sub-commands included."""
    out = []

    def walk(cmd, path):
        for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
            out.append(((*path, name), sub))
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return out


COMMANDS = _commands()
#: The modes each command takes (the rest take none).
MODES_OF = {"predict": MODES, "fit": MODES, "cost": MODES, "plan": ("train", "generate"),
            "mig": MODES, "rank": MODES, "memory": GRAPH_MODES,
            "power-limit": GRAPH_MODES, "report": GRAPH_MODES, "inspect": GRAPH_MODES,
            "query": GRAPH_MODES}


def _options(cmd) -> dict[str, str]:
    """option name → its help, for every option of ``cmd``."""
    out = {}
    for p in cmd.params:
        for name in getattr(p, "opts", []):
            if name.startswith("--"):
                out[name] = getattr(p, "help", None) or ""
    return out


def _allowed() -> dict[str, tuple]:
    """The sets the code checks each option against — read from the modules that act on them
    (the registries, tables and recipe files), not from the help's own source."""
    from perfcast.decisions.mig import mig_devices
    from perfcast.decisions.prices import find_price_table
    from perfcast.evaluation.splits import SPLITS
    from perfcast.evaluation.tasks import TASKS
    from perfcast import predictors as P
    from perfcast.pretrain.models import METHODS
    from perfcast.training.llm import LLM_PARTS
    from perfcast.training.trainer import RECIPES_DIR
    from perfcast.training.trainer import TRANSFER_RECIPES as trainer_transfer
    from perfcast.uncertainty import RISKS as uncertainty_risks

    assert set(uncertainty_risks) == set(RISKS) and set(trainer_transfer) == set(TRANSFER_RECIPES)
    assert set(METHODS) == set(PRETRAIN_METHODS)
    assert set(TRAIN_RECIPES) == ({p.stem for p in RECIPES_DIR.glob("*.json")}
                                  | {"llm", "power", "gnnllm"})
    table = find_price_table()  # the public price table (None without the shared data)
    providers = table.providers if table is not None else None
    P.list_predictors()  # the built-in kinds (a test may register a toy one beside them)
    kinds = tuple(sorted(name for name, cls in P._REGISTRY.items()
                         if any(cls.__module__ == m or cls.__module__.startswith(m + ".")
                                for m in P._BUILTIN_MODULES)))  # a module or its package
    return {"--optimizer": OPTIMIZERS, "--engine": ENGINES, "--recompute": RECOMPUTE,
            "--schedule": SCHEDULES, "--tf32": TF32_MODES, "--risk": RISKS,
            "--objective": OBJECTIVES, "--transfer": TRANSFER_RECIPES, "--method": METHODS,
            "--task": tuple(TASKS), "--split": tuple(SPLITS), "--recipe": TRAIN_RECIPES,
            "--predictor": kinds, "--predictors": kinds,
            "--provider": providers, "--modes": GRAPH_MODES, "--precisions": PRECISIONS,
            "--only": LLM_PARTS, "--device@mig": tuple(mig_devices())}


def test_every_option_lists_exactly_its_allowed_values():
    allowed = _allowed()
    checked = 0
    for path, cmd in COMMANDS:
        name = " ".join(path)
        for opt, help_text in _options(cmd).items():
            values = allowed.get(f"{opt}@{name}", allowed.get(opt) if opt != "--device" else None)
            if opt == "--zero":
                values = ZERO_STAGES
            if values is None:
                continue
            words = [str(v) for v in values]
            if opt == "--only":  # the llm recipe's parts, listed in a parenthesis
                assert all(w in help_text for w in words), (name, opt, help_text)
            else:
                assert choices(words) in help_text, (name, opt, help_text)
            checked += 1
    assert checked >= 40


@pytest.mark.parametrize("name", sorted(MODES_OF))
def test_mode_help_names_exactly_the_modes_the_command_takes(name):
    cmd = dict((" ".join(p), c) for p, c in COMMANDS)[name]
    h = _options(cmd)
    named = {m for m in MODES if re.search(rf"\b{m}\b \(", h["--mode"])}
    assert named == set(MODES_OF[name]), (name, h["--mode"])
    prec = h["--precision"]
    # the graph precisions (with training's bf16-pure and fp8 where the command trains)
    assert choices(PRECISIONS) in prec or choices(MODEL_PRECISIONS) in prec
    assert (choices(GENERATE_PRECISIONS) in prec) == ("generate" in MODES_OF[name]), name


def test_no_other_command_has_a_mode_option():
    for path, cmd in COMMANDS:
        if "--mode" in _options(cmd):
            assert " ".join(path) in MODES_OF, path


@pytest.mark.parametrize("argv", [
    ["memory", "hf:gpt2", "--mode", "generate"],
    ["inspect", "timm:resnet18", "--mode", "generate"],
    ["query", "timm:resnet18", "--device", "t4", "--mode", "generate"],
    ["power-limit", "timm:resnet18", "--device", "a40", "--mode", "generate"],
    ["report", "timm:resnet18", "--device", "t4", "--mode", "generate"],
])
def test_a_mode_the_help_does_not_list_is_refused_before_any_work(argv, capsys, tmp_path,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"perfcast {argv[0]} takes --mode infer or train" in err


def test_every_command_has_examples_that_parse():
    for path, cmd in COMMANDS:
        epilog = cmd.epilog or ""
        assert epilog.startswith("Examples:"), path
        lines = [x.strip() for x in epilog.split("\n\n")[1:] if x.strip()]
        assert lines, path
        for line in lines:
            argv = _fill_optional_values(shlex.split(line))
            assert argv[0] == "perfcast", line
            assert tuple(argv[1:1 + len(path)]) == path, (path, line)
            rest = argv[1 + len(path):]
            # click parses the options against the command (types, names, required ones)
            ctx = cmd.make_context(" ".join(path), list(rest), resilient_parsing=False)
            ctx.close()


def test_root_help_and_examples():
    root = typer.main.get_command(app)
    assert "perfcast predict" in root.epilog and "Exit codes" in root.epilog


def test_no_help_names_an_issue():
    texts = [typer.main.get_command(app).help or ""]
    for _path, cmd in COMMANDS:
        texts += [cmd.help or "", cmd.epilog or "", cmd.short_help or ""]
        texts += [getattr(p, "help", None) or "" for p in cmd.params]
    bad = [t for t in texts if re.search(r"issue\s*#?\d", t, re.I)]
    assert not bad, bad


def test_help_texts_read_as_reflowed_paragraphs():
    """The first paragraph is one short sentence (what ``perfcast --help`` lists)."""
    for path, cmd in COMMANDS:
        first = (cmd.help or "").split("\n\n")[0]
        assert first and "\n" not in first and len(first) <= 100, (path, first)
