"""Shared fixtures and the rules of the two test tiers.

Tiers
-----
* **fast** — ``.venv/bin/python -m pytest`` (pyproject's ``addopts = -m 'not slow'``): the
  README's test command, under 5 minutes on a 2-core machine. It still touches every room
  (package under ``perfcast/``) and every CLI command at least once with real small models;
  ``scripts/check_test_tiers.py`` checks that from the report this conftest writes when
  ``PERFCAST_TIER_REPORT`` names a file (``.ci/run`` does).
* **slow** — ``python -m pytest -m slow``: ``@pytest.mark.slow`` on training recipes, fuzzing,
  Ray, PostgreSQL, the browser, framework exporters, kill-and-resume runs, byte-identical
  rebuilds and the full-size property runs. ``.ci/run`` runs both tiers.

A new test belongs to the fast tier unless it is one of those: keep it to a few seconds (small
models such as ``timm:resnet10t`` at 3×64×64, the session fixtures below, the shared graph
cache). Where a heavy test is the only one exercising a command or a room, keep a small fast
variant beside the slow one.

Graph cache
-----------
Every test shares **one graph cache per session** (``$PERFCAST_CACHE_DIR`` points at a
session directory; the memory-simulation cache ``memsim.csv`` lives beside it), so a model's
graph is built once per session, in-process and by the CLI subprocesses a test starts (they
inherit the variable). A test that needs an empty cache of its own — it counts, damages or
times cache entries, or checks what a cold process does — asks for the ``isolated_cache``
fixture (the path of a fresh directory, set as ``$PERFCAST_CACHE_DIR`` for that test).
"""

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The checkout's data (see perfcast.paths): the shared public measurements beside the repository
# and the project's own datasets in it. Set before any test imports perfcast.
REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PERFCAST_DATA", str(REPO.parent / "shared" / "data"))
os.environ.setdefault("PERFCAST_DATASETS", str(REPO / "datasets"))
# a developer's own devices (perfcast devices add) must not change what the tests see
os.environ["PERFCAST_DEVICES_DIR"] = tempfile.mkdtemp(prefix="perfcast-test-devices-")
os.environ["PERFCAST_USER_MODELS"] = tempfile.mkdtemp(prefix="perfcast-test-models-")

#: With ``PERFCAST_REQUIRE_DATA=1`` (CI) a test needing absent shared data fails instead of skipping.
REQUIRE_DATA_ENV = "PERFCAST_REQUIRE_DATA"


def require_shared_data(*files: str) -> None:
    """The one gate for tests that read the shared public measurements (``$PERFCAST_DATA``):
    skip (with the reason) when the folder or one of ``files`` (paths relative to it) is missing
    — or fail when ``PERFCAST_REQUIRE_DATA=1``. As a marker: ``@pytest.mark.shared_data(*files)``."""
    from perfcast.paths import public_data_dir

    root = public_data_dir()
    if not root.is_dir():
        where = str(root)
    else:
        missing = [f for f in files if not (root / f).is_file()]
        if not missing:
            return
        where = ", ".join(str(root / f) for f in missing)
    reason = f"shared measurement data not found: {where} (set PERFCAST_DATA to ../shared/data)"
    if os.environ.get(REQUIRE_DATA_ENV) == "1":
        pytest.fail(f"{reason}; {REQUIRE_DATA_ENV}=1 forbids skipping", pytrace=False)
    pytest.skip(reason)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "shared_data(*files): needs the shared public measurements (files relative to "
                   "$PERFCAST_DATA); skipped when absent, failed when PERFCAST_REQUIRE_DATA=1")
    from tests import tier_report

    tier_report.start()


def pytest_sessionfinish(session, exitstatus):
    from tests import tier_report

    tier_report.write()


#: Fixtures that make a test slow-tier wherever it is (a server a session starts): PostgreSQL,
#: Ray. A parametrized store fixture's ``"postgresql"`` case counts too.
SLOW_FIXTURES = ("postgres_server", "pg_url", "ray_address")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Tests on PostgreSQL or Ray (:data:`SLOW_FIXTURES`) belong to the slow tier."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if any(f in getattr(item, "fixturenames", ()) for f in SLOW_FIXTURES) \
                or "postgresql" in params.values():
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for mark in item.iter_markers("shared_data"):
        require_shared_data(*mark.args)


