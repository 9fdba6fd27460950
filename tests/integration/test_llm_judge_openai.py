"""The LLM judge through the real langchain-openai client, against a real HTTP
server on 127.0.0.1 that speaks the OpenAI chat completions API."""

import asyncio
import json
from pathlib import Path

import pytest
from langchain_openai import ChatOpenAI

from judgegraph.judges import resolve_judge
from judgegraph.metrics.relevancy import create_conversation_relevance_metric, create_turn_relevancy_metric
from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, error, structured, text

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
YES = structured({"reason": "It answers the question.", "verdict": "yes"})
NO = structured({"reason": "It is about Paris, not arithmetic.", "verdict": "no"})
MATH = {"id": "math", "turns": [
    {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 equals 4."},
    {"role": "user", "content": "What about 3+3?"}, {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "Can you solve 5+5?"}, {"role": "assistant", "content": "5+5 equals 10."},
]}


def reply_is(fragment):
    """Key a rule on the reply being judged (not on the whole prompt, where
    earlier replies appear as context)."""
    return lambda req: fragment in req.text.split("<reply_to_judge>")[-1]


def chat(server, **kw):
    return ChatOpenAI(model="gpt-4.1-mini", base_url=server.base_url, api_key="test-key", **kw)


def only(out):
    (res,) = out["results"].values()
    return res


def test_seed_example_end_to_end_over_http():
    with FakeOpenAIServer(ScriptedResponder([(reply_is("Paris"), NO)], default=YES)) as server:
        res = only(create_conversation_relevance_metric(model=chat(server), window_size=2, threshold=0.8).invoke({"conversation": MATH}))
        assert server.calls["/v1/chat/completions"] == 3
    assert res.score == pytest.approx(2 / 3) and res.passed is False
    assert res.judge == "llm:gpt-4.1-mini"
    assert res.usage.calls == 3 and res.usage.input_tokens > 100 and not res.usage.estimated


def test_malformed_reply_is_reasked_and_succeeds():
    responder = ScriptedResponder([(reply_is("Paris"), [text('{"reason": "cut off", "verdict": '), NO])], default=YES)
    with FakeOpenAIServer(responder) as server:
        res = only(create_turn_relevancy_metric(model=chat(server)).invoke({"conversation": MATH}))
        reask = [r for r in server.requests if "could not be used" in json.dumps(r.get("messages"))]
    assert [v.verdict for v in res.verdicts] == ["yes", "no", "yes"]
    assert res.verdicts[1].attempts == 2 and res.errors == []
    assert len(reask) == 1 and reask[0]["messages"][1]["role"] == "assistant"


def test_reply_that_never_becomes_valid_is_a_counted_judge_error():
    responder = ScriptedResponder([(reply_is("Paris"), text("I think it is fine."))], default=YES)
    with FakeOpenAIServer(responder) as server:
        res = only(create_turn_relevancy_metric(model=resolve_judge(chat(server), max_tries=3)).invoke({"conversation": MATH}))
        assert server.calls["/v1/chat/completions"] == 2 + 3
    assert res.verdicts[1].verdict is None and res.verdicts[1].attempts == 3
    assert len(res.errors) == 1 and "invalid output after 3 tries" in res.errors[0].message
    assert res.score == 1.0 and res.details["judged"] == 2  # the error is not folded into the score


def test_429_is_retried_by_the_client_and_succeeds():
    responder = ScriptedResponder([(reply_is("Paris"), [error(429, retry_after=0), NO])], default=YES)
    with FakeOpenAIServer(responder) as server:
        res = only(create_turn_relevancy_metric(model=chat(server, max_retries=2)).invoke({"conversation": MATH}))
        assert server.calls["/v1/chat/completions"] == 4
    assert [v.verdict for v in res.verdicts] == ["yes", "no", "yes"] and res.errors == []


def test_429_that_never_clears_is_a_judge_error_not_a_crash():
    responder = ScriptedResponder([(reply_is("Paris"), error(429, retry_after=0))], default=YES)
    with FakeOpenAIServer(responder) as server:
        res = only(create_turn_relevancy_metric(model=chat(server, max_retries=1)).invoke({"conversation": MATH}))
    assert "RateLimitError" in res.verdicts[1].error and "429" in res.verdicts[1].error
    assert res.status == "passed" and len(res.errors) == 1


def test_slow_reply_times_out_into_a_judge_error():
    responder = ScriptedResponder([(reply_is("Paris"), structured({"reason": "late", "verdict": "no"}, delay=2.0))], default=YES)
    with FakeOpenAIServer(responder) as server:
        res = only(create_turn_relevancy_metric(model=chat(server, timeout=0.5, max_retries=0)).invoke({"conversation": MATH}))
    assert "Timeout" in res.verdicts[1].error
    assert [v.verdict for v in res.verdicts] == ["yes", None, "yes"]


def test_async_path_and_function_calling_method():
    responder = ScriptedResponder([(reply_is("Paris"), NO)], default=YES)
    with FakeOpenAIServer(responder) as server:
        graph = create_turn_relevancy_metric(model=resolve_judge(chat(server), method="function_calling"))
        outs = asyncio.run(graph.abatch([{"conversation": {**MATH, "id": str(i)}} for i in range(3)]))
        assert all("tools" in r for r in server.requests)
    assert [only(o).score for o in outs] == [pytest.approx(2 / 3)] * 3


def test_cli_with_model_and_base_url(tmp_path, bare_env):
    responder = ScriptedResponder([(reply_is("Paris"), NO)], default=YES)
    out = tmp_path / "results.jsonl"
    with FakeOpenAIServer(responder) as server:
        proc = cli.run(["eval", str(ROOT / "examples/promptfoo_tests.yaml"),
                        "--model", "openai:judge-model", "--base-url", server.base_url, "--out", str(out), "--no-progress"], timeout=120, env={**bare_env, "HOME": str(tmp_path)})
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the 2+2 conversation fails its 0.8 threshold
    assert "judge: llm:judge-model" in proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    scores = {r["conversation_id"]: next(iter(r["results"].values()))["score"] for r in records if r["type"] == "conversation"}
    assert pytest.approx(2 / 3) in scores.values()
