"""Print the mainstream plausibility table (``tests/test_mainstream.py``) as Markdown: per row
perfcast's answer, the physical lower bound and ceiling (``benchmarks/mainstream_rows.py`` says
how each is computed), value ÷ lower bound, whether it is within the bounds and which predictor
answered. ``--explain`` adds, for every row out of bounds, the command, both rules and the notes.

    python benchmarks/mainstream_table.py [--explain] [-k SUBSTRING]

Exit status 0 whatever the rows say (the test is the gate).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the checkout's data (see perfcast.paths) unless the environment names other folders; no hub
os.environ.setdefault("PERFCAST_DATA", str(ROOT.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(ROOT / "datasets"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(ROOT))

from benchmarks.mainstream_rows import evaluate, markdown, rows  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--explain", action="store_true",
                    help="print the rules, command and notes of every row out of bounds")
    ap.add_argument("-k", default="", help="only the rows whose id contains this")
    args = ap.parse_args(argv)
    outcomes = [evaluate(r) for r in rows() if args.k in r.id]
    print(markdown(outcomes))
    bad = [o for o in outcomes if not o.ok]
    print(f"\n{len(outcomes) - len(bad)} of {len(outcomes)} rows within their bounds "
          f"(`python benchmarks/mainstream_table.py`).")
    if args.explain:
        for o in bad:
            print("\n" + o.explain())
    return 0


if __name__ == "__main__":
    sys.exit(main())
