"""Run the five session judges over examples/session_chats.jsonl and print each result.

    python examples/session_judges.py                                   # canned answers, no key, no network
    python examples/session_judges.py --model openai:gpt-4.1-mini       # a real model (OPENAI_API_KEY)
    python examples/session_judges.py --model openai:NAME --base-url http://localhost:8000/v1   # vLLM, Ollama...

Without --model the judges talk to judgegraph's scripted chat model
(``ScriptedChatModel``), answering as a plausible LLM would for the four example
conversations: the judgements are CANNED (written by hand), so the run shows
what the judges report, how many calls they make and how many tokens their
prompts take, not how good a model is. Everything else is real: the prompts,
structured output, the graphs, the scores.

Exit status: 0 when every judgement was made, 3 when some judge error occurred,
2 for a bad model setting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from judgegraph import load_conversations
from judgegraph.judges import resolve_judge
from judgegraph.metrics.session import (
    create_conversation_completeness_metric,
    create_conversational_guidelines_metric,
    create_knowledge_retention_metric,
    create_role_adherence_metric,
    create_user_frustration_metric,
)

HERE = Path(__file__).resolve().parent
CHATS = HERE / "session_chats.jsonl"

GUIDELINES = [
    "Apologise when the user reports a problem or a mistake.",
    "Never ask the user for information they have already given.",
    "Offer a human agent when the user asks for one.",
]

# -- the canned answers: what a careful judge would say about each example ------------
# Turn numbers are 1-based, as the judges cite them.


def _goal(request, asked):
    return {"request": request, "asked_in_turns": asked}


def _met(reason, answered, verdict="yes"):
    return {"reason": reason, "answered_in_turns": answered, "verdict": verdict}


def _fact(turn, fact):
    return {"turn": turn, "fact": fact}


def _kept(reason="Nothing in this turn conflicts with, or asks again for, what the user said."):
    return {"reason": reason, "lapses": [], "verdict": "yes"}


def _lost(reason, fact, turn, kind):
    return {"reason": reason, "lapses": [{"fact": fact, "stated_in_turn": turn, "kind": kind}], "verdict": "no"}


def _mood(reason, verdict, frustrated=(), resolved_by=()):
    return {"reason": reason, "frustrated_turns": list(frustrated), "resolved_by_turns": list(resolved_by),
            "verdict": verdict}


def _rule(reason, verdict, violating=()):
    return {"reason": reason, "violating_turns": list(violating), "verdict": verdict}


CANNED: dict[str, dict[str, Any]] = {
    "hotel-booking": {
        "Goals": {"goals": [
            _goal("Find a hotel in Lisbon from 3 to 7 May for two adults.", [2]),
            _goal("Recommend a restaurant near the hotel.", [4, 6]),
            _goal("Book the hotel.", [6, 8]),
        ]},
        "GoalJudgement": {
            "Find a hotel": _met("Turn 3 offers Hotel Alfama for the requested dates and guests.", [3]),
            "Recommend a restaurant": _met("Turn 5 suggests a place, and turn 7 a vegetarian one after the"
                                           " user's objection in turn 6.", [5, 7]),
            "Book the hotel": _met("Turn 9 confirms the booking with a confirmation number.", [9]),
        },
        "Facts": {"facts": [
            _fact(2, "The user's name is Dana."), _fact(2, "The user needs the hotel from 3 to 7 May."),
            _fact(2, "The booking is for two adults."), _fact(2, "The user is vegetarian."),
        ]},
        "TurnRetention": {
            3: _kept("Turn 3 uses the name, dates and party size from turn 2."),
            5: _lost("Turn 5 recommends a cod and pork restaurant although the user said in turn 2 they are"
                     " vegetarian.", "The user is vegetarian.", 2, "contradicted"),
            7: _lost("Turn 7 asks which dates to book, although the user gave 3 to 7 May in turn 2.",
                     "The user needs the hotel from 3 to 7 May.", 2, "forgotten"),
            9: _kept("Turn 9 books the right hotel, dates and party size."),
        },
        "FrustrationJudgement": _mood(
            "The user is irritated in turn 6 (the vegetarian reminder) and turn 8 ('as I said at the start');"
            " turns 7 and 9 fix both problems and the user ends with 'Perfect, thanks!'.", "resolved", [6, 8], [7, 9]),
        "GuidelineJudgement": {
            0: _rule("Turn 7 apologises for the unsuitable recommendation.", "yes"),
            1: _rule("Turn 7 asks for the dates the user gave in turn 2.", "no", [7]),
            2: _rule("The user never asks for a human.", "not_applicable"),
        },
        "RoleJudgement": {3: ("Offers a Lisbon hotel.", "yes"), 5: ("Recommends a restaurant.", "yes"),
                          7: ("Recommends a restaurant and books.", "yes"), 9: ("Confirms a booking.", "yes")},
    },
    "refund-runaround": {
        "Goals": {"goals": [
            _goal("Get a refund for order 5521, whose trainers arrived with a torn sole.", [1, 3, 5]),
            _goal("Talk to a human agent.", [5]),
        ]},
        "GoalJudgement": {
            "Get a refund": _met("No turn starts the refund: turn 2 is generic, turn 4 asks for the order number"
                                 " again, turn 6 only states processing times.", [2, 4, 6], "no"),
            "Talk to a human": _met("Turn 6 ignores the request for a human.", [], "no"),
        },
        "Facts": {"facts": [
            _fact(1, "The user's order number is 5521."), _fact(1, "The trainers arrived with a torn sole."),
            _fact(1, "The user wants a refund."),
        ]},
        "TurnRetention": {
            2: _kept("Turn 2 is off-topic but neither contradicts nor asks again for what the user said."),
            4: _lost("Turn 4 asks for the order number the user gave in turns 1 and 3.",
                     "The user's order number is 5521.", 1, "forgotten"),
            6: _kept("Turn 6 speaks of refunds, consistent with the user's request."),
        },
        "FrustrationJudgement": _mood(
            "The user is annoyed in turn 3 ('That doesn't help'), shouts in turn 5 and asks for a human, and gives"
            " up in turn 7 threatening a chargeback; nothing resolves it.", "unresolved", [3, 5, 7]),
        "GuidelineJudgement": {
            0: _rule("The user reports a torn sole in turn 1; no assistant turn apologises.", "no", [2, 4, 6]),
            1: _rule("Turn 4 asks for the order number already given twice.", "no", [4]),
            2: _rule("The user asks for a human in turn 5; turn 6 does not offer one.", "no", [6]),
        },
        "RoleJudgement": {2: ("Talks about the shop's products; unhelpful but within shop support.", "yes"),
                          4: ("Asks for an order number, a support task.", "yes"),
                          6: ("States the refund policy.", "yes")},
    },
    "bank-poem": {
        "Goals": {"goals": [
            _goal("What is the daily withdrawal limit on my debit card?", [1]),
            _goal("Write a short poem about my cat Miso.", [3]),
            _goal("How do I freeze my card?", [5]),
        ]},
        "GoalJudgement": {
            "What is the daily": _met("Turn 2 gives the limit and how to change it.", [2]),
            "Write a short poem": _met("Turn 4 writes the poem.", [4]),
            "How do I freeze": _met("Turn 6 gives the steps.", [6]),
        },
        "Facts": {"facts": [_fact(1, "The user has a Northbank debit card."), _fact(3, "The user has a cat named Miso.")]},
        "TurnRetention": {2: _kept(), 4: _kept("Turn 4 uses the cat's name, Miso."), 6: _kept()},
        "FrustrationJudgement": _mood("The user is friendly throughout ('Thanks', 'Lovely!').", "none"),
        "GuidelineJudgement": {
            0: _rule("The user reports no problem.", "not_applicable"),
            1: _rule("The assistant never asks for anything already given.", "yes"),
            2: _rule("The user never asks for a human.", "not_applicable"),
        },
        "RoleJudgement": {2: ("Answers a card question.", "yes"),
                          4: ("Writes a poem: a task outside banking that it should have declined.", "no"),
                          6: ("Explains how to freeze a card.", "yes")},
    },
    "library-hours": {
        "Goals": {"goals": [_goal("When does the library open on Saturdays?", [1]),
                            _goal("Do I get a free library card as a college student?", [3])]},
        "GoalJudgement": {"When does the library": _met("Turn 2 gives the Saturday hours.", [2]),
                          "Do I get a free": _met("Turn 4 says yes and what to bring.", [4])},
        "Facts": {"facts": [_fact(3, "The user is a student at the college.")]},
        "TurnRetention": {4: _kept("Turn 4 answers for a college student."), 6: _kept()},
        "FrustrationJudgement": _mood("Calm and satisfied throughout.", "none"),
        "GuidelineJudgement": {
            0: _rule("The user reports no problem.", "not_applicable"),
            1: _rule("The assistant asks for nothing already given.", "yes"),
            2: _rule("The user never asks for a human.", "not_applicable"),
        },
        "RoleJudgement": {2: ("Library hours.", "yes"), 4: ("Library cards.", "yes"), 6: ("A courteous goodbye.", "yes")},
    },
}


def canned_model(conversations):
    """A scripted chat model answering from CANNED: it finds the conversation (by
    its first user message), the step (by the structured-output schema's name)
    and the item (request, judged turn, guideline, batch of turns) in the prompt."""
    from judgegraph import ScriptedChatModel

    by_first_user = {next(t.content for t in c.turns if t.role == "user"): c.id for c in conversations}

    def section(text, tag):
        m = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
        return m.group(1) if m else ""

    def respond(request):
        text = request.text
        try:
            rows = json.loads(section(text, "conversation"))
            first = next(r["content"] for r in rows if r["role"] == "user")
            canned = CANNED[by_first_user[first]]
            step = request.schema_name
            if step == "GoalJudgement":
                want = section(text, "request")
                return next(v for k, v in canned[step].items() if want.startswith(k))
            if step == "TurnRetention":
                return canned[step][int(section(text, "judged_turn"))]
            if step == "GuidelineJudgement":
                return canned[step][GUIDELINES.index(section(text, "guideline"))]
            if step == "RoleJudgement":
                turns = [int(t) for t in section(text, "turns_to_judge").split(",")]
                return {"verdicts": [{"turn": t, "reason": canned[step][t][0], "verdict": canned[step][t][1]}
                                     for t in turns]}
            return canned[step]
        except (KeyError, StopIteration, ValueError):
            return LookupError("no canned answer for this prompt: the canned answers cover examples/session_chats.jsonl")

    return ScriptedChatModel(default=respond, model_name="canned-judge")


# -- running ------------------------------------------------------------------------


def judges(shared):
    return {
        "conversation_completeness": create_conversation_completeness_metric(model=shared),
        "knowledge_retention": create_knowledge_retention_metric(model=shared),
        "user_frustration": create_user_frustration_metric(model=shared),
        "conversational_guidelines": create_conversational_guidelines_metric(model=shared, guidelines=GUIDELINES),
        "role_adherence": create_role_adherence_metric(model=shared),
    }


async def evaluate(graphs, conversations):
    async def one(name, graph):
        start = time.perf_counter()
        outs = await graph.abatch([{"conversation": c} for c in conversations])
        return name, [o["results"][name] for o in outs], time.perf_counter() - start

    return await asyncio.gather(*(one(n, g) for n, g in graphs.items()))


def show(name, results, seconds):
    calls = sum(r.usage.calls for r in results)
    tokens_in = sum(r.usage.input_tokens for r in results)
    tokens_out = sum(r.usage.output_tokens for r in results)
    errors = sum(len(r.errors) for r in results)
    print(f"\n== {name}: {calls} calls, {tokens_in} input + {tokens_out} output tokens, {seconds:.2f}s,"
          f" judge errors: {errors}")
    for r in results:
        score = "n/a " if r.score is None else f"{r.score:.2f}"
        print(f"  {r.conversation_id:18} {r.status:14} value={str(r.value):11} score={score}  calls={r.usage.calls}")
        print(textwrap.fill(r.reason, width=110, initial_indent=" " * 6, subsequent_indent=" " * 6))
    return errors


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="e.g. openai:gpt-4.1-mini; without it, canned answers are used")
    parser.add_argument("--base-url", help="an OpenAI-compatible server for --model")
    parser.add_argument("--file", default=str(CHATS), help="conversations (default: examples/session_chats.jsonl)")
    parser.add_argument("--concurrency", type=int, default=8, help="judge calls in flight (default 8)")
    args = parser.parse_args(argv)
    conversations = load_conversations(args.file)

    if args.model:
        from judgegraph.judges.llm import ModelConfigError

        try:
            shared = resolve_judge(model=args.model, base_url=args.base_url, max_concurrency=args.concurrency)
        except ModelConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"judge: {shared.name} (real model answers)")
    else:
        # no cache: canned answers must never land in the user's persistent judge cache
        shared = resolve_judge(model=canned_model(conversations), max_concurrency=args.concurrency, cache=False)
        print("judge: CANNED ANSWERS from a scripted chat model - no model is called.")
        print("       The verdicts were written by hand for examples/session_chats.jsonl; calls, tokens and the")
        print("       scoring are real. Pass --model openai:gpt-4.1-mini for real judgements.")
    print(f"conversations: {', '.join(c.id for c in conversations)} ({args.file})")
    print(f"guidelines: {GUIDELINES}")
    start = time.perf_counter()
    outcome = asyncio.run(evaluate(judges(shared), conversations))
    wall = time.perf_counter() - start
    errors = sum(show(name, results, seconds) for name, results, seconds in outcome)
    calls = sum(r.usage.calls for _, results, _ in outcome for r in results)
    print(f"\ntotal: {calls} judge calls for {len(conversations)} conversations x 5 judges in {wall:.2f}s;"
          f" judge errors: {errors}")
    return 3 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
