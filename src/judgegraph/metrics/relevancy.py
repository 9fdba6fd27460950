"""Turn relevancy (deepeval semantics) and conversation relevance (promptfoo
semantics): one graph, two presets.

    START → window_turns ─Send per window→ judge_turn → reduce_score [→ write_reason] → END

Score = relevant / judged windows; ``reason="llm"`` adds one call writing the reason; ``dense=N`` judges N
consecutive windows per call, one verdict each (:mod:`judgegraph.core._dense`).
"""

from __future__ import annotations

__all__ = [
    "MetricInput",
    "MetricOutput",
    "RelevancySettings",
    "RelevancyState",
    "TurnVerdict",
    "build_relevancy_graph",
    "create_conversation_relevance_metric",
    "create_turn_relevancy_metric",
    "deterministic_reason",
    "turn_request",
]

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, StateGraph
from pydantic import BaseModel, Field

from ..core._dense import DensePlan, check_dense, dense_step, fan_out_blocks
from ..core.nodes import Node, WindowTask, judge_step, quote, score_node, turn_label, window_graph
from ..core.scoring import WindowOptions, option, share_reason
from ..core.state import MetricInput, MetricOutput, MetricState
from ..core.verdicts import exchange_values, window_verdict, window_where
from ..data.answers import YesNo
from ..data.conversation import Conversation
from ..data.prompts import Prompt, load_prompt
from ..data.results import JudgeErrorInfo, MetricResult, WindowVerdict, merge_verdicts
from ..data.windows import Window
from ..judges import JudgeOutcome, JudgeRequest
from . import MetricSpec
from ._renamed import renamed

JUDGE_STEP = "turn_relevancy/judge_turn"
REASON_STEP = "turn_relevancy/write_reason"
DEFAULT_RUBRIC_STEP = "turn_relevancy/rubric"
DENSE_STEP = "turn_relevancy/judge_dense"

ReasonMode = Literal["deterministic", "llm", "none"]


class TurnVerdict(BaseModel):
    """The judge's answer for one window (the reason first, so the model reasons before it commits)."""

    reason: str = Field(description="One or two sentences explaining the verdict.")
    verdict: YesNo = Field(
        description="'yes' if the reply is relevant to the latest user message, otherwise 'no'."
    )


class WrittenReason(BaseModel):
    reason: str = Field(description="A short explanation of the score for a reader.")


class RelevancyState(MetricState, total=False):
    windows: list[Window]
    verdicts: Annotated[list[WindowVerdict], merge_verdicts]


@dataclass(frozen=True, kw_only=True)
class RelevancySettings(WindowOptions):
    """The shared options, how the reason is written and what counts as relevant (``rubric``)."""

    reason: ReasonMode = option("deterministic", help="how the reason is written: 'deterministic', 'llm' (one more"
                                " call) or 'none'")
    rubric: str | None = option(None, help="instructions on what counts as relevant, replacing the prompt's own"
                                " (promptfoo's rubricPrompt)")
    dense: int | None = option(None, help="windows judged per call (docs/cost.md); None: one call per window")

    def check(self) -> None:
        super().check()
        if check_dense(self.dense) and self.judge.kind != "llm":
            raise ValueError("dense=N needs an LLM judge (pass model=...): the offline judge makes no calls to merge")
        if self.reason == "llm" and self.judge.kind != "llm":
            raise ValueError("reason='llm' needs an LLM judge (pass model=...)")


def turn_inputs(window: Window) -> dict[str, Any]:
    """What the offline judge reads of a window (:meth:`Window.offline_inputs`)."""
    return window.offline_inputs()


def turn_request(window: Window, *, rubric: str, prompt: Prompt | None = None) -> JudgeRequest:
    target = window.target
    tools: list[tuple[str, str]] = [(it.turn.role, it.turn.content) for it in target.tool]
    values = exchange_values(target.user_text, window.context_messages() + tools, window.system)
    return JudgeRequest(task="turn_relevance", step=JUDGE_STEP, schema=TurnVerdict, prompt=prompt,
                        values={"rubric": rubric, **values, "reply": target.reply_text}, inputs=window.offline_inputs())


def _judge_turn(settings: RelevancySettings) -> RunnableLambda:
    rubric = settings.rubric if settings.rubric is not None else load_prompt(DEFAULT_RUBRIC_STEP).template.strip()

    def build(task: WindowTask) -> JudgeRequest:
        return turn_request(task["window"], rubric=rubric)

    def finish(task: WindowTask, outcome: JudgeOutcome) -> RelevancyState:
        return {"verdicts": [window_verdict(WindowVerdict, task["window"], outcome)]}

    size = check_dense(settings.dense)
    if size:
        def shared(window: Window) -> dict[str, str]:
            return {"rubric": rubric, "system": "\n\n".join(window.system) or "(none)"}

        plan = DensePlan(size=size, step=DENSE_STEP, task="turn_relevance_dense", item_schema=TurnVerdict,
                         shared=shared)
        return dense_step("judge_turn", settings.judge, plan, finish)
    return judge_step("judge_turn", settings.judge, build, finish)


