"""Cost and carbon of a job: predicted time × GPU price, energy × grid carbon intensity.

TraPPM §VI-D's example: a training step of 350 ms for 2×10⁵ iterations is 19.44 h; at
2.934 USD per A100-hour that is ≈ 57 USD. :func:`estimate_cost` does that arithmetic from a
perfcast prediction (or a given step time) and adds energy and CO2e, saying where each number
came from. Prices come from the public price table (:mod:`perfcast.decisions.prices`: provider,
instance, date and source of each), grid intensities from :mod:`perfcast.decisions.tables`.
Every mode and layout (:func:`cost_request`): a layout's iteration priced × its GPUs, ``--mode
generate``'s batches of requests × their tensor-parallel devices.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.decisions.common import device_of, request_for
from perfcast.decisions.prices import choose_price
from perfcast.decisions.tables import carbon_lookup, world_average_known
from perfcast.errors import PerfcastError

# --------------------------------------------------------------------------------------------
# estimate
# --------------------------------------------------------------------------------------------

@dataclass
class CostEstimate:
    """Cost and carbon of running ``iterations`` batches on ``gpus`` GPUs (one device, a
    layout's, or a served model's tensor-parallel devices).

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


def _iterations(req, batch_size: int) -> tuple[int, str | None]:
    """Batches the job runs: ``iterations``, or ``epochs`` × ⌈``dataset_size`` / batch⌉
    (``--mode generate``: ⌈``requests`` / batch⌉), with the note saying how."""
    v = req.value
    iterations, epochs, dataset_size = v("iterations"), v("epochs"), v("dataset_size")
    if req.mode == "generate":
        requests = v("requests")
        if requests is not None and iterations is not None:
            raise PerfcastError("give --requests (requests to serve) or --iterations (batches), "
                                "not both")
        if requests is None:
            if iterations is None:
                raise PerfcastError("cost --mode generate needs --requests (requests to serve) "
                                    "or --iterations (batches of --batch-size requests)")
            return iterations, None
        batches = math.ceil(requests / batch_size)
        return batches, f"{requests:,} requests in {batches:,} batches of {batch_size}"
    if iterations is not None:
        if epochs is not None or dataset_size is not None:
            raise PerfcastError("give either --iterations or --epochs and --dataset-size, "
                                "not both")
        return iterations, None
    if epochs is None or dataset_size is None:
        raise PerfcastError("give --iterations, or --epochs and --dataset-size (iterations = "
                            "epochs × ⌈dataset size / --batch-size⌉)")
    per_epoch = math.ceil(dataset_size / batch_size)
    n = math.ceil(epochs * per_epoch - 1e-9)
    return n, (f"iterations: {epochs:g} epochs × ⌈{dataset_size} / {batch_size}⌉ "
               f"= {epochs:g} × {per_epoch} = {n}")


def estimate_cost(model: Any = None, *, device: str, iterations: int | None = None,
                  epochs: float | None = None, dataset_size: int | None = None,
                  batch_size: int | None = None, mode: str = "train",
                  precision: str | None = None, optimizer: str | None = None,
                  input_size: tuple[int, ...] | str | None = None, seq_len: int | None = None,
                  provider: str | None = None, price_per_hour: float | None = None,
                  region: str | None = None, time_ms: float | None = None,
                  power_w: float | None = None, pue: float = 1.0,
                  predictor: str | None = None, gpus: int | None = None,
                  **options: Any) -> CostEstimate:
    """Cost (USD), energy (kWh) and carbon (kg CO2e) of ``iterations`` batches of ``model`` on
    ``device`` — ``perfcast cost``, every mode and layout (:func:`cost_request`).

    ``iterations`` or ``epochs`` × ⌈``dataset_size`` / ``batch_size``⌉ (``batch_size`` defaults
    to ``perfcast.api.DEFAULT_BATCH[mode]``). Time per iteration: ``time_ms`` (ms) if given, else
    :func:`perfcast.predict`'s ``time_ms`` for ``model`` (``precision``, ``optimizer``,
    ``input_size``, ``seq_len``, ``predictor`` and ``options`` — a layout's ``data_parallel``
    …, generation's ``input_len`` … — are passed on). Price: ``price_per_hour`` (USD per
    GPU-hour) if given, else :func:`~perfcast.decisions.prices.choose_price` (``provider``'s
    latest on-demand row, or the lowest provider's).
    Power: ``power_w`` (W) if given, else the predicted energy per iteration, else the device's
    TDP from the registry (an upper-bound estimate); ``pue`` (≥ 1) multiplies the energy.
    Carbon: ``region`` (see :func:`carbon_intensity`), else the world average when the table
    has one. ``gpus``: GPUs the job runs on (price and a given or TDP power × ``gpus``; a
    layout's or a served model's own GPUs otherwise).
    """
    return cost_request(request_for(
        "cost", model, device=device, iterations=iterations, epochs=epochs,
        dataset_size=dataset_size, batch_size=batch_size, mode=mode, precision=precision,
        optimizer=optimizer, input_size=input_size, seq_len=seq_len, provider=provider,
        price_per_hour=price_per_hour, region=region, time_ms=time_ms, power_w=power_w,
        pue=pue, predictor=predictor, gpus=gpus, **options))


