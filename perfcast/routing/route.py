"""The routing policy (see :mod:`perfcast.routing`): shipped or saved predictor, fallback,
support, bounds and energy, target by target."""

from __future__ import annotations

from perfcast.errors import PerfcastError
from perfcast.features.records import TARGETS
from perfcast.workload import Workload
from perfcast.routing.answer import (
    MEMORY_LOWER_BOUND,
    MEMORY_WEIGHTS_BOUND,
    POWER_LIMIT_SLOWDOWN,
    TIME_LOWER_BOUND,
    TIME_MONOTONE,
    TIME_SUPPORT,
    Answer,
    Route,
    _shipped_id,
    looks_like_path,
    memory_floor_mb,
)
from perfcast.routing.request import _Request


def route(workload: Workload, device, *, graph, predictor: str | None = None,
          use_cache: bool = True, sim_job=None, overhead_mb: float | None = None,
          precision_note: str | None = None, threads: int | None = None,
          power_limit_w: float | None = None) -> Route:
    """Answer every target for ``workload`` (batch and precision chosen) on ``device`` (a
    :class:`~perfcast.devices.Device`) from its learning ``graph`` (see the module docstring).
    ``predictor``: a registry name among the shipped models (checked by the caller with
    :func:`check_predictor_name`, before the graph is built) or a saved predictor's directory;
    ``overhead_mb``: GPU runtime overhead added to simulated memory (``None``: measured median);
    ``sim_job``: a :class:`~perfcast.memory.cache.SimulationJob` already running;
    ``threads``: CPU threads (CPU devices; default: the local ``cpu``'s usable cores);
    ``power_limit_w``: the GPU's power limit (W; default its TDP, what the time models are for)
    — energy and, where the limit binds, time are answered at it (:mod:`perfcast.energy`)."""
    notes: list[str] = [precision_note] if precision_note else []
    req = _Request(workload, device, graph, notes, use_cache, sim_job)
    req.threads = _threads_for(device, threads)
    req.power_limit_w = power_limit_w
    user_pred = None
    if predictor and looks_like_path(predictor):
        from perfcast.predictors import load_predictor

        user_pred = load_predictor(predictor)
        devs = user_pred.trained_on_.get("device") or []
        if devs and device.key not in devs:
            notes.append(f"{predictor} was trained on {', '.join(devs)}, not {device.key}")
    overhead, overhead_src, req.overhead_floor_mb = _gpu_overhead(device, overhead_mb)
    answers: dict[str, Answer] = {}
    req.answers = answers
    for target in TARGETS:
        ans = Answer(target)
        answers[target] = ans
        start = len(notes)
        if user_pred is not None and target in user_pred.targets_:
            ans.value = req.run(user_pred, bool(user_pred.trained_on_.get("memsim")), target)
            ans.source, ans.predictor = "user", f"{user_pred.name} ({predictor})"
            ans.trained_on = user_pred.trained_on_
        else:
            _shipped_or_fallback(ans, req, None if user_pred is not None else predictor,
                                 overhead, overhead_src)
        if target == "time_ms" and ans.value is not None:
            _time_bounds(ans, req)
            if user_pred is None and not (predictor and predictor != "roofline"):
                import perfcast.anchors as anchors

                anchors.dominance(ans, req, _time_bounds)
        if target == "memory_mb" and ans.value is not None:
            if ans.source != "simulation":
                _memory_lower_bound(ans, req, overhead)
            _memory_weights_bound(ans, req)
        # this target's notes; why the simulation could not run belongs to memory, whenever
        # the simulation was first asked for
        ans.notes.extend(n for n in notes[start:] if n not in req.memsim_notes)
        if target == "memory_mb":
            ans.notes[:0] = req.memsim_notes
    _domain_note(answers, workload, notes, user_pred is not None)
    limit = None
    if answers["energy_j"].source != "none" and device.is_gpu and device.tdp_w:
        from perfcast.energy import check_power_limit

        limit = check_power_limit(device, power_limit_w)
    return Route(answers=answers, notes=notes, precision_note=precision_note,
                 input_size=list(workload.input_size) if workload.input_size else req.shape,
                 request=req, power_limit_w=limit)


