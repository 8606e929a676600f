"""No room imports a higher one (scripts/check_layers.py: the dependency picture and its check)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_upward_imports():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_layers.py")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 upward imports, 0 unranked rooms" in p.stderr
