"""``--checkpointer postgres:DSN``: an agent's ``PostgresSaver`` database, read by ``eval`` and ``watch``.

The DSN is a PostgreSQL URL (``postgres://USER@HOST:PORT/DB``, or ``postgresql://``), given as ``postgres:URL`` or as
the URL itself. The database is opened through ``PostgresSaver.from_conn_string`` and its session made read-only
(``default_transaction_read_only``): the agent may be writing to it, and judgegraph never changes it (nor runs the
saver's ``setup()`` migrations). A password in the URL is never shown or written: :func:`postgres_name` is the name
the run uses in sources, errors and the results file (the password as ``[REDACTED]``); libpq's ``PGPASSWORD`` or
``~/.pgpass`` keep it off the command line altogether (docs/threads.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from ..judges.redact import Redactor

if TYPE_CHECKING:
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


def _password(dsn: str) -> str | None:
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(dsn).password
    except ValueError:
        return None
    return unquote(password) if password else None


def postgres_name(spec: str) -> str:
    """``spec`` as the run shows and writes it: any password in the URL replaced by ``[REDACTED]``."""
    secrets = [p for p in (_password(postgres_dsn(spec) or ""),) if p]
    return Redactor(secrets)(spec)


def postgres_spec_error(spec: str) -> str | None:
    """What is wrong with a ``postgres:DSN`` value, or None."""
    dsn = postgres_dsn(spec) or ""
    if not dsn.startswith(SCHEMES) or len(dsn) <= dsn.index("://") + 3:
        return (f"--checkpointer {postgres_name(spec)!r}: expected postgres:postgres://USER@HOST:PORT/DB (a PostgreSQL "
                "URL; the password from PGPASSWORD or ~/.pgpass)")
    from importlib.util import find_spec

    if find_spec("langgraph.checkpoint.postgres") is None or find_spec("psycopg") is None:
        return ("--checkpointer postgres:DSN needs langgraph-checkpoint-postgres and psycopg: "
                "pip install 'judgegraph[threads]'")
    return None


def _with_timeout(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if "connect_timeout" in conninfo_to_dict(dsn):
        return dsn
    return make_conninfo(dsn, connect_timeout=CONNECT_TIMEOUT)


@contextmanager
def open_postgres(spec: str) -> Iterator[PostgresSaver]:
    """The ``PostgresSaver`` of ``spec``, on a read-only session. Raises ``OSError`` (its message free of the
    password) for a server that cannot be reached or a database without the saver's tables."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    dsn = postgres_dsn(spec) or ""
    name = postgres_name(spec)
    redact = Redactor([p for p in (_password(dsn),) if p])
    with ExitStack() as stack:
        try:
            saver: PostgresSaver = stack.enter_context(PostgresSaver.from_conn_string(_with_timeout(dsn)))
            conn: Any = saver.conn
            conn.execute("SET default_transaction_read_only = on")
            conn.execute("SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints LIMIT 1").fetchall()
        except psycopg.Error as exc:
            text = " ".join(str(exc).split())
            raise OSError(f"{name}: cannot read a PostgresSaver database ({redact(text)})") from None
        yield saver