def _threads_for(device, threads: int | None) -> int | None:
    """The thread count a CPU prediction is for: the one asked, else (this machine's ``cpu``)
    its usable cores as the registry detected them (affinity, SMT siblings and cgroup limit
    accounted for); ``None`` for GPUs and other CPUs left unset."""
    if device.is_gpu:
        return None
    if threads is None and device.key == "cpu":
        threads = device.cores
    return threads


def _gpu_overhead(device, overhead_mb: float | None) -> tuple[float, str, float]:
    """``(overhead, where it comes from, floor)`` in MiB: the GPU runtime overhead added to
    simulated memory (the measured runs' median by default, else the given one), and the least
    a GPU answer's memory holds of it — what a memory interval's low bound keeps above the
    weights and inputs (the measured runs' 10th percentile, else the given one); 0 on a CPU."""
    if not device.is_gpu:
        return 0.0, "", 0.0
    if overhead_mb is not None:
        return float(overhead_mb), "given", float(overhead_mb)
    from perfcast.memory.overhead import runtime_overhead

    rec = runtime_overhead()
    return (float(rec["runtime_overhead_mb"]),
            f"median of {rec['runs']} measured runs, {rec['device']}",
            float(rec.get("p10_mb", rec["runtime_overhead_mb"])))


def _shipped_or_fallback(ans: Answer, req: _Request, name: str | None, overhead: float,
                         overhead_src: str) -> None:
    """Steps 2 and 3 of the policy for one target."""
    from perfcast import shipped

    w, dev, target, notes = req.w, req.device, ans.target, req.notes
    desc = f"{dev.key} {w.mode} {w.precision}"
    if name == "roofline" and target != "time_ms":
        name = None  # the roofline answers time only; other targets use the default
    entry = shipped.find(dev.key, w.mode, w.precision, target, predictor=name)
    if entry is None and name and name != "roofline" and dev.is_gpu:
        entry = shipped.find_any_gpu(target, predictor=name)  # e.g. --predictor crossdevice
    if entry is None and name and name != "roofline":
        if shipped.find(dev.key, w.mode, w.precision, target):
            notes.append(f"{target}: no shipped {name!r} model for {desc}; used the default one")
        entry = shipped.find(dev.key, w.mode, w.precision, target)
    if entry is None and name != "roofline" and dev.is_gpu:
        # no model trained on this GPU's own labels: the device-conditioned one (any GPU)
        entry = shipped.find_any_gpu(target)
        if entry is not None:
            notes.append(f"{target}: no labeled data for {desc} — crossdevice: each kernel "
                         f"priced on this GPU's spec, eager PyTorch's dispatch queue, a "
                         f"correction learned from "
                         f"{len(entry.get('trained_on', {}).get('devices', [])) or 'other'} "
                         f"GPUs' measurements (reports/crossdevice/)")
    if entry is not None and entry.get("memsim") and req.memsim() is None:
        alt = [e for e in shipped.manifest() if not e.get("memsim") and
               (e["device"], e["mode"], e["precision"]) == (dev.key, w.mode, w.precision)
               and target in e["targets"]]
        entry = alt[0] if alt else None
    no_answer = None
    if entry is not None and name != "roofline":
        pred = shipped.load_entry(entry)
        if target == "time_ms" and entry["device"] == shipped.ANY_GPU and not name:
            import perfcast.anchors as anchors

            for n in pred.device_notes(dev.key) if hasattr(pred, "device_notes") else ():
                notes.append(f"time_ms: {n}")
            anchored = anchors.anchored(pred, req)
            if anchored is not None:
                pred = anchored
                f = float(anchored.factor(float(w.batch_size)))
                notes.append(f"time_ms: anchored on {', '.join(sorted(anchored.grids))} "
                             f"(GPUs with their own {w.mode} {w.precision} models): the physics "
                             f"base is {f:.2f}× off on them for this model at this batch, "
                             f"applied here (weight {anchored.weight:g}, chosen on held-out "
                             f"GPUs)")
        ans.value = req.run(pred, bool(entry.get("memsim")), target)
        ans.source, ans.predictor, ans.trained_on = "learned", pred.name, pred.trained_on_
        ans.model_id = _shipped_id(entry)
        if not name and (ans.value is None or _gaps(req, pred, entry, target)):
            _next_shipped(ans, req, entry)
        if ans.value is not None:
            return
        no_answer = ans.predictor
        ans.source, ans.predictor, ans.trained_on, ans.model_id = "none", None, None, None
        notes.append(f"{target}: the shipped {no_answer} model gives no finite answer for {desc}, "
                     f"batch {w.batch_size:,} (nor does another shipped model)")
    if target == "time_ms":
        from perfcast.predictors import create_predictor

        rf = create_predictor("roofline")
        rf.fit(req.record(False), targets=["time_ms"])
        ans.value = req.run(rf, False, target)
        ans.source, ans.predictor = "roofline", "roofline"
        if no_answer:
            notes.append("time_ms: roofline estimate instead (Σ max(FLOPs/peak, bytes/bandwidth) "
                         "+ launch overhead; an optimistic bound, typically far below measured "
                         "time)")
        elif name != "roofline":
            notes.append(f"time_ms: no labeled data for {desc} — roofline estimate "
                         f"(Σ max(FLOPs/peak, bytes/bandwidth) + launch overhead; "
                         f"an optimistic bound, typically far below measured time)")
        if ans.value is None:
            notes.append(f"time_ms: the device registry has no peak FLOP/s or bandwidth for "
                         f"{dev.key}")
    elif target == "memory_mb":
        value = req.memsim()
        if value is not None:
            ans.value, ans.source, ans.predictor = value + overhead, "simulation", "simulation"
            if dev.is_gpu:
                from perfcast.uncertainty import SIMULATION_GPU

                ans.model_id = SIMULATION_GPU
            notes.append(
                f"memory_mb: {'no finite learned answer' if no_answer else 'no learned memory model'}"
                f" for {desc} — tensor-memory simulation "
                f"(live tensors)"
                + (f" + {overhead:,.0f} MiB runtime overhead (CUDA context, library "
                   f"workspaces, allocator caching; {overhead_src})" if dev.is_gpu else ""))
        else:
            notes.append(f"memory_mb: no learned memory model for {desc} and no simulation")
    else:  # energy
        _power_model_energy(ans, req)


