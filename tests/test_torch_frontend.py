"""PyTorch frontend: graphs from nn.Modules, timm/torchvision names, and their FLOP/MAC counts."""

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from perfcast import ops
from perfcast.errors import ModelSpecError, PerfcastError, TraceError
from perfcast.frontends import build_graph
from perfcast.frontends.torch_frontend import graph_from_module
from perfcast.workload import ModelSpec, Workload, parse_input_size


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.dw(self.conv(x))))
        x = x.mean((2, 3))
        return self.fc(x)


def _meta_tiny():
    with torch.device("meta"):
        return Tiny()


def test_tiny_module_counts_and_exact_macs():
    g = graph_from_module(_meta_tiny(), (torch.empty(4, 3, 16, 16, device="meta"),), model_id="tiny")
    counts = g.op_counts()
    assert counts["conv2d"] == 1 and counts["conv_depthwise"] == 1
    assert counts["linear"] == 1 and counts["batch_norm"] == 1 and counts["relu"] == 1
    conv = 4 * 8 * 16 * 16 * 3 * 9
    dw = 4 * 8 * 16 * 16 * 1 * 9
    fc = 4 * 10 * 8
    assert g.macs == conv + dw + fc
    assert g.params == sum(p.numel() for p in Tiny().parameters())
    assert g.meta.batch_size == 4 and g.meta.input_shapes == [(4, 3, 16, 16)]
    assert not g.meta.unmapped_ops
    g.validate()
    # edges follow the data flow: conv -> dw -> bn -> relu
    names = [n.op for n in g.nodes]
    first = names.index("conv2d")
    assert any(e.src == first and g.nodes[e.dst].op == "conv_depthwise" for e in g.edges)
    assert all(e.kind == "forward" and e.bytes > 0 for e in g.edges)


def test_no_weights_materialise_for_meta_models():
    m = _meta_tiny()
    graph_from_module(m, (torch.empty(1, 3, 8, 8, device="meta"),))
    tensors = dict(m.named_parameters()) | dict(m.named_buffers())
    assert len(tensors) == 10  # conv w+b, dw w, bn w+b+running stats+count, fc w+b
    # Tracing turns the module's tensors into FakeTensors on a fake ``cpu`` device (in place);
    # their storage, like a meta tensor's, is on ``meta``: no byte of weight data exists.
    materialised = {name: (t.device.type, t.untyped_storage().device.type,
                           t.untyped_storage().nbytes())
                    for name, t in tensors.items()
                    if t.untyped_storage().device.type != "meta"
                    and t.untyped_storage().nbytes() != 0}
    assert not materialised, f"tracing allocated real weight storage: {materialised}"


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_macs_match_torch_flop_counter(mode, resnet18_infer, resnet18_train):
    """2 × our MACs must equal torch.utils.flop_counter's FLOPs (conv/mm/bmm/sdpa, fwd + bwd)."""
    import torchvision

    g = resnet18_infer if mode == "infer" else resnet18_train
    with torch.device("meta"):
        m = torchvision.models.resnet18(weights=None)
    x = torch.empty(2, 3, 224, 224, device="meta", requires_grad=False)
    m.train(mode == "train")
    with FlopCounterMode(display=False) as fc:
        y = m(x)
        if mode == "train":
            y.float().mean().backward()
    assert 2 * g.macs == pytest.approx(fc.get_total_flops(), rel=1e-6)


def test_sdpa_macs_match_flop_counter_fwd_and_bwd():
    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(32, 96)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, 4, 8).permute(2, 0, 3, 1, 4)
            return nn.functional.scaled_dot_product_attention(q, k, v).sum(1)

    with torch.device("meta"):
        m = Attn()
    x = torch.empty(2, 16, 32, device="meta")
    for mode in ("infer", "train"):
        g = graph_from_module(m, (x,), mode=mode)
        with torch.device("meta"):
            ref = Attn()
        ref.train(mode == "train")
        with FlopCounterMode(display=False) as fc:
            y = ref(x)
            if mode == "train":
                y.float().mean().backward()
        assert g.op_counts()["sdpa"] == 1
        expected = fc.get_total_flops()
        if mode == "train":
            # The traced graph holds the fused (flash) backward kernel, which recomputes QKᵀ
            # (torch's own sdpa_backward_flop_count); eager on meta runs the math path without it.
            assert g.op_counts()["sdpa_backward"] == 1
            b, h, s, e = 2, 4, 16, 8
            expected += 2 * b * h * s * s * e
        assert 2 * g.macs == pytest.approx(expected, rel=1e-6), mode


