"""A real PostgreSQL server for the tests (Debian's ``postgresql`` package): one per test session, in a temp dir,
listening on 127.0.0.1 only at a free port, password authentication over TCP, stopped and removed at the end.
Tests that need it are skipped only when the PostgreSQL binaries are absent (``.ci/run`` installs them, so CI never
skips); a server that is there but does not start is an error, not a skip.

``postgres_server`` (session) is the server; ``postgres_dsn`` (per test) is the URL of a fresh empty database on it,
with the password in it (as a user would write it), so a test can check the password never leaks."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

USER = "judge"
#: Bounded waits: pg_ctl's own -t, and the subprocess timeout around it.
WAIT_S = 60


def find_bin() -> Path | None:
    """The directory of initdb and pg_ctl (Debian's /usr/lib/postgresql/N/bin, newest first, or on PATH), or None."""
    for initdb in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True):
        return Path(initdb).parent
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("pg_ctl", path=str(Path(found).parent)) else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server: ``url(db)`` is a DSN with the password; ``restart()`` stops and starts it (same port)."""

    port: int
    password: str
    root: Path
    bindir: Path
    user: str | None

    def url(self, db: str = "postgres") -> str:
        return f"postgres://{USER}:{self.password}@127.0.0.1:{self.port}/{db}"

    def restart(self) -> None:
        _run(self.bindir, ["pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "log"), "-m", "fast", "-w",
                           "-t", str(WAIT_S), "restart"], self.user)  # -l: else the server writes to our pipe


def _run(bindir: Path, args: list[str], user: str | None) -> None:
    done = subprocess.run([str(bindir / args[0]), *args[1:]], capture_output=True, text=True, timeout=WAIT_S + 30,
                          user=user, check=False, cwd="/")
    if done.returncode:
        raise RuntimeError(f"{' '.join(args[:1])} failed ({done.returncode}): {done.stdout}{done.stderr}")


def start_server() -> Iterator[PostgresServer]:
    """Start a server (initdb, pg_ctl start: as the ``postgres`` user when run as root, since PostgreSQL refuses to
    run as root), yield it, stop it (pg_ctl stop -m fast) and remove its directory."""
    bindir = find_bin()
    if bindir is None:
        pytest.skip("the PostgreSQL server binaries are absent (apt-get install postgresql)")
    user = "postgres" if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="judgegraph-pg-"))
    if user:
        shutil.chown(root, user)
    password = "pw-" + secrets.token_hex(8)
    pwfile = root / "pw"
    pwfile.write_text(password + "\n", encoding="utf-8")
    if user:
        shutil.chown(pwfile, user)
    data, port = root / "data", _free_port()
    _run(bindir, ["initdb", "-D", str(data), "-U", USER, f"--pwfile={pwfile}", "--auth-local=trust",
                  "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"], user)
    started = False
    try:
        _run(bindir, ["pg_ctl", "-D", str(data), "-l", str(root / "log"), "-w", "-t", str(WAIT_S), "-o",
                      f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off", "start"], user)
        started = True
        yield PostgresServer(port, password, root, bindir, user)
    finally:
        if started:
            _run(bindir, ["pg_ctl", "-D", str(data), "-m", "fast", "-w", "-t", str(WAIT_S), "stop"], user)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    yield from start_server()


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server: its URL (with the password)."""
    import psycopg

    name = "t_" + secrets.token_hex(6)
    with psycopg.connect(postgres_server.url(), autocommit=True, connect_timeout=WAIT_S) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # a name of hex digits: nothing to quote
    return postgres_server.url(name)
