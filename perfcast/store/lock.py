"""One collector per measurement store and machine: the lock ``perfcast collect`` holds for a
whole collection (:meth:`MeasurementStore.collector_lock <perfcast.store.db.MeasurementStore.
collector_lock>`).

* **SQLite** ``m.db`` → the lock file ``m.db.lock`` beside it: an exclusive ``flock`` on it,
  which the kernel drops whenever the holder ends (exit, error, Ctrl-C, SIGTERM, SIGKILL), and
  inside it who holds it, as JSON ``{"pid", "host", "started"}`` (``started``: UTC, ISO 8601).
  A release removes the file. A file left behind by a killed collector names a process that is
  gone: the next collector takes it over with a one-line note. On a file system without
  ``flock`` the record alone decides (best effort: its holder alive on this host, or on another
  host, means busy; a dead holder on this host is stale).
* **PostgreSQL** → a session advisory lock (``pg_try_advisory_lock``) keyed by this machine's
  host name, on a connection of its own (autocommit, application name ``perfcast collect
  pid=… host=…``) kept open for the whole collection; the server drops it when that connection
  ends, so a killed collector never leaves it behind. Collectors on different machines share
  one PostgreSQL store: each configuration is **claimed** while it is measured
  (:meth:`CollectorLock.claim`: a session advisory lock keyed by the configuration, on the same
  connection), so two collectors of the same device split a sweep instead of measuring every
  configuration twice, and a killed collector's claims vanish with its connection. Tested
  against a real server (tests/postgres_server.py).
* In-memory SQLite: nothing to lock. Other databases: no lock, and a note says so.

A busy store raises :class:`~perfcast.errors.PerfcastError` (exit code 2) naming the holder;
with ``wait=True`` the lock is polled every ``$PERFCAST_LOCK_POLL`` seconds (default 5) until it
is free, after one note saying whom it waits for.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from perfcast.errors import PerfcastError

if TYPE_CHECKING:
    from typing_extensions import Self

#: Environment variable: seconds between two looks at a busy lock while waiting (default 5).
POLL_ENV = "PERFCAST_LOCK_POLL"
DEFAULT_POLL_S = 5.0

_log = logging.getLogger("perfcast")


def poll_interval() -> float:
    """Seconds between two looks at a busy lock: ``$PERFCAST_LOCK_POLL``, else 5."""
    raw = os.environ.get(POLL_ENV)
    if not raw:
        return DEFAULT_POLL_S
    try:
        s = float(raw)
    except ValueError:
        s = -1.0
    if not s > 0:
        raise PerfcastError(f"{POLL_ENV} must be a positive number of seconds, got {raw!r}")
    return s


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: process id, host name and since when (UTC, ISO 8601); ``None`` when
    unknown (e.g. a lock file whose record is still being written)."""

    pid: int | None = None
    host: str | None = None
    started: str | None = None

    @classmethod
    def me(cls) -> Holder:
        return cls(os.getpid(), socket.gethostname(), _now_iso())

    def describe(self) -> str:
        """``"pid 4242 on host box1, since 2026-05-01 12:00:03 UTC"``."""
        who = f"pid {self.pid}" if self.pid is not None else "an unknown process"
        if self.host:
            who += f" on host {self.host}"
        if self.started:
            who += f", since {self.started.replace('T', ' ').replace('+00:00', ' UTC')}"
        return who

    def alive_here(self) -> bool:
        """True when the holder is a running process of this host — the same process that wrote
        the record (its start time is not after ``started``; a reused pid is not it)."""
        import psutil

        if self.host != socket.gethostname() or self.pid is None:
            return False
        try:
            p = psutil.Process(self.pid)
            if p.status() == psutil.STATUS_ZOMBIE:
                return False
            created = p.create_time()
        except psutil.Error:
            return False
        try:
            started = datetime.fromisoformat(self.started).timestamp() if self.started else None
        except ValueError:
            started = None
        return started is None or created <= started + 2.0


#: What a refused collector is told to do (the CLI's ``collect`` has ``--wait``).
RETRY_HINT = "rerun with --wait to wait until it finishes"


def _busy(store: str, holder: Holder, hint: str = "",
          retry: str = RETRY_HINT) -> PerfcastError:
    return PerfcastError(f"measurement store {store} is in use by another collector: "
                         f"{holder.describe()}{hint} ({retry})")


