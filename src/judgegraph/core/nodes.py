"""Building blocks for metric graphs, public so custom judges can reuse them (docs/custom_judges.md walks through a
whole graph). Statement steps live in :mod:`judgegraph.core.statements`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional, Protocol, TypeVar, Union, cast

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, ensure_config
from langchain_core.runnables.utils import accepts_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send
from typing_extensions import TypedDict

from ..data.conversation import Conversation
from ..data.results import JudgeAttempt, MetricResult, Review, Usage, Verdict
from ..data.windows import Window, check_window_size, exchanges, windows_from_exchanges
from ..judges.base import Judge, JudgeOutcome, JudgeRequest
from ..judges.jury import with_votes
from .replay import Steer, probe, steer_of, verdicts_of
from .scoring import make_result  # noqa: F401 - a building block of custom graphs, documented here
from .state import MetricInput, MetricOutput, MetricState, conversation_of

T = TypeVar("T")
V = TypeVar("V", bound=Verdict)

#: What a node returns: a state update, or a ``Command`` (an update and where to go next).
StateUpdate = Union[Mapping[str, Any], Command]

#: A person's review decisions (:func:`apply_review`): ``{verdict id: {"verdict": ..., "reason": ...}}`` or
#: ``{verdict id: "yes"}``, or a list of ``{"id", "verdict", "reason"}`` records; None or empty: no change.
ReviewDecisions = Union[Mapping[str, Union[str, Mapping[str, Any]]], Sequence[Mapping[str, Any]], None]


def judge_step(
    name: str,
    judge: Judge,
    build: Callable[[T], JudgeRequest],
    finish: Callable[[T, JudgeOutcome], StateUpdate],
) -> RunnableLambda:
    """A node: ``finish(input, judge(build(input)))``, sync and async. Every attempt is stamped with the request's
    key; a jury's jurors become the verdicts' ``votes``; an update holding no verdict (an extraction) gets the
    transcript as ``judge_calls``; a :class:`~judgegraph.core.replay.Steer` in the config may keep verdicts,
    replay answers or replace the prompt (re-judging)."""

    def before(task: Any, config: RunnableConfig | None) -> tuple[Steer | None, JudgeRequest, Any]:
        steer = steer_of(config)
        request = build(task)
        if steer is None:
            return None, request, None
        try:
            update = probe(finish, task)
        except Exception:  # noqa: BLE001 - a finish that cannot take a failed outcome writes no known verdicts
            update = None
        request, early = steer.plan(update, request)
        return steer, request, early

    def after(task: Any, request: JudgeRequest, outcome: JudgeOutcome, steer: Steer | None) -> StateUpdate:
        key = request.cache_key()  # a copy: the judge's cache may hand the same outcome to another step
        outcome = dataclasses.replace(outcome, transcript=[a.model_copy(update={"request": key})
                                                           for a in outcome.transcript])
        update = finish(task, outcome)
        if outcome.ok and any(isinstance(v, Verdict) and v.error for v in verdicts_of(update)):  # never replayed
            (steer and steer.judge or judge).forget(request)
        if outcome.jurors:  # a jury's: each juror's answer as the verdicts' votes
            update = with_votes(update, outcome.jurors, lambda juror: finish(task, juror))
        if steer is not None and not outcome.cached:
            steer.note(update)
        return with_calls(update, outcome.transcript)

    def run(task: Any, config: RunnableConfig) -> Any:
        steer, request, early = before(task, config)
        done = early if early is not None else (steer and steer.judge or judge).run(request)
        return after(task, request, done, steer) if isinstance(done, JudgeOutcome) else done

    async def arun(task: Any, config: RunnableConfig) -> Any:
        steer, request, early = before(task, config)
        done = early if early is not None else await (steer and steer.judge or judge).arun(request)
        return after(task, request, done, steer) if isinstance(done, JudgeOutcome) else done

    return NodeLambda(run, afunc=arun, name=name)


class NodeLambda(RunnableLambda):
    """A graph node of a function of the state (and the config, when it takes one), sync and async, called
    directly: LangGraph already traces each node, so the lambda's own run (a second span, callback managers,
    config copies) is left out, and a node without ``afunc`` runs on the event loop, not in a worker thread."""

    def __init__(self, func: Callable[..., Any], afunc: Callable[..., Any] | None = None, *, name: str) -> None:
        super().__init__(func, afunc, name=name)
        self._takes_config = accepts_config(func)
        self.__name__ = name  # named as the function it stands for

    def __call__(self, state: Any, config: RunnableConfig | None = None) -> Any:
        return self.invoke(state, config)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        func = cast(Any, self.func)
        return func(input, ensure_config(config)) if self._takes_config else func(input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if not hasattr(self, "afunc"):
            return self.invoke(input, config)
        afunc = cast(Any, self.afunc)
        return await (afunc(input, ensure_config(config)) if self._takes_config else afunc(input))


def with_calls(update: StateUpdate, transcript: list[JudgeAttempt]) -> StateUpdate:
    """``update`` plus ``judge_calls`` (the transcript) when it writes no verdict that holds it."""
    inner = update.update if isinstance(update, Command) else update
    if not transcript or not isinstance(inner, dict):
        return update
    if any(v.transcript for v in inner.get("verdicts") or () if isinstance(v, Verdict)):
        return update
    inner = {**inner, "judge_calls": [*inner.get("judge_calls", ()), *transcript]}
    if isinstance(update, Command):
        return Command(graph=update.graph, update=inner, resume=update.resume, goto=update.goto)
    return inner


def render_messages(pairs: Sequence[tuple[str, str]], *, empty: str = "(none)") -> str:
    """Messages as data for a prompt: one ``role: content`` block each."""
    if not pairs:
        return empty
    return "\n\n".join(f"[{role}]\n{content}" for role, content in pairs)


def quote(text: str, limit: int = 60) -> str:
    """Text for a reason: whitespace folded, in quotes, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return f'"{text[: limit - 1]}…"' if len(text) > limit else f'"{text}"'


