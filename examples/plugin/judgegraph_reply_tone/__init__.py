"""Does each reply keep the tone asked for? A judgegraph metric from another package: its entry point
(pyproject.toml, group ``judgegraph.metrics``) names :data:`SPEC`, so once installed it runs as
``judgegraph eval chats.jsonl -m reply-tone --model openai:gpt-4.1-mini``, with its own option ``tone``.

    START → window_turns ─Send per exchange→ judge_tone [→ review_verdicts] → reduce_score → END
"""

from __future__ import annotations

from importlib.resources import files
from typing import Annotated, Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from judgegraph.metric import (
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

STEP, TASK = "reply_tone/judge_tone", "reply_tone"


class ToneVerdict(BaseModel):
    reason: str = Field(description="One sentence.")
    verdict: Literal["yes", "no"] = Field(description="'yes' if the reply keeps the tone, else 'no'.")


class ReplyToneState(MetricState, total=False):
    windows: list[Window]
    verdicts: Annotated[list[WindowVerdict], merge_verdicts]


class WindowTask(TypedDict):
    window: Window


def create_reply_tone_judge(*, model: ModelLike = None, tone: str = "friendly and professional",
                            threshold: float = 1.0, review: bool = False, min_judged: float | None = None,
                            name: str = "reply_tone", **compile: Any) -> CompiledStateGraph:
    """One judgement per exchange; score = share of replies in ``tone``. ``model``: an LLM judge."""
    check_threshold(threshold)
    if not isinstance(tone, str) or not tone.strip():
        raise ValueError(f"reply_tone: tone is a text such as 'formal', got {tone!r}")
    judge = require_tasks(resolve_judge(model), [TASK], name)
    prompt = parse_prompt(STEP, (files(__name__) / "prompts" / "judge_tone.md").read_text(encoding="utf-8"))

    def ask(task: WindowTask) -> JudgeRequest:
        target = task["window"].target
        return JudgeRequest(task=TASK, step=STEP, schema=ToneVerdict, prompt=prompt,
                            values={"tone": tone, "user_message": target.user_text, "reply": target.reply_text})

    def keep(task: WindowTask, outcome: JudgeOutcome) -> dict[str, Any]:
        window, value = task["window"], outcome.value if outcome.ok else None
        return {"verdicts": [WindowVerdict(window=window.index, turns=list(window.target.reply_turn_indices),
                                           reply=window.target.reply_text, verdict=getattr(value, "verdict", None),
                                           reason=getattr(value, "reason", ""), **outcome_fields(outcome))]}

    def score(state: Any, conversation: Any, verdicts: list[Any]) -> Any:
        return make_result(name, conversation, verdicts, judge=judge, threshold=threshold, step=STEP,
                           what=f"replies in the tone {tone!r}", where=lambda v: turn_label(v.turns), min_judged=min_judged)

    builder = StateGraph(ReplyToneState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("window_turns", window_node(1))
    builder.add_node("judge_tone", judge_step("judge_tone", judge, ask, keep))
    builder.add_node("reduce_score", score_node(name, score, order=lambda v: v.window))
    builder.add_edge(START, "window_turns")
    builder.add_conditional_edges("window_turns", fan_out("judge_tone", "windows", item="window", empty="reduce_score"),
                                  ["judge_tone", "reduce_score"])
    scoring_edges(builder, ["judge_tone"], review=review, metric=name)
    builder.add_edge("reduce_score", END)
    return builder.compile(name=name, **compile)


SPEC = MetricSpec("reply_tone", create_reply_tone_judge, "Does each reply keep the tone asked for? (LLM judge; plugin)",
                  frozenset({"threshold", "tone"}), needs=frozenset({"llm"}))
