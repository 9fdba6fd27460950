"""What the session judges share: settings, turn numbers, result building.

Turn numbers: the judge sees and cites **1-based** turn numbers (the ``turn``
field of :func:`judgegraph.nodes.conversation_json`; system and tool turns
count). Results store them **0-based** in ``Verdict.turns`` (like every other
metric) and print them 1-based in reasons. A number the judge cites that is out
of range, or names a turn of the wrong role (a "user turn" that is an assistant
turn), is dropped: it cannot point a reader at the wrong message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send
from pydantic import BaseModel
from typing_extensions import Unpack

from ...compiling import CompileOptions, check_options, compile_graph
from ...conversation import Conversation
from ...judges import JudgeOutcome, JudgeRequest, ModelLike, require_tasks, resolve_judge
from ...nodes import conversation_json, outcome_fields, scoring_edges, with_transcript
from ...results import JudgeErrorInfo, MetricResult, Usage
from ...scoring import MetricOptions, ScoringPolicy, Tally, all_good, share_reason
from ...state import MetricInput, MetricOutput, MetricState, conversation_of

REDUCE = "reduce_score"


@dataclass(frozen=True, kw_only=True)
class SessionSettings(MetricOptions):
    """Settings every session judge has: the shared options
    (:class:`~judgegraph.scoring.MetricOptions`). ``strict_mode`` makes the
    score 1 or 0 and the threshold 1 (user_frustration: only "none" passes)."""

    def policy(self, **how: Any) -> ScoringPolicy:
        """The judge named by its name (as every session result has it)."""
        return super().policy(**{"judge": self.judge.name, **how})

    def share(self, what: str, *, bad: str, describe: Callable[[Any], str], unit: str, step: str,
              where: Callable[[Any], str], notes: Callable[[Tally], list[str]] | None = None) -> ScoringPolicy:
        """A yes/no judge scored as a share: value "yes" when every judged item
        is good, score = good / judged (strict: 1 or 0). Other answers (e.g.
        "not_applicable") are neither judged nor errors; judge errors are
        reported and left out; nothing judged is status ``error``."""
        return self.policy(counted=YES_NO, step=step, where=where, value=all_good,
                           reason=share_reason(what, bad=bad, describe=describe, unit=unit, notes=notes))


YES_NO = frozenset({"yes", "no"})


def compile_session_judge(
    build_graph: Callable[[Any], StateGraph],
    settings_class: type[SessionSettings] = SessionSettings,
    *,
    tasks: Iterable[str],
    model: ModelLike,
    compile: Mapping[str, Any],
    factory: Callable[..., Any],
    **settings: Any,
) -> CompiledStateGraph:
    """What every session judge's factory does: resolve the judge (one that
    cannot answer ``tasks`` is :class:`~judgegraph.judges.NeedsLLMJudge`, at
    once), make the settings (``name``, ``threshold``, ... in ``settings``),
    build, and compile with the caller's compile options."""
    check_options(compile, factory)  # a misspelt keyword first, before any judge is looked at
    judge = require_tasks(resolve_judge(model), tasks, settings["name"])
    return compile_graph(build_graph(settings_class(judge=judge, **settings)), settings["name"], compile, factory)


class SessionJudgeFactory(Protocol):
    """A session judge's factory: the options every session judge has."""

    __name__: str

    def __call__(
        self, *, model: ModelLike = None, threshold: float = 0.5, strict_mode: bool = False, review: bool = False,
        name: str = ..., **compile: Unpack[CompileOptions],
    ) -> CompiledStateGraph: ...


def session_factory(
    metric: str, build_graph: Callable[[SessionSettings], StateGraph], tasks: Iterable[str], doc: str
) -> SessionJudgeFactory:
    """``create_<metric>_judge`` for a session judge with no options of its own:
    ``model``, ``threshold``, ``strict_mode``, ``review``, ``name`` and LangGraph
    compile options (see :func:`compile_session_judge`)."""
    tasks = tuple(tasks)

    def factory(
        *, model: ModelLike = None, threshold: float = 0.5, strict_mode: bool = False, review: bool = False,
        name: str = metric, **compile: Unpack[CompileOptions],
    ) -> CompiledStateGraph:
        return compile_session_judge(build_graph, name=name, threshold=threshold, strict_mode=strict_mode,
                                     review=review, tasks=tasks, model=model, compile=compile, factory=factory)

    factory.__name__ = factory.__qualname__ = f"create_{metric}_judge"
    factory.__doc__ = doc
    return factory


def session_graph(
    settings: SessionSettings,
    state: type,
    route: Callable[[Any], Any],
    steps: Sequence[tuple[str, Any]],
    reduce: Any,
    fan_out: Callable[[Any], Any] | None = None,
) -> StateGraph:
    """The shape of every session judge, checked settings first::

        START ─route→ steps[0] [─fan_out→ steps[1]] → reduce_score → END

    ``route`` (and ``fan_out``, with a second step) may go straight to reduce_score."""
    if len(steps) != (2 if fan_out else 1):
        raise ValueError("session_graph: one step, or two steps joined by fan_out")
    builder: StateGraph = StateGraph(state, input_schema=MetricInput, output_schema=MetricOutput)
    for name, node in steps:
        builder.add_node(name, node)
    builder.add_node(REDUCE, reduce)
    builder.add_conditional_edges(START, route, [steps[0][0], REDUCE])
    if fan_out:
        builder.add_conditional_edges(steps[0][0], fan_out, [steps[1][0], REDUCE])
    scoring_edges(builder, [steps[-1][0]], review=settings.review, metric=settings.name, reduce=REDUCE)
    builder.add_edge(REDUCE, END)
    return builder


