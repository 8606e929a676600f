"""Which layout to train on: ``perfcast plan MODEL --gpus N --device D [--cluster F]
--batch-size B`` — every valid (D, T, P, micro-batch, recomputation, ZeRO) layout of N GPUs,
ranked by predicted iteration time among those that fit, and the winner.

``mode="generate"`` plans serving instead: ``perfcast plan hf:ID --mode generate --device D
--rate R --input-len I --output-len O [--slo-ttft MS] [--slo-tpot MS]`` — the cheapest
deployment (GPUs, tensor parallel, replicas, max batch) meeting the SLOs at that rate
(:mod:`perfcast.decisions.serving`); :func:`plan` is the one entry for both.

For an ``hf:`` transformer the candidates are priced by the per-layer arithmetic of one traced
block (:class:`~perfcast.parallel.TransformerLayouts`: two small traces, then microseconds per
layout); any other model plans data parallelism (its micro-batch and ZeRO stage) through the
single-GPU predictor.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from perfcast.errors import PerfcastError
from perfcast.workload import INTERLEAVED_CHUNKS, RECOMPUTE, ZERO_STAGES, Layout

#: Planners by mode: layouts of a training step, deployments of a served LLM.
PLAN_MODES = ("train", "generate")


@dataclass
class PlanRow:
    """One layout and its prediction."""

    rank: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    micro_batch_size: int
    recompute: str
    zero: int
    schedule: str
    time_ms: float
    samples_per_s: float
    tokens_per_s: float | None
    memory_mb: float
    fits: bool
    mfu: float | None = None
    breakdown_ms: dict[str, float] = field(default_factory=dict)
    #: USD per million samples (and tokens, for a transformer) at the plan's price per
    #: GPU-hour × its GPUs; ``None`` without a price
    usd_per_1m_samples: float | None = None
    usd_per_1m_tokens: float | None = None
    #: context-parallel GPUs per sequence (C) and expert-parallel GPUs (E, within D·C)
    context_parallel: int = 1
    expert_parallel: int = 1


@dataclass
class Plan:
    """The ranked layouts (``rows``: those that fit, fastest first — a tie to the simpler
    layout: lower ZeRO stage, less recomputation, fewer stages — then those that do not,
    least memory first) and the ``winner`` (``None``: none fits); ``evaluated`` layouts,
    ``fitting`` of them, ``skipped`` ones by the rule that excludes them; ``elapsed_s``. The
    price: ``usd_per_gpu_hour`` (on-demand, :func:`~perfcast.decisions.prices.choose_price`, or
    given) from ``provider``, dated ``price_as_of``, read from ``price_source``;
    ``usd_per_hour`` = that × ``gpus``; all ``None`` without a price."""

    model: str
    device: str
    mode: str
    gpus: int
    batch_size: int
    seq_len: int | None
    precision: str
    optimizer: str | None
    cluster: dict[str, Any]
    rows: list[PlanRow]
    winner: PlanRow | None
    evaluated: int
    fitting: int
    skipped: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    usd_per_gpu_hour: float | None = None
    usd_per_hour: float | None = None
    provider: str | None = None
    price_source: str | None = None
    price_as_of: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        return ranked_dict(self, top)


def ranked_dict(plan: Any, top: int | None = None) -> dict[str, Any]:
    """A plan dataclass as JSON, its ranked ``rows`` cut to the first ``top`` (with
    ``rows_shown``) — training layouts and serving deployments alike."""
    d = asdict(plan)
    if top is not None:
        d["rows"] = d["rows"][:top]
        d["rows_shown"] = len(d["rows"])
    return d


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def plan(model: Any, *, gpus: int | None = None, device: str, cluster: Any = None,
         batch_size: int | None = None, seq_len: int | None = None,
         precision: str | None = None, optimizer: str | None = None, mode: str = "train",
         data_parallel: int | None = None, tensor_parallel: int | None = None,
         pipeline_parallel: int | None = None, micro_batch_size: int | None = None,
         recompute: tuple[str, ...] | str | None = None,
         zero: tuple[int, ...] | int | None = None, schedule: str | None = None,
         use_cache: bool | None = None,
         progress: Callable[[int, int], None] | None = None,
         rate: float | None = None, input_len: int | None = None,
         output_len: int | None = None, slo_ttft_ms: float | None = None,
         slo_tpot_ms: float | None = None, engine: str | None = None,
         max_batch: int | None = None, price_per_hour: float | None = None,
         provider: str | None = None, n_batch: int | None = None,
         n_ubatch: int | None = None, flash_attention: str | None = None,
         context_parallel: int | None = None, expert_parallel: int | None = None,
         **options: Any):
    """``mode="train"``: rank every valid layout of ``gpus`` GPUs of ``device`` for one
    training iteration of ``model`` with a global ``batch_size`` (default 32 per … GPU:
    ``gpus`` × 1 sample, at least 32). The layout options fix part of the search:
    ``data_parallel``, ``tensor_parallel``, ``pipeline_parallel``, ``context_parallel``,
    ``expert_parallel``, ``micro_batch_size`` (a number), ``recompute`` and ``zero`` (one value
    or several); ``schedule`` is the pipeline
    schedule, ``flash_attention`` the attention kernel of every layout. Exit 2 on a wrong
    request — a fixed T·P·D that is not ``gpus``, a T that does not divide the heads, a P
    beyond the layers — naming the rule. Returns a :class:`Plan`.

    ``mode="generate"``: the deployments of the LLM ``model`` serving ``rate`` requests/s of
    ``input_len`` → ``output_len`` tokens on ``device`` within ``slo_ttft_ms`` /
    ``slo_tpot_ms``, cheapest first (:func:`perfcast.decisions.serving.plan_serving`:
    ``engine``, ``precision``, a fixed ``tensor_parallel`` or ``max_batch``, llama.cpp's
    ``n_batch`` / ``n_ubatch``, ``gpus`` = the most GPUs, ``price_per_hour`` /
    ``provider``). Returns a :class:`~perfcast.decisions.serving.ServingPlan`.

    Both price the GPUs: ``price_per_hour`` (USD per GPU-hour) if given, else ``provider``'s
    latest on-demand price, else the lowest provider's
    (:func:`~perfcast.decisions.prices.choose_price`). What ``perfcast plan`` answers
    (:func:`plan_request`)."""
    from perfcast.decisions.common import request_for

    recs, zeros = _several("recompute", recompute, RECOMPUTE), _several("zero", zero,
                                                                        ZERO_STAGES)
    req = request_for(
        "plan", model, gpus=gpus, device=device, cluster=cluster, batch_size=batch_size,
        seq_len=seq_len, precision=precision, optimizer=optimizer, mode=mode,
        data_parallel=data_parallel, tensor_parallel=tensor_parallel,
        pipeline_parallel=pipeline_parallel, micro_batch_size=micro_batch_size,
        recompute=recs[0] if recs else None, zero=zeros[0] if zeros else None,
        schedule=schedule, use_cache=use_cache, rate=rate, input_len=input_len,
        output_len=output_len, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms, engine=engine,
        max_batch=max_batch, price_per_hour=price_per_hour, provider=provider,
        n_batch=n_batch, n_ubatch=n_ubatch, flash_attention=flash_attention,
        context_parallel=context_parallel, expert_parallel=expert_parallel, **options)
    return plan_request(req, progress, recompute=recs, zero=zeros)


def _several(name: str, value, allowed) -> list | None:
    """The Python API's one value or several of ``recompute`` / ``zero`` (``None``: not
    given)."""
    if value is None:
        return None
    vals = [value] if isinstance(value, (str, int)) else list(value)
    for v in vals:
        if v not in allowed or isinstance(v, bool):
            from perfcast.errors import unknown_choice

            raise unknown_choice(name, v, allowed)
    return vals


def plan_request(req, progress: Callable[[int, int], None] | None = None, *,
                 recompute: list[str] | None = None, zero: list[int] | None = None):
    """The answer of ``perfcast plan`` to the validated request ``req`` (module docstring):
    ``--mode train`` the layouts (a :class:`Plan`), ``--mode generate`` the deployments (a
    :class:`~perfcast.decisions.serving.ServingPlan`). ``progress(i, n)`` is called as the
    candidates are priced; ``recompute`` / ``zero``: several values to search (the Python
    API), instead of the request's one or every one."""
    from perfcast.decisions.common import device_of

    t0 = time.perf_counter()
    if req.mode == "generate":
        if "batch_size" in req.given:
            raise PerfcastError("--batch-size apply to plan --mode train; --mode generate takes "
                                "--rate, --input-len, --output-len, --slo-ttft-ms, "
                                "--slo-tpot-ms, --engine, --precision, --tensor-parallel, "
                                "--max-batch (requests a replica runs at once), --gpus (the "
                                "most), --n-batch / --n-ubatch (llama.cpp)")
        from perfcast.decisions.serving import serving_request

        return serving_request(req, progress)
    gpus = req.value("gpus")
    if gpus is None:
        raise PerfcastError("perfcast plan --mode train needs --gpus (GPUs to spread the "
                            "training over)")
    dev = device_of(req)
    from perfcast.decisions.prices import choose_price

    price = choose_price(dev, req.value("provider"), req.value("price_per_hour"))
    recs = recompute or _given_list(req, "recompute", RECOMPUTE)
    zeros = [int(z) for z in (zero or _given_list(req, "zero", ZERO_STAGES))]
    schedule = req.value("schedule")
    # the request itself (validated once, with whatever part of the layout is fixed)
    fixed = {k: (req.value(k) if k in req.given else None)
             for k in ("data_parallel", "tensor_parallel", "pipeline_parallel",
                       "context_parallel", "expert_parallel")}
    if fixed["context_parallel"] is None and all(
            fixed[k] is not None for k in ("data_parallel", "tensor_parallel",
                                           "pipeline_parallel")):
        fixed["context_parallel"] = 1  # D, T and P given: no GPU is left to split sequences
    b = req.value("batch_size") or max(32, gpus)
    batch_given = "batch_size" in req.given
    if not batch_given:
        req = req.replace(batch_size=b)
    w = req.workload
    if all(fixed[k] is not None for k in ("data_parallel", "tensor_parallel",
                                          "pipeline_parallel", "context_parallel")):
        # the GPU count rule, before any model
        lay = w.layout                                 # is read (the shape's rules pass here)
        w.check_layout(layers=lay.pipeline * INTERLEAVED_CHUNKS, heads=lay.tensor,
                       hidden=lay.tensor, gpus=gpus)
    from perfcast.parallel.cluster import Cluster

    cluster = req.options.cluster
    cl = Cluster.resolve(cluster, dev)
    notes: list[str] = []
    if cluster is None:
        notes.append(f"cluster: {cl} — the registry's defaults for {dev.key}; give --cluster "
                     f"FILE.json for yours")
    if not batch_given:
        notes.append(f"batch_size: {b} global (none given: max(32, GPUs))")
    use_cache = req.options.use_cache
    if w.model.kind == "hf":
        out = _plan_transformer(w, dev, cl, gpus, fixed, recs, zeros, schedule, use_cache,
                                progress, notes, t0)
    else:
        out = _plan_data_parallel(req, w, dev, cl, gpus, fixed, zeros, progress, notes, t0)
    return _priced(out, price)


