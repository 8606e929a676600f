"""Routing: which predictor answers each target of a request, and which bounds were applied.

For a :class:`~perfcast.workload.Workload` on a :class:`~perfcast.devices.Device`,
:func:`route` returns a :class:`Route` — one :class:`Answer` per target (``time_ms``,
``memory_mb``, ``energy_j``) with its value, its ``source`` and the bounds applied — which
:func:`perfcast.predict` turns into a :class:`~perfcast.api.Prediction` and the decisions read
(instead of parsing notes). The policy, target by target:

1. a predictor the user saved (``predictor=<directory>``) answers what it was trained for;
2. else the shipped model trained on that (device, mode, precision) — the first one the recipe
   lists, or the kind the user named (``predictor="dippm"`` …); one that reads the memory
   simulation is skipped when the simulation cannot run;
3. else a fallback: **time** — the roofline bound (Σ max(FLOPs ÷ peak, bytes ÷ bandwidth) +
   launch overhead; an optimistic bound), **memory** — the tensor-memory simulation (+ the
   measured GPU runtime overhead on a GPU), **energy** — on a GPU the power model of
   :mod:`perfcast.energy` (average power at the power limit, default TDP, × the time; where the
   limit binds the time grows by the learned slowdown, bound ``power-limit-slowdown``); on a
   CPU none;
4. bounds — every answer physically possible; a value that would break one is raised to it, with
   the bound in ``Answer.bounds`` and a note:

   * **time** (:func:`_time_bounds`): a learned time is read on a fixed batch grid
     (:data:`BATCH_GRID`). It is raised to the largest time the model gives a smaller grid batch
     (``time-monotone``: a bigger batch does all the work of a smaller one); beyond the batch
     where a model turns flat (a tree model past its training data) it grows as the model's
     own last trained octaves did (``time-batch-scaling``); and no answer, learned or not, is
     below :func:`~perfcast.predictors.roofline.time_lower_bound_ms` (``time-lower-bound``:
     FLOPs ÷ the precision's fastest peak, parameter bytes ÷ bandwidth, one launch per kernel);
   * **memory**: a learned answer below the simulated tensors is raised to them
     (``memory-lower-bound``) — on a GPU + the runtime overhead (a lower bound that held in
     91.5 % of 3,802 measured runs), on a CPU the tensors alone (the simulation is exactly what
     the CPU measurements record); and no answer is below the weights (+ gradients + optimizer
     state in training) + the input batch (``memory-weights-bound``).

Every value keeps its provenance (``predictor`` / ``trained_on``) and ``notes`` say why a
fallback or bound was used.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.features.records import TARGETS, learning_workload
from perfcast.workload import Workload

#: ``Answer.source`` values: a shipped model, a predictor the user saved, the roofline bound,
#: the tensor-memory simulation, nothing.
SOURCES = ("learned", "user", "roofline", "simulation", "none")
#: ``Answer.bounds`` entry: the value was raised to the simulated tensors (+ runtime overhead on
#: a GPU).
MEMORY_LOWER_BOUND = "memory-lower-bound"
#: ``Answer.bounds`` entry: the value was raised to weights (+ gradients + optimizer state) + inputs.
MEMORY_WEIGHTS_BOUND = "memory-weights-bound"
#: ``Answer.bounds`` entry: the time was raised to the physical lower bound (roofline floor).
TIME_LOWER_BOUND = "time-lower-bound"
#: ``Answer.bounds`` entry: the time was raised to the learned time of a smaller batch.
TIME_MONOTONE = "time-monotone"
#: ``Answer.bounds`` entry: the time was extrapolated past the batch where the model turns flat.
TIME_BATCH_SCALING = "time-batch-scaling"
#: ``Answer.bounds`` entry: the time grew because the power limit binds (:mod:`perfcast.energy`).
POWER_LIMIT_SLOWDOWN = "power-limit-slowdown"
#: Batches a learned time model is read at (:func:`_time_bounds`): every batch to 16, then eight
#: per octave (≈ 9 % apart) to 65,536.
BATCH_GRID: tuple[int, ...] = tuple(sorted({*range(1, 17),
                                            *(round(2 ** (k / 8)) for k in range(33, 129))}))


@dataclass
class Answer:
    """One target's answer: ``value`` (``None`` = nothing could answer), ``source`` (see
    :data:`SOURCES`), ``predictor`` (the name shown to the user), ``trained_on`` (provenance of a
    learned value), ``bounds`` applied and the ``notes`` about this target."""

    target: str
    value: float | None = None
    source: str = "none"
    predictor: str | None = None
    trained_on: dict[str, Any] | None = None
    bounds: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the shipped manifest entry's ``id`` that answered (``None``: a user's or calibrated
    #: model, a fallback) — what :mod:`perfcast.uncertainty` finds the calibration by
    model_id: str | None = None

    @property
    def learned(self) -> bool:
        return self.source in ("learned", "user")


@dataclass
class Route:
    """Answers by target, the precision note (when perfcast chose the precision), the input
    size the graph used, and every note in the order it was made."""

    answers: dict[str, Answer]
    notes: list[str]
    precision_note: str | None = None
    input_size: list[int] | None = None
    #: the GPU power limit the energy (and a limit-bound time) is for (W; ``None``: no energy)
    power_limit_w: float | None = None
    #: the routed request (graph summary, floors) — what :func:`perfcast.uncertainty.annotate`
    #: reads for the OOD score; not serialised
    request: Any = field(default=None, repr=False, compare=False)


def shipped_precision(device: str, mode: str) -> tuple[str, str | None]:
    """``(precision, note)`` when the user gives none: the precision perfcast has measurements
    for on that device and mode when there is exactly one (e.g. ``amp`` for the RTX 3090
    training data), else ``fp32``; the note says which was used (``None``: nothing measured)."""
    from perfcast.training import shipped

    measured = sorted({e["precision"] for e in shipped.manifest()
                       if (e["device"], e["mode"]) == (device, mode)})
    precision = measured[0] if len(measured) == 1 else "fp32"
    note = None
    if measured:
        note = (f"precision: {precision} (what the {device} {mode} measurements used"
                f"{'; measured: ' + ', '.join(measured) if len(measured) > 1 else ''}; "
                f"pass --precision to choose)")
    return precision, note


def simulation_applies(workload: Workload) -> bool:
    """The tensor-memory simulation runs from PyTorch model specs (not ONNX, not other
    frameworks' models, not in-process modules)."""
    return workload.model.framework == "pytorch" and workload.model.kind != "nn.Module"


def graph_workload(workload: Workload) -> Workload:
    """The learning workload whose graph the predictors read (an in-process module keeps the
    batch of its example inputs; the static features rescale)."""
    lw = learning_workload(workload)
    if workload.model.example_inputs is not None:
        lw = lw.replace(batch_size=None)
    return lw


#: Learned answers on :data:`BATCH_GRID`: per predictor (held weakly: a saved predictor loaded
#: for one request goes with it), by (target, request with the batch aside, device, threads).
_GRID_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_GRID_INDEX = {b: i for i, b in enumerate(BATCH_GRID)}


class _Request:
    """What one routing needs, built lazily: the graph's summary and PyG data, the simulation,
    one-record feature sets."""

    def __init__(self, workload: Workload, device, graph, notes: list[str], use_cache: bool,
                 sim_job) -> None:
        from perfcast.features.records import GraphSummary

        self.w, self.device, self.graph, self.notes = workload, device, graph, notes
        self.use_cache, self.sim_job = use_cache, sim_job
        self.summary = GraphSummary.of(graph)
        self.shape = list(graph.meta.input_shapes[0][1:]) if graph.meta.input_shapes else None
        self._data = None
        self._plan: list | None = None
        self._memsim: list[float | None] = []
        self._cost = None
        self.threads: int | None = None
        self.memsim_notes: list[str] = []
        self.power_limit_w: float | None = None
        self.power_w: float | None = None
        self.answers: dict[str, Answer] = {}
        #: the predictor that answered each learned target and whether it read the simulation
        self.answered_by: dict[str, tuple[Any, bool]] = {}

    def data(self):
        if self._data is None:
            from perfcast.features.records import graph_data

            self._data = graph_data(self.graph)
        return self._data

    def memsim_workload(self) -> Workload:
        """The simulated workload: the request's, with the graph's input size when none was
        given (image and tensor models)."""
        w = self.w
        if w.input_size is None and w.model.inputs in ("image", "tensor") and self.shape:
            w = w.replace(input_size=tuple(self.shape))
        return w

    def memsim(self) -> float | None:
        """Simulated tensor peak (MiB) of the request, ``None`` (with a note) when it cannot run."""
        if not self._memsim:
            self._memsim.append(None)
            if not simulation_applies(self.w):
                self._note("tensor-memory simulation needs a PyTorch model spec (not available "
                           "for ONNX files, other frameworks' models or in-process modules)")
            else:
                try:
                    self._memsim[0] = self._simulate(self.memsim_workload())
                except PerfcastError as exc:
                    self._note(f"tensor-memory simulation failed: {exc}")
        return self._memsim[0]

    def _note(self, text: str) -> None:
        self.notes.append(text)
        self.memsim_notes.append(text)

    def _simulate(self, w: Workload) -> float | None:
        from perfcast.memory.cache import MemsimCache

        cache = MemsimCache() if self.use_cache else None
        if cache is not None and cache.contains(w):
            return cache.get(w)
        if self.sim_job is not None and self.sim_job.workload == w:
            value = self.sim_job.result()
            if cache is not None:
                cache.put(w, value)
            return value
        return cache.get(w, strict=True) if cache is not None else MemsimCache.simulate(w)

    def plan(self):
        """The request's :class:`~perfcast.features.kernels.KernelPlan` (forward graphs at batch
        2 and 3, from the graph cache), ``None`` when the model's graph changes structure with
        the batch or the model takes no batch of 2 or 3 (an ONNX file with a fixed batch)."""
        if self._plan is None:
            from perfcast.cache import get_graph
            from perfcast.features.kernels import KernelPlan
            from perfcast.features.records import plan_workloads

            try:
                g2, g3 = (get_graph(pw, use_cache=self.use_cache)
                          for pw in plan_workloads(graph_workload(self.w)))
                self._plan = [KernelPlan.from_graphs(g2, g3)]
            except PerfcastError:
                self._plan = [None]
        return self._plan[0]

    def plan_key(self) -> str | None:
        """The cache key of the request's kernel plan (its graph workload at batch 1), ``None``
        for an in-process model."""
        if not hasattr(self, "_plan_key"):
            try:
                self._plan_key = graph_workload(self.w).replace(batch_size=1).key()
            except PerfcastError:
                self._plan_key = None
        return self._plan_key

    def record(self, with_memsim: bool, need_graph: bool = True, need_plan: bool = False,
               batches: list[int] | None = None):
        """A one-record :class:`~perfcast.features.records.FeatureSet` of the request — or, with
        ``batches`` (no simulation), one record per batch of the same request."""
        import numpy as np
        import pandas as pd

        from perfcast.features.records import FeatureSet, static_features

        mem = self.memsim() if with_memsim else None
        w = self.w
        ws = [w] if batches is None else [w.replace(batch_size=int(b)) for b in batches]
        st = np.stack([static_features(self.summary, x, mem) for x in ws])
        rows = pd.DataFrame([{"model": w.spec, "family": "", "device": self.device.key,
                              "mode": w.mode, "precision": w.precision,
                              "batch_size": x.batch_size, "optimizer": w.train_optimizer,
                              "threads": self.threads, "tf32": w.tf32} for x in ws])
        if need_plan and self.plan_key() is not None:
            rows["graph_key"] = self.plan_key()  # compositions are memoised by it
        n = len(ws)
        return FeatureSet(rows=rows, static=st, graph_index=np.zeros(n, np.int64),
                          graphs=[self.data() if need_graph else None],
                          y=np.full((n, len(TARGETS)), np.nan), summaries=[self.summary],
                          plans=[self.plan()] if need_plan else [])

    def cost(self):
        """The graph's :class:`~perfcast.predictors.roofline.GraphCost` (the bounds read it)."""
        if self._cost is None:
            from perfcast.predictors.roofline import GraphCost

            self._cost = GraphCost.of_graph(self.graph, self.summary)  # no torch
        return self._cost

    def time_floor(self) -> float | None:
        """The request's physical time lower bound (ms), ``None`` when unknown."""
        import math

        from perfcast.predictors.roofline import time_lower_bound_ms

        try:
            v = time_lower_bound_ms(self.cost(), int(self.w.batch_size), self.w.mode,
                                    self.w.precision, self.device,
                                    optimizer=self.w.train_optimizer, threads=self.threads)
        except PerfcastError:
            return None
        return v if math.isfinite(v) and v > 0 else None

    def memory_floor(self) -> float:
        """The request's memory lower bound (MiB): :func:`memory_floor_mb`, or the simulated live
        tensors when the simulation already ran for this request (they must all exist)."""
        sim = self._memsim[0] if self._memsim else None
        return max(memory_floor_mb(self.summary, self.w), float(sim or 0.0))

    def grid(self, pred, target: str):
        """``(batches, values)``: ``pred``'s answers for this request at every
        :data:`BATCH_GRID` batch (NaN where it gives none), cached per process by predictor,
        request (batch aside), device and threads."""
        import numpy as np

        batches = np.asarray(BATCH_GRID, dtype=np.float64)
        mine = _GRID_CACHE.setdefault(pred, {})
        key = (target, self.w.replace(batch_size=1), self.device.key, self.threads)
        try:
            hit = mine.get(key)
        except TypeError:  # an unhashable in-process module
            key, hit = None, None
        if hit is not None:
            return batches, hit
        rec = self.record(False, pred.uses_graphs, pred.uses_plans, batches=list(BATCH_GRID))
        with np.errstate(all="ignore"):  # a model that cannot scale the batch overflows: NaN
            v = np.asarray(pred.predict(rec)[:, pred.targets_.index(target)], dtype=np.float64)
            v = np.where(np.isfinite(v) & (v > 0), v, np.nan)
        if key is not None:
            if len(mine) >= 512:
                mine.pop(next(iter(mine)))
            mine[key] = v
        return batches, v

    def run(self, pred, with_memsim: bool, target: str) -> float | None:
        import numpy as np

        self.answered_by[target] = (pred, with_memsim)
        rec = self.record(with_memsim, pred.uses_graphs, pred.uses_plans)
        if target == "time_ms" and not with_memsim and getattr(pred, "learns", True) \
                and self.w.batch_size in _GRID_INDEX:
            # the batch grid the bounds read anyway holds this answer (same records, one call)
            v = float(self.grid(pred, target)[1][_GRID_INDEX[self.w.batch_size]])
        else:
            with np.errstate(all="ignore"):  # non-finite answers are dropped below
                v = float(pred.predict(rec)[0, pred.targets_.index(target)])
        if hasattr(pred, "out_of_range"):  # a physics-based model says when it extrapolates
            why = pred.out_of_range(rec)[0]
            if why:
                self.notes.append(f"{target}: outside the {pred.name} model's training range "
                                  f"({why}) — extrapolated by its physics (kernel work at "
                                  f"learned efficiencies), less certain")
            if self.threads:
                self.notes.append(f"{target}: for {self.threads} CPU thread(s) (--threads)")
        return v if np.isfinite(v) and v > 0 else None


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
    overhead, overhead_src = _gpu_overhead(device, overhead_mb)
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


def _gpu_overhead(device, overhead_mb: float | None) -> tuple[float, str]:
    if not device.is_gpu:
        return 0.0, ""
    from perfcast.memory.overhead import runtime_overhead

    rec = runtime_overhead()
    if overhead_mb is None:
        return float(rec["runtime_overhead_mb"]), (f"median of {rec['runs']} measured runs, "
                                                   f"{rec['device']}")
    return float(overhead_mb), "given"


def _shipped_or_fallback(ans: Answer, req: _Request, name: str | None, overhead: float,
                         overhead_src: str) -> None:
    """Steps 2 and 3 of the policy for one target."""
    from perfcast.training import shipped

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
        model = E.load_power_model()
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
                 f"{dev.key} accepts {rng.low:,.0f}-{rng.high:,.0f} W) from the power model "
                 f"trained on the Zeus traces (4 GPUs, 6 training workloads; its error is in "
                 f"reports/energy/), bounded between idle {idle:,.0f} W ({idle_src}) and "
                 f"min(limit, TDP {tdp:,.0f} W); × time_ms")
    if w.mode != "train" or w.precision != "fp32":
        notes.append(f"energy_j: the Zeus traces are fp32 training runs; {w.mode} "
                     f"{w.precision} power is extrapolated through the same utilisation "
                     f"features")