def turn_label(indices: Iterable[int]) -> str:
    """0-based turn indices → ``"turn 3"`` / ``"turns 3, 5"`` (1-based, as reasons print them)."""
    nums = [str(i + 1) for i in sorted(set(indices))]
    if not nums:
        return "no turn cited"
    return f"turn {nums[0]}" if len(nums) == 1 else f"turns {', '.join(nums)}"


def conversation_json(conversation: Conversation, *, numbered: bool = True) -> str:
    """The conversation as a JSON list of ``{turn, role, content}`` (1-based turns
    for judges to cite): a prompt value, never template source."""
    rows = [{**({"turn": i + 1} if numbered else {}), "role": t.role, "content": t.content}
            for i, t in enumerate(conversation.turns)]
    return json.dumps(rows, ensure_ascii=False, indent=1)


class Node(Protocol):
    """What the node factories here return: a function of the graph state (LangGraph's own node protocol)."""

    def __call__(self, state: Any) -> MetricState: ...


def score_node(
    name: str, score: Callable[[Any, Conversation, list[Any]], MetricResult], *, order: Callable[[Any], Any] | None = None
) -> Node:
    """The ``reduce_score`` node: ``score(state, conversation, verdicts)`` as ``results[name]``,
    the verdicts sorted by ``order`` (None: as the state holds them)."""

    def reduce_score(state: Any) -> MetricState:
        held = state.get("verdicts") or []
        verdicts = list(held) if order is None else sorted(held, key=order)
        return {"results": {name: with_transcript(score(state, conversation_of(state), verdicts), state)}}

    return NodeLambda(reduce_score, name="reduce_score")


def with_transcript(result: MetricResult, state: Mapping[str, Any]) -> MetricResult:
    """``result`` with the state's ``judge_calls`` in its ``transcript``, less those a verdict holds."""
    own = {a.request for v in result.verdicts for a in v.transcript if a.request}
    calls = [a for a in state.get("judge_calls") or [] if not a.request or a.request not in own]
    return result.model_copy(update={"transcript": [*result.transcript, *calls]}) if calls else result


def calls_usage(state: Mapping[str, Any]) -> Usage:
    """The usage of the state's ``judge_calls``: the requests no verdict holds (an extraction's), which
    :func:`with_transcript` adds to a result's transcript and a metric that makes them adds to its usage."""
    return Usage.total(a.usage for a in state.get("judge_calls") or [])


class Windowed(TypedDict):
    """What the ``window_turns`` node writes."""

    conversation: Conversation
    windows: list[Window]


def window_node(window_size: int, *, name: str = "window_turns") -> Callable[..., Windowed]:
    """A node: conversation → ``{"conversation", "windows"}`` (:mod:`judgegraph.data.windows`);
    a bad ``window_size`` is a ``ValueError`` when the graph is built."""
    check_window_size(window_size)

    # "Optional[RunnableConfig]": the spelling LangGraph recognises (under postponed annotations) to pass the config
    def window_turns(state: Any, config: Optional[RunnableConfig] = None) -> Windowed:
        conversation = conversation_of(state)
        windows = windows_from_exchanges(conversation, exchanges(conversation), window_size)
        return Windowed(conversation=conversation, windows=in_scope(windows, config))

    return NodeLambda(window_turns, name=name)


#: The run-time scope, in ``config["configurable"]``: ``"latest"`` judges only the latest exchange.
SCOPE_KEY = "judgegraph_scope"


