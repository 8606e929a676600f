"""What the page shows, as HTML fragments and PNG charts: the status line, the predictions
(quantities × devices, as people read them), the notes grouped by quantity, the memory
breakdown, the decisions and the ranking chart in ``perfcast rank``'s order."""

from __future__ import annotations

import html
import itertools
from typing import Any

_SERIAL = itertools.count(1)


def message(text: str, *, error: bool = False) -> str:
    """The status box: ``text`` (an error in red); ``data-serial`` numbers the answers of this
    server (a page can tell a new answer from the last one)."""
    e = html.escape
    cls = "pc-error" if error else "pc-ok"
    return (f'<div class="{cls}" data-serial="{next(_SERIAL)}">{"Error: " if error else ""}'
            f"{e(text)}</div>")


def notes_box(notes: list, preds: list[dict[str, Any]] | None = None) -> str:
    """The notes of an answer grouped by the quantity they are about, each group collapsible
    (:func:`perfcast.faces.report.note_groups`); a note is ``(device, text)`` or a plain string, and
    each prediction adds where its intervals were calibrated."""
    from perfcast.faces.report import note_groups, notes_html

    pairs = [n if isinstance(n, tuple) else (None, str(n)) for n in notes]
    intervals = {d["device"]: d.get("intervals") or {} for d in preds or []}
    groups = note_groups(pairs, intervals)
    if not groups:
        return ""
    n = sum(len(lines) for _, lines in groups)
    return (f'<div id="pc-notes"><p class="pc-notes-title">Notes ({n}) — how each value was '
            f"made and what to keep in mind; open a group to read it</p>"
            + notes_html(groups) + "</div>")


def prediction_table(preds: list[dict[str, Any]]) -> str:
    """Quantities × devices, as people read them (:func:`perfcast.faces.report.prediction_rows`):
    every key of the predictions with its unit, the interval beside the value ("16.4 ms
    (11.5–20.9 ms, 90 %)"), the predictor under it, and the out-of-distribution verdict as a
    sentence. Each value cell carries ``data-device``, ``data-key`` and ``data-value`` (the
    exact number)."""
    from perfcast.faces.report import fmt, prediction_rows

    e = html.escape
    rows_by_dev = [{r["quantity"]: r for r in prediction_rows(d)} for d in preds]
    keys = list(dict.fromkeys(k for rows in rows_by_dev for k in rows))
    labels = {k: r["label"] for rows in rows_by_dev for k, r in rows.items()}
    head = "".join(f"<th>{e(d['device'])}<br><small>{e(str(d.get('precision')))}, batch "
                   f"{e(fmt(d.get('batch_size')))}</small></th>" for d in preds)
    body = []
    for k in keys:
        cells = []
        for d, rows in zip(preds, rows_by_dev):
            r = rows.get(k)
            if r is None:
                cells.append("<td>—</td>")
                continue
            v = r["value"]
            raw = repr(v) if isinstance(v, (int, float, bool)) or v is None else str(v)
            extra = ""
            if r["interval"]:
                extra += f' <span class="pc-interval">({e(r["interval"])})</span>'
            if r["source"]:
                extra += f'<br><small class="pc-source">{e(r["source"])}</small>'
            cls = "pc-value pc-sentence" if k == "ood" else "pc-value"
            cells.append(f'<td data-device="{e(d["device"])}" data-key="{e(k)}" '
                         f'data-value="{e(raw)}"><span class="{cls}">{e(r["text"])}</span>'
                         f"{extra}</td>")
        body.append(f'<tr><th scope="row">{e(labels[k])}</th>{"".join(cells)}</tr>')
    return (f'<div class="pc-scroll"><table id="pc-table" class="pc-table"><thead><tr>'
            f"<th>quantity</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")


#: The rows under an answer's own breakdown (``memory_breakdown_mb``), where its dicts have them.
_TOTALS = (("memory per device (total)", "predicted_device_mb"),
           ("device memory", "capacity_mb"), ("fits", "fits"))


