"""Answers as strict JSON (RFC 8259) — the one encoder of ``--json`` and ``perfcast serve``."""

from __future__ import annotations

import json


def strict_json(obj) -> str:
    """``obj`` as strict JSON (RFC 8259: no ``NaN`` / ``Infinity``, which most parsers refuse):
    a non-finite number becomes ``null`` and, when ``obj`` is a dict, a note in its ``notes``
    list names the key (e.g. the hours of a job whose time per batch overflows)."""
    import math

    bad: list[str] = []

    def clean(x, where: str):
        if isinstance(x, float) and not math.isfinite(x):
            bad.append(where or "value")
            return None
        if isinstance(x, dict):
            return {k: clean(v, f"{where}.{k}" if where else str(k)) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v, f"{where}[{i}]") for i, v in enumerate(x)]
        return x

    obj = clean(obj, "")
    if bad and isinstance(obj, dict) and isinstance(obj.get("notes", []), list):
        obj["notes"] = [*obj.get("notes", []),
                        f"{', '.join(bad)}: not a finite number (overflow, or an unbounded "
                        f"value) — null"]
    return json.dumps(obj, allow_nan=False)


__all__ = ["strict_json"]