def _shipped_id(entry: dict) -> str | None:
    """The id of a shipped manifest entry (``None`` for a user's calibrated model: the shipped
    calibration is not about it)."""
    return None if entry.get("root") else entry.get("id")


def _gaps(req: _Request, pred, entry: dict, target: str) -> bool:
    """Whether a learned time model gives no finite answer at some batch of
    :data:`BATCH_GRID` (e.g. one trained on a single batch size that cannot scale a standardised
    feature): it then answers no batch, so that one model answers the whole batch range."""
    import numpy as np

    if target != "time_ms" or entry.get("memsim"):
        return False
    return bool(np.isnan(req.grid(pred, target)[1]).any())


def _next_shipped(ans: Answer, req: _Request, tried: dict) -> None:
    """The default shipped model gave no finite answer for this batch, or none for some batch
    (:func:`_gaps`): the next one listed for the same (device, mode, precision) that answers
    every batch does, with a note. When none does, a finite answer of the first stays."""
    from perfcast.training import shipped

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

    A learned model (not one reading the memory simulation, which is per batch) is read on
    :data:`BATCH_GRID`; with ``L`` its answers:

    * **monotone** — the answer at batch ``b`` is at least ``max L(g)`` over grid batches
      ``g < b``: a batch of ``b`` samples does all the work of one of ``g``. Grid points are
      every batch to 16, then ≈ 9 % apart, so between two batches only the model's own
      variation within one grid step remains (its noise);
    * **flat tail** — a tree model is constant past its last split (for the shipped ones: where
      the batch's FLOPs exceed the largest measured model's), so its per-sample time would
      fall as 1/b for ever. Past the grid batch ``B`` where ``L`` turns constant the answer is
      at least ``L(B)·(b/B)^s``, ``s`` the steepest log-time / log-batch slope of the two
      octaves below ``B`` (clipped to [0, 1]). From the launch-bound regime (slope ≈ 0) to the
      saturated one (slope 1) that slope only grows with the batch, so continuing the last
      measured one is the lowest scaling consistent with the model's own data (``s = 1``:
      linear once the device is saturated);
    * **physical floor** — every answer (learned, user or roofline) is at least
      :meth:`_Request.time_floor`. It grows linearly with the batch, so the three together
      never decrease with the batch.
    """
    import math

    import numpy as np

    w, notes, b = req.w, req.notes, int(req.w.batch_size)
    v = float(ans.value)
    used = req.answered_by.get(ans.target)
    if ans.learned and used is not None and not used[1]:
        pred = used[0]
        batches, L = req.grid(pred, ans.target)
        below = (batches < b) & np.isfinite(L)
        if below.any():
            i = int(np.nanargmax(np.where(below, L, np.nan)))
            if L[i] > v:
                notes.append(f"time_ms: the {ans.predictor} model answers {v:,.4g} ms for batch "
                             f"{b:,} but {L[i]:,.4g} ms for the smaller batch {int(batches[i]):,} — "
                             f"raised to it (a bigger batch does all the work of a smaller one)")
                v = float(L[i])
                ans.bounds.append(TIME_MONOTONE)
        tail = _flat_tail(batches, L)
        if tail is not None and b > tail[0]:
            B, LB, slope = tail
            x = LB * (b / B) ** slope
            if x > v * (1 + 1e-9):
                notes.append(f"time_ms: the {ans.predictor} model is flat from batch {int(B):,} "
                             f"(past its training data) — extrapolated as {LB:,.4g} ms × "
                             f"({b:,}/{int(B):,})^{slope:.2f}, the slope of its last trained "
                             f"octaves: {x:,.4g} ms")
                v = x
                ans.bounds.append(TIME_BATCH_SCALING)
    floor = req.time_floor()
    if floor is not None and floor > v and math.isfinite(floor):
        notes.append(f"time_ms: {v:,.4g} ms is below what {req.device.key} can physically do "
                     f"for {w.mode} at batch {b:,} ({w.precision}): ≥ {floor:,.4g} ms (FLOPs ÷ "
                     f"the fastest peak, parameter bytes ÷ bandwidth, one launch per kernel) — "
                     f"raised to that lower bound")
        v = floor
        ans.bounds.append(TIME_LOWER_BOUND)
    ans.value = v


def _flat_tail(batches, L) -> tuple[float, float, float] | None:
    """``(B, L(B), slope)`` when the grid answers ``L`` are constant from grid batch ``B`` to
    the end of the grid (and vary before it), else ``None``; ``slope`` is the steepest
    log-log slope of the two octaves below ``B``, clipped to [0, 1] (0 without octaves)."""
    import numpy as np

    n = len(L)
    if n < 2 or not np.isfinite(L[-1]):
        return None
    last = float(L[-1])
    j = n - 1
    while j > 0 and np.isfinite(L[j - 1]) and abs(L[j - 1] - last) <= 1e-9 * last:
        j -= 1
    if j >= n - 1:
        return None
    B = float(batches[j])
    ok = np.isfinite(L)
    lb, ll = np.log(batches[ok]), np.log(L[ok])
    slopes = []
    for hi in (B, B / 2):
        lo = hi / 2
        if lo >= batches[0]:
            slopes.append((np.interp(np.log(hi), lb, ll) - np.interp(np.log(lo), lb, ll))
                          / np.log(2.0))
    slope = float(np.clip(max(slopes, default=0.0), 0.0, 1.0))
    return B, last, slope


def _memory_lower_bound(ans: Answer, req: _Request, overhead: float) -> None:
    """Step 4: a learned memory answer below the simulated tensors is raised to them. On a GPU
    the learned memory includes the runtime: the simulated tensors + overhead are a lower bound
    (held in 91.5 % of 3,802 GPUMemNet runs) that, unlike a tree model, extrapolates to batches
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


