"""A real ``langgraph dev`` server running a small tool-calling agent (tests/kit/agent.py, a scripted model, no
key): its threads judged by ``eval --langgraph-url`` (filters by assistant and metadata, a chosen thread), and
``watch`` judging the server's new threads once they are idle: each once, a second poll and a restart judge
nothing again."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("langgraph_api", reason="needs the studio extra: pip install 'judgegraph[studio]'")
from langgraph_sdk import get_sync_client

from tests.kit import cli
from tests.kit.langgraph_dev import ServerFailed, langgraph_dev
from tests.kit.openai_server import FakeOpenAIServer, schema_responder

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
WAIT = 30.0  # seconds at most for a thread to become idle


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("agent_server")
    try:
        with langgraph_dev({"agent": f"{ROOT / 'tests/kit/agent.py'}:graph"}, work, [str(ROOT)]) as (url, log):
            yield url, log
    except ServerFailed as exc:
        if "not installed" in str(exc):
            pytest.skip(str(exc))
        raise


@pytest.fixture(scope="module")
def judge():
    with FakeOpenAIServer(schema_responder) as llm:
        yield llm


def new_thread(url, *questions, metadata=None):
    """A thread of the agent, run to its end, ``questions`` one run each; its id."""
    client = get_sync_client(url=url)
    tid = client.threads.create(metadata=metadata or {})["thread_id"]
    for q in questions:
        client.runs.wait(tid, "agent", input={"messages": [{"role": "user", "content": q}]})
    return tid


def wait_idle(url, tid, seconds):
    """Until the thread is idle and not updated for ``seconds`` (bounded by WAIT)."""
    from datetime import datetime, timezone

    client = get_sync_client(url=url)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        t = client.threads.get(tid)
        at = datetime.fromisoformat(t["updated_at"].replace("Z", "+00:00"))
        if t["status"] == "idle" and (datetime.now(timezone.utc) - at).total_seconds() >= seconds:
            return
        time.sleep(0.2)
    pytest.fail(f"thread {tid} not idle after {WAIT}s")


def judged(path):
    if not path.exists():
        return []
    return [r["conversation_id"] for line in path.read_text().splitlines()
            if (r := json.loads(line))["type"] == "conversation"]


def test_eval_reads_the_server_s_threads_with_their_tool_calls(server, judge, tmp_path, bare_env):
    url, log = server
    mine = new_thread(url, "Weather in Paris?", "And tomorrow?", metadata={"team": "eval-test"})
    other = new_thread(url, "Weather?", metadata={"team": "other"})
    out = tmp_path / "r.jsonl"
    done = cli.run(["eval", "--langgraph-url", url, "--assistant", "agent", "--metadata", "team=eval-test",
                    "-m", "turn-relevancy", "--model", "openai:judge", "--base-url", judge.base_url, "--out", str(out),
                    "--no-progress"], env={**bare_env, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [r for line in out.read_text().splitlines() if (r := json.loads(line))["type"] == "conversation"]
    assert [r["conversation_id"] for r in rows] == [mine]
    assert rows[0]["source"] == f"langgraph:{url}#{mine}"
    assert len(rows[0]["results"]["turn_relevancy"]["verdicts"]) == 2  # the two replies
    one = tmp_path / "one.jsonl"
    done = cli.run(["eval", "--langgraph-url", url, "--thread", other, "--thread", "no-such-thread", "-m", "turn-relevancy",
                    "--model", "openai:judge", "--base-url", judge.base_url, "--out", str(one), "--no-progress"],
                   env={**bare_env, "HOME": str(tmp_path)})
    assert done.returncode == 3, done.stdout + done.stderr  # one judged, one input error
    assert judged(one) == [other]
    assert "thread 'no-such-thread': the server refused it" in done.stderr  # not a UUID
    missing = "00000000-0000-4000-8000-000000000000"
    done = cli.run(["eval", "--langgraph-url", url, "--thread", missing, "--model", "openai:judge", "--base-url",
                    judge.base_url, "--out", str(tmp_path / "none.jsonl")], env={**bare_env, "HOME": str(tmp_path)})
    assert done.returncode == 3 and f"thread {missing!r}: the server has no such thread" in done.stderr, done.stderr
    assert "BlockingError" not in log.read_text()


def test_the_conversation_read_from_the_server_has_the_agent_s_tools_and_documents(server):
    from judgegraph.loaders import LoadedConversation
    from judgegraph.loaders.langgraph_server import load_server
    from tests.kit.agent import DOC

    url, _ = server
    tid = new_thread(url, "Weather in Paris?")
    (item,) = load_server(url, [tid])
    assert isinstance(item, LoadedConversation)
    turns = item.conversation.turns
    assert [t.role for t in turns] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [(c.name, c.output) for c in turns[1].tool_calls] == [("get_weather", "Sunny in Paris, 21C."),
                                                                  ("search_docs", DOC)]
    assert [n.context for n in turns[4].retrieval_context] == [DOC]
    assert item.conversation.metadata["langgraph_graph_id"] == "agent"


def test_watch_judges_each_new_thread_once_across_polls_and_restarts(server, judge, tmp_path, bare_env):
    url, log = server
    tag = {"team": "watch-test"}  # this test's threads only
    first = new_thread(url, "Weather in Paris?", metadata=tag)
    wait_idle(url, first, 1)
    out = tmp_path / "watch.jsonl"
    args = ["--langgraph-url", url, "--assistant", "agent", "--metadata", "team=watch-test", "--idle", "1",
            "-m", "turn-relevancy", "--model", "openai:judge", "--base-url", judge.base_url, "--out", str(out)]
    # two polls in one process: the second judges nothing again
    done = cli.run(["watch", *args, "--max-polls", "2", "--interval", "0.5"], env={**bare_env, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "poll 1: 1 thread judged" in done.stderr and "poll 2: 0 threads judged" in done.stderr
    assert judged(out) == [first]
    # a restart remembers (the state file beside --out); a new thread, once idle, is the only one judged
    busy = new_thread(url, "Weather?", metadata=tag)
    done = cli.run(["watch", *args, "--idle", "3600", "--once"], env={**bare_env, "HOME": str(tmp_path)})
    assert done.returncode == 0 and judged(out) == [first], done.stderr  # not idle for an hour: not yet
    wait_idle(url, busy, 1)
    done = cli.run(["watch", *args, "--once"], env={**bare_env, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert judged(out) == [first, busy]
    done = cli.run(["watch", *args, "--once"], env={**bare_env, "HOME": str(tmp_path)})
    assert "poll 1: 0 threads judged" in done.stderr and judged(out) == [first, busy]
    assert (tmp_path / "watch.jsonl.watched.sqlite").is_file()
    assert "BlockingError" not in log.read_text()
