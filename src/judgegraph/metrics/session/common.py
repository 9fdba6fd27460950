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
from ...judges import Judge, JudgeOutcome, JudgeRequest, ModelLike, require_tasks, resolve_judge
from ...nodes import conversation_json, outcome_fields, scoring_edges, with_transcript
from ...results import JudgeErrorInfo, MetricResult, Usage, Verdict, build_result, strict
from ...state import MetricInput, MetricOutput, MetricState, conversation_of

REDUCE = "reduce_score"


@dataclass(frozen=True)
class SessionSettings:
    """Settings every session judge has. ``strict_mode`` makes the score 1 or 0
    and the threshold 1 (user_frustration: only "none" passes)."""

    name: str
    judge: Judge
    threshold: float = 0.5
    strict_mode: bool = False
    review: bool = False  # a review_verdicts node before reduce_score (judgegraph.nodes.review_node)

    @property
    def effective_threshold(self) -> float:
        return 1.0 if self.strict_mode else self.threshold

    def check(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)):
            raise ValueError(f"threshold must be a number between 0 and 1, got {self.threshold!r}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be between 0 and 1, got {self.threshold}")


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
    settings.check()
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


def clause(text: str) -> str:
    """A judge's reason as a clause inside our own sentence: no trailing period."""
    return " ".join(text.split()).rstrip(" .")


# -- results -------------------------------------------------------------------


def base_result(settings: SessionSettings, conversation: Conversation, **fields: Any) -> MetricResult:
    """A session judge's result through :func:`judgegraph.results.build_result`
    (the shared status rules), with the settings' name, judge, threshold and strict mode."""
    return build_result(settings.name, conversation, judge=settings.judge.name, threshold=settings.threshold,
                        strict_mode=settings.strict_mode, **fields)


def reduce_node(
    settings: SessionSettings, applies: Callable[[Conversation], bool], reason: str,
    score: Callable[[Any, Conversation], MetricResult],
) -> Callable[[Any], dict[str, Any]]:
    """The reduce_score node: ``not_applicable`` with ``reason`` when
    ``applies(conversation)`` is false (the router made no call, see
    :func:`route_start`), else ``score(state, conversation)``."""

    def reduce_score(state: Any) -> dict[str, Any]:
        conversation = conversation_of(state)
        result = score(state, conversation) if applies(conversation) else not_applicable(settings, conversation, reason)
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
        update["extract_errors"] = [error_info("conversation", step, outcome.error, outcome.attempts)]
    return update


def extraction_failure(
    settings: SessionSettings, conversation: Conversation, state: Mapping[str, Any], verdicts: Sequence[Verdict],
    *, what: str, details: dict[str, Any],
) -> tuple[Usage, MetricResult | None]:
    """For an extract-then-judge metric: the usage of the extraction call and
    the verdicts, and the ``error`` result when the extraction failed (``what``
    could not be extracted; nothing was judged), else None."""
    usage = (state.get("extract_usage") or Usage()) + Usage.total(v.usage for v in verdicts)
    if extract_errors := state.get("extract_errors"):
        return usage, error_result(settings, conversation, f"The user's {what} could not be extracted (judge error);"
                                   " see errors.", errors=extract_errors, usage=usage, details=details)
    return usage, None


def failures(verdicts: Sequence[Any], heading: str, describe: Callable[[Any], str]) -> tuple[list[Any], list[str]]:
    """The verdicts answered "no", and the problem sentence that lists them
    (``heading: describe(v); ...``; none when there is no such verdict)."""
    failed = [v for v in verdicts if v.verdict == "no"]
    return failed, [f"{heading}: " + "; ".join(describe(v) for v in failed) + "."] if failed else []


def not_applicable(
    settings: SessionSettings, conversation: Conversation, reason: str, *, usage: Usage | None = None,
    details: dict[str, Any] | None = None, verdicts: Sequence[Verdict] | None = None,
) -> MetricResult:
    return base_result(
        settings, conversation, status="not_applicable", reason=reason, usage=usage or Usage(),
        details=details or {}, verdicts=verdicts or [],
    )


def share_result(
    settings: SessionSettings,
    conversation: Conversation,
    *,
    good: int,
    judged: int,
    what: str,
    verdicts: Sequence[Verdict],
    errors: list[JudgeErrorInfo],
    usage: Usage,
    problems: list[str],
    details: dict[str, Any],
) -> MetricResult:
    """A yes/no result scored as a share: ``value`` "yes" when every judged item
    is good, score = good / judged (strict: 1 or 0), passed = score >= threshold.
    Judge errors are left out of ``judged`` and reported. ``judged == 0`` with
    errors is status ``error``."""
    threshold = settings.effective_threshold
    if judged == 0:
        why = f"Nothing could be judged: {len(errors)} judge error(s); see errors."
        return error_result(settings, conversation, why, errors=errors, usage=usage, details=details,
                            verdicts=verdicts)
    score, _ = strict(good / judged, threshold, settings.strict_mode)
    passed = score is not None and score >= threshold
    cmp = ">=" if passed else "<"
    parts = [f"{good} of {judged} {what} (score {score:.2f} {cmp} threshold {threshold:.2f})."]
    parts += problems
    if errors:
        parts.append(f"{len(errors)} judgement(s) failed (judge error), left out of the score; see errors.")
    return base_result(
        settings, conversation, score=good / judged, value="yes" if good == judged else "no",
        reason=" ".join(parts), verdicts=verdicts, errors=errors, usage=usage, details=details,
    )


def error_result(
    settings: SessionSettings, conversation: Conversation, reason: str, *, errors: list[JudgeErrorInfo],
    usage: Usage, details: dict[str, Any] | None = None, verdicts: Sequence[Verdict] | None = None,
) -> MetricResult:
    """Status ``error``: nothing could be judged. Score, value and passed are None."""
    return base_result(settings, conversation, status="error", reason=reason, errors=errors, usage=usage,
                       details=details or {}, verdicts=verdicts or [])


def tally(
    verdicts: Sequence[Any], step: str, where: Callable[[Any], str]
) -> tuple[list[Any], int, list[JudgeErrorInfo]]:
    """Yes/no verdicts → (the judged ones: "yes" or "no"; how many "yes"; one
    error per judge error, labelled ``where(verdict)``). Other answers (e.g.
    "not_applicable") are neither judged nor errors."""
    judged = [v for v in verdicts if v.verdict in ("yes", "no")]
    good = sum(1 for v in judged if v.verdict == "yes")
    errors = [error_info(where(v), step, v.error, v.attempts) for v in verdicts if v.verdict is None]
    return judged, good, errors


def outcome_info(outcome: JudgeOutcome) -> dict[str, Any]:
    """The Verdict fields a judge outcome fills in a session verdict: ``error``,
    ``attempts``, ``usage`` (:func:`judgegraph.nodes.outcome_fields` without the
    score: session verdicts are categorical)."""
    fields = outcome_fields(outcome)
    del fields["score"]
    return fields


def error_info(where: str, step: str, error: str | None, attempts: int) -> JudgeErrorInfo:
    return JudgeErrorInfo(where=where, step=step, message=error or "no verdict", attempts=attempts)