class CollectorLock:
    """Base: :meth:`acquire` (refuse or wait), :meth:`release`; a context manager."""

    store = ""  # the store as shown in messages (password masked)

    def _try(self) -> Holder | None:
        """Take the lock if free (``None``) or return who holds it."""
        raise NotImplementedError

    def _busy_hint(self, holder: Holder) -> str:
        return ""

    def release(self) -> None:
        raise NotImplementedError

    def claim(self, key: str) -> bool:
        """Claim configuration ``key`` for measuring while the lock is held: ``False`` when
        another collector (on another machine) is measuring it now. Only a store shared by
        several machines (PostgreSQL) has claims; elsewhere this is always ``True``."""
        return True

    def unclaim(self, key: str) -> None:
        """Give a claim back (measured, failed or interrupted)."""

    def acquire(self, wait: bool = False, poll_s: float | None = None,
                retry: str = RETRY_HINT) -> Self:
        """Take the lock. Busy: raise :class:`PerfcastError` naming the holder (and ``retry``,
        what to do about it), or with ``wait`` poll every ``poll_s`` seconds (default
        :func:`poll_interval`) until it is free."""
        poll = poll_s if poll_s is not None else poll_interval()
        waiting_for = None
        try:
            while True:
                holder = self._try()
                if holder is None:
                    return self
                if not wait:
                    raise _busy(self.store, holder, self._busy_hint(holder), retry)
                if holder != waiting_for:
                    _log.warning("measurement store %s is in use by another collector (%s): "
                                 "waiting for it to finish, checking every %g s",
                                 self.store, holder.describe(), poll)
                    waiting_for = holder
                time.sleep(poll)
        except BaseException:  # refused, Ctrl-C while waiting, …: hold nothing
            self.release()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class NoLock(CollectorLock):
    """Nothing to lock (in-memory SQLite) or no lock for this database (a note says so)."""

    def __init__(self, store: str, note: str | None = None):
        self.store, self.note = store, note

    def _try(self) -> Holder | None:
        if self.note:
            _log.warning(self.note)
            self.note = None
        return None

    def release(self) -> None:
        pass


class FileLock(CollectorLock):
    """The lock file ``<db>.lock`` of a SQLite store (see the module docstring)."""

    def __init__(self, path: str | os.PathLike, store: str):
        self.path = Path(path)
        self.store = store
        self._fd: int | None = None

    @staticmethod
    def _read(fd: int) -> Holder | None:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            raw = os.read(fd, 4096)
            d = json.loads(raw.decode()) if raw.strip() else None
        except (OSError, ValueError):
            return None
        if not isinstance(d, dict):
            return None
        pid = d.get("pid")
        return Holder(int(pid) if isinstance(pid, int) else None,
                      str(d["host"]) if d.get("host") else None,
                      str(d["started"]) if d.get("started") else None)

    def _try(self) -> Holder | None:
        if self._fd is not None:
            return None
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by children
            except OSError as exc:
                raise PerfcastError(f"cannot create the collector lock {self.path}: "
                                    f"{exc.strerror}") from None
            try:
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                flocked = True
            except BlockingIOError:  # held
                holder = self._read(fd)
                os.close(fd)
                return holder or Holder()
            except (ImportError, OSError) as exc:  # no flock here (ENOLCK, EOPNOTSUPP, …)
                if isinstance(exc, OSError) and exc.errno not in (
                        errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    os.close(fd)
                    raise PerfcastError(f"cannot lock {self.path}: {exc.strerror}") from exc
                flocked = False
            if flocked:
                # the file we locked may have been removed by a holder releasing it meanwhile
                try:
                    same = os.path.samestat(os.fstat(fd), os.stat(self.path))
                except FileNotFoundError:
                    same = False
                if not same:
                    os.close(fd)
                    continue
            prev = self._read(fd)
            if prev is not None and prev.pid is not None:
                other_host = prev.host is not None and prev.host != socket.gethostname()
                if prev.alive_here() or (other_host and not flocked):
                    os.close(fd)
                    return prev
                _log.warning("took over the stale collector lock of %s: its holder (%s) %s",
                             self.store, prev.describe(),
                             "no longer holds it" if other_host else "is gone")
            me = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "started": _now_iso()}).encode()
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, me)
            os.fsync(fd)
            self._fd = fd
            return None

    def _busy_hint(self, holder: Holder) -> str:
        if holder.host and holder.host != socket.gethostname():
            return f"; if it is gone, delete {self.path}"
        return ""

    def release(self) -> None:
        """Remove the lock file, then drop the flock (in this order: see :meth:`_try`)."""
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None


