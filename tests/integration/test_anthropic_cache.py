"""Anthropic's ``cache_control`` through a REAL ``langchain_anthropic.ChatAnthropic`` against the loopback
Anthropic-compatible server (tests.kit.anthropic_server; docs/cost_cache.md): the stable prefix of each judge
prompt is marked, the verdicts are parsed, Anthropic's cache reads reach ``Usage.cached_input_tokens`` and
the cost prices them at the cached price. No API key (a dummy one) and no internet."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from judgegraph.judges.llm import LLMJudge
from judgegraph.judges.scripted import ScriptedRequest
from judgegraph.metrics import get_metric
from judgegraph.metrics.relevancy import TurnVerdict
from judgegraph.pricing import prices_for
from judgegraph.results import Usage
from tests.kit.anthropic_server import AnthropicRequest, FakeAnthropicServer
from tests.kit.openai_server import FakeOpenAIServer, structured
from tests.unit.metric_cases import CASES, CONVERSATION, IDS, answer

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")]


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    """Every judgement reaches the server (the judge's disk cache would answer a re-run)."""
    monkeypatch.setenv("JUDGEGRAPH_JUDGE_CACHE", "off")

anthropic = pytest.importorskip("langchain_anthropic")


def long_conversation(exchanges: int = 5) -> dict:
    """Replies of ~1,200 characters, so the stable part of later windows passes Anthropic's 1,024 tokens."""
    turns: list[dict[str, str]] = [{"role": "system", "content": "You are the support assistant of a shop."}]
    for i in range(exchanges):
        turns.append({"role": "user", "content": f"When does part {i} of my order ship?"})
        body = " ".join(f"part{i}-word{k}" for k in range(120))
        turns.append({"role": "assistant", "content": f"Part {i} ships soon. {body}"})
    return {"id": "long", "turns": turns}


def claude(server: FakeAnthropicServer) -> object:
    return anthropic.ChatAnthropic(model="claude-sonnet-4-5", base_url=server.base_url, api_key="dummy-key",
                                   temperature=0, max_retries=0)


def test_turn_relevancy_marks_the_stable_prefix_and_reads_cached_tokens_into_usage_and_cost():
    conversation = long_conversation()
    with FakeAnthropicServer(lambda request: {"reason": "It answers.", "verdict": "yes"}) as server:
        model = claude(server)
        runs = []
        for _ in range(2):  # a re-run within the cache's five minutes (the judge's own cache off)
            graph = get_metric("turn_relevancy").factory(model=model)
            runs.append(graph.invoke({"conversation": conversation})["results"]["turn_relevancy"])
    first, second = runs
    assert [v.verdict for v in first.verdicts] == ["yes"] * 5 and first.score == 1.0  # parsed from tool_use
    assert [v.verdict for v in second.verdicts] == ["yes"] * 5
    # on the wire: the prompt as two text blocks, cache_control on the stable block only
    assert len(server.requests) == 10
    rendered = sorted(v.transcript[0].messages[0]["content"] for v in [*first.verdicts, *second.verdicts])
    wire = []
    for body in server.requests:  # in arrival order (windows are judged concurrently)
        assert body["tools"][0]["name"] == "TurnVerdict" and "cache_control" not in json.dumps(body["tools"])
        assert "system" not in body
        (message,) = body["messages"]
        stable, changing = message["content"]
        assert stable["cache_control"] == {"type": "ephemeral"} and "cache_control" not in changing
        assert changing["text"].startswith("<reply_to_judge>\n")  # the last section: what this call alone judges
        assert stable["text"].startswith("You are judging one reply")
        wire.append(stable["text"] + changing["text"])
    assert sorted(wire) == rendered  # the text sent is the prompt as rendered, cut in two
    assert server.headers[0]["authorization"] == "Bearer dummy-key" or server.headers[0].get("x-api-key")
    # the first run writes the long prefixes (Anthropic's minimum: short ones are not cached), the re-run reads them
    assert first.usage.cached_input_tokens == 0
    read = [v.usage.cached_input_tokens for v in second.verdicts]
    assert read[0] == 0 and all(n > 1024 for n in read[2:])  # window 1's stable part is under the minimum
    assert second.usage.cached_input_tokens == sum(read) > 0
    assert second.usage.input_tokens == first.usage.input_tokens  # input_tokens includes cache reads and writes
    # the cost: cached tokens at claude-sonnet-4-5's cached price, a tenth of the input price
    prices = prices_for("claude-sonnet-4-5")
    assert prices is not None and prices.cached_input == pytest.approx(prices.input / 10)
    cost = prices.cost(second.usage)
    uncached = second.usage.input_tokens - second.usage.cached_input_tokens
    expected = (uncached * prices.input + second.usage.cached_input_tokens * prices.cached_input
                + second.usage.output_tokens * prices.output) / 1e6
    assert cost == pytest.approx(expected)
    assert cost < prices.cost(Usage(calls=5, input_tokens=second.usage.input_tokens,
                                    output_tokens=second.usage.output_tokens))


def test_a_reask_reads_the_prefix_its_first_ask_wrote():
    """The re-ask repeats the first message, its cache mark included: the stable prefix is read, not resent."""
    def reply(request: AnthropicRequest) -> dict[str, str]:
        first_ask = len(request.body["messages"]) == 1
        if first_ask and "Part 2 ships soon" in request.text:  # the last window's first ask: no verdict in it
            return {"reason": "No verdict."}
        return {"reason": "It answers.", "verdict": "yes"}

    with FakeAnthropicServer(reply) as server:
        graph = get_metric("turn_relevancy").factory(model=claude(server))
        result = graph.invoke({"conversation": long_conversation(3)})["results"]["turn_relevancy"]
    last = result.verdicts[-1]
    assert last.verdict == "yes" and len(last.transcript) == 2
    assert last.transcript[0].usage.cached_input_tokens == 0 and last.transcript[1].usage.cached_input_tokens > 1024
    reask = server.requests[-1]["messages"]
    assert [m["role"] for m in reask] == ["user", "assistant", "user"]
    assert reask[0]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_an_openai_request_is_byte_identical_to_before():
    """Other providers get the prompt as one string, as before the cache hints: the body the judge sends is
    the body of the same runnable invoked with ``HumanMessage(rendered)`` (the previous code)."""
    with FakeOpenAIServer(lambda req: structured({"reason": "ok", "verdict": "yes"})) as server:
        judge = LLMJudge("openai:gpt-4.1-mini", base_url=server.base_url, api_key="k")
        graph = get_metric("turn_relevancy").factory(model=judge)
        result = graph.invoke({"conversation": long_conversation(2)})["results"]["turn_relevancy"]
        rendered = result.verdicts[-1].transcript[0].messages[0]["content"]
        judge._structured(TurnVerdict).invoke([HumanMessage(rendered)])
        sent = server.chat_requests
    (judged,) = [body for body in sent[:-1] if body["messages"][-1]["content"] == rendered]  # windows run concurrently
    assert json.dumps(judged) == json.dumps(sent[-1])
    assert sent[-1]["messages"] == [{"role": "user", "content": rendered}]


def test_the_guidelines_of_one_conversation_read_the_conversation_from_the_cache():
    """Within one run: every guideline's call shares the instructions and the whole conversation (the guideline
    comes last), so once one call wrote that prefix the others read it. (The server writes a prefix at once;
    Anthropic makes it readable once the first reply has begun, so calls sent together may all write it.)"""
    guidelines = ["Answer in one sentence.", "Be polite.", "Name the part number.", "Do not promise dates."]

    def reply(request: AnthropicRequest) -> dict[str, str]:
        return {"reason": "Followed.", "violating_turns": [], "verdict": "yes"}

    with FakeAnthropicServer(reply) as server:
        graph = get_metric("conversational_guidelines").factory(model=claude(server), guidelines=guidelines)
        result = graph.invoke({"conversation": long_conversation(4)})["results"]["conversational_guidelines"]
    assert len(server.requests) == 4 and all(v.verdict == "yes" for v in result.verdicts)
    stable = {body["messages"][0]["content"][0]["text"] for body in server.requests}
    assert len(stable) == 1  # one stable block for the four calls: the guideline is in the other block
    read = sorted(v.usage.cached_input_tokens for v in result.verdicts)
    assert read[0] == 0 and read[1] == read[2] == read[3] > 1024  # the first call writes, the three others read
    assert result.usage.cached_input_tokens == 3 * read[3]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_metric_runs_through_chat_anthropic_with_its_prompts_cut(case):
    """The capability kit's universal answerer over HTTP: every metric's requests, sent as marked blocks, are
    answered and parsed into a result without a judge error."""
    answerer = answer("yes")

    def reply(request: AnthropicRequest) -> dict[str, Any]:
        tool = (request.body.get("tools") or [{}])[0]
        return answerer(ScriptedRequest(text=request.text, messages=[], schema=tool))

    with FakeAnthropicServer(reply) as server:
        result = case.build(claude(server)).invoke({"conversation": CONVERSATION})["results"][case.name]
    assert server.requests and not result.errors, result.errors
    assert result.status in ("passed", "failed", "not_applicable") and result.usage.calls == len(server.requests)
    first_messages = [body["messages"][0]["content"] for body in server.requests]
    assert any(isinstance(c, list) and c[0].get("cache_control") for c in first_messages)
    for content in first_messages:  # marked blocks, or one string for a template with nothing before its data
        assert isinstance(content, str) or [("cache_control" in block) for block in content] == [True, False]
