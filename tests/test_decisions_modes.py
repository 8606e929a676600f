"""Every decision over every mode: fit, rank, cost, mig, power-limit and plan answer a request
of any mode and layout through the engines (perfcast.request.engines.estimate of
request.replace(...)), with the numbers the prediction of each variant gives."""

from __future__ import annotations

import json
import math

import pytest

import perfcast
from perfcast.decisions.answer import answer
from perfcast.errors import PerfcastError

LLAMA = "hf:meta-llama/Llama-2-7b-hf"
GEN = dict(mode="generate", input_len=512, output_len=128)
TINY = "timm:resnet10t"
SMALL = {"input_size": "3,64,64"}


def _json_safe(d: dict) -> dict:
    return json.loads(json.dumps(d, allow_nan=False))


def test_rank_generate_a_row_per_device_with_the_predicted_time():
    """The issue's acceptance: rank --mode generate over three GPUs; each row's time is the
    generation forecast on that device, its USD the hours × the GPU-hour price × the GPUs."""
    r = perfcast.rank(LLAMA, devices="a100-80gb,h100-sxm,l4", batch_size=8, **GEN)
    assert sorted(d.device for d in r.devices) == ["a100-80gb", "h100-sxm", "l4"]
    times = [d.time_ms for d in r.devices]
    assert times == sorted(times) and [d.rank for d in r.devices] == [1, 2, 3]
    for d in r.devices:
        p = perfcast.predict(LLAMA, device=d.device, batch_size=8, **GEN)
        assert d.time_ms == p.time_ms and d.ttft_ms == p.ttft_ms and d.fits == p.fits
        assert d.throughput_unit == "tokens/s" and d.throughput_per_s == p.throughput_per_s
        assert d.energy_kwh == pytest.approx(p.energy_j * r.iterations / 3.6e6)
        if d.usd_per_gpu_hour is not None:
            assert d.usd == pytest.approx(p.time_ms * r.iterations / 3.6e6
                                          * d.usd_per_gpu_hour * d.gpus)
    d = _json_safe(r.to_dict())
    assert d["mode"] == "generate" and d["devices"][0]["gpus"] == 1
    # a device that cannot serve is left out with a note; none serving is the error itself
    cpu = perfcast.rank(LLAMA, devices="l4,cpu", batch_size=8, **GEN)
    assert [x.device for x in cpu.devices] == ["l4"]
    assert any(n.startswith("cpu: left out") for n in cpu.notes)
    with pytest.raises(PerfcastError, match="GPU serving"):
        perfcast.rank(LLAMA, devices="cpu", **GEN)


def test_one_device_rank_json_keeps_its_keys():
    """A one-device ranking has no GPUs / generation columns in its JSON (as before)."""
    r = perfcast.rank(TINY, devices="a100-40gb", batch_size=4, **SMALL).to_dict()
    assert not {"gpus", "throughput_per_s", "throughput_unit", "ttft_ms"} & set(r["devices"][0])


def test_cost_of_a_layout_prices_its_gpus():
    """cost --data-parallel 8: the iteration time of the layout, priced × its 8 GPUs; energy
    is the layout's energy per iteration (every GPU)."""
    kw = dict(device="a100-80gb", mode="train", data_parallel=8, batch_size=256, **SMALL)
    c = perfcast.estimate_cost(TINY, iterations=1000, price_per_hour=2.0, **kw)
    p = perfcast.predict(TINY, **kw)
    assert c.gpus == 8 and c.time_ms_per_iteration == p.time_ms
    assert c.hours == pytest.approx(p.time_ms * 1000 / 3.6e6)
    assert c.usd == pytest.approx(c.hours * 2.0 * 8)
    assert c.energy_kwh == pytest.approx(p.energy_j * 1000 / 3.6e6)
    _json_safe(c.to_dict())
    with pytest.raises(PerfcastError, match="--gpus 4 differs"):
        perfcast.estimate_cost(TINY, iterations=10, gpus=4, **kw)


def test_cost_generate_requests_or_batches():
    kw = dict(device="h100-sxm", batch_size=4, price_per_hour=3.0, **GEN)
    by_requests = perfcast.estimate_cost(LLAMA, requests=10, **kw)
    by_batches = perfcast.estimate_cost(LLAMA, iterations=3, **kw)
    assert by_requests.iterations == math.ceil(10 / 4) == by_batches.iterations
    assert by_requests.usd == pytest.approx(by_batches.usd)
    assert by_requests.notes[0].startswith("iterations: 10 requests in 3 batches of 4")
    from perfcast.decisions.cost import estimate_generation_cost

    same = estimate_generation_cost(LLAMA, device="h100-sxm", requests=10, batch_size=4,
                                    input_len=512, output_len=128, price_per_hour=3.0)
    assert same.to_dict() == by_requests.to_dict()
    for extra, needle in (({"requests": 5, "iterations": 2}, "not both"),
                          ({}, "needs --requests")):
        with pytest.raises(PerfcastError, match=needle):
            perfcast.estimate_cost(LLAMA, **kw, **extra)