def _power_model_energy(ans: Answer, req: _Request) -> None:
    """Step 3 for energy: the power model (:mod:`perfcast.energy`) — average board power of a
    step at the power limit from the step's work and its predicted time, bounded to [idle,
    min(limit, TDP)], × the time. Where the limit binds, the time answer grows by the learned
    slowdown (with a note). CPUs: no answer (no CPU energy measurements to learn from)."""
    from perfcast import energy as E
    from perfcast import shipped

    dev, w, notes = req.device, req.w, req.notes
    t = req.answers.get("time_ms")
    if not dev.is_gpu:
        notes.append(f"energy_j: no power model for CPUs ({dev.key}): perfcast has no "
                     f"RAPL-style CPU energy measurements to learn one from")
        return
    if not dev.tdp_w:
        notes.append(f"energy_j: {dev.key} has no TDP in its spec, so no power model answer")
        return
    if t is None or t.value is None:
        notes.append("energy_j: needs a time prediction (energy = power × time)")
        return
    limit = E.check_power_limit(dev, req.power_limit_w)
    try:
        model = shipped.load_shipped("power-model")
    except PerfcastError as exc:
        notes.append(f"energy_j: {exc}")
        return
    flops, moved, kernels = E.step_work(req.cost(), int(w.batch_size), w.mode, w.precision,
                                        w.train_optimizer)
    feats = E.step_features(flops, moved, kernels, t.value / 1e3, dev, w.precision,
                            int(w.batch_size))
    p, slow, p0 = model.step(feats, dev, limit)
    idle, tdp, idle_src = E.power_bounds(dev)
    rng = E.limit_range(dev)
    if slow > 1.0 + 1e-9:
        t0 = t.value
        t.value = t0 * slow
        t.bounds.append(POWER_LIMIT_SLOWDOWN)
        msg = (f"time_ms: at a {limit:,.0f} W power limit the GPU would draw {p0:,.0f} W "
               f"unconstrained, so it clocks down: {t0:,.4g} ms × {slow:.3f} = {t.value:,.4g} "
               f"ms (slowdown learned from the Zeus power-limit traces)")
        notes.append(msg)
        t.notes.append(msg)
    ans.value = E.energy_j(p, 1, t.value / 1e3)
    ans.source, ans.predictor = "learned", "power-model × time_ms"
    ans.trained_on = model.trained_on
    ans.model_id = "power-model"  # a calibration of energy_j intervals keys on this
    req.power_w = p
    notes.append(f"energy_j: power {p:,.0f} W at a {limit:,.0f} W limit "
                 f"({'the default, TDP' if req.power_limit_w is None else 'given'}; "
                 f"{dev.key} accepts {rng.low:,.0f}-{rng.high:,.0f} W) from the power model's "
                 f"graph-step fit (idle + activity × (TDP − idle), the activity logistic in "
                 f"the step's log utilisations of its work over time_ms, intensity and batch; "
                 f"its error in reports/energy/), bounded between idle {idle:,.0f} W "
                 f"({idle_src}) and min(limit, TDP {tdp:,.0f} W); × time_ms")
    notes.append(f"energy_j: {model.note(dev, 'step')}")
    if w.mode != "train" or w.precision != "fp32":
        notes.append(f"energy_j: the graph-step fit's rows are fp32 training steps (Zeus); "
                     f"{w.mode} {w.precision} power is read through the same features (the "
                     f"utilisations against the {w.precision} peak)")


