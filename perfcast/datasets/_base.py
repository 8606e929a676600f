"""Shared pieces of the dataset loaders: where the data lives, the record schema, the report."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import PerfcastError
from perfcast.paths import PUBLIC_DATA_ENV, public_data_dir

ENV_VAR = PUBLIC_DATA_ENV  # "PERFCAST_DATA"

#: The labeled-record schema, in column order (see the package docstring for units).
COLUMNS: tuple[str, ...] = (
    "model", "family", "device", "mode", "precision", "batch_size", "input_size", "seq_len",
    "time_ms", "memory_mb", "energy_j", "power_w", "censored", "num_gpus",
    "source", "source_row", "raw_model",
)

#: Columns appended after :data:`COLUMNS` (present in every frame; NaN/None when not known).
EXTRA_COLUMNS: tuple[str, ...] = (
    "arch", "renamed", "software", "compiled", "optimizer", "global_batch_size",
    "time_ms_mean", "time_ms_p10", "time_ms_p90",
    "memory_kind", "censor_reason", "censor_at_mb", "suspect", "faketensor_estimate_mb",
    "ref_params_m", "ref_gmacs", "ref_macts_m", "assumed", "upstream_source",
)

_INT = ("batch_size", "num_gpus", "global_batch_size", "source_row")
_NULLABLE_INT = ("seq_len",)
_FLOAT = ("time_ms", "memory_mb", "energy_j", "power_w", "time_ms_mean", "time_ms_p10",
          "time_ms_p90", "censor_at_mb", "faketensor_estimate_mb", "ref_params_m", "ref_gmacs",
          "ref_macts_m")
_BOOL = ("censored", "renamed", "compiled", "suspect")


# --------------------------------------------------------------------------- data directory
_HOW_TO_SET = f"set {ENV_VAR} to the folder of the shared measurements (the documentation's Files and environment page)"


def default_data_dir() -> Path:
    """Where the public measurements are read from: :func:`perfcast.paths.public_data_dir`
    (``$PERFCAST_DATA``, else ``<data home>/public``)."""
    return public_data_dir()


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The data directory to read; :class:`PerfcastError` (one line) when it does not exist."""
    if data_dir is not None:
        path, how = Path(data_dir).expanduser(), "data_dir argument"
    else:
        path = default_data_dir()
        how = f"${ENV_VAR}" if os.environ.get(ENV_VAR) else f"default; ${ENV_VAR} unset"
    if not path.is_dir():
        raise PerfcastError(f"public measurement data not found at {path} ({how}): "
                            f"{_HOW_TO_SET} or pass data_dir=")
    return path


def data_file(data_dir: Path, relative: str) -> Path:
    path = data_dir / relative
    if not path.is_file():
        raise PerfcastError(f"public measurement file not found: {path}; "
                            f"{_HOW_TO_SET} or pass data_dir=")
    return path


def read_csv(path: Path) -> pd.DataFrame:
    """Read a source CSV (pandas parses floats exactly: values equal ``float(text)``)."""
    try:
        return pd.read_csv(path, skipinitialspace=True)
    except (OSError, ValueError) as exc:
        raise PerfcastError(f"cannot read {path}: {exc}") from None


