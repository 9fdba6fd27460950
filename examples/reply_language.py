"""Does each reply answer in the language the user wrote in? A whole metric in
one file, written only against judgegraph's public API for metric authors (``judgegraph.metric``); it gets every
capability a built-in metric has (transcripts and `show`, review, re-judging,
the latest scope, dry-run estimates, the HTML report) with no change to the core.

    judgegraph eval examples/support_chats.jsonl -m examples.reply_language:SPEC --model openai:gpt-4.1-mini

    START → window_turns ─Send per exchange→ judge_language [→ review_verdicts] → reduce_score → END
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from judgegraph.metric import (
    Judge,
    JudgeOutcome,
    JudgeRequest,
    MetricInput,
    MetricOutput,
    MetricSpec,
    MetricState,
    ModelLike,
    Window,
    WindowVerdict,
    check_threshold,
    fan_out,
    judge_step,
    make_result,
    merge_verdicts,
    outcome_fields,
    parse_prompt,
    require_tasks,
    resolve_judge,
    score_node,
    scoring_edges,
    turn_label,
    window_node,
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


class WindowTask(TypedDict):
    window: Window


def build_reply_language_graph(judge: Judge, *, name: str = "reply_language", threshold: float = 1.0,
                               review: bool = False, min_judged: float | None = None) -> StateGraph:
    """The uncompiled graph: one judgement per exchange; score = share of replies in the user's language."""

    def build(task: WindowTask) -> JudgeRequest:
        target = task["window"].target
        return JudgeRequest(task=TASK, step=STEP, schema=LanguageVerdict, prompt=PROMPT,
                            values={"user_message": target.user_text, "reply": target.reply_text})

    def finish(task: WindowTask, outcome: JudgeOutcome) -> dict[str, Any]:
        window, value = task["window"], outcome.value if outcome.ok else None
        verdict = WindowVerdict(window=window.index, turns=list(window.target.reply_turn_indices),
                                reply=window.target.reply_text, verdict=getattr(value, "verdict", None),
                                reason=getattr(value, "reason", ""), **outcome_fields(outcome))
        return {"verdicts": [verdict]}

    def score(state: Any, conversation: Any, verdicts: list[Any]) -> Any:
        return make_result(name, conversation, verdicts, judge=judge, threshold=threshold, step=STEP,
                                 what="replies in the user's language", where=lambda v: turn_label(v.turns),
                                 min_judged=min_judged)

    builder = StateGraph(ReplyLanguageState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("window_turns", window_node(1))
    builder.add_node("judge_language", judge_step("judge_language", judge, build, finish))
    builder.add_node("reduce_score", score_node(name, score, order=lambda v: v.window))
    builder.add_edge(START, "window_turns")
    route = fan_out("judge_language", "windows", item="window", empty="reduce_score")
    builder.add_conditional_edges("window_turns", route, ["judge_language", "reduce_score"])
    scoring_edges(builder, ["judge_language"], review=review, metric=name)
    builder.add_edge("reduce_score", END)
    return builder


def create_reply_language_judge(*, model: ModelLike = None, threshold: float = 1.0, review: bool = False,
                                min_judged: float | None = None, name: str = "reply_language",
                                **compile: Any) -> CompiledStateGraph:
    """``model``: an LLM judge (a chat model or ``"openai:gpt-4.1-mini"``); ``compile``: LangGraph's compile options."""
    check_threshold(threshold)
    judge = require_tasks(resolve_judge(model), [TASK], name)
    graph = build_reply_language_graph(judge, name=name, threshold=threshold, review=review, min_judged=min_judged)
    return graph.compile(name=name, **compile)


SPEC = MetricSpec("reply_language", create_reply_language_judge,
                  "Does each reply answer in the language the user wrote in? (LLM judge)",
                  frozenset({"threshold"}), needs=frozenset({"llm"}))
