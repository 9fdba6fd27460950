"""Pairwise judging: which of two versions' conversations is better, per criterion (docs/pairwise.md).

    START ─Send per (criterion, order)→ judge_pair → reduce_score → END

Each criterion is judged with ``a`` shown first (order ``"ab"``) and with ``b`` first (``"ba"``): it is decided
when the two verdicts agree, else a tie flagged ``order_dependent``; a judge error in either order leaves it
undecided (None). ``score``: the share of decided criteria ``b`` won, a tie counting half (no threshold).
"""

from __future__ import annotations

__all__ = ["CRITERIA", "Criterion", "CriterionOutcome", "PairJudgement", "PairVerdict", "PairwiseSettings",
           "as_criteria", "build_pairwise_graph", "create_pairwise_metric", "decide", "outcomes_of"]

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from pydantic import BaseModel, BeforeValidator, Field
from typing_extensions import NotRequired, TypedDict

from ..core.nodes import conversation_json, judge_step, scoring_edges, with_transcript
from ..core.scoring import JudgeOptions, Tally, option
from ..core.state import MetricOutput
from ..core.verdicts import answer, answer_fields
from ..data.answers import read_choice
from ..data.conversation import Conversation, as_conversation
from ..data.results import JudgeAttempt, MetricResult, Verdict, merge_calls, merge_results, merge_verdicts
from ..judges import JudgeOutcome, JudgeRequest
from . import MetricSpec
from ._renamed import renamed

STEP = "pairwise/judge_pair"
TASK = "pairwise"

Order = Literal["ab", "ba"]
Outcome = Literal["a", "b", "tie"]
ORDERS: tuple[Order, Order] = ("ab", "ba")


# -- criteria ---------------------------------------------------------------------


@dataclass(frozen=True)
class Criterion:
    """What two conversations are compared on: a short ``name`` (tables, JSON keys) and the ``text`` the judge reads."""

    name: str
    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a criterion needs a non-empty name, got {self.name!r}")
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"criterion {self.name!r} needs a non-empty text")


#: The built-in criteria, by name (``-m NAME``).
CRITERIA: dict[str, Criterion] = {
    "helpfulness": Criterion(
        "helpfulness",
        "Overall helpfulness: which assistant better helps the user get what they came for. Weigh, in this order, "
        "whether it solves the user's actual requests correctly and completely, whether what it says is accurate "
        "and honest about what it cannot do, and whether it is clear and easy to act on. A shorter answer that "
        "solves the problem beats a longer one that does not."),
}
ALIASES = {"overall_helpfulness": "helpfulness", "overall": "helpfulness"}
DEFAULT_CRITERIA = ("helpfulness",)


def criterion_named(name: str) -> Criterion:
    """A built-in criterion by name (``-`` and ``_`` alike, any case); ``ValueError`` naming the known ones."""
    key = name.strip().lower().replace("-", "_")
    key = ALIASES.get(key, key)
    if key not in CRITERIA:
        raise ValueError(f"unknown pairwise criterion {name!r}; built in: {', '.join(CRITERIA)} "
                         "(give your own as a sentence: --criterion TEXT, or Criterion(name, text))")
    return CRITERIA[key]


def own_criterion(text: str) -> Criterion:
    """A criterion of your own: ``text`` (whitespace folded), named by its first 48 characters."""
    text = " ".join(text.split())
    return Criterion(text if len(text) <= 48 else text[:47] + "…", text)


def as_criteria(criteria: Iterable[str | Criterion]) -> list[Criterion]:
    """``criteria`` as :class:`Criterion` objects: a built-in name, a sentence (a criterion of your own, named
    by its first 48 characters), or a Criterion. At least one; names must differ (``ValueError``)."""
    out: list[Criterion] = []
    for c in criteria:
        if isinstance(c, Criterion):
            out.append(c)
        elif isinstance(c, str) and len(c.split()) > 1:
            out.append(own_criterion(c))
        elif isinstance(c, str):
            out.append(criterion_named(c))
        else:
            raise ValueError(f"a criterion is a name, a sentence or a Criterion, got {type(c).__name__}")
    if not out:
        raise ValueError("pairwise judging needs at least one criterion")
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ValueError(f"pairwise criteria need distinct names, got {names}")
    return out


# -- the judge's answer and the verdicts -------------------------------------------


def _winner(value: object) -> object:
    """``"A"``, ``"B"`` or ``"tie"`` from what a server sends (any case, "Conversation A", "draw"), else unchanged."""
    read = read_choice(("a", "b", "tie"), {"conversation a": "a", "conversation b": "b", "draw": "tie",
                                           "equal": "tie", "neither": "tie"})(value)
    return read.upper() if read in ("a", "b") else read


