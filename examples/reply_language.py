"""Does each reply answer in the language the user wrote in? A whole metric in
one file, written only against judgegraph's public API for metric authors (``judgegraph.metric``); it gets every
capability a built-in metric has (transcripts and `show`, review, re-judging,
the latest scope, dry-run estimates, the HTML report) with no change to the core.

    judgegraph eval examples/support_chats.jsonl -m examples.reply_language:SPEC --model openai:gpt-4.1-mini

    START → window_turns ─Send per exchange→ judge_language [→ review_verdicts] → reduce_score → END
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from langgraph.graph import StateGraph
from pydantic import BaseModel, Field

from judgegraph.metric import (
    JudgeOutcome,
    JudgeRequest,
    MetricOptions,
    MetricSpec,
    MetricState,
    Window,
    WindowTask,
    WindowVerdict,
    judge_step,
    merge_verdicts,
    option,
    parse_prompt,
    score_node,
    turn_label,
    window_graph,
    window_node,
    window_verdict,
)

STEP, TASK = "reply_language/judge_language", "reply_language"
PROMPT = parse_prompt(STEP, """<!--
placeholders:
  user_message: the user's latest message
  reply: the assistant's reply to it
-->
Read the user's message and the assistant's reply. Name the language each is written in, then answer "yes" if the
reply is written in the language of the user's message, otherwise "no". Judge only the language, not the content.

<user_message>{{ user_message }}</user_message>
<reply_to_judge>{{ reply }}</reply_to_judge>
""")


class LanguageVerdict(BaseModel):
    user_language: str = Field(description="The language of the user's message, e.g. 'French'.")
    reply_language: str = Field(description="The language of the reply.")
    reason: str = Field(description="One sentence.")
    verdict: Literal["yes", "no"] = Field(description="'yes' if the reply is in the user's language, else 'no'.")


class ReplyLanguageState(MetricState, total=False):
    windows: list[Window]
    verdicts: Annotated[list[WindowVerdict], merge_verdicts]


@dataclass(frozen=True, kw_only=True)
class ReplyLanguageSettings(MetricOptions):
    """The options: those of every metric with a pass/fail rule (``threshold``, ``strict_mode``, ``review``,
    ``min_judged``), this one's threshold 1 by default. A metric's own option is one more field made by ``option``."""

    threshold: float = option(1.0, help="the share of replies in the user's language a conversation passes with")


def build_reply_language_graph(settings: ReplyLanguageSettings) -> StateGraph:
    """The uncompiled graph: one judgement per exchange; score = share of replies in the user's language."""
    policy = settings.policy(step=STEP, what="replies in the user's language", where=lambda v: turn_label(v.turns))

    def build(task: WindowTask) -> JudgeRequest:
        target = task["window"].target
        return JudgeRequest(task=TASK, step=STEP, schema=LanguageVerdict, prompt=PROMPT,
                            values={"user_message": target.user_text, "reply": target.reply_text})

    def finish(task: WindowTask, outcome: JudgeOutcome) -> dict[str, Any]:
        return {"verdicts": [window_verdict(WindowVerdict, task["window"], outcome)]}

    def score(state: Any, conversation: Any, verdicts: list[Any]) -> Any:
        return policy.result(conversation, verdicts)

    step = judge_step("judge_language", settings.judge, build, finish)
    return window_graph(settings, ReplyLanguageState, [("judge_language", step)],
                        score_node(settings.name, score, order=lambda v: v.window), windows=window_node(1))


#: The declaration: ``create_reply_language_metric(model=..., threshold=..., review=..., **compile)`` is made from it,
#: and the command line and config files take its options.
SPEC = MetricSpec("reply_language", summary="Does each reply answer in the language the user wrote in? (LLM judge)",
                  settings=ReplyLanguageSettings, build=build_reply_language_graph, needs=frozenset({"llm"}),
                  tasks=(TASK,))
create_reply_language_metric = SPEC.factory