@pytest.fixture(scope="session")
def session_graph_cache(tmp_path_factory) -> Path:
    """The graph cache every test shares (see the module docstring): ``<session>/graphs``,
    so that the graph store of labeled records (``perfcast.paths.graph_store_dir()``, default
    ``<session>/labeled``) and the simulation cache in it are the session's too."""
    return tmp_path_factory.mktemp("session-cache") / "graphs"


@pytest.fixture(autouse=True)
def _graph_cache(session_graph_cache, monkeypatch):
    """``$PERFCAST_CACHE_DIR`` = the session's graph cache, for every test."""
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(session_graph_cache))


@pytest.fixture
def isolated_cache(_graph_cache, tmp_path_factory, monkeypatch) -> Path:
    """A fresh, empty graph cache (and simulation cache beside it) for this test only."""
    path = tmp_path_factory.mktemp("graph-cache")
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(path))
    return path


@pytest.fixture(scope="session")
def resnet18_infer():
    from perfcast.frontends import build_graph
    from perfcast.workload import Workload

    return build_graph(Workload.of("torchvision:resnet18", batch_size=2))


@pytest.fixture(scope="session")
def resnet18_train():
    from perfcast.frontends import build_graph
    from perfcast.workload import Workload

    return build_graph(Workload.of("torchvision:resnet18", batch_size=2, mode="train"))


TINY_MODELS = ("timm:resnet10t", "timm:mobilenetv3_small_100", "timm:vit_tiny_patch16_224",
               "timm:lcnet_100", "torchvision:squeezenet1_1", "timm:regnetx_002")


@pytest.fixture(scope="session")
def tiny_feature_set(session_graph_cache):
    """A small real FeatureSet: this machine's CPU measurements (datasets/cpu, in the repo) of
    six small models at 3×64×64, infer + train — real labels (time_ms, memory_mb), six graphs
    (in the session's graph store, where ``perfcast train`` subprocesses find them). One input
    size since issue #40 (it was two: twelve graphs, twice the rows every fit in the fast tier
    learns from)."""
    from perfcast.datasets import load_local_cpu
    from perfcast.labeled.frames import feature_set

    store = session_graph_cache.parent / "labeled"
    old = os.environ.get("PERFCAST_GRAPH_STORE")
    os.environ["PERFCAST_GRAPH_STORE"] = str(store)
    try:
        df = load_local_cpu()
        df = df[df["model"].isin(TINY_MODELS) & (df["input_size"] == "3,64,64")]
        df = df.reset_index(drop=True)
        fs = feature_set(df, workers=1)
    finally:
        if old is None:
            os.environ.pop("PERFCAST_GRAPH_STORE", None)
        else:
            os.environ["PERFCAST_GRAPH_STORE"] = old
    assert len(fs.graphs) == len(TINY_MODELS)
    return fs


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for this test session (tests/postgres_server.py): a throwaway
    cluster of Debian's server binaries on a free loopback port, started once and removed at
    the end — or ``$PERFCAST_TEST_POSTGRES_URL``. Skips with the reason when none can be had,
    fails instead when ``PERFCAST_REQUIRE_POSTGRES=1`` (CI)."""
    from tests import postgres_server as pg

    try:
        server = pg.start()
    except pg.Unavailable as exc:
        if os.environ.get(pg.REQUIRE_ENV) == "1":
            pytest.fail(f"no PostgreSQL server: {exc}; {pg.REQUIRE_ENV}=1 forbids skipping",
                        pytrace=False)
        pytest.skip(f"no PostgreSQL server: {exc}")
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres_server):
    """The URL (``postgresql://perfcast:<password>@127.0.0.1:<port>/t_<random>``) of a new, empty
    database on the session's PostgreSQL server."""
    from tests import postgres_server as pg

    return pg.new_database(postgres_server.admin_url)


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test: the learned predictors here are tiny, and two threads on
    a busy 2-core machine spin (100× slower); also makes bitwise comparisons independent of the
    thread count. Use with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture
def predict_json():
    """``predict_json(*args)``: ``perfcast predict timm:resnet10t`` (3×64×64, batch 32) with
    ``args`` and ``--json`` in a subprocess; asserts exit 0 and returns the parsed answer."""
    import json
    import subprocess
    import sys

    def run(*args):
        r = subprocess.run([sys.executable, "-m", "perfcast", "predict", "timm:resnet10t",
                            "--input-size", "3,64,64", "--batch-size", "32", "--json", *args],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    return run
