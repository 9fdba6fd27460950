"""``--checkpointer postgres:DSN`` without a server: which values name a PostgreSQL database (a URL, or libpq's
keywords), what is wrong with a bad one, and the name the run shows and writes, and its header records, with no password in it (the run with a real
server: tests/integration/test_threads_postgres.py)."""

from __future__ import annotations

import pytest

from judgegraph import ScriptedChatModel
from judgegraph.judges import resolve_judge
from judgegraph.loaders.langgraph_postgres import postgres_dsn, postgres_name
from judgegraph.loaders.langgraph_threads import checkpointer_name, checkpointer_spec_error
from judgegraph.runs.header import run_header
from judgegraph.runs.runner import MetricPlan


def test_which_values_name_a_postgres_database():
    assert postgres_dsn("postgres:postgres://u@127.0.0.1:5432/db") == "postgres://u@127.0.0.1:5432/db"
    assert postgres_dsn("postgresql://u@h/db") == "postgresql://u@h/db"  # the URL alone
    assert postgres_dsn("sqlite:agent.sqlite") is None and postgres_dsn("agent.sqlite") is None


@pytest.mark.parametrize("spec", ["postgres:", "postgres:x", "postgres:postgres://", "postgres:host=h dbname",
                                  "postgres:host=h nosuchoption=1"])
def test_a_value_that_is_not_a_postgres_dsn_is_a_usage_error(spec):
    said = checkpointer_spec_error(spec) or ""
    assert "expected postgres:postgres://USER@HOST:PORT/DB" in said and "libpq keywords" in said


@pytest.mark.parametrize(("spec", "name"), [
    ("postgres:host=h port=5432 dbname=d user=u password=pw",  # short: still taken out
     "postgres:host=h port=5432 dbname=d user=u password=[REDACTED]"),
    ("postgres:host=h user=u password='s3cret long\\'pass' dbname=d",  # quoted, a quote in it, as libpq reads it
     "postgres:host=h user=u password=[REDACTED] dbname=d"),
    ("postgres:password = s3cret-Value host=h dbname=d", "postgres:password = [REDACTED] host=h dbname=d"),
])
def test_a_libpq_keyword_dsn_is_accepted_and_its_password_never_shown(spec, name):
    assert postgres_dsn(spec) == spec.removeprefix("postgres:")
    assert checkpointer_spec_error(spec) is None
    assert checkpointer_name(spec) == name


@pytest.mark.parametrize(("spec", "password"), [
    ("postgres:postgres://judge:pw@127.0.0.1:5432/db", "pw"),  # short: still taken out
    ("postgres:postgresql://judge:s3cret-long-password@h/db", "s3cret-long-password"),
    ("postgresql://judge:p%40ss:word@h:1/db?sslmode=disable", "p%40ss:word"),  # percent-encoded, with a colon
])
def test_the_name_shown_and_written_has_no_password(spec, password):
    name = checkpointer_name(spec)
    assert password not in name and ":[REDACTED]@" in name
    assert name == postgres_name(spec) and name.endswith(spec.rsplit("@", 1)[1])
    assert checkpointer_spec_error(spec) is None
    assert checkpointer_name("sqlite:a.sqlite") == "sqlite:a.sqlite"


def test_the_run_header_records_the_argv_without_the_password():
    plan = MetricPlan(["turn_relevancy"], resolve_judge(model=ScriptedChatModel(default="yes")), {})
    argv = ["judgegraph", "eval", "--checkpointer", "postgres:postgres://judge:s3cret-pw@127.0.0.1:5432/agent"]
    header = run_header(plan, argv=argv)
    assert header["argv"][3] == "postgres:postgres://judge:[REDACTED]@127.0.0.1:5432/agent"
    assert "s3cret-pw" not in str(header)
    argv[3] = "postgres:host=127.0.0.1 dbname=agent user=judge password='s3cret pw'"
    header = run_header(plan, argv=argv)
    assert header["argv"][3] == "postgres:host=127.0.0.1 dbname=agent user=judge password=[REDACTED]"
    assert "s3cret" not in str(header)
