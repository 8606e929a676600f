"""Reading a measurement store, read-only: the rows of one workload on one device (what
``perfcast query`` and ``perfcast predict --store`` look up).

A store is a SQLite file or any SQLAlchemy URL (PostgreSQL through psycopg 3), written by
``perfcast collect`` (:mod:`perfcast.store`, the research stack: schema, migrations, writers,
locks). :class:`StoreReader` opens one without creating, migrating or locking anything: a
SQLite file that does not exist is an error (never created), the journal mode is left as it
is, and the ``measurements`` table is read with the columns the store has (a store of an older
schema version lacks the newer columns; nothing is added). The look-up itself,
:func:`find_rows`, is shared with the writer's :meth:`perfcast.store.MeasurementStore.find`.

A URL's password is masked in every message (:func:`display_url`, :func:`scrub`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError

#: The table of measurements (one row per configuration and repeat).
TABLE = "measurements"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (at most 300 characters)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def store_url(target: str | os.PathLike) -> str:
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


def find_rows(conn, table, *, model: str, device: str, mode: str, precision: str,
              batch_size: int, input_size: str | None = None, seq_len: int | None = None,
              optimizer: str | None = None, threads: int | None = None) -> list[dict[str, Any]]:
    """Rows of one workload on one device in ``table`` (a SQLAlchemy ``Table`` of
    measurements) — every thread count and repeat unless ``threads`` is given — as dicts of
    the store's columns (``env_json`` kept as text), oldest first. Served by the store's index
    ``ix_measurements_lookup`` (model, device, mode, precision, batch size)."""
    from sqlalchemy import select

    t = table
    q = select(t).where(t.c.model == model, t.c.device == device, t.c.mode == mode,
                        t.c.precision == precision, t.c.batch_size == int(batch_size))
    for col, v in (("input_size", input_size), ("seq_len", seq_len), ("optimizer", optimizer)):
        q = q.where(t.c[col].is_(None) if v is None else t.c[col] == v)
    if threads is not None:
        q = q.where(t.c.threads == threads)
    return [dict(r._mapping) for r in conn.execute(q.order_by(t.c.id))]


class StoreReader:
    """A measurement store opened read-only (module doc). ``target``: the store as shown in
    messages (a URL's password masked); ``path``: the SQLite file (``None`` for other
    databases). Use it as a context manager or :meth:`close` it."""

    def __init__(self, target: str | os.PathLike):
        from sqlalchemy import MetaData, Table, create_engine, event, inspect

        url = store_url(target)
        self.target = display_url(target)
        self.path: Path | None = None
        if url.startswith("sqlite:///"):
            self.path = Path(url.removeprefix("sqlite:///"))
            if not self.path.is_file():
                raise PerfcastError(f"measurement store not found: {self.path}")
        try:
            self.engine = create_engine(url, future=True)
        except Exception as exc:  # noqa: BLE001 - bad URL / missing driver
            raise PerfcastError(f"cannot open measurement store {self.target}: "
                                f"{scrub(first_line(exc), str(target))}") from None
        if self.engine.dialect.name == "sqlite":
            @event.listens_for(self.engine, "connect")
            def _wait(conn, _record):  # a collector may be writing: wait for its lock
                cur = conn.cursor()
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()
        try:
            with self.engine.connect() as conn:
                if not inspect(conn).has_table(TABLE):
                    raise PerfcastError(f"{self.target} is not a measurement store (no "
                                        f"{TABLE} table; perfcast collect --db creates one)")
                self.table = Table(TABLE, MetaData(), autoload_with=conn)
        except PerfcastError:
            self.engine.dispose()
            raise
        except Exception as exc:  # noqa: BLE001 - unreachable server, wrong password, …
            self.engine.dispose()
            raise PerfcastError(f"cannot use measurement store {self.target}: "
                                f"{scrub(first_line(exc), str(target))}") from None

    def find(self, **workload) -> list[dict[str, Any]]:
        """:func:`find_rows` of this store (keywords: ``model``, ``device``, ``mode``,
        ``precision``, ``batch_size``, ``input_size``, ``seq_len``, ``optimizer``,
        ``threads``)."""
        with self.engine.connect() as conn:
            return find_rows(conn, self.table, **workload)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["TABLE", "StoreReader", "display_url", "find_rows", "first_line", "scrub",
           "store_url"]
