"""What the decisions share: the request a public function builds from its keywords, the
device of a request, and the JSON of a result whose mode-specific fields are left out where
they do not apply."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

#: Keywords of the public functions whose value a :class:`~perfcast.workload.Workload` given as
#: the model already holds (they were ignored beside one, and still are).
_WORKLOAD_OWN = ("mode", "precision", "optimizer")


def request_for(command: str, model: Any, **options: Any):
    """The validated :class:`~perfcast.request.Request` of ``command`` that a public decision
    function (``max_batch_size``, ``rank`` …) answers: its keywords by field name (or alias),
    ``None`` = not given. Beside a ready :class:`~perfcast.workload.Workload` the mode,
    precision and optimizer are the workload's own."""
    from perfcast.api import request_of
    from perfcast.workload import Workload

    given = {k: v for k, v in options.items() if v is not None}
    if isinstance(model, Workload):
        given = {k: v for k, v in given.items() if k not in _WORKLOAD_OWN}
    return request_of(command, model, **given)


def device_of(req):
    """The :class:`~perfcast.devices.Device` of ``req`` (a registry key or a spec file)."""
    from perfcast.devices import get_device
    from perfcast.errors import PerfcastError

    if req.device is None:
        raise PerfcastError(f"perfcast {req.command} needs --device")
    return get_device(req.device)


def given_or(req, name: str, default: Any) -> Any:
    """Field ``name``'s value when the request gives it, else ``default`` (a decision whose
    knob means something else for a mode when left out)."""
    return req.value(name) if name in req.given else default


def result_dict(obj: Any, optional: tuple[str, ...]) -> dict[str, Any]:
    """``asdict(obj)`` without the ``optional`` keys that are ``None`` (the fields of another
    mode: a layout's GPUs, a generation request's lengths …)."""
    d = asdict(obj)
    for k in optional:
        if d.get(k) is None:
            d.pop(k, None)
    return d


__all__ = ["device_of", "given_or", "request_for", "result_dict"]
