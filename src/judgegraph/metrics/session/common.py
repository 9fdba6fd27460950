"""What the session judges share: settings, turn numbers (cited 1-based, stored
0-based, wrong ones dropped: docs/session_judges.md), result building.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, ClassVar, get_origin

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from pydantic import BaseModel, model_validator

from ...core.nodes import conversation_json, judge_step, scoring_edges, with_transcript
from ...core.scoring import MetricOptions, ScoringPolicy, Tally, all_good, share_reason
from ...core.state import MetricInput, MetricOutput, MetricState, conversation_of
from ...core.verdicts import answer, answer_fields
from ...data.conversation import Conversation
from ...data.results import JudgeErrorInfo, MetricResult, Usage, Verdict
from ...judges import JudgeOutcome, JudgeRequest
from .. import MetricSpec, Need

REDUCE = "reduce_score"


@dataclass(frozen=True, kw_only=True)
class SessionSettings(MetricOptions):
    """The shared options; ``strict_mode`` makes the score 1 or 0 and the threshold 1."""

    def share(self, what: str, *, step: str, where: Callable[[Any], str], **reason: Any) -> ScoringPolicy:
        """A yes/no judge scored as good / judged (strict: 1 or 0); other answers are
        not judged, judge errors are reported and left out, nothing judged is ``error``."""
        return self.policy(counted=YES_NO, step=step, where=where, value=all_good, reason=share_reason(what, **reason))


YES_NO = frozenset({"yes", "no"})


@dataclass(frozen=True)
class Step:
    """A session judge's judge step, declared once: its prompt ``step`` (``<metric>/<node>``: the prompt file and
    the graph node's name), the ``task`` its requests name (an LLM judge must answer it) and the placeholders
    ``values`` its prompt is given (tests/unit/test_prompts.py checks them)."""

    step: str
    task: str
    values: AbstractSet[str]

    @property
    def node(self) -> str:
        return self.step.rsplit("/", 1)[-1]

    def request(self, schema: type[BaseModel], values: dict[str, str]) -> JudgeRequest:
        """This step's request: the judge answers with ``schema`` from the prompt given ``values``."""
        return JudgeRequest(task=self.task, step=self.step, schema=schema, values=values)


def session_spec(name: str, build: Callable[[Any], StateGraph], steps: Sequence[Step], summary: str, *,
                 settings: type[SessionSettings] = SessionSettings, doc: str = "",
                 needs: frozenset[Need] = frozenset()) -> MetricSpec:
    """A session judge's declaration: it reads the whole conversation (scope ``"conversation"``) and needs an LLM
    judge answering the tasks of its ``steps`` (:class:`~judgegraph.judges.NeedsLLMJudge` otherwise), whose
    prompts are given their ``values``."""
    wanted: frozenset[Need] = frozenset({"llm", *needs})
    return MetricSpec(name, summary=summary, settings=settings, build=build, tasks=tuple(s.task for s in steps),
                      doc=doc, needs=wanted, scope="conversation", prompt_values={s.step: s.values for s in steps})


#: One judge call's input per task: ``tasks(state, conversation)`` (see :func:`session_graph`).
Tasks = Callable[[Any, Conversation], Sequence[Mapping[str, object]]]  # Any: the judge's own state (a TypedDict)


def session_graph(
    settings: SessionSettings, schema: type, steps: Sequence[tuple[str, Any]],
    score: Callable[[Any, Conversation], MetricResult], *,
    applies: Callable[[Conversation], bool], not_applicable: str, tasks: Tasks | None = None,
) -> StateGraph:
    """The shape of every session judge (its state ``schema``)::

        START → steps[0] [─Send per task→ steps[1]] → reduce_score → END
        START ─Send per task→ steps[0] → reduce_score → END          (one step and ``tasks``)

    One call of the last step per task of ``tasks(state, conversation)``, each
    also given the conversation and its transcript; no task goes straight to
    reduce_score. When ``applies(conversation)`` is false START goes straight to
    reduce_score (no call) and the result is ``not_applicable`` with the
    reason ``not_applicable``; else it is ``score(state, conversation)``."""
    if len(steps) not in (1, 2) or (len(steps) == 2 and tasks is None):
        raise ValueError("session_graph: one step, or two steps joined by tasks")
    first, last = steps[0][0], steps[-1][0]

    def send(state: Mapping[str, Any]) -> list[Send] | str:
        conversation = conversation_of(state)
        todo = tasks(state, conversation) if tasks else []
        if not todo:
            return REDUCE
        transcript = conversation_json(conversation)
        return [Send(last, {**task, "conversation": conversation, "transcript": transcript}) for task in todo]

    def start(state: Mapping[str, Any]) -> list[Send] | str:
        if not applies(conversation_of(state)):
            return REDUCE
        return send(state) if tasks and len(steps) == 1 else first

    def reduce_score(state: Any) -> MetricState:
        conversation = conversation_of(state)
        result = (score(state, conversation) if applies(conversation)
                  else settings.policy().conclude(conversation, status="not_applicable", reason=not_applicable))
        return {"results": {settings.name: with_transcript(result, state)}}

    builder: StateGraph = StateGraph(schema, input_schema=MetricInput, output_schema=MetricOutput)
    for name, node in steps:
        builder.add_node(name, node)
    builder.add_node(REDUCE, reduce_score)
    builder.add_conditional_edges(START, start, [first, REDUCE])
    if len(steps) == 2:
        builder.add_conditional_edges(first, send, [last, REDUCE])
    scoring_edges(builder, [last], review=settings.review, metric=settings.name, reduce=REDUCE)
    builder.add_edge(REDUCE, END)
    return builder


