"""Every judge runs under the real ``langgraph dev`` server (blocking calls in async paths are errors there,
blockbuster): through ``langgraph_sdk`` with run-time settings in the run's context, a re-asked judge reply
from the loopback OpenAI server, streaming, and an interrupt-and-resume review."""

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("langgraph_api", reason="needs the studio extra: pip install 'judgegraph[studio]'")
from langgraph_sdk import get_client

from tests.kit.langgraph_dev import ServerFailed, langgraph_bin, langgraph_dev
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured, text

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GRAPHS = sorted(json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))["graphs"])
GUIDELINES = "Answer the question asked."  # conversational_guidelines needs its guidelines (JudgeSettings.guidelines)
RUN_TIMEOUT = 60  # seconds per run
YES = structured({"reason": "It answers the question.", "verdict": "yes"})
NO = structured({"reason": "It is about Paris, not arithmetic.", "verdict": "no"})
MATH = {"id": "math", "turns": [
    {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 equals 4."},
    {"role": "user", "content": "What about 3+3?"}, {"role": "assistant", "content": "The capital of France is Paris."},
]}


def reply_is(fragment):
    return lambda req: fragment in req.text.split("<reply_to_judge>")[-1]


@pytest.fixture(scope="module")
def openai_server():
    # the Paris reply is judged twice: a malformed first reply, re-asked, then a valid "no"
    responder = ScriptedResponder([(reply_is("Paris"), [text("this is not JSON"), NO])], default=YES)
    with FakeOpenAIServer(responder) as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if langgraph_bin() is None:
        pytest.skip("the langgraph CLI is not installed (pip install 'judgegraph[studio]')")
    work = tmp_path_factory.mktemp("langgraph_dev")  # the server's .langgraph_api folder goes here
    # the repository's graphs with absolute paths (langgraph dev reads them from its working folder)
    spec = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))
    graphs = {k: str(ROOT / v.split(":")[0]) + ":" + v.split(":")[1] for k, v in spec["graphs"].items()}
    try:
        with langgraph_dev(graphs, work, [str(ROOT)]) as served:
            yield served
    except ServerFailed as exc:
        pytest.fail(str(exc))


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, RUN_TIMEOUT))


def check_log(log):
    text = log.read_text()
    assert "BlockingError" not in text, text[-3000:]


def test_every_graph_is_served(server):
    url, log = server

    async def go():
        client = get_client(url=url)
        found = await client.assistants.search(limit=50)
        names = {a["graph_id"] for a in found}
        turn = next(a for a in found if a["graph_id"] == "turn_relevancy")
        schemas = await client.assistants.get_schemas(turn["assistant_id"])
        return names, schemas

    names, schemas = run(go())
    assert set(GRAPHS) <= names
    context = schemas.get("context_schema") or schemas.get("config_schema") or {}
    assert {"model", "base_url", "threshold", "window_size", "review"} <= set(context.get("properties", {}))


def offline(graph):
    """Whether the offline judge answers every task of the graph's metric (the report: the metrics it answers)."""
    from judgegraph.judges import resolve_judge
    from judgegraph.metrics import registry

    return graph == "report" or all(resolve_judge().supports(t) for t in registry()[graph].tasks)


@pytest.mark.parametrize("graph", GRAPHS)
def test_every_graph_runs_offline_or_with_an_llm_judge(server, graph):
    """Each graph langgraph.json serves (every metric of the registry and the report): with the offline judge when
    it answers the metric, else with an LLM judge on a loopback server."""
    url, log = server
    from tests.kit.openai_server import schema_responder

    async def go(context):
        client = get_client(url=url)
        thread = await client.threads.create()
        return await client.runs.wait(thread["thread_id"], graph, input={"conversation": MATH},
                                      context={"guidelines": GUIDELINES, **context})

    if offline(graph):
        out, judge = run(go({})), "offline"
    else:
        with FakeOpenAIServer(schema_responder) as llm:
            out, judge = run(go({"model": "gpt-4.1-mini", "base_url": llm.base_url})), "llm:gpt-4.1-mini"
    assert out["results"], out
    assert graph == "report" or set(out["results"]) == {graph}
    for name, res in out["results"].items():
        assert res["status"] in ("passed", "failed", "not_applicable"), (name, res)
        assert res["judge"].startswith(judge), (name, res)
    check_log(log)


