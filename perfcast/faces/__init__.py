"""The faces: what a user talks to, each over one request (:mod:`perfcast.request`) and one
answer (:func:`perfcast.decisions.answer.answer`).

* :mod:`perfcast.faces.cli` — the ``perfcast`` command (one module per command);
* :mod:`perfcast.faces.serve` — ``perfcast serve``, the HTTP JSON API;
* :mod:`perfcast.faces.ui` — ``perfcast ui``, the web page;
* :mod:`perfcast.faces.report` — ``perfcast report``, the HTML report.

Nothing is imported here: ``import perfcast.faces.cli`` stays light.
"""