def latest_scope(config: RunnableConfig | None) -> bool:
    """Whether the run judges only the latest exchange (``configurable[SCOPE_KEY] == "latest"``)."""
    return ((config or {}).get("configurable") or {}).get(SCOPE_KEY) == "latest"


def in_scope(items: Sequence[T], config: RunnableConfig | None) -> list[T]:
    """The per-exchange items a run judges: all, or under the latest scope only the
    last (earlier turns stay its context)."""
    return list(items[-1:]) if latest_scope(config) else list(items)


def fan_out(
    target: str,
    key: str,
    *,
    item: str,
    empty: str,
    extra: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
) -> Callable[[Mapping[str, Any]], list[Send] | str]:
    """A router for ``add_conditional_edges``: one ``Send(target, {item: x, **extra(state)})``
    per element ``x`` of ``state[key]`` (run concurrently), or the node ``empty`` when none."""

    def route(state: Mapping[str, Any]) -> list[Send] | str:
        items = state.get(key) or []
        if not items:
            return empty
        shared = dict(extra(state)) if extra else {}
        return [Send(target, {**shared, item: x}) for x in items]

    return router(route, f"fan_out_{key}")


def router(route: Callable[[Any], T], name: str | None = None) -> Callable[[Any], T]:
    """``route`` (a function of the state) as a :class:`NodeLambda`, for ``add_conditional_edges``: LangGraph
    runs a plain sync router in a worker thread under an async run (one thread hop per conversation, issue 28);
    this one runs on the event loop, sync and async. Callable as the function."""
    if isinstance(route, NodeLambda):
        return route
    if name:  # a closure named for what it routes (fan_out_windows ...)
        route.__name__ = route.__qualname__ = name
    return cast("Callable[[Any], T]", NodeLambda(route, name=name or str(getattr(route, "__name__", "route"))))


class DeclaredGraph(StateGraph):
    """A ``StateGraph`` holding what its builder declares of it in :attr:`declared` (:func:`window_graph`'s
    :class:`WindowSteps`, ``report_builder``'s metric graphs), read through the compiled graph's ``builder``.
    A node or edge added afterwards drops it to None: the graph is no longer the one declared."""

    declared: Any = None

    def add_node(self, *args: Any, **kwargs: Any) -> Any:
        self.declared = None
        return super().add_node(*args, **kwargs)

    def add_edge(self, *args: Any, **kwargs: Any) -> Any:
        self.declared = None
        return super().add_edge(*args, **kwargs)

    def add_conditional_edges(self, *args: Any, **kwargs: Any) -> Any:
        self.declared = None
        return super().add_conditional_edges(*args, **kwargs)


@dataclasses.dataclass(frozen=True)
class WindowSteps:
    """A window-shaped metric graph whose one step makes every request (``START → window_turns ─Send→ <step> →
    reduce_score → END``): what the dry run calls in place of the graph's run, the same requests by the same nodes."""

    windows: Runnable
    step: Runnable
    route: Callable[[Any], Any]  # a list of Send, or the node to go to when none

    def run(self, conversation: Any) -> None:
        """The step called on each task the router sends for ``conversation`` (what the step returns is dropped)."""
        state: dict[str, Any] = {"conversation": conversation}
        state.update(self.windows.invoke(state))
        sent = self.route(state)
        for send in sent if isinstance(sent, list) else ():
            self.step.invoke(send.arg)


class WindowTask(TypedDict):
    """One per-window step's input (:func:`fan_out` over ``windows`` with ``item="window"``)."""

    window: Window


def window_graph(
    settings: Any, schema: type, steps: Sequence[tuple[str, Any]], reduce: Any, *, windows: Any = None,
    route: Callable[[Any], list[Send] | str] | None = None, end: bool = True,
) -> StateGraph:
    """The shape of a metric judged window by window (``settings``: its :class:`~judgegraph.core.scoring.WindowOptions`;
    ``schema``: its state)::

        START → window_turns ─Send per window→ steps[0] [→ steps[1]] [→ review_verdicts] → reduce_score [→ END]

    ``windows``: the windowing node (default :func:`window_node`); ``route``: the router from it (default one
    :class:`WindowTask` per window to the first step); a step reaches the next by its own ``Command``;
    ``end=False`` leaves reduce_score's way out to the caller. A graph of one step, no review and its end is
    declared as its :class:`WindowSteps` (the dry run counts that step's requests; ``reduce`` asks no judge)."""
    first, last = steps[0][0], steps[-1][0]
    builder = DeclaredGraph(schema, input_schema=MetricInput, output_schema=MetricOutput)
    windows = windows or window_node(settings.window_size)
    builder.add_node("window_turns", windows)
    for (name, node), after in zip(steps, [*(n for n, _ in steps[1:]), None]):
        builder.add_node(name, node, destinations=(after,) if after else None)
    builder.add_node("reduce_score", reduce)
    builder.add_edge(START, "window_turns")
    route = router(route) if route else fan_out(first, "windows", item="window", empty="reduce_score")
    builder.add_conditional_edges("window_turns", route, [first, "reduce_score"])
    scoring_edges(builder, [last], review=settings.review, metric=settings.name)
    if end:
        builder.add_edge("reduce_score", END)
    if end and not settings.review and len(steps) == 1:  # one step asks the judge: the dry run calls it alone
        step = steps[0][1]  # a node as LangGraph takes it: a runnable or a function (of the state, and the config)
        builder.declared = WindowSteps(windows if isinstance(windows, Runnable) else NodeLambda(windows, name="window_turns"),
                                       step if isinstance(step, Runnable) else NodeLambda(step, name=first), route)
    return builder