_APP_NAME = re.compile(r"^perfcast collect pid=(\d+) host=(.*)$")


def _advisory_key(text: str) -> int:
    """A bigint advisory-lock key for ``text`` (the first 8 bytes of its SHA-256)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


class PgAdvisoryLock(CollectorLock):
    """A PostgreSQL session advisory lock, one per store and machine, and the claims of the
    configurations being measured (see the module docstring)."""

    def __init__(self, url, store: str):
        self.url = url  # sqlalchemy URL (with its password: never printed)
        self.store = store
        self.host = socket.gethostname()
        self.key = _advisory_key(f"perfcast collect|{self.host}")  # bigint advisory key
        self._engine = None
        self._conn = None
        self._claims: set[int] = set()

    def _connect(self) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        name = f"perfcast collect pid={os.getpid()} host={self.host}"[:63]  # NAMEDATALEN - 1
        self._engine = create_engine(self.url, poolclass=NullPool, isolation_level="AUTOCOMMIT",
                                     connect_args={"application_name": name})
        self._conn = self._engine.connect()
        # an idle lock connection must not be closed by the server's idle timeouts
        for setting in ("idle_in_transaction_session_timeout", "idle_session_timeout"):
            with contextlib.suppress(Exception):  # idle_session_timeout: PostgreSQL ≥ 14
                self._conn.exec_driver_sql(f"SET {setting} = 0")

    def _try(self) -> Holder | None:
        from sqlalchemy import text

        if self._conn is None:
            try:
                self._connect()
            except Exception as exc:  # noqa: BLE001
                from perfcast.store.db import scrub

                self._close()
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                raise PerfcastError(f"cannot lock measurement store {self.store}: "
                                    f"{scrub(first, self.url)}") from None
        if self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self.key}).scalar():
            return None
        # a bigint key shows in pg_locks as classid = high 32 bits, objid = low 32, objsubid = 1
        u = self.key & 0xFFFFFFFFFFFFFFFF
        row = self._conn.execute(text(
            "SELECT a.application_name, a.pid, a.client_addr::text, a.backend_start "
            "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND l.classid::text = :hi AND l.objid::text = :lo "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"),
            {"hi": str(u >> 32), "lo": str(u & 0xFFFFFFFF)}).first()
        if row is None:  # released in between: try again at the next look
            return Holder(host=self.host)
        started = (row[3].astimezone(timezone.utc).isoformat(timespec="seconds")
                   if row[3] is not None else None)
        m = _APP_NAME.match(row[0] or "")
        if m:
            return Holder(int(m.group(1)), m.group(2), started)
        return Holder(None, f"{row[2] or 'local socket'} (server backend {row[1]})", started)

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # the connection may be gone already
                self._conn.close()
        if self._engine is not None:
            self._engine.dispose()
        self._conn = self._engine = None

    def claim(self, key: str) -> bool:
        """``pg_try_advisory_lock`` on the configuration's key, on the lock's connection (the
        lock must be held): ``False`` when another collector's session holds it."""
        from sqlalchemy import text

        if self._conn is None:
            raise PerfcastError(f"claim of a configuration without holding the collector lock "
                                f"of {self.store}")
        k = _advisory_key(f"perfcast claim|{key}")
        if k in self._claims:
            return True
        if self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": k}).scalar():
            self._claims.add(k)
            return True
        return False

    def unclaim(self, key: str) -> None:
        from sqlalchemy import text

        k = _advisory_key(f"perfcast claim|{key}")
        if k not in self._claims or self._conn is None:
            return
        self._claims.discard(k)
        with contextlib.suppress(Exception):  # a lost connection has released it already
            self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": k})

    def release(self) -> None:
        """Unlock (claims too) and close the lock's connection (closing alone would release
        them as well)."""
        if self._conn is None:
            return
        from sqlalchemy import text

        with contextlib.suppress(Exception):  # a lost connection has released it already
            self._conn.execute(text("SELECT pg_advisory_unlock_all()"))
        self._claims.clear()
        self._close()


__all__ = ["POLL_ENV", "CollectorLock", "FileLock", "Holder", "NoLock", "PgAdvisoryLock",
           "poll_interval"]