def require_columns(df: pd.DataFrame, path: Path, columns: Iterable[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise PerfcastError(f"{path.name}: missing column(s) {', '.join(missing)} "
                            f"(has {', '.join(map(str, df.columns))})")


# --------------------------------------------------------------------------- report
@dataclass
class LoadReport:
    """What happened to the rows of one source file (or, with ``parts``, of several).

    ``rows_out + sum(dropped.values()) == rows_in`` always holds. ``flags`` counts kept rows with
    a property worth knowing (multi-GPU, censored, renamed, ...); they are not drops.
    """

    source: str
    rows_in: int = 0
    rows_out: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    flags: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> a few raw names, "..."
    devices: list[str] = field(default_factory=list)
    n_models: int = 0
    n_families: int = 0
    path: str | None = None
    parts: list[LoadReport] = field(default_factory=list)

    @property
    def n_dropped(self) -> int:
        return int(sum(self.dropped.values()))

    def check(self) -> None:
        if self.rows_out + self.n_dropped != self.rows_in:
            raise AssertionError(f"{self.source}: rows_out {self.rows_out} + dropped "
                                 f"{self.n_dropped} != rows_in {self.rows_in}")
        for part in self.parts:
            part.check()

    def files(self) -> list[LoadReport]:
        """The per-file reports (leaves)."""
        if not self.parts:
            return [self]
        return [leaf for part in self.parts for leaf in part.files()]

    @classmethod
    def combine(cls, source: str, parts: list[LoadReport], frame: pd.DataFrame | None = None) -> LoadReport:
        rep = cls(source=source, parts=list(parts))
        for p in parts:
            rep.rows_in += p.rows_in
            rep.rows_out += p.rows_out
            for k, v in p.dropped.items():
                rep.dropped[k] = rep.dropped.get(k, 0) + v
            for k, v in p.flags.items():
                rep.flags[k] = rep.flags.get(k, 0) + v
        if frame is not None:
            rep.describe(frame)
        else:
            rep.devices = sorted({d for p in parts for d in p.devices})
        return rep

    def describe(self, frame: pd.DataFrame) -> None:
        """Fill devices / model / family counts from the kept rows."""
        self.devices = sorted(frame["device"].dropna().unique().tolist()) if len(frame) else []
        self.n_models = int(frame["model"].nunique()) if len(frame) else 0
        self.n_families = int(frame["family"].nunique()) if len(frame) else 0

    def example_text(self, reason: str) -> str:
        names = self.examples.get(reason)
        if not names:
            return ""
        return f" (e.g. {', '.join(names)})"

    def summary(self) -> str:
        drops = "; ".join(f"{k}: {v}" for k, v in self.dropped.items()) or "none"
        return f"{self.source}: {self.rows_in} rows in, {self.rows_out} examples out, dropped {drops}"

    def to_markdown(self) -> str:
        """A per-file table, then drop reasons and flags (per file)."""
        leaves = self.files()
        lines = ["| file | devices | rows in | examples out | dropped | models | families |",
                 "|---|---|---:|---:|---:|---:|---:|"]
        for r in leaves:
            lines.append(f"| {r.source} | {', '.join(r.devices) or '-'} | {r.rows_in} | {r.rows_out} "
                         f"| {r.n_dropped} | {r.n_models} | {r.n_families} |")
        if len(leaves) > 1:
            lines.append(f"| **total** | {len(self.devices)} devices | {self.rows_in} | {self.rows_out} "
                         f"| {self.n_dropped} | {self.n_models or '-'} | {self.n_families or '-'} |")
        lines.append("")
        for r in leaves:
            if not r.dropped and not r.flags:
                continue
            lines.append(f"**{r.source}**")
            lines.append("")
            for k, v in r.dropped.items():
                lines.append(f"- dropped {v}: {k}{r.example_text(k)}")
            for k, v in r.flags.items():
                lines.append(f"- kept, flagged {v}: {k}")
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- row bookkeeping
class Drops:
    """First-reason-wins drop tracking over the rows of one source frame."""

    def __init__(self, index: pd.Index):
        self.reason = pd.Series([None] * len(index), index=index, dtype=object)
        self._order: list[str] = []

    def mark(self, mask, reason: str) -> None:
        mask = pd.Series(mask, index=self.reason.index).fillna(False).astype(bool)
        todo = mask & self.reason.isna()
        if todo.any():
            self.reason[todo] = reason
            self._note(reason)

    def _note(self, reason: str) -> None:
        if reason not in self._order:
            self._order.append(reason)

    def mark_each(self, reasons: pd.Series) -> None:
        """Drop rows with a non-null per-row reason."""
        todo = reasons.notna() & self.reason.isna()
        self.reason[todo] = reasons[todo]
        for r in reasons[todo]:
            self._note(r)

    @property
    def kept(self) -> pd.Series:
        return self.reason.isna()

    def counts(self) -> dict[str, int]:
        """Drop counts per reason, in the order the checks ran."""
        counts = self.reason.dropna().value_counts()
        return {r: int(counts[r]) for r in self._order if r in counts.index}

    def examples(self, labels: pd.Series, k: int = 5) -> dict[str, list[str]]:
        """Up to ``k`` distinct labels (e.g. raw model names) of the rows dropped per reason."""
        out: dict[str, list[str]] = {}
        for reason in self._order:
            seen = labels[self.reason == reason].dropna().astype(str).unique().tolist()
            if seen:
                out[reason] = seen[:k] + (["..."] if len(seen) > k else [])
        return out


def drop_duplicates(rec: pd.DataFrame, drops: Drops, keys: list[str], what: str) -> pd.DataFrame:
    """Drop later rows repeating ``keys``; an alias (other ``raw_model``) gets its own reason."""
    # current names first, so an old alias is the row that goes
    order = rec.sort_values("renamed", kind="stable") if "renamed" in rec.columns else rec
    dup = order.duplicated(keys, keep="first").reindex(rec.index)
    if not dup.any():
        return rec
    first_raw = order.groupby(keys, sort=False, dropna=False)["raw_model"].transform("first")
    alias = dup & (rec["raw_model"] != first_raw.reindex(rec.index))
    drops.mark(alias.reindex(drops.reason.index, fill_value=False),
               f"duplicate configuration: older alias of a model already in the file ({what})")
    drops.mark(dup.reindex(drops.reason.index, fill_value=False),
               f"duplicate row ({what} as an earlier row)")
    return rec[~dup]


def positive_number(series: pd.Series) -> pd.Series:
    """Numeric view of ``series``; NaN where missing, unparsable, non-finite or <= 0."""
    num = pd.to_numeric(series, errors="coerce").astype(float)
    return num.where(np.isfinite(num) & (num > 0))


def positive_int(series: pd.Series) -> pd.Series:
    """Like :func:`positive_number`, and NaN where not a whole number."""
    num = positive_number(series)
    return num.where(num == np.floor(num))


def finalize(records: pd.DataFrame) -> pd.DataFrame:
    """Order and type the schema columns; add missing extras with their empty value."""
    df = records.copy()
    n = len(df)
    for col in (*COLUMNS, *EXTRA_COLUMNS):
        if col not in df.columns:
            if col in _BOOL:
                df[col] = False
            elif col in ("num_gpus",):
                df[col] = 1
            elif col == "global_batch_size":
                df[col] = df["batch_size"] * df["num_gpus"] if n else 0
            elif col in _FLOAT or col in _NULLABLE_INT:
                df[col] = np.nan
            else:
                df[col] = None
    for col in _INT:
        df[col] = df[col].astype("int64")
    for col in _NULLABLE_INT:
        df[col] = df[col].astype("Int64")
    for col in _FLOAT:
        df[col] = df[col].astype("float64")
    for col in _BOOL:
        df[col] = df[col].fillna(False).astype(bool)
    others = [c for c in df.columns if c not in COLUMNS and c not in EXTRA_COLUMNS]
    df = df[[*COLUMNS, *EXTRA_COLUMNS, *others]]
    return df.reset_index(drop=True)


def empty_frame() -> pd.DataFrame:
    base = {c: pd.Series([], dtype=object) for c in (*COLUMNS, *EXTRA_COLUMNS)}
    for c in (*_INT, *_FLOAT, *_NULLABLE_INT):
        base[c] = pd.Series([], dtype="float64")
    return finalize(pd.DataFrame(base))


def with_report(df: pd.DataFrame, report: LoadReport) -> pd.DataFrame:
    report.check()
    df.attrs["report"] = report
    return df
