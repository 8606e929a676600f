"""Rank hardware for one job: time, memory fit, cost and energy on every device, sorted.

Devices whose time comes from a learned predictor are ranked first; devices with no labeled
data (roofline time: an optimistic bound, often several times below measured) follow, ranked
among themselves — mixing the two would put every unmeasured GPU on top.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError, unknown_choice
from perfcast.workload import OBJECTIVES


@dataclass
class DeviceRank:
    """One device: ``time_ms`` per batch, ``memory_mb`` predicted peak vs ``capacity_mb`` (MiB),
    ``usd_per_gpu_hour`` (on-demand, :func:`~perfcast.decisions.prices.choose_price`: from
    ``provider``, dated ``price_as_of``, read from ``price_source``; ``None``: no price, and
    then ``usd`` is ``None`` too), ``usd`` and ``energy_kwh`` for the job's ``iterations``
    batches, ``power_w`` used for the energy (an estimate: TDP); ``trained_records``: labeled
    records behind a learned time (few = treat with care)."""

    rank: int
    device: str
    kind: str
    precision: str
    time_ms: float | None
    time_source: str
    throughput_samples_per_s: float | None
    memory_mb: float | None
    capacity_mb: float | None
    fits: bool | None
    usd_per_gpu_hour: float | None
    usd: float | None
    power_w: float | None
    energy_kwh: float | None
    trained_records: int | None = None
    provider: str | None = None
    price_source: str | None = None
    price_as_of: str | None = None
    #: where ``energy_kwh`` came from: ``power-model`` (perfcast.energy's prediction at the
    #: default power limit, TDP) or ``tdp`` (time × TDP: an upper bound)
    energy_source: str | None = None
    #: the calibrated interval of ``time_ms`` (:mod:`perfcast.uncertainty`; ``None``: no
    #: calibration for the model that answered, e.g. the roofline) at ``coverage``, and the OOD
    #: score of the request
    time_ms_low: float | None = None
    time_ms_high: float | None = None
    coverage: float | None = None
    ood_score: float | None = None
    predictor: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class Ranking:
    """``devices`` sorted by ``objective`` (learned-time devices first); ``iterations``: batches
    the cost and energy columns are for."""

    model: str
    mode: str
    batch_size: int
    objective: str
    iterations: int
    devices: list[DeviceRank]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def plot(self, path: str) -> str:
        """Bar chart of the objective per device (PNG); returns the path."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        key = {"time": "time_ms", "cost": "usd", "energy": "energy_kwh"}[self.objective]
        unit = {"time": "ms per batch", "cost": f"USD for {self.iterations:,} batches",
                "energy": f"kWh for {self.iterations:,} batches"}[self.objective]
        rows = [d for d in self.devices if getattr(d, key) is not None]
        if not rows:
            raise PerfcastError(f"nothing to plot: no device has a {self.objective} value")
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.2))
        colors = ["tab:blue" if d.time_source == "learned" else "tab:gray" for d in rows]
        hatches = ["" if d.fits is not False else "//" for d in rows]
        bars = ax.barh([d.device for d in rows][::-1], [getattr(d, key) for d in rows][::-1],
                       color=colors[::-1])
        for b, h in zip(bars, hatches[::-1]):
            b.set_hatch(h)
        ax.set_xlabel(unit)
        ax.set_title(f"{self.model} · {self.mode} · batch {self.batch_size} — "
                     f"blue: learned time, gray: roofline bound, hatched: does not fit",
                     fontsize=9)
        fig.tight_layout()
        from perfcast.paths import write_file_atomically

        try:
            write_file_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120))
        finally:
            plt.close(fig)
        return path


