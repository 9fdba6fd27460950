"""``PostgresSaver`` threads against a real PostgreSQL server (tests/kit/postgres.py: Debian's ``postgresql``, on
127.0.0.1, password authentication): a thread written by the small tool-calling agent (tests/kit/agent.py) is read
by ``from_thread``, by ``judgegraph eval --checkpointer postgres:DSN`` and by ``judgegraph watch --once`` (an LLM
judge on the loopback OpenAI server); the DSN's password reaches no results file, header, output or error; the
database is only read."""

from __future__ import annotations

import json
import socket

import pytest
from langchain_core.messages import HumanMessage

from judgegraph.loaders import LoadedConversation
from judgegraph.loaders.langgraph_threads import checkpointer_threads, from_thread, load_checkpointer, open_checkpointer
from tests.kit import cli
from tests.kit.agent import build_agent
from tests.kit.openai_server import FakeOpenAIServer, schema_responder
from tests.unit.test_langgraph_threads import check_agent_thread

pytestmark = pytest.mark.integration


def read_only_threads(spec: str) -> list[LoadedConversation]:
    """The threads the command line reads from ``spec`` (``postgres:DSN``), checking its session cannot write."""
    import psycopg

    with open_checkpointer(spec) as saver:  # what the command line opens: read-only
        items = list(load_checkpointer(saver, "pg", None))
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), saver.conn.connection() as conn:
            conn.execute("DELETE FROM checkpoints")
    loaded = [i for i in items if isinstance(i, LoadedConversation)]
    assert [i.conversation.id for i in loaded] == ["t1", "t2"] and len(loaded) == len(items)
    return loaded



