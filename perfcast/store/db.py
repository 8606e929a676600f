"""The measurement store: one row per measured configuration.

SQLite by default (WAL journal, real transactions: the schema is created in one and each row is
written in its own, so a crash, Ctrl-C or SIGKILL never leaves a half row or a table without its
unique key); any SQLAlchemy URL works, and **PostgreSQL** (``postgresql://user:password@host/db``,
through psycopg 3) is the tested choice for a team's shared store: several collectors on
different machines write into it at once (their rows are upserts on the configuration's unique
key: no duplicate, no lost row; each configuration is claimed by one collector while it is
measured, :meth:`perfcast.store.lock.PgAdvisoryLock.claim`). A URL's password is masked in every
message (:func:`display_url`, :func:`scrub`). :meth:`MeasurementStore.collector_lock` is the
one-collector-per-store-and-machine lock (:mod:`perfcast.store.lock`). Reading a store for a
prediction is runtime code (:mod:`perfcast.measured`: no schema, no writes); this module
writes it.

A configuration is identified by :func:`config_key` — model, batch, input size, sequence length,
mode, precision, optimizer, device, threads and a ``repeat`` index (0 = first measurement,
1 = a re-measurement for test-retest). Failed runs (OOM, timeout, error) are rows too, with a
``status`` and a ``reason``: the OOM boundary is data. ``host`` is the machine that measured.

**Schema versions** (table ``perfcast_schema``, one row per version applied, with its date and
the perfcast version that applied it): a writer brings an older store up to
:data:`SCHEMA_VERSION` when it opens it, in one transaction that concurrent openers wait for
(PostgreSQL: a transaction advisory lock; SQLite: ``BEGIN IMMEDIATE``); a reader
(``readonly=True``) changes nothing. A store newer than this perfcast is refused for writing.

1. the ``measurements`` table and its indexes (every store made before versions were kept);
2. column ``host``; index ``ix_measurements_lookup`` (model, device, mode, precision, batch
   size: the look-up of ``perfcast query`` / ``predict --store``); table ``measure_queue`` (the
   configurations ``perfcast query --measure-missing`` asks a collector to measure).

Units: times in ms per batch, memory in MiB (``*_mb`` = 2**20 bytes), energy in J, power in W.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.measured import display_url, find_rows, scrub  # noqa: F401  (re-exported)
from perfcast.measured import first_line as _first_line
from perfcast.measured import store_url as _url
from perfcast.workload import DEFAULT_OPTIMIZER, Workload

STATUSES = ("ok", "oom", "timeout", "failed")

#: The schema version this perfcast writes (see the module docstring for what each adds).
SCHEMA_VERSION = 2
SCHEMA_NOTES = {1: "measurements table", 2: "host column, look-up index, measure_queue table"}


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
    host: str | None = None  # the machine that measured (None: this one, when it is stored)


def _table(metadata, version: int = SCHEMA_VERSION):
    """The ``measurements`` table as schema ``version`` has it (1: the stores made before
    versions were kept — what the migration tests start from)."""
    from sqlalchemy import Column, Float, Index, Integer, String, Table, Text

    extra = []
    if version >= 2:
        extra = [Column("host", String(255)),
                 Index("ix_measurements_lookup", "model", "device", "mode", "precision",
                       "batch_size")]
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
        *extra,
    )


def _schema_table(metadata):
    """``perfcast_schema``: one row per schema version applied to the store."""
    from sqlalchemy import Column, Integer, String, Table

    return Table("perfcast_schema", metadata,
                 Column("version", Integer, primary_key=True, autoincrement=False),
                 Column("applied_at", String(40), nullable=False),
                 Column("perfcast_version", String(32)),
                 Column("note", String(200)))


def _queue_table(metadata):
    """``measure_queue``: configurations asked for (``perfcast query --measure-missing``) and
    not measured yet; ``perfcast collect --queued`` measures and removes them."""
    from sqlalchemy import Column, Integer, String, Table, Text

    return Table("measure_queue", metadata,
                 Column("id", Integer, primary_key=True, autoincrement=True),
                 Column("config_key", String(64), nullable=False, unique=True, index=True),
                 Column("model", String(255), nullable=False),
                 Column("device", String(64), nullable=False, index=True),
                 Column("config_json", Text, nullable=False),
                 Column("requested_at", String(40), nullable=False),
                 Column("requested_by", String(255)))


def _migrate_2(conn) -> None:
    """1 → 2: the ``host`` column (its index and the queue table are created after the
    migrations, with every other missing index and table)."""
    from sqlalchemy import inspect

    if "host" not in {c["name"] for c in inspect(conn).get_columns("measurements")}:
        conn.exec_driver_sql("ALTER TABLE measurements ADD COLUMN host VARCHAR(255)")


#: version → the step that brings a store from the version before to it
MIGRATIONS = {2: _migrate_2}

#: bigint key of the transaction advisory lock that serializes schema changes (PostgreSQL)
_SCHEMA_LOCK_KEY = int.from_bytes(hashlib.sha256(b"perfcast schema").digest()[:8], "big",
                                  signed=True)


#: SQLAlchemy ≥ 2.0.28 keeps an INSERT's rowcount only when asked (older versions ignore it)
_ROWCOUNT = {"preserve_rowcount": True}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class MeasurementStore:
    """Measurements in a database (SQLite file path or SQLAlchemy URL). ``target``: the store
    as shown in messages (a URL's password masked); ``path``: the SQLite file (``None`` for
    other databases and in-memory SQLite); ``schema_version``: the store's schema version
    (:data:`SCHEMA_VERSION` once a writer opened it).

    ``readonly=True`` (loaders, ``perfcast query``, ``train --data``): nothing is created or
    migrated — a target without a ``measurements`` table is an error, and a store of an older
    schema is read as it is."""

    def __init__(self, target: str | os.PathLike, *, readonly: bool = False):
        from sqlalchemy import MetaData, create_engine, event

        url = _url(target)
        self.target = display_url(target)
        self.readonly = readonly
        self.path: Path | None = None
        if url.startswith("sqlite:///"):
            self.path = Path(url.removeprefix("sqlite:///"))
            if readonly and not self.path.is_file():
                raise PerfcastError(f"measurement store not found: {self.path}")
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
                if not readonly:  # (a reader leaves the journal mode as it is)
                    cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()

            @event.listens_for(self.engine, "begin")
            def _begin(conn):  # … so that DDL is transactional too; schema changes take the
                # write lock at once (two openers migrating never deadlock on an upgrade)
                immediate = conn.get_execution_options().get("perfcast_schema")
                conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
        self.metadata = MetaData()
        self.table = _table(self.metadata)
        self.schema = _schema_table(self.metadata)
        self.queue = _queue_table(self.metadata)
        try:
            if readonly:
                self.schema_version = self._check_readable()
            else:
                self.schema_version = self._ensure_schema()
        except PerfcastError:
            self.engine.dispose()
            raise
        except Exception as exc:  # noqa: BLE001 - unreachable server, wrong password, …
            self.engine.dispose()
            raise PerfcastError(f"cannot use measurement store {self.target}: "
                                f"{scrub(_first_line(exc), str(target))}") from None

    # ---------------------------------------------------------------- schema
    @staticmethod
    def _version(conn) -> int:
        """The store's schema version: 0 = empty database, 1 = a measurements table without
        version records (every store made before they were kept)."""
        from sqlalchemy import func, inspect, select

        insp = inspect(conn)
        if insp.has_table("perfcast_schema"):
            from sqlalchemy import Column, Integer, MetaData, Table

            t = Table("perfcast_schema", MetaData(), Column("version", Integer))
            v = conn.execute(select(func.max(t.c.version))).scalar()
            if v is not None:
                return int(v)
        return 1 if insp.has_table("measurements") else 0

    def _missing(self, conn) -> list:
        """Tables and indexes of the current schema that the store lacks (a store whose
        creation was killed between two statements before the schema was transactional)."""
        from sqlalchemy import inspect

        insp = inspect(conn)
        missing = []
        for table in (self.table, self.schema, self.queue):
            if not insp.has_table(table.name):
                missing.append(table)
                continue
            have = {ix["name"] for ix in insp.get_indexes(table.name)}
            missing += [ix for ix in table.indexes if ix.name not in have]
        return missing

    def _newer(self, version: int) -> PerfcastError:
        return PerfcastError(f"measurement store {self.target} has schema version {version}, "
                             f"newer than this perfcast knows ({SCHEMA_VERSION}): upgrade "
                             f"perfcast to write to it")

    def _ensure_schema(self) -> int:
        """Create or migrate the schema to :data:`SCHEMA_VERSION` (see the module docstring):
        a look first, and only when something is missing one transaction that concurrent
        openers serialize on."""
        from sqlalchemy import insert, text

        from perfcast._version import __version__

        with self.engine.connect() as conn:
            version = self._version(conn)
            if version > SCHEMA_VERSION:
                raise self._newer(version)
            if version == SCHEMA_VERSION and not self._missing(conn):
                return version
        with self.engine.connect().execution_options(perfcast_schema=True) as conn, \
                conn.begin():
            if self.engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK_KEY})
            version = self._version(conn)  # again: another opener may have done it meanwhile
            if version > SCHEMA_VERSION:
                raise self._newer(version)
            stamps = []
            if version == 0:
                self.metadata.create_all(conn)
                stamps.append((SCHEMA_VERSION, "created at this version"))
            else:
                self.schema.create(conn, checkfirst=True)
                if not conn.execute(self.schema.select().limit(1)).first():
                    stamps.append((1, SCHEMA_NOTES[1] + " (existing store)"))
                for v in range(version + 1, SCHEMA_VERSION + 1):
                    MIGRATIONS[v](conn)
                    stamps.append((v, SCHEMA_NOTES[v]))
            for item in self._missing(conn):
                item.create(conn, checkfirst=True)
            if stamps:
                conn.execute(insert(self.schema), [
                    {"version": v, "applied_at": _now(), "perfcast_version": __version__,
                     "note": note} for v, note in stamps])
        return SCHEMA_VERSION

    def _check_readable(self) -> int:
        from sqlalchemy import MetaData

        with self.engine.connect() as conn:
            version = self._version(conn)
        if version == 0:
            raise PerfcastError(f"{self.target} is not a measurement store (no measurements "
                                f"table; perfcast collect --db creates one)")
        if version < SCHEMA_VERSION:  # read the columns it has
            self.metadata = MetaData()
            self.table = _table(self.metadata, version)
            self.schema = _schema_table(self.metadata)
            self.queue = _queue_table(self.metadata)
        return version

    def _writable(self) -> None:
        if self.readonly:
            raise PerfcastError(f"measurement store {self.target} was opened read-only")

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
    def _insert(self):
        """The dialect's INSERT with ``ON CONFLICT`` (PostgreSQL, SQLite), else ``None``."""
        name = self.engine.dialect.name
        if name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            return None
        return insert

    def add(self, m: Measurement, replace: bool = False) -> bool:
        """Insert one finished measurement in its own transaction; False if its configuration
        is already there — unless ``replace``: then the row is upserted (a re-measurement
        replaces the old row atomically). One statement, ``INSERT … ON CONFLICT (config_key)
        DO NOTHING / DO UPDATE``, on PostgreSQL and SQLite: collectors writing at once never
        duplicate a row nor fail on each other's."""
        from sqlalchemy.exc import IntegrityError

        from perfcast._version import __version__

        self._writable()
        if m.status not in STATUSES:
            raise PerfcastError(f"unknown status {m.status!r}")
        c = m.config
        row = {**c.to_dict(),
               "config_key": c.key(), "status": m.status, "reason": m.reason,
               "env_json": json.dumps(m.env, sort_keys=True),
               "created_at": m.created_at or _now(),
               "perfcast_version": __version__, "host": m.host or socket.gethostname()}
        for k in ("time_ms_median", "time_ms_mean", "time_ms_p10", "time_ms_p90", "time_ms_std",
                  "n", "warmup", "threads_used", "peak_tensor_mb", "rss_increase_mb",
                  "cuda_max_allocated_mb", "cuda_max_reserved_mb", "nvml_used_mb", "energy_j",
                  "power_w", "energy_source", "graph_key", "duration_s"):
            row[k] = getattr(m, k)
        insert = self._insert()
        if insert is None:  # another database: delete + insert, a duplicate refused by the key
            try:
                with self.engine.begin() as conn:
                    if replace:
                        conn.execute(self.table.delete()
                                     .where(self.table.c.config_key == row["config_key"]))
                    conn.execute(self.table.insert().values(**row))
            except IntegrityError:
                return False
            return True
        stmt = insert(self.table).values(**row)
        if replace:
            stmt = stmt.on_conflict_do_update(
                index_elements=["config_key"],
                set_={k: stmt.excluded[k] for k in row if k != "config_key"})
        else:
            stmt = stmt.on_conflict_do_nothing(index_elements=["config_key"])
        with self.engine.begin() as conn:  # (rowcount: 1 inserted or updated, 0 present)
            return conn.execute(stmt, execution_options=_ROWCOUNT).rowcount == 1

    # ---------------------------------------------------------------- queue
    def enqueue(self, configs: Iterable[MeasureConfig], requested_by: str | None = None) -> int:
        """Ask for ``configs`` to be measured (``perfcast collect --queued``): each not yet in
        the store nor in the queue is added to the queue (one transaction). Returns how many
        were added."""
        self._writable()
        insert = self._insert()
        done = self.done_keys()
        rows = [{"config_key": c.key(), "model": c.model, "device": c.device,
                 "config_json": json.dumps(c.to_dict(), sort_keys=True),
                 "requested_at": _now(), "requested_by": requested_by or socket.gethostname()}
                for c in dict.fromkeys(configs) if c.key() not in done]
        if not rows:
            return 0
        added = 0
        with self.engine.begin() as conn:
            for row in rows:
                if insert is not None:
                    stmt = insert(self.queue).values(**row).on_conflict_do_nothing(
                        index_elements=["config_key"])
                    added += conn.execute(stmt, execution_options=_ROWCOUNT).rowcount
                elif conn.execute(self.queue.select().where(
                        self.queue.c.config_key == row["config_key"])).first() is None:
                    conn.execute(self.queue.insert().values(**row))
                    added += 1
        return added

    def ask(self, workload: Workload, device: str, threads: int | None = None) -> bool:
        """Queue one configuration (repeat 0) of ``workload`` on ``device``: ``True`` when it
        was added, ``False`` when already queued or measured — the ``enqueue`` of
        :func:`perfcast.query.query` (``perfcast query --measure-missing``)."""
        return self.enqueue([MeasureConfig(workload, device, threads, 0)]) > 0

    def queued(self, device: str | None = None) -> list[MeasureConfig]:
        """The queued configurations (of ``device`` only, when given), oldest first."""
        from sqlalchemy import select

        q = select(self.queue.c.config_json).order_by(self.queue.c.id)
        if device is not None:
            q = q.where(self.queue.c.device == device)
        if self.schema_version < 2:
            return []
        with self.engine.connect() as conn:
            return [MeasureConfig.from_dict(json.loads(r[0])) for r in conn.execute(q)]

    def dequeue(self, keys: Iterable[str]) -> int:
        """Remove configurations from the queue (measured, whatever their status)."""
        self._writable()
        keys = list(keys)
        if not keys:
            return 0
        with self.engine.begin() as conn:
            res = conn.execute(self.queue.delete().where(self.queue.c.config_key.in_(keys)))
        return int(res.rowcount or 0)

    # ---------------------------------------------------------------- reads
    def done_keys(self, statuses: Iterable[str] = STATUSES) -> set[str]:
        from sqlalchemy import select

        st = list(statuses)
        with self.engine.connect() as conn:
            rows = conn.execute(select(self.table.c.config_key)
                                .where(self.table.c.status.in_(st))).all()
        return {r[0] for r in rows}

    def has(self, key: str, statuses: Iterable[str] = STATUSES) -> bool:
        """Whether configuration ``key`` has a row with one of ``statuses``."""
        from sqlalchemy import select

        with self.engine.connect() as conn:
            return conn.execute(select(self.table.c.id).where(
                (self.table.c.config_key == key)
                & self.table.c.status.in_(list(statuses))).limit(1)).first() is not None

    def find(self, *, model: str, device: str, mode: str, precision: str, batch_size: int,
             input_size: str | None = None, seq_len: int | None = None,
             optimizer: str | None = None, threads: int | None = None) -> list[dict[str, Any]]:
        """Rows of one workload on one device — every thread count and repeat unless
        ``threads`` is given — as dicts of the store's columns (``env_json`` kept as text),
        oldest first (:func:`perfcast.measured.find_rows`, the look-up readers share)."""
        with self.engine.connect() as conn:
            return find_rows(conn, self.table, model=model, device=device, mode=mode,
                             precision=precision, batch_size=batch_size, input_size=input_size,
                             seq_len=seq_len, optimizer=optimizer, threads=threads)

    def delete(self, keys: Iterable[str]) -> int:
        self._writable()
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