def memory_table(devices: list, mems: list[dict[str, Any] | None],
                 labels: dict[str, str] | None = None) -> str:
    """Memory breakdown per device (MiB): parameters, gradients, optimizer state, activations
    at the peak, inputs and buffers, runtime overhead and other, predicted total — or the
    answer's own breakdown (``memory_breakdown_mb``: generation's weights, KV cache …; a
    fine-tuning step's weights, adapters, gradients, optimizer state, activations …), each
    part named by ``labels`` where it has one, then the total, the device's memory and whether
    it fits, where the dicts carry them (``predicted_device_mb``, ``capacity_mb``,
    ``fits``)."""
    from perfcast.faces.report import with_unit

    e = html.escape
    parts = (("parameters", "param_mb"), ("gradients", "grad_mb"),
             ("optimizer state", "optimizer_state_mb"),
             ("activations (at the peak)", "activation_peak_mb"), ("inputs", "input_mb"),
             ("buffers", "buffer_mb"), ("tensor peak (simulated)", "tensor_peak_mb"),
             ("runtime overhead and other", "runtime_and_other_mb"),
             ("predicted device memory", "predicted_device_mb"))
    rows = []
    gen = [m.get("memory_breakdown_mb") if m else None for m in mems]
    if any(gen):
        keys = list(dict.fromkeys(k for g in gen if g for k in g))
        parts = tuple(((labels or {}).get(k, k), k) for k in keys) + _TOTALS
        mems = [{**(g or {}), **{k: m.get(k) for _, k in _TOTALS if m and k in m}}
                for g, m in zip(gen, mems)]

    def text(key: str, v: Any, m: dict[str, Any] | None) -> str:
        if key == "fits" and isinstance(v, bool) and (m or {}).get("capacity_mb") is not None:
            return f"{'yes' if v else 'no'} (of {with_unit(m['capacity_mb'], 'MiB')})"
        return with_unit(v, "MiB")

    for name, key in parts:
        vals = [m.get(key) if m else None for m in mems]
        if all(v is None for v in vals):
            continue
        rows.append(f"<tr><th>{e(name.replace('_', ' '))}</th>"
                    + "".join(f'<td data-key="{e(key)}">{e(text(key, v, m))}</td>'
                              for v, m in zip(vals, mems)) + "</tr>")
    if not rows:
        return "<p>No memory breakdown (no tensor simulation for this model).</p>"
    head = "".join(f"<th>{e(d.key)}</th>" for d in devices)
    return (f'<div class="pc-scroll"><table id="pc-memory" class="pc-table"><thead><tr>'
            f"<th>memory</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _job_length(cost: dict[str, Any]) -> Any:
    """A cost's job: its batches, or (generation) its requests."""
    if cost.get("iterations") is not None:
        return cost["iterations"]
    if cost.get("requests") is not None:
        return f"{cost['requests']:,} requests"
    return None


def decisions_table(devices: list, decs: list[dict[str, Any]], mode: str = "infer") -> str:
    """Per device: largest batch that fits (samples, or requests for ``generate``), MIG
    profile, job length, time, USD, kWh, kg CO2e."""
    from perfcast.faces.report import with_unit

    e = html.escape
    cost = lambda d, k: (d.get("cost") or {}).get(k)  # noqa: E731
    lines = [("largest batch that fits", "requests" if mode == "generate" else "samples",
              lambda d: (d.get("fit") or {}).get("max_batch_size")),
             ("MIG profile", None, lambda d: ((d.get("mig") or {}).get("profile") or "none fits")
              if d.get("mig") else None),
             ("job: length", "batches", lambda d: _job_length(d.get("cost") or {})),
             ("job: time", "duration", lambda d: cost(d, "hours")),
             ("job: price", "USD", lambda d: cost(d, "usd")),
             ("job: energy", "kWh", lambda d: cost(d, "energy_kwh")),
             ("job: emissions", "kg CO2e", lambda d: cost(d, "kg_co2e"))]
    head = "".join(f"<th>{e(d.key)}</th>" for d in devices)

    def text(v, unit):
        return duration(v) if unit == "duration" else with_unit(v, unit)

    body = "".join(f"<tr><th>{e(name)}</th>"
                   + "".join(f"<td>{e(text(get(d), unit))}</td>" for d in decs) + "</tr>"
                   for name, unit, get in lines)
    return (f'<div class="pc-scroll"><table id="pc-decisions" class="pc-table"><thead><tr>'
            f"<th>decision</th>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def duration(hours: Any) -> str:
    """Hours as people say them: ``16.4 s``, ``12.5 min``, ``3.20 h``, ``4.1 days``."""
    from perfcast.faces.report import fmt

    if not isinstance(hours, (int, float)) or isinstance(hours, bool):
        return fmt(hours)
    s = hours * 3600
    if s < 60:
        return f"{fmt(s, 3)} s"
    if s < 3600:
        return f"{fmt(s / 60, 3)} min"
    if hours < 48:
        return f"{fmt(hours, 3)} h"
    return f"{fmt(hours / 24, 3)} days"


#: The value a ranking row is drawn with, per objective (``perfcast rank``'s keys).
RANK_VALUE = {"time": "time_ms", "cost": "usd", "energy": "energy_kwh"}


def ranking_png(title: str, ranking: dict[str, Any], objective: str,
                iterations: int | None) -> bytes | None:
    """Bar chart of ``perfcast rank``'s answer (``ranking``: its JSON), in its order — the
    rank's rule: devices with a value first, learned time before the any-GPU model or the
    roofline, what fits first; gray: time not learned; hatched: does not fit."""
    from perfcast.faces.report.charts import _plt, figure_png

    key = RANK_VALUE[objective]
    rows = [d for d in ranking.get("devices") or [] if d.get(key) is not None]
    if not rows:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.3))
    names = [f"{d.get('rank', i + 1)}. {d['device']} "
             f"({(d.get('predictor') or {}).get('time_ms') or d.get('time_source') or '—'})"
             for i, d in enumerate(rows)][::-1]
    learned = [d.get("time_source") == "learned" for d in rows][::-1]
    bars = ax.barh(names, [d[key] for d in rows][::-1],
                   color=["tab:blue" if x else "tab:gray" for x in learned])
    for b, d in zip(bars, rows[::-1]):
        if d.get("fits") is False:
            b.set_hatch("//")
    n = ranking.get("iterations") or iterations
    unit = {"time": "ms per batch", "cost": f"USD for {n:,} batches" if n else "USD",
            "energy": f"kWh for {n:,} batches" if n else "kWh"}[objective]
    ax.set_xlabel(unit)
    ax.set_title(f"{title} — perfcast rank by {objective}\nblue: learned time · gray: any-GPU "
                 f"model or roofline · hatched: does not fit", fontsize=8)
    fig.tight_layout()
    return figure_png(fig)


__all__ = ["decisions_table", "duration", "memory_table", "message", "notes_box",
           "prediction_table", "ranking_png"]
