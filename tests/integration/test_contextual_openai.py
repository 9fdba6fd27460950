"""Turn contextual relevancy through the real langchain-openai client against a
real HTTP server on 127.0.0.1 speaking the OpenAI chat completions API:
json_schema and function-calling structured output, malformed extraction
replies re-asked, the verify node over HTTP."""

import asyncio
import json

import pytest
from langchain_openai import ChatOpenAI

from judgegraph.core.statements import EXTRACT_STEP
from judgegraph.judges import resolve_judge
from judgegraph.metrics.contextual import create_turn_contextual_relevancy_metric
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, error, structured, text

pytestmark = pytest.mark.integration

KEY = "turn_contextual_relevancy"
RETURNS = "Unworn shoes can be returned within 30 days. Returns need the original box."
HOURS = "The Berlin store opens at 9 am."
CONV = {"id": "rag", "turns": [
    {"role": "user", "content": "Can I return running shoes that don't fit?"},
    {"role": "assistant", "content": "Yes, within 30 days.", "retrieval_context": [RETURNS, {"context": HOURS, "source": "berlin.md"}]},
    {"role": "user", "content": "Thanks!"},
    {"role": "assistant", "content": "You're welcome."},
]}
EXTRACTED = {"nodes": [
    {"node": 1, "statements": ["Unworn shoes can be returned within 30 days.", "Returns need the original box."]},
    {"node": 2, "statements": ["The Berlin store opens at 9 am."]},
]}
JUDGED = {"verdicts": [
    {"statement": 1, "reason": "Answers the return question.", "verdict": "yes"},
    {"statement": 2, "reason": "A condition of the return.", "verdict": "yes"},
    {"statement": 3, "reason": "Store hours, not returns.", "verdict": "no"},
]}


def extraction(req):
    return "<retrieved_nodes>" in req.text


def judgement(req):
    return "<statements>" in req.text


def second_look(req):
    return "<statements_marked_irrelevant>" in req.text


def chat(server, **kw):
    return ChatOpenAI(model="gpt-4.1-mini", base_url=server.base_url, api_key="test-key", **kw)


def test_malformed_extraction_is_reasked_over_http_with_json_schema():
    responder = ScriptedResponder([
        (extraction, [text('{"nodes": [{"node": 1, "statements": ["Unworn'), structured(EXTRACTED)]),
        (judgement, structured(JUDGED)),
    ])
    with FakeOpenAIServer(responder) as server:
        res = create_turn_contextual_relevancy_metric(model=chat(server)).invoke({"conversation": CONV})["results"][KEY]
        requests = list(server.requests)
        assert server.calls["/v1/chat/completions"] == 3
    assert res.score == pytest.approx(2 / 3) and res.status == "passed" and res.errors == []
    assert [t["status"] for t in res.details["turns"]] == ["scored", "no context"]
    assert res.details["calls_by_step"] == {"extract_statements": 2, "judge_statements": 1}
    # the malformed reply comes back as a message (validated by the judge), with the server's token counts
    assert res.usage.calls == 3 and res.usage.input_tokens > 200 and not res.usage.estimated
    first = requests[0]
    assert first["response_format"]["type"] == "json_schema"
    assert "similarity" not in json.dumps(requests[-1]["response_format"])  # offline-only field hidden from the LLM
    reask = [r for r in requests if "could not be used" in json.dumps(r["messages"])]
    assert len(reask) == 1 and reask[0]["messages"][1]["role"] == "assistant"
    assert res.verdicts[2].source == "berlin.md" and res.verdicts[2].verdict == "no"


def test_an_extraction_missing_a_node_is_reasked_with_what_is_missing():
    short = {"nodes": [EXTRACTED["nodes"][0]]}
    responder = ScriptedResponder([(extraction, [structured(short), structured(EXTRACTED)]),
                                   (judgement, structured(JUDGED))])
    with FakeOpenAIServer(responder) as server:
        res = create_turn_contextual_relevancy_metric(model=chat(server)).invoke({"conversation": CONV})["results"][KEY]
        reask = [r for r in server.requests if "could not be used" in json.dumps(r["messages"])]
    assert res.score == pytest.approx(2 / 3) and res.errors == []
    assert len(reask) == 1 and "node(s) 2 missing" in reask[0]["messages"][-1]["content"]


def test_extraction_that_never_becomes_valid_is_a_counted_judge_error():
    responder = ScriptedResponder([(extraction, text("Sorry, I cannot do that.")), (judgement, structured(JUDGED))])
    with FakeOpenAIServer(responder) as server:
        res = create_turn_contextual_relevancy_metric(model=resolve_judge(chat(server), max_tries=2)).invoke(
            {"conversation": CONV})["results"][KEY]
        assert server.calls["/v1/chat/completions"] == 2  # no judgement: nothing was extracted
    assert res.status == "error" and res.score is None
    (err,) = res.errors
    assert err.step == EXTRACT_STEP and err.where == "turn 2" and "invalid output after 2 tries" in err.message


def test_function_calling_async_and_verify_over_http():
    responder = ScriptedResponder([
        (extraction, structured(EXTRACTED)),
        (judgement, structured(JUDGED)),
        (second_look, [error(500), structured({"verdicts": [
            {"statement": 1, "reason": "Customers can return at the Berlin store.", "verdict": "yes"}]})]),
    ])
    with FakeOpenAIServer(responder) as server:
        graph = create_turn_contextual_relevancy_metric(model=resolve_judge(chat(server, max_retries=1), method="function_calling"), verify=True)
        out = asyncio.run(graph.ainvoke({"conversation": CONV}))  # one event loop for this model
        assert all("tools" in r for r in server.requests)
        assert server.calls["/v1/chat/completions"] == 4  # the 500 was retried by the client
    res = out["results"][KEY]
    assert res.score == 1.0 and res.details["flipped"] == 1 and res.errors == []
    flipped = res.verdicts[2]
    assert flipped.flipped and flipped.first_reason == "Store hours, not returns."
