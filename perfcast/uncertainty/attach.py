"""A prediction annotated with its intervals (each low bound raised to physics) and its OOD verdict, and the bound a decision plans with (:func:`pick`)."""

from __future__ import annotations


import math



from typing import Any


from perfcast.workload import RISKS  # the decisions' risk attitudes: which bound they plan with
from perfcast.uncertainty.ood import DEFAULT_COVERAGE, INTERVAL_KEYS, descriptor, device_vector, input_per_sample, op_counts_of_graph  # noqa: F401
from perfcast.uncertainty.conformal import calibrations, find_calibration, interval  # noqa: F401


#: ``Answer.model_id`` of the GPU tensor-memory simulation (+ runtime overhead): not learned, but
#: calibrated like a model on the measured GPUMemNet runs.
SIMULATION_GPU = "simulation:gpu"


def request_features(req) -> dict[str, Any]:
    """What the OOD score reads of a routed request (:class:`perfcast.routing._Request`)."""
    counts = op_counts_of_graph(req.graph)
    return {"desc": descriptor(req.summary, counts), "op_counts": counts,
            "batch": float(req.w.batch_size or 1), "input_elements": input_per_sample(req.summary),
            "device": (req.device.key, device_vector(req.device) if req.device.is_gpu else None)}


def annotate(pred, route, coverage: float = DEFAULT_COVERAGE) -> None:
    """Fill ``pred``'s ``<key>_low`` / ``<key>_high``, ``coverage``, ``intervals`` and ``ood``
    from the calibrations of the models that answered (see the module docstring)."""
    if not 0 < coverage < 1:
        from perfcast.errors import PerfcastError

        raise PerfcastError(f"coverage must be between 0 and 1 (exclusive), got {coverage}")
    answers = route.answers if route is not None else {}
    req = getattr(route, "request", None)
    feats = None
    intervals: dict[str, Any] = {}
    ood_scores, ood_reasons, flagged, thresholds = [], [], False, []
    for key in INTERVAL_KEYS:
        ans = answers.get(key)
        value = getattr(pred, key, None)
        if ans is None or value is None:
            continue
        cal = find_calibration(getattr(ans, "model_id", None), key)
        if cal is None:
            why = ("a roofline bound, not a learned estimate" if ans.source == "roofline" else
                   "the tensor-memory simulation, what the CPU measurements record"
                   if ans.source == "simulation" and not getattr(ans, "model_id", None) else
                   "no calibration stored for the GPU tensor-memory simulation"
                   if ans.source == "simulation"
                   else "a predictor you saved: no held-out calibration" if ans.source == "user"
                   else f"no calibration stored for the {ans.predictor} model")
            intervals[key] = {"coverage": None, "note": f"{key}: no interval — {why}"}
            continue
        score, reasons, regime_d = None, [], None
        if cal.adaptive is not None and req is not None:
            try:
                if feats is None:
                    feats = request_features(req)
                regime_d, reasons = _adaptive(cal, req, feats, coverage)
            except Exception as exc:  # noqa: BLE001 - the regime refines; it never sinks one
                regime_d = None
                pred.notes.append(f"{key}: no regime for this request ({type(exc).__name__}); "
                                  f"the pooled interval of the farthest bucket")
        if regime_d is not None:
            q_lo, q_hi, bucket = regime_d["q_lo"], regime_d["q_hi"], None
            score = regime_d["sigma"]
        elif cal.reference is not None and req is not None:
            try:
                if feats is None:
                    feats = request_features(req)
                device = feats["device"] if cal.reference.devices else None
                score, reasons = cal.reference.score(feats["desc"], feats["op_counts"],
                                                     feats["batch"], feats["input_elements"],
                                                     device)
            except Exception as exc:  # noqa: BLE001 - the score refines; it never sinks a prediction
                score, reasons = None, []
                pred.notes.append(f"ood: no score for this request ({type(exc).__name__}); "
                                  f"the interval is the farthest bucket's")
        if regime_d is None:
            unscored = score is None and cal.reference is not None and req is not None
            q_lo, q_hi, bucket = cal.bounds(math.inf if unscored else score, coverage)
        if not (math.isfinite(q_lo) and math.isfinite(q_hi)):
            intervals[key] = {"coverage": None,
                              "note": f"{key}: no interval — {cal.n} calibration records are too "
                                      f"few for a {coverage:.0%} interval (ask a lower "
                                      f"--coverage)"}
            continue
        lo, hi = interval(float(value), q_lo, q_hi)
        lo = max(lo, _floor(ans, key, req))
        lo = min(lo, float(value))
        top = _ceiling(key, req, pred)
        if hi > top:
            hi = max(top, float(value))
            pred.notes.append(f"{key}: the upper bound is capped at {hi:,.4g}, what the GPU "
                              f"draws at most (min(power limit, TDP)) over the upper time bound")
        setattr(pred, f"{key}_low", lo)
        setattr(pred, f"{key}_high", hi)
        d = {"coverage": coverage, "low": lo, "high": hi, "calibration_records": cal.n,
             "calibrated_on": cal.meta.get("calibrated_on")}
        if regime_d is not None:
            d.update(regime=regime_d["regime"], regime_records=regime_d["regime_records"],
                     expected_error=round(score, 4))
            ood_scores.append(score)
            ood_reasons += [f"{key}: {r}" for r in reasons]
            if regime_d["beyond"]:
                d["note"] = (f"{key}: beyond every calibration record in "
                             f"{', '.join(regime_d['beyond'])} — flagged; the difficulty "
                             f"reads them at the calibration range's edge (it does not "
                             f"extrapolate), so the interval may cover less than {coverage:.0%}")
            if cal.adaptive.threshold is not None:
                thresholds.append(cal.adaptive.threshold)
            flagged = flagged or regime_d["flagged"]
        else:
            d.update(bucket=bucket, buckets=len(cal.residuals))
        if score is not None and regime_d is None:
            d["ood_score"] = round(score, 3)
            if cal.max_score is not None and score > cal.max_score:
                d["note"] = (f"{key}: OOD score {score:.1f} is beyond every calibration record "
                             f"(≤ {cal.max_score:.1f}) — the interval is the widest calibrated "
                             f"one and may cover less than {coverage:.0%}")
            ood_scores.append(score)
            ood_reasons += [f"{key}: {r}" for r in reasons]
            if cal.threshold is not None:
                thresholds.append(cal.threshold)
                flagged = flagged or score >= cal.threshold
        intervals[key] = d
    pred.intervals = intervals
    pred.coverage = coverage if any(v.get("coverage") for v in intervals.values()) else None
    for v in intervals.values():
        if v.get("note"):
            pred.notes.append(v["note"])
    if ood_scores:
        pred.ood = {"score": round(max(ood_scores), 3), "reasons": ood_reasons,
                    "threshold": round(min(thresholds), 3) if thresholds else None,
                    "flagged": bool(flagged)}
    else:
        pred.ood = {"score": None, "reasons": [], "threshold": None, "flagged": False}
    if pred.fits and pred.memory_mb_high is not None and pred.capacity_mb is not None \
            and pred.memory_mb_high > pred.capacity_mb:
        pred.notes.append(f"fits: yes at the central estimate, but the {coverage:.0%} upper "
                          f"bound {pred.memory_mb_high:,.0f} MiB exceeds the "
                          f"{pred.capacity_mb:,.0f} MiB (fit / mig plan with it: --risk)")


