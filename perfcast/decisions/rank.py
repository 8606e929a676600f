"""Rank hardware for one job: time, memory fit, cost and energy on every device, sorted.

Devices whose time comes from a learned predictor are ranked first; devices with no labeled
data (roofline time: an optimistic bound, often several times below measured) follow, ranked
among themselves — mixing the two would put every unmeasured GPU on top.

Any mode and layout (:func:`rank_request`): the request is answered on each device by its
engine — a batch of LLM requests (``--mode generate``: time per batch, tokens/s, the time to
the first token) or a training step over GPUs (priced × its GPUs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.decisions.common import request_for
from perfcast.errors import PerfcastError


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
    #: given ``--power-limit``, else the default power limit, TDP) or ``tdp`` (time × TDP: an
    #: upper bound)
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
    #: a layout's or a served model's GPUs (the price is × them), its throughput in its own
    #: unit (samples/s or tokens/s) and, ``--mode generate``, the time to the first token
    gpus: int | None = None
    throughput_per_s: float | None = None
    throughput_unit: str | None = None
    ttft_ms: float | None = None


#: :class:`DeviceRank` fields of a layout or ``--mode generate`` only (left out of the JSON
#: of a one-device ranking).
MODE_FIELDS = ("gpus", "throughput_per_s", "throughput_unit", "ttft_ms")


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
        d = asdict(self)
        for row in d["devices"]:
            for k in MODE_FIELDS:
                if row.get(k) is None:
                    row.pop(k, None)
        return d

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
         **options: Any) -> Ranking:
    """Predict ``model`` on every device in ``devices`` (``"all"``, a comma list or a list of
    registry keys) and sort by ``objective`` (``time`` per batch, ``cost`` or ``energy`` of
    ``iterations`` batches) — ``perfcast rank``, every mode and layout (:func:`rank_request`).
    ``precision=None``: each device's measured precision. ``options``: the other options of
    ``perfcast rank`` by field name (``input_size``, ``predictor``, a layout's
    ``data_parallel`` …, generation's ``input_len``, ``output_len``, ``engine`` …). Prices:
    ``provider``'s latest on-demand price per GPU-hour, or the lowest provider's
    (:func:`~perfcast.decisions.prices.choose_price`); a device without one has no ``usd`` and
    ranks after those with one."""
    return rank_request(request_for("rank", model, devices=devices, objective=objective,
                                    batch_size=batch_size, mode=mode, precision=precision,
                                    iterations=iterations, provider=provider, **options))


def _device_keys(devices) -> list[str]:
    from perfcast.devices import device_keys

    if devices is None or devices == "all" or (isinstance(devices, (list, tuple))
                                               and list(devices) == ["all"]):
        return list(device_keys())
    keys = [str(k).strip() for k in (devices.split(",") if isinstance(devices, str)
                                     else devices) if str(k).strip()]
    if not keys:
        raise PerfcastError("no devices given (use all or a comma list such as "
                            "rtx4090,a100-40gb)")
    return keys


def rank_request(req) -> Ranking:
    """The answer of ``perfcast rank`` to the validated request ``req``: the request answered
    on each device (:func:`perfcast.request.engines.estimate` of ``req.replace(device=…)``),
    time per batch, memory and fit, USD = hours × GPU-hour price × GPUs and kWh of the job,
    sorted (module docstring). A device that cannot answer the request (a CPU for ``--mode
    generate`` or a layout over GPUs) is left out with a note; none answering is an error."""
    from perfcast.api import DEFAULT_BATCH
    from perfcast.decisions.prices import check_provider, choose_price, find_price_table
    from perfcast.devices import get_device
    from perfcast.request.engines import estimate

    objective, iterations, provider = (req.value("objective"), req.value("iterations"),
                                       req.value("provider"))
    keys = _device_keys(req.value("devices"))
    devs = [get_device(k) for k in keys]  # unknown keys fail here, before any work
    devs = list({d.key: d for d in devs}.values())  # a device named twice ranks once
    table = find_price_table()
    check_provider(provider, table)  # an unknown provider fails before any prediction
    mode = req.mode
    batch_size = req.value("batch_size") or DEFAULT_BATCH[mode]
    base = req if "batch_size" in req.given else req.replace(batch_size=batch_size)
    rows: list[DeviceRank] = []
    price_notes: list[str] = []
    refused: list[tuple[str, PerfcastError]] = []
    label = req.workload.spec
    for key, dev in zip(keys, devs):
        try:
            p = estimate(base.replace(device=key))
        except PerfcastError as exc:
            refused.append((dev.key, exc))
            continue
        label = p.model
        price = choose_price(dev, provider, table=table, override=None)
        price_notes.extend(price.notes)
        rows.append(_row(p, dev, price, iterations))
    if not rows and refused:
        raise refused[0][1]
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
             "for that device: an optimistic bound)", _energy_note(req)]
    rule = (f"{provider}'s latest-dated on-demand price" if provider else
            "the lowest of the providers' latest-dated on-demand prices (--provider to choose "
            "one)")
    where = table.path if table is not None else "no price table found"
    per_gpus = " × GPUs" if _kind(req) != "single" else ""
    notes.append(f"cost: USD = hours × GPU-hour price{per_gpus}, {rule}, from the public price "
                 f"table ({where}); a device without a price has no USD")
    if objective == "cost":
        notes.extend(price_notes)  # provider, instance and date of every price, one line each
    else:
        notes.append("cost: each device's provider, instance and price date are in its notes "
                     "(--json), and in these notes with --objective cost")
    notes.extend(req.workload.optimizer_notes())
    notes.extend(f"{k}: left out — {e}" for k, e in refused)
    return Ranking(model=label, mode=mode, batch_size=batch_size, objective=objective,
                   iterations=iterations, devices=rows, notes=notes)


def _kind(req) -> str:
    return "generation" if req.mode == "generate" else (
        "parallel" if req.workload.distributed else "single")


#: How the energy column is made, per kind of request (``{limit}``: the power limit the
#: power model runs at, :func:`_energy_note`).
_ENERGY_NOTE = {
    "single": "energy: predicted power (perfcast.energy's power model, at {limit}) × time on "
              "GPUs (energy_source power-model); time × TDP where no energy prediction exists, "
              "e.g. CPUs (energy_source tdp: an upper-bound estimate of the board power)",
    "parallel": "energy: the predicted power per GPU (at {limit}) × GPUs × time per iteration "
                "(energy_source power-model); time × TDP × GPUs where no energy prediction "
                "exists (energy_source tdp: an upper-bound estimate)",
    "generation": "energy: Σ phase power × devices × phase time of each batch (prefill and "
                  "decode, perfcast.llm.energy; energy_source power-model); time × TDP × "
                  "devices where no energy prediction exists (energy_source tdp)"}


def _energy_note(req) -> str:
    """:data:`_ENERGY_NOTE` for ``req``, at the power limit it gives (``--power-limit``)
    rather than the default one when it gives one."""
    limit = req.value("power_limit_w") if "power_limit_w" in req.given else None
    return _ENERGY_NOTE[_kind(req)].format(
        limit="the default power limit = TDP" if limit is None else
        f"the given --power-limit {limit:g} W")


def _row(p, dev, price, iterations: int) -> DeviceRank:
    """One device's row from its estimate ``p`` and price."""
    single = p.kind == "single"
    gpus = int(p.gpus)
    usd_h = price.usd_per_gpu_hour
    hours = p.time_ms * iterations / 3.6e6 if p.time_ms else None
    if p.energy_j is not None:
        energy = p.energy_j * iterations / 3.6e6
        power = p.power_w
        energy_source = "power-model"
    else:
        power = dev.tdp_w
        energy = power * gpus * hours / 1e3 if (power and hours) else None
        energy_source = "tdp" if energy is not None else None
    if single:
        time_answer = p.route.answers["time_ms"]
        time_source = "learned" if time_answer.learned else time_answer.source
        capacity = dev.memory_mb
        fits = (p.memory_mb <= capacity) if (p.memory_mb is not None and capacity) else None
        notes = [n for n in (p.route.precision_note, *time_answer.notes, *price.notes) if n]
    else:  # the LLM latency model and the layouts' fitted efficiencies are learned (a
        # data-parallel step of a roofline replica is not)
        time_source = "roofline" if "roofline" in str(p.predictor.get("time_ms", "")) \
            else "learned"
        capacity, fits = p.capacity_mb, p.fits
        notes = [*(n for n in p.notes if not n.startswith("energy")), *price.notes]
    records = (p.trained_on.get("time_ms") or {})
    high = getattr(p, "time_ms_high", None)
    return DeviceRank(
        rank=0, device=dev.key, kind=dev.kind, precision=p.precision, time_ms=p.time_ms,
        time_source=time_source, throughput_samples_per_s=p.samples_per_s if not single
        else p.throughput_samples_per_s,
        memory_mb=p.memory_mb, capacity_mb=capacity, fits=fits, usd_per_gpu_hour=usd_h,
        usd=usd_h * hours * gpus if (usd_h is not None and hours) else None, power_w=power,
        provider=price.provider, price_source=price.price_source,
        price_as_of=price.price_as_of,
        energy_kwh=energy, energy_source=energy_source, predictor=dict(p.predictor),
        trained_records=records.get("records") if isinstance(records, dict) else None,
        time_ms_low=getattr(p, "time_ms_low", None), time_ms_high=high,
        coverage=p.coverage if high is not None else None,
        ood_score=(getattr(p, "ood", None) or {}).get("score"),
        gpus=None if single else gpus,
        throughput_per_s=None if single else p.throughput_per_s,
        throughput_unit=None if single else p.throughput_unit,
        ttft_ms=getattr(p, "ttft_ms", None), notes=notes)


__all__ = ["DeviceRank", "Ranking", "rank", "rank_request"]
