"""Properties of the one power model (perfcast.energy) in the fast tier: power within
[idle, min(limit, TDP)] for training / inference steps and LLM prefill / decode on several
registry GPUs and limits, and energy per output token non-increasing with concurrency up to
saturation and above idle power x time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast import energy as E
from perfcast.devices import get_device
from perfcast.shipped import load_shipped

GPUS = ["a40", "v100-32gb-pcie", "a100-40gb", "a100-80gb-pcie", "h100-sxm", "b200", "l4",
        "mi300x"]
KINDS = {"train": "fp32", "infer": "amp", "prefill": "bf16", "decode": "fp16"}

FAST = settings(max_examples=60, derandomize=True, deadline=None)


@FAST
@given(key=st.sampled_from(GPUS), kind=st.sampled_from(sorted(KINDS)),
       cu=st.floats(0, 3), mu=st.floats(0, 3), at=st.floats(0, 1))
def test_power_within_idle_and_min_of_limit_and_tdp(key, kind, cu, mu, at):
    dev = get_device(key)
    m = load_shipped("power-model")
    idle, tdp, _ = E.power_bounds(dev)
    r = E.limit_range(dev)
    lim = r.low + at * (r.high - r.low)
    if kind in ("prefill", "decode"):
        p = m.power(dev, mu, cu, limit_w=lim)
        p0 = m.power(dev, mu, cu)
    else:
        flops = cu * E.peak_flops(dev, KINDS[kind])
        moved = mu * dev.bandwidth_gbs * 1e9
        feats = E.step_features(flops, moved, 100, 1.0, dev, KINDS[kind], 8)
        p, slow, p0 = m.step(feats, dev, lim)
        assert slow >= 1.0
    assert idle - 1e-9 <= p <= min(lim, tdp) + 1e-9
    assert idle - 1e-9 <= p0 <= tdp + 1e-9 and p <= p0 + 1e-9


def test_unseen_family_takes_the_pooled_fit_and_says_so():
    m = load_shipped("power-model")
    coefs, fam, seen = m.coefficients(get_device("b200"))
    assert not seen and coefs == m.pooled and "Blackwell" in fam
    assert "pooled" in m.note(get_device("b200"))
    assert m.coefficients(get_device("a100-40gb"))[2]  # measured on ML.ENERGY


def _energy_per_token(dev, m, batch: int) -> tuple[float, float]:
    """(J per output token, idle W x seconds per token) of a decode step of ``batch``
    sequences of a 7B model at fp16: the weights stream once per step (memory-bound) until the
    compute saturates, from when the step grows with the batch (the roofline of the step)."""
    params, ctx_bytes = 7e9, 512 * 524288.0  # 0.5 MiB of KV per token, 512 tokens
    bw, peak = dev.bandwidth_gbs * 1e9, E.peak_flops(dev, "fp16")
    flops = 2 * params * batch
    moved = 2 * params + batch * ctx_bytes
    step = max(moved / (0.8 * bw), flops / (0.6 * peak))
    mu, cu = moved / (step * bw), flops / (step * peak)
    p = m.power(dev, mu, cu)
    idle = E.power_bounds(dev)[0]
    return p * step / batch, idle * step / batch


@pytest.mark.parametrize("key", ["a100-40gb", "h100-sxm", "b200", "a40"])
def test_energy_per_token_falls_with_concurrency_and_has_a_floor(key):
    dev = get_device(key)
    m = load_shipped("power-model")
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    rows = [_energy_per_token(dev, m, b) for b in batches]
    ept = [e for e, _ in rows]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(ept, ept[1:]))
    assert all(e >= floor for e, floor in rows)
