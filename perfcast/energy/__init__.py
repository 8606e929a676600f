"""Power and energy, in one code path: **energy = power × devices × time**, with each device's
average board power bounded to ``[idle, min(power limit, TDP)]``.

Every energy perfcast gives — ``perfcast predict`` (any model, any GPU), the LLM generation
path (:mod:`perfcast.generation`, through :mod:`perfcast.llm.energy`: prefill and decode),
``cost``, ``rank``, ``plan`` and ``power-limit`` — goes through this module: its bounds
(:func:`power_bounds`), its power-limit range (:func:`limit_range`, :func:`check_power_limit`),
its limit response (:meth:`PowerModel.at_limit`, :meth:`PowerModel.slowdown`) and
:func:`energy_j`.

**One power model for every kind of work** (:class:`PowerModel`, shipped as
``perfcast/shipped/power_model.json``, loaded by ``perfcast.shipped.load_shipped("power-model")``
— the ``llm-phase-power`` id reads the same file; built by ``perfcast train --recipe power --out
perfcast/shipped``, judged in ``reports/energy/`` and ``reports/llm/serving.md``). One class,
one bound, one limit response, one energy = power × devices × time; its coefficients depend on
the **kind of work** as well as on the architecture family, each kind fitted on the power
measurements of that kind only:

* **a step of a model graph** (training or inference: ``perfcast predict``, ``cost``, ``rank``,
  ``plan``, ``power-limit``; :meth:`PowerModel.unconstrained_power`, :meth:`PowerModel.step`)
  — the *activity* (the fraction of ``TDP − idle`` drawn above idle) is a logistic function of
  the step's :data:`FEATURES` (:func:`step_features`: log10 of the achieved fractions of the
  peak FLOP/s, of the DRAM bandwidth and of the time spent launching kernels, clipped to
  [1e-4, 4]; the step's arithmetic intensity over the device's ridge point; log2 of the batch;
  half precision), fitted on the Zeus training traces; each family's intercept shrunk towards
  the pooled one. A logistic of *log* utilisations responds to a predicted time that is off by
  a factor gently (a power of the factor), where a saturating ``h(u)`` of the linear
  utilisation drives a step predicted too short to TDP — reports/energy/power_model_kinds.md;
* **a phase of an LLM served by an engine** (prefill, decode: :meth:`PowerModel.power`) —
  ``P₀ = idle + TDP · (static + c · h(compute util) + c_memory · h(memory util))``, *compute
  util* = FLOPs ÷ (time × the 16-bit tensor peak), *memory util* = DRAM bytes ÷ (time ×
  bandwidth), both clipped to [0, 1], ``h(u) = ln(1 + u/u₀) / ln(1 + 1/u₀)`` (``h(0) = 0``,
  ``h(1) = 1``), ``static``, ``c`` (``c_tensor``) and ``c_memory`` fractions of TDP, fitted on
  ML.ENERGY v2's vLLM serving runs per phase; each family's coefficients shrunk towards the
  pooled fit.

Either kind's time is the **predicted** one at answer time (never a label). An unseen family
takes the pooled coefficients (:meth:`PowerModel.coefficients`, said in :meth:`PowerModel.note`
with the fit that answered).

Physics of a power limit ``L`` (learned from the Zeus traces): a board that draws ``P₀`` at its
default limit (TDP) draws ``P(L) = P₀·σ(L)/σ(TDP)``, ``σ(L) = (1 + (c·L/P₀)⁻ᵏ)^(-1/k)`` — a soft
minimum of ``P₀`` and the limit (the regulator caps the *peaks*, so the average falls below
``P₀`` already when ``L`` is a little above it) — and the step slows as the power is cut:
``T(L) / T₀ = exp(γ·(ln(P₀ / P(L)))^β)``. Idle power is the spec's ``idle_w`` when a device has
one, else :data:`IDLE_FRACTION_OF_TDP` × TDP — an assumption (datacenter GPUs idle at roughly
10–15 % of TDP by their NVML readings), stated in every answer that uses it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError

IDLE_FRACTION_OF_TDP = 0.10
#: The power model's file name (JSON: coefficients, no pickle).
MODEL_FILE = "power_model.json"
#: Per-kernel launch overhead (s) the launch-bound feature counts (the roofline's GPU value).
LAUNCH_S = 5e-6
#: Names of :func:`step_features` (a graph step's activity model), in order.
FEATURES = ("log_compute_util", "log_memory_util", "log_launch_util", "log_intensity_ridge",
            "log_batch", "half_precision")
#: Precisions whose GEMMs run on tensor cores (their compute coefficient is ``c_tensor``).
TENSOR_PRECISIONS = ("amp", "fp16", "bf16", "fp8", "int8")
#: The power model's file format.
FORMAT = "perfcast-power-model/4"
#: The kinds of work whose coefficients are kept apart, and what each answers.
KINDS = {"step": "a training or inference step of a model graph (fitted on Zeus training "
                 "steps)",
         "serving": "an LLM prefill or decode phase (fitted on ML.ENERGY v2 vLLM serving)"}
#: The serving coefficients of one family, in order (fractions of TDP).
COEFFICIENTS = ("static", "c_compute", "c_tensor", "c_memory")


# --------------------------------------------------------------------------- bounds and range
def power_bounds(device) -> tuple[float | None, float | None, str]:
    """(idle W, TDP W, where idle came from) of one device; ``None`` when unknown."""
    tdp = float(device.tdp_w) if getattr(device, "tdp_w", None) else None
    idle = getattr(device, "idle_w", None)
    if idle:
        return float(idle), tdp, "spec idle_w"
    if tdp is None:
        return None, None, "no TDP"
    return IDLE_FRACTION_OF_TDP * tdp, tdp, f"{IDLE_FRACTION_OF_TDP:.0%} of TDP (assumed)"


def bounded_power(device, watts: float, limit_w: float | None = None) -> float:
    """``watts`` per device clipped to ``[idle, min(limit, TDP)]``."""
    idle, tdp, _ = power_bounds(device)
    w = float(watts)
    top = min(x for x in (tdp, limit_w) if x is not None) if (tdp or limit_w) else None
    if top is not None:
        w = min(w, top)
    if idle is not None:
        w = max(w, idle)
    return w


def energy_j(power_w: float, n_devices: int, seconds: float) -> float:
    """Joules of ``n_devices`` drawing ``power_w`` each for ``seconds``."""
    return float(power_w) * int(n_devices) * float(seconds)


@dataclass(frozen=True)
class LimitRange:
    """The power limits a GPU accepts (W): ``low``..``high``, ``default`` (TDP: what perfcast's
    time predictions are for) and where the range came from (``source``)."""

    low: float
    high: float
    default: float
    source: str


def _known_min_fraction() -> tuple[float, list[str]]:
    """The largest ``power_limit_min_w / tdp_w`` among registry GPUs that state their range
    (the conservative default for a GPU that does not), and those GPUs."""
    from perfcast.devices import list_devices

    known = [(d.power_limit_min_w / d.tdp_w, d.key) for d in list_devices()
             if d.is_gpu and d.power_limit_min_w and d.tdp_w]
    if not known:
        return 0.5, []
    return max(f for f, _ in known), sorted(k for _, k in known)


def limit_range(device) -> LimitRange:
    """The power-limit range of ``device`` (a GPU with a TDP): the spec's
    ``power_limit_min_w`` / ``power_limit_max_w`` when given; else from TDP down to the largest
    min/TDP fraction of the GPUs whose range perfcast knows (said in ``source``)."""
    if not device.is_gpu:
        raise PerfcastError(f"{device.key} is a CPU: power limits are set on GPUs (nvidia-smi "
                            f"-pl)")
    if not device.tdp_w:
        raise PerfcastError(f"{device.key} has no TDP in its spec: no power-limit range (add "
                            f"tdp_w, power_limit_min_w, power_limit_max_w to a device spec)")
    tdp = float(device.tdp_w)
    hi = float(device.power_limit_max_w or tdp)
    if device.power_limit_min_w:
        src = "device spec (power_limit_min_w / power_limit_max_w)"
        lo = float(device.power_limit_min_w)
    else:
        frac, keys = _known_min_fraction()
        lo = round(frac * tdp)
        src = (f"assumed: {frac:.0%} of TDP, the highest min/TDP of the GPUs with a known range "
               f"({', '.join(keys)}); set power_limit_min_w in a device spec (nvidia-smi -q -d "
               f"POWER shows it)")
    return LimitRange(low=lo, high=hi, default=min(tdp, hi), source=src)


def check_power_limit(device, watts: float | None) -> float:
    """The power limit to predict at: ``watts`` (checked against :func:`limit_range`), else the
    default (TDP). A limit outside the range is a one-line :class:`PerfcastError`."""
    r = limit_range(device)
    if watts is None:
        return r.default
    if isinstance(watts, bool) or not isinstance(watts, (int, float)) or not math.isfinite(watts):
        raise PerfcastError(f"power limit must be a number of watts, got {watts!r}")
    if not r.low <= float(watts) <= r.high:
        raise PerfcastError(f"power limit {watts:g} W is outside {device.key}'s range "
                            f"{r.low:g}-{r.high:g} W ({r.source})")
    return float(watts)


# --------------------------------------------------------------------------- features
def step_work(cost, batch: int, mode: str, precision: str, optimizer: str | None = None
              ) -> tuple[float, float, float]:
    """``(FLOPs, DRAM bytes, kernels)`` of one step of a graph's roofline cost (a
    :class:`~perfcast.predictors.roofline.GraphCost`), counted as the roofline counts them:
    forward work × the batch ratio, ×3 in training (+ the optimizer's element-wise update)."""
    import numpy as np

    from_states = {"sgd": 0, "sgd-momentum": 1, "adam": 2, "adamw": 2}
    k = float(batch) / cost.ref_batch
    train = mode == "train"
    sel = slice(None) if train else ~np.asarray(cost.is_dropout)
    a = 0.5 if precision in ("amp", "fp16", "bf16") else 1.0
    w = 0.5 if precision in ("fp16", "bf16") else 1.0
    flops = float(np.asarray(cost.flops)[sel].sum()) * k
    moved = float((np.asarray(cost.act_bytes)[sel] * k * a
                   + np.asarray(cost.param_bytes)[sel] * w).sum())
    kernels = float(np.asarray(cost.flops)[sel].size)
    if train:
        e = 2.0 if precision in ("fp16", "bf16") else 4.0
        states = from_states.get(optimizer or "", 1)
        flops, moved, kernels = 3 * flops, 3 * moved + cost.params * e * (3 + 2 * states), \
            3 * kernels
    return flops, moved, kernels


def peak_flops(device, precision: str) -> float:
    """FLOP/s of ``device`` at ``precision`` (the spec's, else the derived one of
    :func:`perfcast.devices.derive.complete`; FP32 when the precision has no peak)."""
    from perfcast.devices.derive import complete

    device = complete(device)[0]
    return float(device.peak_tflops(precision) or device.peak_fp32_tflops) * 1e12


def utilisations(flops: float, moved: float, seconds: float, device, precision: str,
                 n_devices: int = 1) -> tuple[float, float]:
    """``(compute util, memory util)`` per device of work spread over ``n_devices`` taking
    ``seconds``: FLOPs ÷ (time × the peak of the precision), bytes ÷ (time × bandwidth), each
    clipped to [0, 1]."""
    from perfcast.devices.derive import complete

    device = complete(device)[0]
    t = max(float(seconds), 1e-12) * max(1, int(n_devices))
    cu = float(flops) / (t * peak_flops(device, precision))
    mu = float(moved) / (t * float(device.bandwidth_gbs) * 1e9)
    return min(max(cu, 0.0), 1.0), min(max(mu, 0.0), 1.0)


def step_features(flops: float, moved: float, kernels: float, time_s: float, device,
                  precision: str, batch: int) -> list[float]:
    """The :data:`FEATURES` of one graph step taking ``time_s`` (the predicted time) on
    ``device``: achieved fractions of the peak FLOP/s at the precision, of the DRAM bandwidth
    and of the time spent launching kernels (log10, clipped to [1e-4, 4]), the step's
    arithmetic intensity over the device's ridge point (log10), log2 of the batch and whether
    the precision is a half one. A peak the spec leaves out is the derived one
    (:func:`perfcast.devices.derive.complete`; the time answer's notes say so)."""
    from perfcast.devices.derive import complete

    device = complete(device)[0]
    peak = peak_flops(device, precision)
    bw = float(device.bandwidth_gbs) * 1e9
    t = max(float(time_s), 1e-12)

    def lg(x: float) -> float:
        return math.log10(min(max(x, 1e-4), 4.0))

    ai = (flops / max(moved, 1.0)) / (peak / bw)
    return [lg(flops / (t * peak)), lg(moved / (t * bw)), lg(kernels * LAUNCH_S / t),
            math.log10(max(ai, 1e-6)), math.log2(max(int(batch), 1)),
            float(precision in ("amp", "fp16", "bf16"))]


def family_of(device) -> str:
    """The architecture family (chip) a device's coefficients are kept by: its spec's
    ``architecture`` (e.g. ``Ampere (GA100)``: an A40's GA102 with GDDR6 draws otherwise), or
    ``vendor:key`` when the spec names none."""
    arch = (getattr(device, "architecture", "") or "").strip()
    return arch or f"{getattr(device, 'vendor', '')}:{device.key}"


# --------------------------------------------------------------------------- the model
@dataclass
class PowerModel:
    """The learned parts (module docstring), by kind of work (:data:`KINDS`):

    * ``step`` (a graph step): ``step_coef`` (the logistic activity model over
      :data:`FEATURES`, standardised by ``step_mean`` / ``step_scale``; ``step_coef[0]`` the
      pooled intercept) and ``step_families`` (per architecture family the shift of the
      intercept, shrunk towards 0; an unseen family: 0, the pooled fit);
    * ``serving`` (an LLM phase): ``families`` — per architecture family the
      :data:`COEFFICIENTS` (``static``, ``c_compute`` — CUDA-core precisions, no serving row
      runs at one: equal to ``c_tensor`` —, ``c_tensor``, ``c_memory``: fractions of TDP) —,
      ``pooled`` (the same fitted on every family: an unseen family's) and ``u0`` (the
      saturation of the utilisation response);

    and for both the limit response ``k``, ``c``, the slowdown ``gamma``, ``beta`` and
    ``trained_on`` (provenance: sources per kind, devices per family, command)."""

    families: dict[str, list[float]]
    pooled: list[float]
    u0: float
    step_coef: list[float]
    step_mean: list[float]
    step_scale: list[float]
    step_families: dict[str, float]
    k: float
    c: float
    gamma: float
    beta: float
    trained_on: dict[str, Any]

    # -- serving phases ------------------------------------------------------------------
    def response(self, u) -> Any:
        """``h(u) = ln(1 + u/u₀) / ln(1 + 1/u₀)`` of utilisations ``u`` (clipped to [0, 1])."""
        import numpy as np

        u = np.clip(np.asarray(u, dtype=np.float64), 0.0, 1.0)
        return np.log1p(u / self.u0) / math.log1p(1.0 / self.u0)

    def coefficients(self, device) -> tuple[list[float], str, bool]:
        """The serving kind's ``(static, c_compute, c_tensor, c_memory)`` of ``device``'s
        family, the family, and whether it was measured (``False``: the pooled fit)."""
        fam = family_of(device)
        if fam in self.families:
            return list(self.families[fam]), fam, True
        return list(self.pooled), fam, False

    def note(self, device, kind: str = "serving") -> str:
        """One line: which fit answered ``kind`` (:data:`KINDS`) on ``device`` and where its
        coefficients come from."""
        fam = family_of(device)
        src = self.trained_on.get("kinds", {}).get(kind, KINDS.get(kind, kind))
        if kind == "step":
            seen = fam in self.step_families
            where = (f"its family {fam}'s intercept (shrunk to the pooled fit)" if seen else
                     f"its family {fam} has no training-step power measurement: the pooled fit "
                     f"of {', '.join(sorted(self.step_families))}")
            return (f"power of a graph step: the activity model (logistic in log utilisations, "
                    f"intensity, batch) fitted on {src}; {where}")
        (s, cc, ct, cm), fam, seen = self.coefficients(device)
        where = (f"fitted on its family {fam}" if seen else
                 f"its family {fam} has no serving power measurement: the pooled fit of "
                 f"{', '.join(sorted(self.families))}")
        return (f"power of a serving phase fitted on {src}: coefficients (fractions of TDP: "
                f"static {s:.2f}, tensor compute {ct:.2f}, memory {cm:.2f}) {where}")

    def fraction(self, device, comp_util, mem_util, tensor=True) -> Any:
        """``static + c·h(compute util) + c_memory·h(memory util)`` (arrays), ``c`` =
        ``c_tensor`` where ``tensor`` else ``c_compute``."""
        import numpy as np

        (s, cc, ct, cm), _, _ = self.coefficients(device)
        c = np.where(np.asarray(tensor, bool), ct, cc)
        return s + c * self.response(comp_util) + cm * self.response(mem_util)

    def power(self, device, mem_util: float, comp_util: float,
              limit_w: float | None = None, tensor: bool = True) -> float:
        """Average board power (W) of one device in an LLM serving phase with these
        utilisations: ``idle + TDP · fraction`` within ``[idle, TDP]``, then under the limit
        ``limit_w`` (default: none, the default limit) by :meth:`at_limit`. ``tensor``: the
        compute runs on tensor cores (an LLM's 16-bit phases: the default)."""
        idle, tdp, _ = power_bounds(device)
        if tdp is None:
            raise PerfcastError(f"{device.key} has no TDP in its spec: no power prediction "
                                f"(add tdp_w to a device spec)")
        p0 = bounded_power(device, idle + tdp * float(self.fraction(device, comp_util,
                                                                    mem_util, tensor)))
        return p0 if limit_w is None else self.at_limit(p0, limit_w, device)

    # -- graph steps ---------------------------------------------------------------------
    def activity(self, feats, device=None) -> Any:
        """Fraction of ``TDP − idle`` drawn above idle at the default limit (0..1), per row of
        ``feats`` (rows of :data:`FEATURES`) of a graph step on ``device`` (its family's
        intercept; ``None``: the pooled one)."""
        import numpy as np

        X = (np.atleast_2d(np.asarray(feats, dtype=np.float64)) - self.step_mean) \
            / self.step_scale
        shift = self.step_families.get(family_of(device), 0.0) if device is not None else 0.0
        z = self.step_coef[0] + shift + X @ np.asarray(self.step_coef[1:])
        return 1.0 / (1.0 + np.exp(-z))

    def unconstrained_power(self, feats, device) -> float:
        """Average board power (W) at the default limit of a graph step of :data:`FEATURES`:
        ``idle + activity × (TDP − idle)``."""
        idle, tdp, _ = power_bounds(device)
        if tdp is None:
            raise PerfcastError(f"{device.key} has no TDP in its spec: no power prediction "
                                f"(add tdp_w to a device spec)")
        return bounded_power(device, idle + float(self.activity(feats, device)[0])
                             * (tdp - idle))

    def at_limit(self, p0: float, limit_w: float, device, default_w: float | None = None
                 ) -> float:
        """Average power (W) under the limit, for a board drawing ``p0`` at its default limit
        ``default_w`` (TDP when not given): ``p0 · σ(L) / σ(default)`` with
        ``σ(L) = (1 + (c·L / p0)⁻ᵏ)^(-1/k)`` (the soft minimum of ``p0`` and ``c·L``), within
        ``[idle, min(limit, TDP)]`` and never above ``p0``."""
        if default_w is None:
            default_w = limit_range(device).default
        p = p0 * _soft(self.c * limit_w / p0, self.k) / _soft(self.c * default_w / p0, self.k)
        return min(p0, bounded_power(device, p, limit_w))

    def slowdown(self, p0: float, p: float, device=None) -> float:
        """``T(L) / T₀`` ≥ 1 for a board held to ``p`` W that would draw ``p0`` W:
        ``exp(γ·(ln(p0 / p))^β)``."""
        if p >= p0:
            return 1.0
        return float(math.exp(self.gamma * math.log(p0 / max(p, 1e-9)) ** self.beta))

    # -- one step ----------------------------------------------------------------------
    def step(self, feats, device, limit_w: float) -> tuple[float, float, float]:
        """``(power W at the limit, slowdown vs the default limit, power W at the default
        limit)`` of one step."""
        p0 = self.unconstrained_power(feats, device)
        p = self.at_limit(p0, limit_w, device)
        return p, self.slowdown(p0, p, device), p0

    # -- file --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "kinds": dict(KINDS),
                "step": {"features": list(FEATURES),
                         "coef": [float(x) for x in self.step_coef],
                         "mean": [float(x) for x in self.step_mean],
                         "scale": [float(x) for x in self.step_scale],
                         "families": {f: float(v) for f, v in
                                      sorted(self.step_families.items())}},
                "serving": {"coefficients": list(COEFFICIENTS),
                            "families": {f: [float(x) for x in v]
                                         for f, v in sorted(self.families.items())},
                            "pooled": [float(x) for x in self.pooled], "u0": self.u0},
                "k": self.k, "c": self.c, "gamma": self.gamma, "beta": self.beta,
                "trained_on": self.trained_on}

    def save(self, path: str | Path) -> Path:
        from perfcast.paths import write_file_atomically

        path = Path(path)
        if path.is_dir() or not path.suffix:
            path = path / MODEL_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"
        write_file_atomically(path, lambda tmp: Path(tmp).write_text(text))
        return path

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PowerModel:
        if d.get("format") != FORMAT or list(d.get("step", {}).get("features", [])) \
                != list(FEATURES):
            raise PerfcastError(f"not a perfcast power model (format {FORMAT} with step "
                                f"features {', '.join(FEATURES)}; rebuild: perfcast train "
                                f"--recipe power)")
        st, sv = d["step"], d["serving"]
        return cls(families={str(f): [float(x) for x in v] for f, v in sv["families"].items()},
                   pooled=[float(x) for x in sv["pooled"]], u0=float(sv["u0"]),
                   step_coef=[float(x) for x in st["coef"]],
                   step_mean=[float(x) for x in st["mean"]],
                   step_scale=[float(x) for x in st["scale"]],
                   step_families={str(f): float(v) for f, v in st["families"].items()},
                   k=float(d["k"]), c=float(d["c"]), gamma=float(d["gamma"]),
                   beta=float(d["beta"]), trained_on=d.get("trained_on", {}))

    @classmethod
    def load(cls, path: str | Path) -> PowerModel:
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PerfcastError(f"cannot read the power model {path}: {exc}") from None


