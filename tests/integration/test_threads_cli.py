"""``judgegraph eval --checkpointer sqlite:PATH``: a real SqliteSaver file written by a small tool-calling agent
(tests/kit/agent.py), judged through the CLI by an LLM judge on the loopback server; an unreadable thread is an
input error naming the thread and the field; an unreachable LangGraph server is exit 3 with a clear message."""

from __future__ import annotations

import json
import socket
import sqlite3

import pytest
from langchain_core.messages import HumanMessage

from tests.kit import cli
from tests.kit.agent import build_agent
from tests.kit.openai_server import FakeOpenAIServer, schema_responder

pytestmark = pytest.mark.integration
EVAL = ["eval", "--no-progress"]
sqlite_saver = pytest.importorskip("langgraph.checkpoint.sqlite", reason="pip install 'judgegraph[threads]'")


def agent_file(path, threads):
    conn = sqlite3.connect(path, check_same_thread=False)
    app = build_agent(sqlite_saver.SqliteSaver(conn))
    for tid, questions in threads.items():
        for q in questions:
            app.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": tid}})
    return conn, app


def records(path):
    """The results file's records, its run header and summary left out."""
    return [r for line in path.read_text(encoding="utf-8").splitlines()
            if (r := json.loads(line))["type"] not in ("header", "summary")]


