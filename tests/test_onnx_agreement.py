"""The same model through the PyTorch and the ONNX frontends: equal op counts modulo the
documented decompositions (``benchmarks/onnx_agreement.py``) and total MACs within 2 %.

The whole-zoo check is ``benchmarks/check_onnx_agreement.py``; these are the fast cases.
"""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from pathlib import Path

import pytest

from perfcast import ops as _ops
from perfcast.graph import Edge, GraphMeta, ModelGraph, Node

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from onnx_agreement import (DOCUMENTED_DECOMPOSITIONS, GROUP_OF, PLUMBING_GROUPS,  # noqa: E402
                            RULES, compare_graphs, comparison_group, format_comparison)

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402


# ------------------------------------------------------------------------------ helpers


def _export(model: nn.Module, x, path: Path, opset: int = 23) -> Path:
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), dynamo=True, opset_version=opset)
    return path


def _both(factory, shape, tmp_path: Path, opset: int = 23) -> dict:
    """Export ``factory()`` on CPU, trace a fresh meta instance, compare the two graphs."""
    from perfcast.frontends.onnx import graph_from_onnx
    from perfcast.frontends.torch_frontend import graph_from_module

    torch.manual_seed(0)
    path = _export(factory().eval(), torch.randn(*shape), tmp_path / "m.onnx", opset)
    og = graph_from_onnx(path, batch_size=shape[0])
    with torch.device("meta"):
        meta_model = factory().eval()
    tg = graph_from_module(meta_model, (torch.empty(*shape, device="meta"),), model_id="m")
    return compare_graphs(tg, og, onnx_model=path)


def _assert_agree(res: dict) -> None:
    assert res["unexplained"] == [], format_comparison(res)
    assert res["ops_agree"] and res["macs_agree"] and res["agree"], format_comparison(res)
    assert abs(res["macs_rel_diff"]) <= 0.02
    for name, group in res["groups"].items():
        if group["compute"]:
            assert group["onnx"] == group["expected_onnx"], (name, group)
    # the differences explain every raw count difference exactly
    for name, group in res["groups"].items():
        total = sum(d["delta"] for d in res["differences"] if d["group"] == name)
        assert total == group["raw_onnx"] - group["raw_torch"], name
    assert all(d["rule"] in DOCUMENTED_DECOMPOSITIONS for d in res["differences"])


