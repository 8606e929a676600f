"""What a report says about one request on one device: the prediction
(:func:`perfcast.decisions.answer.answer` ``"predict"``), the kernels it launches priced on the
device (operator classes, top operators, phases), the tensor simulation's memory and the
decisions (fit, MIG, cost — each ``answer(<command>, …)``). :func:`report_request` builds a
:class:`Report` from a validated ``perfcast report`` request, :func:`build_report` from a model
and options by field name.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.workload import DEFAULT_OPTIMIZER, Workload

#: Rows of the top-operators table.
TOP_OPERATORS = 15
PHASES = ("forward", "backward", "optimizer")


@dataclass
class Report:
    """What a report shows (see the package docstring). Times in ms, memory in MiB, FLOP/s and
    FLOPs as numbers, ``intensity`` in FLOP/byte. ``prediction`` is ``perfcast predict
    --json``'s answer; ``memory`` the simulation's
    :meth:`~perfcast.memory.simulate.MemoryEstimate.to_dict` (``None`` when it cannot run, e.g.
    an ONNX file); ``decisions`` holds ``fit``, ``mig`` and ``cost`` dicts (or ``None`` with a
    note); ``seconds`` the time to build it."""

    model: str
    device: str
    device_name: str
    mode: str
    precision: str
    batch_size: int
    prediction: dict[str, Any]
    peak_tflops: float | None
    best_peak_tflops: float | None
    bandwidth_gbs: float | None
    operator_source: str
    operator_classes: list[dict[str, Any]] = field(default_factory=list)
    top_operators: list[dict[str, Any]] = field(default_factory=list)
    phases_ms: dict[str, float] = field(default_factory=dict)
    memory: dict[str, Any] | None = None
    decisions: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def values_for(command: str, values: dict[str, Any]) -> dict[str, Any]:
    """The options of ``values`` (by field name) that ``command`` takes — a report or the web
    page asks several commands one request (predict, fit, MIG, cost, rank)."""
    from perfcast.request.fields import fields_of

    names = {f.name for f in fields_of(command)}
    return {k: v for k, v in values.items() if k in names and v is not None}


# ------------------------------------------------------------------------------------ kernels
def _kernel_frame(w: Workload, use_cache: bool):
    """Every kernel of ``w`` (batch, mode, precision, optimizer chosen) as a frame with a
    ``node`` column; from the kernel plan, else from the forward graph at the request's batch."""
    import pandas as pd

    from perfcast.cache import get_graph
    from perfcast.features.kernels import KernelPlan, kernel_row, lower_graph
    from perfcast.features.records import plan_workloads
    from perfcast.routing import graph_workload

    kw = {"mode": w.mode, "precision": w.precision, "optimizer": w.train_optimizer}
    try:
        g2, g3 = (get_graph(pw, use_cache=use_cache)
                  for pw in plan_workloads(graph_workload(w)))
        kernels = KernelPlan.from_graphs(g2, g3).kernels(int(w.batch_size), **kw)
    except PerfcastError:
        g = get_graph(w.replace(mode="infer", precision="fp32", optimizer=DEFAULT_OPTIMIZER),
                      use_cache=use_cache)
        kernels = lower_graph(g, **kw)
    if not kernels:
        raise PerfcastError(f"{w.spec}: the graph launches no kernel to report on")
    return pd.DataFrame([{**kernel_row(k), "node": k.node or k.graph_op} for k in kernels])


def _roofline_parts(frame, dev, precision: str, tf32: str = "default"):
    """Per kernel: FLOPs, bytes, compute time and memory time (s) at the peak it runs at."""
    import numpy as np

    from perfcast.devices.derive import complete
    from perfcast.predictors.crossdevice import kernel_frame_work, peak_unit

    flops, moved = kernel_frame_work(frame)
    if dev.is_gpu:
        dev = complete(dev)[0]
    peaks = {kc: dev.peak_tflops(peak_unit(kc, precision, dev, tf32) if dev.is_gpu
                                 else "fp32") or math.nan
             for kc in frame["kernel_class"].unique()}
    peak = frame["kernel_class"].map(peaks).to_numpy(float)
    t_c = np.where(peak > 0, flops / (peak * 1e12), 0.0)
    bw = dev.bandwidth_gbs
    t_m = moved / (bw * 1e9) if bw else np.zeros(len(frame))
    return np.asarray(flops, float), np.asarray(moved, float), t_c, t_m


