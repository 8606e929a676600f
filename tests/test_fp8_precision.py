"""Precision as users mean it (bf16 = autocast with fp32 master, bf16-pure, FP8 training) and
FP8 serving (FP8 weights, ``--kv-cache-dtype fp8``): the device check, the bytes per parameter,
and the properties — FP8 is never slower than bf16 for the same layout / request, by less than
the ratio of the peaks.

Fast: a tiny GPT config (the parallel per-layer arithmetic) and the shipped Llama-3 configs
(generation arithmetic, no weights).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfcast
from perfcast.errors import PerfcastError
from tests.helpers import hf_spec

SETTINGS = {"deadline": None, "derandomize": True, "database": None, "max_examples": 12,
            "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}
TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
        "intermediate_size": 1024, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 4, "max_position_embeddings": 2048, "vocab_size": 1024}
FP8_GPUS = ("h100-sxm", "l40s", "rtx4090", "mi300x", "b200")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return hf_spec(tmp_path_factory.mktemp("llama"), "tiny_llama", TINY)


@pytest.fixture(scope="module")
def traced(tiny):
    from perfcast.parallel.blocks import trace

    return trace(tiny, 512)


# ---------------------------------------------------------------------------- devices
def test_fp8_peaks_given_or_derived_and_refused_without_fp8_units():
    from perfcast.devices import get_device
    from perfcast.devices.fp8 import fp8_peak_tflops, require_fp8

    h100 = get_device("h100-sxm")
    assert fp8_peak_tflops(h100) == (pytest.approx(2 * h100.peak_fp16_tflops, rel=1e-3), [])
    peak, notes = fp8_peak_tflops(get_device("rtx5090"))  # Blackwell, left out of the row
    assert peak == pytest.approx(2 * get_device("rtx5090").peak_fp16_tflops)
    assert notes and "derived" in notes[0]
    for key in ("a100-80gb", "v100-32gb", "mi250", "t4"):
        assert fp8_peak_tflops(get_device(key))[0] is None
        with pytest.raises(PerfcastError) as e:
            require_fp8(get_device(key))
        msg = str(e.value)
        assert "\n" not in msg and "h100-sxm" in msg and "mi300x" in msg and key in msg


def test_an_fp8_architecture_without_a_tensor_peak_says_what_to_add():
    """A Hopper sheet (compute capability 9.0) with no FP16 / FP8 tensor peak: FP8 units, but
    nothing to derive their peak from — the error says which field to add, not "no FP8"."""
    from perfcast.devices import Device
    from perfcast.devices.fp8 import require_fp8

    row = {"key": "hopper-sheet", "name": "Hopper sheet", "kind": "gpu", "vendor": "NVIDIA",
           "memory_gb": 80, "bandwidth_gbs": 3350, "peak_fp32_tflops": 67, "sm_count": 132,
           "compute_capability": "9.0"}
    with pytest.raises(PerfcastError) as e:
        require_fp8(Device.from_dict(row))
    msg = str(e.value)
    assert "\n" not in msg and "has FP8 tensor cores" in msg and "peak_fp16_tflops" in msg
    peak, notes = require_fp8(Device.from_dict({**row, "peak_fp16_tflops": 989.0}))
    assert peak == pytest.approx(1978.0) and "derived" in notes[0]


def test_fp8_on_a_gpu_without_it_is_a_one_line_error(tiny):
    for mode, extra in (("train", {"data_parallel": 2, "batch_size": 4, "seq_len": 512}),):
        with pytest.raises(PerfcastError, match="no FP8 tensor cores"):
            perfcast.predict(tiny, device="a100-80gb", mode=mode, precision="fp8", **extra)
    with pytest.raises(PerfcastError, match="no FP8 tensor cores"):
        perfcast.predict("hf:meta-llama/Meta-Llama-3-8B", device="a100-80gb", mode="generate",
                         precision="fp8", input_len=128, output_len=16)
    with pytest.raises(PerfcastError, match="--mode infer"):
        perfcast.predict(tiny, device="h100-sxm", mode="infer", precision="fp8")
    with pytest.raises(PerfcastError, match="vLLM's and TensorRT-LLM's"):
        perfcast.predict("hf:meta-llama/Meta-Llama-3-8B", device="h100-sxm", mode="generate",
                         engine="llama.cpp", kv_cache_dtype="fp8", input_len=128,
                         output_len=16)


# ---------------------------------------------------------------------------- training
def _estimate(traced, precision, device="h100-sxm", optimizer="adamw", **lay):
    from perfcast.devices import get_device
    from perfcast.devices.derive import complete
    from perfcast.parallel import Cluster
    from perfcast.parallel.collectives import shipped
    from perfcast.parallel.model import estimate, shipped_efficiency
    from perfcast.workload import Layout

    dev = complete(get_device(device))[0]
    layout = Layout(**{"micro_batch": 2, **lay})
    return estimate(traced, layout, batch=4 * layout.data * layout.micro_batch,
                    micro_batch=layout.micro_batch, precision=precision, optimizer=optimizer,
                    device=dev, cluster=Cluster.of_device(dev), eff=shipped_efficiency(),
                    coll=shipped(), runtime_mb=0.0)


def test_bytes_per_parameter_of_each_training_precision(traced):
    """bf16 (autocast / FSDP mixed precision): 2 + 2 + (8 + 4 master) = 16 bytes a parameter with
    AdamW; bf16-pure: 2 + 2 + 4 = 8; fp8: bf16's + the FP8 copies of the GEMM weights."""
    mib = 2.0 ** 20
    per = {}
    for p in ("bf16", "bf16-pure", "fp8", "amp"):
        m = _estimate(traced, p).memory_breakdown_mb
        per[p] = (m["weights"] + m["gradients"] + m["optimizer_state"]) * mib / traced.params
        if p == "fp8":
            assert m["fp8_weight_copies"] > 0
    assert per["bf16"] == pytest.approx(16.0, rel=0.02)
    assert per["amp"] == pytest.approx(16.0, rel=0.02)
    assert per["bf16-pure"] == pytest.approx(8.0, rel=0.02)
    assert per["fp8"] == pytest.approx(per["bf16"])


