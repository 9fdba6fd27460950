"""Goal completion: did the conversation reach the user's goal, and at which turn was it reached or lost?

    START ─→ judge_goal → reduce_score → END
      └──(no user turn)──↗

ragas' AgentGoalAccuracy semantics (the goal inferred when none is stated), in one call that also cites the turn;
where the goal is read and every difference: docs/agents.md.
"""

from __future__ import annotations

__all__ = [
    "GoalCompletionJudgement",
    "GoalCompletionVerdict",
    "GoalState",
    "agent_transcript",
    "build_goal_graph",
    "create_goal_completion_metric",
    "stated_goal",
]

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from langchain_core.runnables import RunnableLambda
from langgraph.graph import StateGraph
from pydantic import BaseModel, Field

from ..core.nodes import quote, turn_label
from ..core.scoring import Tally, clause
from ..core.state import MetricState, conversation_of
from ..data.answers import YesNo
from ..data.conversation import Conversation
from ..data.results import Verdict
from ..judges import JudgeRequest
from ._renamed import renamed
from .session.common import (
    SessionSettings,
    Step,
    cited_turns,
    has_user,
    session_graph,
    session_spec,
    verdict_score,
    verdict_step,
)

JUDGE = Step("goal_completion/judge_goal", "goal_completion", {"conversation", "goal"})
INFER = "(no goal is stated: infer the user's goal from the conversation)"


def stated_goal(conversation: Conversation) -> tuple[str | None, str]:
    """The goal the conversation states and where it was read, first found of: ``expected_outcome``
    (deepeval's ``expectedOutcome``; a simulated scenario's goal), metadata ``goal``, metadata
    ``reference`` (ragas), metadata ``expectations`` (MLflow: ``expected_outcome``, ``goal``,
    ``expected_output``, or a text); ``(None, "inferred")`` when none is."""
    meta = conversation.metadata
    expectations = meta.get("expectations")
    inside = expectations if isinstance(expectations, Mapping) else {}
    found = [(conversation.expected_outcome, "expected_outcome"), (meta.get("goal"), "metadata.goal"),
             (meta.get("reference"), "metadata.reference"), (expectations, "metadata.expectations")]
    found += [(inside.get(k), f"metadata.expectations.{k}") for k in ("expected_outcome", "goal", "expected_output")]
    for text, source in found:
        if isinstance(text, str) and text.strip():
            return text.strip(), source
    return None, "inferred"


def agent_transcript(conversation: Conversation) -> str:
    """The conversation as JSON ``{turn, role, content}`` rows (1-based turns), an assistant turn's
    tool calls (name, arguments, output) included: a prompt value, never template source."""
    rows = []
    for i, t in enumerate(conversation.turns):
        calls = [{"name": c.name, "arguments": c.arguments, "output": c.output} for c in t.tool_calls]
        rows.append({"turn": i + 1, "role": t.role, "content": t.content, **({"tool_calls": calls} if calls else {})})
    return json.dumps(rows, ensure_ascii=False, indent=1, default=str)


class GoalCompletionJudgement(BaseModel):
    user_goal: str = Field(description="The user's goal in one sentence (the stated goal when one is given).")
    end_state: str = Field(description="What had been achieved for the user when the conversation ended.")
    reason: str = Field(description="Two or three sentences comparing the end state with the goal, citing turns.")
    turn: int | None = Field(description="1-based number of the assistant turn where the goal was reached ('yes')"
                                         " or lost ('no'); null if none applies.")
    verdict: YesNo = Field(description="'yes' if the end state reaches the goal, else 'no'.")


class GoalCompletionVerdict(Verdict):
    """``verdict`` "yes" (reached) | "no"; ``turns`` the assistant turn where it was reached or lost (0-based)."""

    id_fields: ClassVar[tuple[str, ...]] = ()

    verdict: Literal["yes", "no"] | None = None
    goal: str = ""
    goal_source: str = ""
    end_state: str = ""


class GoalState(MetricState, total=False):
    verdicts: list[GoalCompletionVerdict]


def _judge_goal(settings: SessionSettings) -> tuple[str, RunnableLambda]:
    def build(state: Mapping[str, Any]) -> JudgeRequest:
        conversation = conversation_of(state)
        goal, _ = stated_goal(conversation)
        return JUDGE.request(GoalCompletionJudgement, {"conversation": agent_transcript(conversation),
                                                       "goal": goal or INFER})

    return verdict_step(settings, JUDGE, build, _verdict)


def _verdict(conversation: Conversation, value: Any, fields: Mapping[str, Any]) -> GoalCompletionVerdict:
    goal, source = stated_goal(conversation)
    cited = getattr(value, "turn", None)
    turns = cited_turns([cited] if cited is not None else [], conversation, ("assistant",))
    return GoalCompletionVerdict(
        turns=turns, goal=goal or str(getattr(value, "user_goal", "")), goal_source=source,
        end_state=getattr(value, "end_state", ""), **fields)


def _reason(t: Tally, v: GoalCompletionVerdict) -> str:
    where = f" in {turn_label(v.turns)}" if v.turns else ""
    head = f"Goal reached{where}" if v.verdict == "yes" else f"Goal not reached (lost{where})" if where else \
        "Goal not reached"
    goal = f"goal ({'inferred' if v.goal_source == 'inferred' else v.goal_source}) {quote(v.goal, 80)}"
    return f"{head}{t.gate}: {goal}; end state {quote(v.end_state, 80)}. {clause(v.reason)}."


def _details(v: GoalCompletionVerdict) -> dict[str, Any]:
    if not v.verdict:
        return {"goal_source": v.goal_source}
    return {"goal": v.goal, "goal_source": v.goal_source, "end_state": v.end_state,
            ("reached_in_turn" if v.verdict == "yes" else "lost_in_turn"): v.turns[0] + 1 if v.turns else None}


def build_goal_graph(settings: SessionSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    return session_graph(settings, GoalState, [_judge_goal(settings)], verdict_score(settings, JUDGE.step, _reason, _details),
                         applies=has_user, not_applicable="No user turn: there is no user goal to reach.")


GOAL_COMPLETION = session_spec(
    "goal_completion", build_goal_graph, [JUDGE],
    "Did the conversation reach its stated (or inferred) goal, and at which turn? (ragas; LLM judge)",
    doc='The goal is ``expected_outcome`` (or metadata ``goal``, ``reference``, ``expectations``; inferred when none'
        ' is given). Value "yes"/"no"; score 1 or 0; the turn of the verdict is where the goal was reached or lost. One'
        ' call.')
create_goal_completion_metric = GOAL_COMPLETION.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