def _operator_times(frame, dev, w: Workload, time_source: str | None, notes: list[str]):
    """``(ms per kernel, source)``: the crossdevice operator model's prices where it answered
    the time, else the kernels' roofline times."""
    import numpy as np

    flops, moved, t_c, t_m = _roofline_parts(frame, dev, w.precision, w.tf32)
    roof_ms = np.maximum(t_c, t_m) * 1e3
    if time_source == "crossdevice":
        try:
            from perfcast import shipped
            from perfcast.predictors.crossdevice import price_kernels

            pred = shipped.load_entry(shipped.find_any_gpu("time_ms"))
            kf = frame.assign(record=0, device_key=dev.key, precision=w.precision, tf32=w.tf32)
            ms = np.asarray(price_kernels(pred._kernel_model(), kf).ms, float)
            if np.isfinite(ms).all() and ms.sum() > 0:
                return ms, "crossdevice operator model"
        except (PerfcastError, KeyError, TypeError, ValueError) as exc:
            notes.append(f"operators: the crossdevice operator model could not price the "
                         f"kernels ({exc}); roofline share instead")
    return roof_ms, "roofline share"


def _group(frame, key: str, ms, flops, moved, t_c, t_m) -> list[dict[str, Any]]:
    g = frame.assign(_ms=ms, _flops=flops, _bytes=moved, _tc=t_c, _tm=t_m).groupby(
        key, sort=False)
    out = []
    total = float(ms.sum())
    for name, part in g:
        t = float(part["_ms"].sum())
        f, b = float(part["_flops"].sum()), float(part["_bytes"].sum())
        out.append({
            key if key != "graph_op" else "operator": str(name),
            "kernels": int(len(part)), "time_ms": t, "share": t / total if total else None,
            "flops": f, "bytes": b, "intensity": f / b if b > 0 else None,
            "attainable_tflops": f / (t * 1e-3) / 1e12 if t > 0 and f > 0 else None,
            "bound": "compute" if float(part["_tc"].sum()) >= float(part["_tm"].sum())
            else "memory",
            **({"op": str(part["graph_op"].iat[0]),
                "phases": sorted(set(part["phase"]), key=PHASES.index)} if key == "node" else {}),
        })
    return sorted(out, key=lambda r: -r["time_ms"])


# ------------------------------------------------------------------------------------ build
def build_report(model: Any, *, device: Any, decisions: bool = True, progress=None,
                 **options: Any) -> Report:
    """The :class:`Report` of ``model`` on ``device`` (a registry key or a spec file), with
    ``perfcast report``'s options by field name (``batch_size``, ``input_size``, ``seq_len``,
    ``mode``, ``precision``, ``optimizer``, ``tf32``, ``predictor``, ``iterations`` — batches
    the cost and CO2e are for — ``region``, ``use_cache``), validated as the command validates
    them. ``decisions=False`` leaves out fit / MIG / cost; ``progress(stage, i, n)`` is called
    as the stages start."""
    from perfcast.request import Request

    check_mode(options.get("mode"))
    req = Request.build("report", model, device=device, **options)
    return report_request(req, decisions=decisions, progress=progress)


def check_mode(mode: str | None) -> None:
    """``perfcast report`` covers the graph modes (checked before anything else)."""
    if mode == "generate":
        raise PerfcastError("perfcast report takes --mode infer or train; for LLM generation "
                            "use perfcast predict --mode generate")


def report_request(req, *, decisions: bool = True, progress=None) -> Report:
    """The :class:`Report` of a validated ``perfcast report`` request
    (:class:`~perfcast.request.Request`): the prediction, operators, memory and decisions, each
    from the command that answers it."""
    from perfcast.decisions.answer import answer
    from perfcast.devices import get_device

    t0 = time.perf_counter()
    stages = ["predicting", "pricing operators", "memory simulation", "decisions"]

    def step(name: str) -> None:
        if progress is not None:
            progress(name, stages.index(name), len(stages))

    check_mode(req.mode)
    dev = get_device(req.device)
    # (the mode always said: fit and cost default to train)
    values = {**req.to_dict(), "mode": req.mode, "iterations": req.value("iterations")}
    use_cache = req.options.use_cache
    step("predicting")
    p = answer("predict", values_for("predict", values))
    w = chosen_workload(req.workload, p)

    step("pricing operators")
    notes: list[str] = []
    ops = analyse_operators(w, dev, p, use_cache=use_cache, notes=notes)

    step("memory simulation")
    memory = memory_of(w, p, use_cache=use_cache, notes=notes)

    step("decisions")
    dec: dict[str, Any] = {}
    if decisions:
        dec = decide({**values, "mode": w.mode, "precision": w.precision,
                      "batch_size": int(w.batch_size)}, dev, notes=notes)
    return Report(
        model=p.model, device=dev.key, device_name=dev.name, mode=w.mode,
        precision=w.precision, batch_size=int(w.batch_size), prediction=p.to_dict(),
        **peaks(dev, w.precision), **ops, memory=memory,
        decisions=dec, notes=notes + [n for n in p.notes if n not in notes],
        seconds=time.perf_counter() - t0)


def chosen_workload(w: Workload, p) -> Workload:
    """The request's workload with what its prediction ``p`` chose: the precision, the batch
    and (image models) the input size."""
    from perfcast.request.single import DEFAULT_BATCH

    w = w.replace(precision=p.precision, batch_size=p.batch_size or DEFAULT_BATCH[w.mode])
    input_size = getattr(p, "input_size", None)
    if w.input_size is None and input_size and w.model.inputs in ("image", "tensor"):
        w = w.replace(input_size=tuple(input_size))
    return w


