"""MkDocs hooks of perfcast's documentation: the reference is generated from the code at build
time, never copied by hand.

A page asks for a generated part with a marker on its own line:

* ``<!-- perfcast:cli -->`` — every command of ``perfcast`` from typer's click command tree:
  usage, help, each option with its type, default and help, and the examples of its epilog;
* ``<!-- perfcast:device-schema -->`` — the fields of a device spec from
  :class:`perfcast.devices.registry.Device` (type, unit, which kinds require it, the comment
  that documents it), and the registry's RTX 4090 row as an example;
* ``<!-- perfcast:json-schemas -->`` — the keys each command's ``--json`` prints, from the
  result dataclasses (type and the comment or docstring that documents them);
* ``<!-- perfcast:layers -->`` / ``<!-- perfcast:rooms -->`` — the layering picture (the two
  stacks) and the table of rooms of ``scripts/check_layers.py``;
* ``<!-- perfcast:exit-codes -->`` — the documented exit codes of :mod:`perfcast.errors`;
* ``<!-- perfcast:request-schema -->`` — every option of a request from
  :data:`perfcast.request.fields.FIELDS` (the source of the CLI, HTTP and web-page options).

Links into the repository outside ``docs/`` are written ``[text](repo:path#anchor)``; the
build fails when ``path`` does not exist (``mkdocs build --strict`` also fails on a broken
link between pages), and the link points at the file in the checkout the site was built in
(or at ``$PERFCAST_DOCS_REPO_URL/<path>`` when that is set).
"""

from __future__ import annotations

import dataclasses
import html
import importlib.util
import inspect
import json
import os
import re
import typing
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
_REPO_LINK = re.compile(r"\[([^\]]+)\]\(repo:([^)#\s]+)(#[^)\s]*)?\)")


# ------------------------------------------------------------------------------ hooks
def on_page_markdown(markdown: str, page, config, files) -> str:
    for name, make in _MARKERS.items():
        marker = f"<!-- perfcast:{name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return _repo_links(markdown, page)


def on_page_content(html_text: str, page, config, files) -> str:
    """Docstrings use Sphinx roles (``:func:`x```): show the name alone."""
    return re.sub(r":(?:func|class|mod|data|meth|attr|exc|obj|py:\w+):(?=<code>)", "",
                  html_text)


def _repo_links(markdown: str, page) -> str:
    base = os.environ.get("PERFCAST_DOCS_REPO_URL", "").rstrip("/")
    depth = page.url.count("/") + 1  # from the page's folder in the site to the checkout

    def link(m: re.Match) -> str:
        text, path, anchor = m.group(1), m.group(2), m.group(3) or ""
        target = ROOT / path
        if not target.exists():
            raise PluginError(f"{page.file.src_path}: link to repo:{path}, which does not exist "
                              f"in the repository")
        href = f"{base}/{path}" if base else "../" * depth + path
        text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))
        return f'<a href="{html.escape(href + anchor)}">{text}</a>'

    return _REPO_LINK.sub(link, markdown)


# ------------------------------------------------------------------------------ helpers
def _md(text: str) -> str:
    """Help or docstring text as Markdown for a table cell: reST literals (````x````,
    ``:func:`x```) as code spans; outside code spans angle brackets and pipes escaped (inside
    them Markdown shows text as it is, and a table ignores their pipes)."""
    text = re.sub(r":[\w:]+:`~?([^`]+)`", r"`\1`", text.replace("``", "`"))
    text = text.replace("\\[", "[")
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(x if x.startswith("`") and x.endswith("`") and len(x) > 1
                   else html.escape(x, quote=False).replace("|", "\\|") for x in parts)


def _type_name(tp) -> str:
    if not isinstance(tp, str) and (typing.get_origin(tp) is not None or " | " in str(tp)):
        text = str(tp)
    else:
        text = tp if isinstance(tp, str) else getattr(tp, "__name__", None) or str(tp)
    return str(text).replace("typing.", "").replace("NoneType", "None")


