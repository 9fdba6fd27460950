"""User frustration: did the user get frustrated, and was it resolved?

    START ─→ judge_frustration → reduce_score → END
      └──(offline judge, no user turn)──↗

One call answers "none", "resolved" or "unresolved" (docs/session_judges.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from langchain_core.runnables import RunnableLambda
from langgraph.graph import StateGraph
from pydantic import BeforeValidator, Field

from ...core.nodes import turn_label
from ...core.scoring import Tally
from ...core.state import MetricState
from ...data.answers import read_choice
from ...data.conversation import Conversation
from ...data.results import Verdict
from .._renamed import renamed
from .common import (
    CitingJudgement,
    SessionSettings,
    Step,
    cited_turns,
    conversation_request,
    has_user,
    session_graph,
    session_spec,
    verdict_score,
    verdict_step,
)

JUDGE = Step("user_frustration/judge_frustration", "user_frustration", {"conversation"})
SCORES = {"none": 1.0, "resolved": 0.5, "unresolved": 0.0}


class FrustrationJudgement(CitingJudgement):
    cites, citing, calm = "frustrated_turns", frozenset({"resolved", "unresolved"}), "none"
    missing = "verdict '{verdict}' needs the user turns that show frustration"
    stray = "verdict '{verdict}' means no frustrated turn: empty 'frustrated_turns' or change the verdict"

    reason: str = Field(description="Two or three sentences, citing turn numbers.")
    frustrated_turns: list[int] = Field(description="1-based numbers of the user turns that show frustration.")
    resolved_by_turns: list[int] = Field(
        description="1-based numbers of the assistant turns that resolved it (empty unless 'resolved')."
    )
    verdict: Annotated[Literal["none", "resolved", "unresolved"],
                       BeforeValidator(read_choice(("none", "resolved", "unresolved")))] = Field(
        description="'none': no frustration; 'resolved': frustration shown, then resolved; 'unresolved': "
        "frustration shown and not resolved by the end."
    )


class FrustrationVerdict(Verdict):
    """``verdict``: "none" | "resolved" | "unresolved" (None on a judge error).
    ``turns`` = frustrated user turns + resolving assistant turns (0-based)."""

    id_fields: ClassVar[tuple[str, ...]] = ()

    verdict: Literal["none", "resolved", "unresolved"] | None = None
    frustrated_turns: list[int] = Field(default_factory=list)
    resolved_by_turns: list[int] = Field(default_factory=list)


class FrustrationState(MetricState, total=False):
    verdicts: list[FrustrationVerdict]


def _judge_frustration(settings: SessionSettings) -> tuple[str, RunnableLambda]:
    return verdict_step(settings, JUDGE, conversation_request(JUDGE, FrustrationJudgement), _verdict)


def _verdict(conversation: Conversation, value: Any, fields: Mapping[str, Any]) -> FrustrationVerdict:
    frustrated = cited_turns(getattr(value, "frustrated_turns", []), conversation, ("user",))
    resolved = getattr(value, "resolved_by_turns", []) if getattr(value, "verdict", None) == "resolved" else []
    resolved_by = cited_turns(resolved, conversation, ("assistant",))
    return FrustrationVerdict(
        frustrated_turns=frustrated, resolved_by_turns=resolved_by, turns=sorted({*frustrated, *resolved_by}),
        **fields,
    )


def _reason(t: Tally, v: Any) -> str:  # a judged verdict: never None
    head = {
        "none": "No user frustration",
        "resolved": f"Frustration resolved: shown in {turn_label(v.frustrated_turns)}"
                    + (f", resolved by {turn_label(v.resolved_by_turns)}" if v.resolved_by_turns else ""),
        "unresolved": f"Frustration unresolved: shown in {turn_label(v.frustrated_turns)}",
    }[v.verdict]
    return f"{head}{t.gate}. {v.reason}".strip()


def _details(v: FrustrationVerdict) -> dict[str, list[int]]:
    return {"frustrated_turns": v.frustrated_turns, "resolved_by_turns": v.resolved_by_turns} if v.verdict else {}


def build_frustration_graph(settings: SessionSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    return session_graph(settings, FrustrationState, [_judge_frustration(settings)],
                         verdict_score(settings, JUDGE.step, _reason, _details,
                                       score=lambda judged: SCORES[judged[0].verdict]), applies=has_user,
                         not_applicable="No user turn: there is no user to be frustrated.")


USER_FRUSTRATION = session_spec(
    "user_frustration", build_frustration_graph, [JUDGE],
    "Was the user frustrated, and was it resolved? none/resolved/unresolved (LLM judge)",
    doc='Value "none" | "resolved" | "unresolved"; score 1.0 / 0.5 / 0.0; passes unless "unresolved" (threshold'
        ' 0.5); strict mode: only "none" passes. One call.')
create_user_frustration_metric = USER_FRUSTRATION.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