def cost_request(req) -> CostEstimate:
    """The answer of ``perfcast cost`` to the validated request ``req``: the predicted (or
    given) time per batch × the batches, priced per GPU-hour × the GPUs (a layout's, a served
    model's tensor-parallel devices, or ``--gpus``), energy and carbon (module docstring)."""
    from perfcast.api import DEFAULT_BATCH
    from perfcast.request.engines import estimate

    v = req.value
    dev = device_of(req)
    mode, time_ms, power_w, pue = req.mode, v("time_ms"), v("power_w"), v("pue")
    batch_size = v("batch_size")
    if batch_size is not None and batch_size < 1:  # a workload says so itself; a given time
        raise PerfcastError(f"batch size must be a positive integer, got {batch_size!r}")
    batch_size = batch_size or DEFAULT_BATCH[mode]
    n_iter, iter_note = _iterations(req, batch_size)
    if req.workload is None and time_ms is None:
        raise PerfcastError("give a model to predict the step time from, or time_ms (--time-ms)")
    choice = choose_price(dev, v("provider"), v("price_per_hour"))

    notes: list[str] = []
    sources: dict[str, str] = {}
    pred = None
    label = req.workload.spec if req.workload is not None else None
    precision = v("precision")
    if time_ms is not None:
        step_ms = float(time_ms)
        sources["time"] = "given"
        if label is not None:  # a model beside a given time is not predicted: say so
            notes.append(f"time: the given --time-ms {step_ms:g} ms per batch is used; "
                         f"{label} only labels the job (it is not predicted — leave "
                         f"--time-ms out to predict it)")
    else:
        pred = estimate(req if "batch_size" in req.given else req.replace(batch_size=batch_size))
        label, precision, batch_size = pred.model, pred.precision, pred.batch_size
        notes.extend(n for n in pred.notes
                     if pred.kind != "generation" or not n.startswith("memory_mb"))
        if pred.time_ms is None:
            raise PerfcastError(f"no step-time prediction for {label} on {dev.key}; "
                                f"pass time_ms (--time-ms)")
        step_ms = float(pred.time_ms)
        sources["time"] = f"predicted ({pred.predictor.get('time_ms', 'unknown predictor')})"
    if iter_note:
        if pred is not None and pred.kind == "generation":
            notes.insert(0, f"iterations: {iter_note} ({pred.input_len:,} → "
                            f"{pred.output_len:,} tokens each, {pred.details.engine}, "
                            f"{pred.gpus} device(s))")
        else:
            notes.append(iter_note if iter_note.startswith("iterations") else
                         f"iterations: {iter_note}")
    gpus = _gpus(req, pred)
    hours = step_ms * n_iter / 3.6e6
    out = CostEstimate(model=label, device=dev.key, mode=mode, precision=precision,
                       batch_size=batch_size, iterations=n_iter, time_ms_per_iteration=step_ms,
                       hours=hours, pue=pue, sources=sources, notes=notes, gpus=gpus)
    _apply_price(out, choice)
    if out.usd_per_gpu_hour is not None:
        out.usd = hours * out.usd_per_gpu_hour * out.gpus
    low, high = getattr(pred, "time_ms_low", None), getattr(pred, "time_ms_high", None)
    if low is not None and high is not None:
        out.coverage = pred.coverage
        out.hours_low = low * n_iter / 3.6e6
        out.hours_high = high * n_iter / 3.6e6
        if out.usd_per_gpu_hour is not None:
            out.usd_low = out.hours_low * out.usd_per_gpu_hour * out.gpus
            out.usd_high = out.hours_high * out.usd_per_gpu_hour * out.gpus
    _energy(out, req, pred, dev, power_w, gpus, hours, n_iter, pue)
    _carbon(out, v("region"))
    return out


def _gpus(req, pred) -> int:
    """GPUs the job is priced for: a layout's or a served model's own (``--gpus``, if given,
    must agree), else ``--gpus`` (default 1)."""
    given = req.value("gpus") if "gpus" in req.given else None
    if pred is not None and pred.kind != "single":
        if given is not None and given != pred.gpus:
            raise PerfcastError(f"--gpus {given} differs from the {pred.gpus} GPU(s) the request "
                                f"runs on (its layout / --tensor-parallel): leave --gpus out")
        return int(pred.gpus)
    return int(given or 1)