def route_start(first: str, applies: Callable[[Conversation], bool]) -> Callable[[Any], str]:
    """START's router: ``first``, or straight to reduce_score (no call) when
    ``applies(conversation)`` is false."""

    def route(state: Mapping[str, Any]) -> str:
        conversation = conversation_of(state)
        return first if applies(conversation) else REDUCE

    return route


def send_each(node: str, tasks: Callable[[Conversation], list[dict[str, Any]]]) -> Callable[[Any], list[Send] | str]:
    """START's router for a one-step fan-out: one ``node`` call per task of
    ``tasks(conversation)`` (each also given the conversation and its
    transcript), or straight to reduce_score (no call) when there is none."""

    def route(state: Mapping[str, Any]) -> list[Send] | str:
        conversation = conversation_of(state)
        todo = tasks(conversation)
        if not todo:
            return REDUCE
        transcript = conversation_json(conversation)
        return [Send(node, {**task, "conversation": conversation, "transcript": transcript}) for task in todo]

    return route


def conversation_request(
    task: str, step: str, schema: type[BaseModel]
) -> Callable[[Mapping[str, Any]], JudgeRequest]:
    """A judge step's ``build`` that shows the judge the whole conversation
    (``{conversation}``, :func:`judgegraph.nodes.conversation_json`)."""

    def build(state: Mapping[str, Any]) -> JudgeRequest:
        transcript = conversation_json(conversation_of(state))
        return JudgeRequest(task=task, step=step, schema=schema, values={"conversation": transcript})

    return build


# -- turns ---------------------------------------------------------------------


def role_indices(conversation: Conversation, role: str) -> list[int]:
    return [i for i, t in enumerate(conversation.turns) if t.role == role]


def has_user(conversation: Conversation) -> bool:
    return bool(role_indices(conversation, "user"))


def cited_turns(numbers: Iterable[Any], conversation: Conversation, roles: Sequence[str] | None = None) -> list[int]:
    """1-based turn numbers from a judge → sorted 0-based indices, keeping only
    numbers that exist and (with ``roles``) name a turn of one of those roles."""
    out: set[int] = set()
    for n in numbers or ():
        if isinstance(n, bool) or not isinstance(n, int):
            continue
        i = n - 1
        if 0 <= i < len(conversation.turns) and (roles is None or conversation.turns[i].role in roles):
            out.add(i)
    return sorted(out)


# -- results -------------------------------------------------------------------


def reduce_node(
    settings: SessionSettings, applies: Callable[[Conversation], bool], reason: str,
    score: Callable[[Any, Conversation], MetricResult],
) -> Callable[[Any], dict[str, Any]]:
    """The reduce_score node: ``not_applicable`` with ``reason`` when
    ``applies(conversation)`` is false (the router made no call, see
    :func:`route_start`), else ``score(state, conversation)``."""

    def reduce_score(state: Any) -> dict[str, Any]:
        conversation = conversation_of(state)
        result = (score(state, conversation) if applies(conversation)
                  else settings.policy().conclude(conversation, status="not_applicable", reason=reason))
        return {"results": {settings.name: with_transcript(result, state)}}

    return reduce_score


class ExtractState(MetricState, total=False):
    """The state of an extract-then-judge session judge: what its extraction
    call cost and, when it failed, its error."""

    extract_errors: list[JudgeErrorInfo]
    extract_usage: Usage


def extraction_update(conversation: Conversation, outcome: JudgeOutcome, step: str, **fields: Any) -> dict[str, Any]:
    """The extraction node's update: the conversation, the call's usage, its
    error when it failed (``extract_errors``), and ``fields``."""
    update: dict[str, Any] = {"conversation": conversation, "extract_usage": outcome.usage, **fields}
    if not outcome.ok:
        update["extract_errors"] = [JudgeErrorInfo(where="conversation", step=step, message=outcome.error or "no verdict",
                                                   attempts=outcome.attempts)]
    return update


def extraction_failure(
    policy: ScoringPolicy, conversation: Conversation, state: Mapping[str, Any], *, what: str,
    details: dict[str, Any],
) -> MetricResult | None:
    """For an extract-then-judge metric: the ``error`` result when the
    extraction failed (``what`` could not be extracted; nothing was judged), else None."""
    if extract_errors := state.get("extract_errors"):
        return policy.conclude(conversation, status="error", errors=extract_errors, details=details,
                               usage=state.get("extract_usage") or Usage(),
                               reason=f"The user's {what} could not be extracted (judge error); see errors.")
    return None


def outcome_info(outcome: JudgeOutcome) -> dict[str, Any]:
    """The Verdict fields a judge outcome fills in a session verdict: ``error``,
    ``attempts``, ``usage`` (:func:`judgegraph.nodes.outcome_fields` without the
    score: session verdicts are categorical)."""
    fields = outcome_fields(outcome)
    del fields["score"]
    return fields
