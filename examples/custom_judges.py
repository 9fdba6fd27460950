"""Custom judges from instructions (``make_metric``), run together in one report graph.

    python examples/custom_judges.py                        # canned answers, scripted chat model, no key
    python examples/custom_judges.py --model openai:gpt-4.1-mini [--base-url URL] [FILE]

Without ``--model`` the judges talk to judgegraph's scripted chat model
(``ScriptedChatModel``), which answers each judge's structured request with a
fixed, schema-valid value: prompts, structured output and scoring run, the
values are canned (not judged), and the script says so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from judgegraph import ScriptedChatModel, load_conversations, make_metric, resolve_judge
from judgegraph.report import create_report_graph

HERE = Path(__file__).resolve().parent

CANNED = {  # by schema (judge) name: the canned structured answer
    "PolitenessFeedback": {"reason": "canned: every reply is courteous", "value": "consistently_polite"},
    "GoalMetFeedback": {"reason": "canned: the expected outcome is reached in the last reply", "value": True},
    "HelpfulnessFeedback": {"reason": "canned: clear, actionable steps", "value": 4},
}


def judges(model):
    """Three judges, one per feedback type, sharing ``model`` (a ready judge: one limit, one cache)."""
    kw = {"model": model}
    politeness = make_metric(
        name="politeness",
        instructions="Rate the assistant's tone in the {{ conversation }}: 'consistently_polite', "
                     "'mostly_polite' (one or two curt replies) or 'impolite'.",
        feedback_type=Literal["consistently_polite", "mostly_polite", "impolite"],
        scores={"consistently_polite": 1.0, "mostly_polite": 0.5, "impolite": 0.0},
        threshold=0.5, **kw)
    goal_met = make_metric(
        name="goal_met",
        instructions="{{ conversation }}\n\nExpected outcome: {{ expectations }}\n\n"
                     "Did the conversation reach the expected outcome by its end?",
        feedback_type=bool, **kw)
    helpfulness = make_metric(
        name="helpfulness",
        instructions="How helpful are the assistant's replies in the {{ conversation }}, from 1 (useless) "
                     "to 5 (the user could act on every reply at once)?",
        feedback_type=Annotated[int, Field(ge=1, le=5)], threshold=4, **kw)
    return [politeness, goal_met, helpfulness]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", nargs="?", default=str(HERE / "support_chats.jsonl"))
    p.add_argument("--model", help="LLM judge, e.g. openai:gpt-4.1-mini (default: canned answers)")
    p.add_argument("--base-url", help="OpenAI-compatible server for --model")
    args = p.parse_args(argv)

    kw = {"base_url": args.base_url} if args.base_url else {}
    model = args.model
    if model is None:
        # Answers by which judge asks (its output schema's name); anything else gets text, which is no answer.
        model = ScriptedChatModel(default=lambda request: CANNED.get(request.schema_name or "", "no canned answer"))
        kw = {"cache": False}  # canned answers must never land in the user's persistent judge cache
        print("no --model: canned answers from a scripted chat model (no LLM, no key; the values are canned,"
              " not judged)")
    report = create_report_graph(judges(resolve_judge(model, **kw)))
    conversations = load_conversations(args.file)
    outputs = report.batch([{"conversation": c} for c in conversations])

    for conversation, out in zip(conversations, outputs):
        print(f"\n{conversation.id}")
        for key, r in out["results"].items():
            score = "—" if r.score is None else f"{r.score:g}"
            print(f"  {key:12} {r.status:15} value={r.value!r:24} score={score:4} {r.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
