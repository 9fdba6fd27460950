"""Building blocks for metric graphs, public so custom judges can reuse them.

A *judge step* is a graph node that turns its input into one
:class:`~judgegraph.judges.JudgeRequest`, asks a judge, and turns the outcome
into a state update. :func:`judge_step` makes one such node that works under
``invoke`` and ``ainvoke`` alike from the same two pure functions.

The blocks a custom metric graph is made of (``docs/custom_judges.md`` walks
through a whole one, ``examples/policy_judge/``):

* :func:`window_node` — ``conversation`` → ``windows`` (one per exchange);
* :func:`fan_out` — a conditional edge: one ``Send`` per item of a state list;
* :func:`judge_step` — one LLM judgement per node run, sync and async, under
  the judge's concurrency limit, re-ask, cache and token accounting;
* :func:`outcome_fields` — the :class:`~judgegraph.results.Verdict` fields a
  judge outcome fills (error, attempts, usage, score, transcript);
* :func:`make_result` — verdicts → :class:`~judgegraph.results.MetricResult`
  with the status rules every built-in metric uses;
* :func:`render_messages`, :func:`conversation_json` — conversation content as
  prompt values (data, never template source);
* :func:`quote`, :func:`turn_label` — quoted snippets and 1-based turn labels
  for deterministic reasons;
* statement steps (``extract_statements_step``, ``judge_statements_step``,
  ``verify_step``) and their models live in :mod:`judgegraph.statements`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional, Protocol, TypeVar, Union, cast

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import StateGraph
from langgraph.types import Command, Send

from .conversation import Conversation
from .judges.base import Judge, JudgeOutcome, JudgeRequest
from .replay import Steer, probe, steer_of
from .results import JudgeAttempt, MetricResult, Review, Verdict
from .scoring import make_result  # noqa: F401 - a building block of custom graphs, documented here
from .state import conversation_of
from .windows import check_window_size, exchanges, windows_from_exchanges

T = TypeVar("T")
V = TypeVar("V", bound=Verdict)

#: What a node returns: a state update, or a ``Command`` (an update and where to go next).
StateUpdate = Union[dict[str, Any], Command]

#: A person's review decisions (:func:`apply_review`): ``{verdict id: {"verdict": ..., "reason": ...}}`` or
#: ``{verdict id: "yes"}``, or a list of ``{"id", "verdict", "reason"}`` records; None or empty: no change.
ReviewDecisions = Union[Mapping[str, Union[str, Mapping[str, Any]]], Sequence[Mapping[str, Any]], None]


def judge_step(
    name: str,
    judge: Judge,
    build: Callable[[T], JudgeRequest],
    finish: Callable[[T, JudgeOutcome], StateUpdate],
) -> RunnableLambda:
    """A node: ``finish(input, judge(build(input)))``, sync and async.

    Every attempt's transcript entry is stamped with the request's key; an
    update that holds no verdict (an extraction, say) also gets the
    transcript as ``judge_calls``, which the score node puts in the result, so
    every request behind a result is kept. A :class:`~judgegraph.replay.Steer`
    in the run's config may keep verdicts, replay earlier answers or replace
    the step's prompt (re-judging, :mod:`judgegraph.steering`)."""

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
        if steer is not None and not outcome.cached:
            steer.note(update)
        return with_calls(update, outcome.transcript)

    def run(task: Any, config: RunnableConfig) -> Any:
        steer, request, early = before(task, config)
        if isinstance(early, JudgeOutcome):
            return after(task, request, early, steer)
        if early is not None:
            return early
        return after(task, request, (steer and steer.judge or judge).run(request), steer)

    async def arun(task: Any, config: RunnableConfig) -> Any:
        steer, request, early = before(task, config)
        if isinstance(early, JudgeOutcome):
            return after(task, request, early, steer)
        if early is not None:
            return early
        return after(task, request, await (steer and steer.judge or judge).arun(request), steer)

    return RunnableLambda(run, afunc=arun, name=name)


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
    """The whole conversation as a JSON list of ``{turn, role, content}`` (MLflow's
    session transcript shape, plus 1-based turn numbers so judges can cite turns).
    It is a value for a prompt placeholder: data, never template source."""
    import json

    rows = []
    for i, turn in enumerate(conversation.turns):
        row: dict[str, Any] = {"turn": i + 1} if numbered else {}
        row.update(role=turn.role, content=turn.content)
        rows.append(row)
    return json.dumps(rows, ensure_ascii=False, indent=1)


