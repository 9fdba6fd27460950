"""What a run costs, mode by mode (issue 20): calls, input and output tokens and dollars at list price
for turn relevancy on a long-conversation set and a short one, and each mode's agreement with the
per-window verdicts (and with the labels the sets are generated with).

    python benchmarks/token_costs.py                     # 40 × 30 exchanges and 200 × 3, window 10, dense 10
    python benchmarks/token_costs.py --long 10 --short 50 --json

The sets are generated deterministically: support conversations whose replies run ~800 characters,
one reply in seven off-topic (its label "no"). Every request goes through the real client path
(``ChatOpenAI`` → HTTP) to the loopback OpenAI-compatible server (``tests.kit.openai_server``) in a
process of its own, which counts tokens with the tokenizer of the judge model (what a provider bills)
and answers with a scripted judge that decides each item by the reply it names
(``tests.kit.dense_answerer``): a faithful mode gives exactly the per-window verdicts.

Modes are rows: :data:`MODES` is a list of :class:`Mode` (a label, the metric options, the judge
settings); a mode needing another run path sets ``run`` ("dense 10 + batch" runs through
``judgegraph.batch``: the loopback server's ``/v1/files`` and ``/v1/batches``). Columns are :data:`COLUMNS`:
"cacheable" is the share of input tokens the server reported as served from its prefix cache by OpenAI's
rule (prefixes of at least 1,024 tokens already sent, in 128-token steps: ``judgegraph.providers.prefixcache``), and
"$" prices them as a provider does: uncached input at the input price, cached input at the cached price,
output at the output price; batch rows at the batch prices.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import _loopback

from judgegraph.cost.pricing import prices_for
from judgegraph.data.conversation import Conversation
from judgegraph.data.results import Usage
from judgegraph.judges.limiter import CallLimiter
from judgegraph.judges.llm import LLMJudge
from judgegraph.loaders import LoadedConversation
from judgegraph.runs.runner import MetricPlan, evaluate_async
from tests.kit.dense_answerer import MARK, RelevanceAnswerer
from tests.kit.openai_server import FakeOpenAIServer

METRIC = "turn_relevancy"
TOPICS = ["refund", "password reset", "delivery", "invoice", "plan upgrade", "warranty", "roaming", "booking"]
FILLER = ("Our support team checks each case by hand, and the steps below are the ones that apply to your "
          "account today. If anything on your side looks different, reply here and we will look again. ")
OFF_TOPIC = ("The office garden is in full bloom this week, with tulips, daffodils and a new bench by the pond. "
             "Visitors say the cafeteria's lemon cake is the best in town. ")


def reply_text(c: int, e: int, topic: str, length: int) -> tuple[str, str]:
    """A reply of about ``length`` characters and its label ("yes": on topic)."""
    if (c * 3 + e) % 7 == 5:
        head, label = f"{MARK}: ", "no"
        body = OFF_TOPIC
    else:
        head, label = f"About your {topic} (case {c}-{e}): ", "yes"
        body = f"the {topic} is handled in three steps: we confirm the details, process it, and email you. " + FILLER
    text = head
    while len(text) < length:
        text += body
    return text[:length].rstrip() + ".", label


def make_set(name: str, conversations: int, exchanges: int, reply_chars: int) -> tuple[list[LoadedConversation], dict]:
    """The conversations and their labels ``{(conversation id, window): "yes"|"no"}``."""
    items, labels = [], {}
    for c in range(conversations):
        turns = [{"role": "system", "content": "You are the support assistant of a telecom operator."}]
        for e in range(exchanges):
            topic = TOPICS[(c + e) % len(TOPICS)]
            turns.append({"role": "user", "content": f"Hello, this is customer {c}. Question {e + 1}: how does the "
                                                     f"{topic} work for my account {1000 + c}?"})
            text, label = reply_text(c, e, topic, reply_chars)
            turns.append({"role": "assistant", "content": text})
            labels[(f"{name}-{c}", e)] = label
        items.append(LoadedConversation(Conversation(id=f"{name}-{c}", turns=turns), f"{name}#{c}", "judgegraph", {}))
    return items, labels


@dataclass(frozen=True)
class Mode:
    """One row: ``options`` given to the metric (e.g. ``{"dense": 10}``), ``judge`` settings of the LLM
    judge; ``run`` replaces the default run path (``evaluate`` through the loopback server)."""

    label: str
    options: dict[str, Any] = field(default_factory=dict)
    judge: dict[str, Any] = field(default_factory=dict)
    run: Callable[[Mode, list[LoadedConversation], str, int], Awaitable[Figures]] | None = None


@dataclass
class Figures:
    """What a mode's run gives: its usage and each window's verdict ``{(conversation id, window): verdict}``."""

    usage: Usage
    verdicts: dict[tuple[str, int], str | None]
    judge_errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # columns a mode adds (e.g. a cacheable share)


def judge_plan(mode: Mode, base_url: str, window_size: int) -> MetricPlan:
    """The mode's run plan: its judge built from the model's name, as ``judgegraph eval --model`` builds it (the
    clients ``--batch`` answers at), pointed at the loopback server."""
    judge = LLMJudge(f"openai:{MODEL}", base_url=base_url, api_key="bench", max_retries=0, temperature=0,
                     limiter=CallLimiter(16), **mode.judge)
    return MetricPlan([METRIC], judge, {"window_size": window_size, **mode.options})


async def evaluate_mode(mode: Mode, items: list[LoadedConversation], base_url: str, window_size: int) -> Figures:
    plan = judge_plan(mode, base_url, window_size)
    summary = await evaluate_async(items, plan, max_conversations=16)
    verdicts = {(o.conversation_id, v.window): v.verdict for o in summary.outcomes
                for v in o.results[METRIC].verdicts}
    return Figures(summary.usage, verdicts, summary.judge_errors)


async def evaluate_batch(mode: Mode, items: list[LoadedConversation], base_url: str, window_size: int) -> Figures:
    """The same run through the Batch API (``judgegraph eval --batch``): the loopback server answers the batch."""
    from judgegraph.batch import evaluate_batch_to_file

    plan = judge_plan(mode, base_url, window_size)
    with tempfile.TemporaryDirectory() as tmp:
        summary = await evaluate_batch_to_file(items, plan, f"{tmp}/batch.jsonl", poll_s=0.01, max_conversations=16)
    verdicts = {(o.conversation_id, v.window): v.verdict for o in summary.outcomes
                for v in o.results[METRIC].verdicts}
    return Figures(summary.usage, verdicts, summary.judge_errors, {"batch": True})


MODEL = "gpt-4.1-mini"
#: The rows, in order; the first is the reference the others' agreement is measured against.
MODES: list[Mode] = [
    Mode("per-window"),
    Mode("dense 5", {"dense": 5}),
    Mode("dense 10", {"dense": 10}),
    Mode("dense 30", {"dense": 30}),
    Mode("dense 10 + batch", {"dense": 10}, run=evaluate_batch),
]


def agreement(a: dict, b: dict) -> float | None:
    keys = set(a) | set(b)
    return sum(a.get(k) is not None and a.get(k) == b.get(k) for k in keys) / len(keys) if keys else None


#: The columns: (header, value from (figures, reference figures, labels)).
COLUMNS: list[tuple[str, Callable[[Figures, Figures, dict], Any]]] = [
    ("calls", lambda f, ref, labels: f.usage.calls),
    ("input tokens", lambda f, ref, labels: f.usage.input_tokens),
    ("output tokens", lambda f, ref, labels: f.usage.output_tokens),
    ("cacheable", lambda f, ref, labels: _share(f.usage)),
    ("$", lambda f, ref, labels: _dollars(f.usage, batch=bool(f.extra.get("batch")))),
    ("agreement with per-window", lambda f, ref, labels: agreement(f.verdicts, ref.verdicts)),
    ("agreement with labels", lambda f, ref, labels: agreement(f.verdicts, labels)),
    ("judge errors", lambda f, ref, labels: f.judge_errors),
]


def _dollars(usage: Usage, *, batch: bool = False) -> float | None:
    prices = prices_for(MODEL)
    return None if prices is None else (prices.batch() if batch else prices).cost(usage)


def _share(usage: Usage) -> str | None:
    return f"{usage.cached_input_tokens / usage.input_tokens:.1%}" if usage.input_tokens else None


def serve(conn: Any) -> None:
    with FakeOpenAIServer(RelevanceAnswerer()) as server:
        conn.send(server.base_url)
        conn.recv()
        conn.send(server.calls["/v1/chat/completions"])


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if value < 10 else f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "n/a" if value is None else str(value)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--long", type=int, default=40, help="long conversations (30 exchanges each; default 40)")
    ap.add_argument("--short", type=int, default=200, help="short conversations (3 exchanges each; default 200)")
    ap.add_argument("--window-size", type=int, default=10)
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line per set")
    args = ap.parse_args()
    sets = [("long", *make_set("long", args.long, 30, 800)), ("short", *make_set("short", args.short, 3, 800))]

    tables, served = [], 0
    for name, items, labels in sets:
        figures = []
        for mode in MODES:  # each mode on a fresh server: its prefix cache holds only this mode's prompts
            runner = mode.run or evaluate_mode

            def one(base_url: str, mode: Mode = mode, runner=runner, items=items) -> Figures:
                # one event loop per run: langchain-openai's async client is bound to it
                return asyncio.run(runner(mode, items, base_url, args.window_size))

            result, calls = _loopback.with_server(serve, (), one)
            figures.append((mode.label, result))
            served += calls
        ref = figures[0][1]
        tables.append((name, [(label, [col(f, ref, labels) for _, col in COLUMNS]) for label, f in figures]))
    prices = prices_for(MODEL)
    print(f"turn relevancy, window {args.window_size}, judge {MODEL} at list price "
          f"({prices.describe() if prices else 'no price'}); {served:,} requests served")
    headers = ["set", "mode", *(h for h, _ in COLUMNS)]
    rows = [[name, label, *map(fmt, values)] for name, table in tables for label, values in table]
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    for r in [headers, *rows]:
        print("  ".join(str(c).rjust(w) if i > 1 else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    if args.json:
        for name, table in tables:
            print(json.dumps({"set": name, "rows": {label: dict(zip((h for h, _ in COLUMNS), values))
                                                    for label, values in table}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
