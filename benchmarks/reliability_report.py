"""Write ``reports/reliability.md``: today's outcome of every hostile / careless input of issue
#23 (the table's rows, run through the real ``perfcast`` console script in a fresh process each)
and of its items 2–6 (the lock, validation, signals, physical plausibility and fuzz tests, with
their counts).

    .venv/bin/python benchmarks/reliability_report.py            # ≈ 10 min (fuzz included)
    .venv/bin/python benchmarks/reliability_report.py --no-fuzz  # ≈ 3 min

Needs ``PERFCAST_DATA`` / ``PERFCAST_DATASETS`` as the tests do (the script sets the checkout's
defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("PERFCAST_DATA", str(REPO.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(REPO / "datasets"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: Test files of items 2–6 and what each covers.
ITEM_TESTS = [
    ("2 · one collector per store", "tests/test_collect_lock.py"),
    ("3–4 · validation at the edge, strict JSON, signals, atomic writes",
     "tests/test_reliability.py"),
    ("5 · physical plausibility (hypothesis)", "tests/test_plausibility.py"),
    ("6 · fuzzing of the parsers (hypothesis)", "tests/test_fuzz.py"),
]


def run_rows() -> list[dict]:
    from tests.reliability_cases import CASES

    rows = []
    for case in CASES:
        with tempfile.TemporaryDirectory(prefix="perfcast-reliability-") as d:
            tmp = Path(d)
            env = {**os.environ, "PERFCAST_CACHE_DIR": str(tmp / "cache"),
                   "PERFCAST_DEVICES_DIR": str(tmp / "devices")}
            os.environ.update({k: env[k] for k in ("PERFCAST_CACHE_DIR", "PERFCAST_DEVICES_DIR")})
            argv = case.setup(tmp)
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "perfcast", *argv], capture_output=True,
                               text=True, env=env, timeout=600,
                               cwd=tmp / case.cwd if case.cwd else None)
            secs = time.perf_counter() - t0
            problem = case.check(p.returncode, p.stdout, p.stderr, tmp)
            shown = " ".join(a if str(tmp) not in a else a.replace(str(tmp), "$TMP")
                             for a in argv)
            first = next((x for x in p.stderr.splitlines() if x.strip()), "")
            rows.append({"id": case.id, "does": case.does, "expect": case.expect,
                         "command": f"perfcast {shown}", "exit": p.returncode,
                         "stderr": first.replace(str(tmp), "$TMP")[:160],
                         "ok": problem is None, "problem": problem, "seconds": round(secs, 1)})
            print(f"{case.id:24s} exit {p.returncode}  {'ok' if problem is None else problem}",
                  flush=True)
    return rows


def run_items(fuzz: bool) -> tuple[list[dict], dict, dict]:
    """Run the test files of :data:`ITEM_TESTS` (slow ones included): their outcomes, the fuzz
    cases by target and exit code, and the plausibility tests' request counts."""
    out = []
    fuzz_counts: dict = {}
    request_counts: dict = {}
    for item, path in ITEM_TESTS:
        if not (REPO / path).exists():
            out.append({"item": item, "file": path, "tests": [], "missing": True})
            continue
        if path.endswith("test_fuzz.py") and not fuzz:
            out.append({"item": item, "file": path, "tests": [], "skipped": "--no-fuzz"})
            continue
        with tempfile.TemporaryDirectory() as d:
            xml = Path(d) / "junit.xml"
            counts = Path(d) / "fuzz.json"
            requests = Path(d) / "plausibility.json"
            env = {**os.environ, "FUZZ_REPORT": str(counts), "PLAUSIBILITY_REPORT": str(requests)}
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-m", "slow or not slow", path, f"--junitxml={xml}"], cwd=REPO,
                           env=env, capture_output=True, text=True)
            secs = time.perf_counter() - t0
            tests = []
            for tc in ET.parse(xml).getroot().iter("testcase"):
                status = ("failed" if tc.find("failure") is not None or tc.find("error")
                          is not None else "skipped" if tc.find("skipped") is not None
                          else "passed")
                reason = ""
                if status == "skipped":
                    reason = tc.find("skipped").get("message", "")
                tests.append({"name": tc.get("name"), "status": status,
                              "seconds": float(tc.get("time", 0)), "reason": reason})
            if counts.exists():
                fuzz_counts = json.loads(counts.read_text())
            if requests.exists():
                request_counts = json.loads(requests.read_text())
        out.append({"item": item, "file": path, "tests": tests, "seconds": round(secs)})
        print(f"{path}: {sum(t['status'] == 'passed' for t in tests)}/{len(tests)} passed",
              flush=True)
    return out, fuzz_counts, request_counts


