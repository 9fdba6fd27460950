"""Conversational guidelines: did the assistant follow each guideline throughout?

    START ─Send per guideline→ judge_guideline → reduce_score → END
      └──(offline judge, no assistant turn)────────↗

A guideline with no occasion to apply is "not_applicable", left out of the score
(docs/session_judges.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from langchain_core.runnables import RunnableLambda
from langgraph.graph import StateGraph
from pydantic import BeforeValidator, Field
from typing_extensions import TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from ...core.nodes import judge_step, quote, turn_label
from ...core.scoring import Tally, clause, option
from ...core.state import MetricState
from ...core.verdicts import answer, answer_fields
from ...data.answers import read_choice
from ...data.conversation import Conversation
from ...data.results import MetricResult, Verdict, merge_verdicts
from ...judges import JudgeOutcome, JudgeRequest
from .._renamed import renamed
from .common import CitingJudgement, SessionSettings, Step, cited_turns, role_indices, session_graph, session_spec

JUDGE = Step("conversational_guidelines/judge_guideline", "guideline_adherence", {"conversation", "guideline"})


class GuidelineJudgement(CitingJudgement):
    cites, citing, calm = "violating_turns", frozenset({"no"}), "yes"
    missing = "verdict 'no' needs the assistant turns that break the guideline"
    stray = "verdict '{verdict}' means no violating turn: empty 'violating_turns' or answer 'no'"

    reason: str = Field(description="One or two sentences, citing turn numbers.")
    violating_turns: list[int] = Field(
        description="1-based numbers of the assistant turns that break the guideline (empty unless 'no')."
    )
    verdict: Annotated[Literal["yes", "no", "not_applicable"], BeforeValidator(
        read_choice(("yes", "no", "not_applicable"), {"n/a": "not_applicable"}))] = Field(
        description="'yes': followed throughout; 'no': broken in at least one assistant turn; "
        "'not_applicable': nothing in the conversation gives the guideline occasion to apply."
    )


class GuidelineVerdict(Verdict):
    """One guideline: ``verdict`` "yes" | "no" | "not_applicable" | None (judge
    error); ``turns`` = the violating assistant turns (0-based)."""

    id_fields: ClassVar[tuple[str, ...]] = ("index",)

    guideline: str
    index: int  # position in the guidelines list
    verdict: Literal["yes", "no", "not_applicable"] | None = None


@dataclass(frozen=True, kw_only=True)
class GuidelineSettings(SessionSettings):
    guidelines: Sequence[str] | str | None = option(None, help="the guidelines the assistant must follow (required)")

    def check(self) -> None:
        super().check()
        self.normalise(guidelines=check_guidelines(self.guidelines))


def check_guidelines(guidelines: object) -> tuple[str, ...]:
    """A str is one guideline; a list/tuple of non-blank strings is several.
    None, empty, or a blank guideline is a ValueError."""
    if isinstance(guidelines, str):
        guidelines = [guidelines]
    if guidelines is None or not isinstance(guidelines, Sequence) or not guidelines:
        raise ValueError(
            "conversational_guidelines needs guidelines=[...]: a non-empty list of guidelines the assistant must"
            " follow, e.g. guidelines=['Apologise when the user reports a problem.']"
        )
    for i, g in enumerate(guidelines):
        if not isinstance(g, str) or not g.strip():
            raise ValueError(f"guideline {i + 1} must be a non-empty string, got {g!r}")
    return tuple(g.strip() for g in guidelines)


class GuidelineTask(TypedDict):
    index: int
    guideline: str
    conversation: Conversation
    transcript: str


class GuidelinesState(MetricState, total=False):
    verdicts: Annotated[list[GuidelineVerdict], merge_verdicts]


def _judge_guideline(settings: GuidelineSettings) -> RunnableLambda:
    def build(task: GuidelineTask) -> JudgeRequest:
        return JUDGE.request(GuidelineJudgement, {"conversation": task["transcript"], "guideline": task["guideline"]})

    def finish(task: GuidelineTask, outcome: JudgeOutcome) -> GuidelinesState:
        violating = cited_turns(getattr(answer(outcome), "violating_turns", []), task["conversation"], ("assistant",))
        return {"verdicts": [GuidelineVerdict(guideline=task["guideline"], index=task["index"], turns=violating,
                                              **answer_fields(outcome))]}

    return judge_step(JUDGE.node, settings.judge, build, finish)


def _label(v: GuidelineVerdict) -> str:
    return f"guideline {v.index + 1} {quote(v.guideline, 60)}"


def _skipped(t: Tally) -> list[Any]:
    return [v for v in t.verdicts if v.verdict == "not_applicable"]


def _score(settings: GuidelineSettings) -> Callable[[GuidelinesState, Conversation], MetricResult]:
    def notes(t: Tally) -> list[str]:
        skipped = _skipped(t)
        return ["Not applicable (left out of the score): " + "; ".join(map(_label, skipped)) + "."] if skipped else []

    def none_applies(t: Tally) -> str:
        return "None of the guidelines applies to this conversation: " + "; ".join(
            f"{_label(v)}: {clause(v.reason)}" for v in t.verdicts) + "."

    policy = settings.share("guidelines followed", bad="Violated", unit="guideline(s) ", step=JUDGE.step,
                            where=_label, notes=notes, empty=none_applies,
                            describe=lambda v: f"{_label(v)} in {turn_label(v.turns)}: {clause(v.reason)}")

    def score(state: GuidelinesState, conversation: Conversation) -> MetricResult:
        t = policy.tally(sorted(state.get("verdicts") or [], key=lambda v: v.index))
        details: dict[str, int] = {"guidelines": len(t.verdicts), "judged": len(t.judged),
                                   "not_applicable": len(_skipped(t))}
        return policy.result(conversation, t, details=details if not t.judged and not t.errors
                             else {**details, "followed": t.good})

    return score


def build_guidelines_graph(settings: GuidelineSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    return session_graph(settings, GuidelinesState, [(JUDGE.node, _judge_guideline(settings))],
                         _score(settings), applies=lambda conversation: bool(role_indices(conversation, "assistant")),
                         tasks=lambda *_: [{"index": i, "guideline": g} for i, g in enumerate(settings.guidelines or ())],
                         not_applicable="No assistant turn: there is nothing to hold to the guidelines.")


CONVERSATIONAL_GUIDELINES = session_spec(
    "conversational_guidelines", build_guidelines_graph, [JUDGE], settings=GuidelineSettings,
    needs=frozenset({"guidelines"}),
    summary="Did the assistant follow each given guideline? yes/no, share followed (LLM judge)",
    doc="Score = followed / applicable guidelines, one call per guideline, concurrently.")
create_conversational_guidelines_metric = CONVERSATIONAL_GUIDELINES.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
