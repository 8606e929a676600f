"""Carbon table of the cost decision (package data, ``perfcast/decisions/data/``) and the
provider names shared with the price table.

* ``carbon_intensity.json`` — g CO2e/kWh per country (ISO3) and per cloud region, plus the
  world average, built from codecarbon's data by ``scripts/build_carbon_table.py``. Override
  with ``$PERFCAST_CARBON``.

GPU prices are not shipped: :mod:`perfcast.decisions.prices` reads the public price table.
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
    """A provider's canonical name: lower case, aliases resolved (``google`` → ``gcp``)."""
    q = str(name).strip().lower()
    return PROVIDER_ALIASES.get(q, q)


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


__all__ = ["CARBON_FILE", "PROVIDER_ALIASES", "carbon_intensity", "carbon_lookup",
           "carbon_path", "load_carbon", "provider_name", "world_average_known"]
