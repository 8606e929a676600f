"""Which GPU power limit to set: the one minimising Zeus's cost (NSDI'23)
``η·energy + (1 − η)·max power·time`` over the limits the GPU accepts (``perfcast power-limit``,
:func:`choose_power_limit`).

One prediction at the default limit (TDP) gives the time and the step's utilisation; the power
model (:mod:`perfcast.energy`) then gives, per candidate limit (Zeus's 25 W steps from the
range's low end, and its high end), the power, the learned slowdown and so time and energy —
the same functions ``perfcast predict --power-limit`` answers with. Costs are per batch (J);
the choice does not depend on how many batches run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError


@dataclass
class PowerLimitChoice:
    """The chosen ``limit_w`` with its per-batch ``time_ms``, ``energy_j``, ``power_w`` and
    ``cost`` (J, Zeus's), the ``default`` row (at TDP) and how the choice compares with it
    (``energy_saving`` and ``time_increase``, fractions), ``eta``, ``max_power_w`` (the range's
    high end, which prices time), ``table`` (every candidate: ``limit_w, power_w, time_ms,
    energy_j, cost``), provenance (``predictor``) and ``notes``."""

    model: str
    device: str
    mode: str
    precision: str
    batch_size: int
    eta: float
    max_power_w: float
    limit_w: float
    time_ms: float
    energy_j: float
    power_w: float
    cost: float
    default: dict[str, float]
    energy_saving: float
    time_increase: float
    table: list[dict[str, float]] = field(default_factory=list)
    predictor: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def plot(self, path: str) -> str:
        """Time and energy per batch against the limit, the cost curve and the choice (PNG);
        returns the path."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from perfcast.paths import write_file_atomically

        lim = [r["limit_w"] for r in self.table]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
        a1.plot(lim, [r["time_ms"] for r in self.table], "o-", color="tab:blue",
                label="time per batch (ms)")
        a1.set_xlabel("power limit (W)")
        a1.set_ylabel("ms per batch", color="tab:blue")
        b1 = a1.twinx()
        b1.plot(lim, [r["energy_j"] for r in self.table], "s-", color="tab:green",
                label="energy per batch (J)")
        b1.set_ylabel("J per batch", color="tab:green")
        a1.set_title("predicted time and energy", fontsize=9)
        a2.plot(lim, [r["cost"] for r in self.table], "o-", color="tab:purple")
        a2.axvline(self.limit_w, color="tab:red", ls="--", label=f"chosen {self.limit_w:g} W")
        a2.set_xlabel("power limit (W)")
        a2.set_ylabel(f"cost (J): {self.eta:g}·E + {1 - self.eta:g}·{self.max_power_w:g} W·T")
        a2.set_title("Zeus cost per batch", fontsize=9)
        a2.legend(fontsize=8)
        fig.suptitle(f"{self.model} on {self.device} — {self.mode}, {self.precision}, batch "
                     f"{self.batch_size}", fontsize=10)
        fig.tight_layout()
        try:
            write_file_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120))
        finally:
            plt.close(fig)
        return path


def choose_power_limit(model: Any, *, device: str, eta: float = 0.5,
                       batch_size: int | None = None, mode: str = "train",
                       precision: str | None = None, **options: Any) -> PowerLimitChoice:
    """The power limit of ``device`` minimising ``η·energy + (1 − η)·max power·time`` for
    ``model`` (a spec, ``nn.Module`` or :class:`~perfcast.workload.Workload`; ``options``: the
    other options of ``perfcast power-limit`` by field name) — one GPU's ``--mode infer`` or
    ``train`` step (:func:`power_limit_request`). ``eta``: 0 = time only (the highest limit),
    1 = energy only."""
    from perfcast.decisions.common import request_for

    return power_limit_request(request_for("power-limit", model, device=device, eta=eta,
                                           batch_size=batch_size, mode=mode,
                                           precision=precision, **options))


def power_limit_request(req) -> PowerLimitChoice:
    """The answer of ``perfcast power-limit`` to the validated request ``req`` — one GPU's
    ``--mode infer`` or ``train`` step, the modes the request schema lets it take (module
    docstring): one prediction at the default limit (:func:`perfcast.request.engines.
    estimate`), then the power model's sweep over the limits."""
    from perfcast import energy as E
    from perfcast.decisions.common import device_of
    from perfcast.request.engines import estimate
    from perfcast.shipped import load_shipped

    eta = req.value("eta")
    dev = device_of(req)
    rng = E.limit_range(dev)  # a CPU or a GPU without a TDP: one-line error, before the graph
    p = estimate(req)  # at the default limit
    if p.energy_j is None or p.time_ms is None or p.route is None or p.route.request is None:
        raise PerfcastError(f"no energy prediction for {p.model} on {dev.key}: "
                            + "; ".join(n for n in p.notes if n.startswith(("energy_j",
                                                                            "time_ms"))))
    routed = p.route.request
    t = p.route.answers["time_ms"].value
    flops, moved, kernels = E.step_work(routed.cost(), int(p.batch_size), p.mode, p.precision,
                                        routed.w.train_optimizer)
    feats = E.step_features(flops, moved, kernels, t / 1e3, dev, p.precision, int(p.batch_size))
    model_ = load_shipped("power-model")
    rows = E.sweep(model_, feats, dev, t / 1e3, float(eta))
    table = [{"limit_w": r["limit_w"], "power_w": r["power_w"], "time_ms": r["time_s"] * 1e3,
              "energy_j": r["energy_j"], "cost": r["cost"]} for r in rows]
    best = min(table, key=lambda r: (r["cost"], -r["limit_w"]))
    dflt = next(r for r in table if abs(r["limit_w"] - rng.default) < 1e-9) \
        if any(abs(r["limit_w"] - rng.default) < 1e-9 for r in table) else table[-1]
    notes = [f"power-limit range {rng.low:,.0f}-{rng.high:,.0f} W: {rng.source}",
             f"cost = {eta:g}·energy + {1 - eta:g}·{rng.high:,.0f} W·time (Zeus, NSDI'23), per "
             f"batch; time at the default limit from {p.predictor.get('time_ms', '?')}, power "
             f"and the slowdown under a limit from the power model (reports/energy/)"]
    notes += [n for n in p.notes if n.startswith("energy_j")]
    return PowerLimitChoice(
        model=p.model, device=dev.key, mode=p.mode, precision=p.precision,
        batch_size=int(p.batch_size), eta=float(eta), max_power_w=rng.high,
        limit_w=best["limit_w"], time_ms=best["time_ms"], energy_j=best["energy_j"],
        power_w=best["power_w"], cost=best["cost"], default=dflt,
        energy_saving=1.0 - best["energy_j"] / dflt["energy_j"],
        time_increase=best["time_ms"] / dflt["time_ms"] - 1.0, table=table,
        predictor={"time_ms": p.predictor.get("time_ms", ""),
                   "energy_j": p.predictor.get("energy_j", "")},
        notes=notes)


__all__ = ["PowerLimitChoice", "choose_power_limit", "power_limit_request"]