class OutcomeFields(TypedDict):
    """The :class:`~judgegraph.data.results.Verdict` fields a judge outcome fills."""

    error: str | None
    attempts: int
    usage: Usage
    score: float | None
    transcript: list[JudgeAttempt]


def outcome_fields(outcome: JudgeOutcome) -> OutcomeFields:
    """The :class:`~judgegraph.data.results.Verdict` fields a judge outcome fills
    (``error``, ``attempts``, ``usage``, ``score``, ``transcript``)."""
    return OutcomeFields(error=None if outcome.ok else (outcome.error or "no verdict"), attempts=outcome.attempts,
                         usage=outcome.usage, score=outcome.score, transcript=outcome.transcript)


def scoring_edges(builder: StateGraph, sources: Sequence[str], *, review: bool, metric: str,
                  reduce: str = "reduce_score", **review_options: Any) -> None:
    """The edges from the verdict nodes ``sources`` to the reduce node, through a
    :func:`review_node` with ``review``."""
    target = reduce
    if review:
        builder.add_node(REVIEW_NODE, review_node(metric, **review_options))
        builder.add_edge(REVIEW_NODE, reduce)
        target = REVIEW_NODE
    for source in sources:
        builder.add_edge(source, target)

REVIEW_NODE = "review_verdicts"


def apply_review(verdicts: Sequence[V], decisions: ReviewDecisions, *, by: str = "human") -> list[V]:
    """``verdicts`` with a person's ``decisions`` (``[]`` keeps all: LangGraph reads an empty
    dict given to ``Command(resume=...)`` as no answer). An overridden verdict is validated,
    records ``review`` and loses its judge error; an unknown id is a ``ValueError``."""
    if isinstance(decisions, (list, tuple)):  # [{"id": ..., "verdict": ..., "reason": ...}, ...]
        decisions = {str(d["id"]): {k: x for k, x in d.items() if k != "id"} for d in decisions}
    decisions = {str(k): d for k, d in cast("Mapping[str, Union[str, Mapping[str, Any]]]", decisions or {}).items()}
    by_id = {v.id: v for v in verdicts}
    unknown = sorted(set(map(str, decisions)) - set(by_id))
    if unknown:
        raise ValueError(f"review: no verdict with id {', '.join(unknown)}; the verdicts are {', '.join(by_id)}")

    def reviewed(v: V, decision: str | Mapping[str, Any]) -> V:
        fields = {"verdict": decision} if isinstance(decision, str) else dict(decision)
        review = Review(by=fields.pop("by", by), judge_verdict=v.verdict, judge_reason=v.reason,
                        note=fields.pop("note", ""))
        return type(v).model_validate({**v.model_dump(), **fields, "error": None, "review": review})

    return [v if decisions.get(v.id) is None else reviewed(v, decisions[v.id]) for v in verdicts]


def review_node(
    metric: str,
    *,
    read: Callable[[Any], Sequence[Verdict]] = lambda state: state.get("verdicts") or [],
    write: str = "verdicts",
) -> RunnableLambda:
    """A ``review_verdicts`` node that interrupts (needs a checkpointer) with ``{"metric",
    "verdicts"}``; ``Command(resume={id: {"verdict", "reason"}})`` overrides them before the score."""
    from langgraph.types import interrupt

    def review_verdicts(state: Any, config: RunnableConfig) -> dict[str, Any]:
        verdicts = list(read(state))
        steer = steer_of(config)
        if not verdicts or (steer is not None and not steer.review):  # a re-judge the person asked for: no pause
            return {}
        shown = [{"id": v.id, "verdict": v.verdict, "reason": v.reason, "turns": [t + 1 for t in v.turns],
                  "error": v.error} for v in verdicts]
        decisions = interrupt({"metric": metric, "verdicts": shown})
        return {write: apply_review(verdicts, decisions)}

    return RunnableLambda(review_verdicts, name=REVIEW_NODE)
