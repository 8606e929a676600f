"""On-demand GPU prices: the public price table, validated once, and the price of one device.

The table is ``prices/gpu_prices.csv`` in the shared public data (:func:`perfcast.paths.
public_data_dir`, ``$PERFCAST_DATA``; its README gives the columns and caveats) — read at run
time, never copied into the package — or the CSV file ``$PERFCAST_PRICES`` names
(:func:`perfcast.paths.price_table_path`; the same columns: ``provider, instance_type, region, gpu_model, gpus_per_instance,
usd_per_hour_instance, usd_per_gpu_hour, pricing, as_of, source``). :func:`load_price_table`
validates it in one place: a malformed file is a one-line :class:`~perfcast.errors.
PerfcastError` naming the file and the line.

**Devices.** A row's ``gpu_model`` is a device-registry key (``h100-sxm``, ``l4`` …): it prices
that device. A device given by a spec file (or a user device) whose key has no row is priced as
the registry GPU or ``gpu_model`` its ``name`` matches (case, spaces and punctuation ignored),
with a note. :func:`unmapped_gpu_models` lists the rows no registry GPU takes,
:func:`unpriced_gpus` the registry GPUs no row prices.

**Which row** (:func:`choose_price`), among the device's ``on-demand`` rows:

* an *offer* is one (provider, instance type, region); of its rows the latest-dated one counts
  (a dated row beats an undated catalog snapshot: prices move, the README keeps the old rows);
* ``provider`` given: of that provider's offers, the latest-dated; ties go to the smallest
  instance (fewest GPUs, the shape a one-GPU job rents), then the lower price;
* no provider: each provider's offer as above, then the **lowest USD per GPU-hour among
  providers** (ties: fewest GPUs, then the provider's name). Rows that are a GPU charge only
  (GCP's ``n1 + 1x … (GPU charge only)``: the VM is billed on top) take part only where no
  provider has a whole-instance price, since they are not comparable with instance prices;
* ``price_per_hour`` given: that price, no row.

No price: USD stays ``None`` (never 0) and one note says why and how to give one.
"""

from __future__ import annotations

import csv
import datetime as _dt
import math
import os
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfcast.decisions.tables import PROVIDER_ALIASES, provider_name
from perfcast.errors import PerfcastError
from perfcast.paths import PRICES_ENV, price_table_path
#: The columns of the table, in order.
COLUMNS: tuple[str, ...] = ("provider", "instance_type", "region", "gpu_model",
                            "gpus_per_instance", "usd_per_hour_instance", "usd_per_gpu_hour",
                            "pricing", "as_of", "source")
#: The only pricing the decisions use (the table has no other; a row with another is kept but
#: never chosen).
ON_DEMAND = "on-demand"
#: ``usd_per_gpu_hour`` must equal ``usd_per_hour_instance`` ÷ ``gpus_per_instance`` within
#: this relative tolerance (the table rounds the division to 6 decimals).
_RATIO_TOLERANCE = 1e-3
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: A commit pinned in a repository URL: ``…/blob/<sha>/…`` or raw ``…/<owner>/<repo>/<sha>/…``.
_COMMIT = re.compile(r"/(?:blob|tree|raw|commit)/([0-9a-f]{7,40})(?:/|$)|"
                     r"raw\.githubusercontent\.com/[^/]+/[^/]+/([0-9a-f]{7,40})/")