def memory_floor_mb(summary, workload: Workload) -> float:
    """The least memory (MiB) a run of ``workload`` holds: its weights (+ a gradient and the
    optimizer's states per parameter in training) and its input batch — all alive at once.
    Bytes per element: 2 for fp16 / bf16 (weights, states and inputs), else 4 (amp keeps fp32
    weights; token ids are counted at 4 bytes, the least an id takes)."""
    from perfcast.predictors.roofline import DEFAULT_OPTIMIZER, OPTIMIZER_STATES

    half = workload.precision in ("fp16", "bf16")
    e = 2.0 if half else 4.0
    total = float(summary.param_bytes) * (0.5 if half else 1.0)
    if workload.mode == "train":
        opt = workload.train_optimizer
        states = OPTIMIZER_STATES.get(opt if opt in OPTIMIZER_STATES else DEFAULT_OPTIMIZER, 1)
        total += float(summary.params) * e * (1 + states)
    k = float(workload.batch_size or 1) / max(1, summary.batch)
    total += float(summary.input_elements) * k * e
    return total / 2**20


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


def check_predictor_name(name: str) -> None:
    """A ``--predictor`` registry name must exist (a known name without a shipped model for the
    device is answered with the default model and a note; an unknown one is an error)."""
    import difflib

    from perfcast.predictors import list_predictors

    names = [n for n in list_predictors() if not n.startswith("test-")]
    if name not in names:
        near = difflib.get_close_matches(name, names, n=1)
        raise PerfcastError(f"unknown predictor {name!r}"
                            + (f" — did you mean {near[0]!r}?" if near else "")
                            + f" (predictors: {', '.join(names)}; or a saved predictor's "
                              f"directory)")


def looks_like_path(text: str) -> bool:
    """Whether a ``--predictor`` value names a directory rather than a registry name."""
    return os.sep in text or text.startswith(".") or os.path.isdir(text)


__all__ = [
    "BATCH_GRID",
    "MEMORY_LOWER_BOUND",
    "MEMORY_WEIGHTS_BOUND",
    "POWER_LIMIT_SLOWDOWN",
    "SOURCES",
    "TIME_BATCH_SCALING",
    "TIME_LOWER_BOUND",
    "TIME_MONOTONE",
    "Answer",
    "Route",
    "check_predictor_name",
    "graph_workload",
    "looks_like_path",
    "memory_floor_mb",
    "route",
    "shipped_precision",
    "simulation_applies",
]
