"""Anchors: what the GPUs with their own measurements say about a request on another GPU.

Two rules keep every time answer consistent with the GPUs perfcast has labels for
(:func:`apply`, called by :mod:`perfcast.routing` after a time is answered and bounded):

* **Anchor transfer** (a GPU without labels, answered by ``crossdevice``): each *anchor* — a
  GPU with a shipped model of its own for the request's mode and precision, whose training
  data cover the request's kind of model — answers the request itself (``t_A``, its learned and
  bounded time), and the physics base prices it there too (``base_A``). Its residual
  ``ρ_A = log(t_A / base_A)`` is how far the base is off *for this model*; the answer on the
  target GPU is ``base_X · exp(w · mean_A ρ_A)``: the base's ratio between the two GPUs — per
  kernel, compute-bound work by the peak of the units that run it, memory-bound work by the
  bandwidth, the host's dispatch unscaled — applied to what the anchors learned. ``w`` per
  regime (:data:`ANCHOR_WEIGHTS`) was chosen on held-out GPUs (``reports/crossdevice/``).
* **Dominance**: a GPU at least as good as a labeled GPU in every spec number
  (:func:`dominates`) is never answered slower than that GPU's own answer for the request —
  a learned per-device answer included (an RTX 4090 is never slower than an RTX 3090).

Both are monotone in the target GPU's numbers (the anchors and ``w`` do not depend on them; a
better GPU dominates a superset), so they keep the physics base's guarantee.
"""

from __future__ import annotations

import math
from typing import Any

from perfcast._memo import Memo

#: Spec numbers compared by :func:`dominates` without a precision (higher is better for every
#: one): those some model reads. FP64, which no request perfcast answers runs in, is left out
#: (spec sheets of deep-learning GPUs often omit it), and so are the cores per SM and the
#: clock, which no model reads (the FP32 peak they multiply to is compared).
SPEC_NUMBERS = ("peak_fp32_tflops", "peak_fp32_matrix_tflops", "peak_tf32_tflops",
                "peak_fp16_tflops", "peak_bf16_tflops", "memory_gb",
                "bandwidth_gbs", "sm_count", "l2_mb", "tdp_w")
#: Weight of the anchors' mean residual per regime (precision of the request), chosen by the
#: held-out evaluation of ``benchmarks/crossdevice_report.py`` (reports/crossdevice/README.md,
#: "Anchor transfer per regime": half-precision CNNs 1, fp32 CNNs ¾ — transformers 0, but no
#: anchor covers them; bf16, never measured, takes the half-precision weight).
ANCHOR_WEIGHTS = {"amp": 1.0, "fp16": 1.0, "bf16": 1.0, "fp32": 0.75}
#: Model kinds whose requests an anchor's learned model covers (the shipped per-device models
#: learned from timm and torchvision image models).
ANCHOR_KINDS = ("timm", "torchvision")
#: Answer bound names (``Answer.bounds``).
ANCHOR_TRANSFER = "anchor-transfer"
DOMINANCE_BOUND = "time-dominance"


def dominates(x, a, precision: str | None = None, tf32: str = "default") -> bool:
    """Whether GPU ``x`` is at least as good as GPU ``a`` for a run at ``precision``
    (:data:`perfcast.workload.PRECISIONS`): in the peak of the units its GEMMs and its
    convolutions run on there (:func:`perfcast.predictors.crossdevice.peak_unit` — the FP16 /
    bf16 tensor peak for amp / fp16 / bf16 where the GPU has tensor cores; for fp32, TF32 for
    the convolutions where the GPU has TF32 units and ``tf32`` is not ``off`` (PyTorch's
    default) and the FP32 peak for the matmuls unless ``tf32="on"``, FP32 matrix cores on AMD
    CDNA; else FP32), in memory bandwidth and in memory. ``precision=None``: in every spec
    number ``a`` states (:data:`SPEC_NUMBERS`; a number ``a`` states and ``x`` does not makes
    them incomparable). Derived fields are filled first on both
    (:func:`perfcast.devices.derive.complete`), so a spec sheet without a TF32 peak or a
    compute capability is compared by the derived ones."""
    from perfcast.devices.derive import complete

    if not (x.is_gpu and a.is_gpu) or x.key == a.key:
        return False
    x, a = complete(x)[0], complete(a)[0]

    def at_least(vx, va) -> bool:
        return va is None or (vx is not None and float(vx) >= float(va))

    if precision is None:
        return all(at_least(getattr(x, name), getattr(a, name)) for name in SPEC_NUMBERS)
    from perfcast.predictors.crossdevice import peak_unit

    for kc in ("gemm", "conv"):
        vx = x.peak_tflops(peak_unit(kc, precision, x, tf32))
        va = a.peak_tflops(peak_unit(kc, precision, a, tf32))
        if vx is None or va is None or float(vx) < float(va):
            return False
    return all(getattr(x, n) is not None and at_least(getattr(x, n), getattr(a, n))
               for n in ("bandwidth_gbs", "memory_gb"))