# -- building blocks for custom metric graphs ------------------------------------



class Node(Protocol):
    """What the node factories here return: a function of the graph state (LangGraph's own node protocol)."""

    def __call__(self, state: Any) -> dict[str, Any]: ...


def score_node(
    name: str, score: Callable[[Any, Conversation, list[Any]], MetricResult], *, order: Callable[[Any], Any] | None = None
) -> Node:
    """The ``reduce_score`` node: ``score(state, conversation, verdicts)`` as the
    state's ``results[name]``, the verdicts sorted by ``order`` (None: as the
    state holds them)."""

    def reduce_score(state: Any) -> dict[str, Any]:
        held = state.get("verdicts") or []
        verdicts = list(held) if order is None else sorted(held, key=order)
        return {"results": {name: with_transcript(score(state, conversation_of(state), verdicts), state)}}

    return reduce_score


def with_transcript(result: MetricResult, state: Mapping[str, Any]) -> MetricResult:
    """``result`` holding the requests of the state's ``judge_calls`` (extractions and the like,
    see :func:`judge_step`) in its ``transcript``, less those a verdict holds as its own."""
    own = {a.request for v in result.verdicts for a in v.transcript if a.request}
    calls = [a for a in state.get("judge_calls") or [] if not a.request or a.request not in own]
    return result.model_copy(update={"transcript": [*result.transcript, *calls]}) if calls else result


def window_node(window_size: int, *, name: str = "window_turns") -> Callable[..., dict[str, Any]]:
    """A node: the state's conversation (``conversation``, a :class:`Conversation`
    or a dict in judgegraph's format, or ``messages``) → ``{"conversation":
    Conversation, "windows": [Window, ...]}``,
    one window per exchange holding it and up to ``window_size - 1`` earlier
    exchanges (:mod:`judgegraph.windows`). ``window_size`` is checked here, when the
    graph is built: ``< 1`` or not a whole number is a ``ValueError``."""
    check_window_size(window_size)

    # "Optional[RunnableConfig]": the spelling LangGraph recognises (under postponed annotations) to pass the config
    def window_turns(state: Any, config: Optional[RunnableConfig] = None) -> dict[str, Any]:
        conversation = conversation_of(state)
        windows = windows_from_exchanges(conversation, exchanges(conversation), window_size)
        return {"conversation": conversation, "windows": in_scope(windows, config)}

    window_turns.__name__ = window_turns.__qualname__ = name
    return window_turns


# -- the latest exchange only -------------------------------------------------------

#: The run-time scope, in ``config["configurable"]``: ``"latest"`` judges only the latest exchange.
SCOPE_KEY = "judgegraph_scope"


def latest_scope(config: RunnableConfig | None) -> bool:
    """Whether the run judges only the latest exchange (``configurable[SCOPE_KEY] == "latest"``)."""
    return ((config or {}).get("configurable") or {}).get(SCOPE_KEY) == "latest"


def in_scope(items: Sequence[T], config: RunnableConfig | None) -> list[T]:
    """The per-exchange items (windows, exchanges) a run judges: every one, or
    under the latest scope only the last (its earlier turns stay its context).
    The blocks that split a conversation per exchange call it, so every metric
    built from them can judge only the latest exchange with no code of its own;
    a metric that reads the whole conversation (a session judge) ignores it."""
    return list(items[-1:]) if latest_scope(config) else list(items)


def fan_out(
    target: str,
    key: str,
    *,
    item: str,
    empty: str,
    extra: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
) -> Callable[[Mapping[str, Any]], list[Send] | str]:
    """A router for ``add_conditional_edges``: one ``Send(target, {item: x})``
    per element ``x`` of ``state[key]`` (plus ``extra(state)``'s keys in every
    task), or the node ``empty`` when the list is missing or empty. All the
    tasks run in the same step, concurrently; a plain edge from ``target`` to
    the next node runs that node once, after all of them::

        builder.add_conditional_edges("window_turns",
                                      fan_out("judge_turn", "windows", item="window", empty="reduce_score"),
                                      ["judge_turn", "reduce_score"])
    """

    def route(state: Mapping[str, Any]) -> list[Send] | str:
        items = state.get(key) or []
        if not items:
            return empty
        shared = dict(extra(state)) if extra else {}
        return [Send(target, {**shared, item: x}) for x in items]

    route.__name__ = route.__qualname__ = f"fan_out_{key}"
    return route


