"""The README's Python API example runs as written."""

from __future__ import annotations

import re
from pathlib import Path


def test_readme_api_example_runs(capsys):
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    m = re.search(r"<!-- readme-api-example -->\s*```python\n(.*?)```", text, re.S)
    assert m, "README lost its API example"
    exec(compile(m.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5
    assert out[1].split()[0] in {"1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"}
    assert "USD" in out[3] and "kg CO2e" in out[3]