def _gaps(req: _Request, pred, entry: dict, target: str) -> bool:
    """Whether a learned time model gives no finite answer at some batch of
    :data:`BATCH_GRID` (e.g. one trained on a single batch size that cannot scale a standardised
    feature): it then answers no batch, so that one model answers the whole batch range."""
    import numpy as np

    if target != "time_ms" or entry.get("memsim"):
        return False
    # the curve routing reads (a model with a support is read at its home batch only)
    return bool(np.isnan(req.curve(pred, target)[4]).any())


def _next_shipped(ans: Answer, req: _Request, tried: dict) -> None:
    """The default shipped model gave no finite answer for this batch, or none for some batch
    (:func:`_gaps`): the next one listed for the same (device, mode, precision) that answers
    every batch does, with a note. When none does, a finite answer of the first stays."""
    from perfcast import shipped

    dev, w, target = req.device, req.w, ans.target
    first = req.answered_by.get(target)
    for e in shipped.manifest():
        if e is tried or e.get("id") == tried.get("id") or target not in e["targets"] \
                or (e["device"], e["mode"], e["precision"]) != (dev.key, w.mode, w.precision):
            continue
        if e.get("memsim") and req.memsim() is None:
            continue
        pred = shipped.load_entry(e)
        value = req.run(pred, bool(e.get("memsim")), target)
        if value is not None and not _gaps(req, pred, e, target):
            req.notes.append(f"{target}: the shipped {ans.predictor} model gives no finite answer "
                             f"for batch {w.batch_size:,}" if ans.value is None else
                             f"{target}: the shipped {ans.predictor} model gives no finite answer "
                             f"for some batch sizes (it cannot scale the batch)")
            req.notes[-1] += f"; the {pred.name} model answered"
            ans.value, ans.predictor, ans.trained_on = value, pred.name, pred.trained_on_
            ans.model_id = _shipped_id(e)
            return
    if first is not None:
        req.answered_by[target] = first


