"""Query before you measure (NNLQP's evolving latency database): what a measurement store
knows of a workload on a device, and a prediction for what it does not.

:func:`query` looks the workload up in the store (``perfcast collect``'s SQLite file or a
team's PostgreSQL database, opened read-only by :class:`perfcast.measured.StoreReader`) by
model, device, mode, precision, batch size, input size (or sequence length), optimizer and —
when given — CPU threads: every repeat of that configuration is a measurement of it. Each
target gets an :class:`Answer` whose ``source`` says where it comes from:

* ``measured`` — from the store, with its spread and date: time per batch (ms) is the median of
  the repeats' medians, ``spread`` holds the timed iterations' p10 / p90 (lowest / highest over
  the repeats), the standard deviation of the first repeat, the number of timed iterations and
  of repeats; memory (MiB) is what the run measured (``kind``: NVML's used memory on a GPU when
  recorded, else CUDA's reserved, else the peak of live tensors — the quantity perfcast's CPU
  models are trained on); energy (J per batch) from RAPL / NVML. ``measured_at``: the newest
  row's date (UTC, ISO 8601). A run that went out of memory is a measurement too: ``status``
  ``oom``, no value, ``fits`` false.
* ``predicted`` — the store has no (successful) row: the forecast of
  :func:`perfcast.api.predict_workload`, marked as such, with the predictor that gave it.
  A failed or timed-out run is not a value: the prediction answers and a note names the run.
* ``none`` — neither (e.g. energy on a device without an energy model).

With ``enqueue`` (``perfcast query --measure-missing`` passes the store's
:meth:`perfcast.store.MeasurementStore.ask`) a configuration the store lacks is queued in the
store (``measure_queue``, schema 2): ``perfcast collect --queued --db … --device …`` on a
machine of that device measures the queue. :func:`apply_measurements` puts measured values
into a :class:`~perfcast.api.Prediction` (``perfcast predict --store``). This module only reads
a store (runtime code, beside the prediction); writing one is :mod:`perfcast.store`'s.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.workload import OPTIMIZER_NOT_GIVEN, Workload

#: The targets a query answers → their unit.
TARGETS = {"time_ms": "ms per batch", "memory_mb": "MiB", "energy_j": "J per batch"}


@dataclass
class Answer:
    """One target's value and where it comes from (see the module docstring)."""

    value: float | None
    source: str  # measured | predicted | none
    unit: str
    status: str | None = None  # measured: the run's status (ok, oom)
    reason: str | None = None  # measured oom: why
    spread: dict[str, Any] | None = None
    measured_at: str | None = None
    host: str | None = None
    kind: str | None = None  # memory: which quantity was measured
    predictor: str | None = None


@dataclass
class QueryResult:
    """What :func:`query` found for one workload on one device. ``source``: ``measured`` (every
    answered target measured), ``predicted`` (none), ``measured+predicted`` (some);
    ``queued``: with ``enqueue``, ``queued`` / ``already queued`` / ``measured`` /
    ``failed before`` (``None`` otherwise)."""

    model: str
    device: str
    mode: str
    precision: str
    batch_size: int
    input_size: str | None
    seq_len: int | None
    optimizer: str | None
    threads: int | None
    store: str
    answers: dict[str, Answer] = field(default_factory=dict)
    fits: bool | None = None
    rows: int = 0
    queued: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        srcs = {a.source for a in self.answers.values() if a.source != "none"}
        if srcs == {"measured"}:
            return "measured"
        if "measured" in srcs:
            return "measured+predicted"
        return "predicted" if srcs else "none"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["source"] = self.source
        return d


# --------------------------------------------------------------------------- store rows
def _input_candidates(w: Workload) -> list[str | None]:
    """The input-size texts a store row of ``w`` may carry: as given, and — for a model at its
    default input — both ``None`` (collected without ``--input-sizes``) and the default."""
    texts: list[str | None] = [w.input_size_text]
    try:
        from perfcast.zoo import default_input_size

        default = default_input_size(w.replace(input_size=None)) if w.seq_len is None else None
    except (PerfcastError, ImportError, AttributeError, TypeError, ValueError):
        default = None
    if default and w.model.inputs in ("image", "tensor"):
        dtext = ",".join(map(str, default))
        if w.input_size_text in (None, dtext):
            texts = [w.input_size_text, None if w.input_size_text else dtext]
    return list(dict.fromkeys(texts))