@settings(**SETTINGS)
@given(device=st.sampled_from(FP8_GPUS), data=st.sampled_from([1, 2, 4, 8]),
       tensor=st.sampled_from([1, 2]), zero=st.sampled_from([0, 1, 2, 3]),
       micro=st.sampled_from([1, 2, 8]), recompute=st.sampled_from(["none", "full"]))
def test_fp8_never_slower_than_bf16_and_less_than_the_peaks(traced, device, data, tensor,
                                                            zero, micro, recompute):
    from perfcast.devices import get_device
    from perfcast.devices.fp8 import fp8_peak_tflops

    lay = dict(data=data, tensor=tensor, zero=zero, micro_batch=micro, recompute=recompute)
    bf16 = _estimate(traced, "bf16", device, **lay).time_ms
    fp8 = _estimate(traced, "fp8", device, **lay).time_ms
    dev = get_device(device)
    assert fp8 <= bf16 * (1 + 1e-9)
    assert bf16 / fp8 < fp8_peak_tflops(dev)[0] / dev.peak_tflops("bf16")


def test_llama3_8b_fp8_training_is_faster_by_less_than_the_peaks():
    kw = dict(device="h100-sxm", mode="train", data_parallel=8, zero=3, batch_size=16,
              seq_len=8192)
    bf16 = perfcast.predict("hf:meta-llama/Meta-Llama-3-8B", precision="bf16", **kw)
    fp8 = perfcast.predict("hf:meta-llama/Meta-Llama-3-8B", precision="fp8", **kw)
    assert fp8.time_ms < bf16.time_ms < 2.0 * fp8.time_ms  # H100: FP8 peak = 2× bf16
    assert any(n.startswith("precision: fp8 = FP8 training") for n in fp8.notes)
    assert any(n.startswith("precision: bf16 = bf16 autocast") for n in bf16.notes)
    assert fp8.memory_breakdown_mb["fp8_weight_copies"] > 0