def test_llm_judge_with_a_re_asked_reply_and_run_time_settings(server, openai_server):
    url, log = server
    before = openai_server.calls["/v1/chat/completions"]

    async def go():
        client = get_client(url=url)
        thread = await client.threads.create()
        out = await client.runs.wait(
            thread["thread_id"], "turn_relevancy", input={"conversation": MATH},
            context={"model": "gpt-4.1-mini", "base_url": openai_server.base_url, "threshold": 0.9})
        return out, len(await client.runs.list(thread["thread_id"]))

    out, runs = run(go())
    res = out["results"]["turn_relevancy"]
    assert res["judge"] == "llm:gpt-4.1-mini" and res["threshold"] == 0.9
    assert [v["verdict"] for v in res["verdicts"]] == ["yes", "no"]
    paris = res["verdicts"][1]
    if runs == 1:
        assert paris["attempts"] == 2  # re-asked after the malformed reply
    else:  # the SDK sent the run again (a busy machine): the second run's verdict is the judge cache's answer
        assert paris["attempts"] == 0 and [a["cached"] for a in paris["transcript"]] == [True]
    assert res["score"] == 0.5 and res["status"] == "failed" and not res["errors"]
    assert openai_server.calls["/v1/chat/completions"] - before == 3
    check_log(log)


def test_stream_shows_the_metric_s_nodes(server):
    url, log = server

    async def go():
        client = get_client(url=url)
        thread = await client.threads.create()
        seen = []
        async for part in client.runs.stream(thread["thread_id"], "conversation_relevance",
                                             input={"conversation": MATH}, context={"window_size": 1},
                                             stream_mode="updates", stream_subgraphs=True):
            seen.append((part.event, part.data))
        return seen

    seen = run(go())
    nodes = {k for event, data in seen if event.startswith("updates") and isinstance(data, dict) for k in data}
    assert {"window_turns", "judge_turn", "reduce_score", "conversation_relevance"} <= nodes, nodes
    final = [d for e, d in seen if e.startswith("updates") and isinstance(d, dict) and "conversation_relevance" in d]
    res = final[-1]["conversation_relevance"]["results"]["conversation_relevance"]
    assert res["details"]["window_size"] == 1
    check_log(log)


def test_review_interrupts_and_a_resume_overrides_a_verdict(server):
    url, log = server

    async def go():
        client = get_client(url=url)
        thread = await client.threads.create()
        tid = thread["thread_id"]
        first = await client.runs.wait(tid, "turn_relevancy", input={"conversation": MATH},
                                       context={"review": True})
        state = await client.threads.get_state(tid)
        second = await client.runs.wait(
            tid, "turn_relevancy", command={"resume": {"1": {"verdict": "no", "reason": "Paris is off topic."}}},
            context={"review": True})
        return first, state, second

    first, state, second = run(go())
    interrupts = [i for task in state["tasks"] for i in task.get("interrupts", [])]
    assert interrupts and [v["id"] for v in interrupts[0]["value"]["verdicts"]] == ["0", "1"]
    assert not first.get("results"), first
    res = second["results"]["turn_relevancy"]
    assert res["verdicts"][1]["verdict"] == "no" and res["verdicts"][1]["review"]["by"] == "human"
    assert res["verdicts"][1]["reason"] == "Paris is off topic."
    check_log(log)


def test_report_with_an_llm_judge_runs_every_metric_and_the_session_judges(server):
    url, log = server
    from tests.kit.openai_server import schema_responder

    async def go(base_url):
        client = get_client(url=url)
        thread = await client.threads.create()
        return await client.runs.wait(thread["thread_id"], "report", input={"conversation": MATH},
                                      context={"model": "gpt-4.1-mini", "base_url": base_url, "guidelines": GUIDELINES})

    with FakeOpenAIServer(schema_responder) as llm:
        out = run(go(llm.base_url))
        assert llm.calls["/v1/chat/completions"] > 5
    assert set(out["results"]) == set(GRAPHS) - {"report"}  # every metric of the registry
    for name, res in out["results"].items():
        assert res["judge"] == "llm:gpt-4.1-mini", (name, res["judge"])
    check_log(log)
