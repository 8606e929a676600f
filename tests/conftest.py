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


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for mark in item.iter_markers("shared_data"):
        require_shared_data(*mark.args)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own graph cache directory."""
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(tmp_path_factory.mktemp("graph-cache")))


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
def tiny_feature_set(tmp_path_factory):
    """A small real FeatureSet: this machine's CPU measurements (datasets/cpu, in the repo) of
    six small models at two input sizes, infer + train — real labels (time_ms, memory_mb),
    twelve graphs."""
    from perfcast.datasets import load_local_cpu
    from perfcast.labeled.frames import feature_set

    store = tmp_path_factory.mktemp("graph-store")
    old = os.environ.get("PERFCAST_GRAPH_STORE")
    os.environ["PERFCAST_GRAPH_STORE"] = str(store)
    try:
        df = load_local_cpu()
        df = df[df["model"].isin(TINY_MODELS) & df["input_size"].isin(["3,64,64", "3,96,96"])]
        df = df.reset_index(drop=True)
        fs = feature_set(df, workers=1)
    finally:
        if old is None:
            os.environ.pop("PERFCAST_GRAPH_STORE", None)
        else:
            os.environ["PERFCAST_GRAPH_STORE"] = old
    assert len(fs.graphs) == 2 * len(TINY_MODELS)
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
