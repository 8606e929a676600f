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
   measured GPU runtime overhead on a GPU), **energy** — none;
4. bounds: a learned GPU memory answer below the simulated tensors + runtime overhead (a lower
   bound that held in 91.5 % of 3,802 measured runs) is raised to it (``memory-lower-bound``).

Every value keeps its provenance (``predictor`` / ``trained_on``) and ``notes`` say why a
fallback or bound was used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.features.records import TARGETS, learning_workload
from perfcast.workload import Workload

#: ``Answer.source`` values: a shipped model, a predictor the user saved, the roofline bound,
#: the tensor-memory simulation, nothing.
SOURCES = ("learned", "user", "roofline", "simulation", "none")
#: ``Answer.bounds`` entry: the value was raised to the simulated tensors + runtime overhead.
MEMORY_LOWER_BOUND = "memory-lower-bound"


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
    """The tensor-memory simulation runs from PyTorch model specs (not ONNX, not in-process
    modules)."""
    return workload.model.kind not in ("onnx", "nn.Module")


def graph_workload(workload: Workload) -> Workload:
    """The learning workload whose graph the predictors read (an in-process module keeps the
    batch of its example inputs; the static features rescale)."""
    lw = learning_workload(workload)
    if workload.model.example_inputs is not None:
        lw = lw.replace(batch_size=None)
    return lw


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
        self.threads: int | None = None
        self.memsim_notes: list[str] = []

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
                           "for ONNX files or in-process modules)")
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
        the batch."""
        if self._plan is None:
            from perfcast.cache import get_graph
            from perfcast.features.kernels import KernelPlan
            from perfcast.features.records import plan_workloads

            g2, g3 = (get_graph(pw, use_cache=self.use_cache)
                      for pw in plan_workloads(graph_workload(self.w)))
            try:
                self._plan = [KernelPlan.from_graphs(g2, g3)]
            except PerfcastError:
                self._plan = [None]
        return self._plan[0]

    def record(self, with_memsim: bool, need_graph: bool = True, need_plan: bool = False):
        """A one-record :class:`~perfcast.features.records.FeatureSet` of the request."""
        import numpy as np
        import pandas as pd

        from perfcast.features.records import FeatureSet, static_features

        mem = self.memsim() if with_memsim else None
        w = self.w
        st = static_features(self.summary, w, mem)
        rows = pd.DataFrame([{"model": w.spec, "family": "", "device": self.device.key,
                              "mode": w.mode, "precision": w.precision,
                              "batch_size": w.batch_size, "optimizer": w.train_optimizer,
                              "threads": self.threads}])
        return FeatureSet(rows=rows, static=st[None, :], graph_index=np.zeros(1, np.int64),
                          graphs=[self.data() if need_graph else None],
                          y=np.full((1, len(TARGETS)), np.nan), summaries=[self.summary],
                          plans=[self.plan()] if need_plan else [])

    def run(self, pred, with_memsim: bool, target: str) -> float | None:
        import numpy as np

        rec = self.record(with_memsim, pred.uses_graphs, pred.uses_plans)
        values = pred.predict(rec)
        v = float(values[0, pred.targets_.index(target)])
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
          precision_note: str | None = None, threads: int | None = None) -> Route:
    """Answer every target for ``workload`` (batch and precision chosen) on ``device`` (a
    :class:`~perfcast.devices.Device`) from its learning ``graph`` (see the module docstring).
    ``predictor``: a registry name among the shipped models (checked by the caller with
    :func:`check_predictor_name`, before the graph is built) or a saved predictor's directory;
    ``overhead_mb``: GPU runtime overhead added to simulated memory (``None``: measured median);
    ``sim_job``: a :class:`~perfcast.memory.cache.SimulationJob` already running;
    ``threads``: CPU threads (CPU devices; default: the local ``cpu``'s usable cores)."""
    notes: list[str] = [precision_note] if precision_note else []
    req = _Request(workload, device, graph, notes, use_cache, sim_job)
    req.threads = _threads_for(device, threads)
    user_pred = None
    if predictor and looks_like_path(predictor):
        from perfcast.predictors import load_predictor

        user_pred = load_predictor(predictor)
        devs = user_pred.trained_on_.get("device") or []
        if devs and device.key not in devs:
            notes.append(f"{predictor} was trained on {', '.join(devs)}, not {device.key}")
    overhead, overhead_src = _gpu_overhead(device, overhead_mb)
    answers: dict[str, Answer] = {}
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
        if target == "memory_mb" and ans.value is not None and device.is_gpu \
                and ans.source != "simulation":
            _memory_lower_bound(ans, req, overhead)
        # this target's notes; why the simulation could not run belongs to memory, whenever
        # the simulation was first asked for
        ans.notes.extend(n for n in notes[start:] if n not in req.memsim_notes)
        if target == "memory_mb":
            ans.notes[:0] = req.memsim_notes
    _domain_note(answers, workload, notes, user_pred is not None)
    return Route(answers=answers, notes=notes, precision_note=precision_note,
                 input_size=list(workload.input_size) if workload.input_size else req.shape)


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
            notes.append(f"{target}: no labeled data for {desc} — crossdevice: the operator "
                         f"model priced each kernel on this GPU's spec, corrected by what "
                         f"{len(entry.get('trained_on', {}).get('devices', [])) or 'other'} "
                         f"GPUs measured (reports/crossdevice/)")
    if entry is not None and entry.get("memsim") and req.memsim() is None:
        alt = [e for e in shipped.manifest() if not e.get("memsim") and
               (e["device"], e["mode"], e["precision"]) == (dev.key, w.mode, w.precision)
               and target in e["targets"]]
        entry = alt[0] if alt else None
    if entry is not None and name != "roofline":
        pred = shipped.load_entry(entry)
        ans.value = req.run(pred, bool(entry.get("memsim")), target)
        ans.source, ans.predictor, ans.trained_on = "learned", pred.name, pred.trained_on_
    elif target == "time_ms":
        from perfcast.predictors import create_predictor

        rf = create_predictor("roofline")
        rf.fit(req.record(False), targets=["time_ms"])
        ans.value = req.run(rf, False, target)
        ans.source, ans.predictor = "roofline", "roofline"
        if name != "roofline":
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
            notes.append(
                f"memory_mb: no learned memory model for {desc} — tensor-memory simulation "
                f"(live tensors)"
                + (f" + {overhead:,.0f} MiB runtime overhead (CUDA context, library "
                   f"workspaces, allocator caching; {overhead_src})" if dev.is_gpu else ""))
        else:
            notes.append(f"memory_mb: no learned memory model for {desc} and no simulation")
    else:  # energy
        notes.append(f"energy_j: no energy measurements for {desc} in the training data, so "
                     f"no energy model")


def _memory_lower_bound(ans: Answer, req: _Request, overhead: float) -> None:
    """Step 4: learned GPU memory includes the runtime; the simulated tensors + overhead are a
    lower bound (held in 91.5 % of 3,802 GPUMemNet runs) that, unlike a tree model,
    extrapolates to batches beyond the training data."""
    sim = req.memsim()
    if sim is not None and sim + overhead > ans.value:
        ans.value = sim + overhead
        ans.bounds.append(MEMORY_LOWER_BOUND)
        req.notes.append("memory_mb: the learned model's answer was below the simulated tensors "
                         "+ runtime overhead (a lower bound; the model does not extrapolate past "
                         "its training data) — raised to it")


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
    "MEMORY_LOWER_BOUND",
    "SOURCES",
    "Answer",
    "Route",
    "check_predictor_name",
    "graph_workload",
    "looks_like_path",
    "route",
    "shipped_precision",
    "simulation_applies",
]