def conversation_request(step: Step, schema: type[BaseModel]) -> Callable[[Mapping[str, Any]], JudgeRequest]:
    """A judge step's ``build`` that shows the judge the whole conversation
    (``{conversation}``, :func:`judgegraph.core.nodes.conversation_json`)."""

    def build(state: Mapping[str, Any]) -> JudgeRequest:
        return step.request(schema, {"conversation": conversation_json(conversation_of(state))})

    return build


class CitingJudgement(BaseModel):
    """An answer citing items in ``cites`` exactly when its verdict is in ``citing``;
    otherwise a validation error (``missing`` / ``stray``) the judge is re-asked with."""

    cites: ClassVar[str]
    citing: ClassVar[frozenset[str]]
    calm: ClassVar[str]  # a verdict that cites nothing, for a placeholder answer
    missing: ClassVar[str]
    stray: ClassVar[str]

    @classmethod
    def placeholder(cls) -> dict[str, Any]:
        """A valid answer (what a dry run answers with): the calm verdict, every list empty."""
        lists: dict[str, list[Any]] = {name: [] for name, f in cls.model_fields.items() if get_origin(f.annotation) is list}
        return {"reason": "placeholder", **lists, "verdict": cls.calm}

    @model_validator(mode="after")
    def _consistent(self) -> CitingJudgement:
        verdict = getattr(self, "verdict")  # noqa: B009 - each subclass declares its own verdict type
        cited = bool(getattr(self, self.cites))
        if cited != (verdict in self.citing):
            raise ValueError((self.stray if cited else self.missing).format(verdict=verdict))
        return self


def role_indices(conversation: Conversation, role: str) -> list[int]:
    return [i for i, t in enumerate(conversation.turns) if t.role == role]


def has_user(conversation: Conversation) -> bool:
    return bool(role_indices(conversation, "user"))


def cited_turns(numbers: Iterable[object], conversation: Conversation, roles: Sequence[str] | None = None) -> list[int]:
    """1-based turn numbers from a judge → sorted 0-based indices, keeping only
    numbers that exist and (with ``roles``) name a turn of one of those roles."""
    turns = conversation.turns
    return sorted({n - 1 for n in numbers or () if isinstance(n, int) and not isinstance(n, bool)
                   and 0 < n <= len(turns) and (roles is None or turns[n - 1].role in roles)})


class ExtractState(MetricState, total=False):
    """The state of an extract-then-judge session judge: what its extraction
    call cost and, when it failed, its error."""

    extract_errors: list[JudgeErrorInfo]
    extract_usage: Usage


def extract_step(
    settings: SessionSettings, step: Step, schema: type[BaseModel], read: Callable[[Any, Conversation], ExtractState],
    **empty: Any,
) -> tuple[str, RunnableLambda]:
    """An extract-then-judge judge's first step (its node name and node), one call over the conversation: its
    update is ``empty`` replaced by ``read(answer, conversation)``, with ``extract_usage``
    (a failed call is ``extract_errors``)."""
    build = conversation_request(step, schema)

    def finish(state: Mapping[str, Any], outcome: JudgeOutcome) -> dict[str, Any]:  # the metric's own keys too
        conversation = conversation_of(state)
        update: dict[str, Any] = {"conversation": conversation, "extract_usage": outcome.usage, **empty}
        if outcome.ok:
            update.update(read(outcome.value, conversation))
        else:
            update["extract_errors"] = [JudgeErrorInfo(where="conversation", step=step.step,
                                                       attempts=outcome.attempts, message=outcome.error or "no verdict")]
        return update

    return step.node, judge_step(step.node, settings.judge, build, finish)


def verdict_step(settings: SessionSettings, step: Step, build: Callable[[Mapping[str, Any]], JudgeRequest],
                 verdict: Callable[[Conversation, Any, Mapping[str, Any]], Verdict]) -> tuple[str, RunnableLambda]:
    """The step of a judge giving one verdict on the whole conversation (its node name and node): ``verdict(
    conversation, answer (None on a judge error), its verdict fields (:func:`~judgegraph.core.verdicts.answer_fields`))``."""
    def finish(state: Mapping[str, Any], outcome: JudgeOutcome) -> dict[str, Any]:  # the conversation read, one verdict
        conversation = conversation_of(state)
        made = verdict(conversation, answer(outcome), answer_fields(outcome))
        return {"conversation": conversation, "verdicts": [made]}

    return step.node, judge_step(step.node, settings.judge, build, finish)


def verdict_score(settings: SessionSettings, step: str, describe: Callable[[Tally, Any], str],
                  details: Callable[[Any], dict[str, Any]], **how: Any) -> Callable[[Any, Conversation], MetricResult]:
    """The score of a :func:`verdict_step` judge: the value is the verdict's, the reason ``describe(tally, verdict)``
    (or that the judge failed), the details ``details(verdict)``; ``how``: the rest of its scoring policy."""
    def reason(t: Tally) -> str:
        if not t.judged:
            return "The conversation could not be judged (judge error); see errors."
        (v,) = t.judged
        return describe(t, v)

    policy = settings.policy(step=step, reason=reason, where=lambda v: "conversation",
                             value=lambda t: t.judged[0].verdict if t.judged else None, **how)

    def scored(state: Any, conversation: Conversation) -> MetricResult:
        (v,) = state["verdicts"]
        return policy.result(conversation, [v], details=details(v))

    return scored