def field_docs(cls) -> dict[str, str]:
    """The comment documenting each field of a dataclass: a ``#:`` / ``#`` block right above
    it, or the comment at the end of its line (or, for a field without one, nothing)."""
    lines = inspect.getsource(cls).splitlines()
    docs: dict[str, str] = {}
    pending: list[str] = []
    field_re = re.compile(r"^    (\w+)\s*:\s*[^=#]+?(?:\s*=\s*[^#]*)?(?:#\s?(.*))?$")
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith("def ") or stripped.startswith("@"):
            break
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#:").strip())
            continue
        m = field_re.match(line)
        if m and not line.startswith("     "):
            text = m.group(2) or " ".join(pending)
            docs[m.group(1)] = text.strip()
        pending = []
    return docs


#: Keys every answer shares, described once.
COMMON_KEYS = {
    "model": "the model spec", "device": "the device key", "mode": "infer, train or generate",
    "precision": "the precision the answer is for", "batch_size": "samples per batch",
    "input_size": "per-sample input shape", "seq_len": "sequence length (tokens)",
    "coverage": "share of outcomes the intervals are calibrated to hold (0.9 = 90 %)",
    "intervals": "per key: the interval, where its calibration came from, or why there is none",
    "ood": "out-of-distribution verdict: score, reasons, threshold, flagged",
    "predictor": "per key: the predictor (or simulation, bound, measurement) that answered",
    "trained_on": "per key: the data that predictor learned from",
    "notes": "how each value was made and what to keep in mind, one sentence each",
}


def _quantity_doc(name: str) -> str:
    """What a key without a comment is, from the names the reports and the web page use
    (:data:`perfcast.faces.report.QUANTITIES`; ``time_ms_low`` → the interval's low end)."""
    from perfcast.faces.report import QUANTITIES, quantity

    if name in COMMON_KEYS:
        return COMMON_KEYS[name]
    for end, what in (("_low", "low end of the interval of "), ("_high", "high end of the "
                                                                          "interval of ")):
        if name.endswith(end) and name[: -len(end)] in QUANTITIES:
            label, unit = QUANTITIES[name[: -len(end)]]
            return f"{what}{label}" + (f" ({unit})" if unit else "")
    if name in QUANTITIES or re.search(r"_(ms|mb|j|w|gb|gbs|kwh|usd|per_s)$", name):
        label, unit = quantity(name)
        return label + (f" ({unit})" if unit else "")
    return ""


