"""What Anthropic's prompt cache serves when judgegraph marks each prompt's stable part (docs/cost_cache.md):
a real ``langchain_anthropic.ChatAnthropic`` judges generated support conversations through the loopback
Anthropic-compatible server (``tests.kit.anthropic_server``), which reports ``cache_read_input_tokens`` and
``cache_creation_input_tokens`` by Anthropic's rule (the prefix up to the marked block, read when sent
before, written from 1,024 tokens, Claude Sonnet 4.5's minimum; counted with cl100k).

Two ways of marking, side by side: judgegraph's (a stable part marked once the judge has sent it before,
``SeenPrefixes``) and marking every time. Requests are sent one at a time (Anthropic makes an entry readable once the first reply has begun; calls sent
together may each write it). Dollars at ``claude-sonnet-4-5``'s list price: "$ no cache" every input token at
the input price; "$ cached" reads at the cached price, writes at 1.25 × the input price (Anthropic's 5-minute
write price), 20 output tokens a call as the server reports. Needs ``langchain-anthropic``.

    python benchmarks/anthropic_cache.py [--conversations 10] [--exchanges 30]
"""

from __future__ import annotations

import argparse
import itertools
import os

import _loopback  # noqa: F401 - puts the repository root on sys.path (tests.kit)
from cache_share import support_conversations

from judgegraph.cost.pricing import prices_for
from judgegraph.data.results import Usage
from judgegraph.judges.cache_hints import SeenPrefixes
from judgegraph.judges.limiter import CallLimiter
from judgegraph.judges.llm import LLMJudge
from judgegraph.metrics import get_metric
from tests.kit.anthropic_server import AnthropicRequest, FakeAnthropicServer

MODEL = "claude-sonnet-4-5"
GUIDELINES = ["Answer in at most three sentences.", "Be polite.", "Name the case number.",
              "Do not promise a date.", "Offer a next step."]


def reply(request: AnthropicRequest) -> dict[str, object]:
    if request.tool_name == "GuidelineJudgement":
        return {"reason": "Followed.", "violating_turns": [], "verdict": "yes"}
    return {"reason": "It answers.", "verdict": "yes"}


class EveryTime(SeenPrefixes):
    """The other choice, for comparison: every stable part marked, from its first sending."""

    def sent_before(self, stable: str) -> bool:
        return True


def run(metric: str, options: dict[str, object], conversations: list, every_time: bool) -> tuple[Usage, int]:
    """The summed usage of ``metric`` over ``conversations`` and the tokens the server reported written."""
    from langchain_anthropic import ChatAnthropic

    with FakeAnthropicServer(reply) as server:
        claude = ChatAnthropic(model=MODEL, base_url=server.base_url, api_key="not-needed", temperature=0,
                               max_retries=0)
        judge = LLMJudge(claude, limiter=CallLimiter(1))
        if every_time:
            judge.seen_prefixes = EveryTime()
        graph = get_metric(metric).factory(model=judge, **options)
        total = Usage()
        for conversation in conversations:
            total = total + graph.invoke({"conversation": conversation})["results"][metric].usage
        written = sum(server.usage_reported[i]["cache_creation_input_tokens"] for i in range(len(server.requests)))
    return total, written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--exchanges", type=int, default=30)
    args = parser.parse_args()
    os.environ["JUDGEGRAPH_JUDGE_CACHE"] = "off"
    conversations = support_conversations(args.conversations, args.exchanges)
    prices = prices_for(MODEL)
    assert prices is not None and prices.cached_input is not None
    print(f"{args.conversations} conversations x {args.exchanges} exchanges, {MODEL} through ChatAnthropic")
    print("| metric | marked | calls | input tokens | cache read | cache written | read share | $ no cache |"
          " $ cached |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (label, metric, options), every_time in itertools.product(
            (("turn relevancy, window 10", "turn_relevancy", {}),
             ("conversational guidelines, 5", "conversational_guidelines", {"guidelines": GUIDELINES})),
            (False, True)):
        usage, written = run(metric, options, conversations, every_time)
        read = usage.cached_input_tokens
        plain = (usage.input_tokens * prices.input + usage.output_tokens * prices.output) / 1e6
        cached = (((usage.input_tokens - read - written) * prices.input + read * prices.cached_input
                   + written * 1.25 * prices.input + usage.output_tokens * prices.output) / 1e6)
        print(f"| {label} | {'every time' if every_time else 'once sent before'} | {usage.calls:,} | {usage.input_tokens:,} | {read:,} | {written:,} |"
              f" {read / max(usage.input_tokens, 1):.1%} | {plain:.3f} | {cached:.3f} |")


if __name__ == "__main__":
    main()