# --------------------------------------------------------------------------- the decision
#: Zeus's power-limit step (W) between the limits it profiles.
LIMIT_STEP_W = 25.0


def candidate_limits(device, step_w: float = LIMIT_STEP_W) -> list[float]:
    """The limits a decision chooses among: from the range's low end in ``step_w`` steps, and
    its high end (as Zeus profiles them)."""
    r = limit_range(device)
    out, x = [], r.low
    while x < r.high - 1e-9:
        out.append(float(x))
        x += step_w
    return out + [float(r.high)]


def zeus_cost(energy: float, seconds: float, eta: float, max_power_w: float) -> float:
    """Zeus's cost of a run: ``η·energy + (1 − η)·max power·time`` (J): η = 1 counts energy
    only, η = 0 time only (priced at the maximum power limit)."""
    return eta * energy + (1.0 - eta) * max_power_w * seconds


def sweep(model: PowerModel, feats, device, t0_s: float, eta: float,
          limits: list[float] | None = None) -> list[dict[str, float]]:
    """Per candidate limit (:func:`candidate_limits`): ``limit_w``, ``power_w``, ``slowdown``,
    ``time_s`` (``t0_s`` at the default limit × slowdown), ``energy_j`` and Zeus's ``cost``
    (:func:`zeus_cost`, max power = the range's high end)."""
    if not 0.0 <= float(eta) <= 1.0:
        raise PerfcastError(f"eta must be between 0 and 1 (0: time only, 1: energy only), "
                            f"got {eta!r}")
    r = limit_range(device)
    p0 = model.unconstrained_power(feats, device)
    rows = []
    for lim in limits or candidate_limits(device):
        p = model.at_limit(p0, lim, device, r.default)
        sd = model.slowdown(p0, p, device)
        t = t0_s * sd
        rows.append({"limit_w": float(lim), "power_w": p, "slowdown": sd, "time_s": t,
                     "energy_j": p * t, "cost": zeus_cost(p * t, t, eta, r.high)})
    return rows


def _soft(x: float, k: float) -> float:
    """``(1 + x⁻ᵏ)^(-1/k)``: ≈ x for x ≪ 1, → 1 for x ≫ 1."""
    return (1.0 + max(x, 1e-9) ** -k) ** (-1.0 / k)


__all__ = ["COEFFICIENTS", "FEATURES", "FORMAT", "IDLE_FRACTION_OF_TDP", "KINDS", "LAUNCH_S",
           "LIMIT_STEP_W",
           "LimitRange", "MODEL_FILE", "PowerModel", "bounded_power", "candidate_limits",
           "check_power_limit", "energy_j", "family_of", "limit_range", "peak_flops",
           "power_bounds", "step_features", "step_work", "sweep", "utilisations", "zeus_cost",
           "TENSOR_PRECISIONS"]
