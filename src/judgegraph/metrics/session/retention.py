"""Knowledge retention: does the assistant keep what the user told it?

    START ─→ extract_facts ─Send per assistant turn→ check_turn → reduce_score → END
      │              └──(no fact, no later assistant turn)───────────────↗
      └──(offline judge, no user turn answered)───────────────────────────↗

Each assistant turn is checked for *lapses* against the facts stated before it
(docs/session_judges.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, ClassVar, Literal

from langchain_core.runnables import RunnableLambda
from langgraph.graph import StateGraph
from pydantic import BaseModel, BeforeValidator, Field
from typing_extensions import TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from ...core.nodes import conversation_json, judge_step, quote
from ...core.scoring import clause
from ...core.verdicts import answer, answer_fields
from ...data.answers import YesNo, read_choice
from ...data.conversation import Conversation
from ...data.results import MetricResult, Verdict, merge_verdicts
from ...judges import JudgeOutcome, JudgeRequest
from .._renamed import renamed
from .common import (
    CitingJudgement,
    ExtractState,
    SessionSettings,
    Step,
    cited_turns,
    extract_step,
    role_indices,
    session_graph,
    session_spec,
)

EXTRACT = Step("knowledge_retention/extract_facts", "fact_extraction", {"conversation"})
CHECK = Step("knowledge_retention/check_turn", "fact_retention", {"conversation", "facts", "turn"})


class Fact(BaseModel):
    turn: int = Field(description="1-based number of the user turn that stated it.")
    fact: str = Field(description="The fact in one short, self-contained sentence.")


class Facts(BaseModel):
    facts: list[Fact] = Field(description="Every fact the user stated, in turn order; empty if none.")


class Lapse(BaseModel):
    fact: str = Field(description="The fact that was not retained, as listed.")
    stated_in_turn: int = Field(description="1-based number of the user turn that stated it.")
    kind: Annotated[Literal["contradicted", "forgotten"],
                    BeforeValidator(read_choice(("contradicted", "forgotten")))] = Field(
        description="'contradicted': the turn states or assumes something that conflicts with the fact; "
        "'forgotten': it asks for the fact again, or ignores it where it matters."
    )


class TurnRetention(CitingJudgement):
    cites, citing, calm = "lapses", frozenset({"no"}), "yes"
    missing = "verdict 'no' needs at least one lapse: name the fact that was not retained"
    stray = "verdict '{verdict}' means no lapse: either empty 'lapses' or answer 'no'"

    reason: str = Field(description="One or two sentences, citing turn numbers.")
    lapses: list[Lapse] = Field(description="Every fact the judged turn contradicts or forgets; empty if none.")
    verdict: YesNo = Field(description="'yes' if the turn retained every fact (no lapse), else 'no'.")


class LapseInfo(BaseModel):
    fact: str
    stated_in: int | None  # 0-based user turn (None when the judge cited no valid user turn)
    kind: Literal["contradicted", "forgotten"]


class RetentionVerdict(Verdict):
    """One assistant turn: ``verdict`` "yes" (retained), "no" (a lapse), None
    (judge error). ``turns`` = the judged turn + the turns that stated the facts it lost."""

    id_fields: ClassVar[tuple[str, ...]] = ("turn",)

    turn: int  # 0-based index of the judged assistant turn
    reply: str = ""
    lapses: list[LapseInfo] = Field(default_factory=list)
    verdict: Literal["yes", "no"] | None = None


class FactItem(TypedDict):
    turn: int  # 0-based user turn
    fact: str


class TurnItem(TypedDict):
    turn: int
    facts: list[FactItem]


class TurnTask(TurnItem):
    conversation: Conversation


class RetentionState(ExtractState, total=False):
    facts: list[FactItem]
    dropped_facts: int
    verdicts: Annotated[list[RetentionVerdict], merge_verdicts]


def judged_turns(conversation: Conversation, facts: list[FactItem]) -> list[int]:
    """Assistant turns with a non-blank text that come after at least one fact."""
    if not facts:
        return []
    first = min(f["turn"] for f in facts)
    return [i for i in role_indices(conversation, "assistant") if i > first and conversation.turns[i].content.strip()]


def _has_replies(conversation: Conversation) -> bool:
    users = role_indices(conversation, "user")
    return bool(users) and any(i > users[0] for i in role_indices(conversation, "assistant"))


def _facts(value: Facts, conversation: Conversation) -> RetentionState:
    """The extracted facts, each tied to the user turn that stated it; the others are counted as dropped."""
    facts: list[FactItem] = []
    dropped = 0
    for f in value.facts:
        turn = cited_turns([f.turn], conversation, ("user",))
        text = " ".join(f.fact.split())
        if not turn or not text:
            dropped += 1  # not tied to a real user turn: it cannot be placed before or after a reply
            continue
        item = FactItem(turn=turn[0], fact=text)
        if item not in facts:
            facts.append(item)
    return {"facts": sorted(facts, key=lambda f: f["turn"]), "dropped_facts": dropped}


def turn_tasks(state: RetentionState, conversation: Conversation) -> list[TurnItem]:
    facts = state.get("facts") or []
    return [TurnItem(turn=t, facts=[f for f in facts if f["turn"] < t]) for t in judged_turns(conversation, facts)]


def _check_turn(settings: SessionSettings) -> RunnableLambda:
    def build(task: TurnTask) -> JudgeRequest:
        conversation = task["conversation"]
        upto = conversation.model_copy(update={"turns": conversation.turns[: task["turn"] + 1]})
        facts = "\n".join(f"- (turn {f['turn'] + 1}) {f['fact']}" for f in task["facts"])
        return CHECK.request(TurnRetention, {
            "conversation": conversation_json(upto), "facts": facts, "turn": str(task["turn"] + 1),
        })

    def finish(task: TurnTask, outcome: JudgeOutcome) -> RetentionState:
        conversation = task["conversation"]
        lapses = []
        for lapse in getattr(answer(outcome), "lapses", []):
            stated = cited_turns([lapse.stated_in_turn], conversation, ("user",))
            stated = [s for s in stated if s < task["turn"]]
            lapses.append(LapseInfo(fact=lapse.fact, stated_in=stated[0] if stated else None, kind=lapse.kind))
        turns = {task["turn"], *(lp.stated_in for lp in lapses if lp.stated_in is not None)}
        return {"verdicts": [RetentionVerdict(
            turn=task["turn"], reply=conversation.turns[task["turn"]].content, lapses=lapses, turns=sorted(turns),
            **answer_fields(outcome),
        )]}

    return judge_step(CHECK.node, settings.judge, build, finish)


def _describe(v: RetentionVerdict) -> str:
    lost = "; ".join(
        f"{lp.kind} {quote(lp.fact, 60)}"
        + (f" (stated in turn {lp.stated_in + 1})" if lp.stated_in is not None else "")
        for lp in v.lapses
    )
    return f"turn {v.turn + 1} {quote(v.reply, 50)} {lost}: {clause(v.reason)}"


def _score(settings: SessionSettings) -> Callable[[RetentionState, Conversation], MetricResult]:
    def score(state: RetentionState, conversation: Conversation) -> MetricResult:
        facts = state.get("facts") or []
        policy = settings.share(
            "assistant turns retained what the user said", bad="Lapses", describe=_describe, unit="turn(s) ",
            step=CHECK.step, where=lambda v: f"turn {v.turn + 1}",
            failed="The user's facts could not be extracted (judge error); see errors.",
            empty="No assistant turn comes after a fact the user stated." if facts
            else "The user stated no fact for the assistant to retain.")
        t = policy.tally(sorted(state.get("verdicts") or [], key=lambda v: v.turn), state.get("extract_errors") or ())
        return policy.result(conversation, t, usage=state.get("extract_usage"), details={
            "facts": [dict(f) for f in facts], "dropped_facts": state.get("dropped_facts", 0),
            "assistant_turns": len(t.verdicts),
            "judged": len(t.judged), "retained": t.good, "failed_turns": [v.turn for v in t.bad],
        })

    return score


def build_retention_graph(settings: SessionSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    return session_graph(
        settings, RetentionState,
        [extract_step(settings, EXTRACT, Facts, _facts, facts=[]), (CHECK.node, _check_turn(settings))],
        _score(settings), applies=_has_replies, tasks=turn_tasks,
        not_applicable="No assistant turn after a user turn: there is nothing to retain.",
    )


KNOWLEDGE_RETENTION = session_spec(
    "knowledge_retention", build_retention_graph, [EXTRACT, CHECK],
    "Does each reply keep the facts the user gave earlier? yes/no, share of turns (LLM judge)",
    doc='Value "yes"/"no" (no judged turn has a lapse); score = assistant turns that retained / assistant turns'
        ' judged. Calls: 1 extraction + 1 per assistant turn after the first fact.')
create_knowledge_retention_metric = KNOWLEDGE_RETENTION.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