def outcome_fields(outcome: JudgeOutcome) -> dict[str, Any]:
    """The :class:`~judgegraph.results.Verdict` fields a judge outcome fills:
    ``error`` (None on success; the judge's message, or "no verdict", on
    failure), ``attempts``, ``usage``, ``score`` and ``transcript``. Use it in a judge step's
    ``finish`` and set ``verdict`` to None when ``outcome.ok`` is false::

        Verdict(verdict=outcome.value.verdict if outcome.ok else None, **outcome_fields(outcome))
    """
    return {
        "error": None if outcome.ok else (outcome.error or "no verdict"),
        "attempts": outcome.attempts,
        "usage": outcome.usage,
        "score": outcome.score,
        "transcript": outcome.transcript,
    }


# -- human review --------------------------------------------------------------------


def scoring_edges(builder: StateGraph, sources: Sequence[str], *, review: bool, metric: str,
                  reduce: str = "reduce_score", **review_options: Any) -> None:
    """The edges from the nodes that make verdicts (``sources``) to the reduce
    node; with ``review``, through a :func:`review_node` (``review_verdicts``)
    where a person can override verdicts before they are scored
    (``review_options``: :func:`review_node`'s ``read`` and ``write``). Every
    metric graph ends this way, so every one can be reviewed."""
    target = reduce
    if review:
        builder.add_node(REVIEW_NODE, review_node(metric, **review_options))
        builder.add_edge(REVIEW_NODE, reduce)
        target = REVIEW_NODE
    for source in sources:
        builder.add_edge(source, target)

REVIEW_NODE = "review_verdicts"


def apply_review(verdicts: Sequence[V], decisions: ReviewDecisions, *, by: str = "human") -> list[V]:
    """``verdicts`` with a person's ``decisions`` applied: ``{verdict id: {"verdict": ..., "reason": ...}}``
    (or ``{id: "yes"}``, or a list of ``{"id", "verdict", "reason"}`` records; ``[]`` keeps every verdict —
    LangGraph reads an empty dict given to ``Command(resume=...)`` as no answer). Each overridden verdict is validated by its own model, records ``review`` (who set it
    and what the judge had said) and loses its judge error; the others are returned unchanged. An id that is not
    one of the verdicts is a ``ValueError`` naming the known ids."""
    if isinstance(decisions, (list, tuple)):  # [{"id": ..., "verdict": ..., "reason": ...}, ...]
        decisions = {str(d["id"]): {k: x for k, x in d.items() if k != "id"} for d in decisions}
    decisions = {str(k): d for k, d in cast("Mapping[str, Union[str, Mapping[str, Any]]]", decisions or {}).items()}
    by_id = {v.id: v for v in verdicts}
    unknown = sorted(set(map(str, decisions)) - set(by_id))
    if unknown:
        raise ValueError(f"review: no verdict with id {', '.join(unknown)}; the verdicts are {', '.join(by_id)}")
    out = []
    for v in verdicts:
        decision = decisions.get(v.id)
        if decision is None:
            out.append(v)
            continue
        decision = {"verdict": decision} if isinstance(decision, str) else dict(decision)
        review = Review(by=decision.pop("by", by), judge_verdict=v.verdict, judge_reason=v.reason,
                        note=decision.pop("note", ""))
        data = {**v.model_dump(), "reason": decision.get("reason", v.reason), **decision,
                "error": None, "review": review}
        out.append(type(v).model_validate(data))
    return out


def review_node(
    metric: str,
    *,
    read: Callable[[Any], Sequence[Verdict]] = lambda state: state.get("verdicts") or [],
    write: str = "verdicts",
) -> RunnableLambda:
    """A ``review_verdicts`` node: it interrupts the run (``langgraph.types.interrupt``; the graph needs a
    checkpointer) with ``{"metric", "verdicts": [{id, verdict, reason, turns, error}, ...]}`` (``turns``: 1-based
    turn numbers, as the table, ``show``, reasons and the HTML report number them); resuming with
    ``Command(resume={verdict id: {"verdict": ..., "reason": ...}})`` (``[]`` keeps them all) overrides the chosen
    verdicts (:func:`apply_review`), and the next node computes the score from the reviewed verdicts."""
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