def anchor_entries(mode: str, precision: str) -> list[dict[str, Any]]:
    """The first shipped time entry of every GPU with models of its own for (mode, precision)."""
    from perfcast.devices import get_device
    from perfcast import shipped
    from perfcast.errors import PerfcastError

    out, seen = [], set()
    for e in shipped.manifest():
        if (e["mode"], e["precision"]) != (mode, precision) or "time_ms" not in e["targets"] \
                or e["device"] in seen or e.get("memsim"):
            continue
        try:
            if not get_device(e["device"]).is_gpu:
                continue
        except PerfcastError:
            continue
        seen.add(e["device"])
        out.append(e)
    return out


def _anchor_requests(req):
    """``(entry, sub-request on the anchor GPU, its learned predictor)`` per anchor of ``req``
    (a :class:`perfcast.routing._Request`); the sub-requests share its graph, plan and cost."""
    from perfcast.devices import get_device
    from perfcast import shipped

    if req.w.precision is None:
        return []
    out = []
    for e in anchor_entries(req.w.mode, req.w.precision):
        sub = type(req)(req.w, get_device(e["device"]), req.graph, [], req.use_cache, None)
        sub.data, sub.plan, sub.cost = req.data, req.plan, req.cost  # the same graph
        sub.plan_key = req.plan_key
        out.append((e, sub, shipped.load_entry(e)))
    return out


def finals(req, answer, time_bounds) -> dict[str, float]:
    """``{anchor GPU: its own final time answer for the request}`` (learned and bounded by
    ``time_bounds(answer, sub_request)`` — routing's; each capped by the anchors it dominates),
    cached on the request. ``answer``: the ``time_ms`` answer being routed (its class makes the
    anchors')."""
    cached = getattr(req, "_anchor_finals", None)
    if cached is not None:
        return cached
    from perfcast.devices import get_device

    out: dict[str, float] = {}
    for _e, sub, pred in _anchor_requests(req):
        ans = type(answer)("time_ms")
        ans.value = sub.run(pred, False, "time_ms")
        if ans.value is None:
            continue
        ans.source = "learned"
        time_bounds(ans, sub)
        out[sub.device.key] = float(ans.value)
    devs = {k: get_device(k) for k in out}
    tf32 = getattr(req.w, "tf32", None) or "default"
    changed = True
    while changed:  # a few GPUs: cap until stable
        changed = False
        for k in out:
            for j in out:
                if dominates(devs[k], devs[j], req.w.precision, tf32) and out[j] < out[k]:
                    out[k], changed = out[j], True
    req._anchor_finals = out
    return out


class Anchored:
    """The crossdevice predictor with the anchors' residual applied (module docstring): the
    predictor routing asks, so its batch-grid bounds hold for the anchored answer too. One per
    (base predictor, request without its batch, weight) in the process (:func:`anchored`), so
    routing's batch-grid cache finds it again."""

    learns = True
    extrapolates = True  # the physics base × in-range residuals of the anchors

    def __init__(self, base, grids: dict, batches, weight: float) -> None:
        import numpy as np

        self.base, self.grids, self.weight = base, grids, float(weight)
        self.batches = np.asarray(batches, dtype=np.float64)
        self.name = base.name
        self.targets_ = base.targets_
        self.trained_on_ = base.trained_on_
        self.uses_graphs, self.uses_plans = base.uses_graphs, base.uses_plans

    def residual(self, batch):
        """Mean anchor residual ``log(t_A / base_A)`` at ``batch`` (log-batch interpolation of
        the grid; NaN without anchors)."""
        import numpy as np

        vals = []
        for r in self.grids.values():
            ok = np.isfinite(r)
            if ok.sum() >= 2:
                vals.append(np.interp(np.log(batch), np.log(self.batches[ok]), r[ok]))
        return np.mean(vals, axis=0) if vals else np.full(np.shape(batch), np.nan)

    def predict(self, data):
        import numpy as np

        out = self.base.predict(data).copy()
        j = self.targets_.index("time_ms")
        out[:, j] *= self.factor(data.rows["batch_size"].to_numpy(np.float64))
        # inside the base's physical bounds: the roofline and the measured slowdown
        lo, hi = self.base.bounds(data).T
        out[:, j] = np.minimum(np.maximum(out[:, j], lo), np.maximum(hi, lo))
        return out

    def factor(self, batch):
        """``exp(w · ρ)`` at ``batch`` (1 where no anchor answers)."""
        import numpy as np

        rho = self.residual(batch)
        return np.exp(self.weight * np.where(np.isfinite(rho), rho, 0.0))


