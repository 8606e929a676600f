"""How a forecast reads to people, shared by the report and the web page: numbers with their
units (:func:`fmt`, :func:`with_unit`), each prediction key's label (:data:`QUANTITIES`), the
rows of a prediction (:func:`prediction_rows`: value, interval, source, the out-of-distribution
verdict as a sentence) and the notes grouped by the quantity they are about
(:func:`note_groups`)."""

from __future__ import annotations

import math
import re
from typing import Any


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


#: Keys of a prediction dict that describe the request or its provenance, not a value.
_REQUEST_KEYS = ("model", "device", "mode", "precision", "batch_size", "input_size", "seq_len",
                 "predictor", "trained_on", "notes", "framework", "engine", "input_len",
                 "output_len", "tensor_parallel", "tf32", "kind", "gpus")
#: Keys shown through others: the interval of each value (``intervals``, ``coverage``), the
#: out-of-distribution verdict (:func:`ood_sentence`) and the throughput every answer also has
#: under its own name (``throughput_per_s`` in ``throughput_unit``: samples/s or tokens/s).
_SHOWN_ELSEWHERE = ("intervals", "coverage", "ood", "throughput_per_s", "throughput_unit")

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


__all__ = ["QUANTITIES", "fmt", "interval_text", "note_groups", "ood_sentence",
           "prediction_rows", "quantity", "source_text", "with_unit"]
