"""The charts of a report (matplotlib, drawn off-screen): the device's roofline with the model's
operator classes, the top operators by predicted time and the memory timeline of the tensor
simulation — each a figure, :func:`chart_pngs` all of them as PNG bytes."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfcast.faces.report.analysis import Report

#: Charts of a report, in page order: name → title.
CHARTS = {"roofline": "Roofline", "operators": "Top operators by predicted time",
          "memory": "Memory timeline of the tensor simulation"}


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
    out = {}
    for name, make in (("roofline", roofline_figure), ("operators", operators_figure),
                       ("memory", memory_figure)):
        fig = make(r)
        if fig is not None:
            out[name] = figure_png(fig, dpi)
    return out


def figure_png(fig, dpi: int = 100) -> bytes:
    """A figure as PNG bytes (the figure is closed)."""
    plt = _plt()
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return buf.getvalue()


__all__ = ["CHARTS", "chart_pngs", "figure_png", "memory_figure", "operators_figure",
           "roofline_figure"]
