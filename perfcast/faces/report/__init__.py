"""``perfcast report``: one self-contained HTML page per model and device (thesis ch. 3's
roofline analysis, applied to a forecast). One module per concern:

* :mod:`~perfcast.faces.report.analysis` — :func:`build_report` / :func:`report_request` gather, for
  one request on one device, the **prediction** (``perfcast predict``'s answer), the
  **kernels** it launches with their FLOPs, bytes, roofline bound (compute or memory) and
  predicted time — priced by the crossdevice operator model where it answered the time, else
  the predicted total split by roofline share (``operator_source``) — grouped by operator
  class, graph node and phase; the tensor simulation's **memory**; the **decisions** (largest
  batch that fits, MIG profile on MIG GPUs, cost and CO2e of ``iterations`` batches), each
  from the command that answers it (:func:`perfcast.decisions.answer.answer`);
* :mod:`~perfcast.faces.report.charts` — the roofline, top-operators and memory-timeline charts
  (matplotlib);
* :mod:`~perfcast.faces.report.text` — values as people read them (units, labels, intervals, the
  out-of-distribution verdict, grouped notes), shared with the web page;
* :mod:`~perfcast.faces.report.page` — :func:`render_html` (one page, charts embedded as ``data:``
  PNGs: it opens offline) and :func:`write_report`.
"""

from perfcast.faces.report.analysis import (
    PHASES,
    TOP_OPERATORS,
    Report,
    analyse_operators,
    build_report,
    check_mode,
    chosen_workload,
    decide,
    memory_of,
    peaks,
    report_request,
    values_for,
)
from perfcast.faces.report.charts import (
    CHARTS,
    chart_pngs,
    figure_png,
    memory_figure,
    operators_figure,
    roofline_figure,
)
from perfcast.faces.report.page import decisions_html, notes_html, render_html, write_report
from perfcast.faces.report.text import (
    QUANTITIES,
    fmt,
    interval_text,
    note_groups,
    ood_sentence,
    prediction_rows,
    quantity,
    source_text,
    with_unit,
)

__all__ = ["CHARTS", "PHASES", "QUANTITIES", "TOP_OPERATORS", "Report", "analyse_operators",
           "build_report", "chart_pngs", "check_mode", "chosen_workload", "decide",
           "decisions_html", "figure_png", "fmt", "interval_text", "memory_figure",
           "memory_of", "note_groups", "notes_html", "ood_sentence", "operators_figure",
           "peaks", "prediction_rows", "quantity", "render_html", "report_request",
           "roofline_figure", "source_text", "values_for", "with_unit", "write_report"]
