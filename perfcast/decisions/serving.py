"""Which deployment serves an LLM at a request rate within its latency SLOs, cheapest first:
``perfcast plan hf:ID --mode generate --device D --rate R --input-len I --output-len O
[--slo-ttft MS] [--slo-tpot MS] [--engine vllm]`` — Vidur's configuration search, without a
profile of the target GPU (every time comes from the spec sheet through perfcast's models).

**Candidates**: every tensor-parallel degree ``T`` the model and the node allow (``T`` divides
the heads, the KV heads divide or are a multiple of it, ``T`` ≤ the device's GPUs per node;
llama.cpp: a layer split over ``T`` devices) × every ``max batch`` (running requests a replica
admits, vLLM's ``max_num_seqs``, llama.cpp's server slots ``-np``: powers of two up to what
the KV cache holds at ``I + O`` tokens) × the fewest **replicas** ``R`` that carry the rate within
the SLOs. The cheapest is the one with the fewest GPU-hours (``R·T`` GPUs of one device: the
same order at any price), ties to lower energy, then lower latency.

**The queueing model of one replica** (continuous batching with chunked prefill, vLLM's
scheduler), fed ``λ = rate / R`` requests/s:

* the prefill of a request costs ``t_pre`` GPU-seconds (:mod:`perfcast.llm.prefill`, prompts
  sharing the engine's prefill chunk); it takes a share ``ρ = λ·t_pre`` of the replica's time,
  spread over the decode steps;
* a decode step of ``N`` running requests takes ``d(N)`` (the learned decode model at batch
  ``N``, interpolated in log–log between predicted batches), so a token comes every
  ``TPOT = d(N) / (1 − ρ)``;
* by Little's law the running batch solves ``N = λ·(O − 1)·TPOT(N)`` — a fixed point found by
  bisection; none below ``max batch`` (or ``ρ ≥ 1``) means the replica saturates: the queue
  grows without bound;
* a request waits for a free slot as in an M/D/c queue of ``c = max batch`` servers of
  service ``t_pre + (O − 1)·TPOT`` (Sakasegawa's approximation), then for the prefill queue
  (M/D/1 of utilisation ``ρ``), half a step for the running step to end, and its own prefill,
  whose chunks each share a step with the decodes: ``TTFT = W_slot + W_prefill + TPOT/2 +
  t_prefill(I) + passes · d(N)``.

**Energy**: a replica is busy with probability ``1 − e^(−L)`` (``L`` requests in it, Poisson);
busy, it spends ``ρ`` of the time in prefill and the rest in decode steps of ``N``, each at its
phase power (:class:`perfcast.llm.energy.PhasePower`); idle, at idle power. Energy per output
token = replica power × ``R·T`` GPUs ÷ (rate × ``O``). **Price**: the device's on-demand price
per GPU-hour (:func:`perfcast.decisions.prices.choose_price`: ``provider``'s latest, or the
lowest provider's; or ``price_per_hour``) × ``R·T`` ÷ the tokens an hour serves: USD per
million output tokens and per million tokens (prompt + output).

The model is checked against the latency–throughput curves of ML.ENERGY's vLLM runs (a
saturated server at each ``max batch``: token throughput and TPOT) in ``reports/llm/``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from perfcast.errors import PerfcastError

#: Largest ``max batch`` the planner tries (vLLM's ``max_num_seqs`` default is 256).
MAX_BATCH_LIMIT = 1024
#: Most replicas one plan may use before a candidate counts as not carrying the rate.
MAX_REPLICAS = 4096


@dataclass
class ServingRow:
    """One deployment: ``replicas`` × ``tensor_parallel`` GPUs (``gpus``), each replica
    admitting ``max_batch`` running requests; at the plan's rate its mean ``running_batch``,
    ``ttft_ms``, ``tpot_ms``, end-to-end ``latency_ms``, the replica's ``saturation_rate``
    (requests/s it can take at all), the prefill share of its time, ``power_w`` per GPU, energy
    and price per million tokens, whether it ``meets_slo`` (``why`` not)."""

    rank: int
    gpus: int
    tensor_parallel: int
    replicas: int
    max_batch: int
    running_batch: float | None
    ttft_ms: float | None
    tpot_ms: float | None
    latency_ms: float | None
    saturation_rate: float
    prefill_share: float | None
    power_w: float | None
    energy_j_per_output_token: float | None
    kwh_per_1m_output_tokens: float | None
    usd_per_hour: float | None
    usd_per_1m_output_tokens: float | None
    usd_per_1m_tokens: float | None
    meets_slo: bool
    why: str = ""


@dataclass
class ServingPlan:
    """The ranked deployments (``rows``: those meeting the SLOs cheapest first, then the
    others, nearest first) and the ``winner`` (``None``: no deployment within ``max_gpus``
    meets them)."""

    model: str
    device: str
    mode: str
    engine: str
    precision: str
    rate: float
    input_len: int
    output_len: int
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    usd_per_gpu_hour: float | None
    price_source: str | None
    rows: list[ServingRow]
    winner: ServingRow | None
    evaluated: int
    feasible: int
    elapsed_s: float = 0.0
    #: the price's ``provider`` and date (``YYYY-MM-DD`` or ``undated catalog snapshot
    #: (commit …)``); ``price_source`` is the row's URL, or ``given``
    provider: str | None = None
    price_as_of: str | None = None
    #: llama.cpp's logical and physical batch (``None`` for the other engines)
    n_batch: int | None = None
    n_ubatch: int | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        from perfcast.decisions.plan import ranked_dict

        return ranked_dict(self, top)


# --------------------------------------------------------------------------- one replica
class Replica:
    """The timing and power of one replica (``T`` devices serving ``req``'s lengths): the
    decode step ``d(N)`` interpolated from predictions at a grid of batches, the prefill cost
    per request ``t_pre`` (GPU-seconds, prompts sharing the chunk) and alone
    ``t_prefill_alone`` (one prompt's latency), and the phase powers."""

    def __init__(self, req, device, arch, batches: list[int]):
        from perfcast.generation import decode_step_seconds, prompt_pass_tokens
        from perfcast.llm.energy import decode_step_work, power_bounds
        from perfcast.llm.prefill import ENGINE_PREFILL, estimate_prefill
        from perfcast.shipped import load_shipped

        self.req, self.device, self.arch = req, device, arch
        i, n = req.input_len, req.tensor_parallel
        self.llama = req.engine == "llama.cpp"
        self.batches = np.array(sorted(set(batches)), float)
        self.steps = np.array(decode_step_seconds(req, device, [int(b) for b in self.batches]))
        own = prompt_pass_tokens(req)  # llama.cpp: min(n_batch, n_ubatch)
        chunk = own or ENGINE_PREFILL[req.engine].chunk or i
        k = max(1, chunk // i)
        kw = dict(engine=req.engine, precision=req.precision, input_len=i, n_devices=n,
                  chunk=own, constants=load_shipped("llm-prefill"))
        shared = estimate_prefill(arch, device, batch=k, **kw)
        alone = estimate_prefill(arch, device, batch=1, **kw)
        self.t_pre = shared.seconds / k
        self.t_alone = alone.seconds
        self.prefill_passes = alone.passes
        self.pp = load_shipped("llm-phase-power")
        idle, tdp, _ = power_bounds(device)
        self.idle = idle
        self.has_power = tdp is not None
        self._pre_work = (shared.flops / k, shared.bytes / k
                          + arch.kv_bytes_per_token(req.precision) * i)
        self._decode_work = lambda b: decode_step_work(
            arch, batch=b, context=i + req.output_len / 2.0, precision=req.precision,
            n_devices=1 if self.llama else n)

    def step(self, b: float) -> float:
        """``d(b)``: seconds of a decode step of ``b`` running requests (log–log between the
        predicted batches; below one, one's)."""
        x = np.log(max(b, 1.0))
        return float(np.exp(np.interp(x, np.log(self.batches), np.log(self.steps))))

    def prefill_power(self) -> float:
        from perfcast.llm.energy import utilisation

        mu, cu = utilisation(*self._pre_work, self.t_pre, self.device, self.req.tensor_parallel)
        return self.pp.power(self.device, float(mu), float(cu))

    def decode_power(self, b: float) -> float:
        from perfcast.llm.energy import utilisation

        f, m = self._decode_work(max(b, 1.0))
        n = 1 if self.llama else self.req.tensor_parallel
        mu, cu = utilisation(f, m, self.step(b), self.device, n)
        return self.pp.power(self.device, float(mu), float(cu))


def saturation_rate(rep: Replica, max_batch: int) -> float:
    """Requests/s a replica admitting ``max_batch`` running requests serves at most: ``N =
    max batch`` in ``N = λ(O−1)·d(N)/(1 − λ·t_pre)`` → ``λ = N / ((O−1)·d(N) + N·t_pre)``."""
    o = rep.req.output_len
    return max_batch / ((o - 1) * rep.step(max_batch) + max_batch * rep.t_pre)


def _sakasegawa_wait(lam: float, service: float, c: int) -> float:
    """Mean wait in an M/D/c queue (Sakasegawa's approximation, deterministic service)."""
    rho = lam * service / c
    if rho >= 1:
        return math.inf
    if rho <= 0:
        return 0.0
    return rho ** (math.sqrt(2 * (c + 1)) - 1) / (c * (1 - rho)) * service * 0.5


def replica_at(rep: Replica, lam: float, max_batch: int) -> dict[str, float] | None:
    """The replica's steady state at ``lam`` requests/s (module docstring): ``running``,
    ``tpot_s``, ``ttft_s``, ``latency_s``, ``prefill_share``, ``busy``, ``power_w`` (per GPU);
    ``None`` when it saturates."""
    o = rep.req.output_len
    rho = lam * rep.t_pre
    if rho >= 1:
        return None
    if o > 1:
        def g(nb: float) -> float:
            return lam * (o - 1) * rep.step(nb) / (1 - rho) - nb

        if g(max_batch) > 0:
            return None
        lo, hi = 0.0, float(max_batch)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if g(mid) > 0 else (lo, mid)
        running = hi
        tpot = rep.step(running) / (1 - rho)
    else:
        running, tpot = 0.0, 0.0
    service = rep.t_pre + (o - 1) * tpot
    w_slot = _sakasegawa_wait(lam, service, max_batch)
    if not math.isfinite(w_slot):
        return None
    w_pre = rho * rep.t_pre / (2 * (1 - rho))
    d_now = rep.step(running) if o > 1 else 0.0
    ttft = w_slot + w_pre + 0.5 * tpot + rep.t_alone + rep.prefill_passes * d_now
    inside = lam * (ttft + (o - 1) * tpot)  # requests in the replica (Little)
    busy = 1.0 - math.exp(-inside)
    power = None
    if rep.has_power:
        p_pre = rep.prefill_power()
        p_dec = rep.decode_power(running) if o > 1 else rep.idle
        dec_share = max(busy - rho, 0.0)
        power = rho * p_pre + dec_share * p_dec + (1 - rho - dec_share) * rep.idle
    return {"running": running, "tpot_s": tpot, "ttft_s": ttft,
            "latency_s": ttft + (o - 1) * tpot, "prefill_share": rho, "busy": busy,
            "power_w": power}


def _meets(state, slo_ttft_s, slo_tpot_s) -> bool:
    return state is not None and (slo_ttft_s is None or state["ttft_s"] <= slo_ttft_s) \
        and (slo_tpot_s is None or state["tpot_s"] <= slo_tpot_s)


def capacity(rep: Replica, max_batch: int, slo_ttft_s, slo_tpot_s) -> float:
    """Largest rate (requests/s) a replica carries within the SLOs (0: not even a trickle)."""
    top = saturation_rate(rep, max_batch)
    lo, hi = 0.0, top * (1 - 1e-9)
    if _meets(replica_at(rep, hi, max_batch), slo_ttft_s, slo_tpot_s):
        return hi
    if not _meets(replica_at(rep, top * 1e-6, max_batch), slo_ttft_s, slo_tpot_s):
        return 0.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _meets(replica_at(rep, mid, max_batch), slo_ttft_s,
                                     slo_tpot_s) else (lo, mid)
    return lo


# --------------------------------------------------------------------------- the search
def _tensor_parallel_options(arch, engine: str, per_node: int) -> list[int]:
    if engine == "llama.cpp":
        return [t for t in (1, 2, 4, 8) if t <= per_node and t <= arch.layers]
    return [t for t in (1, 2, 4, 8, 16) if t <= per_node and arch.heads % t == 0
            and (arch.kv_heads % t == 0 if arch.kv_heads >= t else t % arch.kv_heads == 0)]


def plan_serving(model: Any, *, device: str, rate: float, input_len: int | None,
                 output_len: int | None, slo_ttft_ms: float | None = None,
                 slo_tpot_ms: float | None = None, engine: str | None = None,
                 precision: str | None = None, tensor_parallel: int | None = None,
                 max_batch: int | None = None, max_gpus: int | None = None,
                 price_per_hour: float | None = None, provider: str | None = None,
                 n_batch: int | None = None, n_ubatch: int | None = None,
                 progress: Callable[[int, int], None] | None = None) -> ServingPlan:
    """Rank the deployments of ``model`` on ``device`` serving ``rate`` requests/s of
    ``input_len`` → ``output_len`` tokens (module docstring) — ``perfcast plan --mode
    generate`` (:func:`serving_request`). ``tensor_parallel`` / ``max_batch`` fix part of the
    search (llama.cpp: ``n_batch`` / ``n_ubatch``, its logical and physical batch);
    ``max_gpus`` (``--gpus``) caps ``R·T``; ``price_per_hour`` (USD per GPU-hour) or
    ``provider`` choose the price (default: the lowest provider's latest on-demand price,
    :func:`~perfcast.decisions.prices.choose_price`)."""
    from perfcast.decisions.common import request_for

    req = request_for("plan", model, mode="generate", device=device, rate=rate,
                      input_len=input_len, output_len=output_len, slo_ttft_ms=slo_ttft_ms,
                      slo_tpot_ms=slo_tpot_ms, engine=engine, precision=precision,
                      tensor_parallel=tensor_parallel, max_batch=max_batch, gpus=max_gpus,
                      price_per_hour=price_per_hour, provider=provider, n_batch=n_batch,
                      n_ubatch=n_ubatch)
    return serving_request(req, progress)


def serving_request(request, progress: Callable[[int, int], None] | None = None
                    ) -> ServingPlan:
    """The answer of ``perfcast plan --mode generate`` to the validated ``request``: the
    deployments ranked (module docstring); ``--tensor-parallel`` given fixes T, ``--gpus`` caps
    the GPUs."""
    from perfcast.decisions.common import device_of
    from perfcast.decisions.prices import choose_price
    from perfcast.generation import resolve
    from perfcast.generation.memory import _fits_fn
    from perfcast.llm.arch import llm_arch

    t0 = time.perf_counter()
    v = request.value
    if v("rate") is None:
        raise PerfcastError("perfcast plan --mode generate needs --rate (requests per second)")
    rate = float(v("rate"))
    slo_ttft_ms, slo_tpot_ms, max_batch, max_gpus = (v("slo_ttft_ms"), v("slo_tpot_ms"),
                                                     v("max_batch"), v("gpus"))
    slo_ttft_s = None if slo_ttft_ms is None else float(slo_ttft_ms) / 1e3
    slo_tpot_s = None if slo_tpot_ms is None else float(slo_tpot_ms) / 1e3
    tensor_parallel = v("tensor_parallel") if "tensor_parallel" in request.given else None
    price = None if v("price_per_hour") is None else float(v("price_per_hour"))
    provider = v("provider")
    req = resolve(request.workload)  # the served workload (its defaults filled in)
    req.require_lengths()
    dev = device_of(request)
    if not dev.is_gpu:
        raise PerfcastError(f"--mode generate plans GPU serving; {dev.key} is a CPU")
    arch = llm_arch(req.spec)
    req.check_serving(arch)
    notes: list[str] = []
    per_node = int(getattr(dev, "gpus_per_node", None) or 8)
    tps = [tensor_parallel] if tensor_parallel else \
        _tensor_parallel_options(arch, req.engine, per_node)
    choice = choose_price(dev, provider, price)
    price = choice.usd_per_gpu_hour
    notes.extend(choice.notes)
    if price is None:  # still one line: the no-price note says how the order holds
        notes[-1] += "; deployments are ranked by GPU-hours, the same order at any price"
    # candidate replicas: (T, max batches) with what fits in memory
    cands: list[tuple[int, int, Any]] = []
    skipped: list[str] = []
    for t in tps:
        r = req.replace(tensor_parallel=t, batch_size=1)
        fits = _fits_fn(arch, r, dev)
        if not fits(r):
            skipped.append(f"T={t}: the weights do not fit")
            continue
        top = 1
        while top * 2 <= MAX_BATCH_LIMIT and fits(r.replace(batch_size=top * 2)):
            top *= 2
        batches = [b for b in (2 ** j for j in range(11)) if b <= top]
        if max_batch is not None:
            if max_batch > top:
                skipped.append(f"T={t}: --max-batch {max_batch} does not fit "
                               f"(≤ {top} at {req.input_len + req.output_len:,} tokens)")
                continue
            batches = [max_batch]
        cands.append((t, r, batches))
    if not cands:
        raise PerfcastError(f"no deployment of {arch.model_id} fits {dev.key} "
                            f"({'; '.join(skipped)}): use a GPU with more memory, a lower "
                            f"--precision or shorter requests")
    total = sum(len(b) for _, _, b in cands)
    rows: list[ServingRow] = []
    done = 0
    out_tok_h = rate * req.output_len * 3600.0
    all_tok_h = rate * (req.input_len + req.output_len) * 3600.0
    for t, r, batches in cands:
        grid = sorted({1, *batches, *(2 ** j for j in range(11) if 2 ** j <= max(batches))})
        rep = Replica(r, dev, arch, grid)
        for b in batches:
            if progress is not None:
                progress(done, total)
            done += 1
            sat = saturation_rate(rep, b)
            cap = capacity(rep, b, slo_ttft_s, slo_tpot_s)
            if cap > 0:
                n_rep = math.ceil(rate / cap * (1 - 1e-12))
            else:
                n_rep = math.ceil(rate / sat * (1 + 1e-9)) + 1
            beyond = n_rep > MAX_REPLICAS  # the rate is more than the most replicas serve
            n_rep = max(1, min(n_rep, MAX_REPLICAS))
            st = replica_at(rep, rate / n_rep, b)
            ok = cap > 0 and not beyond and _meets(st, slo_ttft_s, slo_tpot_s)
            gpus = n_rep * t
            why = ""
            if beyond:
                why = (f"needs more than {gpus:,} GPUs ({MAX_REPLICAS:,} replicas, the most "
                       f"searched, serve {MAX_REPLICAS * (cap if cap > 0 else sat):,.0f} "
                       f"requests/s)")
            elif max_gpus is not None and gpus > max_gpus:
                ok, why = False, f"needs {gpus:,} GPUs > --gpus {max_gpus:,}"
            elif cap <= 0:
                alone = replica_at(rep, sat * 1e-6, b)
                why = ("even one request at a time misses the SLO" + (
                    f" (TTFT {alone['ttft_s'] * 1e3:,.0f} ms, TPOT {alone['tpot_s'] * 1e3:,.1f} "
                    f"ms)" if alone else ""))
            elif not ok:
                why = "misses the SLO at this rate"
            # beyond: the rows' GPUs do not serve the rate, so no cost or energy per its token
            usd_h = price * gpus if price is not None and not beyond else None
            e_tok = (st["power_w"] * gpus / (rate * req.output_len)
                     if st is not None and st["power_w"] is not None and not beyond else None)
            rows.append(ServingRow(
                rank=0, gpus=gpus, tensor_parallel=t, replicas=n_rep, max_batch=b,
                running_batch=st["running"] if st else None,
                ttft_ms=st["ttft_s"] * 1e3 if st else None,
                tpot_ms=st["tpot_s"] * 1e3 if st and req.output_len > 1 else None,
                latency_ms=st["latency_s"] * 1e3 if st else None, saturation_rate=sat,
                prefill_share=st["prefill_share"] if st else None,
                power_w=st["power_w"] if st else None, energy_j_per_output_token=e_tok,
                kwh_per_1m_output_tokens=e_tok * 1e6 / 3.6e6 if e_tok is not None else None,
                usd_per_hour=usd_h,
                usd_per_1m_output_tokens=usd_h / out_tok_h * 1e6 if usd_h is not None else None,
                usd_per_1m_tokens=usd_h / all_tok_h * 1e6 if usd_h is not None else None,
                meets_slo=bool(ok), why=why))
    if progress is not None:
        progress(total, total)
    big = 1e300

    def order(x: ServingRow):
        if x.meets_slo:  # cheapest (fewest GPU-hours), then least energy, then fastest
            return (0, x.gpus, x.energy_j_per_output_token or big, x.ttft_ms or big,
                    x.max_batch)
        return (1, -x.saturation_rate / x.tensor_parallel, x.max_batch)  # nearest first

    rows.sort(key=order)
    for i, x in enumerate(rows, 1):
        x.rank = i
    feasible = sum(x.meets_slo for x in rows)
    winner = rows[0] if rows and rows[0].meets_slo else None
    if req.engine == "llama.cpp":
        notes.append(f"llama.cpp: max batch = the server's slots (-np), its prompts in passes "
                     f"of min(n_batch {req.n_batch:,}, n_ubatch {req.n_ubatch:,}) tokens; the "
                     f"data has llama.cpp rows of one sequence only, so a decode step of N "
                     f"sequences is the learned one-sequence step × the arithmetic bound's "
                     f"ratio of N sequences to one")
    notes.append(f"times: prefill from the prefill model, decode steps from the learned model "
                 f"at each batch (interpolated), both from {dev.key}'s spec sheet; queueing: "
                 f"continuous batching with chunked prefill (perfcast.decisions.serving), "
                 f"checked against ML.ENERGY's latency–throughput curves in reports/llm/")
    if skipped:
        notes.append("skipped: " + "; ".join(skipped))
    if winner is None:
        notes.append("no deployment meets the SLOs" + (f" within --gpus {max_gpus}"
                                                       if max_gpus else "")
                     + ": the table lists the others (relax the SLOs, another GPU or a lower "
                       "precision)")
    return ServingPlan(model=req.spec, device=dev.key, mode="generate", engine=req.engine,
                       precision=req.precision, rate=rate, input_len=req.input_len,
                       output_len=req.output_len, slo_ttft_ms=slo_ttft_ms,
                       slo_tpot_ms=slo_tpot_ms, usd_per_gpu_hour=price,
                       price_source=choice.price_source, provider=choice.provider,
                       price_as_of=choice.price_as_of, n_batch=req.n_batch,
                       n_ubatch=req.n_ubatch,
                       rows=rows, winner=winner, evaluated=len(rows), feasible=feasible,
                       elapsed_s=time.perf_counter() - t0, notes=notes)


__all__ = ["MAX_BATCH_LIMIT", "Replica", "ServingPlan", "ServingRow", "capacity",
           "plan_serving", "replica_at", "saturation_rate", "serving_request"]