class PairJudgement(BaseModel):
    reason: str = Field(description="A short reason naming what differs, citing turn numbers (e.g. 'A, turn 4').")
    winner: Annotated[Literal["A", "B", "tie"], BeforeValidator(_winner)] = Field(
        description="'A' if the conversation shown first is better on the criterion, 'B' if the second, else 'tie'.")


class PairVerdict(Verdict):
    """One judgement of one criterion in one order: ``said`` is the position the judge chose (``"A"``: shown
    first), ``verdict`` the same in version terms (``"a"``, ``"b"``, ``"tie"``; None: judge error)."""

    id_fields: ClassVar[tuple[str, ...]] = ("criterion", "order")

    criterion: str
    order: Order
    said: Literal["A", "B", "tie"] | None = None
    verdict: Literal["a", "b", "tie"] | None = None


def version_of(said: str, order: Order) -> Outcome:
    """The version a position answer names: in order "ab" A is a; in "ba" A is b."""
    if said == "tie":
        return "tie"
    return "a" if (said == "A") == (order == "ab") else "b"


@dataclass(frozen=True)
class CriterionOutcome:
    """A criterion decided from its two verdicts: ``outcome`` None when a judge error left it undecided;
    ``order_dependent`` when both orders were judged and disagreed (the outcome is then a tie)."""

    criterion: str
    outcome: Outcome | None
    order_dependent: bool
    errors: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def decide(verdicts: Iterable[PairVerdict], criteria: Sequence[str]) -> list[CriterionOutcome]:
    """Each criterion's outcome from its verdicts in both orders (see the module doc)."""
    by: dict[tuple[str, str], PairVerdict] = {(v.criterion, v.order): v for v in verdicts}
    out = []
    for name in criteria:
        said = [v.verdict if (v := by.get((name, order))) is not None else None for order in ORDERS]
        if errors := said.count(None):
            out.append(CriterionOutcome(name, None, False, errors))
        else:
            out.append(CriterionOutcome(name, said[0] if said[0] == said[1] else "tie", said[0] != said[1], 0))
    return out


# -- the graph ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PairwiseSettings(JudgeOptions):
    """The judge, the criteria and the metric's name (``review``: pause for a person before the score)."""

    criteria: Iterable[str | Criterion] = option(
        DEFAULT_CRITERIA, help="built-in names ('helpfulness'), sentences of your own, or Criterion objects")

    def check(self) -> None:
        super().check()
        self.normalise(criteria=tuple(as_criteria(self.criteria)))

    @property
    def chosen(self) -> tuple[Criterion, ...]:
        """The criteria, checked (:func:`as_criteria`)."""
        return tuple(self.criteria)  # type: ignore[arg-type]  # normalised by check


class PairInput(TypedDict):
    a: NotRequired[Conversation | dict[str, Any]]
    b: NotRequired[Conversation | dict[str, Any]]


class PairState(TypedDict, total=False):
    a: Conversation | dict[str, Any]
    b: Conversation | dict[str, Any]
    verdicts: Annotated[list[PairVerdict], merge_verdicts]
    judge_calls: Annotated[list[JudgeAttempt], merge_calls]
    results: Annotated[dict[str, MetricResult], merge_results]


class PairTask(TypedDict):
    criterion: str
    text: str
    order: Order
    first: str
    second: str


def pair_of(state: Mapping[str, Any]) -> tuple[Conversation, Conversation]:
    """The state's two conversations, validated; ``ValueError`` when one is missing."""
    if state.get("a") is None or state.get("b") is None:
        raise ValueError("a pairwise graph's input needs 'a' and 'b': the two versions' conversations "
                         "(Conversation objects or dicts in judgegraph's format)")
    return as_conversation(state["a"]), as_conversation(state["b"])


def _tasks(settings: PairwiseSettings) -> Any:
    def route(state: Mapping[str, Any]) -> list[Send]:
        a, b = pair_of(state)
        shown = {"a": conversation_json(a), "b": conversation_json(b)}
        return [Send("judge_pair", PairTask(criterion=c.name, text=c.text, order=order, first=shown[order[0]],
                                            second=shown[order[1]]))
                for c in settings.chosen for order in ORDERS]

    return route


