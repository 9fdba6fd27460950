"""Session judges through the real langchain-openai client, against the loopback
OpenAI-compatible server (no key, no network beyond 127.0.0.1)."""

import asyncio
import importlib.util
import json
import re
from pathlib import Path

import pytest
from langchain_openai import ChatOpenAI

from judgegraph.metrics.session import (
    create_conversation_completeness_metric,
    create_knowledge_retention_metric,
    create_role_adherence_metric,
    create_user_frustration_metric,
)
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured, text

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

SHOP = {"id": "shop", "chatbot_role": "Support assistant for Acme's online shoe shop.", "turns": [
    {"role": "user", "content": "My order 4417 hasn't arrived. Where is it?"},  # 1
    {"role": "assistant", "content": "Order 4417 left our warehouse on Monday and arrives tomorrow."},  # 2
    {"role": "user", "content": "OK. Can you also write me a poem about autumn?"},  # 3
    {"role": "assistant", "content": "Leaves of amber drift and fall, autumn whispers over all."},  # 4
    {"role": "user", "content": "Nice. And what's your return window?"},  # 5
    {"role": "assistant", "content": "What is your order number?"},  # 6
]}


def chat(server, **kw):
    return ChatOpenAI(model="gpt-4.1-mini", base_url=server.base_url, api_key="test-key", **kw)


def only(out):
    (res,) = out["results"].values()
    return res


def has(*parts):
    return lambda req: all(p in req.text for p in parts)


def test_completeness_over_http_with_a_malformed_reply_reasked():
    goals = structured({"goals": [
        {"request": "Where is order 4417?", "asked_in_turns": [1]},
        {"request": "Write a poem about autumn.", "asked_in_turns": [3]},
        {"request": "What is the return window?", "asked_in_turns": [5]},
    ]})
    responder = ScriptedResponder([
        ("list what the user wanted", goals),
        (has("<request>\nWhere is order"), structured({"reason": "Turn 2 answers.", "answered_in_turns": [2], "verdict": "yes"})),
        (has("<request>\nWrite a poem"), [
            text('{"reason": "Turn 4 writes one", "answered_in_turns": [4], "verdict": "certainly"}'),
            structured({"reason": "Turn 4 writes one.", "answered_in_turns": [4], "verdict": "yes"}),
        ]),
        (has("<request>\nWhat is the return"), structured({"reason": "Turn 6 asks back instead.", "answered_in_turns": [], "verdict": "no"})),
    ])
    with FakeOpenAIServer(responder) as server:
        res = only(create_conversation_completeness_metric(model=chat(server)).invoke({"conversation": SHOP}))
        bodies = server.chat_requests
    assert len(bodies) == 1 + 3 + 1  # extraction, one call per request, one re-ask
    reask = [b for b in bodies if "could not be used" in json.dumps(b["messages"])]
    assert len(reask) == 1 and "verdict" in reask[0]["messages"][-1]["content"]
    assert (res.value, res.score, res.passed) == ("no", pytest.approx(2 / 3), True)
    assert res.verdicts[1].attempts == 2 and res.errors == []
    assert res.verdicts[2].turns == [4] and "turn 5" in res.reason
    assert res.usage.calls == 5 and res.judge == "llm:gpt-4.1-mini"
    assert not res.verdicts[0].usage.estimated and not res.verdicts[1].usage.estimated  # server counts, re-ask included


def test_role_adherence_over_http_in_batches():
    responder = ScriptedResponder([
        (has("<turns_to_judge>\n2, 4\n"), structured({"verdicts": [
            {"turn": 2, "reason": "Tracks the order.", "verdict": "yes"},
            {"turn": 4, "reason": "Writes poetry, outside shoe support.", "verdict": "no"}]})),
        (has("<turns_to_judge>\n6\n"), structured({"verdicts": [{"turn": 6, "reason": "Support question.", "verdict": "yes"}]})),
    ])
    with FakeOpenAIServer(responder) as server:
        res = only(create_role_adherence_metric(model=chat(server), batch_size=2).invoke({"conversation": SHOP}))
        assert server.calls["/v1/chat/completions"] == 2
    assert (res.value, res.score) == ("no", pytest.approx(2 / 3))
    assert res.details["out_of_role_turns"] == [3] and 'turn 4 "Leaves of amber' in res.reason


def test_validation_error_raised_inside_the_client_is_reasked():
    """OpenAI's json_schema path validates inside the client: our consistency rule
    ('no' needs a lapse) comes back as an exception and is re-asked."""
    responder = ScriptedResponder([
        ("list what the user told", structured({"facts": [{"turn": 1, "fact": "The user's order number is 4417."}]})),
        (has("<judged_turn>\n6\n"), [
            structured({"reason": "Asks again.", "lapses": [], "verdict": "no"}),
            structured({"reason": "Turn 6 asks for the order number given in turn 1.", "lapses": [
                {"fact": "The user's order number is 4417.", "stated_in_turn": 1, "kind": "forgotten"}], "verdict": "no"}),
        ]),
    ], default=structured({"reason": "Consistent.", "lapses": [], "verdict": "yes"}))
    with FakeOpenAIServer(responder) as server:
        res = only(create_knowledge_retention_metric(model=chat(server)).invoke({"conversation": SHOP}))
        assert server.calls["/v1/chat/completions"] == 1 + 3 + 1
    bad = res.verdicts[2]
    assert (bad.turn, bad.verdict, bad.attempts) == (5, "no", 2)
    assert bad.lapses[0].stated_in == 0 and bad.lapses[0].kind == "forgotten"
    assert (res.value, res.score) == ("no", pytest.approx(2 / 3))


def test_frustration_async_path():
    responder = ScriptedResponder([("became frustrated", structured(
        {"reason": "No sign of frustration.", "frustrated_turns": [], "resolved_by_turns": [], "verdict": "none"}))])
    with FakeOpenAIServer(responder) as server:
        graph = create_user_frustration_metric(model=chat(server))
        outs = asyncio.run(graph.abatch([{"conversation": {**SHOP, "id": str(i)}} for i in range(3)]))
        assert server.calls["/v1/chat/completions"] == 1  # identical requests are made once (judge cache)
    assert [only(o).value for o in outs] == ["none"] * 3


def test_example_script_runs_with_canned_answers(capsys):
    """examples/session_judges.py in this process (its imports are already loaded)."""
    spec = importlib.util.spec_from_file_location("session_judges_example", ROOT / "examples/session_judges.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main([]) == 0  # 0: every judgement was made, no judge error
    out = capsys.readouterr().out
    assert "CANNED ANSWERS" in out
    assert "total: 50 judge calls for 4 conversations x 5 judges" in out
    assert re.search(r"refund-runaround +failed +value=unresolved +score=0.00", out)
    assert re.search(r"bank-poem +passed +value=no +score=0.67", out) and 'Out of role: turn 4 "Miso naps' in out