#: Registry GPUs meant for datacenters that no row of the table prices, each with the reason.
#: The fast tier asserts that every built-in datacenter GPU is priced or listed here (and that
#: nothing listed here has a price): a GPU that gains a row leaves this list, a new registry
#: GPU without one must be added with its reason. These are facts about the table, not a claim
#: that nobody rents the GPU: give yours with ``--price-per-hour``.
NOT_IN_PRICE_TABLE: dict[str, str] = {
    "p4": "Tesla P4 (Pascal, 2016): none of the table's providers or sources lists an offer",
    "p100-16gb-pcie": "Tesla P100 (Pascal, 2016): none of the table's providers or sources "
                      "lists an offer",
    "v100-32gb-pcie": "the table's V100 offers are SXM2 boards (AWS p3, Azure NC v3 / ND v2, "
                      "GCP); none is the 32 GB PCIe card",
    "a100-40gb-pcie": "the table's A100 40 GB offers are SXM4 boards (AWS p4d, Azure ND96asr "
                      "v4, GCP a2-highgpu); none is the PCIe card",
    "a40": "none of the table's providers or sources lists an A40 offer",
    "mi100": "the table's only AMD offers are MI300X (Azure, DigitalOcean)",
    "mi210": "the table's only AMD offers are MI300X (Azure, DigitalOcean)",
    "mi250": "the table's only AMD offers are MI300X (Azure, DigitalOcean)",
    "max1550": "none of the table's providers or sources lists an Intel Data Center GPU Max "
               "offer",
}
#: Registry GPUs that are desktop or workstation cards (GeForce, TITAN, Quadro / RTX
#: workstation): not datacenter GPUs, so the price-coverage rule does not apply to them. Some
#: have a row anyway (RunPod rents RTX 4090 and RTX 6000 Ada); the others get no price.
DESKTOP_GPUS: frozenset[str] = frozenset({
    "rtx2080ti", "rtx3090", "rtx4090", "rtx5090", "titan-rtx", "titan-xp", "quadro-rtx-6000",
    "rtx6000-ada"})


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PriceRow:
    """One row of the price table: ``provider``'s ``instance_type`` in ``region``
    (``unspecified`` where the source gives none) with ``gpus_per_instance`` × ``gpu_model``,
    ``usd_per_hour_instance`` (USD per instance-hour) and ``usd_per_gpu_hour`` (= instance ÷
    GPUs), ``pricing`` (``on-demand``), ``as_of`` (the source's date, ``YYYY-MM-DD``; ``None``
    for an undated catalog snapshot, whose ``source`` URL pins the commit) and ``source`` (the
    URL the number was read from); ``line``: its line in ``path``."""

    provider: str
    instance_type: str
    region: str
    gpu_model: str
    gpus_per_instance: int
    usd_per_hour_instance: float
    usd_per_gpu_hour: float
    pricing: str
    as_of: str | None
    source: str
    path: str
    line: int

    @property
    def commit(self) -> str | None:
        """The commit the ``source`` URL is pinned to (short), if any."""
        m = _COMMIT.search(self.source)
        return (m.group(1) or m.group(2))[:7] if m else None

    @property
    def as_of_text(self) -> str:
        """``as of 2026-11-09``, or ``undated catalog snapshot (commit e385a0d)``."""
        if self.as_of:
            return f"as of {self.as_of}"
        return "undated catalog snapshot" + (f" (commit {self.commit})" if self.commit else "")

    @property
    def gpu_charge_only(self) -> bool:
        """The row is the GPU's surcharge only; the VM (vCPUs, RAM) is billed on top."""
        return "gpu charge only" in self.instance_type.lower()

    @property
    def offer(self) -> tuple[str, str, str, str]:
        return (self.provider, self.instance_type, self.region, self.gpu_model)

    def describe(self) -> str:
        """``aws p5.48xlarge (8 GPUs, us-east-1)``; an instance type with spaces is quoted."""
        gpus = f"{self.gpus_per_instance} GPU{'s' if self.gpus_per_instance > 1 else ''}"
        region = "region unspecified" if self.region == "unspecified" else self.region
        inst = f'"{self.instance_type}"' if " " in self.instance_type else self.instance_type
        return f"{self.provider} {inst} ({gpus}, {region})"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["as_of_text"] = self.as_of_text
        return d


@dataclass(frozen=True)
class PriceTable:
    """The validated rows of the price CSV at ``path``."""

    path: str
    rows: tuple[PriceRow, ...]

    @property
    def providers(self) -> tuple[str, ...]:
        return tuple(sorted({r.provider for r in self.rows}))

    @property
    def gpu_models(self) -> tuple[str, ...]:
        return tuple(sorted({r.gpu_model for r in self.rows}))

    def rows_for(self, gpu_model: str, provider: str | None = None) -> list[PriceRow]:
        """The on-demand rows of ``gpu_model`` (and ``provider``), in file order."""
        return [r for r in self.rows if r.gpu_model == gpu_model and r.pricing == ON_DEMAND
                and (provider is None or r.provider == provider)]


def prices_path() -> Path:
    """``$PERFCAST_PRICES``, else ``public_data_dir()/prices/gpu_prices.csv``
    (:func:`perfcast.paths.price_table_path`)."""
    return price_table_path()