def _judge_pair(settings: PairwiseSettings) -> RunnableLambda:
    def build(task: PairTask) -> JudgeRequest:
        return JudgeRequest(task=TASK, step=STEP, schema=PairJudgement, values={
            "criterion": task["text"], "conversation_a": task["first"], "conversation_b": task["second"]})

    def finish(task: PairTask, outcome: JudgeOutcome) -> PairState:
        said, fields = getattr(answer(outcome), "winner", None), answer_fields(outcome)
        fields["verdict"] = None if said is None else version_of(said, task["order"])  # the version, not the place
        return {"verdicts": [PairVerdict(criterion=task["criterion"], order=task["order"], said=said, **fields)]}

    return judge_step("judge_pair", settings.judge, build, finish)


def _reason(outcomes: list[CriterionOutcome]) -> str:
    def one(o: CriterionOutcome) -> str:
        if o.outcome is None:
            return f"{o.criterion}: not decided ({o.errors} judge error(s))"
        if o.order_dependent:
            return f"{o.criterion}: tie (the verdict changed with the order shown: position bias)"
        return f"{o.criterion}: " + ("tie" if o.outcome == "tie" else f"{o.outcome} is better") + " in both orders"

    return "; ".join(one(o) for o in outcomes) + "."


def _score(settings: PairwiseSettings) -> Any:
    names = [c.name for c in settings.chosen]

    def b_share(judged: list[PairVerdict]) -> float | None:
        decided = [o for o in decide(judged, names) if o.outcome is not None]
        if not decided:
            return None
        return sum(1.0 if o.outcome == "b" else 0.5 if o.outcome == "tie" else 0.0 for o in decided) / len(decided)

    def where(v: PairVerdict) -> str:
        return f"criterion {v.criterion!r}, {'a' if v.order == 'ab' else 'b'} shown first"

    def value(t: Tally) -> dict[str, str | None]:
        return {o.criterion: o.outcome for o in decide(t.verdicts, names)}

    policy = settings.policy(score=b_share, step=STEP, where=where, value=value,
                             reason=lambda t: _reason(decide(t.verdicts, names)))

    def score(state: Any, conversation: Conversation, verdicts: list[PairVerdict]) -> MetricResult:
        t = policy.tally(verdicts)
        if t.judged and t.raw is None:  # verdicts, but no criterion decided in both orders: an error result
            t = dataclasses.replace(t, judged=[])
        outcomes = decide(verdicts, names)
        return policy.result(conversation, t, details={
            "criteria": [o.to_json() for o in outcomes], "verdicts": len(verdicts), "judged": len(t.judged),
            "order_dependent": sum(o.order_dependent for o in outcomes)})

    return score


def build_pairwise_graph(settings: PairwiseSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    order = {(c.name, o): i for i, (c, o) in enumerate((c, o) for c in settings.chosen for o in ORDERS)}
    score = _score(settings)

    def reduce_score(state: Any) -> PairState:
        """``results[name]``: the verdicts in criterion and order order, scored (the conversation named: ``a``)."""
        verdicts = sorted(state.get("verdicts") or [], key=lambda v: order.get((v.criterion, v.order), len(order)))
        return {"results": {settings.name: with_transcript(score(state, pair_of(state)[0], verdicts), state)}}

    builder: StateGraph = StateGraph(PairState, input_schema=PairInput, output_schema=MetricOutput)
    builder.add_node("judge_pair", _judge_pair(settings))
    builder.add_node("reduce_score", reduce_score)
    builder.add_conditional_edges(START, _tasks(settings), ["judge_pair"])
    scoring_edges(builder, ["judge_pair"], review=settings.review, metric=settings.name)
    builder.add_edge("reduce_score", END)
    return builder


_PAIRWISE = MetricSpec(
    "pairwise", settings=PairwiseSettings, build=build_pairwise_graph, tasks=(TASK,), needs=frozenset({"llm"}),
    summary="Which of two versions' conversations is better, per criterion, judged in both orders (module doc).",
    doc="Input ``{\"a\": conversation, \"b\": conversation}``; output ``{\"results\": {name: MetricResult}}``."
        " Calls: 2 per criterion. Needs an LLM judge: the offline judge cannot compare (NeedsLLMJudge).",
    prompt_values={STEP: {"criterion", "conversation_a", "conversation_b"}})
#: Not in the registry (it judges a pair, not a conversation; a private name): apps/pairwise.py and
#: ``judgegraph pairwise`` run it.
create_pairwise_metric = _PAIRWISE.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2


def outcomes_of(result: MetricResult) -> list[CriterionOutcome]:
    """The criteria outcomes a pairwise result holds (``details["criteria"]``)."""
    return [CriterionOutcome(str(c["criterion"]), c.get("outcome"), bool(c.get("order_dependent")),
                             int(c.get("errors") or 0)) for c in result.details.get("criteria") or []]
