"""The measurement store: one row per measured configuration.

SQLite by default (WAL journal, real transactions: the schema is created in one and each row is
written in its own, so a crash, Ctrl-C or SIGKILL never leaves a half row or a table without its
unique key); any SQLAlchemy URL works (``postgresql://user:password@host/db`` for a team-shared
database, through psycopg 3; its password is masked in every message: :func:`display_url`).
:meth:`MeasurementStore.collector_lock` is the one-collector-per-store-and-machine lock
(:mod:`perfcast.store.lock`).
A configuration is identified by :func:`config_key` — model, batch, input size, sequence length,
mode, precision, optimizer, device, threads and a ``repeat`` index (0 = first measurement,
1 = a re-measurement for test-retest). Failed runs (OOM, timeout, error) are rows too, with a
``status`` and a ``reason``: the OOM boundary is data.

Units: times in ms per batch, memory in MiB (``*_mb`` = 2**20 bytes), energy in J, power in W.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.workload import DEFAULT_OPTIMIZER, Workload

STATUSES = ("ok", "oom", "timeout", "failed")


@dataclass(frozen=True)
class MeasureConfig:
    """One configuration to measure — a :class:`~perfcast.workload.Workload` on the local device
    ``device`` (its perfcast registry key) with ``threads`` CPU threads (``None``: torch's
    default) — and a ``repeat`` index. What the store's key is made of (:func:`config_key`);
    stored flat (:meth:`to_dict`)."""

    workload: Workload
    device: str = "cpu"
    threads: int | None = None
    repeat: int = 0

    @classmethod
    def of(cls, model: str, *, batch_size: int = 1, input_size=None, seq_len: int | None = None,
           mode: str = "infer", precision: str = "fp32", optimizer: str = DEFAULT_OPTIMIZER,
           device: str = "cpu", threads: int | None = None, repeat: int = 0) -> MeasureConfig:
        return cls(Workload.of(model, batch_size=batch_size, input_size=input_size,
                               seq_len=seq_len, mode=mode, precision=precision,
                               optimizer=optimizer), device, threads, repeat)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MeasureConfig:
        """From the flat form (:meth:`to_dict`, a store row, a worker request)."""
        known = ("model", "batch_size", "input_size", "seq_len", "mode", "precision",
                 "optimizer", "device", "threads", "repeat")
        kw = {k: d[k] for k in known if k in d and d[k] is not None}
        return cls.of(kw.pop("model"), **kw)

    # flat views (the store's columns)
    model = property(lambda self: self.workload.spec)
    batch_size = property(lambda self: int(self.workload.batch_size or 1))
    input_size = property(lambda self: self.workload.input_size_text)
    seq_len = property(lambda self: self.workload.seq_len)
    mode = property(lambda self: self.workload.mode)
    precision = property(lambda self: self.workload.precision)
    optimizer = property(lambda self: self.workload.run_optimizer)

    def key(self) -> str:
        return config_key(self)

    def to_dict(self) -> dict[str, Any]:
        """Flat dict: ``model, batch_size, input_size ("3,224,224" or None), seq_len, mode,
        precision, optimizer (None for inference), device, threads, repeat``."""
        return {"model": self.model, "batch_size": self.batch_size,
                "input_size": self.input_size, "seq_len": self.seq_len, "mode": self.mode,
                "precision": self.precision, "optimizer": self.optimizer,
                "device": self.device, "threads": self.threads, "repeat": self.repeat}


def config_key(cfg: MeasureConfig) -> str:
    return hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode()).hexdigest()[:32]


@dataclass
class Measurement:
    """What one run produced. ``None`` means not measured / not available — never invented."""

    config: MeasureConfig
    status: str = "ok"
    reason: str | None = None
    time_ms_median: float | None = None
    time_ms_mean: float | None = None
    time_ms_p10: float | None = None
    time_ms_p90: float | None = None
    time_ms_std: float | None = None
    n: int | None = None
    warmup: int | None = None
    threads_used: int | None = None
    peak_tensor_mb: float | None = None  # peak live tensor bytes (CPU tracker) / max allocated (CUDA)
    rss_increase_mb: float | None = None  # peak RSS minus RSS before the model was built
    cuda_max_allocated_mb: float | None = None
    cuda_max_reserved_mb: float | None = None
    nvml_used_mb: float | None = None
    energy_j: float | None = None  # per batch (per timed iteration)
    power_w: float | None = None
    energy_source: str | None = None  # rapl | nvml | None
    graph_key: str | None = None
    env: dict[str, Any] = field(default_factory=dict)
    duration_s: float | None = None
    created_at: str | None = None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def _table(metadata):
    from sqlalchemy import Column, Float, Integer, String, Table, Text

    return Table(
        "measurements", metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("config_key", String(64), nullable=False, unique=True, index=True),
        Column("model", String(255), nullable=False, index=True),
        Column("batch_size", Integer, nullable=False),
        Column("input_size", String(64)),
        Column("seq_len", Integer),
        Column("mode", String(16), nullable=False),
        Column("precision", String(16), nullable=False),
        Column("optimizer", String(32)),
        Column("device", String(64), nullable=False, index=True),
        Column("threads", Integer),
        Column("repeat", Integer, nullable=False, default=0),
        Column("status", String(16), nullable=False),
        Column("reason", Text),
        Column("time_ms_median", Float), Column("time_ms_mean", Float),
        Column("time_ms_p10", Float), Column("time_ms_p90", Float), Column("time_ms_std", Float),
        Column("n", Integer), Column("warmup", Integer), Column("threads_used", Integer),
        Column("peak_tensor_mb", Float), Column("rss_increase_mb", Float),
        Column("cuda_max_allocated_mb", Float), Column("cuda_max_reserved_mb", Float),
        Column("nvml_used_mb", Float), Column("energy_j", Float), Column("power_w", Float),
        Column("energy_source", String(16)),
        Column("graph_key", String(64), index=True),
        Column("env_json", Text),
        Column("duration_s", Float),
        Column("created_at", String(40)),
        Column("perfcast_version", String(32)),
    )


def _url(target: str | os.PathLike) -> str:
    """A path → a ``sqlite:///`` URL; a PostgreSQL URL without a driver → psycopg 3's."""
    t = str(target)
    if "://" in t:
        scheme, rest = t.split("://", 1)
        if scheme in ("postgresql", "postgres"):
            return f"postgresql+psycopg://{rest}"
        return t
    return f"sqlite:///{Path(t).expanduser().resolve()}"


