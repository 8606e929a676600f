"""The report as one self-contained HTML page (:func:`render_html`: charts embedded as ``data:``
PNGs, no script, stylesheet or font from anywhere — it opens offline) and :func:`write_report`
(the page, and with ``png=True`` the charts beside it)."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from perfcast.faces.report.analysis import Report
from perfcast.faces.report.charts import CHARTS, chart_pngs
from perfcast.faces.report.text import fmt, note_groups, prediction_rows


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(label)}</th>" for _, label in columns)
    def cell(k: str, v: Any) -> str:
        return f"{100 * v:.1f} %" if k == "share" and isinstance(v, float) else fmt(v)

    body = "".join("<tr>" + "".join(f"<td>{e(cell(k, r.get(k)))}</td>" for k, _ in columns)
                   + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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


__all__ = ["decisions_html", "notes_html", "render_html", "write_report"]
