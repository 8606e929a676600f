"""Speed of `perfcast report` (issue #17: < 10 s warm) and that its page opens offline.

    .venv/bin/python benchmarks/bench_report.py [--repeat 3] [--json reports/report/bench_report.json]

Runs the acceptance command ``perfcast report timm:resnet50 --device a100-40gb --batch-size 64
--out r.html`` once to warm the caches (graphs, simulations), then ``--repeat`` more times, each a
new process as a user runs it, and prints the wall and CPU times (and the load average: on a
shared machine the wall time is the CPU time stretched by the other work). Then checks the page: no script, no
stylesheet link, every ``src`` a ``data:`` URI, nothing naming ``http(s)://`` as a resource — and,
where Debian's chromium and Playwright are installed, opens it in headless Chromium with every
non-``file:``/``data:`` request recorded (there must be none).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = str(Path(sys.executable).with_name("perfcast"))
ARGS = ["report", "timm:resnet50", "--device", "a100-40gb", "--batch-size", "64"]


def _run(out: Path) -> tuple[float, float]:
    """``(wall s, CPU s)`` of one ``perfcast report`` process (CPU = user + system: what the
    run costs whatever else loads the machine)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([CLI, *ARGS, "--out", str(out)], capture_output=True, text=True)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"perfcast report failed:\n{p.stderr.strip()}")
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def _static_check(page: str) -> dict:
    srcs = re.findall(r'src="([^"]+)"', page)
    return {"scripts": page.count("<script"), "links": page.count("<link"),
            "images": len(srcs), "all_images_data_uris": all(s.startswith("data:") for s in srcs),
            "remote_references": len(re.findall(r"(?:src|href)=\"?(?:https?:)?//", page))}


def _browser_check(path: Path) -> dict | None:
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if chromium is None:
        return None
    seen: list[str] = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        pg = b.new_page()
        pg.on("request", lambda r: seen.append(r.url)
              if not r.url.startswith(("file:", "data:")) else None)
        pg.goto(path.resolve().as_uri())
        n_img = pg.evaluate("Array.from(document.images).filter(i => i.naturalWidth > 0).length")
        b.close()
    return {"requests_outside_the_file": seen, "images_rendered": n_img}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.html"
        first = _run(out)
        runs = [_run(out) for _ in range(args.repeat)]
        times, cpu = [r[0] for r in runs], [r[1] for r in runs]
        page = out.read_text()
        res = {"command": "perfcast " + " ".join(ARGS) + " --out r.html",
               "first_run_s": round(first[0], 2), "warm_runs_s": [round(t, 2) for t in times],
               "warm_median_s": round(statistics.median(times), 2),
               "warm_max_s": round(max(times), 2),
               "warm_cpu_s": [round(c, 2) for c in cpu],
               "warm_cpu_median_s": round(statistics.median(cpu), 2),
               "load_average_1min": round(os.getloadavg()[0], 2), "cores": os.cpu_count(),
               "page_bytes": len(page.encode()),
               "static": _static_check(page), "browser": _browser_check(out)}
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
