"""This machine, measured, for ``kernelsum`` (:mod:`perfcast.predictors.kernelsum`): the reference
probe of the machine its labels were measured on (:func:`local_dataset_reference`), which of its
terms each probe ratio scales (:func:`_column_kinds`) and the predictor's side of the probe
(:class:`MachineScaling`: whether to scale, the ratios at a thread count, the notes). The probe
itself is :mod:`perfcast.devices.probe`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.features.records import FeatureSet


def _number(v) -> float:
    """``pandas.to_numeric(v, errors="coerce")`` of one value (NaN when it is none)."""
    if v is None or isinstance(v, bool):
        return float("nan") if v is None else float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _threads(rows, default: int) -> np.ndarray:
    if "threads" not in rows.columns:
        return np.full(len(rows), default, dtype=np.int64)
    t = np.array([_number(v) for v in rows["threads"].tolist()], dtype=np.float64)
    t = np.where(np.isnan(t), default, t)
    return np.maximum(1, t.astype(np.int64))


#: Environment variable: ``off`` answers without this machine's probe (as ``probe="off"``).
PROBE_ENV = "PERFCAST_PROBE"
#: Op groups whose time is compute-bound on a CPU (scaled by the GEMM ratio); the others are
#: memory-bound (the copy ratio) — depthwise convolutions run at 1–17 GFLOP/s here
#: (reports/cpu/oracle.md), far from the GEMM peak, as streaming kernels do.
COMPUTE_GROUPS = ("conv", "gemm", "attention")


def _column_kinds(columns: tuple[str, ...]) -> list[tuple[str, str]]:
    """Per physics column, ``(ratio of its work part, ratio of its dispatch part)`` — keys of
    :func:`perfcast.devices.probe.time_ratios`."""
    out = []
    for c in columns:
        parts = c.split(".")
        back = "dispatch_bwd" if any(p in ("bwd", "backward") for p in parts) else "dispatch_fwd"
        if c == "step" or parts[0] == "nodes" or parts[-1] == "launches":
            out.append((back, back))
        elif parts[-1] == "compute" or (parts[-1] in ("fwd", "bwd")
                                        and parts[0] in COMPUTE_GROUPS):
            out.append(("compute", back))
        else:  # memory-bound groups, other.work (views and unmodelled nodes), optimizer.memory
            out.append(("memory", back))
    return out


def local_dataset_reference() -> dict[str, Any]:
    """The reference probe of the machine the project's CPU dataset was measured on, from its
    own records (:func:`perfcast.devices.probe.reference_from_records`): ``cpu/machine.json``
    and ``cpu/ops-t1.csv`` of :func:`perfcast.paths.local_datasets_dir`, and what its
    measurements recorded of the machine (``env_json`` of ``cpu/measurements.db``)."""
    import csv
    import sqlite3
    from collections import Counter

    from perfcast.devices.probe import reference_from_records
    from perfcast.paths import local_datasets_dir

    root = local_datasets_dir() / "cpu"
    try:
        machine = json.loads((root / "machine.json").read_text())
        with open(root / "ops-t1.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, ValueError) as exc:
        raise PerfcastError(f"kernelsum: the CPU dataset's machine records are unreadable "
                            f"({exc})") from None
    about: dict[str, Any] = {}
    try:
        con = sqlite3.connect(f"file:{root / 'measurements.db'}?mode=ro", uri=True)
        envs = Counter()
        for (e,) in con.execute("SELECT env_json FROM measurements WHERE device = 'cpu'"):
            d = json.loads(e) if e else {}
            envs[json.dumps({k: d.get(k) for k in ("cpu_model", "logical_cpus", "platform",
                                                   "torch")}, sort_keys=True)] += 1
        con.close()
        if envs:
            top, n = envs.most_common(1)[0]
            about = {**json.loads(top), "records": n, "of": sum(envs.values())}
    except (sqlite3.Error, ValueError):
        pass
    return reference_from_records(
        machine, rows, about=about,
        source="the CPU dataset's machine.json (measured "
               f"{machine.get('measured_at', '?')}) and ops-t1.csv")


#: The most one probe ratio scales a term (either way): the probe corrects for another machine
#: of the same kind, and a ratio beyond this is more likely a disturbed measurement.
MAX_RATIO = 2.0


def _bounded(ratios: dict[str, Any]) -> dict[str, Any]:
    """``ratios`` with each factor held within [1 / :data:`MAX_RATIO`, :data:`MAX_RATIO`]
    (``bounded`` lists those it held)."""
    out, held = dict(ratios), []
    for k in ("compute", "memory", "dispatch_fwd", "dispatch_bwd"):
        v = float(out[k])
        c = min(MAX_RATIO, max(1.0 / MAX_RATIO, v))
        if c != v:
            held.append(f"{k} {v:.3g} → {c:.3g}")
        out[k] = c
    out["bounded"] = held
    return out


class MachineScaling:
    """``kernelsum``'s answers scaled to this machine by its probe: mixed into
    :class:`~perfcast.predictors.kernelsum.KernelSumPredictor`, which provides ``p``,
    ``_profile``, ``_answer`` and ``reference_probe_``."""

    def probe_off(self) -> str:
        """Why this model's answers are not scaled by this machine's probe ("" when they are):
        ``probe="off"``, a model calibrated on this machine (``perfcast calibrate``: its answer
        is this machine's already), or no reference probe stored with the model."""
        import os

        if self.p("probe") == "off" or os.environ.get(PROBE_ENV, "").lower() == "off":
            return (f"not scaled to this machine (probe='off' or ${PROBE_ENV}=off): answered at "
                    f"the speed of the machine the model was trained on")
        cal = (getattr(self, "trained_on_", None) or {}).get("calibrated")
        if cal:
            return (f"calibrated on this machine by perfcast calibrate ({cal.get('records', '?')} "
                    f"measurements): answered as calibrated, not scaled by a machine probe")
        if getattr(self, "reference_probe_", None) is None:
            return ("no reference probe stored with this model (fitted on records other than "
                    "the project's CPU dataset): not scaled to this machine")
        return ""

    def probe_scaling(self, threads: int) -> dict[str, Any]:
        """This machine's probe at ``threads`` (:func:`perfcast.devices.probe.probe_for`:
        cached, or run now), the reference probe at ``threads`` and the time ratios
        (:func:`~perfcast.devices.probe.time_ratios`): ``{"here", "status", "why", "path",
        "ref", "ref_note", "ratios"}``, or ``{"error"}`` when the probe could not run (then
        nothing is scaled)."""
        from perfcast.devices import probe as P

        memo = self.__dict__.setdefault("_probe_memo", {})
        try:
            res = P.probe_for(int(threads))
        except Exception as exc:  # noqa: BLE001 - a failed probe leaves the answer unscaled
            return {"error": f"{type(exc).__name__}: {exc}"[:200]}
        key = (int(threads), str(res.path), res.probe.measured_at)
        if key not in memo:
            try:
                ref, ref_note = P.reference_at(self.reference_probe_, int(threads))
                memo[key] = {"ref": ref, "ref_note": ref_note,
                             "ratios": _bounded(P.time_ratios(res.probe, ref))}
            except (PerfcastError, KeyError, TypeError, ValueError) as exc:
                memo[key] = {"error": f"reference probe unusable ({exc})"}
        return {"here": res.probe, "status": res.status, "why": res.why, "path": res.path,
                **memo[key]}

    def _scalings(self, data: FeatureSet) -> dict[int, dict[str, Any]]:
        if self.probe_off():
            return {}
        th = _threads(data.rows, max(self._profile().gflops))
        return {int(t): self.probe_scaling(int(t)) for t in np.unique(th)}

    def answer_notes(self, data: FeatureSet) -> list[str]:
        """What the answer for ``data``'s first record owes to this machine's probe: both
        probes, the ratios applied, whether the probe ran now or came from the cache (or why
        nothing was scaled)."""
        off = self.probe_off()
        if off:
            return [] if off.startswith("no reference probe") else [off]
        if not len(data):
            return []
        th = int(_threads(data.rows, max(self._profile().gflops))[0])
        info = self.probe_scaling(th)
        if "error" in info:
            return [f"this machine's probe failed ({info['error']}): answered at the speed of "
                    f"the machine the model was trained on; perfcast calibrate measures this "
                    f"machine"]
        here, ref, r = info["here"], info["ref"], info["ratios"]
        if info["status"] == "measured":
            got = (f"this machine probed on its first CPU prediction ({here.seconds:.1f} s: "
                   f"{info['why']}), cached in {info['path']}")
        else:
            got = f"this machine's probe reused from the cache ({info['path']})"
        first = data.subset([0]) if len(data) > 1 else data
        raw = float(self._answer(first, scale=False)[0])
        scaled = float(self._answer(first, scale=True)[0])
        about = self.reference_probe_.get("about") or {}
        ref_name = ", ".join(f"{v}" for v in (about.get("cpu_model"), about.get("platform"))
                             if v) or "the machine the model was trained on"
        notes = [got,
                 f"this machine, probed {here.measured_at}: {here.describe()}",
                 f"the training machine ({ref_name}; {self.reference_probe_.get('source')}): "
                 f"{ref.describe()}" + (f" — {info['ref_note']}" if info["ref_note"] else ""),
                 f"scaled by the probes' ratio: compute-bound terms (dense and pointwise "
                 f"convolution, GEMM, attention) ×{r['compute']:.3g} (GEMM GFLOP/s at "
                 f"N = {', '.join(map(str, r['gemm_sizes']))}), memory-bound terms "
                 f"(normalisation, element-wise, pooling, copy, depthwise convolution, the "
                 f"optimizer) ×{r['memory']:.3g} (copy GB/s), per-op dispatch ×"
                 f"{r['dispatch_fwd']:.3g} forward / ×{r['dispatch_bwd']:.3g} backward (tiny-op "
                 f"µs): {raw:,.4g} → {scaled:,.4g} ms at this batch before routing "
                 f"(×{scaled / raw:.3g}); perfcast calibrate (measuring models on this machine) "
                 f"remains the full remedy"]
        if r.get("bounded"):
            notes.append(f"probe ratios held within ×{1 / MAX_RATIO:g}–×{MAX_RATIO:g} (a larger "
                         f"one is more likely a disturbed measurement): {'; '.join(r['bounded'])}")
        return notes
