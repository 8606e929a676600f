"""``perfcast report``: one self-contained HTML page per model and device (thesis ch. 3's
roofline analysis, applied to a forecast).

:func:`build_report` gathers, for one :class:`~perfcast.workload.Workload` on one device:

* the **prediction** (:func:`perfcast.api.predict_workload`, every key it has);
* the **kernels** the request launches (:class:`~perfcast.features.kernels.KernelPlan`: forward,
  backward and optimizer kernels at the request's batch, precision and optimizer), each with its
  FLOPs and bytes at its own operand size, its roofline bound on the device (the peak it runs
  at — SIMT FP32, TF32, tensor cores: :func:`perfcast.predictors.crossdevice.peak_unit` —
  and the bandwidth) and whether that bound is **compute** or **memory**;
* their **predicted time**: where the time prediction came from the crossdevice predictor
  (GPUs without labeled data), each kernel is priced by its GPU-time model
  (:func:`perfcast.predictors.crossdevice.price_kernels`) and the kernels' sum is scaled to the
  predicted total (the whole-model correction, spread pro rata); where a
  learned whole-model predictor or the roofline answered, the predicted total is split in
  proportion to the kernels' roofline times (**roofline share**). ``operator_source`` says which;
* grouped by **operator class** (the graph op a kernel comes from: ``conv2d``, ``linear``,
  ``batch_norm`` …): FLOPs ÷ bytes = arithmetic intensity, FLOPs ÷ predicted time = attainable
  FLOP/s — the points of the roofline chart; by **graph node** (the top operators); by
  **phase** (forward / backward / optimizer);
* the **memory** of the tensor simulation (:func:`perfcast.memory.cache.simulation_details`):
  parameters, gradients, optimizer state, activations at the peak, and the live-bytes timeline;
* the **decisions**: largest batch that fits, MIG profile (MIG GPUs), cost and CO2e of
  ``iterations`` batches.

:func:`render_html` turns a :class:`Report` into one HTML page whose charts are PNGs embedded as
``data:`` URIs (no script, no stylesheet or font from anywhere: it opens offline);
:func:`write_report` writes it (and with ``png=True`` the charts beside it).
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.workload import DEFAULT_OPTIMIZER, Workload

#: Rows of the top-operators table.
TOP_OPERATORS = 15
#: Charts of a report, in page order: name → title.
CHARTS = {"roofline": "Roofline", "operators": "Top operators by predicted time",
          "memory": "Memory timeline of the tensor simulation"}
PHASES = ("forward", "backward", "optimizer")


@dataclass
class Report:
    """What a report shows (see the module docstring). Times in ms, memory in MiB, FLOP/s and
    FLOPs as numbers, ``intensity`` in FLOP/byte. ``memory`` is the simulation's
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
            from perfcast.predictors.crossdevice import price_kernels
            from perfcast.training import shipped

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
def build_report(model: Any, *, device: Any, batch_size: int | None = None,
                 input_size: Any = None, seq_len: int | None = None, mode: str = "infer",
                 precision: str | None = None, optimizer: str = DEFAULT_OPTIMIZER,
                 predictor: str | None = None, iterations: int = 1000,
                 region: str | None = None, use_cache: bool = True, decisions: bool = True,
                 progress=None) -> Report:
    """The :class:`Report` of ``model`` on ``device`` (a key, a spec file or a
    :class:`~perfcast.devices.Device`), as :func:`perfcast.predict` takes them. ``iterations``:
    batches the cost and CO2e are for; ``region``: the grid (default: world average);
    ``decisions=False`` leaves out fit / MIG / cost. ``progress(stage, i, n)`` is called as the
    stages start."""
    from perfcast.api import DEFAULT_BATCH, parse_request, predict_workload
    from perfcast.devices import get_device

    t0 = time.perf_counter()
    stages = ["predicting", "pricing operators", "memory simulation", "decisions"]

    def step(name: str) -> None:
        if progress is not None:
            progress(name, stages.index(name), len(stages))

    if mode == "generate":
        raise PerfcastError("perfcast report covers --mode infer and train; for LLM generation "
                            "use perfcast predict --mode generate")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise PerfcastError(f"iterations must be a positive integer, got {iterations!r}")
    dev = get_device(device)
    w, opts = parse_request(model, batch_size=batch_size, input_size=input_size,
                            seq_len=seq_len, mode=mode, precision=precision,
                            optimizer=optimizer, predictor=predictor, use_cache=use_cache)
    step("predicting")
    p = predict_workload(w, dev, **opts)
    w = w.replace(precision=p.precision, batch_size=p.batch_size or DEFAULT_BATCH[w.mode])
    if w.input_size is None and p.input_size and w.model.inputs in ("image", "tensor"):
        w = w.replace(input_size=tuple(p.input_size))

    step("pricing operators")
    notes: list[str] = []
    ops = analyse_operators(w, dev, p, use_cache=use_cache, notes=notes)

    step("memory simulation")
    memory = memory_of(w, p, use_cache=use_cache, notes=notes)

    step("decisions")
    dec: dict[str, Any] = {}
    if decisions:
        dec = decide(w, dev, predictor=predictor, use_cache=use_cache, iterations=iterations,
                     region=region, notes=notes)
    return Report(
        model=p.model, device=dev.key, device_name=dev.name, mode=w.mode,
        precision=w.precision, batch_size=int(w.batch_size), prediction=p.to_dict(),
        **peaks(dev, w.precision), **ops, memory=memory,
        decisions=dec, notes=notes + [n for n in p.notes if n not in notes],
        seconds=time.perf_counter() - t0)


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
    them); see the module docstring."""
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


def decide(w: Workload, dev, *, predictor: str | None = None, use_cache: bool = True,
           iterations: int = 1000, region: str | None = None,
           notes: list[str] | None = None) -> dict[str, Any]:
    """``{"fit", "mig", "cost"}`` for a parsed workload (batch and precision chosen) on a
    device: :func:`~perfcast.decisions.max_batch_size`, :func:`~perfcast.decisions.
    recommend_mig` (MIG GPUs only, else ``None``), :func:`~perfcast.decisions.estimate_cost` of
    ``iterations`` batches. A decision that cannot be made is ``None`` with a note."""
    from perfcast.decisions import estimate_cost, max_batch_size, recommend_mig
    from perfcast.decisions.mig import mig_devices

    notes = notes if notes is not None else []
    kw = {"predictor": predictor, "use_cache": use_cache}
    out: dict[str, Any] = {"fit": None, "mig": None, "cost": None}
    try:
        out["fit"] = _fit(w, dev, predictor, use_cache)
    except PerfcastError as exc:
        notes.append(f"largest batch: {exc}")
    if dev.key in mig_devices():
        try:
            out["mig"] = recommend_mig(w, device=dev.key, mode=w.mode, precision=w.precision,
                                       **kw).to_dict()
        except PerfcastError as exc:
            notes.append(f"MIG: {exc}")
    try:
        out["cost"] = estimate_cost(w, device=dev, iterations=iterations,
                                    batch_size=w.batch_size, mode=w.mode,
                                    precision=w.precision, region=region,
                                    predictor=predictor).to_dict()
    except PerfcastError as exc:
        notes.append(f"cost: {exc}")
    return out


def _fit(w: Workload, dev, predictor: str | None, use_cache: bool) -> dict[str, Any]:
    """:func:`~perfcast.decisions.max_batch_size` — the same answer, faster: the search reads
    only memory predictions, and memory is answered whatever predicts the time, so the search
    runs with the roofline's cheap time (``predictor="roofline"`` changes the time only), and the
    time and throughput at the answer are then predicted once with the default predictors."""
    from perfcast.api import predict_workload
    from perfcast.decisions import max_batch_size

    if predictor is not None:
        return max_batch_size(w, device=dev, mode=w.mode, precision=w.precision,
                              predictor=predictor, use_cache=use_cache).to_dict()
    fit = max_batch_size(w, device=dev, mode=w.mode, precision=w.precision,
                         predictor="roofline", use_cache=use_cache)
    d = fit.to_dict()
    d["notes"] = [n for n in d["notes"] if not n.startswith("time_ms")]
    if fit.max_batch_size:
        p = predict_workload(w.replace(batch_size=fit.max_batch_size), dev, use_cache=use_cache)
        d["time_ms"] = p.time_ms
        d["throughput_samples_per_s"] = (fit.max_batch_size / p.time_ms * 1e3 if p.time_ms
                                         else None)
        d["predictor"] = dict(p.predictor)
        d["notes"] += [n for n in p.notes if n.startswith("time_ms")]
    return d


# ------------------------------------------------------------------------------------ charts
def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def roofline_figure(r: Report):
    """The device's roofline for the precision (compute ceiling, bandwidth ceiling; the faster
    tensor / matrix-core ceiling dashed where the precision's GEMMs and convolutions may use it)
    with the operator classes at (arithmetic intensity, attainable FLOP/s), sized by their
    share of the predicted time and coloured by their bound."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.2, 5.2))
    pts = [c for c in r.operator_classes if c["intensity"] and c["attainable_tflops"]]
    xs = [c["intensity"] for c in pts] or [1.0]
    lo, hi = min(0.01, min(xs) / 3), max(1e4, max(xs) * 3)
    peak = r.peak_tflops or r.best_peak_tflops
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    if peak:
        bw = r.bandwidth_gbs
        roof = [min(peak, bw * x / 1e3) if bw else peak for x in grid]
        ax.plot(grid, roof, color="black", lw=2,
                label=f"{r.precision} roofline: {peak:g} TFLOP/s"
                      + (f", {bw:g} GB/s" if bw else ""))
        if bw:
            ax.axvline(peak * 1e3 / bw, color="gray", lw=0.6, ls=":")
            ax.annotate(f"ridge {peak * 1e3 / bw:.1f} FLOP/B", (peak * 1e3 / bw, peak),
                        textcoords="offset points", xytext=(4, -12), fontsize=8, color="gray")
        if r.best_peak_tflops and r.best_peak_tflops > peak * 1.01:
            best = r.best_peak_tflops
            ax.plot(grid, [min(best, bw * x / 1e3) if bw else best for x in grid],
                    color="black", lw=1, ls="--",
                    label=f"tensor / matrix cores: {best:g} TFLOP/s")
    colors = {"compute": "tab:red", "memory": "tab:blue"}
    for i, c in enumerate(sorted(pts, key=lambda c: c["intensity"])):
        ax.scatter(c["intensity"], c["attainable_tflops"], s=40 + 900 * (c["share"] or 0),
                   color=colors[c["bound"]], alpha=0.65, edgecolors="black", linewidths=0.5)
        ax.annotate(f"{c['operator']} {100 * (c['share'] or 0):.0f}%",
                    (c["intensity"], c["attainable_tflops"]), textcoords="offset points",
                    xytext=(8, 10 - 14 * (i % 3)), fontsize=8)
    for b, col in colors.items():
        ax.scatter([], [], color=col, alpha=0.65, label=f"{b}-bound operator class")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ys = [c["attainable_tflops"] for c in pts] + ([peak] if peak else [])
    if ys:
        ax.set_ylim(min(ys) / 5, max(ys) * 3)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attainable TFLOP/s (FLOPs ÷ predicted time)")
    ax.set_title(f"{r.model} on {r.device} — {r.mode}, {r.precision}, batch {r.batch_size}",
                 fontsize=10)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def operators_figure(r: Report):
    """The top operators' predicted time (ms), coloured by their bound."""
    plt = _plt()
    rows = r.top_operators[:12][::-1]
    fig, ax = plt.subplots(figsize=(8.2, 0.32 * len(rows) + 1.4))
    colors = {"compute": "tab:red", "memory": "tab:blue"}
    ax.barh([f"{o['node']} ({o['op']})" for o in rows], [o["time_ms"] for o in rows],
            color=[colors[o["bound"]] for o in rows])
    ax.set_xlabel(f"predicted time (ms per batch; {r.operator_source})")
    ax.set_title("red: compute-bound, blue: memory-bound", fontsize=9)
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    return fig