def _rows(store, w: Workload, device: str, threads: int | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    # a store names a model as it was collected: `resnet50` and `timm:resnet50` are one model
    bare = w.model.name if w.model.kind == "timm" else w.spec  # a bare name is a timm name
    for model in dict.fromkeys((w.spec, w.model.canonical, bare)):
        for text in _input_candidates(w):
            rows += store.find(model=model, device=device, mode=w.mode, precision=w.precision,
                               batch_size=w.batch_size, input_size=text, seq_len=w.seq_len,
                               optimizer=w.run_optimizer, threads=threads)
    return rows


def _pick_threads(rows: list[dict], threads: int | None, notes: list[str]) -> list[dict]:
    """Rows of one thread count: the one asked for, else the only one, else the most threads
    (a note names the others)."""
    if threads is not None:
        return rows
    counts = sorted({r.get("threads") for r in rows}, key=lambda t: -1 if t is None else t)
    if len(counts) <= 1:
        return rows
    pick = counts[-1]
    shown = ", ".join("default" if t is None else str(t) for t in counts)
    notes.append(f"measured at threads {shown}: showing {pick} (give --threads for another)")
    return [r for r in rows if r.get("threads") == pick]


def _when(rows: list[dict]) -> str | None:
    dates = [r["created_at"] for r in rows if r.get("created_at")]
    return max(dates) if dates else None


def _hosts(rows: list[dict]) -> str | None:
    hosts = sorted({r["host"] for r in rows if r.get("host")})
    return ", ".join(hosts) or None


def _measured(rows: list[dict], store: str) -> dict[str, Answer]:
    """Answers from a configuration's ok rows (one per repeat)."""
    first = min(rows, key=lambda r: (r.get("repeat") or 0, r.get("id") or 0))
    when, host = _when(rows), _hosts(rows)
    out: dict[str, Answer] = {}
    med = [r["time_ms_median"] for r in rows if r.get("time_ms_median") is not None]
    if med:
        p10 = [r["time_ms_p10"] for r in rows if r.get("time_ms_p10") is not None]
        p90 = [r["time_ms_p90"] for r in rows if r.get("time_ms_p90") is not None]
        spread = {"p10": min(p10) if p10 else None, "p90": max(p90) if p90 else None,
                  "std": first.get("time_ms_std"),
                  "n": sum(int(r["n"]) for r in rows if r.get("n") is not None) or None,
                  "repeats": len(med)}
        if len(med) > 1:
            spread.update(repeat_min=min(med), repeat_max=max(med))
        out["time_ms"] = Answer(statistics.median(med), "measured", TARGETS["time_ms"],
                                status="ok", spread=spread, measured_at=when, host=host)
    for col, kind in (("nvml_used_mb", "NVML used device memory"),
                      ("cuda_max_reserved_mb", "CUDA caching allocator, max reserved"),
                      ("peak_tensor_mb", "peak of live tensors")):
        vals = [r[col] for r in rows if r.get(col) is not None]
        if vals:
            out["memory_mb"] = Answer(
                statistics.median(vals), "measured", TARGETS["memory_mb"], status="ok",
                spread={"min": min(vals), "max": max(vals), "repeats": len(vals)},
                measured_at=when, host=host, kind=kind)
            break
    energy = [r["energy_j"] for r in rows if r.get("energy_j") is not None]
    if energy:
        src = {r.get("energy_source") for r in rows if r.get("energy_source")}
        out["energy_j"] = Answer(statistics.median(energy), "measured", TARGETS["energy_j"],
                                 status="ok", spread={"min": min(energy), "max": max(energy),
                                                      "repeats": len(energy)},
                                 measured_at=when, host=host, kind=", ".join(sorted(src)) or None)
    return out


# --------------------------------------------------------------------------- the query
def _resolve(model, device: str, batch_size, input_size, seq_len, mode, precision, optimizer,
             threads):
    """The workload and device of a query, validated once (as :func:`perfcast.api.predict`
    does: default batch per mode, the device's measured precision when none is given)."""
    from perfcast.api import as_workload, check_threads, with_defaults
    from perfcast.devices import get_device

    check_threads(threads)
    dev = get_device(device)
    w = as_workload(model, batch_size=batch_size, input_size=input_size, seq_len=seq_len,
                    mode=mode, precision=precision, optimizer=optimizer)
    w, note = with_defaults(w, dev)
    return w, dev, note


def query(model: Any, *, device: str, store: str, batch_size: int | None = None,
          input_size: Any = None, seq_len: int | None = None, mode: str = "infer",
          precision: str | None = None, optimizer: Any = OPTIMIZER_NOT_GIVEN,
          threads: int | None = None, predictor: str | None = None,
          enqueue: Callable[[Workload, str, int | None], bool] | None = None,
          use_cache: bool = True) -> QueryResult:
    """The measured value of each target when ``store`` has it, else the prediction (see the
    module docstring). ``store``: a SQLite file or SQLAlchemy URL, read-only. ``threads``: CPU
    threads of the measurement (default: any; the most when several were measured).
    ``enqueue(workload, device key, threads)``: asks for a configuration the store has no row of
    to be measured, ``True`` when newly queued (e.g. ``MeasurementStore(store).ask``, which
    creates a SQLite store that does not exist yet); ``QueryResult.queued`` says what
    happened."""
    from perfcast.measured import StoreReader

    w, dev, precision_note = _resolve(model, device, batch_size, input_size, seq_len, mode,
                                      precision, optimizer, threads)
    notes: list[str] = ([precision_note] if precision_note else []) + w.optimizer_notes()
    with StoreReader(store) as st:
        rows = _pick_threads(_rows(st, w, dev.key, threads), threads, notes)
        shown = st.target
    res = QueryResult(model=w.spec, device=dev.key, mode=w.mode, precision=w.precision,
                      batch_size=int(w.batch_size), input_size=w.input_size_text,
                      seq_len=w.seq_len, optimizer=w.run_optimizer, threads=threads,
                      store=shown, rows=len(rows), notes=notes)
    ok = [r for r in rows if r["status"] == "ok"]
    oom = [r for r in rows if r["status"] == "oom"]
    bad = [r for r in rows if r["status"] in ("failed", "timeout")]
    if ok:
        res.answers = _measured(ok, shown)
        res.threads = threads if threads is not None else ok[0].get("threads")
    elif oom:
        r = oom[-1]
        for t, unit in TARGETS.items():
            res.answers[t] = Answer(None, "measured", unit, status="oom", reason=r["reason"],
                                    measured_at=_when(oom), host=_hosts(oom))
        res.fits = False
        res.notes.append(f"measured: out of memory on {_when(oom) or 'an unknown date'}"
                         + (f" ({r['reason']})" if r.get("reason") else ""))
    if bad and not ok and not oom:
        r = bad[-1]
        res.notes.append(f"a measurement of it {r['status']} on {r.get('created_at')}: "
                         f"{r.get('reason') or 'no reason recorded'} (perfcast collect "
                         f"--retry-failed measures it again); predicted instead")
    missing = [t for t in TARGETS if t not in res.answers]
    if missing:
        from perfcast.api import predict_workload

        p = predict_workload(w, dev, predictor=predictor, use_cache=use_cache,
                             threads=res.threads)
        for t in missing:
            v = getattr(p, t)
            res.answers[t] = Answer(v, "predicted" if v is not None else "none",
                                    TARGETS[t], predictor=p.predictor.get(t))
        measured = [t for t in res.answers]  # a prediction's notes on them do not apply
        res.notes += [n for n in p.notes if n not in res.notes
                      and not any(n.startswith(f"{t}:") for t in measured)]
    mem = res.answers["memory_mb"].value
    if res.fits is None and mem is not None and dev.memory_mb is not None:
        res.fits = bool(mem <= dev.memory_mb)
    if enqueue is not None:
        if ok or oom:
            res.queued = "measured"
        elif bad:
            res.queued = "failed before"
        else:
            res.queued = "queued" if enqueue(w, dev.key, threads) else "already queued"
    return res


def apply_measurements(p, store: str, *, threads: int | None = None, optimizer: str | None = None):
    """``p`` (a :class:`~perfcast.api.Prediction`) with the values ``store`` measured for its
    workload in place of the predicted ones (``predictor[target] = "measured"``; throughput,
    fits and power recomputed; a note per measured target names the store, the date and the
    spread; ``optimizer``: the prediction's, ``None`` = the model's default). Returns ``p``."""
    from perfcast.devices import get_device
    from perfcast.measured import StoreReader

    dev = get_device(p.device)
    w = Workload.of(p.model, batch_size=p.batch_size, input_size=p.input_size,
                    seq_len=p.seq_len, mode=p.mode, precision=p.precision,
                    optimizer=optimizer or OPTIMIZER_NOT_GIVEN)
    notes: list[str] = []
    with StoreReader(store) as st:
        rows = _pick_threads(_rows(st, w, dev.key, threads), threads, notes)
        target = st.target
    ok = [r for r in rows if r["status"] == "ok"]
    oom = [r for r in rows if r["status"] == "oom"]
    if ok:
        answers = _measured(ok, target)
        p.notes = [n for n in p.notes if not any(n.startswith(f"{t}:") for t in answers)]
        for t, a in answers.items():
            setattr(p, t, a.value)
            p.predictor[t] = "measured"
            p.trained_on.pop(t, None)
            if hasattr(p, f"{t}_low"):  # a measurement has no prediction interval
                setattr(p, f"{t}_low", None)
                setattr(p, f"{t}_high", None)
                p.intervals[t] = {"coverage": None, "note": f"{t}: measured, not predicted"}
            what = f"{t}: measured in {target} on {a.measured_at}"
            if a.spread and t == "time_ms" and a.spread.get("p10") is not None:
                what += (f" (p10–p90 {a.spread['p10']:.3f}–{a.spread['p90']:.3f} ms, "
                         f"{a.spread['n']} iterations, {a.spread['repeats']} run(s))")
            elif a.kind:
                what += f" ({a.kind})"
            notes.append(what)
        if p.time_ms:
            p.throughput_samples_per_s = p.batch_size / p.time_ms * 1e3
        if not any(v.get("coverage") for v in (getattr(p, "intervals", None) or {}).values()):
            p.coverage = None
        if p.memory_mb is not None and p.capacity_mb is not None:
            p.fits = bool(p.memory_mb <= p.capacity_mb)
        if p.energy_j and p.time_ms:
            p.power_w = p.energy_j / (p.time_ms / 1e3)
    elif oom:
        p.fits = False
        notes.append(f"measured in {target}: out of memory on {_when(oom)}"
                     + (f" ({oom[-1]['reason']})" if oom[-1].get("reason") else ""))
    else:
        notes.append(f"not measured in {target}: every value is predicted")
    p.notes[:0] = notes
    return p


__all__ = ["TARGETS", "Answer", "QueryResult", "apply_measurements", "query"]
