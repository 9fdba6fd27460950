"""Conversation completeness: did the assistant satisfy every request the user made?

    START ─→ extract_goals ─Send per request→ judge_goal → reduce_score → END
      │              └──(no request)─────────────────────────↗
      └──(offline judge, no user turn)───────────────────────↗

The steps and rules: docs/session_judges.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, ClassVar, Literal

from langchain_core.runnables import RunnableLambda
from langgraph.graph import StateGraph
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from ...core.nodes import judge_step, quote, turn_label
from ...core.scoring import clause
from ...core.verdicts import answer, answer_fields
from ...data.answers import YesNo
from ...data.conversation import Conversation
from ...data.results import MetricResult, Verdict, merge_verdicts
from ...judges import JudgeOutcome, JudgeRequest
from .._renamed import renamed
from .common import (
    ExtractState,
    SessionSettings,
    Step,
    cited_turns,
    extract_step,
    has_user,
    session_graph,
    session_spec,
)

EXTRACT = Step("conversation_completeness/extract_goals", "goal_extraction", {"conversation"})
JUDGE = Step("conversation_completeness/judge_goal", "goal_satisfaction", {"conversation", "request", "asked_in"})


class Goal(BaseModel):
    request: str = Field(description="The request in one short sentence, in the user's terms.")
    asked_in_turns: list[int] = Field(description="1-based numbers of the user turns where it was asked.")


class Goals(BaseModel):
    goals: list[Goal] = Field(description="Every distinct request the user made; empty if none.")


class GoalJudgement(BaseModel):
    reason: str = Field(description="One or two sentences, citing turn numbers.")
    answered_in_turns: list[int] = Field(
        description="1-based numbers of the assistant turns that respond to the request, fully or in part."
    )
    verdict: YesNo = Field(description="'yes' if the request was satisfied, otherwise 'no'.")


class GoalVerdict(Verdict):
    """One user request: ``verdict`` "yes" (satisfied), "no", or None (judge error).
    ``turns`` = the user turns that asked it + the assistant turns that respond to it."""

    id_fields: ClassVar[tuple[str, ...]] = ("goal",)

    goal: int  # position in the extracted list
    request: str
    asked_in: list[int] = Field(default_factory=list)  # 0-based user turns
    answered_in: list[int] = Field(default_factory=list)  # 0-based assistant turns that respond to it
    verdict: Literal["yes", "no"] | None = None


class GoalItem(TypedDict):
    goal: int
    request: str
    asked_in: list[int]


class GoalTask(GoalItem):
    conversation: Conversation
    transcript: str


class CompletenessState(ExtractState, total=False):
    goals: list[GoalItem]
    verdicts: Annotated[list[GoalVerdict], merge_verdicts]


def _goals(value: Goals, conversation: Conversation) -> CompletenessState:
    """The extracted requests, blank ones dropped and repeated ones merged."""
    seen: dict[str, GoalItem] = {}
    for g in value.goals:
        if not (text := " ".join(g.request.split())):
            continue
        asked = cited_turns(g.asked_in_turns, conversation, ("user",))
        if (item := seen.get(text.lower())) is not None:  # the same request listed twice: asked in both places
            item["asked_in"] = sorted({*item["asked_in"], *asked})
        else:
            seen[text.lower()] = GoalItem(goal=len(seen), request=text, asked_in=asked)
    return {"goals": list(seen.values())}


def _judge_goal(settings: SessionSettings) -> RunnableLambda:
    def build(task: GoalTask) -> JudgeRequest:
        asked = ", ".join(str(i + 1) for i in task["asked_in"]) or "(not cited)"
        return JUDGE.request(GoalJudgement, {"conversation": task["transcript"], "request": task["request"],
                                             "asked_in": asked})

    def finish(task: GoalTask, outcome: JudgeOutcome) -> CompletenessState:
        answered = cited_turns(getattr(answer(outcome), "answered_in_turns", []), task["conversation"], ("assistant",))
        return {"verdicts": [GoalVerdict(
            goal=task["goal"], request=task["request"], asked_in=task["asked_in"], answered_in=answered,
            turns=sorted(set(task["asked_in"]) | set(answered)), **answer_fields(outcome),
        )]}

    return judge_step(JUDGE.node, settings.judge, build, finish)


def _describe(v: GoalVerdict) -> str:
    asked = f"asked in {turn_label(v.asked_in)}" if v.asked_in else "asked"
    answered = f"; responses in {turn_label(v.answered_in)}" if v.answered_in else "; no response"
    return f"request {v.goal + 1} {quote(v.request, 70)} ({asked}{answered}): {clause(v.reason)}"


def _score(settings: SessionSettings) -> Callable[[CompletenessState, Conversation], MetricResult]:
    policy = settings.share(
        "user requests satisfied", bad="Not satisfied", describe=_describe, unit="request(s) ", step=JUDGE.step,
        where=lambda v: f"request {v.goal + 1} {quote(v.request, 50)}", empty="The judge found no request from the user.",
        failed="The user's requests could not be extracted (judge error); see errors.")

    def score(state: CompletenessState, conversation: Conversation) -> MetricResult:
        t = policy.tally(sorted(state.get("verdicts") or [], key=lambda v: v.goal), state.get("extract_errors") or ())
        return policy.result(conversation, t, usage=state.get("extract_usage"),
                             details={"requests": len(t.verdicts), "judged": len(t.judged), "satisfied": t.good})

    return score


def build_completeness_graph(settings: SessionSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    return session_graph(
        settings, CompletenessState,
        [extract_step(settings, EXTRACT, Goals, _goals, goals=[]), (JUDGE.node, _judge_goal(settings))], _score(settings),
        applies=has_user, not_applicable="No user turn: the user asked for nothing.",
        tasks=lambda state, _: state.get("goals") or [],
    )


CONVERSATION_COMPLETENESS = session_spec(
    "conversation_completeness", build_completeness_graph, [EXTRACT, JUDGE],
    "Were all the user's requests satisfied by the end? yes/no, share satisfied (LLM judge)",
    doc='Value "yes"/"no" (every judged request satisfied); score = satisfied / judged requests. Calls: 1 extraction'
        ' + 1 per request.')
create_conversation_completeness_metric = CONVERSATION_COMPLETENESS.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
