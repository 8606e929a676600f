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


TINY_MODELS = ("timm:resnet10t", "timm:mobilenetv3_small_100", "timm:vit_tiny_patch16_224",
               "timm:lcnet_100", "torchvision:squeezenet1_1", "timm:regnetx_002")


@pytest.fixture(scope="session")
def tiny_feature_set(tmp_path_factory):
    """A small real FeatureSet: this machine's CPU measurements (datasets/cpu, in the repo) of
    six small models at two input sizes, infer + train — real labels (time_ms, memory_mb),
    twelve graphs."""
    from perfcast.datasets import load_local_cpu
    from perfcast.predictors.data import feature_set

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
