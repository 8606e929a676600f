"""Per-test CPU seconds, for ranking the fast tier on a machine shared with other jobs.

    .venv/bin/python -m pytest -p tests.cpu_time --durations=30

pytest's ``--durations`` are wall times: on a busy 2-core machine they grow with the load of
everyone else. This plugin also counts each test's CPU time — user + system of the pytest
process and of the child processes it waited for (``perfcast …`` subprocesses, servers a test
stopped) — which the load barely changes. At the end it prints the session's CPU and wall time
and the ``$PERFCAST_CPU_TOP`` (default 30) tests using the most CPU; with
``$PERFCAST_CPU_JSON`` set it also writes every test's ``[nodeid, cpu_s, wall_s]`` there (in
run order). A session-scoped fixture's set-up counts towards the first test that asks for it.
"""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

_ROWS: list[tuple[str, float, float]] = []
_START: list[float] = []


def _cpu_s() -> float:
    """User + system seconds of this process and of its waited-for children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def pytest_sessionstart(session):
    _START[:] = [_cpu_s(), time.perf_counter()]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _cpu_s(), time.perf_counter()
    yield
    _ROWS.append((item.nodeid, _cpu_s() - cpu, time.perf_counter() - wall))


def pytest_terminal_summary(terminalreporter):
    if not _START:
        return
    tr = terminalreporter
    tr.write_sep("=", "CPU time (tests/cpu_time.py)")
    tr.write_line(f"session: {_cpu_s() - _START[0]:.1f} s CPU, {time.perf_counter() - _START[1]:.1f} s "
                  f"wall; tests: {sum(r[1] for r in _ROWS):.1f} s CPU in {len(_ROWS)} tests")
    for nodeid, cpu, wall in sorted(_ROWS, key=lambda r: -r[1])[
            :int(os.environ.get("PERFCAST_CPU_TOP", "30"))]:
        tr.write_line(f"{cpu:7.2f} s CPU {wall:7.2f} s wall  {nodeid}")
    if os.environ.get("PERFCAST_CPU_JSON"):
        with open(os.environ["PERFCAST_CPU_JSON"], "w") as f:
            json.dump([list(r) for r in _ROWS], f, indent=0)
