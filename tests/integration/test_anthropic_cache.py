"""Anthropic's ``cache_control`` through a REAL ``langchain_anthropic.ChatAnthropic`` against the loopback
Anthropic-compatible server (tests.kit.anthropic_server; docs/cost_cache.md): the stable prefix of each judge
prompt is marked, the verdicts are parsed, Anthropic's cache reads reach ``Usage.cached_input_tokens`` and
the cost prices them at the cached price. No API key (a dummy one) and no internet."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from judgegraph.cost.pricing import prices_for
from judgegraph.data.results import Usage
from judgegraph.judges.llm import LLMJudge
from judgegraph.judges.scripted import ScriptedRequest
from judgegraph.metrics import get_metric
from judgegraph.metrics.relevancy import TurnVerdict
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


def test_turn_relevancy_marks_a_stable_prefix_sent_before_and_reads_cached_tokens_into_usage_and_cost():
    """Three runs of one judge (its own cache off) within the cache's five minutes: the first sends each window's
    stable part unmarked (no other call sent it: no write billed at 1.25 x), the second marks them (Anthropic
    writes those past its minimum), the third reads them."""
    conversation = long_conversation()
    with FakeAnthropicServer(lambda request: {"reason": "It answers.", "verdict": "yes"}) as server:
        judge = LLMJudge(claude(server))
        runs = []
        for _ in range(3):
            graph = get_metric("turn_relevancy").factory(model=judge)
            runs.append(graph.invoke({"conversation": conversation})["results"]["turn_relevancy"])
    first, second, third = runs
    for run in runs:
        assert [v.verdict for v in run.verdicts] == ["yes"] * 5 and run.score == 1.0  # parsed from tool_use
    # on the wire: the prompt as two text blocks; cache_control on the stable block only, from the second run
    assert len(server.requests) == 15
    rendered = sorted(v.transcript[0].messages[0]["content"] for run in runs for v in run.verdicts)
    wire, marked = [], []
    for body in server.requests:  # in arrival order (windows are judged concurrently)
        assert body["tools"][0]["name"] == "TurnVerdict" and "cache_control" not in json.dumps(body["tools"])
        assert "system" not in body
        (message,) = body["messages"]
        stable, changing = message["content"]
        assert "cache_control" not in changing
        assert changing["text"].startswith("<reply_to_judge>\n")  # the last section: what this call alone judges
        assert stable["text"].startswith("You are judging one reply")
        wire.append(stable["text"] + changing["text"])
        marked.append(stable.get("cache_control"))
    assert sorted(wire) == rendered  # the text sent is the prompt as rendered, cut in two
    assert marked == [None] * 5 + [{"type": "ephemeral"}] * 10
    written = [server.usage_reported[i]["cache_creation_input_tokens"] for i in range(15)]
    assert sum(written[:5]) == 0 and sum(written[5:10]) > 0 and sum(written[10:]) == 0
    # the third run reads every prefix past the minimum (window 1's stable part is under it)
    assert first.usage.cached_input_tokens == second.usage.cached_input_tokens == 0
    read = [v.usage.cached_input_tokens for v in third.verdicts]
    assert read[0] == 0 and all(n > 1024 for n in read[2:])
    assert third.usage.cached_input_tokens == sum(read) == sum(written[5:10])
    assert third.usage.input_tokens == first.usage.input_tokens  # input_tokens includes cache reads and writes
    # the cost: cached tokens at claude-sonnet-4-5's cached price, a tenth of the input price
    prices = prices_for("claude-sonnet-4-5")
    assert prices is not None and prices.cached_input == pytest.approx(prices.input / 10)
    cost = prices.cost(third.usage)
    uncached = third.usage.input_tokens - third.usage.cached_input_tokens
    expected = (uncached * prices.input + third.usage.cached_input_tokens * prices.cached_input
                + third.usage.output_tokens * prices.output) / 1e6
    assert cost == pytest.approx(expected)
    assert cost < prices.cost(Usage(calls=5, input_tokens=third.usage.input_tokens,
                                    output_tokens=third.usage.output_tokens))


def test_a_jury_repeat_reads_the_prefix_the_one_before_wrote():
    """The repeats of a jury (``--repeat``) share what their judge has sent: repeat 1 unmarked, repeat 2 marked
    (written), repeat 3 read."""
    with FakeAnthropicServer(lambda request: {"reason": "It answers.", "verdict": "yes"}) as server:
        judge = LLMJudge(claude(server))
        conversation = long_conversation(3)
        usages = []
        for repeat in range(3):
            graph = get_metric("turn_relevancy").factory(model=judge.with_seed(repeat, repeat))
            usages.append(graph.invoke({"conversation": conversation})["results"]["turn_relevancy"].usage)
    assert [u.cached_input_tokens for u in usages[:2]] == [0, 0] and usages[2].cached_input_tokens > 1024


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
    comes last): the first sends it unmarked, the second writes it, the others read it. (The server writes a prefix at once;
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
    marks = [body["messages"][0]["content"][0].get("cache_control") for body in server.requests]
    assert marks.count(None) == 1  # the first call sends it unmarked, the three others marked
    read = sorted(v.usage.cached_input_tokens for v in result.verdicts)
    assert read[:2] == [0, 0] and read[2] == read[3] > 1024  # the first marked call writes, the two others read
    assert result.usage.cached_input_tokens == 2 * read[3]


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
    assert any(isinstance(c, list) for c in first_messages)
    for content in first_messages:  # two blocks (the first marked once sent before), or one string
        assert isinstance(content, str) or [("cache_control" in block) for block in content] in ([True, False],
                                                                                                  [False, False])
