"""A training step over many GPUs as a prediction: :func:`predict_parallel` and the
:class:`ParallelPrediction` it returns (``perfcast predict MODEL --mode train
--data-parallel D --tensor-parallel T --pipeline-parallel P …``).

Two ways to the per-GPU work, one layout model on top:

* an ``hf:`` transformer (decoder or encoder): the per-layer arithmetic of one traced block
  with Megatron's splits (:mod:`perfcast.parallel.blocks`, :mod:`perfcast.parallel.model`) —
  any D, T, P, micro-batch, recomputation, ZeRO stage and schedule; a model of a trillion
  parameters costs two small traces;
* any other model (timm, torchvision, ONNX …): data parallelism only — the per-GPU step at
  the micro-batch is the single-GPU prediction (``single``: :func:`perfcast.api.
  predict_workload`, the route every one-GPU answer takes) and the layout adds the gradient
  accumulation, the bucketed all-reduce over D and ZeRO's sharding of the optimizer state.

The micro-batch left open is the fastest that fits (said in ``notes``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from perfcast.errors import PerfcastError
from perfcast.parallel.cluster import Cluster
from perfcast.parallel.model import (
    BUCKET_BYTES,
    STATE_BYTES,
    STEP_BYTES,
    Efficiency,
    Estimate,
    attention_note,
    estimate,
    fused_attention,
    group_per_node,
    micro_batch_choices,
    parts,
    shipped_efficiency,
)
from perfcast.parallel.finetune import answer_notes
from perfcast.workload import Layout, Workload

#: The sequence length an ``hf:`` model is trained at when none is given (fewer when the model
#: has fewer positions: :func:`default_seq_len`).
DEFAULT_SEQ_LEN = 2048


def default_seq_len(spec: str) -> tuple[int, str | None]:
    """The training sequence of ``spec`` when none is given, and what to say of it:
    :data:`DEFAULT_SEQ_LEN`, or the largest power of two within the model's absolute position
    table when that is smaller (GPT-2: 1,024; RoBERTa's 514-row table: 512)."""
    try:
        from perfcast.zoo.hf_config import resolve_hf_config

        n = getattr(resolve_hf_config(spec)[0], "max_position_embeddings", None)
    except Exception:  # noqa: BLE001 - the trace says what is wrong with the spec
        n = None
    if isinstance(n, int) and 0 < n < DEFAULT_SEQ_LEN:
        s = 1 << (n.bit_length() - 1)
        return s, (f"seq_len: {s:,} tokens (none given: {DEFAULT_SEQ_LEN:,}, but the model has "
                   f"{n:,} positions)")
    return DEFAULT_SEQ_LEN, f"seq_len: {DEFAULT_SEQ_LEN:,} tokens (none given)"
#: Micro-batches searched when none is given: the powers of two that divide the replica's
#: batch and the replica's whole batch, up to the largest that fits (no fixed cap: a CNN
#: replica of 256 samples runs its 256 at once when memory allows).
def auto_micro_batches(batch: int, data: int) -> list[int]:
    """The micro-batches searched for a replica of ``batch / data`` samples when none is given
    (powers of two dividing it, and the whole replica batch), ascending."""
    per = batch // data
    return [m for m in micro_batch_choices(batch, data, per) if m & (m - 1) == 0 or m == per]


@dataclass
class ParallelPrediction:
    """One training iteration over ``gpus`` GPUs. ``time_ms`` per iteration (the global batch),
    ``samples_per_s`` / ``tokens_per_s``; ``model_tflops_per_gpu`` (the model's forward +
    backward FLOPs — no recomputation — per second per GPU) and ``mfu`` (÷ the GPU's peak at the
    precision); ``breakdown_ms`` (compute, recompute, each communication kind as exposed, pipeline
    bubble, optimizer, overhead: they sum to ``time_ms``); ``memory_mb`` per GPU (the fullest
    one; ``memory_breakdown_mb``), ``capacity_mb`` and ``fits``; ``energy_j`` per iteration
    (all GPUs) and ``power_w`` per GPU; ``layout`` (with the micro-batch chosen) and
    ``cluster``; provenance in ``predictor`` / ``trained_on`` / ``notes``."""

    model: str
    device: str
    mode: str
    precision: str
    optimizer: str | None
    batch_size: int
    seq_len: int | None
    gpus: int
    layout: dict[str, Any]
    cluster: dict[str, Any]
    time_ms: float | None = None
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    model_tflops_per_gpu: float | None = None
    mfu: float | None = None
    breakdown_ms: dict[str, float] = field(default_factory=dict)
    memory_mb: float | None = None
    memory_breakdown_mb: dict[str, float] = field(default_factory=dict)
    capacity_mb: float | None = None
    fits: bool | None = None
    energy_j: float | None = None
    power_w: float | None = None
    micro_batches: int | None = None
    predictor: dict[str, str] = field(default_factory=dict)
    trained_on: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def runtime_overhead_mb() -> float:
    """The measured CUDA context + library overhead per GPU (MiB,
    ``memory/runtime_overhead.json``)."""
    import json

    from perfcast.paths import package_data

    return float(json.loads(package_data("memory", "runtime_overhead.json").read_text())
                 ["runtime_overhead_mb"])


# ------------------------------------------------------------------------------- transformers
class TransformerLayouts:
    """Estimates of layouts of one ``hf:`` transformer on one device and cluster, sharing the
    traced block and its priced parts per (T, micro-batch) — what :func:`predict_parallel`
    uses for one layout and ``perfcast plan`` for thousands."""

    def __init__(self, w: Workload, device, cluster: Cluster, *, eff: Efficiency | None = None,
                 coll=None, use_cache: bool = True):
        from perfcast.parallel.blocks import trace
        from perfcast.parallel.collectives import shipped

        self.w, self.device, self.cluster = w, device, cluster
        self.seq_note = None
        self.seq_len = w.seq_len
        if not self.seq_len:
            self.seq_len, self.seq_note = default_seq_len(w.spec)
        else:
            from perfcast.llm.arch import positions_note

            self.seq_note = positions_note(w.spec, int(self.seq_len))
        self.eff = eff or shipped_efficiency()
        self.coll = coll or shipped()
        self.traced = trace(w.spec, self.seq_len, use_cache=use_cache)
        self.runtime_mb = runtime_overhead_mb()
        self._parts: dict[tuple[int, int], Any] = {}
        from perfcast.parallel.finetune import finetune_cost

        #: LoRA / QLoRA (--finetune): its step on top of full fine-tuning's arithmetic
        self.finetune = finetune_cost(w, self.traced, device)

    @property
    def shape(self):
        return self.traced.shape

    def check(self, layout: Layout, gpus: int | None = None) -> None:
        """The layout against the model (exit 2 naming the rule)."""
        s = self.shape
        self.w.replace(layout=layout).check_layout(layers=s.layers, heads=s.heads,
                                                   hidden=s.hidden, kv_heads=s.kv_heads,
                                                   gpus=gpus, name=s.model_id,
                                                   experts=s.experts)
        if layout.context > 1 and self.seq_len % (2 * layout.context):
            raise PerfcastError(f"--context-parallel {layout.context} splits each sequence "
                                f"into 2·C = {2 * layout.context} chunks: the "
                                f"{self.seq_len:,}-token sequence must be a multiple of "
                                f"{2 * layout.context}")
        if layout.expert > 1 and not self.traced.one.expert_mask().any():
            raise PerfcastError(f"--expert-parallel {layout.expert}: {s.model_id}'s traced "
                                f"layer shows no grouped expert product to split; use 1")
        if layout.pipeline > 1 and self.traced.part is None:
            raise PerfcastError(f"{s.model_id}: its layers are not alike (its one- and "
                                f"two-layer graphs do not align), so they cannot be split into "
                                f"pipeline stages; use --pipeline-parallel 1")

    def estimate(self, layout: Layout, micro_batch: int) -> Estimate:
        fused = fused_attention(self.device, layout.flash_attention)
        key = (layout.tensor, micro_batch, fused, layout.context, layout.expert)
        if key not in self._parts:
            self._parts[key] = parts(self.traced, layout.tensor, micro_batch,
                                     self.w.precision, self.device, self.eff, fused=fused,
                                     context=layout.context, expert=layout.expert)
        pr, ft = self._parts[key], self.finetune
        if ft is not None:  # the adapters trained, the base frozen
            pr = ft.parts(pr, self.traced, layout, micro_batch, self.device, self.eff, fused)
        est = estimate(self.traced, layout, batch=self.w.batch_size, micro_batch=micro_batch,
                       precision=self.w.precision, optimizer=self.w.train_optimizer or "none",
                       device=self.device, cluster=self.cluster, eff=self.eff,
                       coll=self.coll, runtime_mb=self.runtime_mb, prices=pr,
                       **({"grad_bytes": 4.0} if ft is not None else {}))
        return est if ft is None else ft.finish(est, self.traced, self._parts[key], layout,
                                                self.w.train_optimizer)

    def micro_batches(self, layout: Layout) -> list[int]:
        if layout.micro_batch is not None:
            return [layout.micro_batch]
        per = self.w.batch_size // layout.data
        got = auto_micro_batches(self.w.batch_size, layout.data)
        if layout.schedule == "interleaved":  # Megatron: micro-batches a multiple of P
            got = [m for m in got if (per // m) % layout.pipeline == 0]
        return got

    def best(self, layout: Layout) -> tuple[Estimate, list[Estimate]]:
        """The fastest estimate that fits over the layout's micro-batches (the least memory
        when none fits), and all of them."""
        cap = float(self.device.memory_mb or math.inf)
        ests = [self.estimate(layout, m) for m in self.micro_batches(layout)]
        if not ests:
            raise PerfcastError(f"no micro-batch divides the {self.w.batch_size // layout.data} "
                                f"samples of a replica into a multiple of "
                                f"--pipeline-parallel {layout.pipeline} micro-batches "
                                f"(--schedule interleaved)")
        fit = [e for e in ests if e.memory_mb <= cap]
        best = min(fit, key=lambda e: e.time_ms) if fit else min(ests, key=lambda e: e.memory_mb)
        return best, ests


# ------------------------------------------------------------------------------- the answer
def predict_parallel(w: Workload, device, *, cluster: Any = None,
                     single: Callable[[Workload], Any] | None = None, use_cache: bool = True,
                     power_limit_w: float | None = None, eff: Efficiency | None = None,
                     coll=None, **single_options: Any) -> ParallelPrediction:
    """Forecast the training iteration ``w`` (mode ``train``, a layout over several GPUs) on
    GPUs of ``device`` joined as ``cluster`` (a :class:`Cluster`, a dict, a JSON file or
    ``None``: the device's registry defaults). ``single(workload)`` answers one GPU's step
    (models that are not ``hf:`` transformers); ``single_options`` are for it."""
    if w.mode != "train":
        raise PerfcastError(f"a layout over several GPUs is a training step (--mode train), not "
                            f"--mode {w.mode}")
    if not device.is_gpu:
        raise PerfcastError(f"parallel training runs on GPUs; {device.key} is a CPU")
    cl = Cluster.resolve(cluster, device)
    notes: list[str] = []
    if cluster is None:
        notes.append(f"cluster: {cl} — the registry's defaults for {device.key} "
                     f"({cl.source or 'no source'}); give --cluster FILE.json for yours")
    # spec fields the sheet left out, derived by a stated rule and said: the bf16 peak (the
    # default precision, the GEMMs' peak) and the compute capability (fused attention)
    from perfcast.devices.derive import complete, notes_for

    notes.extend(notes_for(device, ("compute_capability", "peak_bf16_tflops")))
    device = complete(device)[0]
    w = _defaults(w, device, notes)
    from perfcast.devices.fp8 import training_precision_notes

    notes.extend(training_precision_notes(w.precision, device))
    notes.extend(w.optimizer_notes())
    if w.model.kind == "hf" and _is_transformer(w):
        return _transformer(w, device, cl, notes, use_cache, power_limit_w, eff, coll)
    if single is None:
        raise PerfcastError(f"{w.spec}: data parallelism of a model that is not an hf: "
                            f"transformer needs the single-GPU predictor (perfcast.predict)")
    return _data_parallel(w, device, cl, notes, single, power_limit_w, eff, coll,
                          single_options)


def _defaults(w: Workload, device, notes: list[str]) -> Workload:
    """The precision (the device's fastest 16-bit training: bf16 where the GPU has it, else
    amp) and batch (32) left open."""
    if w.precision is None:
        p = "bf16" if device.peak_bf16_tflops else ("amp" if device.peak_fp16_tflops else "fp32")
        w = w.replace(precision=p)
        notes.append(f"precision: {p} (none given: the GPU's 16-bit training precision)")
    if w.batch_size is None:
        b = 32 * w.layout.data
        w = w.replace(batch_size=b)
        notes.append(f"batch_size: {b} (none given: 32 per data-parallel replica)")
    return w


def _is_transformer(w: Workload) -> bool:
    try:
        from perfcast.parallel.blocks import model_shape

        return not model_shape(w.spec)[0].encoder_decoder
    except PerfcastError:
        return False


def _power(est_flops: float, est_bytes: float, kernels: float, time_ms: float, device,
           precision: str, batch: int, limit_w: float | None) -> tuple[float | None, str]:
    """Mean power per GPU (W) from perfcast.energy's power model on the iteration's per-GPU
    work, bounded to [idle, min(limit, TDP)]."""
    from perfcast.energy import check_power_limit, power_bounds, step_features
    from perfcast.shipped import load_shipped

    idle, tdp, _ = power_bounds(device)
    if not tdp:
        return None, f"energy_j: {device.key} has no TDP in its spec"
    limit = check_power_limit(device, limit_w)
    pm = load_shipped("power-model")
    feats = step_features(est_flops, est_bytes, kernels, time_ms / 1e3, device, precision,
                          batch)
    p, _, _ = pm.step(feats, device, limit)
    return p, (f"energy_j: power {p:,.0f} W per GPU from the power model (perfcast.energy, the "
               f"one energy code path) on the iteration's per-GPU work, × GPUs × time; "
               f"{pm.note(device, 'step')}")


def _finish(out: ParallelPrediction, device) -> ParallelPrediction:
    out.capacity_mb = device.memory_mb
    if out.memory_mb is not None and out.capacity_mb is not None:
        out.fits = bool(out.memory_mb <= out.capacity_mb)
        if not out.fits:
            out.notes.append(f"fits: no — {out.memory_mb:,.0f} MiB per GPU predicted, "
                             f"{out.capacity_mb:,.0f} MiB on {device.key}; time_ms is "
                             f"hypothetical (raise T, P or ZeRO, recompute, or lower the "
                             f"micro-batch)")
    if out.time_ms is not None and not math.isfinite(out.time_ms):
        raise PerfcastError("the prediction overflowed; check the request sizes")
    return out


def _transformer(w, device, cl, notes, use_cache, limit_w, eff, coll) -> ParallelPrediction:
    tl = TransformerLayouts(w, device, cl, eff=eff, coll=coll, use_cache=use_cache)
    if tl.seq_note:
        notes.append(tl.seq_note)
    tl.check(w.layout)
    notes.append(attention_note(device, w.layout.flash_attention))
    notes.extend(layout_notes(w.layout, tl.shape))
    est, tried = tl.best(w.layout)
    lay = est.layout
    if w.layout.micro_batch is None:
        ok = [e for e in tried if e.memory_mb <= (device.memory_mb or math.inf)]
        notes.append(f"micro_batch_size: {lay.micro_batch} — the fastest that fits of "
                     f"{', '.join(str(e.layout.micro_batch) for e in tried)} "
                     f"({len(ok)} fit{'s' if len(ok) == 1 else ''})" if ok else
                     f"micro_batch_size: {lay.micro_batch} — none of "
                     f"{', '.join(str(e.layout.micro_batch) for e in tried)} fits; the one "
                     f"needing the least memory")
    s = tl.seq_len
    gpus = lay.gpus
    peak = _peak(device, w.precision)
    out = ParallelPrediction(
        model=w.spec, device=device.key, mode="train", precision=w.precision,
        optimizer=w.train_optimizer, batch_size=w.batch_size, seq_len=s, gpus=gpus, layout=lay.to_dict(),
        cluster=cl.to_dict(), time_ms=est.time_ms,
        samples_per_s=w.batch_size / est.time_ms * 1e3,
        tokens_per_s=w.batch_size * s / est.time_ms * 1e3,
        model_tflops_per_gpu=est.model_flops / (est.time_ms / 1e3) / gpus / 1e12,
        breakdown_ms={k: round(v, 3) for k, v in est.breakdown_ms.items()},
        memory_mb=est.memory_mb,
        memory_breakdown_mb={k: round(v, 1) for k, v in est.memory_breakdown_mb.items()},
        micro_batches=est.micro_batches, notes=notes)
    out.mfu = out.model_tflops_per_gpu * 1e12 / peak if peak else None
    e = tl.eff
    out.predictor = {
        "time_ms": ("per-layer arithmetic on one traced block with Megatron's splits "
                    "(perfcast.parallel), collectives α–β (NCCL ring / tree)"),
        "memory_mb": ("weights, gradients and optimizer state divided as the layout divides "
                      "them + the activations autograd saves per layer × layers × micro-batches "
                      "in flight + the measured CUDA runtime"),
        "energy_j": "power model (perfcast.energy) × GPUs × time_ms"}
    out.trained_on = {"time_ms": {"efficiency": {k: getattr(e, k) for k in
                                                 ("gemm", "memory", "overlap", "network")},
                                  **e.trained_on},
                      "collectives": tl.coll.trained_on}
    out.notes.append(f"time_ms: {tl.shape.model_id} — {tl.shape.layers} layers of hidden "
                     f"{tl.shape.hidden:,}, {tl.shape.heads} heads, "
                     f"{tl.traced.params / 1e9:,.3g} B parameters; {est.micro_batches} "
                     f"micro-batch(es) of {lay.micro_batch} × {s:,} tokens per replica")
    out.notes.append("time_ms: the efficiencies were fitted on DLPerf's Megatron-LM runs "
                     "(V100s) together with llm-foundry's FSDP runs (A100 40 / 80 GB); on "
                     "other GPUs they enter through the spec sheet (peaks, bandwidth, SMs) — "
                     "out-of-sample errors in reports/distributed/")
    out.notes.extend(answer_notes(w, tl.finetune, est))
    p, note = _power(est.gpu_flops, est.gpu_bytes, est.gpu_kernels, est.time_ms, device,
                     w.precision, lay.micro_batch or 1, limit_w)
    if p is not None:
        out.power_w = p
        out.energy_j = p * gpus * est.time_ms / 1e3
    out.notes.append(note)
    return _finish(out, device)


#: What ``notes`` say of context parallelism (the assumptions), after "C GPUs per sequence".
CP_ASSUMPTIONS = ("ring attention, Megatron-LM / Transformer Engine's p2p: each GPU holds S/C "
                  "tokens — activations and every layer's work ÷ C; the causal mask balanced "
                  "by two chunks per GPU; per layer C − 1 ring steps pass K and V (and their "
                  "gradients in the backward), each hidden behind 1/C of the attention core, "
                  "the excess exposed (context_parallel_p2p); the weights replicated over the "
                  "D·C GPUs (gradients reduced, ZeRO-sharded over them)")
#: What ``notes`` say of expert parallelism (the assumptions).
EP_ASSUMPTIONS = ("routing assumed uniform with each model's top-k (every GPU receives as many "
                  "token-expert pairs as it sends: no hot expert, no capacity limit, no dropped "
                  "token); per MoE layer two all-to-alls forward (dispatch, combine) and two "
                  "backward of tokens × k × hidden, not overlapped (expert_parallel_alltoall), "
                  "at the gathers' fitted bandwidth share (no all-to-all was profiled); the "
                  "experts' weights, gradients and optimizer state ÷ E, replicated over "
                  "D·C / E GPUs")


def layout_notes(layout: Layout, shape) -> list[str]:
    """What ``notes`` say of a layout's context and expert parallelism (the assumptions)."""
    out = []
    C, E = layout.context, layout.expert
    if C > 1:
        out.append(f"context_parallel: {C} GPUs per sequence — {CP_ASSUMPTIONS}")
    if E > 1:
        out.append(f"expert_parallel: {E} GPUs hold {shape.experts // E} of the "
                   f"{shape.experts} experts of every MoE layer each (top-"
                   f"{shape.experts_per_token or 1}) — {EP_ASSUMPTIONS}")
    return out


def _peak(device, precision: str) -> float | None:
    """The peak MFU is reported against: the 16-bit tensor peak of 16-bit and FP8 training
    (an FP8 run's MFU against the bf16 peak, as torchtitan reports it)."""
    p = {"amp": "fp16", "fp16": "fp16", "bf16": "bf16", "bf16-pure": "bf16",
         "fp8": "bf16"}.get(precision, "fp32")
    v = device.peak_tflops(p)
    return float(v) * 1e12 if v else None


def _data_parallel(w, device, cl, notes, single, limit_w, eff, coll,
                   opts) -> ParallelPrediction:
    """D replicas of a model the transformer path does not cover: the single-GPU step at the
    micro-batch, accumulated, + the exposed gradient all-reduce; ZeRO shards the state."""
    from perfcast.parallel.collectives import shipped

    lay = w.layout
    eff = eff or shipped_efficiency()
    coll = coll or shipped()
    coll = coll if eff.network is None else replace(coll, eta_inter=eff.network, eta_p2p_inter=eff.network)
    per = w.batch_size // lay.data
    choices = [lay.micro_batch] if lay.micro_batch else auto_micro_batches(w.batch_size, lay.data)
    cap = float(device.memory_mb or math.inf)
    overlap = eff.overlap_ddp
    cands = []
    # largest first: memory grows with the micro-batch and throughput never falls with it
    # (perfcast's batch rule), so the largest that fits is the fastest — the search stops there
    for m in sorted(choices, reverse=True):
        if any(c["fits"] for c in cands):
            break
        p1 = single(w.single_device().replace(batch_size=m))
        if p1.time_ms is None:
            raise PerfcastError(f"{w.spec}: no single-GPU time for {device.key}")
        req = getattr(getattr(p1, "route", None), "request", None)
        params = float(req.summary.params) if req is not None else 0.0
        opt = w.train_optimizer or "none"
        # the single-GPU step's bytes a parameter (perfcast.memory.simulate): 16-bit weights
        # and gradients at fp16 / bf16-pure (bf16-pure's optimizer state too); bf16 and fp8
        # are autocast, their weights, gradients and state fp32 (fp8's copies stay whole)
        half = w.precision in ("fp16", "bf16-pure")
        g_b = 2.0 if half else 4.0
        bw = float(device.bandwidth_gbs) * 1e9 * eff.memory
        t_opt = params * STEP_BYTES.get(opt, 0.0) / bw * 1e3
        t_fb = max(p1.time_ms - t_opt, 0.0)
        n_mb = per // m
        kD = group_per_node(lay.data, 1, cl)
        ar = coll.time_ms("all_reduce", params * g_b, lay.data, kD, cl)
        bucket = coll.time_ms("all_reduce", min(BUCKET_BYTES, params * g_b), lay.data, kD, cl)
        exposed = max(bucket, ar - overlap * t_fb * 2 / 3) if lay.data > 1 else 0.0
        shard = lay.data if lay.zero >= 1 else 1
        z3 = 0.0
        if lay.zero == 3:
            ag = coll.time_ms("all_gather", params * 2.0, lay.data, kD, cl)
            z3 = 2 * n_mb * ag * (1 - overlap)
        mem = p1.memory_mb
        if mem is not None and lay.zero:
            state = STATE_BYTES.get(opt, 0.0) * (0.5 if w.precision == "bf16-pure" else 1.0) \
                + (4.0 if w.precision == "fp16" else 0)
            saved = params * state
            if lay.zero >= 2:
                saved += params * g_b
            if lay.zero >= 3:
                saved += params * (2.0 if half else 4.0)
            mem = mem - saved * (1 - 1 / lay.data) / 2**20
        wait = 1 + eff.straggler_ddp * math.sqrt(2 * math.log(lay.data))
        cands.append({"time": n_mb * t_fb * wait + exposed + t_opt / shard + z3, "m": m,
                      "n_mb": n_mb, "p1": p1, "mem": mem,
                      "fits": mem is None or mem <= cap,
                      "breakdown": {"compute": n_mb * t_fb,
                                    "straggler_wait": n_mb * t_fb * (wait - 1),
                                    "data_parallel_allreduce": exposed,
                                    "zero3_allgather": z3, "optimizer": t_opt / shard}})
    fit = [c for c in cands if c["fits"]]
    c = min(fit, key=lambda c: c["time"]) if fit else min(cands, key=lambda c: c["mem"] or 0)
    time, m, n_mb, p1, mem, breakdown = (c["time"], c["m"], c["n_mb"], c["p1"], c["mem"],
                                         c["breakdown"])
    if lay.micro_batch is None:
        tried = sorted(c["m"] for c in cands)
        notes.append(f"micro_batch_size: {m} — the largest that fits (and so the fastest: "
                     f"throughput never falls with the batch) of the powers of two dividing "
                     f"the replica's {per:,} samples and {per:,} itself; tried "
                     f"{', '.join(map(str, tried))}" if c["fits"] else
                     f"micro_batch_size: {m} — none of {', '.join(map(str, tried))} fits; the "
                     f"one needing the least memory")
    out = ParallelPrediction(
        model=w.spec, device=device.key, mode="train", precision=w.precision,
        optimizer=w.train_optimizer, batch_size=w.batch_size, seq_len=w.seq_len, gpus=lay.gpus,
        layout=replace(lay, micro_batch=m).to_dict(), cluster=cl.to_dict(), time_ms=time,
        samples_per_s=w.batch_size / time * 1e3,
        tokens_per_s=(w.batch_size * w.seq_len / time * 1e3) if w.seq_len else None,
        breakdown_ms={k: round(v, 3) for k, v in breakdown.items()}, memory_mb=mem,
        micro_batches=n_mb, notes=notes)
    out.predictor = {"time_ms": (f"single-GPU step ({p1.predictor.get('time_ms', '?')}) × "
                                 f"micro-batches + the exposed gradient all-reduce (α–β, "
                                 f"bucketed overlap) + the ZeRO-sharded optimizer step"),
                     "memory_mb": f"single-GPU peak ({p1.predictor.get('memory_mb', '?')}) "
                                  f"− the state ZeRO shards"}
    out.trained_on = {"time_ms": p1.trained_on.get("time_ms"),
                      "data_parallel": {"overlap_ddp": overlap, **eff.trained_on}}
    out.notes.append(f"data_parallel_allreduce: DDP buckets of 25 MB overlapped with the "
                     f"backward pass at the fitted ω = {overlap:.2f}; straggler_wait: the "
                     f"slowest of {lay.data} replicas (σ = {eff.straggler_ddp:.3f}) — both "
                     f"fitted on DLPerf's PyTorch data-parallel scaling (reports/distributed/)")
    if p1.power_w is not None:
        out.power_w = p1.power_w
        out.energy_j = p1.power_w * lay.gpus * time / 1e3
        out.predictor["energy_j"] = "single-GPU power (perfcast.energy) × GPUs × time_ms"
    out.notes.extend(f"single GPU: {n}" for n in p1.notes if "hypothetical" not in n)
    return _finish(out, device)


__all__ = ["DEFAULT_SEQ_LEN", "ParallelPrediction", "default_seq_len", "TransformerLayouts", "predict_parallel",
           "runtime_overhead_mb"]
