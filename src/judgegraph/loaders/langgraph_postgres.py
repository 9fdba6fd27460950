"""``--checkpointer postgres:DSN``: an agent's ``PostgresSaver`` database (a PostgreSQL URL or libpq's keyword
form, parsed by psycopg's ``conninfo``), read through read-only sessions, never changed (no ``setup()``); the password
never shown or written (:func:`postgres_name`; docs/threads.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from ..judges.redact import Redactor

if TYPE_CHECKING:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

SCHEMES = ("postgres://", "postgresql://")
#: Seconds to wait for the server when the DSN does not say (libpq's default is to wait for ever).
CONNECT_TIMEOUT = 10


def postgres_dsn(spec: str) -> str | None:
    """The DSN of a ``--checkpointer`` naming a PostgreSQL database (``postgres:DSN`` or a bare URL), else None."""
    if spec.startswith(SCHEMES):
        return spec
    kind, _, dsn = spec.partition(":")
    return dsn if kind == "postgres" else None


def _conninfo(dsn: str) -> dict[str, str | None]:
    """The DSN's parameters as libpq reads them (either form; psycopg's ``conninfo_to_dict``). Raises ValueError
    (its message as psycopg's, which never holds a whole value) for a DSN libpq would refuse."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        return {k: None if v is None else str(v) for k, v in conninfo_to_dict(dsn).items()}
    except psycopg.Error as exc:
        raise ValueError(" ".join(str(exc).split())) from None


def _password(dsn: str) -> str | None:
    """The password the DSN holds (URL or keyword form), else None; without psycopg, a URL's only."""
    try:
        password = _conninfo(dsn).get("password")
    except (ImportError, ValueError):
        from urllib.parse import unquote, urlsplit

        try:
            password = urlsplit(dsn).password if dsn.startswith(SCHEMES) else None
        except ValueError:
            return None
        password = unquote(password) if password else None
    return password or None


def postgres_name(spec: str) -> str:
    """``spec`` as the run shows and writes it: any password in the DSN (URL ``USER:PASSWORD@`` or keyword
    ``password=...``, quoted or not) replaced by ``[REDACTED]``."""
    secrets = [p for p in (_password(postgres_dsn(spec) or ""),) if p]
    return Redactor(secrets)(spec)


#: What a ``postgres:DSN`` value may be, for the error that refuses one.
EXPECTED = ("expected postgres:postgres://USER@HOST:PORT/DB (a PostgreSQL URL) or postgres:'host=HOST port=PORT "
            "dbname=DB user=USER' (libpq keywords); the password from PGPASSWORD or ~/.pgpass")


def postgres_spec_error(spec: str) -> str | None:
    """What is wrong with a ``postgres:DSN`` value, or None."""
    dsn = (postgres_dsn(spec) or "").strip()
    url = dsn.startswith(SCHEMES)
    if (url and len(dsn) <= dsn.index("://") + 3) or (not url and "=" not in dsn):
        return f"--checkpointer {postgres_name(spec)!r}: {EXPECTED}"
    from importlib.util import find_spec

    if find_spec("langgraph.checkpoint.postgres") is None or find_spec("psycopg") is None:
        return ("--checkpointer postgres:DSN needs langgraph-checkpoint-postgres and psycopg: "
                "pip install 'judgegraph[threads]'")
    try:
        _conninfo(dsn)
    except ValueError as exc:
        redact = Redactor([p for p in (_password(dsn),) if p])
        return f"--checkpointer {postgres_name(spec)!r}: {redact(str(exc))}; {EXPECTED}"
    return None


def _read_only(conn: psycopg.Connection[Any]) -> None:
    conn.execute("SET default_transaction_read_only = on")


@contextmanager
def open_postgres(spec: str) -> Iterator[PostgresSaver]:
    """The ``PostgresSaver`` of ``spec``, its sessions read-only, on a pool of one connection checked before each use
    (a ``watch`` outlives a server restart). ``OSError`` (free of the password) when unreachable or not a saver's."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool, PoolTimeout

    dsn = postgres_dsn(spec) or ""
    if "connect_timeout" not in conninfo_to_dict(dsn):
        dsn = make_conninfo(dsn, connect_timeout=CONNECT_TIMEOUT)
    name = postgres_name(spec)
    redact = Redactor([p for p in (_password(dsn),) if p])
    try:  # once on a connection of its own, for a clear error (a pool that cannot connect only says it timed out)
        with PostgresSaver.from_conn_string(dsn) as probe:
            conn = cast("psycopg.Connection[Any]", probe.conn)  # from_conn_string's: a connection, not a pool
            _read_only(conn)
            conn.execute("SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints LIMIT 1").fetchall()
        pool: ConnectionPool[Any] = ConnectionPool(
            dsn, kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}, min_size=1,
            max_size=1, open=False, configure=_read_only, check=ConnectionPool.check_connection,
            timeout=CONNECT_TIMEOUT, num_workers=1, name="judgegraph-postgres")
        pool.open(wait=True, timeout=CONNECT_TIMEOUT)
    except (psycopg.Error, PoolTimeout) as exc:
        text = " ".join(str(exc).split())
        raise OSError(f"{name}: cannot read a PostgresSaver database ({redact(text)})") from None
    try:
        yield PostgresSaver(pool)
    finally:
        pool.close(timeout=CONNECT_TIMEOUT)
