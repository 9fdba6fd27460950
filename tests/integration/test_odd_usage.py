"""A reply's usage block never ends a run nor costs its verdict (issue 21, C.3):
odd usage numbers sent by the loopback OpenAI-compatible server."""

import json
import os

import pytest

from judgegraph.cost.pricing import Prices
from judgegraph.data.results import Usage
from judgegraph.judges import JudgeRequest, resolve_judge
from judgegraph.judges.llm import count_tokens
from judgegraph.metrics.relevancy import TurnVerdict
from tests.kit import cli
from tests.kit.openai_server import ChatRequest, FakeOpenAIServer, Reply, error, structured

pytestmark = pytest.mark.integration

VERDICT = {"reason": "It answers the question.", "verdict": "yes"}


def completion(usage: object) -> Reply:
    """A whole chat completion sent verbatim (status 200), with ``usage`` as given."""
    return error(200, body={
        "id": "chatcmpl-odd", "object": "chat.completion", "created": 0, "model": "judge-model",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": json.dumps(VERDICT)}}],
        "usage": usage})


def request() -> JudgeRequest:
    return JudgeRequest(task="turn_relevance", step="turn_relevancy/judge_turn", schema=TurnVerdict,
                        values={"rubric": "r", "system": "(none)", "context": "(none)", "user_message": "hi?",
                                "reply": "hello."})


ODD = {
    "beyond a float": {"prompt_tokens": 10**309, "completion_tokens": 5, "total_tokens": 10**309 + 5},
    "absurd": {"prompt_tokens": 10**12, "completion_tokens": 5, "total_tokens": 10**12 + 5},
    "fractional": {"prompt_tokens": 12.5, "completion_tokens": 5, "total_tokens": 17.5},
    "negative": {"prompt_tokens": -100, "completion_tokens": 5, "total_tokens": -95},
    "negative output": {"prompt_tokens": 100, "completion_tokens": -5, "total_tokens": 95},
    "huge float": {"prompt_tokens": 1e300, "completion_tokens": 5, "total_tokens": 1e300},
    "a word": {"prompt_tokens": "many", "completion_tokens": 5, "total_tokens": 6},
    "a list": {"prompt_tokens": [1], "completion_tokens": {}, "total_tokens": 6},
}


@pytest.mark.parametrize("usage", ODD.values(), ids=ODD.keys())
def test_odd_usage_keeps_the_verdict_and_is_counted_locally(usage):
    with FakeOpenAIServer(lambda r: completion(usage)) as server:
        out = resolve_judge("judge-model", base_url=server.base_url, cache=False).run(request())
    assert out.ok and out.value.verdict == "yes", out.error
    u = out.usage
    assert u.calls == 1 and u.estimated
    assert u.input_tokens == count_tokens(request().rendered) and u.output_tokens == count_tokens(json.dumps(VERDICT))
    assert Prices(0.4, 1.6, "test").cost(u) > 0


def test_a_whole_float_count_is_taken_as_reported():
    usage = {"prompt_tokens": 120.0, "completion_tokens": 7.0, "total_tokens": 127.0}
    with FakeOpenAIServer(lambda r: completion(usage)) as server:
        out = resolve_judge("judge-model", base_url=server.base_url, cache=False).run(request())
    assert out.ok and out.usage == Usage(calls=1, input_tokens=120, output_tokens=7)


@pytest.mark.parametrize("usage", [Usage(calls=1, input_tokens=10**309, output_tokens=1),
                                   Usage(calls=1, input_tokens=-5, output_tokens=1)], ids=["huge", "negative"])
def test_pricing_never_raises_nor_gives_a_negative_cost(usage):
    assert Prices(0.4, 1.6, "test").cost(usage) is None


def test_one_absurd_usage_block_among_40_conversations_loses_nothing(tmp_path, bare_env):
    path = tmp_path / "chats.jsonl"
    with path.open("w") as f:
        for i in range(40):
            f.write(json.dumps({"id": f"c{i}", "turns": [{"role": "user", "content": f"question {i}?"},
                                                          {"role": "assistant", "content": f"answer {i}."}]}) + "\n")
    absurd = {"prompt_tokens": 10**309, "completion_tokens": 5, "total_tokens": 10**309 + 5}

    def responder(req: ChatRequest) -> Reply:
        return completion(absurd) if "question 17?" in req.text else structured(VERDICT)

    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(responder) as server:
        proc = cli.run(["eval", str(path), "--model", "gpt-4.1-mini",
                        "--base-url", server.base_url, "--no-cache", "--out", str(out), "--no-progress"], timeout=180,
                       env={**bare_env, "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    convs = [r for r in lines if r["type"] == "conversation"]
    assert len(convs) == 40 and all(res["status"] == "passed" for r in convs for res in r["results"].values())
    odd = next(r for r in convs if r["conversation_id"] == "c17")
    assert odd["cost_usd"] is not None and 0 < odd["cost_usd"] < 0.01
    attempt = odd["results"]["turn_relevancy"]["verdicts"][0]["transcript"][0]
    assert attempt["usage"]["estimated"] is True and attempt["usage"]["input_tokens"] < 10_000
    assert "(estimated)" in " ".join(proc.stdout.split())
    assert os.path.getsize(out) < 1_000_000