def test_train_graph_has_backward_and_optimizer(resnet18_infer, resnet18_train):
    g = resnet18_train
    phases = g.phase_counts()
    assert phases["forward"] > 0 and phases["backward"] > 0
    assert phases["optimizer"] == len(list(_resnet18_params()))
    counts = g.op_counts()
    assert counts["conv_backward"] == counts["conv2d"] == 20
    assert counts["sgd_momentum_update"] == phases["optimizer"]
    assert {e.kind for e in g.edges} == {"forward", "backward"}
    assert all(g.nodes[e.dst].phase != "forward" for e in g.edges if e.kind == "backward")
    ratio = g.flops / resnet18_infer.flops
    assert 2.5 < ratio < 3.5, ratio
    assert g.forward_macs() == pytest.approx(resnet18_infer.macs)


def _resnet18_params():
    import torchvision

    with torch.device("meta"):
        return list(torchvision.models.resnet18(weights=None).parameters())


@pytest.mark.parametrize("opt,op", [("sgd", "sgd_update"), ("adam", "adam_update"),
                                    ("adamw", "adamw_update")])
def test_optimizers(opt, op):
    g = graph_from_module(_meta_tiny(), (torch.empty(2, 3, 8, 8, device="meta"),), mode="train",
                          optimizer=opt)
    assert g.op_counts()[op] == len(list(Tiny().parameters()))
    assert g.meta.optimizer == opt


def test_amp_casts_to_half_and_fp16_params():
    x = torch.empty(2, 3, 16, 16, device="meta")
    amp = graph_from_module(_meta_tiny(), (x,), precision="amp")
    conv = next(n for n in amp.nodes if n.op == "conv2d")
    assert conv.output_dtypes == ["float16"]
    assert amp.op_counts().get("cast", 0) >= 1
    half = graph_from_module(_meta_tiny(), (x,), precision="fp16")
    assert half.param_bytes == 2 * half.params


def test_real_module_and_bad_options():
    g = graph_from_module(Tiny(), (torch.randn(1, 3, 8, 8),))
    assert g.op_counts()["conv2d"] == 1
    with pytest.raises(TraceError):
        graph_from_module(Tiny(), (torch.randn(1, 3, 8, 8),), mode="bogus")
    with pytest.raises(TraceError):
        graph_from_module(Tiny(), (torch.randn(1, 3, 8, 8),), precision="int3")


def test_untraceable_model_gives_trace_error():
    class Bad(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow
                return x
            return -x

    with pytest.raises(TraceError, match="could not trace"):
        graph_from_module(Bad(), (torch.randn(2, 2),))


def test_timm_resnet50_acceptance_numbers():
    g = build_graph(Workload.of("timm:resnet50"))
    assert g.params == pytest.approx(25.56e6, rel=0.01)
    assert g.macs == pytest.approx(4.1e9, rel=0.05)
    assert g.meta.model_id == "timm:resnet50"
    bare = build_graph(Workload.of("resnet50"))
    assert bare.macs == g.macs


def test_batch_scales_macs_linearly():
    g1 = build_graph(Workload.of("torchvision:resnet18", batch_size=1))
    g4 = build_graph(Workload.of("torchvision:resnet18", batch_size=4))
    assert g4.macs == 4 * g1.macs and g4.params == g1.params


def test_input_size_changes_shape():
    g = build_graph(Workload.of("torchvision:resnet18", input_size=(3, 112, 112)))
    assert g.meta.input_shapes == [(1, 3, 112, 112)]


def test_unknown_names_and_bad_requests():
    with pytest.raises(ModelSpecError, match="unknown timm model"):
        build_graph(Workload.of("resnet5O"))
    with pytest.raises(ModelSpecError, match="unknown torchvision model"):
        build_graph(Workload.of("torchvision:nope"))
    with pytest.raises(PerfcastError, match="batch size"):
        build_graph(Workload.of("resnet18", batch_size=-1))
    with pytest.raises(PerfcastError, match="input size"):
        build_graph(Workload.of("resnet18", input_size=(3, 0, 224)))
    with pytest.raises(ModelSpecError, match="file not found"):
        ModelSpec.parse("some/dir/model.onnx")
    with pytest.raises(ModelSpecError, match="cannot import"):
        build_graph(Workload.of("no_such_pkg.sub:make"))


def test_module_callable_spec():
    g = build_graph(Workload.of("tests.models_for_tests:tiny_cnn", input_size=(3, 32, 32)))
    assert g.op_counts()["conv2d"] == 1


def test_parse_input_size():
    assert parse_input_size("3,224,224") == (3, 224, 224)
    assert parse_input_size("3x160x160") == (3, 160, 160)
    assert parse_input_size("224") == (3, 224, 224)
    with pytest.raises(PerfcastError):
        parse_input_size("a,b")


def test_vocabulary_is_big_enough_and_unique():
    assert len(ops.OPS) >= 98
    assert len(set(ops.OPS)) == len(ops.OPS)
    assert ops.OPS[-1] == "other"