def _docstring_summary(cls) -> str:
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _fields_table(cls, units: dict[str, str] | None = None,
                  extra_cols: dict[str, dict[str, str]] | None = None) -> str:
    docs = field_docs(cls)
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - a forward reference that does not resolve: the text
        hints = {f.name: f.type for f in dataclasses.fields(cls)}
    cols = ["key", "type", *(extra_cols or {}), "what it is"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for f in dataclasses.fields(cls):
        if f.name.startswith("_") or f.repr is False:
            continue
        typ = _type_name(hints.get(f.name, f.type))
        cells = [f"`{f.name}`", f"`{typ}`"]
        for _col, values in (extra_cols or {}).items():
            cells.append(_md(values.get(f.name, "")))
        unit = (units or {}).get(f.name)
        doc = docs.get(f.name, "") or _quantity_doc(f.name)
        cells.append(_md((f"({unit}) " if unit else "") + doc))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


# ------------------------------------------------------------------------------ CLI
def _walk(cmd, path=()):
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield (*path, name), sub
        yield from _walk(sub, (*path, name))


def _context(cmd, name: str):
    """A click context for ``cmd`` (typer's own click, where it vendors one)."""
    try:
        from typer._click.core import Context
    except ImportError:  # typer with the click package
        from click import Context
    return Context(cmd, info_name=name)


def cli_reference() -> str:
    import typer.main

    from perfcast.faces.cli import app

    from perfcast.faces.cli._common import PANEL_DATA, PANEL_PREDICT, PANEL_RESEARCH

    root = typer.main.get_command(app)
    panels = (PANEL_PREDICT, PANEL_DATA, PANEL_RESEARCH)

    def panel(path):  # a sub-command goes with its group
        top = root.commands[path[0]]
        p = getattr(top, "rich_help_panel", None)
        return panels.index(p) if p in panels else len(panels)

    commands = sorted(_walk(root), key=lambda pc: panel(pc[0]))  # stable: alphabetical within
    out = []
    for i, title in enumerate((*panels, "Other")):
        rows = [(path, cmd) for path, cmd in commands if panel(path) == i]
        if not rows:
            continue
        out += [f"**{title}**", "", "| command | what it does |", "|---|---|"]
        for path, cmd in rows:
            first = (cmd.help or "").split("\n\n")[0]
            out.append(f"| [`perfcast {' '.join(path)}`](#{'-'.join(('perfcast', *path))}) | "
                       f"{_md(first)} |")
        out.append("")
    for path, cmd in commands:
        full = " ".join(("perfcast", *path))
        anchor = "-".join(("perfcast", *path))
        pieces = cmd.collect_usage_pieces(_context(cmd, full))
        usage = " ".join(re.sub(r"\{(\w+)\}", lambda m: m.group(1).upper(), x) for x in pieces)
        out += [f"## `{full}` {{ #{anchor} }}", "", "```text", f"{full} {usage}", "```", ""]
        for para in (cmd.help or "").split("\n\n"):
            out += [_md(para), ""]
        rows = []
        for p in cmd.params:
            if p.param_type_name == "argument":
                names = f"`{p.name.upper()}`"
            else:
                names = ", ".join(f"`{o}`" for o in (*p.opts, *p.secondary_opts))
            kind = "flag" if getattr(p, "is_flag", False) else (
                getattr(p, "metavar", None) or (p.bare_type() if hasattr(p, "bare_type")
                                                 else getattr(p.type, "name", "")))
            kind = re.sub(r"\s*\|\s*None$", "", str(kind))
            default = p.default
            if getattr(p, "required", False):
                shown = "required"
            elif default in (None, False, ()) or callable(default):
                shown = ""
            else:
                shown = f"`{default}`"
            rows.append(f"| {names} | {_md(kind)} | {shown} | "
                        f"{_md(getattr(p, 'help', None) or '')} |")
        if rows:
            out += ["| option | type | default | description |", "|---|---|---|---|", *rows, ""]
        if cmd.epilog:
            examples = [x.strip() for x in cmd.epilog.split("\n\n")[1:] if x.strip()]
            if examples:
                out += ["Examples:", "", "```bash", *examples, "```", ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------ devices
def device_schema() -> str:
    from perfcast.devices import get_device
    from perfcast.devices import schema as R

    units = {**R._POSITIVE_NUMBERS, **R._POSITIVE_INTS}
    required = {f.name: ", ".join(k for k, names in R.REQUIRED_FIELDS.items() if f.name in names)
                for f in dataclasses.fields(R.Device)}
    required["key"] = required["name"] = required["kind"] = "gpu, cpu"
    table = _fields_table(R.Device, units, {"required for": required})
    example = {k: v for k, v in get_device("rtx4090").to_dict().items()
               if v not in (None, "", [], ()) and k != "detected"}
    return (f"{table}\n\n`kind` is one of {', '.join(f'`{k}`' for k in R._KINDS)}. An example — "
            f"the registry's RTX 4090 row (`perfcast devices --json` prints every row):\n\n"
            f"```json\n{json.dumps(example, indent=2, ensure_ascii=False)}\n```\n")


# ------------------------------------------------------------------------------ --json
def json_schemas() -> str:
    from perfcast.api import Prediction
    from perfcast.decisions.cost import CostEstimate
    from perfcast.decisions.fit import FitResult
    from perfcast.decisions.mig import MigAdvice
    from perfcast.decisions.plan import Plan, PlanRow
    from perfcast.decisions.power_limit import PowerLimitChoice
    from perfcast.decisions.rank import DeviceRank, Ranking
    from perfcast.decisions.serving import ServingPlan, ServingRow
    from perfcast.generation import GenerationPrediction
    from perfcast.memory.simulate import MemoryEstimate
    from perfcast.parallel.predict import ParallelPrediction
    from perfcast.query import Answer, QueryResult

    sections = (
        ("perfcast predict --json", Prediction, "`--mode infer` / `train` on one device"),
        ("perfcast predict --mode generate --json", GenerationPrediction, "an LLM serving requests"),
        ("perfcast predict --mode train --data-parallel … --json", ParallelPrediction,
         "a training step over several GPUs"),
        ("perfcast fit --json", FitResult, None),
        ("perfcast mig --json", MigAdvice, None),
        ("perfcast cost --json", CostEstimate, None),
        ("perfcast rank --json", Ranking, None),
        ("one row of `devices` in perfcast rank --json", DeviceRank, None),
        ("perfcast plan --json", Plan, "`--mode train`"),
        ("one row of `rows` in perfcast plan --json", PlanRow, None),
        ("perfcast plan --mode generate --json", ServingPlan, None),
        ("one row of perfcast plan --mode generate --json", ServingRow, None),
        ("perfcast power-limit --json", PowerLimitChoice, None),
        ("perfcast memory --json", MemoryEstimate, None),
        ("perfcast query --json", QueryResult, None),
        ("one answer of `answers` in perfcast query --json", Answer, None),
    )
    out = []
    for title, cls, what in sections:
        out += [f"### {title}", "",
                f"`{cls.__module__}.{cls.__name__}`" + (f" — {what}" if what else "") + ". "
                + _md(_docstring_summary(cls)), "", _fields_table(cls), ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------ layers
def _check_layers():
    spec = importlib.util.spec_from_file_location("check_layers",
                                                  ROOT / "scripts" / "check_layers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _edges():
    mod = _check_layers()
    violations, edges, _unknown = mod.analyse(ROOT)
    if violations:
        raise PluginError("scripts/check_layers.py finds violations of its rules: "
                          + "; ".join(violations[:3]))
    return mod, edges


def layers() -> str:
    """The picture (an SVG drawn at build time, so it shows offline) and its Mermaid source."""
    mod, edges = _edges()
    source = mod.mermaid(edges)
    code, _, tail = source.partition("```\n")
    return ("![The rooms of perfcast, bottom up: each imports only the rooms below it; the "
            "runtime rooms (orange) never import the research rooms (blue)](layers.svg)\n\n"
            + tail.strip() + "\n\n"
            '??? note "The same picture as Mermaid source (scripts/check_layers.py --mermaid)"\n\n'
            + "\n".join("    " + line for line in (source.partition(tail)[0].strip()
                                                      .splitlines())) + "\n")


def layers_svg() -> str:
    """The layering picture as SVG: each room at the height of its longest chain of
    dependencies, an arrow per direct dependency of the reduced graph (matplotlib)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mod, edges = _edges()
    arrows = mod.reduced(edges)
    rooms = sorted({r for e in arrows for r in e}, key=lambda r: mod.RANK[r])
    deps = {r: [d for a, d in arrows if a == r] for r in rooms}
    level: dict[str, int] = {}
    for r in rooms:  # ranks order the rooms bottom up: dependencies come first
        level[r] = 1 + max((level[d] for d in deps[r]), default=-1)
    rows: dict[int, list[str]] = {}
    for r in rooms:
        rows.setdefault(level[r], []).append(r)
    width = max(len(v) for v in rows.values())
    pos = {}
    for lv, names in rows.items():
        for i, r in enumerate(names):
            pos[r] = ((i + 0.5) * width / len(names), lv)
    fig, ax = plt.subplots(figsize=(1.55 * width + 1, 0.85 * (max(rows) + 1) + 0.6))
    for a, d in arrows:
        (x1, y1), (x2, y2) = pos[a], pos[d]
        ax.annotate("", xy=(x2, y2 + 0.22), xytext=(x1, y1 - 0.22),
                    arrowprops={"arrowstyle": "-|>", "color": "#9a9a9a", "lw": 0.8,
                                "shrinkA": 0, "shrinkB": 0})
    for r, (x, y) in pos.items():
        fc, ec = ("#e3f2fd", "#1565c0") if r in mod.RESEARCH else ("#fff3e0", "#e65100")
        ax.text(x, y, r, ha="center", va="center", fontsize=9,
                bbox={"boxstyle": "round,pad=0.35", "fc": fc, "ec": ec, "lw": 0.8})
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-0.6, max(rows) + 0.6)
    ax.axis("off")
    base = ", ".join(n for n in mod.BASE if not n.startswith("_"))
    ax.set_title(f"rooms bottom up: runtime (orange), research (blue, never imported by the "
                 f"runtime); every room may also use {base}", fontsize=9, color="#555")
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def on_files(files, config):
    """The generated picture of the architecture page (never written into docs/)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "layers.svg", content=layers_svg()))
    return files


def rooms() -> str:
    """The rooms with their rank and stack, then the research faces."""
    mod = _check_layers()
    out = ["| rank | room | stack | what it holds |", "|---|---|---|---|"]
    for i, (name, what) in enumerate(mod.LAYERS):
        stack = "research" if name in mod.RESEARCH else "runtime"
        out.append(f"| {i} | `{name}` | {stack} | {_md(what)} |")
    out += ["", f"Research faces (modules of a runtime room that run research commands; only "
                f"`{mod.FACE_REGISTRY}` imports them, and they import research rooms inside "
                f"their command functions only):", ""]
    out += [f"* `{m}` — {_md(what)}" for m, what in mod.RESEARCH_FACES.items()]
    return "\n".join(out)


def exit_codes() -> str:
    """The exit codes as :mod:`perfcast.faces.cli` documents them, one row each."""
    import perfcast.faces.cli as cli

    para = next(p for p in (inspect.getdoc(cli) or "").split("\n\n")
                if p.startswith("Exit codes:"))
    rows = ["| exit code | meaning |", "|---|---|"]
    for item in " ".join(para.removeprefix("Exit codes:").split()).split(" · "):
        code, _, meaning = item.strip().partition(" ")
        rows.append(f"| `{code}` | {_md(meaning.rstrip('.'))} |")
    return "\n".join(rows)


def request_schema() -> str:
    """Every option of a request (:data:`perfcast.request.fields.FIELDS`), by group: its name
    (the Python keyword and HTTP key), flag and aliases, kind and unit, the modes it applies
    to, the commands that take it, and its help — the one source the CLI options, the HTTP
    bodies and the web page's form are generated from."""
    from perfcast.request.fields import FIELDS, GROUPS

    out = []
    for group in GROUPS:
        rows = [f for f in FIELDS if f.group == group]
        out += [f"### {group}", "",
                "| name (Python, HTTP) | flag | kind | modes | commands | help |",
                "|---|---|---|---|---|---|"]
        for f in rows:
            flags = ", ".join(f"`{x}`" for x in ((f.flag if not f.argument else "MODEL"),
                                                  *f.aliases, *([f.short] if f.short else [])))
            kind = f.kind + (f" ({f.unit})" if f.unit else "")
            modes = " / ".join(f.modes)
            help_ = _md(f.describe())
            out.append(f"| `{f.name}` | {flags} | {kind} | {modes} | {', '.join(f.commands)} "
                       f"| {help_} |")
        out.append("")
    return "\n".join(out)


_MARKERS = {"cli": cli_reference, "device-schema": device_schema, "json-schemas": json_schemas,
            "layers": layers, "rooms": rooms, "exit-codes": exit_codes,
            "request-schema": request_schema}