def write_threads(dsn, threads):
    """The agent run on a PostgresSaver at ``dsn`` (its tables made by ``setup()``, as an agent does)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        app = build_agent(saver)
        for tid, questions in threads.items():
            for q in questions:
                app.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": tid}})
        return {tid: from_thread(app, tid) for tid in threads}


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def redacted(dsn, password):
    return "postgres:" + dsn.replace(f":{password}@", ":[REDACTED]@")


def test_a_postgres_thread_is_read_by_from_thread_and_load_checkpointer(postgres_dsn, postgres_server):
    by_graph = write_threads(postgres_dsn, {"t1": ["Weather in Paris?", "And tomorrow?"], "t2": ["Weather?"]})
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_dsn) as saver:
        check_agent_thread(from_thread(saver, "t1"))
        assert from_thread(saver, "t1") == by_graph["t1"]  # the checkpointer and the graph agree
    items = read_only_threads(f"postgres:{postgres_dsn}")
    assert items[0].conversation == by_graph["t1"]


def test_the_command_line_s_saver_reconnects_after_a_server_restart(postgres_dsn, postgres_server):
    """What ``watch`` needs to outlive a restart of the database: the next read after it works."""
    write_threads(postgres_dsn, {"t1": ["Weather in Paris?"]})
    with open_checkpointer(f"postgres:{postgres_dsn}") as saver:
        assert from_thread(saver, "t1").id == "t1"
        postgres_server.restart()
        write_threads(postgres_dsn, {"t2": ["Weather?"]})
        assert [t.thread_id for t in checkpointer_threads(saver)] == ["t1", "t2"]
        assert from_thread(saver, "t2").id == "t2"


def test_eval_checkpointer_postgres_judges_the_threads_and_never_writes_the_password(
        postgres_dsn, postgres_server, tmp_path, bare_env):
    write_threads(postgres_dsn, {"t1": ["Weather in Paris?", "And tomorrow?"], "t2": ["Weather?"]})
    password = postgres_server.password
    out, html = tmp_path / "r.jsonl", tmp_path / "r.html"
    env = {**bare_env, "HOME": str(tmp_path)}
    with FakeOpenAIServer(schema_responder) as server:
        done = cli.run(["eval", "--no-progress", "--checkpointer", f"postgres:{postgres_dsn}", "-m", "turn-relevancy",
                        "--model", "openai:judge", "--base-url", server.base_url, "--out", str(out), "--html", str(html)],
                       env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    records = lines(out)
    judged = {r["conversation_id"]: r for r in records if r["type"] == "conversation"}
    assert set(judged) == {"t1", "t2"}
    assert judged["t1"]["source"] == f"langgraph:{redacted(postgres_dsn, password)}#t1"
    assert judged["t1"]["results"]["turn_relevancy"]["status"] == "passed"
    assert len(judged["t1"]["results"]["turn_relevancy"]["verdicts"]) == 2
    header = next(r for r in records if r["type"] == "header")
    assert redacted(postgres_dsn, password) in header["argv"]
    for text in (out.read_text(encoding="utf-8"), html.read_text(encoding="utf-8"), done.stdout, done.stderr):
        assert password not in text


def test_watch_once_judges_a_postgres_database_s_idle_threads(postgres_dsn, postgres_server, tmp_path, bare_env):
    write_threads(postgres_dsn, {"t1": ["Weather in Paris?"]})
    out = tmp_path / "w.jsonl"
    env = {**bare_env, "HOME": str(tmp_path)}
    with FakeOpenAIServer(schema_responder) as server:
        args = ["--checkpointer", f"postgres:{postgres_dsn}", "--idle", "0", "-m", "turn-relevancy", "--model",
                "openai:judge", "--base-url", server.base_url, "--out", str(out), "--once"]
        first = cli.run(["watch", *args], env=env)
        write_threads(postgres_dsn, {"t2": ["Weather?"]})
        second = cli.run(["watch", *args], env=env)  # remembered: only the new thread
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    judged = [r for r in lines(out) if r["type"] == "conversation"]
    assert [r["conversation_id"] for r in judged] == ["t1", "t2"]
    assert judged[0]["results"]["turn_relevancy"]["status"] == "passed"
    password = postgres_server.password
    state = out.with_name(out.name + ".watched.sqlite")  # the threads judged, keyed by the source's name
    for text in (out.read_text(encoding="utf-8"), first.stdout, first.stderr, second.stdout, second.stderr,
                 state.read_bytes().decode("utf-8", "replace")):
        assert password not in text
    assert redacted(postgres_dsn, password) in first.stderr  # "watching postgres:postgres://judge:[REDACTED]@..."


def test_postgres_mistakes_say_what_is_wrong_without_the_password(postgres_dsn, postgres_server, tmp_path, bare_env):
    env = {**bare_env, "HOME": str(tmp_path)}
    out = tmp_path / "r.jsonl"
    judge = ["--model", "openai:judge", "--base-url", "http://127.0.0.1:9/v1", "--out", str(out)]
    done = cli.run(["eval", "--checkpointer", "postgres:x", *judge], env=env)
    assert done.returncode == 2 and "expected postgres:postgres://USER@HOST:PORT/DB" in done.stderr, done.stderr
    password = postgres_server.password
    wrong = postgres_dsn.replace(password, password + "-wrong")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        nowhere = postgres_dsn.replace(f":{postgres_server.port}/", f":{s.getsockname()[1]}/")
    for dsn, said in [(postgres_dsn, "relation \"checkpoints\" does not exist"),  # an empty database: no setup()
                      (wrong, "password authentication failed"), (nowhere, "Connection refused")]:
        done = cli.run(["eval", "--no-progress", "--overwrite", "--checkpointer", f"postgres:{dsn}", *judge], env=env)
        assert done.returncode == 3, done.stdout + done.stderr
        assert "cannot read a PostgresSaver database" in done.stderr and said in done.stderr, done.stderr
        assert password not in done.stderr + done.stdout + out.read_text(encoding="utf-8")
        done = cli.run(["watch", "--once", "--checkpointer", f"postgres:{dsn}", *judge], env=env)
        assert done.returncode == 3 and said in done.stderr, done.stdout + done.stderr
        assert password not in done.stderr + done.stdout
