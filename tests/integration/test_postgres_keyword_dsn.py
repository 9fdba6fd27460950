"""``--checkpointer postgres:DSN`` with libpq's keyword form (``host=... port=... dbname=... user=... password=...``)
against the real PostgreSQL the kit starts (tests/kit/postgres.py): read as the URL form is, the session read-only,
the password (plain, or quoted with spaces and quotes in it) in no results file, header, output, state file or
error; a keyword DSN libpq would refuse is a usage error naming what is wrong, without the password."""

from __future__ import annotations

import json
import secrets

import pytest

from judgegraph.loaders.langgraph_postgres import postgres_name
from tests.integration.test_threads_postgres import read_only_threads, write_threads
from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, schema_responder
from tests.kit.postgres import USER

pytestmark = pytest.mark.integration


def keywords(server, db: str, *, user: str = USER, password: str | None = None) -> str:
    """The keyword DSN of ``db`` on the kit's server, the password quoted as libpq reads it."""
    value = password if password is not None else server.password
    quoted = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"host=127.0.0.1 port={server.port} dbname={db} user={user} password={quoted}"


def test_postgres_name_redacts_a_keyword_password_in_every_quoting():
    for spec, shown in [
        ("postgres:host=h dbname=d user=u password=pw", "postgres:host=h dbname=d user=u password=[REDACTED]"),
        ("postgres:password='a b\\'c' host=h", "postgres:password=[REDACTED] host=h"),
        ("postgres:host=h password = 'x y' dbname=d", "postgres:host=h password = [REDACTED] dbname=d"),
        ("postgres:host=h dbname=d", "postgres:host=h dbname=d"),
        ("postgres:postgres://u:pw@h:5/d", "postgres:postgres://u:[REDACTED]@h:5/d"),
    ]:
        assert postgres_name(spec) == shown


def test_eval_reads_a_keyword_dsn_read_only_and_never_writes_the_password(postgres_dsn, postgres_server, tmp_path,
                                                                         bare_env):
    write_threads(postgres_dsn, {"t1": ["Weather in Paris?", "And tomorrow?"], "t2": ["Weather?"]})
    db = postgres_dsn.rsplit("/", 1)[1]
    spec = f"postgres:{keywords(postgres_server, db)}"
    read_only_threads(spec)

    out, html = tmp_path / "r.jsonl", tmp_path / "r.html"
    env = {**bare_env, "HOME": str(tmp_path)}
    with FakeOpenAIServer(schema_responder) as server:
        done = cli.run(["eval", "--no-progress", "--checkpointer", spec, "-m", "turn-relevancy", "--model", "openai:judge",
                        "--base-url", server.base_url, "--out", str(out), "--html", str(html)], env=env)
        watched = cli.run(["watch", "--once", "--idle", "0", "--checkpointer", spec, "-m", "turn-relevancy", "--model",
                           "openai:judge", "--base-url", server.base_url, "--out", str(tmp_path / "w.jsonl")], env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert watched.returncode == 0, watched.stdout + watched.stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    judged = {r["conversation_id"]: r for r in records if r["type"] == "conversation"}
    assert set(judged) == {"t1", "t2"} and judged["t1"]["results"]["turn_relevancy"]["status"] == "passed"
    shown = postgres_name(spec)
    assert "password=[REDACTED]" in shown
    assert judged["t1"]["source"] == f"langgraph:{shown}#t1"
    header = next(r for r in records if r["type"] == "header")
    assert any("password=[REDACTED]" in arg for arg in header["argv"])
    files = [p for p in tmp_path.iterdir() if p.is_file()]
    written = "".join(p.read_bytes().decode("utf-8", "replace") for p in files)
    for text in (written, done.stdout, done.stderr, watched.stdout, watched.stderr):
        assert postgres_server.password not in text


def test_a_quoted_password_with_spaces_and_quotes_is_read_and_redacted(postgres_dsn, postgres_server, tmp_path,
                                                                       bare_env):
    write_threads(postgres_dsn, {"t1": ["Weather in Paris?"]})
    db = postgres_dsn.rsplit("/", 1)[1]
    role, password = "reader_" + secrets.token_hex(4), f"a b'c \\ {secrets.token_hex(6)}"
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # a reader with an awkward password
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password.replace(chr(39), chr(39) * 2)}'")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    spec = f"postgres:{keywords(postgres_server, db, user=role, password=password)}"
    out = tmp_path / "r.jsonl"
    env = {**bare_env, "HOME": str(tmp_path)}
    with FakeOpenAIServer(schema_responder) as server:
        done = cli.run(["eval", "--no-progress", "--checkpointer", spec, "-m", "turn-relevancy", "--model", "openai:judge",
                        "--base-url", server.base_url, "--out", str(out)], env=env)
        wrong = cli.run(["eval", "--no-progress", "--overwrite", "--checkpointer", spec.replace("\\\\ ", "\\\\ x"), "-m",
                         "turn-relevancy", "--model", "openai:judge", "--base-url", server.base_url, "--out", str(out)],
                        env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert wrong.returncode == 3 and "password authentication failed" in wrong.stderr, wrong.stdout + wrong.stderr
    secret = password.rsplit(" ", 1)[1]  # the part no other text holds
    for text in (done.stdout, done.stderr, wrong.stdout, wrong.stderr, out.read_text(encoding="utf-8")):
        assert secret not in text


def test_a_keyword_dsn_libpq_refuses_is_a_usage_error_without_the_password(tmp_path, bare_env):
    env = {**bare_env, "HOME": str(tmp_path)}
    judge = ["--model", "openai:judge", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "r.jsonl")]
    done = cli.run(["eval", "--checkpointer", "postgres:password=s3cret-Value host", *judge], env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert 'missing "=" after "host"' in said and "libpq keywords" in said and "password=[REDACTED]" in said
    assert "s3cret-Value" not in done.stdout + done.stderr
