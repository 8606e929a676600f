"""The documentation site: it builds with ``mkdocs build --strict`` (broken links, missing
repository files and moved API objects fail it), its reference pages are generated from the code,
every ``perfcast`` command it shows parses against the command line, its Python example runs,
and no page names an issue of the project's tracker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import parse_command, shown_commands

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
ISSUE = re.compile(r"issues?\s*#\s*\d|\(issue\s+\d|issue\s+\d+\b", re.I)


def test_the_pages_name_no_issue():
    bad = [f"{p.relative_to(ROOT)}:{i}" for p in [*PAGES, ROOT / "README.md"]
           for i, line in enumerate(p.read_text().splitlines(), 1) if ISSUE.search(line)]
    assert not bad, bad


def test_every_command_the_pages_show_parses():
    lines = [c for p in PAGES for c in shown_commands(p.read_text())]
    assert len(lines) >= 45, len(lines)
    for line in lines:
        parse_command(line)


@pytest.mark.slow  # runs the guide's example end to end; its commands parse in the fast tier
def test_the_api_example_runs(capsys):
    text = (DOCS / "guides" / "fit-and-speed.md").read_text()
    m = re.search(r"<!-- api-example -->\s*```python\n(.*?)```", text, re.S)
    assert m, "the fit-and-speed guide lost its Python example"
    exec(compile(m.group(1), "docs/guides/fit-and-speed.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5
    assert out[1].split()[0] in {"1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"}
    assert "USD" in out[3] and "kg CO2e" in out[3]


def test_the_spec_sheet_example_is_a_valid_device():
    from perfcast.devices.registry import load_device_spec

    dev = load_device_spec(DOCS / "examples" / "rtx4080.json")
    assert dev.key == "rtx4080" and dev.kind == "gpu" and dev.sm_count == 76


@pytest.mark.slow  # CI also runs mkdocs build --strict itself (.ci/run)
def test_the_site_builds_strict_with_generated_reference(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(site)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    cli = (site / "reference" / "cli" / "index.html").read_text()
    import typer.main

    from perfcast.faces.cli import app
    from perfcast.workload import GENERATE_PRECISIONS

    root = typer.main.get_command(app)
    for name, cmd in root.commands.items():  # every command, with every option, generated
        assert f'id="perfcast-{name}"' in cli, name
        for p in cmd.params:
            for opt in getattr(p, "opts", []):
                if opt.startswith("--"):
                    assert f"<code>{opt}</code>" in cli, (name, opt)
    assert ", ".join(GENERATE_PRECISIONS[:-1]) in cli  # the allowed values, from workload.py
    device = (site / "reference" / "device-spec" / "index.html").read_text()
    assert "peak_fp32_tflops" in device and "bandwidth_gbs" in device
    json_page = (site / "reference" / "json" / "index.html").read_text()
    assert "ttft_ms" in json_page and "max_batch_size" in json_page
    api = (site / "reference" / "python" / "index.html").read_text()
    assert "perfcast.api.predict" in api
    assert (site / "layers.svg").read_text().lstrip().startswith("<?xml")
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert not ISSUE.search(re.sub(r"<[^>]+>", " ", text)), page
