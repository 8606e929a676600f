"""Tensor-memory tracker and FakeTensor simulation (perfcast.memory)."""

import gc

import pytest
import torch
from torch import nn

from perfcast.errors import ModelSpecError, PerfcastError
from perfcast.memory import LiveTensorTracker, measure_peak_tensor_bytes, simulate_memory
from perfcast.memory.simulate import make_optimizer, run_inference, run_training_steps

MLP_SPEC = "tests.test_memory:make_mlp"
B = 32
P_BYTES = (64 * 128 + 128 + 128 * 10 + 10) * 4  # 38440: parameters of the MLP
X_BYTES = B * 64 * 4  # 8192: the input


def make_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


# --------------------------------------------------------------------------- tracker
def test_tracker_counts_known_allocations_exactly():
    with LiveTensorTracker() as tr:
        a = torch.empty(1000)  # float32
        assert tr.current_bytes == 4000
        v = a.view(10, 100)  # a view shares the storage: not counted again
        assert tr.current_bytes == 4000
        c = torch.empty(500, dtype=torch.float64)
        assert tr.current_bytes == 8000
        del c
        assert tr.current_bytes == 4000
        del a
        assert tr.current_bytes == 4000  # the view keeps the storage alive
        del v
        assert tr.current_bytes == 0
    assert tr.peak_bytes == 8000


def test_tracker_under_fake_tensor_mode_and_phases():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(), LiveTensorTracker() as tr:
        with tr.phase("forward"):
            a = torch.empty(1000, 1000)  # 4 MB, never allocated
            b = a * 2
        with tr.phase("backward"):
            del a
            c = torch.empty(10)
        assert tr.current_bytes == 4_000_040
    assert tr.peak_bytes == 8_000_000
    # a phase's peak includes what is live when it starts (a and b, before ``del a``)
    assert tr.phase_peaks == {"forward": 8_000_000, "backward": 8_000_000}
    assert tr.peak_phase == "forward"
    del b, c


def test_tracker_register_and_out_resize():
    x = torch.zeros(100)
    m = nn.Linear(10, 10)  # 440 bytes of parameters
    tr = LiveTensorTracker()
    assert tr.register([x, m]) == 400 + 440
    assert tr.register(x) == 0  # counted once
    out = torch.empty(0)
    with tr:
        torch.add(x, 1, out=out)  # resizes its output: 0 -> 400 bytes
    assert tr.peak_bytes == 400 + 440 + 400


def test_measure_peak_tensor_bytes_real_cpu():
    def fn():
        a = torch.ones(1000)
        b = torch.ones(2000)
        del a, b
        c = torch.ones(500)
        return c

    assert measure_peak_tensor_bytes(fn, include_existing=False) == 12000
    x = torch.ones(250)
    assert measure_peak_tensor_bytes(lambda t: t + 1, x, include_existing=False) == 2000
    # with include_existing, every live CPU tensor counts (at least x)
    assert measure_peak_tensor_bytes(lambda t: t + 1, x) >= 2000


# --------------------------------------------------------------------------- simulation
def test_mlp_inference_matches_hand_computation():
    est = simulate_memory(MLP_SPEC, batch_size=B, input_size=(64,), mode="infer")
    # params + input + Linear1 output + ReLU output (the Linear1 output dies only after ReLU)
    assert est.tensor_peak_mb * 2**20 == P_BYTES + X_BYTES + 2 * B * 128 * 4
    assert est.param_mb * 2**20 == P_BYTES and est.grad_mb == 0 and est.optimizer_state_mb == 0


def test_mlp_training_matches_hand_computation_and_real_cpu():
    est = simulate_memory(MLP_SPEC, batch_size=B, input_size=(64,), mode="train",
                          optimizer="sgd-momentum", foreach=False)
    # steady state, peak in backward of Linear1: params + momentum + all grads + input
    # + grad of the ReLU input [32,128] + loss and its grad seed (4 bytes each)
    expected = 3 * P_BYTES + X_BYTES + B * 128 * 4 + 8
    assert est.tensor_peak_mb * 2**20 == expected
    assert est.peak_phase == "backward"
    assert est.grad_mb * 2**20 == P_BYTES and est.optimizer_state_mb * 2**20 == P_BYTES
    assert set(est.phase_peaks_mb) == {"forward", "backward", "optimizer"}

    # the same loop on the real model, measured as the profiler does (warm-up step first)
    torch.manual_seed(0)
    model, x = make_mlp(), torch.randn(B, 64)
    opt = make_optimizer("sgd-momentum", model.parameters(), foreach=False)
    run_training_steps(model, (x,), opt, steps=1)
    gc.collect()
    real = measure_peak_tensor_bytes(lambda: run_training_steps(model, (x,), opt, steps=1))
    assert real >= expected  # also counts any CPU tensor other tests left alive
    # counting only what is passed (model: params + grads + buffers, optimizer state, input)
    real = measure_peak_tensor_bytes(
        lambda m, o, inp: run_training_steps(m, (inp,), o, steps=1), model, opt, x,
        include_existing=False)
    assert real == expected