def rank(model: Any, *, devices: str | list[str] = "all", objective: str = "time",
         batch_size: int | None = None, mode: str = "infer", precision: str | None = None,
         iterations: int = 1000, provider: str | None = None,
         **predict_kwargs: Any) -> Ranking:
    """Predict ``model`` on every device in ``devices`` (``"all"``, a comma list or a list of
    registry keys) and sort by ``objective`` (``time`` per batch, ``cost`` or ``energy`` of
    ``iterations`` batches). ``precision=None``: each device's measured precision.
    ``predict_kwargs`` go to :func:`perfcast.predict`. Prices: ``provider``'s latest on-demand
    price per GPU-hour, or the lowest provider's (:func:`~perfcast.decisions.prices.
    choose_price`); a device without one has no ``usd`` and ranks after those with one."""
    from perfcast.api import DEFAULT_BATCH, parse_request, predict_workload
    from perfcast.decisions.prices import check_provider, choose_price, find_price_table
    from perfcast.devices import device_keys, get_device

    if objective not in OBJECTIVES:
        raise unknown_choice("objective", objective, OBJECTIVES)
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations <= 0:
        raise PerfcastError(f"iterations must be a positive integer, got {iterations!r}")
    if devices == "all" or devices is None:
        keys = device_keys()
    else:
        keys = [k.strip() for k in (devices.split(",") if isinstance(devices, str) else devices)
                if k.strip()]
        if not keys:
            raise PerfcastError("no devices given (use all or a comma list such as "
                                "rtx4090,a100-40gb)")
    devs = [get_device(k) for k in keys]  # unknown keys fail here, before any work
    table = find_price_table()
    check_provider(provider, table)  # an unknown provider fails before any prediction
    w, opts = parse_request(model, mode=mode, precision=precision, **predict_kwargs)
    w = w.replace(batch_size=batch_size or DEFAULT_BATCH[w.mode])
    batch_size = w.batch_size
    rows: list[DeviceRank] = []
    price_notes: list[str] = []
    label = w.spec
    for dev in devs:
        p = predict_workload(w, dev, **opts)
        label = p.model
        time_answer = p.route.answers["time_ms"]
        time_source = "learned" if time_answer.learned else time_answer.source
        capacity = dev.memory_mb
        fits = (p.memory_mb <= capacity) if (p.memory_mb is not None and capacity) else None
        price = choose_price(dev, provider, table=table, override=None)
        usd_h = price.usd_per_gpu_hour
        price_notes.extend(price.notes)
        hours = p.time_ms * iterations / 3.6e6 if p.time_ms else None
        if p.energy_j is not None:
            energy = p.energy_j * iterations / 3.6e6
            power = p.power_w
            energy_source = "power-model"
        else:
            power = dev.tdp_w
            energy = power * hours / 1e3 if (power and hours) else None
            energy_source = "tdp" if energy is not None else None
        rows.append(DeviceRank(
            rank=0, device=dev.key, kind=dev.kind, precision=p.precision, time_ms=p.time_ms,
            time_source=time_source, throughput_samples_per_s=p.throughput_samples_per_s,
            memory_mb=p.memory_mb, capacity_mb=capacity, fits=fits, usd_per_gpu_hour=usd_h,
            usd=usd_h * hours if (usd_h is not None and hours) else None, power_w=power,
            provider=price.provider, price_source=price.price_source,
            price_as_of=price.price_as_of,
            energy_kwh=energy, energy_source=energy_source, predictor=dict(p.predictor),
            trained_records=(p.trained_on.get("time_ms") or {}).get("records"),
            time_ms_low=p.time_ms_low, time_ms_high=p.time_ms_high,
            coverage=p.coverage if p.time_ms_high is not None else None,
            ood_score=(p.ood or {}).get("score"),
            notes=[n for n in (p.route.precision_note, *time_answer.notes, *price.notes)
                   if n]))
    key = {"time": "time_ms", "cost": "usd", "energy": "energy_kwh"}[objective]

    def order(d: DeviceRank):
        v = getattr(d, key)
        return (v is None, d.time_source != "learned", d.fits is False,
                v if v is not None else 0.0)

    rows.sort(key=order)
    for i, d in enumerate(rows, 1):
        d.rank = i
    notes = ["devices with a value for the objective come first; among them, devices with a "
             "learned time prediction rank before those with a roofline time (no labeled data "
             "for that device: an optimistic bound)",
             "energy: predicted power (perfcast.energy's power model, at the default power "
             "limit = TDP) × time on GPUs (energy_source power-model); time × TDP where no "
             "energy prediction exists, e.g. CPUs (energy_source tdp: an upper-bound estimate "
             "of the board power)"]
    rule = (f"{provider}'s latest-dated on-demand price" if provider else
            "the lowest of the providers' latest-dated on-demand prices (--provider to choose "
            "one)")
    where = table.path if table is not None else "no price table found"
    notes.append(f"cost: USD = hours × GPU-hour price, {rule}, from the public price table "
                 f"({where}); a device without a price has no USD")
    if objective == "cost":
        notes.extend(price_notes)  # provider, instance and date of every price, one line each
    else:
        notes.append("cost: each device's provider, instance and price date are in its notes "
                     "(--json), and in these notes with --objective cost")
    return Ranking(model=label, mode=mode, batch_size=batch_size, objective=objective,
                   iterations=iterations, devices=rows, notes=notes)