def _adaptive(cal, req, feats: dict[str, Any], coverage: float) -> tuple[dict, list[str]]:
    """The regime of a request for ``cal``'s model, its difficulty features and the adaptive
    bounds (:meth:`perfcast.uncertainty.regimes.RegimeCalibration.bounds`) with the reasons of
    its OOD parts."""
    from perfcast.uncertainty.regimes import feature_vector, stratum_of

    ad, ref, w = cal.adaptive, cal.reference, req.w
    reasons: list[str] = []
    parts = ref.parts(feats["desc"], feats["op_counts"], feats["batch"],
                      feats["input_elements"], feats["device"] if ref.devices else None,
                      reasons=reasons) if ref is not None else {}
    spec = w.model.canonical  # as the records name it: `resnet50` is `timm:resnet50`
    regime = ad.regime(req.device.key, spec)
    x = feature_vector(parts, feats["batch"], w.mode, w.precision, spec.startswith("hf:"),
                       regime)
    b = ad.bounds(x, regime, coverage, stratum_of(req.device.key, w.mode, w.precision),
                  w.precision)
    b["regime"] = regime
    if regime.endswith("family-unseen"):
        reasons.append(f"model family of {spec} not among the trained ones")
    return b, reasons


def _floor(ans, key: str, req) -> float:
    """The physical floor a low bound must not cross (0 when unknown)."""
    if req is None:
        return 0.0
    try:
        if key == "time_ms":
            return float(req.time_floor() or 0.0)
        if key == "memory_mb":  # a GPU's answer holds the runtime too (CUDA context …)
            return float(req.memory_floor()) + float(getattr(req, "overhead_floor_mb", 0.0))
        if key == "energy_j" and req.device.is_gpu:
            # a step draws at least idle power for at least the roofline time
            from perfcast.energy import power_bounds

            idle = power_bounds(req.device)[0]
            t = req.time_floor()
            return float(idle) * float(t) / 1e3 if idle and t else 0.0
    except Exception:  # noqa: BLE001 - a floor is a refinement, never a failure
        return 0.0
    return 0.0


def _ceiling(key: str, req, pred) -> float:
    """The physical ceiling a high bound must not cross (infinite when unknown): for energy
    per step, the most the GPU may draw (min(power limit, TDP)) over the time interval's upper
    bound — the energy calibration (end-to-end Zeus epochs, data loading included) is wider
    than what the time interval allows."""
    t_hi = getattr(pred, "time_ms_high", None)
    if key != "energy_j" or req is None or not t_hi:
        return math.inf
    try:
        if not req.device.is_gpu:
            return math.inf
        from perfcast.energy import bounded_power

        return bounded_power(req.device, math.inf, req.power_limit_w) * float(t_hi) / 1e3
    except Exception:  # noqa: BLE001 - a ceiling is a refinement, never a failure
        return math.inf


def pick(pred, key: str, risk: str) -> float | None:
    """The value of ``key`` a decision plans with: ``safe`` the upper bound (the lower one for
    a throughput-like key), ``central`` the point, ``optimistic`` the lower bound; the point when
    no interval exists."""
    if risk not in RISKS:
        from perfcast.errors import unknown_choice

        raise unknown_choice("risk", risk, RISKS)
    v = getattr(pred, key, None)
    if risk == "central" or v is None:
        return v
    b = getattr(pred, f"{key}_{'high' if risk == 'safe' else 'low'}", None)
    return v if b is None else b