def _describe(v: WindowVerdict) -> str:
    return f"{turn_label(v.turns)} {quote(v.reply)}: {v.reason}" if v.reply else f"{turn_label(v.turns)}: {v.reason}"


#: The deterministic reason: the share of relevant replies, each irrelevant one with the judge's reason.
deterministic_reason = share_reason(
    "replies judged relevant", bad="Irrelevant", describe=_describe, unit="window(s) ",
    empty="No assistant reply to judge: the conversation has no user→assistant exchange.",
)


def _reduce_score(settings: RelevancySettings) -> Node:
    policy = settings.policy(step=JUDGE_STEP, reason="" if settings.reason == "none" else deterministic_reason,
                             where=window_where)

    size = check_dense(settings.dense)

    def score(state: RelevancyState, conversation: Conversation, verdicts: list[Any]) -> MetricResult:
        t = policy.tally(verdicts)
        dense = {"dense": size} if size else {}  # the mode the verdicts were made in (a re-judge keeps it)
        return policy.result(conversation, t, details={
            "window_size": settings.window_size, **dense, "windows": len(verdicts), "judged": len(t.judged)})

    return score_node(settings.name, score, order=lambda v: v.window)


def _write_reason(settings: RelevancySettings) -> RunnableLambda:
    def build(state: RelevancyState) -> JudgeRequest:
        result = state["results"][settings.name]
        lines = [f"- {turn_label(v.turns)}: {'relevant' if v.relevant else 'irrelevant' if v.verdict else 'not judged'}"
                 f" — {v.reason or v.error}" for v in result.verdicts]
        return JudgeRequest(task="write_reason", step=REASON_STEP, schema=WrittenReason, values={
            "score": "n/a" if result.score is None else f"{result.score:.2f}", "threshold": f"{result.threshold:.2f}",
            "verdicts": "\n".join(lines) or "(no verdicts)"})

    def finish(state: RelevancyState, outcome: JudgeOutcome) -> RelevancyState:
        result = state["results"][settings.name]
        said = ({"reason": outcome.value.reason} if outcome.ok else  # type: ignore[union-attr]
                {"errors": [*result.errors, JudgeErrorInfo(where="reason", step=REASON_STEP, message=outcome.error or "",
                                                           attempts=outcome.attempts)]})
        return {"results": {settings.name: result.model_copy(update={
            "usage": result.usage + outcome.usage, "transcript": [*result.transcript, *outcome.transcript], **said})}}

    return judge_step("write_reason", settings.judge, build, finish)


def build_relevancy_graph(settings: RelevancySettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    size = check_dense(settings.dense)
    builder = window_graph(settings, RelevancyState, [("judge_turn", _judge_turn(settings))], _reduce_score(settings),
                           route=fan_out_blocks("judge_turn", size, empty="reduce_score") if size else None,
                           end=settings.reason != "llm")
    if settings.reason == "llm":
        builder.add_node("write_reason", _write_reason(settings))
        builder.add_edge("reduce_score", "write_reason")
        builder.add_edge("write_reason", END)
    return builder


TURN_RELEVANCY = MetricSpec(
    "turn_relevancy", summary="Is each assistant reply relevant to its window of the conversation? (deepeval; window 10)",
    settings=RelevancySettings, build=build_relevancy_graph, capabilities=frozenset({"offline_rule"}),
    prompt_values={JUDGE_STEP: {"rubric", "system", "context", "user_message", "reply"},
                   REASON_STEP: {"score", "threshold", "verdicts"}, DEFAULT_RUBRIC_STEP: set(),
                   DENSE_STEP: {"rubric", "system", "exchanges", "items"}})
CONVERSATION_RELEVANCE = MetricSpec(
    "conversation_relevance", settings=RelevancySettings, build=build_relevancy_graph, defaults={"window_size": 5},
    capabilities=frozenset({"offline_rule"}), prompt_values=TURN_RELEVANCY.prompt_values,
    summary="Share of replies relevant in sliding windows of input/output pairs (promptfoo; window 5)",
    doc="promptfoo's semantics: one window per input/output pair holding it and up to ``window_size - 1`` earlier"
        " pairs; ``rubric`` is promptfoo's ``rubricPrompt``.")
create_turn_relevancy_metric = TURN_RELEVANCY.factory
create_conversation_relevance_metric = CONVERSATION_RELEVANCE.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
