"""Price and carbon tables of the cost decision (package data, ``perfcast/decisions/data/``).

* ``prices.json`` — on-demand USD per instance-hour and per GPU-hour per provider, instance and
  perfcast device key, each row with its published source. Override the whole table with
  ``$PERFCAST_PRICES`` (a JSON file of the same schema) or a single price with
  ``price_per_hour``.
* ``carbon_intensity.json`` — g CO2e/kWh per country (ISO3) and per cloud region, plus the
  world average, built from codecarbon's data by ``scripts/build_carbon_table.py``. Override
  with ``$PERFCAST_CARBON``.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.paths import package_data

_DATA = package_data("decisions", "data")
PRICES_FILE = _DATA / "prices.json"
CARBON_FILE = _DATA / "carbon_intensity.json"

#: Other names accepted for a provider.
PROVIDER_ALIASES = {"google": "gcp", "google-cloud": "gcp", "gce": "gcp", "amazon": "aws",
                    "ec2": "aws", "microsoft": "azure"}
#: AWS-style region names (``us-east-1``, ``eu-central-1``): no per-region figure is published.
_AWS_REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d+$")
_NO_REGION_DATA = ("{p} publishes no per-region carbon intensity (the table has {have} regions "
                   "only); pass the region's country instead, e.g. --region USA or --region "
                   "Germany")

# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------

def prices_path() -> Path:
    """``$PERFCAST_PRICES`` or the shipped ``data/prices.json``."""
    env = os.environ.get("PERFCAST_PRICES")
    return Path(env).expanduser() if env else PRICES_FILE


def carbon_path() -> Path:
    """``$PERFCAST_CARBON`` or the shipped ``data/carbon_intensity.json``."""
    env = os.environ.get("PERFCAST_CARBON")
    return Path(env).expanduser() if env else CARBON_FILE


def _read_json(path: Path, what: str) -> Any:
    try:
        stat = path.stat()
    except OSError:
        raise PerfcastError(f"{what} file not found: {path}") from None
    return _read_cached(str(path), stat.st_mtime_ns, stat.st_size, what)


@lru_cache(maxsize=16)
def _read_cached(path: str, mtime_ns: int, size: int, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PerfcastError(f"cannot read {what} file {path}: {exc}") from None


def _number(row: dict, key: str, where: str, *, positive: bool = True) -> float:
    value = row.get(key)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise PerfcastError(f"{where}: {key} must be a number, got {row.get(key)!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise PerfcastError(f"{where}: {key} must be finite and {'> 0' if positive else '>= 0'}, "
                            f"got {row.get(key)!r}")
    return value


def _price_row(row: Any, i: int, path: Path) -> dict[str, Any]:
    where = f"{path.name} price row {i}"
    if not isinstance(row, dict):
        raise PerfcastError(f"{where}: expected an object, got {type(row).__name__}")
    for key in ("provider", "device"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise PerfcastError(f"{where}: '{key}' must be a non-empty string")
    gpus = row.get("gpus", 1)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus <= 0:
        raise PerfcastError(f"{where}: gpus must be a positive integer, got {gpus!r}")
    out = dict(row)
    out["provider"] = row["provider"].strip().lower()
    out["device"] = row["device"].strip().lower()
    out["gpus"] = gpus
    if row.get("usd_per_gpu_hour") is not None:
        out["usd_per_gpu_hour"] = _number(row, "usd_per_gpu_hour", where, positive=False)
        if row.get("usd_per_hour") is None:
            out["usd_per_hour"] = out["usd_per_gpu_hour"] * gpus
        else:
            out["usd_per_hour"] = _number(row, "usd_per_hour", where, positive=False)
    elif row.get("usd_per_hour") is not None:
        out["usd_per_hour"] = _number(row, "usd_per_hour", where, positive=False)
        out["usd_per_gpu_hour"] = out["usd_per_hour"] / gpus
    else:
        raise PerfcastError(f"{where}: give usd_per_gpu_hour or usd_per_hour")
    out.setdefault("instance", None)
    out["source"] = row.get("source") or str(path)
    out.setdefault("as_of", None)
    return out


def load_prices(path: str | Path | None = None) -> list[dict[str, Any]]:
    """Validated price rows of ``path``, else ``$PERFCAST_PRICES``, else the shipped table.

    Each row: ``provider``, ``instance``, ``device`` (perfcast device key), ``gpus``,
    ``usd_per_hour`` (USD per instance-hour), ``usd_per_gpu_hour`` (= usd_per_hour / gpus),
    ``source``, ``as_of``. A user file is ``{"prices": [rows]}`` or a bare list of rows; a row
    needs ``provider``, ``device`` and one of the two prices (``gpus`` defaults to 1).
    """
    p = Path(path).expanduser() if path else prices_path()
    doc = _read_json(p, "price")
    rows = doc.get("prices") if isinstance(doc, dict) else doc
    if not isinstance(rows, list):
        raise PerfcastError(f"{p}: expected a 'prices' list of rows")
    return [_price_row(r, i, p) for i, r in enumerate(rows)]


def load_carbon(path: str | Path | None = None) -> dict[str, Any]:
    """The validated carbon-intensity table of ``path``, else ``$PERFCAST_CARBON``, else the
    shipped one: ``{"world": {g_per_kwh, year, source} | None, "countries": [{iso3, name,
    g_per_kwh, year, source}], "regions": [{provider, region, country_iso3, g_per_kwh,
    source}], ...}``, all intensities in g CO2e per kWh. A user file has the same keys;
    ``world``, ``countries`` and ``regions`` are each optional."""
    p = Path(path).expanduser() if path else carbon_path()
    return copy.deepcopy(_carbon(p))


def _carbon(p: Path) -> dict[str, Any]:
    stat = p.stat() if p.exists() else None
    return _carbon_cached(str(p), stat.st_mtime_ns if stat else 0)


@lru_cache(maxsize=8)
def _carbon_cached(path: str, mtime_ns: int) -> dict[str, Any]:
    p = Path(path)
    doc = _read_json(p, "carbon-intensity")
    if not isinstance(doc, dict):
        raise PerfcastError(f"{p}: expected an object with 'countries' / 'regions' / 'world'")
    out = {k: v for k, v in doc.items() if k not in ("world", "countries", "regions")}
    world = doc.get("world")
    if world is not None:
        if not isinstance(world, dict):
            raise PerfcastError(f"{p.name}: 'world' must be an object")
        world = {**world, "g_per_kwh": _number(world, "g_per_kwh", f"{p.name} world",
                                               positive=False)}
    out["world"] = world
    countries = []
    for i, row in enumerate(doc.get("countries") or []):
        where = f"{p.name} country row {i}"
        if not isinstance(row, dict) or not isinstance(row.get("iso3"), str):
            raise PerfcastError(f"{where}: needs an 'iso3' code")
        countries.append({**row, "iso3": row["iso3"].strip().upper(),
                          "name": row.get("name") or row["iso3"],
                          "g_per_kwh": _number(row, "g_per_kwh", where, positive=False)})
    regions = []
    for i, row in enumerate(doc.get("regions") or []):
        where = f"{p.name} region row {i}"
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str)
                                                for k in ("provider", "region")):
            raise PerfcastError(f"{where}: needs 'provider' and 'region' strings")
        regions.append({**row, "provider": row["provider"].strip().lower(),
                        "region": row["region"].strip().lower(),
                        "g_per_kwh": _number(row, "g_per_kwh", where, positive=False)})
    out["countries"], out["regions"] = countries, regions
    out["path"] = str(p)
    return out


# --------------------------------------------------------------------------------------------
# lookups
# --------------------------------------------------------------------------------------------

def provider_name(name: str) -> str:
    q = str(name).strip().lower()
    return PROVIDER_ALIASES.get(q, q)


def price_source(row: dict[str, Any]) -> str:
    gpus = row["gpus"]
    inst = f" {row['instance']}" if row.get("instance") else ""
    split = f" ÷ {gpus} GPUs" if gpus > 1 else ""
    when = f" [as of {row['as_of']}]" if row.get("as_of") else ""
    return (f"{row['provider']}{inst}: {row['usd_per_hour']:g} USD/h{split}; "
            f"{row['source']}{when}")


def price_rows(device: str, provider: str | None = None,
               path: str | Path | None = None) -> list[dict[str, Any]]:
    """Price rows for ``device`` (and ``provider``), cheapest per GPU-hour first."""
    rows = load_prices(path)
    dev = str(device).strip().lower()
    if provider is not None:
        prov = provider_name(provider)
        known = sorted({r["provider"] for r in rows})
        if prov not in known:
            close = difflib.get_close_matches(prov, known, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise PerfcastError(f"unknown provider '{provider}'; {hint}known providers: "
                                f"{', '.join(known)}")
        rows = [r for r in rows if r["provider"] == prov]
    rows = [r for r in rows if r["device"] == dev]
    return sorted(rows, key=lambda r: (r["usd_per_gpu_hour"], r["gpus"]))


def price_for(device: str, provider: str | None = None, *,
              path: str | Path | None = None) -> tuple[float, str] | None:
    """``(USD per GPU-hour, source)`` of the cheapest on-demand row for ``device`` (of
    ``provider`` when given), or ``None`` when the table has no price for it. An unknown
    ``provider`` is a :class:`PerfcastError` listing the known ones."""
    rows = price_rows(device, provider, path)
    if not rows:
        return None
    return rows[0]["usd_per_gpu_hour"], price_source(rows[0])


def carbon_lookup(region: str, path: str | Path | None = None) -> tuple[float, str, str]:
    """``(g CO2e/kWh, source, canonical region id)`` for ``region``."""
    table = _carbon(Path(path).expanduser() if path else carbon_path())
    q = str(region).strip()
    ql = q.lower()
    countries, regions, world = table["countries"], table["regions"], table["world"]
    have = sorted({r["provider"] for r in regions})
    have_txt = "/".join(have) if have else "no cloud"

    def country(row: dict) -> tuple[float, str, str]:
        year = f", {row['year']}" if row.get("year") else ""
        return (row["g_per_kwh"], f"{row['name']} ({row['iso3']}) grid{year}: {row.get('source')}",
                row["iso3"])

    def cloud(row: dict) -> tuple[float, str, str]:
        loc = f" ({row['location']})" if row.get("location") else ""
        return (row["g_per_kwh"], f"{row['provider']} {row['region']}{loc}: {row.get('source')}",
                f"{row['provider']}:{row['region']}")

    if ql in ("world", "wld", "owid_wrl", "global") and world is not None:
        return world["g_per_kwh"], f"world average: {world.get('source')}", "world"
    if ":" in ql:
        prov, _, name = ql.partition(":")
        prov, name = provider_name(prov), name.strip()
        hits = [r for r in regions if r["provider"] == prov and r["region"] == name]
        if hits:
            return cloud(hits[0])
        if prov not in have:
            raise PerfcastError(_NO_REGION_DATA.format(p=prov, have=have_txt))
    else:
        for row in countries:
            if ql == row["iso3"].lower() or ql == str(row["name"]).lower():
                return country(row)
        hits = [r for r in regions if r["region"] == ql]
        if len(hits) == 1:
            return cloud(hits[0])
        if len(hits) > 1:
            ids = ", ".join(f"{r['provider']}:{r['region']}" for r in hits)
            raise PerfcastError(f"region '{region}' is ambiguous; use one of {ids}")
        if _AWS_REGION.match(ql) and not any(r["provider"] == "aws" for r in regions):
            raise PerfcastError(_NO_REGION_DATA.format(p=f"'{region}' looks like an AWS region; "
                                                         f"AWS", have=have_txt))
    keys: dict[str, tuple[str, str]] = {}  # lower-case name -> (entry id, what to print)
    for row in countries:
        keys[row["iso3"].lower()] = (row["iso3"], row["iso3"])
        keys[str(row["name"]).lower()] = (row["iso3"], str(row["name"]))
    for row in regions:
        rid = f"{row['provider']}:{row['region']}"
        keys[rid] = (rid, rid)
        keys.setdefault(row["region"], (rid, rid))
    seen: dict[str, str] = {}
    for k in difflib.get_close_matches(ql, list(keys), n=8, cutoff=0.6):
        seen.setdefault(*keys[k])  # one suggestion per country / region
    close = list(seen.values())[:3]
    hint = f"did you mean {', '.join(close)}? " if close else ""
    example = "gcp:europe-west1" if "gcp" in have else "provider:region"
    raise PerfcastError(f"unknown region '{region}'; {hint}use an ISO3 country code (FRA), a "
                        f"country name, a cloud region ({example})"
                        f"{' or world' if world is not None else ''}")


def carbon_intensity(region: str, *, path: str | Path | None = None) -> tuple[float, str]:
    """``(g CO2e per kWh, source)`` of the grid at ``region``: an ISO3 country code or a country
    name (case-insensitive), a cloud region (``gcp:europe-west1`` or bare ``europe-west1``), or
    ``world``. AWS and Azure publish no per-region figure: give the region's country. Unknown
    names raise :class:`PerfcastError` with close matches."""
    g, source, _ = carbon_lookup(region, path)
    return g, source


def world_average_known() -> bool:
    """Whether the carbon table in use has a world average."""
    return _carbon(carbon_path())["world"] is not None


__all__ = ["CARBON_FILE", "PRICES_FILE", "PROVIDER_ALIASES", "carbon_intensity", "carbon_lookup",
           "carbon_path", "load_carbon", "load_prices", "price_for", "price_rows", "price_source",
           "prices_path", "provider_name", "world_average_known"]