def write(rows: list[dict], items: list[dict], fuzz: dict, seconds: float, cmd: str,
          requests: dict | None = None) -> Path:
    lines = ["# Reliability: hostile and careless inputs (issue #23)", "",
             f"`{cmd}` ({time.strftime('%Y-%m-%d', time.gmtime())}, {seconds:.0f} s). Each row "
             "runs the real console script in a fresh process with an empty graph cache; its "
             "case (setup, command, check) is defined once in `tests/reliability_cases.py`, "
             "which `tests/test_reliability.py` asserts.", "",
             "## The issue's table", "",
             "| what the user does | should | command | exit | first stderr line | holds |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        cmd_text = r["command"] if len(r["command"]) < 110 else r["command"][:107] + "…"
        err = r["stderr"].replace("|", "\\|") or "—"
        holds = "yes" if r["ok"] else f"**no**: {r['problem']}"
        lines.append(f"| {r['does']} | {r['expect']} | `{cmd_text}` | {r['exit']} | {err} | "
                     f"{holds} |")
    ok = sum(r["ok"] for r in rows)
    lines += ["", f"{ok} of {len(rows)} rows hold.", "", "## Items 2–6", ""]
    for it in items:
        lines.append(f"### {it['item']} — `{it['file']}`")
        lines.append("")
        if it.get("missing"):
            lines += ["not written yet.", ""]
            continue
        if it.get("skipped"):
            lines += [f"not run ({it['skipped']}).", ""]
            continue
        passed = sum(t["status"] == "passed" for t in it["tests"])
        lines.append(f"{passed} of {len(it['tests'])} tests pass ({it['seconds']} s).")
        lines.append("")
        lines.append("| test | outcome | s |")
        lines.append("|---|---|---|")
        for t in it["tests"]:
            outcome = t["status"] + (f" ({t['reason']})" if t["reason"] else "")
            lines.append(f"| `{t['name']}` | {outcome} | {t['seconds']:.1f} |")
        lines.append("")
        if it["file"].endswith("test_plausibility.py") and requests:
            lines += [f"Requests whose every property was checked (counted by the tests): "
                      f"{requests['requests checked']:,} ({requests['distinct requests']:,} "
                      f"distinct; {requests['models']} models, {requests['devices']} devices, "
                      f"{requests['batches']} batch sizes), plus {requests['fit searches']} "
                      f"`fit` searches.", ""]
    if fuzz:
        total = sum(v["cases"] for v in fuzz.values())
        lines += ["### Fuzz cases by target and exit code", "",
                  "| target | cases | exit 0 | exit 2 | exit 3 | exit 1 | exit 130 |",
                  "|---|---|---|---|---|---|---|"]
        for k, v in fuzz.items():
            lines.append(f"| {k} | {v['cases']} | " + " | ".join(
                str(v.get(f"exit {c}", 0)) for c in (0, 2, 3, 1, 130)) + " |")
        lines += ["", f"{total:,} cases (hypothesis counts its shrinking runs too)."]
    path = REPO / "reports" / "reliability.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-fuzz", action="store_true", help="skip the slow fuzz test")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = run_rows()
    items, fuzz, requests = run_items(fuzz=not args.no_fuzz)
    cmd = ".venv/bin/python benchmarks/reliability_report.py" + (
        " --no-fuzz" if args.no_fuzz else "")
    print(write(rows, items, fuzz, time.perf_counter() - t0, cmd, requests))


if __name__ == "__main__":
    main()
