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
4. support — a learned time model answers only inside the batches and model sizes it was
   fitted on (:mod:`perfcast.predictors.support`); outside them its log residual over the
   physics base on the same device (:meth:`_Request.base_predictor`: ``crossdevice`` on a GPU,
   ``kernelsum`` on this CPU, else the roofline) fades to zero (``time-support``), and the notes
   say which answer was used and why;
5. bounds — every answer physically possible; a value that would break one is raised to it, with
   the bound in ``Answer.bounds`` and a note:

   * **time**: every time answer is read on a curve over :data:`BATCH_GRID`
     (:meth:`_Request.curve`) put through the **batch rule** (:func:`monotone_curve`): time per
     batch never falls and throughput never falls as the batch grows — the closest such curve
     in log time (``time-monotone`` when that moved the answer); and no answer, learned or
     not, is below :func:`~perfcast.predictors.roofline.time_lower_bound_ms`
     (``time-lower-bound``: FLOPs ÷ the precision's fastest peak, parameter bytes ÷ bandwidth,
     one launch per kernel);
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
#: ``Answer.bounds`` entry: the time was read through the batch rule (time and throughput never
#: fall as the batch grows; :func:`monotone_curve`).
TIME_MONOTONE = "time-monotone"
#: ``Answer.bounds`` entry: the request lies outside the learned model's training data
#: (:mod:`perfcast.predictors.support`): the physics base answered, wholly or blended in.
TIME_SUPPORT = "time-support"
#: ``Answer.bounds`` entry: the time grew because the power limit binds (:mod:`perfcast.energy`).
POWER_LIMIT_SLOWDOWN = "power-limit-slowdown"
#: Batches a time answer is read on (:meth:`_Request.curve`): the powers of two and three times
#: them, 1 … 65,536 — every batch the public benchmarks measured but a handful; answers between
#: two of them are interpolated in log-log, so they keep the batch rule.
BATCH_GRID: tuple[int, ...] = tuple(sorted({*(2 ** k for k in range(17)),
                                            *(3 * 2 ** k for k in range(15))}))


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
    from perfcast import shipped

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
#: :meth:`_Request.curve` results, keyed as :data:`_GRID_CACHE`.
_CURVE_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _pava(y, w):
    """Weighted isotonic (non-decreasing) regression of ``y`` (pool-adjacent-violators)."""
    import numpy as np

    vals, wts, cnt = [], [], []
    for yi, wi in zip(y, w):
        vals.append(float(yi))
        wts.append(float(wi))
        cnt.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            tw = wts[-2] + wts[-1]
            v = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / tw
            c = cnt[-2] + cnt[-1]
            vals[-2:], wts[-2:], cnt[-2:] = [v], [tw], [c]
    return np.repeat(vals, cnt)


def monotone_curve(batches, values, weights=None, iterations: int = 200):
    """The batch rule on a curve of times over ascending ``batches``: the closest curve (least
    squares in log time, ``weights`` per point) along which **time per batch never falls and
    throughput never falls** as the batch grows — ``log t`` non-decreasing and ``log t − log b``
    non-increasing (Dykstra's alternating projections onto the two isotonic sets). NaN points
    are left out and filled by interpolation. A curve that already obeys the rule is returned
    unchanged."""
    import numpy as np

    b = np.asarray(batches, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v) & (v > 0)
    if ok.sum() < 2:
        return v.copy()
    x, y = np.log(b[ok]), np.log(v[ok])
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=np.float64)[ok]
    z = y.copy()
    if not (np.all(np.diff(z) >= -1e-12) and np.all(np.diff(z - x) <= 1e-12)):
        p = np.zeros_like(z)
        q = np.zeros_like(z)
        for _ in range(iterations):
            a = _pava(z + p, w)
            p = z + p - a
            c = x - _pava(-(a + q - x), w)
            q = a + q - c
            if np.max(np.abs(c - z)) < 1e-10:
                z = c
                break
            z = c
        # the last projection is onto the throughput set; clean round-off in the time set
        z = np.maximum.accumulate(z)
        z = np.minimum(z, np.minimum.accumulate(z - x) + x)
    out = np.full_like(v, np.nan)
    out[ok] = np.where(np.abs(z - y) <= 1e-12, v[ok], np.exp(z))  # unmoved points exactly
    if not ok.all():
        out[~ok] = np.exp(np.interp(np.log(b[~ok]), x, z))
    return out