def memory_figure(r: Report):
    """Live tensor MiB after every op of the simulated pass or step, by phase; the peak and the
    predicted device memory (tensors + runtime overhead) as lines. ``None`` without a
    simulation."""
    if not r.memory or not r.memory.get("timeline"):
        return None
    plt = _plt()
    tl = r.memory["timeline"]
    fig, ax = plt.subplots(figsize=(8.2, 3.6))
    colors = {"forward": "tab:green", "backward": "tab:orange", "optimizer": "tab:purple",
              "zero_grad": "tab:gray", None: "tab:gray"}
    seen = set()
    start = 0
    for i in range(1, len(tl) + 1):
        if i == len(tl) or tl[i][2] != tl[start][2]:
            seg = tl[start:i + (1 if i < len(tl) else 0)]
            ph = tl[start][2]
            ax.plot([s[0] for s in seg], [s[1] for s in seg], color=colors.get(ph, "tab:gray"),
                    lw=1.2, label=None if ph in seen else (ph or "other"))
            seen.add(ph)
            start = i
    ax.axhline(r.memory["tensor_peak_mb"], color="black", lw=0.8, ls="--",
               label=f"tensor peak {r.memory['tensor_peak_mb']:,.0f} MiB")
    pred = r.memory.get("predicted_device_mb")
    if pred:
        ax.axhline(pred, color="tab:red", lw=0.8, ls=":",
                   label=f"predicted device memory {pred:,.0f} MiB")
    ax.set_xlabel("op (dispatch order)")
    ax.set_ylabel("live tensors (MiB)")
    ax.legend(fontsize=8, loc="best")
    ax.grid(True, lw=0.3, alpha=0.5)
    fig.tight_layout()
    return fig