def test_fit_generate_most_requests_and_longest_prompt():
    from perfcast.devices import get_device
    from perfcast.generation import max_generation_batch, max_generation_context
    from perfcast.workload import Workload

    dev = get_device("a100-80gb")
    f = perfcast.max_batch_size(LLAMA, device="a100-80gb", mode="generate", input_len=1024,
                                output_len=256)
    b, p = max_generation_batch(Workload.of(LLAMA, mode="generate", input_len=1024,
                                            output_len=256), dev)
    assert f.max_batch_size == b and f.time_ms == p.time_ms and f.margin == 0
    assert f.memory_mb == p.memory_needed_mb <= f.capacity_mb < f.next_memory_mb
    assert f.to_dict()["prediction"]["kind"] == "generation"
    tighter = perfcast.max_batch_size(LLAMA, device="a100-80gb", mode="generate",
                                      input_len=1024, output_len=256, margin=0.1)
    assert tighter.max_batch_size < f.max_batch_size  # a margin given is applied
    prompt = perfcast.max_batch_size(LLAMA, device="a100-40gb", mode="generate", batch_size=4,
                                     output_len=128)
    i, limited, _ = max_generation_context(Workload.of(LLAMA, mode="generate", batch_size=4,
                                                       output_len=128), get_device("a100-40gb"))
    d = _json_safe(prompt.to_dict())
    assert (d["max_input_len"], d["limited_by"]) == (i, limited)
    assert d["max_context_tokens"] == i + 128 and d["max_batch_size"] is None
    with pytest.raises(PerfcastError, match="not both"):
        perfcast.max_batch_size(LLAMA, device="a100-80gb", mode="generate", input_len=64,
                                output_len=8, batch_size=2)


def test_fit_of_a_layout_searches_global_batches():
    """fit --data-parallel 2 searches global batches of 2 × the micro-batch (the search limit
    here: two predictions)."""
    f = perfcast.max_batch_size(TINY, device="t4", mode="train", data_parallel=2, limit=8,
                                **SMALL)
    assert (f.max_batch_size, f.gpus, f.evaluations) == (8, 2, 2)
    assert f.layout["data_parallel"] == 2 and f.layout["micro_batch_size"] == 4
    assert any("batch 8 (the search limit) still fits" in n for n in f.notes)
    assert _json_safe(f.to_dict())["layout"]["gpus"] == 2


@pytest.mark.slow  # one search (~15 predictions of the layout)
def test_fit_of_a_layout_is_its_largest_global_batch():
    """fit --data-parallel 2: the largest global batch (each replica its share at once) whose
    memory per GPU × (1 + margin) fits, consistent with predict on that layout."""
    kw = dict(device="t4", mode="train", data_parallel=2, **SMALL)
    f = perfcast.max_batch_size(TINY, risk="central", **kw)
    b = f.max_batch_size
    assert b and b % 2 == 0 and f.gpus == 2 and f.layout["micro_batch_size"] == b // 2
    at = perfcast.predict(TINY, batch_size=b, micro_batch_size=b // 2, **kw)
    above = perfcast.predict(TINY, batch_size=b + 2, micro_batch_size=b // 2 + 1, **kw)
    assert at.memory_mb == f.memory_mb
    assert at.memory_mb * 1.1 <= f.capacity_mb < above.memory_mb * 1.1
    assert f.throughput_samples_per_s == pytest.approx(b / f.time_ms * 1e3)
    with pytest.raises(PerfcastError, match="does not apply to a layout"):
        perfcast.max_batch_size(TINY, mig_profile="1g.5gb", **{**kw, "device": "a100-40gb"})


def test_mig_generate_plans_the_serving_memory():
    a = perfcast.recommend_mig(LLAMA, device="a100-80gb", batch_size=8, **GEN)
    p = perfcast.predict(LLAMA, device="a100-80gb", batch_size=8, **GEN)
    assert a.memory_mb_central == p.memory_needed_mb and a.margin == 0
    assert a.memory_mb == pytest.approx(p.memory_needed_mb / 0.9)  # vLLM's share of the slice
    assert a.profile is not None and a.usable_mb >= a.required_mb
    assert a.time_ms == p.time_ms
    _json_safe(a.to_dict())


def test_every_command_through_the_one_entry():
    """answer(command, values) reaches each decision's *_request function; the modes a
    command does not take are the request's one-line refusals."""
    c = answer("cost", {"device": "a100-40gb", "time_ms": 350, "iterations": 200_000,
                        "price_per_hour": 2.934})
    assert c.usd == pytest.approx(57.05, abs=0.01)
    assert answer("mig", {"device": "a100-40gb", "memory_mb": 6294}).profile == "2g.10gb"
    p = answer("plan", {"model": LLAMA, "device": "h100-sxm", "rate": 2, "gpus": 4,
                        "price_per_hour": 3.0, **GEN})
    assert p.mode == "generate" and p.winner is not None and p.winner.gpus <= 4
    for cmd, values, needle in (
            ("power-limit", {"model": TINY, "device": "a40", "mode": "generate"},
             "takes --mode infer or train"),
            ("plan", {"model": TINY, "device": "a100-80gb", "mode": "infer", "gpus": 2},
             "takes --mode train or generate"),
            ("plan", {"model": LLAMA, "device": "h100-sxm", "rate": 2, "batch_size": 4, **GEN},
             "--batch-size apply to plan --mode train")):
        with pytest.raises(PerfcastError, match=needle) as info:
            answer(cmd, values)
        assert "\n" not in str(info.value)