# ---------------------------------------------------------------------------- serving
def _serve(precision, kv=None, **kw):
    args = dict(device="h100-sxm", mode="generate", tensor_parallel=4, input_len=1024,
                output_len=256, batch_size=16)
    args.update(kw)
    return perfcast.predict("hf:meta-llama/Meta-Llama-3-70B", precision=precision,
                            kv_cache_dtype=kv, **args)


def test_llama3_70b_fp8_serving_and_the_fp8_kv_cache():
    fp16, fp8, fp8kv = _serve("fp16"), _serve("fp8"), _serve("fp8", "fp8")
    assert fp8.tpot_ms < fp16.tpot_ms and fp8.ttft_ms < fp16.ttft_ms
    assert fp8.memory_needed_mb < fp16.memory_needed_mb
    assert fp8.memory_breakdown_mb["weights"] == pytest.approx(
        fp16.memory_breakdown_mb["weights"] / 2, rel=1e-3)
    assert fp8kv.memory_breakdown_mb["kv_cache"] == pytest.approx(
        fp8.memory_breakdown_mb["kv_cache"] / 2, rel=1e-3)
    assert fp8kv.tpot_ms <= fp8.tpot_ms
    assert fp8.precision == "fp8" and any("no measurement has fp8" in n for n in fp8.notes)


@settings(**{**SETTINGS, "max_examples": 8})
@given(batch=st.sampled_from([1, 4, 32, 128]), inp=st.sampled_from([128, 2048]),
       out=st.sampled_from([2, 128]), tp=st.sampled_from([1, 2, 4]),
       engine=st.sampled_from(["vllm", "trt-llm"]))
def test_fp8_serving_never_slower_than_16_bits(batch, inp, out, tp, engine):
    kw = dict(batch_size=batch, input_len=inp, output_len=out, tensor_parallel=tp,
              engine=engine)
    a, b = _serve("fp16", **kw), _serve("fp8", **kw)
    assert b.time_ms <= a.time_ms * (1 + 1e-9)
    assert b.memory_needed_mb < a.memory_needed_mb


# ---------------------------------------------------------------------------- one GPU
@pytest.mark.slow
def test_one_gpu_bf16_is_autocast_bf16_pure_is_the_model_cast(tiny):
    """The simulated step: bf16 keeps fp32 weights, gradients and AdamW state (16 bytes a
    parameter, as amp), bf16-pure 16-bit ones (8 bytes); fp8 adds 2 bytes per linear weight."""
    from perfcast.memory.simulate import simulate_memory

    mib = 2.0 ** 20
    est = {p: simulate_memory(tiny, batch_size=2, seq_len=128, mode="train", precision=p,
                              optimizer="adamw") for p in ("amp", "bf16", "bf16-pure", "fp8")}
    per = {p: (e.param_mb + e.grad_mb + e.optimizer_state_mb) * mib / e.total_params
           for p, e in est.items()}
    assert per["bf16"] == pytest.approx(16.0, rel=0.01) == per["amp"]
    assert per["bf16-pure"] == pytest.approx(8.0, rel=0.01)
    assert est["bf16-pure"].tensor_peak_mb < est["bf16"].tensor_peak_mb < est["fp8"].tensor_peak_mb
    assert any(n.startswith("fp8: + ") for n in est["fp8"].notes)


@pytest.mark.slow
def test_one_gpu_extra_precisions_are_routed_as_bf16_with_the_physics(tiny):
    kw = dict(device="h100-sxm", mode="train", batch_size=8, seq_len=512, optimizer="adamw")
    bf16 = perfcast.predict(tiny, precision="bf16", **kw)
    pure = perfcast.predict(tiny, precision="bf16-pure", **kw)
    fp8 = perfcast.predict(tiny, precision="fp8", **kw)
    assert (pure.precision, fp8.precision) == ("bf16-pure", "fp8")
    assert pure.memory_mb < bf16.memory_mb < fp8.memory_mb
    assert pure.time_ms <= bf16.time_ms and fp8.time_ms <= bf16.time_ms
    assert any("the support rule" in n for n in fp8.notes)
    with pytest.raises(PerfcastError, match="no FP8 tensor cores"):
        perfcast.predict(tiny, precision="fp8", **{**kw, "device": "a100-80gb"})