def chart_pngs(r: Report, dpi: int = 110) -> dict[str, bytes]:
    """The report's charts as PNG bytes, by name (:data:`CHARTS`; no memory chart without a
    simulation)."""
    plt = _plt()
    out = {}
    for name, make in (("roofline", roofline_figure), ("operators", operators_figure),
                       ("memory", memory_figure)):
        fig = make(r)
        if fig is None:
            continue
        buf = io.BytesIO()
        try:
            fig.savefig(buf, format="png", dpi=dpi)
        finally:
            plt.close(fig)
        out[name] = buf.getvalue()
    return out


# ------------------------------------------------------------------------------------ HTML
def fmt(v: Any, digits: int = 4) -> str:
    """A value for a table: numbers with ``digits`` significant digits and thousands
    separators, booleans yes/no, ``None`` as —."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "—"
        if v == 0:
            return "0"
        mag = int(math.floor(math.log10(abs(v))))
        dec = max(0, digits - 1 - mag)
        return f"{v:,.{dec}f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt(x, digits) for x in v)
    if isinstance(v, dict):
        return "; ".join(f"{k}: {fmt(x, digits)}" for k, x in v.items())
    return str(v)


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(label)}</th>" for _, label in columns)
    def cell(k: str, v: Any) -> str:
        return f"{100 * v:.1f} %" if k == "share" and isinstance(v, float) else fmt(v)

    body = "".join("<tr>" + "".join(f"<td>{e(cell(k, r.get(k)))}</td>" for k, _ in columns)
                   + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: Keys of a prediction dict that describe the request or its provenance, not a value.
_REQUEST_KEYS = ("model", "device", "mode", "precision", "batch_size", "input_size", "seq_len",
                 "predictor", "trained_on", "notes", "framework", "engine", "input_len",
                 "output_len", "tensor_parallel", "tf32")
#: Keys shown through others: the interval of each value (``intervals``, ``coverage``) and the
#: out-of-distribution verdict (:func:`ood_sentence`).
_SHOWN_ELSEWHERE = ("intervals", "coverage", "ood")

#: What a person reads for each prediction key: a label and the unit of its value.
QUANTITIES: dict[str, tuple[str, str | None]] = {
    "time_ms": ("time per batch", "ms"),
    "throughput_samples_per_s": ("throughput", "samples/s"),
    "memory_mb": ("peak memory", "MiB"),
    "memory_needed_mb": ("memory needed", "MiB"),
    "capacity_mb": ("device memory", "MiB"),
    "fits": ("fits in memory", None),
    "energy_j": ("energy per batch", "J"),
    "power_w": ("mean power", "W"),
    "power_limit_w": ("power limit", "W"),
    "ttft_ms": ("time to first token", "ms"),
    "tpot_ms": ("time per output token", "ms"),
    "throughput_tokens_per_s": ("throughput (prompt + generated)", "tokens/s"),
    "output_tokens_per_s": ("generated tokens", "tokens/s"),
    "energy_per_request_j": ("energy per request", "J"),
    "energy_per_token_j": ("energy per output token", "J"),
    "energy_per_1k_tokens_j": ("energy per 1,000 tokens", "J"),
    "power_by_phase_w": ("power by phase", "W"),
    "memory_breakdown_mb": ("memory per device", "MiB"),
    "flops": ("FLOPs", None),
    "samples_per_s": ("throughput", "samples/s"),
    "tokens_per_s": ("throughput", "tokens/s"),
    "model_tflops_per_gpu": ("model TFLOP/s per GPU", "TFLOP/s"),
    "mfu": ("model FLOPs utilisation", None),
    "breakdown_ms": ("time breakdown", "ms"),
}
#: Units read from a key's suffix, for keys without an entry in :data:`QUANTITIES`.
_SUFFIX_UNITS = (("_per_1k_tokens_j", "J"), ("_tokens_per_s", "tokens/s"),
                 ("_samples_per_s", "samples/s"), ("_per_s", "/s"), ("_ms", "ms"),
                 ("_mb", "MiB"), ("_gb", "GB"), ("_gbs", "GB/s"), ("_kwh", "kWh"), ("_j", "J"),
                 ("_w", "W"), ("_usd", "USD"), ("_tflops", "TFLOP/s"), ("_s", "s"))


def quantity(key: str) -> tuple[str, str | None]:
    """``(label, unit)`` of a prediction key: :data:`QUANTITIES`, else read from its suffix
    (``prefill_tokens_per_s`` → ``("prefill", "tokens/s")``)."""
    if key in QUANTITIES:
        return QUANTITIES[key]
    for suffix, unit in _SUFFIX_UNITS:
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)].replace("_", " "), unit
    return key.replace("_", " "), None


def with_unit(v: Any, unit: str | None, digits: int = 4) -> str:
    """``16.41 ms``; a dict as ``a 1 W · b 2 W`` (its keys' own units where they have one);
    ``—`` for ``None``."""
    if isinstance(v, dict):
        parts = []
        for k, x in v.items():
            if isinstance(x, (dict, list)):
                continue
            label, own = quantity(k) if unit is None else (k.replace("_", " "), unit)
            parts.append(f"{label} {with_unit(x, own, digits)}")
        return " · ".join(parts) or "—"
    if v is None or isinstance(v, bool) or unit is None or not isinstance(v, (int, float)):
        return fmt(v, digits)
    if unit == "/s":
        return f"{fmt(v, digits)}/s"
    return f"{fmt(v, digits)} {unit}"


def interval_text(lo: Any, hi: Any, unit: str | None, coverage: Any) -> str | None:
    """``16–34 ms, 90 %`` (``None`` without bounds)."""
    if lo is None and hi is None:
        return None
    share = f", {100 * coverage:.0f} %" if isinstance(coverage, (int, float)) else ""
    return f"{fmt(lo, 3)}–{with_unit(hi, unit, 3)}{share}"


def ood_sentence(d: dict[str, Any]) -> str:
    """The out-of-distribution verdict of a prediction as one sentence with its reason."""
    ood = d.get("ood")
    if not isinstance(ood, dict) or ood.get("score") is None:
        return "Not checked: no distance to the training data for this answer."
    reasons = [str(r) for r in ood.get("reasons") or []]
    for key in QUANTITIES:  # "time_ms: a100 not among …" → "time per batch: a100 not among …"
        reasons = [f"{QUANTITIES[key][0]}: {r[len(key) + 2:]}" if r.startswith(f"{key}: ")
                   else r for r in reasons]
    why = "; ".join(reasons)
    score, limit = float(ood["score"]), ood.get("threshold")
    if ood.get("flagged"):
        vs = f"distance {score:.2f}" + (f", at or above {float(limit):.2f}" if limit else "")
        return (f"Far from the training data ({vs}) — expect a larger error: "
                f"{why or 'unlike every trained model'}.")
    vs = f"distance {score:.2f}" + (f", flagged from {float(limit):.2f}" if limit else "")
    return f"Close to the training data ({vs})" + (f"; {why}." if why else ".")


def source_text(source: Any) -> str | None:
    """Which predictor answered, with prediction keys named as people read them
    (``power-model × time_ms`` → ``power-model × time per batch``)."""
    if source is None:
        return None
    text = str(source)
    for key, (label, _unit) in QUANTITIES.items():
        text = re.sub(rf"\b{key}\b", label, text)
    return text


def prediction_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per predicted quantity of a prediction dict — every key, so that keys added
    later show: ``quantity`` (the key), ``label``, ``unit``, ``value``, ``text`` (the value
    with its unit), ``interval`` (``16–34 ms, 90 %`` from ``<key>_low`` / ``<key>_high``) and
    ``source`` (``predictor[key]``); then the out-of-distribution verdict (``quantity``
    ``ood``: :func:`ood_sentence`)."""
    rows = []
    src = d.get("predictor") or {}
    skip = _REQUEST_KEYS + _SHOWN_ELSEWHERE
    for k, v in d.items():
        if k in skip or k.endswith(("_low", "_high")):
            continue
        label, unit = quantity(k)
        iv = (d.get("intervals") or {}).get(k) or {}
        cover = iv.get("coverage", d.get("coverage"))
        rows.append({"quantity": k, "label": label, "unit": unit, "value": v,
                     "text": with_unit(v, unit),
                     "interval": interval_text(d.get(f"{k}_low"), d.get(f"{k}_high"), unit,
                                               cover),
                     "source": source_text(src.get(k)) if isinstance(src, dict) else None})
    if "ood" in d:
        rows.append({"quantity": "ood", "label": "how unusual is the request", "unit": None,
                     "value": ood_sentence(d), "text": ood_sentence(d), "interval": None,
                     "source": None})
    return rows


def note_groups(notes: list[tuple[str | None, str]],
                intervals: dict[str, dict[str, Any]] | None = None) -> list[tuple[str, list[str]]]:
    """Notes grouped by the quantity they are about — ``[(title, [note, …]), …]`` in the order
    of :data:`QUANTITIES`, then the others — each note ``(device or None, text)`` shown as
    ``device: text`` with its ``key:`` prefix dropped; ``intervals`` (per device: a prediction's
    ``intervals``) adds where each interval's calibration came from."""
    groups: dict[str, list[str]] = {}
    titles = {**{k: label for k, (label, _u) in QUANTITIES.items()},
              "ood": "how unusual is the request"}
    for dev, text in notes:
        title = "other"
        for key, label in titles.items():
            if text.startswith(f"{key}: "):
                title, text = label, text[len(key) + 2:]
                break
        line = f"{dev}: {text}" if dev else text
        if line not in groups.setdefault(title, []):
            groups[title].append(line)
    for dev, ivs in (intervals or {}).items():
        for key, iv in (ivs or {}).items():
            if not isinstance(iv, dict):
                continue
            label = quantity(key)[0]
            where = iv.get("calibrated_on")
            if where:
                line = f"{dev}: {label} interval calibrated on {where}"
                lst = groups.setdefault("how the intervals were made", [])
                if line not in lst:
                    lst.append(line)
    order = [label for label, _ in QUANTITIES.values()]
    return sorted(groups.items(), key=lambda kv: (kv[0] not in order,
                                                  order.index(kv[0]) if kv[0] in order else 0,
                                                  kv[0] == "other"))


def notes_html(groups: list[tuple[str, list[str]]], *, open_first: bool = False) -> str:
    """Grouped notes as collapsible ``<details>`` blocks (one per group)."""
    e = html.escape
    out = []
    for i, (title, lines) in enumerate(groups):
        n = len(lines)
        out.append(f'<details class="pc-notes"{" open" if open_first and i == 0 else ""}>'
                   f"<summary>{e(title)} — {n} note{'s' if n != 1 else ''}</summary><ul>"
                   + "".join(f"<li>{e(x)}</li>" for x in lines) + "</ul></details>")
    return "".join(out)


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:1000px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}
td{font-variant-numeric:tabular-nums}th{background:#f3f3f3}
img{max-width:100%;border:1px solid #eee}.pc-notes li{font-size:.85em;color:#555}
.pc-notes summary{cursor:pointer;margin:.3em 0}
.small{font-size:.85em;color:#555}
"""


def render_html(r: Report, charts: dict[str, bytes] | None = None) -> str:
    """The report as one HTML page; charts (:func:`chart_pngs`) embedded as ``data:`` PNGs."""
    from perfcast._version import __version__

    e = html.escape
    charts = chart_pngs(r) if charts is None else charts

    def img(name: str) -> str:
        if name not in charts:
            return ""
        b64 = base64.b64encode(charts[name]).decode()
        return f'<p><img alt="{e(CHARTS[name])}" src="data:image/png;base64,{b64}"></p>'

    p = r.prediction
    parts = [f"<h1>{e(r.model)} on {e(r.device_name)} ({e(r.device)})</h1>",
             f'<p class="small">{e(r.mode)}, {e(r.precision)}, batch {r.batch_size:,}'
             + (f", input {e(fmt(p.get('input_size')))}" if p.get("input_size") else "")
             + (f", sequence length {p['seq_len']:,}" if p.get("seq_len") else "")
             + f" — perfcast {e(__version__)}, built in {r.seconds:.1f} s</p>",
             "<h2>Prediction</h2>",
             _table([{**row, "quantity": row["label"], "value": row["text"]}
                     for row in prediction_rows(p)],
                    [("quantity", "quantity"), ("value", "value"),
                     ("interval", "interval"), ("source", "source")]),
             "<h2>Roofline</h2>",
             f'<p class="small">Ceilings of the {e(r.device)} for {e(r.precision)}: '
             f"{e(fmt(r.peak_tflops))} TFLOP/s"
             + (f" (tensor / matrix cores: {e(fmt(r.best_peak_tflops))} TFLOP/s)"
                if r.best_peak_tflops and r.peak_tflops
                and r.best_peak_tflops > r.peak_tflops * 1.01 else "")
             + f", {e(fmt(r.bandwidth_gbs))} GB/s. Each point is an operator class at its "
             f"arithmetic intensity and attainable FLOP/s (FLOPs ÷ predicted time; "
             f"{e(r.operator_source)}).</p>",
             img("roofline"),
             _table(r.operator_classes, [
                 ("operator", "operator class"), ("kernels", "kernels"),
                 ("time_ms", "time (ms)"), ("share", "share"), ("flops", "FLOPs"),
                 ("bytes", "bytes"), ("intensity", "FLOP/byte"),
                 ("attainable_tflops", "attainable TFLOP/s"), ("bound", "bound")]),
             "<h2>Top operators by predicted time</h2>",
             img("operators"),
             _table(r.top_operators, [
                 ("node", "operator (graph node)"), ("op", "op"), ("phases", "phases"),
                 ("time_ms", "time (ms)"), ("share", "share"), ("flops", "FLOPs"),
                 ("bytes", "bytes"), ("intensity", "FLOP/byte"), ("bound", "bound")]),
             "<h2>Time per phase</h2>",
             _table([{"phase": k, "time_ms": v,
                      "share": v / sum(r.phases_ms.values()) if sum(r.phases_ms.values())
                      else None} for k, v in r.phases_ms.items()],
                    [("phase", "phase"), ("time_ms", "time (ms)"), ("share", "share")])]
    parts.append("<h2>Memory</h2>")
    if r.memory:
        m = r.memory
        parts += [img("memory"), _table([{"part": k, "mb": m.get(v)} for k, v in (
            ("parameters", "param_mb"), ("buffers", "buffer_mb"), ("gradients", "grad_mb"),
            ("optimizer state", "optimizer_state_mb"), ("inputs", "input_mb"),
            ("activations and temporaries at the peak", "activation_peak_mb"),
            ("tensor peak (simulated)", "tensor_peak_mb"),
            ("runtime overhead and other", "runtime_and_other_mb"),
            ("predicted device memory", "predicted_device_mb")) if m.get(v) is not None],
            [("part", "part"), ("mb", "MiB")])]
    else:
        parts.append('<p class="small">No tensor simulation for this model.</p>')
    parts.append("<h2>Decisions</h2>")
    parts.append(decisions_html(r.decisions))
    parts.append("<h2>Notes</h2>" + notes_html(note_groups(
        [(None, n) for n in r.notes], {r.device: p.get("intervals") or {}})))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>perfcast report: {e(r.model)} on {e(r.device)}</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")


def decisions_html(dec: dict[str, Any]) -> str:
    """The decisions summary (fit, MIG, cost) as a small table."""
    rows = []
    fit, mig, cost = dec.get("fit"), dec.get("mig"), dec.get("cost")
    if fit:
        rows.append({"decision": "largest batch that fits",
                     "answer": fmt(fit.get("max_batch_size")),
                     "detail": f"{fmt(fit.get('memory_mb'))} MiB predicted at it (+"
                               f"{100 * fit.get('margin', 0):.0f}% margin ≤ "
                               f"{fmt(fit.get('capacity_mb'))} MiB), "
                               f"{fmt(fit.get('throughput_samples_per_s'))} samples/s"})
    if mig:
        rows.append({"decision": "MIG profile", "answer": mig.get("profile") or "none fits",
                     "detail": f"needs {fmt(mig.get('required_mb'))} MiB with the margin"
                               + (f"; {fmt(mig.get('slice_time_ms'))} ms per batch on it"
                                  if mig.get("slice_time_ms") else "")})
    if cost:
        rows.append({"decision": f"cost of {cost['iterations']:,} batches",
                     "answer": f"{fmt(cost.get('usd'))} USD, {fmt(cost.get('kg_co2e'))} kg CO2e",
                     "detail": f"{fmt(cost.get('hours'))} h at "
                               f"{fmt(cost.get('usd_per_gpu_hour'))} USD/GPU-h "
                               f"({cost.get('provider') or '—'}"
                               + (f", {cost['price_as_of']}" if cost.get("price_as_of") else "")
                               + "), "
                               f"{fmt(cost.get('energy_kwh'))} kWh, "
                               f"{fmt(cost.get('carbon_g_per_kwh'))} g CO2e/kWh "
                               f"({cost.get('region') or '—'})"})
    if not rows:
        return '<p class="small">No decision could be made (see the notes).</p>'
    return _table(rows, [("decision", "decision"), ("answer", "answer"), ("detail", "detail")])


def write_report(r: Report, out: str | Path, *, png: bool = False) -> dict[str, str]:
    """Write the page to ``out`` (and with ``png`` each chart as ``<stem>-<chart>.png`` beside
    it); returns ``{"html": path, <chart>: path …}``."""
    from perfcast.paths import write_file_atomically

    out = Path(out)
    charts = chart_pngs(r)
    written = {"html": str(write_file_atomically(out, render_html(r, charts)))}
    if png:
        for name, data in charts.items():
            path = out.with_name(f"{out.stem}-{name}.png")
            written[name] = str(write_file_atomically(path, data))
    return written


__all__ = ["CHARTS", "Report", "analyse_operators", "build_report", "memory_of", "peaks", "chart_pngs", "decide", "decisions_html",
           "fmt", "memory_figure", "note_groups", "notes_html", "ood_sentence",
           "operators_figure", "prediction_rows", "quantity", "render_html", "with_unit",
           "roofline_figure", "write_report"]