@pytest.mark.slow  # a real CPU run of a timm model; the MLP's stays fast
def test_timm_model_simulation_equals_real_cpu_run():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model("resnet18", pretrained=False)
    x = torch.randn(2, 3, 64, 64)
    model.eval()
    real_inf = measure_peak_tensor_bytes(lambda m, inp: run_inference(m, (inp,)), model, x,
                                         include_existing=False)
    model.train()
    opt = make_optimizer("adam", model.parameters(), foreach=False)
    run_training_steps(model, (x,), opt, steps=1)
    real_train = measure_peak_tensor_bytes(
        lambda m, o, inp: run_training_steps(m, (inp,), o, steps=1), model, opt, x,
        include_existing=False)
    del model, opt
    inf = simulate_memory("timm:resnet18", batch_size=2, input_size=64, mode="infer")
    train = simulate_memory("timm:resnet18", batch_size=2, input_size=64, mode="train",
                            optimizer="adam", foreach=False)
    assert round(inf.tensor_peak_mb * 2**20) == real_inf
    assert round(train.tensor_peak_mb * 2**20) == real_train


def test_infer_below_train_and_optimizer_states():
    kw = dict(batch_size=B, input_size=(64,))
    infer = simulate_memory(MLP_SPEC, mode="infer", **kw)
    sgd = simulate_memory(MLP_SPEC, mode="train", optimizer="sgd", **kw)
    sgdm = simulate_memory(MLP_SPEC, mode="train", optimizer="sgd-momentum", **kw)
    adam = simulate_memory(MLP_SPEC, mode="train", optimizer="adam", **kw)
    assert infer.tensor_peak_mb < sgd.tensor_peak_mb < sgdm.tensor_peak_mb < adam.tensor_peak_mb
    assert sgd.optimizer_state_mb == 0
    assert sgdm.optimizer_state_mb * 2**20 == P_BYTES  # one momentum buffer per parameter
    # exp_avg + exp_avg_sq per parameter, plus a float32 scalar step per parameter tensor
    assert adam.optimizer_state_mb * 2**20 == 2 * P_BYTES + 4 * 4
    assert adam.first_step_peak_mb <= adam.tensor_peak_mb


def test_amp_changes_activation_bytes():
    kw = dict(batch_size=B, input_size=(64,), mode="train")
    fp32 = simulate_memory(MLP_SPEC, precision="fp32", **kw)
    amp = simulate_memory(MLP_SPEC, precision="amp", **kw)
    assert amp.param_mb == fp32.param_mb and amp.grad_mb == fp32.grad_mb  # fp32 master weights
    assert amp.activation_peak_mb != fp32.activation_peak_mb
    half = simulate_memory(MLP_SPEC, precision="fp16", **kw)
    assert half.param_mb == fp32.param_mb / 2


def test_cuda_autocast_rules_on_cpu():
    from perfcast.memory.autocast_rules import cuda_autocast_rules

    x = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.float16):
        h = nn.functional.linear(x, torch.randn(8, 8))
        cpu_dtypes = (nn.functional.layer_norm(h, (8,)).dtype, torch.softmax(h, -1).dtype)
    with cuda_autocast_rules(), torch.autocast("cpu", dtype=torch.float16):
        h = nn.functional.linear(x, torch.randn(8, 8))
        cuda_dtypes = (h.dtype, nn.functional.layer_norm(h, (8,)).dtype,
                       torch.softmax(h, -1).dtype, torch.exp(h).dtype)
    assert cpu_dtypes == (torch.float16, torch.float16)
    assert cuda_dtypes == (torch.float16, torch.float32, torch.float32, torch.float32)
    with torch.autocast("cpu", dtype=torch.float16):  # the override is gone afterwards
        assert nn.functional.layer_norm(h, (8,)).dtype == torch.float16


def test_to_dict_keys():
    d = simulate_memory(MLP_SPEC, batch_size=4, input_size=(64,)).to_dict()
    for key in ("tensor_peak_mb", "param_mb", "grad_mb", "optimizer_state_mb",
                "activation_peak_mb", "phase_peaks_mb", "model", "mode", "precision",
                "optimizer", "batch_size", "input_shape", "seconds", "notes"):
        assert key in d
    assert d["input_shape"] == [4, 64] and d["mode"] == "train"


def test_bad_spec_and_arguments():
    with pytest.raises(ModelSpecError):
        simulate_memory("timm:definitely_not_a_model_xyz")
    with pytest.raises(ModelSpecError):
        simulate_memory("no_such_module_xyz:make")
    with pytest.raises(PerfcastError):
        simulate_memory(MLP_SPEC, optimizer="lion")
    with pytest.raises(PerfcastError):
        simulate_memory(MLP_SPEC, batch_size=0)


# --------------------------------------------------------------------------- speed (slow)
@pytest.mark.slow
def test_speed_resnet50_and_llama7b():
    r50 = simulate_memory("timm:resnet50", batch_size=32, mode="train")
    assert r50.seconds < 10
    llama = simulate_memory("hf:meta-llama/Llama-2-7b-hf", batch_size=1, seq_len=2048,
                            mode="train", optimizer="adam")
    assert llama.seconds < 60
    # params + grads + Adam state (fp32) + the foreach step's temporary: > 5 x 6.74e9 x 4 B
    assert llama.tensor_peak_mb * 2**20 > 5 * 6.7e9 * 4
