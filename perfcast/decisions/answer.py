"""One entry for every surface: :func:`answer` takes a command and its options by field name
(:data:`perfcast.request.fields.FIELDS`), builds the one validated
:class:`~perfcast.request.Request` and returns the command's answer — an
:class:`~perfcast.request.estimate.Estimate` for ``predict``, a decision's result for the others
(each with ``to_dict()``). The command line, ``perfcast serve`` and the web page all call it, so
the same options give the same JSON on each.
"""

from __future__ import annotations

from typing import Any

from perfcast.errors import PerfcastError

#: The commands :func:`answer` serves, each with its function (module, name).
DECISIONS = {"fit": ("perfcast.decisions.fit", "fit_request"),
             "cost": ("perfcast.decisions.cost", "cost_request"),
             "rank": ("perfcast.decisions.rank", "rank_request"),
             "mig": ("perfcast.decisions.mig", "mig_request"),
             "power-limit": ("perfcast.decisions.power_limit", "power_limit_request"),
             "plan": ("perfcast.decisions.plan", "plan_request")}
COMMANDS = ("predict", *DECISIONS)
#: Commands whose options are request fields but whose answer is not here (perfcast memory).
PARSED_ONLY = ("memory", "report")


def request(command: str, values: dict[str, Any]):
    """The validated request of ``command`` (the one :meth:`~perfcast.request.Request.of`)."""
    from perfcast.request import Request

    if command not in COMMANDS + PARSED_ONLY:
        raise PerfcastError(f"unknown command {command!r} (commands: {', '.join(COMMANDS)})")
    values = dict(values)
    model = values.pop("model", None)
    return Request.build(command, model, **values)


def answer(command: str, values: dict[str, Any], *, progress=None,
           overlap_simulation: bool = False):
    """The answer of ``command`` with ``values`` (module docstring). ``progress``: a
    ``progress(stage, i, n)`` callback for the long searches (plan); ``overlap_simulation``:
    a fresh process may fork the memory simulation while the graph is built."""
    import importlib

    req = request(command, values)
    if command == "predict":
        from perfcast.request.engines import estimate

        est = estimate(req, overlap_simulation=overlap_simulation)
        if req.options.store:
            if est.kind != "single":
                raise PerfcastError("--store holds one device's measured steps; it does not "
                                    "apply to --mode generate or a layout over GPUs")
            from perfcast.query import apply_measurements
            from perfcast.request.estimate import Estimate

            est = Estimate.of(apply_measurements(est.details, req.options.store,
                                                 threads=req.options.threads,
                                                 optimizer=req.workload.optimizer))
        return est
    module, name = DECISIONS[command]
    fn = getattr(importlib.import_module(module), name)
    return fn(req, progress=progress) if command == "plan" else fn(req)


__all__ = ["COMMANDS", "DECISIONS", "answer", "request"]