def _given_list(req, name: str, allowed) -> list:
    """The request's one value of ``name`` when given, else every allowed one."""
    return [req.value(name)] if name in req.given else list(allowed)


def _priced(p: Plan, price) -> Plan:
    """The plan with its price (a :class:`~perfcast.decisions.prices.PriceChoice`): the fields,
    USD per hour of the ``gpus``, each row's USD per million samples / tokens, the note."""
    p.usd_per_gpu_hour, p.provider = price.usd_per_gpu_hour, price.provider
    p.price_source, p.price_as_of = price.price_source, price.price_as_of
    p.notes.extend(price.notes)
    if p.usd_per_gpu_hour is None:
        return p
    p.usd_per_hour = p.usd_per_gpu_hour * p.gpus
    for r in p.rows:
        if r.samples_per_s:
            r.usd_per_1m_samples = p.usd_per_hour / (r.samples_per_s * 3600) * 1e6
        if r.tokens_per_s:
            r.usd_per_1m_tokens = p.usd_per_hour / (r.tokens_per_s * 3600) * 1e6
    return p


def _plan_transformer(w, dev, cl, gpus, fixed, recs, zeros, schedule, use_cache, progress,
                      notes, t0) -> Plan:
    from perfcast.parallel import TransformerLayouts

    w = _precision(w, dev, notes)
    tl = TransformerLayouts(w, dev, cl, use_cache=use_cache)
    if tl.finetune is not None:  # LoRA / QLoRA: FSDP sharding a frozen base is not modelled
        zeros = [z for z in zeros if z < 3] or [0]
        notes.extend(tl.finetune.notes(w.train_optimizer))
    if tl.seq_note:
        notes.append(tl.seq_note)
    s = tl.shape
    if all(v is not None for v in fixed.values()):  # a fully fixed layout: its own rules
        tl.check(w.layout, gpus=gpus)
    elif fixed["tensor_parallel"] is not None or fixed["pipeline_parallel"] is not None:
        # a fixed T or P must suit the model whatever the rest
        probe = Layout(tensor=fixed["tensor_parallel"] or 1,
                       pipeline=fixed["pipeline_parallel"] or 1)
        tl.check(probe)
    experts = s.experts if tl.traced.one.expert_mask().any() else 0
    skipped: dict[str, int] = {}
    cands: list[Layout] = []
    for t in _divisors(gpus):
        if fixed["tensor_parallel"] not in (None, t):
            continue
        if s.heads % t or s.hidden % t or (s.kv_heads != s.heads and s.kv_heads % t):
            skipped["T does not divide the heads / hidden"] = \
                skipped.get("T does not divide the heads / hidden", 0) + 1
            continue
        for p in _divisors(gpus // t):
            if fixed["pipeline_parallel"] not in (None, p):
                continue
            if p > s.layers or s.layers % p or (p > 1 and tl.traced.part is None):
                skipped["P does not divide the layers"] = \
                    skipped.get("P does not divide the layers", 0) + 1
                continue
            for c in _divisors(gpus // (t * p)):
                if fixed["context_parallel"] not in (None, c):
                    continue
                if c > 1 and tl.seq_len % (2 * c):
                    _skip(skipped, "2·C does not divide the sequence")
                    continue
                d = gpus // (t * p * c)
                if fixed["data_parallel"] not in (None, d):
                    continue
                if w.batch_size % d:
                    _skip(skipped, "the batch does not divide among D replicas")
                    continue
                if schedule == "interleaved" and (p == 1 or s.layers % (2 * p)):
                    continue
                eps = [e for e in _divisors(d * c) if experts and experts % e == 0] or [1]
                if fixed["expert_parallel"] is not None:
                    if fixed["expert_parallel"] not in eps:
                        _skip(skipped, "E does not divide D·C and the experts")
                        continue
                    eps = [fixed["expert_parallel"]]
                for e in eps:
                    for r in recs:
                        for z in zeros:
                            if z and d * c == 1:
                                continue  # nothing to shard
                            if z >= 2 and p > 1:
                                _skip(skipped, "ZeRO-2/3 with pipeline stages")
                                continue
                            cands.append(Layout(data=d, tensor=t, pipeline=p,
                                                micro_batch=w.layout.micro_batch, recompute=r,
                                                zero=z, schedule=schedule if p > 1 else "1f1b",
                                                flash_attention=w.layout.flash_attention,
                                                context=c, expert=e))
    if not cands:
        raise PerfcastError(f"no layout of {gpus:,} GPUs suits {s.model_id} ({s.layers} "
                            f"layers, {s.heads} heads, hidden {s.hidden:,}) with a global "
                            f"batch of {w.batch_size:,}: T must divide the heads and the "
                            f"hidden size, P the layers, D the batch, 2·C the sequence, E the "
                            f"experts and D·C")
    rows: list[PlanRow] = []
    cap = float(dev.memory_mb or float("inf"))
    for i, lay in enumerate(cands):
        if progress is not None and i % 64 == 0:
            progress(i, len(cands))
        for m in tl.micro_batches(lay):
            e = tl.estimate(lay, m)
            tok = w.batch_size * tl.seq_len / e.time_ms * 1e3
            peak = dev.peak_tflops({"amp": "fp16", "fp16": "fp16", "bf16": "bf16",
                                    "bf16-pure": "bf16", "fp8": "bf16"}.get(w.precision,
                                                                            "fp32"))
            mfu = e.model_flops / (e.time_ms / 1e3) / gpus / (peak * 1e12) if peak else None
            rows.append(PlanRow(rank=0, data_parallel=lay.data, tensor_parallel=lay.tensor,
                                pipeline_parallel=lay.pipeline, micro_batch_size=m,
                                recompute=lay.recompute, zero=lay.zero, schedule=lay.schedule,
                                time_ms=e.time_ms, samples_per_s=w.batch_size / e.time_ms * 1e3,
                                tokens_per_s=tok, memory_mb=e.memory_mb,
                                fits=e.memory_mb <= cap, mfu=mfu,
                                breakdown_ms={k: round(v, 2) for k, v in e.breakdown_ms.items()
                                              if v}, context_parallel=lay.context,
                                expert_parallel=lay.expert))
    if progress is not None:
        progress(len(cands), len(cands))
    notes.append(f"time: per-layer arithmetic of {s.model_id} ({s.layers} layers, hidden "
                 f"{s.hidden:,}, {s.heads} heads, {tl.traced.params / 1e9:,.3g} B parameters) "
                 f"at {tl.seq_len:,} tokens; efficiencies fitted on DLPerf's Megatron-LM runs "
                 f"and llm-foundry's FSDP runs (reports/distributed/)")
    from perfcast.parallel.model import attention_note

    notes.append(attention_note(dev, w.layout.flash_attention))
    from perfcast.parallel.predict import CP_ASSUMPTIONS, EP_ASSUMPTIONS

    cs = sorted({r.context_parallel for r in rows})
    es = sorted({r.expert_parallel for r in rows})
    if cs != [1]:
        notes.append(f"context_parallel: C ∈ {{{', '.join(map(str, cs))}}} searched (2·C "
                     f"divides the {tl.seq_len:,} tokens) — {CP_ASSUMPTIONS}")
    if es != [1]:
        notes.append(f"expert_parallel: E ∈ {{{', '.join(map(str, es))}}} searched (E divides "
                     f"the {s.experts} experts and D·C) — {EP_ASSUMPTIONS}")
    return _ranked(w, dev, cl, gpus, rows, skipped, notes, t0, tl.seq_len)


def _skip(skipped: dict[str, int], why: str) -> None:
    skipped[why] = skipped.get(why, 0) + 1


def _precision(w, dev, notes):
    from perfcast.devices.fp8 import training_precision_notes

    if w.precision is None:
        p = "bf16" if dev.peak_bf16_tflops else ("amp" if dev.peak_fp16_tflops else "fp32")
        notes.append(f"precision: {p} (none given: the GPU's 16-bit training precision)")
        w = w.replace(precision=p)
    notes.extend(training_precision_notes(w.precision, dev))  # fp8: refused without FP8 units
    notes.extend(w.optimizer_notes())
    return w


def _plan_data_parallel(req, w, dev, cl, gpus, fixed, zeros, progress, notes, t0) -> Plan:
    from perfcast.request.engines import estimate

    if (fixed["tensor_parallel"] or 1) > 1 or (fixed["pipeline_parallel"] or 1) > 1:
        raise PerfcastError(f"tensor and pipeline parallelism split a transformer's layers "
                            f"(hf: models); {w.spec} plans --data-parallel only")
    w = _precision(w, dev, notes)
    if w.batch_size % gpus:
        raise PerfcastError(f"the global batch {w.batch_size:,} does not divide among "
                            f"{gpus:,} data-parallel replicas")
    # each candidate through the engines: the layout's data parallelism and ZeRO stage, the
    # request's micro-batch (the replica's step by the single-GPU predictor)
    base = req.replace(precision=w.precision, recompute="none", cluster=cl)
    rows = []
    zs = [z for z in zeros if not (z and gpus == 1)]
    for i, z in enumerate(zs):
        if progress is not None:
            progress(i, len(zs))
        if gpus == 1:  # one GPU: the single-GPU answer
            q = estimate(base.replace(data_parallel=1, zero=0, micro_batch_size=None,
                                      cluster=None))
            rows.append(PlanRow(0, 1, 1, 1, w.batch_size, "none", 0, "1f1b", q.time_ms,
                                w.batch_size / q.time_ms * 1e3, None, q.memory_mb or 0.0,
                                bool(q.fits)))
            continue
        p = estimate(base.replace(data_parallel=gpus, zero=z))
        lay = p.layout
        rows.append(PlanRow(0, gpus, 1, 1, lay["micro_batch_size"], "none", z, "1f1b",
                            p.time_ms, p.samples_per_s, p.tokens_per_s, p.memory_mb or 0.0,
                            bool(p.fits), None, p.breakdown_ms))
    if progress is not None:
        progress(len(zs), len(zs))
    notes.append(f"{w.spec} is not an hf: transformer: only data parallelism is planned "
                 f"(micro-batch and ZeRO stage), each through the single-GPU predictor")
    return _ranked(w, dev, cl, gpus, rows, {}, notes, t0, w.seq_len)


def _ranked(w, dev, cl, gpus, rows, skipped, notes, t0, seq_len) -> Plan:
    order = {r: i for i, r in enumerate(RECOMPUTE)}
    # fastest first; a tie (the same time) goes to the simpler layout: a lower ZeRO
    # stage, less recomputation, fewer pipeline stages
    rows.sort(key=lambda r: (not r.fits, round(r.time_ms if r.fits else r.memory_mb, 4),
                             r.zero, order.get(r.recompute, 0), r.pipeline_parallel,
                             r.tensor_parallel, r.context_parallel, r.expert_parallel))
    for i, r in enumerate(rows, 1):
        r.rank = i
    fitting = sum(r.fits for r in rows)
    winner = rows[0] if rows and rows[0].fits else None
    if winner is None:
        notes.append(f"no layout fits {dev.key}'s {dev.memory_mb:,.0f} MiB: the table lists "
                     f"them by memory (raise --gpus, use ZeRO or recomputation, a larger GPU, "
                     f"or a smaller batch)")
    return Plan(model=w.spec, device=dev.key, mode="train", gpus=gpus,
                batch_size=w.batch_size, seq_len=seq_len, precision=w.precision,
                optimizer=w.train_optimizer, cluster=cl.to_dict(), rows=rows, winner=winner,
                evaluated=len(rows), fitting=fitting, skipped=skipped,
                elapsed_s=time.perf_counter() - t0, notes=notes)


__all__ = ["PLAN_MODES", "Plan", "PlanRow", "plan", "plan_request"]