def curve_at(batches, values, batch: float) -> float:
    """A curve of :func:`monotone_curve` at ``batch``: log-log interpolation between its points
    (so the batch rule holds between them), linear in the batch beyond the last."""
    import math

    import numpy as np

    b = np.asarray(batches, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v) & (v > 0)
    if not ok.any():
        return float("nan")
    hit = np.flatnonzero(ok & (b == float(batch)))
    if len(hit):  # a grid batch: its value exactly
        return float(v[hit[0]])
    x, y = np.log(b[ok]), np.log(v[ok])
    lb = math.log(max(float(batch), 1.0))
    if lb >= x[-1]:
        return float(math.exp(y[-1] + (lb - x[-1])))
    if lb <= x[0]:
        return float(math.exp(y[0]))
    return float(math.exp(np.interp(lb, x, y)))


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
        """The graph's matrices as numpy arrays (:class:`~perfcast.features.records.
        GraphArrays`: no torch to answer)."""
        if self._data is None:
            from perfcast.features.records import graph_arrays

            self._data = graph_arrays(self.graph)
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
        ``batches`` (no simulation), one record per batch of the same request. Its rows are a
        light :class:`~perfcast.features.table.Table` (no pandas to answer)."""
        import numpy as np

        from perfcast.features.records import FeatureSet, static_features
        from perfcast.features.table import Table

        mem = self.memsim() if with_memsim else None
        w = self.w
        ws = [w] if batches is None else [w.replace(batch_size=int(b)) for b in batches]
        st = np.stack([static_features(self.summary, x, mem) for x in ws])
        rows = Table.from_records([{"model": w.spec, "family": "", "device": self.device.key,
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

    def base_predictor(self):
        """The physics base on this device — what a learned model fades to outside its
        training data: ``crossdevice`` on a GPU (each kernel priced on the spec, not anchored),
        the shipped ``kernelsum`` on this machine's CPU, else the roofline; ``None`` when none
        answers time here."""
        if not hasattr(self, "_base"):
            from perfcast import shipped

            dev, w = self.device, self.w
            entry = shipped.find_any_gpu("time_ms") if dev.is_gpu else shipped.find(
                dev.key, w.mode, w.precision, "time_ms", predictor="kernelsum")
            if entry is not None and entry.get("memsim"):
                entry = None
            self._base_id = None
            if entry is not None:
                self._base = shipped.load_entry(entry)
                self._base_id = _shipped_id(entry)
            else:
                from perfcast.predictors import create_predictor

                rf = create_predictor("roofline")
                rf.fit(self.record(False, need_graph=False), targets=["time_ms"])
                self._base = rf
        return self._base

    def curve(self, pred, target: str = "time_ms"):
        """``pred``'s time answers on :data:`BATCH_GRID` as routing gives them: a learned model
        that does not extrapolate by physics (:attr:`~perfcast.predictors.base.Predictor.
        extrapolates`) keeps its log residual over the physics base (:meth:`base_predictor`)
        only inside its training data, fading outside (:mod:`perfcast.predictors.support`);
        then the batch rule (:func:`monotone_curve`). Returns ``(batches, values, support
        weights or None, raw learned values, values before the batch rule, the home batch's
        index or None)``; cached per predictor and request (batch aside)."""
        import numpy as np

        mine = _CURVE_CACHE.setdefault(pred, {})
        key = (target, self.w.replace(batch_size=1), self.device.key, self.threads)
        try:
            hit = mine.get(key)
        except TypeError:  # an unhashable in-process module
            key, hit = None, None
        if hit is not None:
            return hit
        batches, L = self.grid(pred, target)
        weights, home = None, None
        C = L
        support = None if getattr(pred, "extrapolates", False) else \
            getattr(pred, "support_", None)
        if support is not None:
            base = self.base_predictor()
            B = self.grid(base, target)[1] if base is not None and base is not pred else None
            if B is not None:
                from perfcast.predictors.support import size_of

                home, weights = support.home(batches, size_of(self.summary), self.w.mode,
                                             self.w.precision, self.w.model.kind)
                with np.errstate(all="ignore"):
                    rho = float(np.log(L[home] / B[home])) if home is not None else 0.0
                if not np.isfinite(rho):
                    rho, weights = 0.0, np.zeros_like(weights)
                C = np.where(np.isfinite(B), B * np.exp(weights * rho), L)
        P = monotone_curve(batches, C, None if weights is None else 1.0 + 9.0 * weights)
        out = (batches, P, weights, L, C, home)
        if key is not None:
            if len(mine) >= 512:
                mine.pop(next(iter(mine)))
            mine[key] = out
        return out

    def run(self, pred, with_memsim: bool, target: str) -> float | None:
        import numpy as np

        self.answered_by[target] = (pred, with_memsim)
        if target == "time_ms" and not with_memsim and (getattr(pred, "learns", True)
                                                         or getattr(pred, "extrapolates", False)):
            v = self._curve_value(pred)
        else:
            rec = self.record(with_memsim, pred.uses_graphs, pred.uses_plans)
            with np.errstate(all="ignore"):  # non-finite answers are dropped below
                v = float(pred.predict(rec)[0, pred.targets_.index(target)])
        if hasattr(pred, "out_of_range"):  # a physics-based model says when it extrapolates
            rec = self.record(with_memsim, pred.uses_graphs, pred.uses_plans)
            why = pred.out_of_range(rec)[0]
            if why:
                self.notes.append(f"{target}: outside the {pred.name} model's training range "
                                  f"({why}) — extrapolated by its physics (kernel work at "
                                  f"learned efficiencies), less certain")
            if self.threads:
                self.notes.append(f"{target}: for {self.threads} CPU thread(s) (--threads)")
        return v if np.isfinite(v) and v > 0 else None

    def _curve_value(self, pred) -> float:
        """The time at the request's batch on :meth:`curve` (log-log interpolation between grid
        batches; beyond the grid, linear in the batch), with the notes saying which answer was
        used and why."""
        import math

        import numpy as np

        batches, P, weights, L, C, home = self.curve(pred)
        b = float(self.w.batch_size)
        v = float(curve_at(batches, P, b))
        with np.errstate(all="ignore"):
            self.curve_pre = float(curve_at(batches, C, b))
        self.support_weight = None
        if weights is None or not math.isfinite(v):
            return v
        wb = float(np.interp(math.log(b), np.log(batches), weights)) if b <= batches[-1] \
            else 0.0
        self.support_weight = wb
        from perfcast.predictors.support import size_of

        sup = pred.support_
        size = size_of(self.summary)
        base = self.base_predictor()
        where = (f"the {self.device.key} {self.w.mode} {self.w.precision} records the "
                 f"{pred.name} model learned from ({sup.describe()})")
        physics = (f"the physics base answers ({base.name} on {self.device.key}: kernels "
                   f"priced on the spec, not the learned model)")
        if not sup.covers(self.w.mode, self.w.precision, self.w.model.kind):
            self.notes.append(f"time_ms: {where} include no {self.w.model.kind} model in "
                              f"{self.w.mode} {self.w.precision} — {physics}")
            return v
        if home is None:
            near_b, near_m = sup.nearest(b, size)
            d = float(sup.distance([b], size)[0])
            self.notes.append(f"time_ms: no batch of this model ({size[0] / 1e9:,.3g} GMACs per "
                              f"sample) comes within reach of {where} — the nearest record "
                              f"(batch {near_b:,} at {near_m / 1e9:,.3g} GMACs) is {d:.1f} "
                              f"octaves away, outside its support, so {physics}")
            return v
        hb = int(batches[home])
        near_b, near_m = sup.nearest(hb, size)
        d = float(sup.distance([hb], size)[0])
        at = (f"the {pred.name} model's answer at batch {hb:,} (the batch nearest its records: "
              f"batch {near_b:,} at {near_m / 1e9:,.3g} GMACs per sample, {d:.1f} octave(s) "
              f"away)")
        if wb >= 1.0 - 1e-9:
            self.notes.append(f"time_ms: inside {where}: "
                              + (f"{at}" if int(b) == hb else
                                 f"{at}, carried to batch {int(b):,} along the physics base's "
                                 f"batch scaling ({base.name})"))
        elif wb <= 1e-9:
            self.notes.append(f"time_ms: batch {int(b):,} is too far from {where} — its nearest "
                              f"is {at}; outside its support, so {physics}")
        else:
            self.notes.append(f"time_ms: batch {int(b):,} lies beyond {where}: {at}, its "
                              f"departure from the physics base ({base.name}) carried here at "
                              f"weight {wb:.2f}")
        return v


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
            notes.append(f"time_ms: {pre:,.4g} ms → {v:,.4g} ms by the batch rule (time per "
                         f"batch and throughput never fall as the batch grows: the closest "
                         f"such curve over batches 1–65,536 in log time)")
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
    "TIME_SUPPORT",
    "TIME_LOWER_BOUND",
    "TIME_MONOTONE",
    "Answer",
    "Route",
    "check_predictor_name",
    "curve_at",
    "graph_workload",
    "looks_like_path",
    "memory_floor_mb",
    "monotone_curve",
    "route",
    "shipped_precision",
    "simulation_applies",
]
