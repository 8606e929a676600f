"""A throwaway PostgreSQL cluster for the tests (no fixtures here: conftest wraps it in the
session fixture ``postgres_server``; each test that wants a store gets its own database from the
fixture ``pg_url``).

The cluster is made with the server binaries of Debian's ``postgresql`` package
(``/usr/lib/postgresql/<version>/bin/initdb`` and ``pg_ctl``, or the first ``initdb`` on PATH)
in a temporary directory, listens on a free loopback port (``127.0.0.1`` only) and on a unix
socket in that directory, has one superuser ``perfcast`` whose password is checked
(``scram-sha-256`` on TCP, so the password masking is tested against a real server's errors)
and runs with ``fsync=off`` (a test database is thrown away). PostgreSQL refuses to run as
root: as root the cluster is owned by and run as the ``postgres`` user that the Debian package
creates (``runuser -u postgres``). Stopped (``pg_ctl stop -m immediate``) and removed at the end
of the test session — or, when the session is killed before its end, by a small watchdog
process that outlives it (so no server is ever left running).

``PERFCAST_TEST_POSTGRES_URL`` (a superuser's URL of a server of your own) replaces the
throwaway cluster. Without binaries and without that URL the tests that need a server skip
with the reason — or fail when ``PERFCAST_REQUIRE_POSTGRES=1`` (CI, which installs the package).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

#: A server of your own instead of the throwaway cluster (a superuser's URL).
URL_ENV = "PERFCAST_TEST_POSTGRES_URL"
#: ``1``: a test needing PostgreSQL fails instead of skipping when no server can be had (CI).
REQUIRE_ENV = "PERFCAST_REQUIRE_POSTGRES"

USER = "perfcast"
PASSWORD = "pc-test-secret-4711"  # masked in every message: the tests look for it


class Unavailable(Exception):
    """No PostgreSQL server can be had here (the message says why)."""


def server_bin_dir() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl`` (the newest Debian version, else PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl", path=str(Path(initdb).resolve().parent)):
        return Path(initdb).resolve().parent
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A running throwaway cluster (see the module docstring); :meth:`stop` ends and removes it."""

    def __init__(self) -> None:
        bindir = server_bin_dir()
        if bindir is None:
            raise Unavailable("PostgreSQL server binaries not found (initdb / pg_ctl under "
                              "/usr/lib/postgresql/*/bin or on PATH): apt-get install postgresql, "
                              f"or set {URL_ENV}")
        self.bindir = bindir
        self.run_as: list[str] = []
        owner = None
        if os.geteuid() == 0:  # initdb and postgres refuse root
            import pwd

            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                raise Unavailable("running as root and there is no 'postgres' user to run the "
                                  "server as (Debian's postgresql package creates it)") from None
            runuser = shutil.which("runuser")
            if runuser is None:
                raise Unavailable("running as root without runuser to start the server as "
                                  "'postgres'")
            self.run_as = [runuser, "-u", "postgres", "--"]
        self.root = Path(tempfile.mkdtemp(prefix="perfcast-pg-"))
        os.chmod(self.root, 0o700)
        if owner is not None:
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.data = self.root / "data"
        self.port = _free_port()
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if owner is not None:
            os.chown(pwfile, owner.pw_uid, owner.pw_gid)
        os.chmod(pwfile, 0o600)
        self._run(["initdb", "-D", str(self.data), "-U", USER, f"--pwfile={pwfile}",
                   "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
                   "--locale=C", "--no-sync"], "initdb")
        pwfile.unlink()
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                f"-c unix_socket_directories={self.root} -c fsync=off "
                f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=60")
        self._run(["pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w",
                   "-t", "60", "-o", opts, "start"], "pg_ctl start")
        self._watchdog = self._start_watchdog()
        self.admin_url = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/postgres"

    def _start_watchdog(self) -> subprocess.Popen:
        """A detached process that stops and removes the cluster when this (test) process dies
        without :meth:`stop` — killed, or a crash — so that no server outlives its session."""
        stop = [*self.run_as, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m",
                "immediate", "-w", "stop"]
        return subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(self.root), json.dumps(stop)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, cwd=self.root)

    def _run(self, cmd: list[str], what: str) -> None:
        cmd = [*self.run_as, str(self.bindir / cmd[0]), *cmd[1:]]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.root,
                           env={**os.environ, "LC_ALL": "C"})
        if r.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-800:] if log.exists() else ""
            self.stop()
            raise Unavailable(f"{what} failed (exit {r.returncode}): "
                              f"{(r.stderr or r.stdout).strip()[-800:]} {tail}")

    def stop(self) -> None:
        watchdog = getattr(self, "_watchdog", None)
        if watchdog is not None and watchdog.poll() is None:
            watchdog.kill()  # (ours, by its pid) the cluster is stopped here
            watchdog.wait()
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(Exception):
                subprocess.run([*self.run_as, str(self.bindir / "pg_ctl"), "-D", str(self.data),
                                "-m", "immediate", "-w", "stop"], capture_output=True,
                               timeout=60, cwd=self.root)
        shutil.rmtree(self.root, ignore_errors=True)


_WATCHDOG = """
import json, os, shutil, subprocess, sys, time
parent, root, stop = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
while True:
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    except PermissionError:
        pass
    time.sleep(1)
subprocess.run(stop, capture_output=True, timeout=60, cwd=root)
shutil.rmtree(root, ignore_errors=True)
"""


class External:
    """A server of your own (``PERFCAST_TEST_POSTGRES_URL``)."""

    def __init__(self, url: str) -> None:
        self.admin_url = url

    def stop(self) -> None:
        pass


def start():
    """The server for this test session: ``$PERFCAST_TEST_POSTGRES_URL`` or a new cluster."""
    url = os.environ.get(URL_ENV)
    return External(url) if url else Cluster()


def new_database(admin_url: str) -> str:
    """Create an empty database on the server of ``admin_url``; return its URL."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool

    name = f"t_{uuid.uuid4().hex[:16]}"
    url = make_url(admin_url).set(drivername="postgresql+psycopg")
    eng = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with eng.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    finally:
        eng.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)
