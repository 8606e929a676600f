import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own graph cache directory."""
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(tmp_path_factory.mktemp("graph-cache")))


@pytest.fixture(scope="session")
def resnet18_infer():
    from perfcast.frontends import GraphRequest, build_graph

    return build_graph(GraphRequest("torchvision:resnet18", batch_size=2))


@pytest.fixture(scope="session")
def resnet18_train():
    from perfcast.frontends import GraphRequest, build_graph

    return build_graph(GraphRequest("torchvision:resnet18", batch_size=2, mode="train"))