def load_price_table(path: str | Path | None = None) -> PriceTable:
    """The validated table at ``path``, else :func:`prices_path`. A missing or malformed file
    is a one-line :class:`PerfcastError` naming it (and the line)."""
    p = Path(path).expanduser() if path else prices_path()
    try:
        st = p.stat()
    except OSError:
        src = "" if path else (f" (${PRICES_ENV})" if os.environ.get(PRICES_ENV) else
                               " (set PERFCAST_DATA to the shared public data folder, or "
                               f"{PRICES_ENV} to a CSV of its columns)")
        raise PerfcastError(f"price table not found: {p}{src}") from None
    if not p.is_file():
        raise PerfcastError(f"price table {p} is not a file")
    return _load_cached(str(p), st.st_mtime_ns, st.st_size)


def find_price_table() -> PriceTable | None:
    """The table in use, or ``None`` when the shared data has none (and ``$PERFCAST_PRICES``
    is not set: a file the user names must exist)."""
    if os.environ.get(PRICES_ENV):
        return load_price_table()
    p = prices_path()
    return load_price_table(p) if p.is_file() else None


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> PriceTable:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise PerfcastError(f"{path}: empty price table (expected the columns "
                                    f"{', '.join(COLUMNS)})")
            header = [h.strip() for h in header]
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise PerfcastError(f"{path}: missing column(s) {', '.join(missing)} (expected "
                                    f"{', '.join(COLUMNS)})")
            rows = []
            for fields in reader:
                line = reader.line_num
                if not any(x.strip() for x in fields):
                    continue
                if len(fields) != len(header):
                    raise PerfcastError(f"{path}:{line}: {len(fields)} fields, the header has "
                                        f"{len(header)} (a comma inside a value must be quoted)")
                rows.append(_row(dict(zip(header, fields)), path, line))
    except OSError as exc:
        raise PerfcastError(f"cannot read price table {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise PerfcastError(f"cannot read price table {path}: not UTF-8 text ({exc.reason})") \
            from None
    except csv.Error as exc:
        raise PerfcastError(f"{path}: malformed CSV: {exc}") from None
    if not rows:
        raise PerfcastError(f"{path}: the price table has no rows")
    return PriceTable(path=path, rows=tuple(rows))


def _row(raw: dict[str, str], path: str, line: int) -> PriceRow:
    where = f"{path}:{line}"
    v = {k: (raw.get(k) or "").strip() for k in COLUMNS}
    for k in ("provider", "instance_type", "region", "gpu_model", "pricing", "source"):
        if not v[k]:
            raise PerfcastError(f"{where}: empty {k}" + (" (every price needs the URL it was "
                                                          "read from)" if k == "source" else ""))
    try:
        gpus = int(v["gpus_per_instance"])
    except ValueError:
        gpus = 0
    if gpus <= 0:
        raise PerfcastError(f"{where}: gpus_per_instance must be a positive whole number, got "
                            f"{v['gpus_per_instance']!r}")
    usd = {}
    for k in ("usd_per_hour_instance", "usd_per_gpu_hour"):
        try:
            x = float(v[k])
        except ValueError:
            x = math.nan
        if not math.isfinite(x) or x <= 0:
            raise PerfcastError(f"{where}: {k} must be a number > 0, got {v[k]!r}")
        usd[k] = x
    expect = usd["usd_per_hour_instance"] / gpus
    if abs(usd["usd_per_gpu_hour"] - expect) > _RATIO_TOLERANCE * expect:
        raise PerfcastError(f"{where}: usd_per_gpu_hour {usd['usd_per_gpu_hour']:g} is not "
                            f"usd_per_hour_instance {usd['usd_per_hour_instance']:g} / "
                            f"{gpus} GPUs = {expect:.6g}")
    as_of = v["as_of"] or None
    if as_of is not None:
        try:
            if not _DATE.match(as_of):
                raise ValueError
            _dt.date.fromisoformat(as_of)
        except ValueError:
            raise PerfcastError(f"{where}: as_of must be a date YYYY-MM-DD or empty (an undated "
                                f"snapshot), got {as_of!r}") from None
    return PriceRow(provider=provider_name(v["provider"]), instance_type=v["instance_type"],
                    region=v["region"], gpu_model=v["gpu_model"].lower(),
                    gpus_per_instance=gpus, usd_per_hour_instance=usd["usd_per_hour_instance"],
                    usd_per_gpu_hour=usd["usd_per_gpu_hour"], pricing=v["pricing"].lower(),
                    as_of=as_of, source=v["source"], path=path, line=line)


def price_providers() -> tuple[str, ...]:
    """The providers of the table in use; ``()`` when there is none or it cannot be read (for
    help texts: the commands then say why)."""
    try:
        t = find_price_table()
    except PerfcastError:
        return ()
    return t.providers if t is not None else ()


def check_provider(provider: str | None, table: PriceTable | None = None) -> str | None:
    """``provider``'s canonical name (aliases: ``google`` → ``gcp`` …), or a one-line
    :class:`PerfcastError` listing the table's providers."""
    if provider is None:
        return None
    t = table if table is not None else find_price_table()
    prov = provider_name(provider)
    if t is None:
        raise PerfcastError(f"--provider {provider}: no price table found at {prices_path()} "
                            f"(set PERFCAST_DATA to the shared public data folder, or "
                            f"{PRICES_ENV} to a CSV of its columns)")
    if prov not in t.providers:
        import difflib

        close = difflib.get_close_matches(prov, t.providers, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise PerfcastError(f"unknown provider '{provider}'; {hint}known providers: "
                            f"{', '.join(t.providers)}")
    return prov


# --------------------------------------------------------------------------------------------
# devices ↔ rows
# --------------------------------------------------------------------------------------------

def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(text).lower())


def _builtin_gpus() -> list:
    from perfcast.devices import device_origin, list_devices

    return [d for d in list_devices() if d.is_gpu and device_origin(d.key) == "built-in"]


def price_key(device: Any, table: PriceTable) -> tuple[str | None, str | None]:
    """``(gpu_model, note)``: the ``gpu_model`` whose rows price ``device`` (a
    :class:`~perfcast.devices.Device`) — its key, else the registry GPU or ``gpu_model`` its
    ``name`` matches (the note says so) — or ``(None, None)``."""
    from perfcast.devices import device_origin

    models = set(table.gpu_models)
    if device.key in models:
        origin = device_origin(device.key)
        if origin in ("built-in", ""):
            return device.key, None
        return device.key, (f"price: {device.key} ({origin}) is priced as the price table's "
                            f"gpu_model {device.key}, its key")
    name = _norm(getattr(device, "name", "") or "")
    if not name:
        return None, None
    for d in _builtin_gpus():
        if d.key != device.key and d.key in models and _norm(d.name) == name:
            return d.key, (f"price: {device.key} is priced as {d.key}: its spec name "
                           f"'{device.name}' is the registry's {d.key}")
    for m in sorted(models):
        if _norm(m) == name:
            return m, (f"price: {device.key} is priced as {m}: its spec name '{device.name}' "
                       f"is the price table's gpu_model {m}")
    return None, None


def unmapped_gpu_models(table: PriceTable | None = None) -> list[str]:
    """The table's ``gpu_model`` values that are no registered device key (their rows price a
    device only through a spec file's name, until the registry has the GPU)."""
    from perfcast.devices import device_keys

    t = table if table is not None else load_price_table()
    keys = set(device_keys())
    return [m for m in t.gpu_models if m not in keys]


def unpriced_gpus(table: PriceTable | None = None) -> list[str]:
    """The built-in registry GPUs without an on-demand row."""
    t = table if table is not None else load_price_table()
    return [d.key for d in _builtin_gpus() if not t.rows_for(d.key)]


# --------------------------------------------------------------------------------------------
# choosing
# --------------------------------------------------------------------------------------------

@dataclass
class PriceChoice:
    """The price of one device: ``usd_per_gpu_hour`` (``None``: no price), the ``provider``,
    ``price_source`` (the row's URL, or ``given``), ``price_as_of`` (``YYYY-MM-DD``, ``undated
    catalog snapshot (commit …)``, or ``None``), the chosen ``row`` (``None``: given or none),
    ``gpu_model`` it was priced as, and the one-line ``notes`` to show."""

    device: str
    usd_per_gpu_hour: float | None = None
    provider: str | None = None
    price_source: str | None = None
    price_as_of: str | None = None
    gpu_model: str | None = None
    row: PriceRow | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """``aws p5.48xlarge (8 GPUs, us-east-1): 55.04 USD/h ÷ 8 GPUs, as of …; <url>`` —
        where the price came from, in one string (``CostEstimate.sources["price"]``)."""
        if self.row is None:
            return "given" if self.usd_per_gpu_hour is not None else "none"
        r = self.row
        split = f" ÷ {r.gpus_per_instance} GPUs" if r.gpus_per_instance > 1 else ""
        return (f"{r.describe()}: {r.usd_per_hour_instance:g} USD/h{split}, {r.as_of_text}; "
                f"{r.source}")

    def fields(self) -> dict[str, Any]:
        """The JSON fields every priced answer carries."""
        return {"usd_per_gpu_hour": self.usd_per_gpu_hour, "provider": self.provider,
                "price_source": self.price_source, "price_as_of": self.price_as_of}


def _latest_per_offer(rows: list[PriceRow]) -> list[PriceRow]:
    """Of each offer's rows the latest-dated one (dated before undated; file order breaks a
    tie)."""
    best: dict[tuple, PriceRow] = {}
    for r in rows:
        cur = best.get(r.offer)
        if cur is None or (r.as_of or "") > (cur.as_of or ""):
            best[r.offer] = r
    return list(best.values())


def _provider_pick(rows: list[PriceRow]) -> tuple[PriceRow, list[PriceRow]]:
    """One provider's row: its offers' latest rows, latest date first, then fewest GPUs, then
    the lower price. Returns the row and the other offers it was chosen over."""
    offers = _latest_per_offer(rows)
    offers.sort(key=lambda r: (-_date_ord(r.as_of), r.gpus_per_instance, r.usd_per_gpu_hour,
                               r.line))
    return offers[0], offers[1:]


def _offer_why(row: PriceRow, rest: list[PriceRow]) -> str | None:
    """Why ``row`` was taken over its provider's other offers ``rest`` (``None``: none)."""
    if not rest:
        return None
    n, nxt = len(rest) + 1, rest[0]
    if _date_ord(row.as_of) > _date_ord(nxt.as_of):
        return f"{row.provider}'s latest-dated of {n} offers"
    when = row.as_of_text
    if row.gpus_per_instance < nxt.gpus_per_instance:
        return f"{row.provider}'s smallest instance of {n} offers ({when})"
    return f"{row.provider}'s cheapest of {n} offers ({when}, {row.gpus_per_instance} GPU each)"


def _date_ord(as_of: str | None) -> int:
    return _dt.date.fromisoformat(as_of).toordinal() if as_of else 0


def _fmt_usd(x: float) -> str:
    return f"{x:,.4g}" if x < 10 else f"{x:,.2f}"


def choose_price(device: Any, provider: str | None = None, price_per_hour: float | None = None,
                 *, table: PriceTable | None = None,
                 override: str | None = "--price-per-hour") -> PriceChoice:
    """The price per GPU-hour of ``device`` (a key, spec file or
    :class:`~perfcast.devices.Device`) by the module's rule: ``price_per_hour`` if given, else
    ``provider``'s row, else the lowest provider's. An unknown ``provider`` is a one-line
    :class:`PerfcastError` listing the known ones; no price is a :class:`PriceChoice` with
    ``usd_per_gpu_hour=None`` and one note. ``override``: the option the notes point to for
    the user's own price (``None``: the command has none)."""
    from perfcast.devices import get_device

    give = f"; pass {override} (USD per GPU-hour) for USD" if override else ""

    dev = get_device(device)
    if price_per_hour is not None:
        v = price_per_hour
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v < 0:
            raise PerfcastError(f"--price-per-hour must be a finite number >= 0 (USD per "
                                f"GPU-hour), got {v!r}")
        if provider is not None:
            check_provider(provider, table)
        return PriceChoice(device=dev.key, usd_per_gpu_hour=float(v),
                           provider=provider_name(provider) if provider else None,
                           price_source="given", price_as_of=None,
                           notes=[f"price: {float(v):g} USD per GPU-hour for {dev.key}, given "
                                  f"(--price-per-hour)"])
    t = table if table is not None else find_price_table()
    prov = check_provider(provider, t)
    if t is None:
        return PriceChoice(device=dev.key, notes=[
            f"price: none for {dev.key}: no price table at {prices_path()} (set PERFCAST_DATA to "
            f"the shared public data folder){give}"])
    if not dev.is_gpu:
        return PriceChoice(device=dev.key, notes=[
            f"price: none for {dev.key}: the price table lists cloud GPUs{give}"])
    model, match_note = price_key(dev, t)
    rows = t.rows_for(model, prov) if model else []
    notes = [match_note] if match_note else []
    if not rows:
        why = NOT_IN_PRICE_TABLE.get(model or dev.key)
        if model and prov:
            have = sorted({r.provider for r in t.rows_for(model)})
            why = f"{prov} has no on-demand row for it" + (
                f" (providers with one: {', '.join(have)})" if have else "")
        elif not why:
            why = "no on-demand row in the price table"
        return PriceChoice(device=dev.key, gpu_model=model, notes=[
            *notes, f"price: none for {dev.key} ({why}){give}"])
    by_provider: dict[str, list[PriceRow]] = {}
    for r in rows:
        by_provider.setdefault(r.provider, []).append(r)
    picks = {p: _provider_pick(rs) for p, rs in by_provider.items()}
    if prov is not None:
        row, rest = picks[prov]
        how = [_offer_why(row, rest) or f"{prov}'s only offer"]
    else:
        whole = {p: pk for p, pk in picks.items() if not pk[0].gpu_charge_only}
        pool = whole or picks
        best = sorted((pk[0] for pk in pool.values()),
                      key=lambda r: (r.usd_per_gpu_hour, r.gpus_per_instance, r.provider))
        row = best[0]
        if len(picks) == 1:
            how = ["the only provider with a price for it"]
        else:
            each = ", ".join(f"{p} {_fmt_usd(pk[0].usd_per_gpu_hour)}"
                             for p, pk in sorted(pool.items()))
            tie = [r.provider for r in best[1:] if r.usd_per_gpu_hour == row.usd_per_gpu_hour]
            how = [f"the lowest of {len(pool)} providers' latest prices ({each})"
                   + (f"; {', '.join(tie)} tied, {row.provider} rents fewer GPUs per instance"
                      if tie and row.gpus_per_instance < best[1].gpus_per_instance else
                      f"; tied with {', '.join(tie)}, first by name" if tie else "")]
            skipped = sorted(set(picks) - set(pool))
            if skipped:
                how.append(", ".join(f"{p} {_fmt_usd(picks[p][0].usd_per_gpu_hour)}"
                                     for p in skipped)
                           + ": GPU charge only, not compared with whole-instance prices")
        why = _offer_why(row, picks[row.provider][1])
        if why:
            how.append(why)
        if len(picks) > 1:
            how.append("--provider to choose one")
    if row.gpu_charge_only:
        how.append("GPU charge only: the VM (vCPUs, RAM) is billed on top")
    notes.append(f"price: {_fmt_usd(row.usd_per_gpu_hour)} USD per GPU-hour for {dev.key}: "
                 f"{row.describe()}, {row.as_of_text} — {'; '.join(how)}"
                 + (f"; {override} for yours" if override else ""))
    as_of = row.as_of or row.as_of_text
    return PriceChoice(device=dev.key, usd_per_gpu_hour=row.usd_per_gpu_hour,
                       provider=row.provider, price_source=row.source, price_as_of=as_of,
                       gpu_model=model, row=row, notes=notes)


def price_table_notes(table: PriceTable | None = None) -> list[str]:
    """What the table in use covers, for docs and ``--help``: its rows, providers and dates."""
    t = table if table is not None else find_price_table()
    if t is None:
        return [f"no price table at {prices_path()}"]
    dated = sorted(r.as_of for r in t.rows if r.as_of)
    undated = sum(r.as_of is None for r in t.rows)
    span = f"dated {dated[0]} – {dated[-1]}" if dated else "undated"
    return [f"{len(t.rows)} rows from {len(t.providers)} providers ({', '.join(t.providers)}), "
            f"{span}" + (f", {undated} undated catalog snapshots" if undated else "")
            + f": {t.path}"]


__all__ = ["COLUMNS", "DESKTOP_GPUS", "NOT_IN_PRICE_TABLE", "ON_DEMAND", "PRICES_ENV",
           "PROVIDER_ALIASES", "PriceChoice", "PriceRow", "PriceTable",
           "check_provider", "choose_price", "find_price_table", "load_price_table",
           "price_key", "price_providers", "price_table_notes", "prices_path",
           "unmapped_gpu_models", "unpriced_gpus"]
