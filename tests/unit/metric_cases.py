"""Every metric, ready to run on one conversation with a scripted LLM judge that
answers any of their requests: what the capability tests are parametrised over
(every built-in metric, ``make_metric``, and the example metric of ``examples/``).

:func:`answer` writes a valid structured answer from the schema the judge bound
and the prompt; ``verdict`` ("yes" or "no") is the answer's polarity, so a
second model can disagree with the first.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding

from judgegraph import ScriptedChatModel
from judgegraph.judges.schema_example import example_from_schema
from judgegraph.judges.scripted import ScriptedRequest

ROOT = Path(__file__).resolve().parents[2]

CONVERSATION = {
    "id": "capabilities",
    "expected_outcome": "The user learns the opening hours and the return policy.",
    "turns": [
        {"role": "system", "content": "You are the support assistant of a bookshop."},
        {"role": "user", "content": "Hi! When do you open on Saturdays? I live in Lyon."},
        {"role": "assistant", "content": "We open at 9 am on Saturdays.",
         "retrieval_context": ["The shop opens at 9 am on Saturdays.", "Parking is free after 6 pm."],
         "tool_calls": [{"name": "opening_hours", "arguments": {"day": "Saturday"}, "id": "c1", "output": "9 am"}]},
        {"role": "user", "content": "Can I return a book I bought last week?"},
        {"role": "assistant", "content": "Yes, books can be returned within 30 days with the receipt.",
         "retrieval_context": ["Books can be returned within 30 days with a receipt."]},
        {"role": "user", "content": "Great, and do you ship to Lyon?"},
        {"role": "assistant", "content": "Yes, we ship to Lyon in two days.",
         "retrieval_context": ["Shipping within France takes two days."],
         "tool_calls": [{"name": "shipping_time", "arguments": {"city": "Lyon"}, "id": "c2", "output": "2 days"}]},
    ],
}
#: 0-based indices of the turns of the latest exchange (its user message and its reply)
LATEST_TURNS = {5, 6}


def answer(verdict: str = "yes") -> Callable[[ScriptedRequest], dict[str, Any]]:
    """A reply function for :class:`ScriptedChatModel`: a valid answer to any judgegraph request."""
    yes = verdict == "yes"

    def reply(request: ScriptedRequest) -> dict[str, Any]:
        schema, text = request.schema, request.text
        name = request.schema_name or ""
        schema = schema if isinstance(schema, type) else _Counts(text)  # over HTTP: the counts are in the prompt
        reason = f"Scripted {verdict}."
        if name == "TurnVerdict":
            return {"reason": reason, "verdict": verdict}
        if name.startswith("DenseTurnVerdict"):  # dense mode (judgegraph.core._dense): one entry per listed item
            listed = text.split("<items>")[-1].split("</items>")[0]
            return {"items": [{"item": int(k), "reason": reason, "verdict": verdict}
                              for k in re.findall(r'^\{"item": (\d+)', listed, re.M)]}
        if name == "WrittenReason":
            return {"reason": reason}
        if name == "GeneratedQuestions":
            n = schema.n_questions
            return {"reason": reason, "questions": [
                {"question": f"Question {i} {'about the shop' if yes else 'about the weather'}?", "noncommittal": False}
                for i in range(1, n + 1)]}
        if name == "ExtractedStatements":
            return {"nodes": [{"node": i, "statements": [f"Statement of node {i}."]}
                              for i in range(1, schema.expected_nodes + 1)]}
        if name == "StatementVerdicts":
            return {"verdicts": [{"statement": i, "reason": reason, "verdict": verdict}
                                 for i in range(1, schema.expected + 1)]}
        if name == "Goals":
            return {"goals": [{"request": "Know the Saturday opening hours.", "asked_in_turns": [2]},
                              {"request": "Return a book.", "asked_in_turns": [4]}]}
        if name == "GoalJudgement":
            return {"reason": reason, "answered_in_turns": [3] if yes else [], "verdict": verdict}
        if name == "Facts":
            return {"facts": [{"turn": 2, "fact": "The user lives in Lyon."}]}
        if name == "TurnRetention":
            lapses = [] if yes else [{"fact": "The user lives in Lyon.", "stated_in_turn": 2, "kind": "forgotten"}]
            return {"reason": reason, "lapses": lapses, "verdict": verdict}
        if name == "FrustrationJudgement":
            return {"reason": reason, "frustrated_turns": [] if yes else [4], "resolved_by_turns": [],
                    "verdict": "none" if yes else "unresolved"}
        if name == "GuidelineJudgement":
            return {"reason": reason, "violating_turns": [] if yes else [3], "verdict": verdict}
        if name == "RoleJudgement":
            turns = [int(n) for n in re.findall(r'"turn": (\d+)', text)]
            assistant = [n for n in turns if n in (3, 5, 7)] or [3, 5, 7]
            return {"verdicts": [{"turn": n, "reason": reason, "verdict": verdict} for n in assistant]}
        if name in ("ToolCallJudgement", "ArgumentJudgement"):  # tool_correctness
            return {"reason": reason, "verdict": verdict}
        if name == "GoalCompletionJudgement":
            return {"user_goal": "Know the opening hours and the return policy.", "end_state": "Both were given.",
                    "reason": reason, "turn": 5 if yes else 7, "verdict": verdict}
        if name == "TopicJudgement":
            return {"topics": [{"topic": "The shop's services", "reason": reason, "allowed": True, "answered": yes}]}
        if name == "SafetyJudgement":
            return {"reason": reason, "categories": [] if yes else ["violence"], "verdict": verdict}
        if name == "ClaimVerdicts":
            return {"verdicts": [{"claim": i, "reason": reason, "verdict": verdict}
                                 for i in range(1, schema.expected + 1)]}
        if name.endswith("Feedback"):  # make_metric: a bool value
            return {"reason": reason, "value": yes}
        # Any other schema (the example metric's, a new metric's): a valid answer, a yes/no verdict this polarity.
        shape = request.schema.model_json_schema() if isinstance(request.schema, type) else request.schema
        if isinstance(shape, dict):  # over HTTP, the schema inside the provider's wrapping (Anthropic's tool)
            shape = shape.get("input_schema") or shape.get("parameters") or shape.get("schema") or shape
        fields = example_from_schema(shape if isinstance(shape, dict) else None)
        if not isinstance(fields, dict) or fields.get("verdict") not in ("yes", "no"):
            raise LookupError(f"metric_cases.answer: no answer for schema {name!r} (not a yes/no verdict)")
        return {**fields, "reason": reason, "verdict": verdict}

    return reply


class _Counts:
    """What a schema class says about a request's expected counts, read from the prompt (an HTTP request's schema
    is JSON: the counts its validators check are not in it)."""

    def __init__(self, text: str) -> None:
        self.expected_nodes = len(re.findall(r"^\[node \d+\]$", text, re.M))
        listed = text.split("<statements>")[-1].split("</statements>")[0] if "<statements>" in text else ""
        claims = text.split("<claims>")[-1].split("</claims>")[0] if "<claims>" in text else ""
        self.expected = len(re.findall(r"^\d+\. ", listed or claims, re.M))  # the numbered statements or claims
        found = re.search(r"exactly (\d+) questions", text)
        self.n_questions = int(found.group(1)) if found else 3


def model(verdict: str = "yes") -> ScriptedChatModel:
    return ScriptedChatModel(default=answer(verdict))


def example_metric() -> Any:
    """The one-file metric of ``examples/reply_language.py``, imported as a user would name it
    (``examples.reply_language:SPEC``, from the repository's root)."""
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    return importlib.import_module("examples.reply_language")


@dataclass(frozen=True)
class Case:
    name: str  # the result's key
    build: Callable[..., Any]  # (model, **options) -> compiled graph
    options: dict[str, Any] = field(default_factory=dict)
    windowed: bool = False  # judges exchange by exchange (scope="latest" judges only the last one)


#: What some metrics need to run, by the option that takes it: each built-in gets those its spec lists.
INPUTS: dict[str, Any] = {
    "embeddings": DeterministicFakeEmbedding(size=16),
    "guidelines": ["Answer in one sentence.", "Be polite."],
    "topics": ["The bookshop: opening hours, returns, shipping"],
}


def _built_in(spec: Any) -> Case:
    options = {k: v for k, v in INPUTS.items() if k in spec.options}
    return Case(spec.name, lambda model, **kw: spec.factory(model=model, **options, **kw), options,
                spec.scope == "exchange")


def _make_metric(model: Any, **kw: Any) -> Any:
    from judgegraph import make_metric

    return make_metric(name="resolves_issue", model=model,
                      instructions="Did the assistant resolve the user's issue? {{ conversation }}", **kw)


def cases() -> list[Case]:
    """Every built-in metric (the registry's, plugins left out), ``make_metric`` and the example metric."""
    from judgegraph.metrics import built_ins

    example = example_metric()
    return [
        *(_built_in(spec) for spec in built_ins().values()),
        Case("resolves_issue", _make_metric),
        Case("reply_language", lambda model, **kw: example.create_reply_language_metric(model=model, **kw),
             windowed=example.SPEC.scope == "exchange"),
    ]


CASES = cases()
IDS = [c.name for c in CASES]