def _time_bounds(ans: Answer, req: _Request) -> None:
    """Step 4 for time: keep the answer physically possible (see the module docstring).

    The answer was read on :meth:`_Request.curve` (a learned model inside its support, faded to
    the physics base outside it, then the batch rule: time and throughput never fall as the
    batch grows); here that is recorded (``time-support``, ``time-monotone`` with notes) and
    every answer, learned or not, is raised to :meth:`_Request.time_floor` when below it. The
    floor is affine in the batch (work ∝ batch + a per-kernel launch), so the batch rule holds
    for the maximum too.
    """
    import math

    w, notes, b = req.w, req.notes, int(req.w.batch_size)
    v = float(ans.value)
    used = req.answered_by.get(ans.target)
    if used is not None and not used[1] and ans.target == "time_ms":
        wb = getattr(req, "support_weight", None)
        if wb is not None and wb < 1.0 - 1e-9:
            ans.bounds.append(TIME_SUPPORT)
            if wb < 0.5:  # the physics base answered (mostly): say so in the provenance
                base = req.base_predictor()
                ans.predictor, ans.trained_on = base.name, getattr(base, "trained_on_", None)
                ans.model_id = getattr(req, "_base_id", None)
        pre = getattr(req, "curve_pre", float("nan"))
        if math.isfinite(pre) and abs(v / pre - 1.0) > 0.02:
            why = ("a smaller batch's rate: a batch is never slower per sample than one it "
                   "could run as chunks" if v < pre else
                   "a smaller batch's time: time per batch never falls as the batch grows")
            notes.append(f"time_ms: {pre:,.4g} ms → {v:,.4g} ms by the batch rule ({why})")
            ans.bounds.append(TIME_MONOTONE)
    floor = req.time_floor()
    if floor is not None and floor > v and math.isfinite(floor):
        notes.append(f"time_ms: {v:,.4g} ms is below what {req.device.key} can physically do "
                     f"for {w.mode} at batch {b:,} ({w.precision}): ≥ {floor:,.4g} ms (FLOPs ÷ "
                     f"the fastest peak, parameter bytes ÷ bandwidth, one launch per kernel) — "
                     f"raised to that lower bound")
        v = floor
        ans.bounds.append(TIME_LOWER_BOUND)
    ans.value = v


def _memory_lower_bound(ans: Answer, req: _Request, overhead: float) -> None:
    """Step 4: a learned memory answer below the simulated tensors is raised to them. On a GPU
    the learned memory includes the runtime: the simulated tensors + overhead are a lower bound
    (how often it holds: reports/, BENCHMARKS.md) that, unlike a tree model, extrapolates to batches
    beyond the training data. On a CPU the measurements record the live tensors, which the
    simulation reproduces exactly (reports/memory_validation.md): the tensors alone."""
    sim = req.memsim()
    gpu = req.device.is_gpu
    floor = sim + overhead if sim is not None and gpu else sim
    if floor is not None and floor > ans.value:
        ans.value = floor
        ans.bounds.append(MEMORY_LOWER_BOUND)
        req.notes.append("memory_mb: the learned model's answer was below the simulated tensors "
                         + ("+ runtime overhead (a lower bound; " if gpu else
                            "(what the CPU measurements record; ")
                         + "the model does not extrapolate past its training data) — raised to it")


def _memory_weights_bound(ans: Answer, req: _Request) -> None:
    """Step 4: no memory answer below :func:`memory_floor_mb` (weights, gradients, optimizer
    state and inputs of the request)."""
    floor = memory_floor_mb(req.summary, req.w)
    if floor > ans.value:
        what = "weights + gradients + optimizer state + inputs" if req.w.mode == "train" \
            else "weights + inputs"
        req.notes.append(f"memory_mb: {ans.value:,.1f} MiB is below the {what} of batch "
                         f"{req.w.batch_size:,} ({floor:,.1f} MiB, all held at once) — raised "
                         f"to that lower bound")
        ans.value = floor
        ans.bounds.append(MEMORY_WEIGHTS_BOUND)


def _domain_note(answers: dict[str, Answer], workload: Workload, notes: list[str],
                 user: bool) -> None:
    learned = [t for t, a in answers.items() if a.source == "learned"
               and a.predictor != "crossdevice"]  # crossdevice also learned transformers
    kind = workload.model.kind
    if learned and not user and kind not in ("timm", "torchvision"):
        kind = "module" if kind == "nn.Module" else kind
        note = (f"{', '.join(learned)}: the shipped predictors learned from timm / torchvision "
                f"image models; a {kind} model is outside that domain — treat the value as a "
                f"rough estimate")
        notes.append(note)
        for t in learned:
            answers[t].notes.append(note)
