"""One routed request: its workload, device, graph and plan; the learned answers on the batch
grid and the physics base each falls back to outside its support."""

from __future__ import annotations

from typing import Any

from perfcast.errors import PerfcastError
from perfcast.features.records import TARGETS
from perfcast.workload import Workload
from perfcast.routing.answer import (
    BATCH_GRID,
    Answer,
    _shipped_id,
    graph_workload,
    memory_floor_mb,
    simulation_applies,
)
from perfcast.routing.curve import _CURVE_CACHE, _GRID_CACHE, curve_at, monotone_curve


#: Answers kept per predictor in :data:`_GRID_CACHE` / :data:`_CURVE_CACHE` (oldest dropped).
_MEMO_SIZE = 512


def _memo_get(cache, pred, key):
    """``pred``'s entry ``key`` in a per-predictor cache, or ``None`` (also for a key that
    cannot be hashed: an in-process module's request is not cached)."""
    try:
        return cache.setdefault(pred, {}).get(key)
    except TypeError:
        return None


def _memo_put(cache, pred, key, value) -> None:
    mine = cache.setdefault(pred, {})
    try:
        if key not in mine and len(mine) >= _MEMO_SIZE:
            mine.pop(next(iter(mine)))
        mine[key] = value
    except TypeError:  # an unhashable in-process module: not cached
        pass


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

    def grid(self, pred, target: str, only=None):
        """``(batches, values)``: ``pred``'s answers for this request at every
        :data:`BATCH_GRID` batch (NaN where it gives none) — or, with ``only`` (a boolean mask
        over the grid), at those batches alone (NaN elsewhere: what a learned model read at its
        home batch needs) — cached per process by predictor, request (batch aside), device,
        threads and mask."""
        import numpy as np

        batches = np.asarray(BATCH_GRID, dtype=np.float64)
        mask = None if only is None or bool(np.all(only)) else np.asarray(only, dtype=bool)
        key = (target, self.w.replace(batch_size=1), self.device.key, self.threads,
               None if mask is None else mask.tobytes())
        hit = _memo_get(_GRID_CACHE, pred, key)
        if hit is not None:
            return batches, hit
        want = list(BATCH_GRID) if mask is None else [b for b, m in zip(BATCH_GRID, mask) if m]
        v = np.full(len(batches), np.nan)
        if want:
            rec = self.record(False, pred.uses_graphs, pred.uses_plans, batches=want)
            with np.errstate(all="ignore"):  # a model that cannot scale the batch overflows
                got = np.asarray(pred.predict(rec)[:, pred.targets_.index(target)],
                                 dtype=np.float64)
            got = np.where(np.isfinite(got) & (got > 0), got, np.nan)
            if mask is None:
                v = got
            else:
                v[mask] = got
        _memo_put(_GRID_CACHE, pred, key, v)
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

        key = (target, self.w.replace(batch_size=1), self.device.key, self.threads)
        hit = _memo_get(_CURVE_CACHE, pred, key)
        if hit is not None:
            return hit
        weights, home, B = None, None, None
        support = None if getattr(pred, "extrapolates", False) else \
            getattr(pred, "support_", None)
        if support is not None:
            base = self.base_predictor()
            B = self.grid(base, target)[1] if base is not None and base is not pred else None
        if B is None:
            batches, L = self.grid(pred, target)
            C = L
        else:
            from perfcast.predictors.support import size_of

            batches = np.asarray(BATCH_GRID, dtype=np.float64)
            home, weights = support.home(batches, size_of(self.summary), self.w.mode,
                                         self.w.precision, self.w.model.kind)
            # the learned model is read at its home batch only (and where the base has no
            # answer): the rest of the curve is the base carrying that residual
            need = ~np.isfinite(B)
            if home is not None:
                need[home] = True
            L = self.grid(pred, target, only=need)[1]
            with np.errstate(all="ignore"):
                rho = float(np.log(L[home] / B[home])) if home is not None else 0.0
            if not np.isfinite(rho):
                rho, weights = 0.0, np.zeros_like(weights)
            C = np.where(np.isfinite(B), B * np.exp(weights * rho), L)
        P = monotone_curve(batches, C, None if weights is None else 1.0 + 9.0 * weights)
        out = (batches, P, weights, L, C, home)
        _memo_put(_CURVE_CACHE, pred, key, out)
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
            if hasattr(pred, "answer_notes"):  # kernelsum: this machine's probe, the ratios
                self.notes.extend(f"{target}: {n}" for n in pred.answer_notes(rec))
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