class TinyCNN(nn.Module):
    """Conv+BN+ReLU, depthwise conv whose output is reused (its BN cannot be folded), SiLU,
    ReLU6, Hardswish, max and global-average pooling, Linear+BatchNorm1d, softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16)
        self.c3, self.b3 = nn.Conv2d(16, 32, 1), nn.BatchNorm2d(32)
        self.fc, self.bn1d = nn.Linear(32, 10), nn.BatchNorm1d(10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        y = self.c2(x)
        x = F.silu(self.b2(y)) + y
        x = F.hardswish(F.relu6(self.b3(self.c3(x))))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return F.softmax(self.bn1d(self.fc(x)), dim=-1)


class TinyBlock(nn.Module):
    """Pre-norm transformer block: LayerNorm, qkv Linear, sdpa, proj, GELU (erf and tanh) MLP."""

    def __init__(self, d: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.act, self.act_tanh = nn.GELU(), nn.GELU(approximate="tanh")

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, n, 3, self.heads, c // self.heads) \
            .permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c)
        x = x + self.proj(a)
        return x + self.fc2(self.act_tanh(self.act(self.fc1(self.ln2(x)))))


# ------------------------------------------------------------------------------ real exports


def test_tiny_cnn_agrees(tmp_path: Path) -> None:
    res = _both(TinyCNN, (1, 3, 32, 32), tmp_path)
    _assert_agree(res)
    rules = res["rules"]
    # b1, b3 (after single-use convs) and bn1d (after the Linear) fold; b2 stays
    assert rules["batchnorm_folding"]["applied"] == 3
    assert (res["groups"]["batch_norm"]["torch"], res["groups"]["batch_norm"]["onnx"]) == (4, 1)
    assert rules["silu_as_sigmoid_mul"]["applied"] == 1
    assert rules["adaptive_avg_pool_as_mean"]["applied"] == 1
    assert res["groups"]["conv"]["torch"] == res["groups"]["conv"]["onnx"] == 3
    assert res["groups"]["relu_clip"]["onnx"] == 2  # Relu and Clip(0, 6)
    assert res["torch_macs"] == res["onnx_macs"]


def test_tiny_transformer_block_agrees(tmp_path: Path) -> None:
    res = _both(TinyBlock, (1, 16, 64), tmp_path)
    _assert_agree(res)
    assert res["groups"]["attention"]["torch"] == res["groups"]["attention"]["onnx"] == 1
    assert res["groups"]["dense"]["onnx"] == 4
    assert res["groups"]["layer_norm"]["onnx"] == 2 and res["groups"]["gelu"]["onnx"] == 2
    assert res["rules"]["linear_nd_as_matmul_add"]["applied"] == 4  # 3-D Linear: MatMul + Add
    assert res["torch_macs"] == res["onnx_macs"]


def test_tiny_transformer_block_opset18_decompositions(tmp_path: Path) -> None:
    """Below opset 20/23, GELU and sdpa are decomposed; the rules account for every node."""
    res = _both(TinyBlock, (1, 16, 64), tmp_path, opset=18)
    _assert_agree(res)
    assert res["rules"]["gelu_decomposed"]["applied"] == 2
    assert res["rules"]["sdpa_decomposed"]["applied"] == 1
    assert res["groups"]["attention"]["onnx"] == 0 and res["groups"]["dense"]["onnx"] == 6


@pytest.mark.slow
def test_resnet18_agrees(tmp_path: Path) -> None:
    torchvision = pytest.importorskip("torchvision")
    from perfcast.frontends import build_graph
    from perfcast.workload import Workload
    from perfcast.frontends.onnx import graph_from_onnx

    path = _export(torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 224, 224),
                   tmp_path / "resnet18.onnx")
    res = compare_graphs(build_graph(Workload.of("torchvision:resnet18", batch_size=1)),
                         graph_from_onnx(path, batch_size=1), onnx_model=path)
    _assert_agree(res)
    assert res["rules"]["batchnorm_folding"]["applied"] == 20
    assert res["torch_macs"] == res["onnx_macs"] == pytest.approx(1.814e9, rel=1e-3)
    assert {"batchnorm_folding", "adaptive_avg_pool_as_mean"} <= set(res["explained"])


# ------------------------------------------------------------------------------ unit tests


def _node(name: str, op: str, ins: list, outs: list, macs: float = 0.0, **attrs) -> Node:
    return Node(name=name, op=op, target=op, input_shapes=[tuple(s) for s in ins],
                output_shapes=[tuple(s) for s in outs], macs=macs, attrs=dict(attrs))


def _chain(nodes: list[Node], model_id: str, frontend: str) -> ModelGraph:
    edges = [Edge(i, i + 1) for i in range(len(nodes) - 1)]
    return ModelGraph(nodes, edges, GraphMeta(model_id=model_id, batch_size=1,
                                              input_shapes=[(1, 3, 8, 8)], frontend=frontend))


def _conv(macs: float = 6912.0) -> Node:
    return _node("conv", "conv2d", [(1, 3, 8, 8), (4, 3, 3, 3)], [(1, 4, 8, 8)], macs)


def test_unexplained_difference_is_flagged() -> None:
    tg = _chain([_conv(), _node("bn", "batch_norm", [(1, 4, 8, 8)], [(1, 4, 8, 8)]),
                 _node("act", "relu", [(1, 4, 8, 8)], [(1, 4, 8, 8)]),
                 _node("flat", "reshape", [(1, 4, 8, 8)], [(1, 256)])], "t", "torch")
    og = _chain([_conv(), _node("act", "tanh", [(1, 4, 8, 8)], [(1, 4, 8, 8)]),
                 _node("flat", "reshape", [(1, 4, 8, 8)], [(1, 4, 64)]),
                 _node("flat2", "reshape", [(1, 4, 64)], [(1, 256)])], "o", "onnx")
    res = compare_graphs(tg, og)
    assert res["macs_agree"] and not res["ops_agree"] and not res["agree"]
    unexplained = {(d["group"], d["delta"]) for d in res["unexplained"]}
    assert unexplained == {("relu_clip", -1), ("tanh", 1)}
    assert all(d["rule"] == "unexplained" for d in res["unexplained"])
    # the folded BatchNorm is explained, the extra reshape is plumbing
    tags = {(d["group"], d["rule"]) for d in res["differences"]}
    assert ("batch_norm", "batchnorm_folding") in tags
    assert ("plumbing:shape", "shape_plumbing") in tags
    assert res["groups"]["relu_clip"] == {**res["groups"]["relu_clip"], "agree": False}
    assert "unexplained: relu_clip -1, tanh +1" in format_comparison(res)


def test_macs_beyond_two_percent_disagree() -> None:
    tg = _chain([_conv(6912.0)], "t", "torch")
    og = _chain([_conv(6912.0 * 1.03)], "o", "onnx")
    res = compare_graphs(tg, og)
    assert res["ops_agree"] and not res["macs_agree"] and not res["agree"]
    assert res["macs_rel_diff"] == pytest.approx(0.03)
    within = compare_graphs(tg, _chain([_conv(6912.0 * 1.015)], "o", "onnx"))
    assert within["agree"]


def test_bn_after_multi_use_conv_is_not_foldable() -> None:
    """A BatchNorm whose conv output is also read elsewhere may not disappear in ONNX."""
    conv = _conv()
    nodes = [conv, _node("bn", "batch_norm", [(1, 4, 8, 8)], [(1, 4, 8, 8)]),
             _node("add", "add", [(1, 4, 8, 8), (1, 4, 8, 8)], [(1, 4, 8, 8)])]
    tg = ModelGraph(nodes, [Edge(0, 1), Edge(1, 2), Edge(0, 2)],
                    GraphMeta(model_id="t", batch_size=1, input_shapes=[(1, 3, 8, 8)]))
    og = ModelGraph([_conv(), nodes[2]], [Edge(0, 1)],
                    GraphMeta(model_id="o", batch_size=1, input_shapes=[(1, 3, 8, 8)]))
    res = compare_graphs(tg, og)
    assert res["rules"].get("batchnorm_folding") is None
    assert {(d["group"], d["delta"]) for d in res["unexplained"]} == {("batch_norm", -1)}


def test_constant_only_nodes_are_set_aside() -> None:
    """Nodes that never see a model input (mask/position construction) are folded by ONNX."""
    x4 = (1, 4, 8, 8)
    tg = ModelGraph(
        [_node("arange", "constant", [], [(8,)]), _node("plus", "add", [(8,)], [(8,)]),
         _conv(), _node("bias", "add", [x4, (8,)], [x4]), _node("act", "relu", [x4], [x4])],
        [Edge(0, 1), Edge(2, 3), Edge(1, 3), Edge(3, 4)],
        GraphMeta(model_id="t", batch_size=1, input_shapes=[(1, 3, 8, 8)]))
    og = _chain([_conv(), _node("bias", "add", [x4, (8,)], [x4]), _node("act", "relu", [x4], [x4])],
                "o", "onnx")
    res = compare_graphs(tg, og)
    assert res["agree"], format_comparison(res)
    assert res["excluded"]["constant_folding"]["torch"] == {"add": 1, "plumbing:constant": 1}
    assert res["groups"]["add"]["torch"] == res["groups"]["add"]["onnx"] == 1
    assert {"group": "add", "torch": 2, "onnx": 1, "delta": -1,
            "rule": "constant_folding"} in res["differences"]


def test_groups_and_documentation_cover_everything() -> None:
    assert set(GROUP_OF) == set(_ops.OPS)
    assert comparison_group("conv_depthwise") == comparison_group("conv_transpose2d") == "conv"
    assert comparison_group("einsum") == comparison_group("linear") == "dense"
    assert comparison_group("reshape") in PLUMBING_GROUPS
    assert comparison_group("not-an-op") == "other"
    for rule in RULES:
        assert DOCUMENTED_DECOMPOSITIONS[rule.name] == rule.doc and rule.doc
    for tag in ("shape_plumbing", "constant_folding", "dead_code_elimination"):
        assert DOCUMENTED_DECOMPOSITIONS[tag]


def test_dead_code_is_set_aside() -> None:
    """An unused head (BERT's pooler) runs in eager PyTorch but ONNX export deletes it."""
    x4 = (1, 4, 8, 8)
    tg = ModelGraph(
        [_conv(), _node("act", "relu", [x4], [x4]), _node("pool", "slice", [x4], [(1, 4)]),
         _node("pooler", "linear", [(1, 4), (4, 4)], [(1, 4)], 16.0, contract=4, bias=True),
         _node("tanh", "tanh", [(1, 4)], [(1, 4)])],
        [Edge(0, 1), Edge(1, 2), Edge(2, 3), Edge(3, 4)],
        GraphMeta(model_id="t", batch_size=1, input_shapes=[(1, 3, 8, 8)]))
    og = _chain([_conv(), _node("act", "relu", [x4], [x4])], "o", "onnx")
    res = compare_graphs(tg, og)
    assert res["ops_agree"], format_comparison(res)
    assert res["excluded"]["dead_code_elimination"]["torch"] == {
        "dense": 1, "tanh": 1, "plumbing:shape": 1}
    assert {(d["group"], d["rule"]) for d in res["differences"]} >= {
        ("dense", "dead_code_elimination"), ("tanh", "dead_code_elimination")}