def display_url(target: str | os.PathLike) -> str:
    """``target`` as shown in messages and summaries: a URL with its password masked
    (``postgresql://u:***@host/db``), a path as given."""
    t = str(target)
    if "://" not in t:
        return t
    try:
        from sqlalchemy.engine import make_url

        return make_url(t).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - unparsable: mask what looks like user:password@
        return re.sub(r"(://[^/@:]*:)[^@/]*@", r"\1***@", t)


def scrub(text: str, target) -> str:
    """``text`` (e.g. a driver's error message) with the password of ``target`` (a URL string
    or a sqlalchemy ``URL``) replaced by ``***`` and the URL itself masked."""
    from urllib.parse import quote

    if not isinstance(target, str):  # a sqlalchemy URL
        password = getattr(target, "password", None)
    else:
        if "://" not in target:
            return text
        text = text.replace(target, display_url(target))
        try:
            from sqlalchemy.engine import make_url

            password = make_url(target).password
        except Exception:  # noqa: BLE001
            m = re.search(r"://[^/@:]*:([^@/]*)@", target)
            password = m.group(1) if m else None
    if password:
        for form in {str(password), quote(str(password), safe="")}:
            text = text.replace(form, "***")
    return text


class MeasurementStore:
    """Measurements in a database (SQLite file path or SQLAlchemy URL). ``target``: the store
    as shown in messages (a URL's password masked); ``path``: the SQLite file (``None`` for
    other databases and in-memory SQLite)."""

    def __init__(self, target: str | os.PathLike):
        from sqlalchemy import MetaData, create_engine, event

        url = _url(target)
        self.target = display_url(target)
        self.path: Path | None = None
        if url.startswith("sqlite:///"):
            self.path = Path(url.removeprefix("sqlite:///"))
            if not self.path.parent.exists():
                raise PerfcastError(f"directory for the measurement database does not exist: "
                                    f"{self.path.parent}")
        try:
            self.engine = create_engine(url, future=True)
        except Exception as exc:  # noqa: BLE001 - bad URL / missing driver
            raise PerfcastError(f"cannot open measurement store {self.target}: "
                                f"{scrub(_first_line(exc), str(target))}") from None
        if self.engine.dialect.name == "sqlite":
            @event.listens_for(self.engine, "connect")
            def _pragmas(conn, _record):
                conn.isolation_level = None  # the driver's own transaction handling off …
                cur = conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()

            @event.listens_for(self.engine, "begin")
            def _begin(conn):
                conn.exec_driver_sql("BEGIN")  # … so that DDL is transactional too
        self.metadata = MetaData()
        self.table = _table(self.metadata)
        try:
            with self.engine.begin() as conn:  # table and indexes: all or nothing
                self.metadata.create_all(conn)
                for index in self.table.indexes:  # a store from before that lost one
                    index.create(conn, checkfirst=True)
        except Exception as exc:  # noqa: BLE001
            raise PerfcastError(f"cannot use measurement store {self.target}: "
                                f"{scrub(_first_line(exc), str(target))}") from None

    def collector_lock(self):
        """The lock of one collector per store and machine (:mod:`perfcast.store.lock`), not
        taken yet: ``store.collector_lock().acquire(wait=…)``, released by ``release()`` or as
        a context manager."""
        from perfcast.store import lock

        dialect = self.engine.dialect.name
        if dialect == "sqlite":
            if self.path is None:
                return lock.NoLock(self.target)
            return lock.FileLock(self.path.with_name(self.path.name + ".lock"), self.target)
        if dialect == "postgresql":
            return lock.PgAdvisoryLock(self.engine.url, self.target)
        return lock.NoLock(self.target, f"no collector lock for {dialect} stores: make sure "
                                        f"only one collector per machine writes to "
                                        f"{self.target}")

    # ---------------------------------------------------------------- writes
    def add(self, m: Measurement, replace: bool = False) -> bool:
        """Insert one finished measurement in its own transaction. False if already present —
        unless ``replace``: then an existing row of the same configuration is deleted in that
        same transaction (a re-measurement replaces the old row atomically)."""
        from sqlalchemy.exc import IntegrityError

        from perfcast._version import __version__

        if m.status not in STATUSES:
            raise PerfcastError(f"unknown status {m.status!r}")
        c = m.config
        row = {**c.to_dict(),
               "config_key": c.key(), "status": m.status, "reason": m.reason,
               "env_json": json.dumps(m.env, sort_keys=True),
               "created_at": m.created_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "perfcast_version": __version__}
        for k in ("time_ms_median", "time_ms_mean", "time_ms_p10", "time_ms_p90", "time_ms_std",
                  "n", "warmup", "threads_used", "peak_tensor_mb", "rss_increase_mb",
                  "cuda_max_allocated_mb", "cuda_max_reserved_mb", "nvml_used_mb", "energy_j",
                  "power_w", "energy_source", "graph_key", "duration_s"):
            row[k] = getattr(m, k)
        try:
            with self.engine.begin() as conn:
                if replace:
                    conn.execute(self.table.delete()
                                 .where(self.table.c.config_key == row["config_key"]))
                conn.execute(self.table.insert().values(**row))
        except IntegrityError:
            return False
        return True

    # ---------------------------------------------------------------- reads
    def done_keys(self, statuses: Iterable[str] = STATUSES) -> set[str]:
        from sqlalchemy import select

        st = list(statuses)
        with self.engine.connect() as conn:
            rows = conn.execute(select(self.table.c.config_key)
                                .where(self.table.c.status.in_(st))).all()
        return {r[0] for r in rows}

    def delete(self, keys: Iterable[str]) -> int:
        keys = list(keys)
        if not keys:
            return 0
        with self.engine.begin() as conn:
            res = conn.execute(self.table.delete().where(self.table.c.config_key.in_(keys)))
        return int(res.rowcount or 0)

    def count(self) -> int:
        from sqlalchemy import func, select

        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(self.table)).scalar_one())

    def to_dataframe(self):
        """All rows as a pandas DataFrame (``env_json`` kept as text)."""
        import pandas as pd

        with self.engine.connect() as conn:
            return pd.read_sql_table("measurements", conn)

    def export(self, path: str | os.PathLike) -> Path:
        """Write all rows to ``.parquet`` or ``.csv`` (atomically: fsync'ed, then renamed)."""
        from perfcast.paths import write_file_atomically

        path = Path(path)
        if path.suffix not in (".parquet", ".csv"):
            raise PerfcastError(f"export to .parquet or .csv, not {path.suffix or path.name}")
        df = self.to_dataframe()
        if path.suffix == ".parquet":
            return write_file_atomically(path, lambda tmp: df.to_parquet(tmp, index=False))
        return write_file_atomically(path, lambda tmp: df.to_csv(tmp, index=False))

    def close(self) -> None:
        self.engine.dispose()