def _energy(out: CostEstimate, req, pred, dev, power_w, gpus: int, hours: float, n_iter: int,
            pue: float) -> None:
    """Energy of the job: a given mean power × GPUs × hours, else the predicted energy per
    batch (every device) × batches, else TDP × GPUs × hours (an upper-bound estimate)."""
    sources, notes = out.sources, out.notes
    if power_w is not None:
        top = max(float(dev.tdp_w or 0), float(getattr(dev, "power_limit_max_w", None) or 0))
        if dev.is_gpu and top and power_w > top:
            # the board's power limit caps its mean draw: more is another unit (a node, kW)
            raise PerfcastError(f"--power-w {power_w:g} W is more than one {dev.key} can draw "
                                f"(its highest power limit is {top:g} W); give the mean power "
                                f"of one GPU (the job's energy multiplies it by --gpus)")
        out.power_w = power_w
        out.energy_kwh = power_w * gpus * hours / 1000 * pue
        sources["energy"] = "given power_w" + (f" × {gpus} GPUs" if gpus > 1 else "")
    elif pred is not None and pred.energy_j:
        out.power_w = pred.power_w
        per_batch = pred.energy_j * (gpus if pred.kind == "single" else 1)
        out.energy_kwh = per_batch * n_iter / 3.6e6 * pue
        limit = pred.power_limit_w
        sources["energy"] = (f"predicted ({pred.predictor.get('energy_j', 'unknown predictor')}"
                             + (f", at the {limit:g} W "
                                f"{'given' if 'power_limit_w' in req.given else 'default'} "
                                f"power limit" if limit else "")
                             + ")")
        if pred.kind == "generation":
            notes.append(f"energy: {pred.energy_per_request_j:,.1f} J per request, "
                         f"{pred.details.energy_per_1k_tokens_j:,.0f} J per 1k output tokens "
                         f"(power_w is per device, {pred.gpus} device(s))")
    elif dev.tdp_w:
        out.power_w = dev.tdp_w
        out.energy_kwh = dev.tdp_w * gpus * hours / 1000 * pue
        sources["energy"] = f"ESTIMATE: TDP of {dev.key} ({dev.tdp_w:g} W, device registry)"
        notes.append(f"energy: ESTIMATE from {dev.key}'s board power / TDP ({dev.tdp_w:g} W), an "
                     f"upper bound on the average draw; pass --power-w for a measured figure")
    else:
        notes.append(f"energy: no energy prediction and no TDP on file for {dev.key}"
                     + ("; pass --power-w" if req.mode != "generate" else ""))
    if out.energy_kwh is not None and pue == 1.0:
        notes.append("energy: pue 1.0 counts the device only, no data-centre overhead "
                     "(cooling, power delivery); pass --pue to include it")


def _carbon(out: CostEstimate, region: str | None) -> None:
    """The grid's carbon intensity (``region``, else the world average) and the emissions."""
    g = src = None
    if region is not None:
        g, src, out.region = carbon_lookup(region)
    elif not world_average_known():
        out.notes.append("carbon: no region given and the table has no world average; "
                         "pass --region")
    else:
        g, src, out.region = carbon_lookup("world")
        out.notes.append(f"carbon: no region given, so the world average ({g:g} g CO2e/kWh); "
                         f"pass --region for the grid the job runs on")
    if g is not None:
        out.carbon_g_per_kwh = g
        out.sources["carbon"] = src
        if out.energy_kwh is not None:
            out.kg_co2e = out.energy_kwh * g / 1000


def estimate_generation_cost(model, *, device: str, requests: int,
                             input_len: int | None = None, output_len: int | None = None,
                             batch_size: int | None = None, engine: str | None = None,
                             tensor_parallel: int | None = None, precision: str | None = None,
                             provider: str | None = None, price_per_hour: float | None = None,
                             region: str | None = None, pue: float = 1.0,
                             **options: Any) -> CostEstimate:
    """Cost (USD), energy (kWh) and carbon (kg CO2e) of serving ``requests`` LLM requests:
    ``model`` is an ``hf:`` spec with the generation options (``input_len`` → ``output_len``
    tokens in batches of ``batch_size`` (default 1) with ``engine`` on ``tensor_parallel``
    devices) or a ready ``--mode generate`` :class:`~perfcast.workload.Workload` — what
    :func:`estimate_cost` answers with ``mode="generate"``: ``⌈requests / batch⌉`` batches ×
    the predicted batch latency; energy = the predicted energy per batch (every device) ×
    batches × ``pue``; price per GPU-hour × devices; carbon from the grid tables."""
    return cost_request(request_for(
        "cost", model, device=device, mode="generate", requests=requests, input_len=input_len,
        output_len=output_len, batch_size=batch_size, engine=engine,
        tensor_parallel=tensor_parallel, precision=precision, provider=provider,
        price_per_hour=price_per_hour, region=region, pue=pue, **options))


def _apply_price(out: CostEstimate, choice) -> None:
    """The chosen price (:class:`~perfcast.decisions.prices.PriceChoice`) into ``out``: its
    fields, ``sources["price"]`` and its one-line note."""
    out.usd_per_gpu_hour, out.provider = choice.usd_per_gpu_hour, choice.provider
    out.price_source, out.price_as_of = choice.price_source, choice.price_as_of
    out.price_row = choice.row.to_dict() if choice.row is not None else None
    if choice.usd_per_gpu_hour is not None:
        out.sources["price"] = choice.summary
    out.notes.extend(choice.notes)


__all__ = ["CostEstimate", "cost_request", "estimate_cost", "estimate_generation_cost"]