def memory_of(w: Workload, p, *, use_cache: bool = True,
              notes: list[str] | None = None) -> dict[str, Any] | None:
    """The tensor simulation of a parsed workload (:func:`perfcast.memory.cache.
    simulation_details`: breakdown and timeline) with ``predicted_device_mb`` (``p.memory_mb``)
    and ``runtime_and_other_mb`` (the predicted device memory beyond the simulated tensors:
    CUDA context, workspaces, allocator); ``None`` (with a note) where no simulation runs."""
    from perfcast.routing import simulation_applies

    notes = notes if notes is not None else []
    if not simulation_applies(w):
        notes.append("memory: no tensor simulation for this kind of model (ONNX files and "
                     "other frameworks' models); no breakdown or timeline")
        return None
    from perfcast.memory.cache import simulation_details

    try:
        memory = simulation_details(w, use_cache=use_cache)
    except PerfcastError as exc:
        notes.append(f"memory: the tensor simulation failed ({exc})")
        return None
    if p.memory_mb is not None:
        memory["predicted_device_mb"] = p.memory_mb
        memory["runtime_and_other_mb"] = max(0.0, p.memory_mb - memory["tensor_peak_mb"])
    return memory


def analyse_operators(w: Workload, dev, p, *, use_cache: bool = True,
                      notes: list[str] | None = None) -> dict[str, Any]:
    """``operator_source``, ``operator_classes``, ``top_operators`` and ``phases_ms`` of a
    parsed workload (batch and precision chosen, as ``p`` — its prediction on ``dev`` — used
    them): each kernel priced by the crossdevice operator model where it answered the time,
    else by its roofline time, the sum scaled to the predicted total."""
    notes = notes if notes is not None else []
    frame = _kernel_frame(w, use_cache)
    flops, moved, t_c, t_m = _roofline_parts(frame, dev, w.precision)
    ms, source = _operator_times(frame, dev, w, p.predictor.get("time_ms"), notes)
    if p.time_ms and ms.sum() > 0:
        ms = ms * (p.time_ms / float(ms.sum()))
        notes.append(f"operators: {source} — per-kernel times scaled to the predicted "
                     f"{p.time_ms:,.3f} ms (launch overhead and what the whole-model model "
                     f"adds spread pro rata)")
    return {"operator_source": source,
            "operator_classes": _group(frame, "graph_op", ms, flops, moved, t_c, t_m),
            "top_operators": _group(frame, "node", ms, flops, moved, t_c, t_m)[:TOP_OPERATORS],
            "phases_ms": {ph: float(ms[(frame["phase"] == ph).to_numpy()].sum())
                          for ph in PHASES if (frame["phase"] == ph).any()}}


def peaks(dev, precision: str) -> dict[str, float | None]:
    """``peak_tflops`` (the precision's own peak), ``best_peak_tflops`` (the fastest one its
    kernels may use) and ``bandwidth_gbs`` of a device — the ceilings of the roofline chart."""
    from perfcast.predictors.roofline import best_peak_tflops

    return {"peak_tflops": dev.peak_tflops(precision) if precision in (
        "fp32", "fp16", "bf16", "amp") else None,
        "best_peak_tflops": best_peak_tflops(dev, precision),
        "bandwidth_gbs": dev.bandwidth_gbs}


#: The decisions of a report, each with the label its notes carry.
DECISIONS = (("fit", "largest batch"), ("mig", "MIG"), ("cost", "cost"))


def decide(values: dict[str, Any], dev, *, notes: list[str] | None = None) -> dict[str, Any]:
    """``{"fit", "mig", "cost"}`` of a request's options (by field name; the batch and
    precision its prediction chose; the mode always given, as fit and cost default to train) on
    ``dev``: ``answer("fit" | "mig" | "cost", …)`` — what
    ``perfcast fit`` / ``mig`` / ``cost`` answer; the fit searches the batch (the request's is
    not passed), MIG only on GPUs with MIG profiles. A decision that cannot be made is ``None``
    with a note."""
    from perfcast.decisions.answer import answer
    from perfcast.decisions.mig import mig_devices

    notes = notes if notes is not None else []
    device = values.get("device") or dev.key
    out: dict[str, Any] = {name: None for name, _ in DECISIONS}
    for name, label in DECISIONS:
        if name == "mig" and dev.key not in mig_devices():
            continue
        v = {**values, "device": device}
        if name == "fit":
            v.pop("batch_size", None)
        try:
            out[name] = answer(name, values_for(name, v)).to_dict()
        except PerfcastError as exc:
            notes.append(f"{label}: {exc}")
    return out


__all__ = ["DECISIONS", "PHASES", "TOP_OPERATORS", "Report", "analyse_operators",
           "build_report", "check_mode", "chosen_workload", "decide", "memory_of", "peaks",
           "report_request", "values_for"]
