"""Build ``perfcast/decisions/data/carbon_intensity.json`` from the codecarbon wheel.

    .venv/bin/python scripts/build_carbon_table.py [--out PATH] [--as-of YYYY-MM-DD]

Downloads the codecarbon 3.3.2 wheel (MIT licence) with
``python -m pip download --no-deps codecarbon==3.3.2`` into a temporary directory and reads
three files from it, keeping only the fields perfcast needs:

* ``codecarbon/data/private_infra/global_energy_mix.json`` — grid carbon intensity
  (g CO2e/kWh) per country (ISO3 code), with the data year;
* ``codecarbon/data/cloud/impact.csv`` — g CO2e/kWh per cloud region with the provider's
  source URL (codecarbon 3.3.2 lists GCP regions only: AWS and Azure publish no per-region
  figure, and codecarbon falls back to the country there);
* ``codecarbon/data/private_infra/carbon_intensity_per_source.json`` — ``world_average``,
  the world figure codecarbon itself falls back to (cited there to the IEA).

Nothing is estimated or filled in here: a figure absent from codecarbon is absent from the table.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import io
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERSION = "3.3.2"
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "perfcast" / "decisions" / "data" / "carbon_intensity.json"
COMMAND = f"python -m pip download --no-deps codecarbon=={VERSION}"

MIX = "codecarbon/data/private_infra/global_energy_mix.json"
CLOUD = "codecarbon/data/cloud/impact.csv"
PER_SOURCE = "codecarbon/data/private_infra/carbon_intensity_per_source.json"

#: Region names misspelt in codecarbon's impact.csv -> the provider's real name. The published
#: spelling is kept in ``region_as_published``.
REGION_FIXES = {("gcp", "me-cenrtal1"): "me-central1"}


def download_wheel(dest: Path) -> Path:
    """The codecarbon wheel, fetched with pip into ``dest``."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           f"codecarbon=={VERSION}", "-d", str(dest)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wheels = sorted(dest.glob(f"codecarbon-{VERSION}-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download produced no codecarbon {VERSION} wheel in {dest}")
    return wheels[0]


def _num(value) -> float | int:
    v = float(value)
    return int(v) if v.is_integer() else round(v, 3)


def countries(mix: dict) -> list[dict]:
    rows = []
    for iso3, row in sorted(mix.items()):
        ci = row.get("carbon_intensity")
        if ci is None:
            continue
        rows.append({"iso3": iso3, "name": row.get("country_name") or iso3,
                     "g_per_kwh": _num(ci), "year": row.get("year"),
                     "source": f"codecarbon {VERSION} global_energy_mix.json"})
    return rows


def regions(text: str) -> list[dict]:
    rows = []
    for row in csv.DictReader(io.StringIO(text.lstrip("\ufeff"))):
        if not row.get("impact"):
            continue
        provider = row["provider"].strip().lower()
        published = row["region"].strip()
        region = REGION_FIXES.get((provider, published), published)
        out = {"provider": provider, "region": region,
               "country_iso3": row.get("countryIsoCode") or None,
               "location": ", ".join(x for x in (row.get("city"), row.get("state"),
                                                 row.get("country_name")) if x) or None,
               "g_per_kwh": _num(row["impact"]), "year": None,  # impact.csv gives no year
               "source": row.get("source") or "codecarbon impact.csv"}
        if region != published:
            out["region_as_published"] = published
        rows.append(out)
    return sorted(rows, key=lambda r: (r["provider"], r["region"]))


def world(per_source: dict) -> dict | None:
    """codecarbon's world fallback, if it ships one (it has no 'World'/'OWID_WRL' country row)."""
    value = per_source.get("world_average")
    if value is None:
        return None
    return {"g_per_kwh": _num(value), "year": None,
            "source": f"codecarbon {VERSION} carbon_intensity_per_source.json 'world_average' "
                      f"(codecarbon's own fallback), citing "
                      f"{per_source.get('world_average_source', 'no source')}"}


def build(wheel: Path, as_of: str) -> dict:
    with zipfile.ZipFile(wheel) as zf:
        mix = json.loads(zf.read(MIX))
        cloud = zf.read(CLOUD).decode("utf-8")
        per_source = json.loads(zf.read(PER_SOURCE))
    if any(k.upper() in ("OWID_WRL", "WLD") or "world" in str(v.get("country_name", "")).lower()
           for k, v in mix.items()):
        raise SystemExit("global_energy_mix.json now has a world row: teach world() to use it")
    country_rows = countries(mix)
    years = sorted({r["year"] for r in country_rows if r["year"]})
    doc = {
        "description": "Grid carbon intensity of electricity (location-based, g CO2e per kWh) "
                       "per country and per cloud region, for perfcast's carbon estimates.",
        "units": {"g_per_kwh": "grams of CO2-equivalent per kWh of electricity consumed",
                  "year": "year of the generation-mix data (null: not stated by the source)"},
        "source": f"codecarbon {VERSION} (https://pypi.org/project/codecarbon/{VERSION}/): "
                  f"countries from {MIX} (data years {years[0]}-{years[-1]}); cloud regions "
                  f"from {CLOUD} (each row cites the provider's page; codecarbon {VERSION} "
                  f"lists GCP only); world from {PER_SOURCE}",
        "generated_by": f"scripts/build_carbon_table.py ({COMMAND}; reads the three files above)",
        "license": "codecarbon is MIT licensed (Copyright (c) 2019 Mila, BCG Gamma, CometML, "
                   "Haverford College; (c) 2023 Code Carbon NGO). Per codecarbon's documentation "
                   "its country figures derive from Our World in Data's energy data (Ember, "
                   "Energy Institute); cloud-region figures are the providers' own, as cited per "
                   "row.",
        "as_of": as_of,
        "note": "AWS and Azure publish no per-region carbon intensity; use the country of the "
                "region (codecarbon does the same).",
    }
    w = world(per_source)
    if w is not None:
        doc["world"] = w
    doc["countries"] = country_rows
    doc["regions"] = regions(cloud)
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--as-of", default=_dt.date.today().isoformat(),
                    help="date stamped into the table (default: today)")
    ap.add_argument("--wheel", type=Path, help="use this codecarbon wheel instead of downloading")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or download_wheel(Path(tmp))
        doc = build(wheel, args.as_of)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=1, ensure_ascii=False)
    # one row per line keeps the file small and diffs readable
    for key in ("countries", "regions"):
        rows = ",\n  ".join(json.dumps(r, ensure_ascii=False) for r in doc[key])
        start = text.index(f'"{key}": [')
        end = text.index("\n ]", start) + 3
        text = text[:start] + f'"{key}": [\n  {rows}\n ]' + text[end:]
    json.loads(text)  # still valid
    args.out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(doc['countries'])} countries, {len(doc['regions'])} regions"
          f"{', world' if 'world' in doc else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