def test_every_thread_of_a_sqlite_file_is_judged_and_a_bad_one_is_an_input_error(tmp_path, bare_env):
    db = tmp_path / "agent.sqlite"
    conn, _ = agent_file(db, {"t1": ["Weather in Paris?", "And tomorrow?"], "t2": ["Weather?"]})
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class Counter(TypedDict):
        count: int

    g = StateGraph(Counter)
    g.add_node("inc", lambda s: {"count": s["count"] + 1})
    g.add_edge(START, "inc")
    g.compile(checkpointer=sqlite_saver.SqliteSaver(conn)).invoke({"count": 0}, {"configurable": {"thread_id": "n"}})
    conn.close()
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(schema_responder) as server:
        done = cli.run([*EVAL, "--checkpointer", f"sqlite:{db}", "-m", "turn-relevancy", "--model", "openai:judge",
                        "--base-url", server.base_url, "--out", str(out)], env={**bare_env, "HOME": str(tmp_path)})
    assert done.returncode == 3, done.stdout + done.stderr  # judged, and one input error
    assert "thread 'n': the thread's state has no 'messages'" in done.stderr
    rows = records(out)
    judged = {r["conversation_id"]: r for r in rows if r["type"] == "conversation"}
    assert set(judged) == {"t1", "t2"}
    assert judged["t1"]["source"] == f"langgraph:sqlite:{db}#t1"
    assert judged["t1"]["results"]["turn_relevancy"]["status"] == "passed"
    assert len(judged["t1"]["results"]["turn_relevancy"]["verdicts"]) == 2  # the two replies; tool-call turns are blank
    bad = [r for r in rows if r["type"] == "input_error"]
    assert len(bad) == 1 and bad[0]["field"] == "values.messages" and "thread 'n'" in bad[0]["message"]

    one = tmp_path / "one.jsonl"
    with FakeOpenAIServer(schema_responder) as server:
        done = cli.run([*EVAL, "--checkpointer", f"sqlite:{db}", "--thread", "t2", "-m", "turn-relevancy", "--model",
                        "openai:judge", "--base-url", server.base_url, "--out", str(one)],
                        env={**bare_env, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["conversation_id"] for r in records(one) if r["type"] == "conversation"] == ["t2"]


def test_source_mistakes_are_usage_errors_and_a_missing_file_an_input_error(tmp_path, bare_env):
    env = {**bare_env, "HOME": str(tmp_path)}
    out = tmp_path / "r.jsonl"
    for argv, msg in [
        (["--checkpointer", "mysql:x"], "expected sqlite:PATH (a SqliteSaver file) or postgres:DSN"),
        (["--thread", "t1"], "need --checkpointer sqlite:PATH or --langgraph-url URL"),
        (["--checkpointer", f"sqlite:{tmp_path}/a", "--langgraph-url", "http://x"], "exclude each other"),
        (["--langgraph-url", "http://127.0.0.1:1", "--metadata", "novalue"], "expected KEY=VALUE"),
    ]:
        done = cli.run([*EVAL, *argv, "--out", str(out)], env=env)
        assert done.returncode == 2 and msg in done.stderr, (argv, done.stderr)
    done = cli.run([*EVAL, "--checkpointer", f"sqlite:{tmp_path}/missing.sqlite", "--model", "openai:judge",
                    "--base-url", "http://127.0.0.1:9/v1", "--out", str(out)], env=env)
    assert done.returncode == 3 and "no such SqliteSaver file" in done.stderr, done.stderr


def test_an_unreachable_langgraph_server_is_exit_3_with_a_clear_message(tmp_path, bare_env):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = cli.run([*EVAL, "--langgraph-url", f"http://127.0.0.1:{port}", "--model", "openai:judge", "--base-url",
                    "http://127.0.0.1:9/v1", "--out", str(tmp_path / "r.jsonl")],
                   env={**bare_env, "HOME": str(tmp_path)})
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"cannot reach the LangGraph server at http://127.0.0.1:{port}" in done.stderr


def test_watch_judges_a_sqlite_file_s_idle_threads_once_and_stops_on_sigterm(tmp_path, bare_env):
    import signal
    import time

    db = tmp_path / "agent.sqlite"
    conn, app = agent_file(db, {"t1": ["Weather in Paris?"]})
    out = tmp_path / "w.jsonl"
    env = {**bare_env, "HOME": str(tmp_path)}
    with FakeOpenAIServer(schema_responder) as server:
        args = ["--checkpointer", f"sqlite:{db}", "--idle", "0", "-m", "turn-relevancy", "--model", "openai:judge",
                "--base-url", server.base_url, "--out", str(out)]
        done = cli.run(["watch", *args, "--once"], env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert [r["conversation_id"] for r in records(out)] == ["t1"]
        # the agent goes on writing while a watcher polls: only the new thread is judged, then SIGTERM stops it
        proc = cli.start(["watch", *args, "--interval", "0.3", "--max-polls", "1000"], env=env)
        try:
            app.invoke({"messages": [HumanMessage("Weather?")]}, {"configurable": {"thread_id": "t2"}})
            deadline = time.monotonic() + 60
            while [r["conversation_id"] for r in records(out)] != ["t1", "t2"] and time.monotonic() < deadline:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    conn.close()
    assert proc.returncode == 143, stdout + stderr
    assert "terminated" in stderr and "1 thread judged" in stdout
    assert [r["conversation_id"] for r in records(out)] == ["t1", "t2"]  # each once
    ended = json.loads(out.read_text(encoding="utf-8").splitlines()[-1])  # SIGTERM still ends with a summary
    assert ended["type"] == "summary" and ended["conversations"] == 2


def test_watch_usage_and_an_unreachable_server(tmp_path, bare_env):
    env = {**bare_env, "HOME": str(tmp_path)}
    for argv, msg in [([], "watch needs --checkpointer"), (["--langgraph-url", "http://x", "--sample", "0"], "--sample"),
                      (["--langgraph-url", "http://x", "--once", "--max-polls", "3"], "--once is --max-polls 1")]:
        done = cli.run(["watch", *argv, "--out", str(tmp_path / "w.jsonl")], env=env)
        assert done.returncode == 2 and msg in done.stderr, (argv, done.stderr)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = cli.run(["watch", "--langgraph-url", f"http://127.0.0.1:{port}", "--once", "--model", "openai:j",
                    "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "w.jsonl")], env=env)
    assert done.returncode == 3 and f"cannot reach the LangGraph server at http://127.0.0.1:{port}" in done.stderr


def test_a_watch_file_has_one_header_refuses_other_settings_and_opens_in_every_reader_after_restarts(tmp_path,
                                                                                                      bare_env):
    """Three watches of one file (two restarts), each appending threads and a summary: the header is written once,
    the summaries sit in the middle and at the end (the last counts the whole file), a restart with another
    threshold or judge is exit 2 naming the difference and leaves the file as it was, one with another concurrency
    goes on; report, diff, export and show read the file."""
    import csv

    db = tmp_path / "agent.sqlite"
    conn, app = agent_file(db, {"t1": ["Weather in Paris?"]})
    out = tmp_path / "w.jsonl"
    env = {**bare_env, "HOME": str(tmp_path)}

    def lines():
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]

    with FakeOpenAIServer(schema_responder) as server:
        args = ["--checkpointer", f"sqlite:{db}", "--idle", "0", "-m", "turn-relevancy", "--model", "openai:judge",
                "--base-url", server.base_url, "--out", str(out), "--once"]
        done = cli.run(["watch", *args], env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        first = lines()
        assert [r["type"] for r in first] == ["header", "conversation", "summary"]
        assert first[0]["metrics"][0]["name"] == "turn_relevancy"
        assert first[0]["inputs"][0]["path"] == f"sqlite:{db}" and first[0]["watch"]["idle"] == 0
        assert first[2]["conversations"] == 1 and first[2]["pass_rate"] == {"turn_relevancy": 1.0}

        app.invoke({"messages": [HumanMessage("Weather?")]}, {"configurable": {"thread_id": "t2"}})
        before = out.read_bytes()
        for changed, named in ((["--threshold", "0.9"], "metric turn_relevancy option threshold changed"),
                               (["--model", "openai:other"], "judge llm:judge changed: llm:judge → llm:other")):
            given = [*args, *changed] if changed[0] != "--model" else [*args[:6], *changed, *args[8:]]
            refused = cli.run(["watch", *given], env=env)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert "was made with other settings" in refused.stderr and named in refused.stderr, refused.stderr
        assert out.read_bytes() == before  # nothing judged, nothing written

        done = cli.run(["watch", *args, "--concurrency", "3"], env=env)  # how fast it asks may change
        assert done.returncode == 0, done.stdout + done.stderr
        app.invoke({"messages": [HumanMessage("Weather in Rome?")]}, {"configurable": {"thread_id": "t3"}})
        done = cli.run(["watch", *args], env=env)
        assert done.returncode == 0, done.stdout + done.stderr
    conn.close()
    kinds = [r["type"] for r in lines()]
    assert kinds == ["header", "conversation", "summary", "conversation", "summary", "conversation", "summary"]
    assert lines()[-1]["conversations"] == 3 and lines()[-1]["statuses"] == {"turn_relevancy": {"passed": 3}}

    report = cli.run(["report", str(out), "-o", str(tmp_path / "r.html")], env=env)
    assert report.returncode == 0, report.stdout + report.stderr
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert all(t in html for t in ("t1", "t2", "t3")) and "llm:judge" in html

    diff = cli.run(["diff", "--json", str(out), str(out)], env=env)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    figures = json.loads(diff.stdout)
    assert "t3" in diff.stdout and figures["settings"]["same_judging"] is True, diff.stdout[:2000]

    export = cli.run(["export", str(out), "--out", str(tmp_path / "w.csv")], env=env)
    assert export.returncode == 0, export.stdout + export.stderr
    with (tmp_path / "w.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["conversation_id"] for r in rows) == ["t1", "t2", "t3"]

    show = cli.run(["show", str(out), "--conversation", "t3"], env=env)
    assert show.returncode == 0 and "Weather in Rome?" in show.stdout, show.stdout + show.stderr

    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"conversation_id": t, "metric": "turn_relevancy", "label": True}) + "\n"
                              for t in ("t1", "t2", "t3")), encoding="utf-8")
    agree = cli.run(["agree", str(out), "--labels", str(labels), "--json"], env=env)
    assert agree.returncode == 0, agree.stdout + agree.stderr
    assert '"n": 3' in agree.stdout, agree.stdout[:2000]


def test_eval_and_watch_read_the_messages_under_messages_key(tmp_path, bare_env):
    from tests.unit.test_langgraph_threads import history_app

    db = tmp_path / "history.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    history_app(sqlite_saver.SqliteSaver(conn))  # thread h1, its messages under `history`
    conn.close()
    env = {**bare_env, "HOME": str(tmp_path)}
    with FakeOpenAIServer(schema_responder) as server:
        judge = ["-m", "turn-relevancy", "--model", "openai:judge", "--base-url", server.base_url]
        plain = cli.run([*EVAL, "--checkpointer", f"sqlite:{db}", *judge, "--out", str(tmp_path / "plain.jsonl")],
                        env=env)
        done = cli.run([*EVAL, "--checkpointer", f"sqlite:{db}", "--messages-key", "history", *judge,
                        "--out", str(tmp_path / "e.jsonl")], env=env)
        watched = cli.run(["watch", "--checkpointer", f"sqlite:{db}", "--messages-key", "history", "--idle", "0",
                           "--once", *judge, "--out", str(tmp_path / "w.jsonl")], env=env)
    assert plain.returncode == 3 and "--messages-key" in plain.stderr, plain.stderr
    # one of each: the words agree with the counts
    assert "1 conversation, 1 result: 1 passed, 0 failed, 0 errors, 0 n/a; 0 judge errors, 0 input errors." in done.stdout
    assert "1 poll, 1 thread judged: 1 passed, 0 failed, 0 errors; 0 judge errors, 0 input errors." in watched.stdout
    assert "0 conversations, 0 results: " in plain.stdout and "0 judge errors, 1 input error." in plain.stdout
    for run, out in ((done, "e.jsonl"), (watched, "w.jsonl")):
        assert run.returncode == 0, run.stdout + run.stderr
        (row,) = records(tmp_path / out)
        assert row["conversation_id"] == "h1" and row["results"]["turn_relevancy"]["status"] == "passed"
        assert [v["turns"] for v in row["results"]["turn_relevancy"]["verdicts"]] == [[1]]
