"""Cost and carbon of a job: predicted time × GPU price, energy × grid carbon intensity.

TraPPM §VI-D's example: a training step of 350 ms for 2×10⁵ iterations is 19.44 h; at
2.934 USD per A100-hour that is ≈ 57 USD. :func:`estimate_cost` does that arithmetic from a
perfcast prediction (or a given step time) and adds energy and CO2e, saying where each number
came from. Prices come from the public price table (:mod:`perfcast.decisions.prices`: provider,
instance, date and source of each), grid intensities from :mod:`perfcast.decisions.tables`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.decisions.prices import choose_price
from perfcast.decisions.tables import carbon_lookup, world_average_known
from perfcast.errors import PerfcastError, unknown_choice

# --------------------------------------------------------------------------------------------
# estimate
# --------------------------------------------------------------------------------------------

@dataclass
class CostEstimate:
    """Cost and carbon of running ``iterations`` batches on one GPU.

    ``time_ms_per_iteration``: step (or batch) time, ms; ``hours`` = time × iterations;
    ``usd_per_gpu_hour`` × ``gpus`` × ``hours`` = ``usd``; ``power_w``: mean board power (W);
    ``energy_kwh`` = power × hours × ``pue``; ``carbon_g_per_kwh``: grid intensity (g CO2e/kWh);
    ``kg_co2e`` = energy × intensity. ``None`` where a number is missing (``notes`` says why;
    a missing price leaves ``usd`` ``None``, never 0). The price: ``provider``,
    ``price_source`` (the table row's URL, or ``given``), ``price_as_of`` (the row's date, or
    ``undated catalog snapshot (commit …)``) and ``price_row`` (the whole row: instance type,
    region, GPUs per instance …); ``sources`` maps time/price/energy/carbon to where each
    number came from."""

    model: str | None
    device: str
    mode: str
    precision: str | None
    batch_size: int
    iterations: int
    time_ms_per_iteration: float
    hours: float
    gpus: int = 1
    provider: str | None = None
    usd_per_gpu_hour: float | None = None
    usd: float | None = None
    price_source: str | None = None
    price_as_of: str | None = None
    price_row: dict[str, Any] | None = None
    power_w: float | None = None
    pue: float = 1.0
    energy_kwh: float | None = None
    region: str | None = None
    carbon_g_per_kwh: float | None = None
    kg_co2e: float | None = None
    #: the range of ``hours`` and ``usd`` from the predicted time's calibrated interval at
    #: ``coverage`` (:mod:`perfcast.uncertainty`; ``None``: a given time or no calibration)
    hours_low: float | None = None
    hours_high: float | None = None
    usd_low: float | None = None
    usd_high: float | None = None
    coverage: float | None = None
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PerfcastError(f"{name} must be a positive integer, got {value!r}")
    return value


def _positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PerfcastError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise PerfcastError(f"{name} must be a finite number {'>= 0' if allow_zero else '> 0'}, "
                            f"got {value!r}")
    return v


def _iterations(iterations, epochs, dataset_size, batch_size: int) -> tuple[int, str | None]:
    if iterations is not None:
        if epochs is not None or dataset_size is not None:
            raise PerfcastError("give either iterations or epochs and dataset_size, not both")
        return _positive_int("iterations", iterations), None
    if epochs is None or dataset_size is None:
        raise PerfcastError("give iterations, or epochs and dataset_size "
                            "(iterations = epochs × ⌈dataset_size / batch_size⌉)")
    epochs = _positive_int("epochs", epochs)
    dataset_size = _positive_int("dataset_size", dataset_size)
    per_epoch = math.ceil(dataset_size / batch_size)
    return epochs * per_epoch, (f"iterations: {epochs} epochs × ⌈{dataset_size} / {batch_size}⌉ "
                                f"= {epochs} × {per_epoch} = {epochs * per_epoch}")


def estimate_cost(model: Any = None, *, device: str, iterations: int | None = None,
                  epochs: int | None = None, dataset_size: int | None = None,
                  batch_size: int | None = None, mode: str = "train",
                  precision: str | None = None, optimizer: str = "sgd-momentum",
                  input_size: tuple[int, ...] | str | None = None, seq_len: int | None = None,
                  provider: str | None = None, price_per_hour: float | None = None,
                  region: str | None = None, time_ms: float | None = None,
                  power_w: float | None = None, pue: float = 1.0,
                  predictor: str | None = None, gpus: int = 1) -> CostEstimate:
    """Cost (USD), energy (kWh) and carbon (kg CO2e) of ``iterations`` batches of ``model`` on
    one ``device``.

    ``iterations`` or ``epochs`` × ⌈``dataset_size`` / ``batch_size``⌉ (``batch_size`` defaults
    to ``perfcast.api.DEFAULT_BATCH[mode]``). Time per iteration: ``time_ms`` (ms) if given, else
    :func:`perfcast.predict`'s ``time_ms`` for ``model`` (``precision``, ``optimizer``,
    ``input_size``, ``seq_len``, ``predictor`` are passed on). Price: ``price_per_hour`` (USD per
    GPU-hour) if given, else :func:`~perfcast.decisions.prices.choose_price` (``provider``'s
    latest on-demand row, or the lowest provider's).
    Power: ``power_w`` (W) if given, else the predicted energy per iteration, else the device's
    TDP from the registry (an upper-bound estimate); ``pue`` (≥ 1) multiplies the energy.
    Carbon: ``region`` (see :func:`carbon_intensity`), else the world average when the table
    has one. ``gpus``: GPUs the job runs on (price and a given or TDP power × ``gpus``; a
    parallel prediction's ``time_ms`` and per-GPU ``power_w``).
    """
    from perfcast.api import DEFAULT_BATCH, parse_request, predict_workload
    from perfcast.devices import get_device

    if mode not in DEFAULT_BATCH:
        raise unknown_choice("mode", mode, DEFAULT_BATCH)
    dev = get_device(device)
    w = opts = None
    if model is not None:
        w, opts = parse_request(model, mode=mode, precision=precision, optimizer=optimizer,
                                input_size=input_size, seq_len=seq_len, predictor=predictor)
    batch_size = DEFAULT_BATCH[mode] if batch_size is None else _positive_int("batch size",
                                                                              batch_size)
    n_iter, iter_note = _iterations(iterations, epochs, dataset_size, batch_size)
    pue = _positive("pue", pue)
    if pue < 1:
        raise PerfcastError(f"pue must be >= 1 (facility energy / IT energy), got {pue:g}")
    if price_per_hour is not None:
        price_per_hour = _positive("price per hour", price_per_hour, allow_zero=True)
    if power_w is not None:
        power_w = _positive("power_w", power_w)
    if model is None and time_ms is None:
        raise PerfcastError("give a model to predict the step time from, or time_ms (--time-ms)")
    choice = choose_price(dev, provider, price_per_hour)

    notes: list[str] = []
    sources: dict[str, str] = {}
    pred = None
    label = w.spec if w is not None else None
    if time_ms is not None:
        step_ms = _positive("time_ms", time_ms)
        sources["time"] = "given"
    else:
        pred = predict_workload(w.replace(batch_size=batch_size), dev, **opts)
        label, precision, batch_size = pred.model, pred.precision, pred.batch_size
        notes.extend(pred.notes)
        if pred.time_ms is None:
            raise PerfcastError(f"no step-time prediction for {label} on {dev.key}; "
                                f"pass time_ms (--time-ms)")
        step_ms = float(pred.time_ms)
        sources["time"] = f"predicted ({pred.predictor.get('time_ms', 'unknown predictor')})"
    if iter_note:
        notes.append(iter_note)
    hours = step_ms * n_iter / 3.6e6
    gpus = _positive_int("gpus", gpus)
    out = CostEstimate(model=label, device=dev.key, mode=mode, precision=precision,
                       batch_size=batch_size, iterations=n_iter, time_ms_per_iteration=step_ms,
                       hours=hours, pue=pue, sources=sources, notes=notes, gpus=gpus)
    _apply_price(out, choice)
    if out.usd_per_gpu_hour is not None:
        out.usd = hours * out.usd_per_gpu_hour * out.gpus
    if pred is not None and pred.time_ms_low is not None and pred.time_ms_high is not None:
        out.coverage = pred.coverage
        out.hours_low = pred.time_ms_low * n_iter / 3.6e6
        out.hours_high = pred.time_ms_high * n_iter / 3.6e6
        if out.usd_per_gpu_hour is not None:
            out.usd_low = out.hours_low * out.usd_per_gpu_hour * out.gpus
            out.usd_high = out.hours_high * out.usd_per_gpu_hour * out.gpus

    # energy
    if power_w is not None:
        out.power_w = power_w
        out.energy_kwh = power_w * gpus * hours / 1000 * pue
        sources["energy"] = "given power_w" + (f" × {gpus} GPUs" if gpus > 1 else "")
    elif pred is not None and pred.energy_j:
        out.power_w = pred.power_w
        out.energy_kwh = pred.energy_j * gpus * n_iter / 3.6e6 * pue
        sources["energy"] = (f"predicted ({pred.predictor.get('energy_j', 'unknown predictor')}"
                             + (f", at the {pred.power_limit_w:g} W default power limit"
                                if getattr(pred, "power_limit_w", None) else "") + ")")
    elif dev.tdp_w:
        out.power_w = dev.tdp_w
        out.energy_kwh = dev.tdp_w * gpus * hours / 1000 * pue
        sources["energy"] = f"ESTIMATE: TDP of {dev.key} ({dev.tdp_w:g} W, device registry)"
        notes.append(f"energy: ESTIMATE from {dev.key}'s board power / TDP ({dev.tdp_w:g} W), an "
                     f"upper bound on the average draw; pass --power-w for a measured figure")
    else:
        notes.append(f"energy: no energy prediction and no TDP on file for {dev.key}; "
                     f"pass --power-w")
    if out.energy_kwh is not None and pue == 1.0:
        notes.append("energy: pue 1.0 counts the device only, no data-centre overhead "
                     "(cooling, power delivery); pass --pue to include it")

    # carbon
    g = src = None
    if region is not None:
        g, src, out.region = carbon_lookup(region)
    elif not world_average_known():
        notes.append("carbon: no region given and the table has no world average; "
                     "pass --region")
    else:
        g, src, out.region = carbon_lookup("world")
        notes.append(f"carbon: no region given, so the world average ({g:g} g CO2e/kWh); "
                     f"pass --region for the grid the job runs on")
    if g is not None:
        out.carbon_g_per_kwh = g
        sources["carbon"] = src
        if out.energy_kwh is not None:
            out.kg_co2e = out.energy_kwh * g / 1000
    return out


def estimate_generation_cost(model, *, device: str, requests: int,
                             input_len: int | None = None, output_len: int | None = None,
                             batch_size: int | None = None, engine: str | None = None,
                             tensor_parallel: int | None = None, precision: str | None = None,
                             provider: str | None = None, price_per_hour: float | None = None,
                             region: str | None = None, pue: float = 1.0) -> CostEstimate:
    """Cost (USD), energy (kWh) and carbon (kg CO2e) of serving ``requests`` LLM requests:
    ``model`` is an ``hf:`` spec with the generation options (``input_len`` → ``output_len``
    tokens in batches of ``batch_size`` (default 1) with ``engine`` on ``tensor_parallel``
    devices) or a ready ``--mode generate`` :class:`~perfcast.workload.Workload`.
    ``⌈requests / batch⌉`` batches (llama.cpp: one request at a time) × the predicted
    batch latency (:func:`perfcast.generation.predict_generation`); energy = the predicted
    energy per batch (power ∈ [idle, TDP] × devices × time) × batches × ``pue``; price per
    GPU-hour × devices; carbon from the grid tables as :func:`estimate_cost`."""
    from perfcast.api import as_workload
    from perfcast.devices import get_device
    from perfcast.generation import predict_generation, resolve

    requests = _positive_int("requests", requests)
    pue = _positive("pue", pue)
    if pue < 1:
        raise PerfcastError(f"pue must be >= 1 (facility energy / IT energy), got {pue:g}")
    if price_per_hour is not None:
        price_per_hour = _positive("price per hour", price_per_hour, allow_zero=True)
    req = resolve(as_workload(model, mode="generate", batch_size=batch_size, precision=precision,
                              input_len=input_len, output_len=output_len, engine=engine,
                              tensor_parallel=tensor_parallel))
    req.require_lengths()
    dev = get_device(device)
    choice = choose_price(dev, provider, price_per_hour)
    p = predict_generation(req, dev)
    framework, tensor_parallel = req.engine, req.tensor_parallel
    batch_size, input_len, output_len = req.batch_size, req.input_len, req.output_len
    per_batch = batch_size  # concurrent requests in every engine (llama.cpp: its server slots)
    batches = math.ceil(requests / per_batch)
    hours = p.time_ms * batches / 3.6e6
    out = CostEstimate(model=req.spec, device=dev.key, mode="generate", precision=req.precision,
                       batch_size=batch_size, iterations=batches, time_ms_per_iteration=p.time_ms,
                       hours=hours, gpus=tensor_parallel, pue=pue,
                       sources={"time": f"predicted ({p.predictor.get('time_ms')})"},
                       notes=[f"iterations: {requests:,} requests in {batches:,} batches of "
                              f"{per_batch} ({input_len:,} → {output_len:,} tokens each, "
                              f"{framework}, {tensor_parallel} device(s))"])
    out.notes.extend(n for n in p.notes if not n.startswith("memory_mb"))
    _apply_price(out, choice)
    if out.usd_per_gpu_hour is not None:
        out.usd = hours * out.usd_per_gpu_hour * tensor_parallel
    if p.energy_j is not None:
        out.power_w = p.power_w
        out.energy_kwh = p.energy_j * batches / 3.6e6 * pue
        out.sources["energy"] = f"predicted ({p.predictor.get('energy_j')})"
        out.notes.append(f"energy: {p.energy_per_request_j:,.1f} J per request, "
                         f"{p.energy_per_1k_tokens_j:,.0f} J per 1k output tokens "
                         f"(power_w is per device, {tensor_parallel} device(s))")
    g, src, out.region = carbon_lookup(region if region is not None else "world") \
        if (region is not None or world_average_known()) else (None, None, None)
    if g is not None:
        out.carbon_g_per_kwh = g
        out.sources["carbon"] = src
        if out.energy_kwh is not None:
            out.kg_co2e = out.energy_kwh * g / 1000
        if region is None:
            out.notes.append(f"carbon: no region given, so the world average ({g:g} g "
                             f"CO2e/kWh); pass --region for the grid the job runs on")
    return out


def _apply_price(out: CostEstimate, choice) -> None:
    """The chosen price (:class:`~perfcast.decisions.prices.PriceChoice`) into ``out``: its
    fields, ``sources["price"]`` and its one-line note."""
    out.usd_per_gpu_hour, out.provider = choice.usd_per_gpu_hour, choice.provider
    out.price_source, out.price_as_of = choice.price_source, choice.price_as_of
    out.price_row = choice.row.to_dict() if choice.row is not None else None
    if choice.usd_per_gpu_hour is not None:
        out.sources["price"] = choice.summary
    out.notes.extend(choice.notes)


__all__ = ["CostEstimate", "estimate_cost", "estimate_generation_cost"]