#: :class:`Anchored` predictors of this process by (base, request without batch, weight).
_ANCHORED = Memo(256)


def anchored(base_pred, req):
    """``base_pred`` anchored for the request, or ``None`` when no anchor covers it."""
    import numpy as np

    if req.w.model.kind not in ANCHOR_KINDS or not req.device.is_gpu:
        return None
    w = ANCHOR_WEIGHTS.get(str(req.w.precision), 0.0)
    if w <= 0:
        return None
    key = (id(base_pred), req.w.replace(batch_size=1), w)
    hit = _ANCHORED.get(key)
    if hit is not None and hit.base is base_pred:
        return hit if hit.grids else None
    grids, batches = {}, None
    for _e, sub, pred in _anchor_requests(req):
        # the anchor's answer as routing gives it: its learned model inside the model's
        # support, the physics base outside — so only in-range residuals carry over
        batches, learned = sub.curve(pred, "time_ms")[:2]
        base = sub.grid(base_pred, "time_ms")[1]
        with np.errstate(all="ignore"):
            grids[sub.device.key] = np.log(learned / base)
    out = Anchored(base_pred, grids, batches if batches is not None else [1.0], w)
    _ANCHORED.put(key, out)
    return out if grids else None


def dominance(ans, req, time_bounds) -> None:
    """Cap the bounded time answer at the final answer of every anchor GPU the request's GPU
    dominates for the request's precision (:func:`dominates`: the peak its kernels run at,
    bandwidth, memory); ``time_bounds``: routing's bounds of a time answer. A derived spec field
    the comparison read is said in ``notes``."""
    from perfcast.devices import get_device

    if ans.value is None or not req.device.is_gpu or req.w.model.kind == "nn.Module":
        return
    prec = req.w.precision
    tf32 = getattr(req.w, "tf32", None) or "default"
    below = [(t, k) for k, t in finals(req, ans, time_bounds).items()
             if dominates(req.device, get_device(k), prec, tf32)]
    if below:
        t, k = min(below)
        floor = req.time_floor()  # never below what this GPU can physically do
        if floor is not None:
            t = max(t, floor)
        if t < ans.value:
            from perfcast.devices.derive import complete, notes_for

            if prec is None:
                what, fields = "every spec number", set(SPEC_NUMBERS)
            else:
                from perfcast.predictors.crossdevice import peak_unit

                x = complete(req.device)[0]
                units = sorted({peak_unit(kc, prec, x, tf32) for kc in ("gemm", "conv")})
                what = (f"what a {prec} run uses (the {' / '.join(units)} peak of its GEMMs and "
                        f"convolutions, memory bandwidth, memory)")
                fields = {f"peak_{u}_tflops" for u in units} | {"compute_capability"}
            msg = (f"time_ms: {ans.value:,.4g} ms would be slower than {k}'s own answer "
                   f"{t:,.4g} ms, and {req.device.key} is at least as good as {k} in {what} — "
                   f"capped at it")
            req.notes.append(msg)
            ans.notes.append(msg)
            for n in notes_for(req.device, fields):
                if f"time_ms: {n}" not in req.notes:
                    req.notes.append(f"time_ms: {n}")
            ans.value = float(t)
            ans.bounds.append(DOMINANCE_BOUND)


__all__ = ["ANCHOR_KINDS", "ANCHOR_WEIGHTS", "SPEC_NUMBERS", "Anchored", "anchored",
           "dominance", "dominates", "finals"]
