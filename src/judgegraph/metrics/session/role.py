"""Role adherence: does every assistant turn stay within the chatbot's role?

    START ─Send per batch of assistant turns→ judge_turns → reduce_score → END
      └──(offline judge, no role, no assistant turn)──────────↗

A turn the judge leaves out of its batch is a judge error, never a pass
(docs/session_judges.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from langchain_core.runnables import RunnableLambda
from langgraph.graph import StateGraph
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from ...core.nodes import judge_step, quote
from ...core.scoring import check_whole, clause, option
from ...core.state import MetricState
from ...core.verdicts import list_answer
from ...data.answers import YesNo
from ...data.conversation import Conversation
from ...data.results import MetricResult, Usage, Verdict, merge_verdicts
from ...judges import JudgeOutcome, JudgeRequest
from .._renamed import renamed
from .common import SessionSettings, Step, session_graph, session_spec

JUDGE = Step("role_adherence/judge_turns", "role_adherence", {"role", "conversation", "turns"})
DEFAULT_BATCH_SIZE = 8


class TurnRole(BaseModel):
    turn: int = Field(description="1-based number of the judged assistant turn.")
    reason: str = Field(description="One sentence on why the turn is or is not in role.")
    verdict: YesNo = Field(description="'yes' if the turn stays within the role, otherwise 'no'.")


RoleJudgement = list_answer("RoleJudgement", "verdicts", TurnRole, "One entry per listed assistant turn, in order.",
                            module=__name__)


class RoleVerdict(Verdict):
    """One assistant turn: ``verdict`` "yes" (in role), "no", or None (judge error)."""

    id_fields: ClassVar[tuple[str, ...]] = ("turn",)

    turn: int  # 0-based
    batch: int
    reply: str = ""
    verdict: Literal["yes", "no"] | None = None


@dataclass(frozen=True, kw_only=True)
class RoleSettings(SessionSettings):
    role: str | None = option(None, help="the chatbot's role (else the conversation's chatbot_role, else its system"
                              " messages; none: not applicable)")
    batch_size: int = option(DEFAULT_BATCH_SIZE, help="assistant turns judged per call")

    def check(self) -> None:
        super().check()
        check_whole(self.batch_size, "batch_size")
        if self.role is not None and (not isinstance(self.role, str) or not self.role.strip()):
            raise ValueError(f"role must be a non-empty string (or None to use the conversation's chatbot_role), "
                             f"got {self.role!r}")


def role_of(settings: RoleSettings, conversation: Conversation) -> str | None:
    """The factory's role, else ``chatbot_role``, else the system messages (as MLflow takes it)."""
    system = "\n\n".join(t.content.strip() for t in conversation.turns if t.role == "system" and t.content.strip())
    for role in (settings.role, conversation.chatbot_role, system):
        if role and role.strip():
            return role.strip()
    return None


def assistant_turns(conversation: Conversation) -> list[int]:
    return [i for i, t in enumerate(conversation.turns) if t.role == "assistant" and t.content.strip()]


class Batch(TypedDict):
    batch: int
    turns: list[int]
    role: str


class BatchTask(Batch):
    conversation: Conversation
    transcript: str


class RoleState(MetricState, total=False):
    verdicts: Annotated[list[RoleVerdict], merge_verdicts]


def batches(settings: RoleSettings, conversation: Conversation) -> list[Batch]:
    role, turns, size = role_of(settings, conversation), assistant_turns(conversation), settings.batch_size
    if role is None:
        return []
    return [Batch(batch=b, turns=turns[s: s + size], role=role) for b, s in enumerate(range(0, len(turns), size))]


def _judge_turns(settings: RoleSettings) -> RunnableLambda:
    def build(task: BatchTask) -> JudgeRequest:
        return JUDGE.request(RoleJudgement, {
            "role": task["role"], "conversation": task["transcript"],
            "turns": ", ".join(str(t + 1) for t in task["turns"]),
        })

    def finish(task: BatchTask, outcome: JudgeOutcome) -> RoleState:
        conversation = task["conversation"]
        given: list[TurnRole] = outcome.value.verdicts if outcome.ok else []  # type: ignore[union-attr]
        answers = {item.turn - 1: item for item in reversed(given)}  # the first answer for a turn counts
        out = []
        for k, t in enumerate(task["turns"]):
            item = answers.get(t)
            error = (None if item else f"the judge gave no verdict for turn {t + 1}") if outcome.ok else (
                outcome.error or "no verdict")
            # the call's usage is booked once, on the batch's first turn, so totals add up
            out.append(RoleVerdict(
                turn=t, batch=task["batch"], reply=conversation.turns[t].content, turns=[t],
                verdict=item.verdict if item else None, reason=item.reason if item else "", error=error,
                attempts=outcome.attempts, usage=outcome.usage if k == 0 else Usage()))
        return {"verdicts": out}

    return judge_step(JUDGE.node, settings.judge, build, finish)


def _score(settings: RoleSettings) -> Callable[[RoleState, Conversation], MetricResult]:
    policy = settings.share("assistant turns in role", bad="Out of role", unit="turn(s) ", step=JUDGE.step,
                            where=lambda v: f"turn {v.turn + 1}",
                            describe=lambda v: f"turn {v.turn + 1} {quote(v.reply, 50)}: {clause(v.reason)}")

    def score(state: RoleState, conversation: Conversation) -> MetricResult:
        role = role_of(settings, conversation)
        if not assistant_turns(conversation):
            return policy.conclude(conversation, status="not_applicable", details={"role": role},
                                   reason="No assistant turn with text: there is nothing to hold to the role.")
        t = policy.tally(sorted(state.get("verdicts") or [], key=lambda v: v.turn))
        return policy.result(conversation, t, details={
            "role": role, "assistant_turns": len(t.verdicts), "judged": len(t.judged),
            "batches": len({v.batch for v in t.verdicts}), "batch_size": settings.batch_size,
            "out_of_role_turns": [v.turn for v in t.bad],
        })

    return score


def build_role_graph(settings: RoleSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    return session_graph(settings, RoleState, [(JUDGE.node, _judge_turns(settings))], _score(settings),
                         applies=lambda conversation: role_of(settings, conversation) is not None,
                         tasks=lambda _, conversation: batches(settings, conversation),
                         not_applicable="No chatbot role to judge against: pass role=... (CLI: the role option), or"
                         " give the conversation a chatbot_role or a system message.")


ROLE_ADHERENCE = session_spec(
    "role_adherence", build_role_graph, [JUDGE], settings=RoleSettings,
    summary="Does each reply stay within the chatbot role? yes/no, share in role (LLM judge)")
create_role_adherence_metric = ROLE_ADHERENCE.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
