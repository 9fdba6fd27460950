"""Re-judge chosen windows of a judged conversation with a changed rubric or
prompt, paying only for those windows.

Two ways in, one mechanism:

* :func:`rejudge` / :func:`arejudge` on a **checkpointed thread** of a metric
  graph: the chosen windows are judged again, the new verdicts are written to
  the thread with ``update_state(..., as_node="judge_turn")`` (verdicts are
  keyed by window, so they *replace* the old ones), and the graph is resumed
  with ``invoke(None, config)``: it runs the metric's own ``reduce_score`` from
  there, so the score, status and reason follow the metric's rules.
* :func:`rejudge_result` on a **results file** line (``judgegraph rejudge``):
  the verdicts not chosen are read back from the result (0 calls), the chosen
  ones judged again, and the same update-then-resume is done on a fresh thread
  of the metric's graph (an in-memory checkpointer) to recompute the result.

Covered metrics: the relevancy graph (``turn_relevancy`` and
``conversation_relevance``, and any name given to them): one ``judge_turn``
per window, requests built by :func:`judgegraph.metrics.relevancy.turn_request`.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import Required, TypedDict, Unpack

from .conversation import Conversation
from .judges import JudgeOutcome, JudgeRequest, ModelLike, resolve_judge
from .metrics.relevancy import DEFAULT_RUBRIC_STEP, turn_request
from .nodes import outcome_fields
from .prompts import Prompt, load_prompt, parse_prompt
from .results import MetricResult, WindowVerdict
from .windows import Window, exchanges, windows_from_exchanges

#: Metrics whose verdicts can be re-judged (the relevancy graph under its two presets).
REJUDGE_METRICS = ("turn_relevancy", "conversation_relevance")
JUDGE_NODE = "judge_turn"
REVIEW_NODE = "review_verdicts"


class RejudgeError(ValueError):
    """A re-judge that cannot be done as asked (unknown window, a graph that is not a relevancy graph, ...)."""


PromptLike = Prompt | str | os.PathLike[str] | None


def as_prompt(prompt: PromptLike) -> Prompt | None:
    """A :class:`~judgegraph.prompts.Prompt`, or a path to a prompt file (same
    placeholders as ``prompts/turn_relevancy/judge_turn.md``)."""
    if prompt is None or isinstance(prompt, Prompt):
        return prompt
    path = Path(prompt)
    if not path.is_file():
        raise RejudgeError(f"prompt file {str(path)!r} not found")
    parsed = parse_prompt(path.stem, path.read_text(encoding="utf-8"), path)
    from .metrics.relevancy import JUDGE_STEP, PROMPT_VALUES

    expected = PROMPT_VALUES[JUDGE_STEP]
    if parsed.placeholders - expected:
        raise RejudgeError(f"prompt file {str(path)!r}: unknown placeholders {sorted(parsed.placeholders - expected)}"
                           f" (a judge_turn prompt can use {sorted(expected)})")
    if "reply" not in parsed.placeholders:
        raise RejudgeError(f"prompt file {str(path)!r} never shows the reply: it needs {{{{ reply }}}}")
    return parsed


def _with_prompt(request: JudgeRequest, prompt: Prompt | None) -> JudgeRequest:
    """The request with ``prompt``, given only the values it uses (a prompt may leave some out)."""
    if prompt is None:
        return request
    return replace(request, prompt=prompt, values={k: v for k, v in request.values.items() if k in prompt.placeholders})


@dataclass(frozen=True)
class Plan:
    """What a re-judge asks: one request per chosen window."""

    windows: list[Window]
    requests: list[JudgeRequest]


def plan(windows: Sequence[Window], chosen: Iterable[int | str] | None, *, rubric: str | None,
         prompt: PromptLike = None) -> Plan:
    """The requests for the ``chosen`` window indices (or verdict ids, which are
    the same strings for window verdicts); all windows when ``chosen`` is None.
    ``rubric`` None: the metric's default rubric."""
    by_index = {w.index: w for w in windows}
    if chosen is None:
        picked = list(windows)
    else:
        picked = []
        for key in chosen:
            try:
                index = int(key)
            except (TypeError, ValueError):
                raise RejudgeError(f"verdict id {key!r} is not a window number") from None
            if index not in by_index:
                raise RejudgeError(f"no window {index}: the conversation has windows {sorted(by_index)}")
            if by_index[index] not in picked:
                picked.append(by_index[index])
    text = rubric if rubric is not None else load_prompt(DEFAULT_RUBRIC_STEP).template.strip()
    template = as_prompt(prompt)
    return Plan(picked, [_with_prompt(turn_request(w, rubric=text), template) for w in picked])


def window_verdict(window: Window, outcome: JudgeOutcome) -> WindowVerdict:
    """The verdict ``judge_turn`` records for ``window`` (same fields)."""
    value = outcome.value if outcome.ok else None
    return WindowVerdict(
        window=window.index,
        turns=list(window.target.reply_turn_indices),
        verdict=getattr(value, "verdict", None),
        reason=getattr(value, "reason", ""),
        reply=window.target.reply_text,
        **outcome_fields(outcome),
    )


def _check_graph(graph: CompiledStateGraph) -> None:
    if JUDGE_NODE not in graph.nodes or "reduce_score" not in graph.nodes:
        raise RejudgeError(f"graph {graph.name!r} has no {JUDGE_NODE!r}/'reduce_score' nodes: re-judging covers"
                           f" the relevancy graphs ({', '.join(REJUDGE_METRICS)})")


def _writer(graph: CompiledStateGraph, review: bool) -> str:
    """The node the new verdicts are written as: the next node to run is the one after it."""
    return REVIEW_NODE if REVIEW_NODE in graph.nodes and not review else JUDGE_NODE


def _no_checkpointer(graph: CompiledStateGraph, exc: ValueError) -> RejudgeError:
    return RejudgeError(f"graph {graph.name!r} has no checkpointer ({exc}): build it with checkpointer=...")


def _thread_plan(graph: CompiledStateGraph, snapshot: Any, verdict_ids: Iterable[int | str] | None,
                 rubric: str | None, prompt: PromptLike) -> Plan:
    values = snapshot.values or {}
    if "windows" not in values:
        raise RejudgeError("the thread has no judged windows yet: run the graph on it first")
    return plan(values["windows"], verdict_ids, rubric=rubric, prompt=prompt)


def _latest(config: RunnableConfig) -> RunnableConfig:
    """The thread's config without a checkpoint id: its latest state."""
    conf = {k: v for k, v in (config.get("configurable") or {}).items() if k not in ("checkpoint_id", "checkpoint_ns")}
    return {**config, "configurable": conf}


def _result_of(graph: CompiledStateGraph, output: Any, snapshot: Any) -> MetricResult | None:
    if snapshot.next:  # paused (a review, an interrupt): the score is not recomputed yet
        return None
    results = (output or {}).get("results") if isinstance(output, Mapping) else None
    if not results:
        results = (snapshot.values or {}).get("results") or {}
    return results.get(graph.name) or next(iter(results.values()), None)


class RejudgeOptions(TypedDict, total=False):
    """What :func:`rejudge` and :func:`arejudge` take (one definition for both)."""

    model: Required[ModelLike]  # the judge: model string, chat model, or Judge
    verdict_ids: Iterable[int | str] | None  # the windows to judge again (Verdict.id); all when None
    rubric: str | None  # the new rubric (None: the default one)
    prompt: PromptLike  # a Prompt or a prompt file path replacing judge_turn's
    review: bool  # on a review=True graph: pause in review_verdicts again with the new verdicts


def _start(graph: CompiledStateGraph, snapshot: Any, options: RejudgeOptions) -> Plan:
    return _thread_plan(graph, snapshot, options.get("verdict_ids"), options.get("rubric"), options.get("prompt"))


def rejudge(graph: CompiledStateGraph, config: RunnableConfig, **options: Unpack[RejudgeOptions]) -> MetricResult | None:
    """Re-judge windows of a checkpointed thread and recompute its score.

    ``graph``: a relevancy graph built with a checkpointer, already run on the
    thread ``config`` (``{"configurable": {"thread_id": ...}}``). ``verdict_ids``:
    the windows to judge again (``Verdict.id``, i.e. window numbers; all when
    None). ``rubric`` / ``prompt`` (a :class:`Prompt` or a prompt file path):
    what changes (``rubric`` None: the default rubric). ``model``: the judge
    (model string, chat model, or :class:`Judge`). Only the chosen windows cost
    calls; the others keep their verdicts. A graph built with ``review=True``
    goes straight on to the score (the person asked for this re-judge) unless
    ``review`` is true: then it pauses in ``review_verdicts`` again with the new
    verdicts. Returns the recomputed result (None when the graph paused before
    computing it).
    """
    _check_graph(graph)
    try:
        snapshot = graph.get_state(config)
    except ValueError as exc:
        raise _no_checkpointer(graph, exc) from exc
    todo = _start(graph, snapshot, options)
    judge = resolve_judge(options["model"])
    verdicts = [window_verdict(w, judge.run(r)) for w, r in zip(todo.windows, todo.requests, strict=True)]
    cfg = graph.update_state(config, {"verdicts": verdicts}, as_node=_writer(graph, options.get("review", False)))
    output = graph.invoke(None, cfg)
    return _result_of(graph, output, graph.get_state(_latest(cfg)))


async def arejudge(
    graph: CompiledStateGraph, config: RunnableConfig, **options: Unpack[RejudgeOptions]
) -> MetricResult | None:
    """:func:`rejudge` for async code: the chosen windows are judged concurrently."""
    _check_graph(graph)
    try:
        snapshot = await graph.aget_state(config)
    except ValueError as exc:
        raise _no_checkpointer(graph, exc) from exc
    todo = await asyncio.to_thread(_start, graph, snapshot, options)  # reads prompt files
    judge = resolve_judge(options["model"])
    outcomes = await asyncio.gather(*(judge.arun(r) for r in todo.requests))
    verdicts = [window_verdict(w, o) for w, o in zip(todo.windows, outcomes, strict=True)]
    cfg = await graph.aupdate_state(config, {"verdicts": verdicts},
                                    as_node=_writer(graph, options.get("review", False)))
    output = await graph.ainvoke(None, cfg)
    return _result_of(graph, output, await graph.aget_state(_latest(cfg)))


# -- a result read back from a results file ----------------------------------------------


def windows_of(conversation: Conversation, window_size: int) -> list[Window]:
    return windows_from_exchanges(conversation, exchanges(conversation), window_size)


def rejudge_result(
    result: MetricResult | Mapping[str, Any],
    conversation: Conversation,
    *,
    model: ModelLike,
    windows: Iterable[int | str] | None = None,
    rubric: str | None = None,
    prompt: PromptLike = None,
) -> MetricResult:
    """A results-file result with the chosen ``windows`` judged again (all when
    None): the other verdicts are kept as they are (0 calls) and the result is
    recomputed by the metric's own ``reduce_score``. The metric, window size,
    threshold and strict mode are the result's own; ``conversation`` is the one
    the result was computed for (from the input file)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from .metrics import get_metric

    old = result if isinstance(result, MetricResult) else MetricResult.model_validate(result)
    if old.key not in REJUDGE_METRICS:
        raise RejudgeError(f"metric {old.key!r} cannot be re-judged yet: covered are {', '.join(REJUDGE_METRICS)}")
    if old.conversation_id != conversation.id:
        raise RejudgeError(f"result is for conversation {old.conversation_id!r}, not {conversation.id!r}")
    window_size = int(old.details.get("window_size") or 0)
    if window_size < 1:
        raise RejudgeError(f"result for {old.conversation_id!r} ({old.key}) records no window_size")
    kept = [WindowVerdict.model_validate(v.model_dump() if hasattr(v, "model_dump") else v) for v in old.verdicts]
    todo = plan(windows_of(conversation, window_size), windows, rubric=rubric, prompt=prompt)
    judge = resolve_judge(model)
    fresh = [window_verdict(w, judge.run(r)) for w, r in zip(todo.windows, todo.requests, strict=True)]
    threshold = 0.5 if old.threshold is None else old.threshold
    graph = get_metric(old.key).factory(model=judge, window_size=window_size, threshold=threshold,
                                        strict_mode=old.strict_mode, rubric=rubric, checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": str(uuid.uuid4())}}
    # kept first, fresh second: the reducer is keyed by window, so a fresh verdict replaces its old one
    cfg = graph.update_state(cfg, {"conversation": conversation, "verdicts": kept}, as_node=JUDGE_NODE)
    cfg = graph.update_state(cfg, {"verdicts": fresh}, as_node=JUDGE_NODE)
    output = graph.invoke(None, cfg)
    new = _result_of(graph, output, graph.get_state(_latest(cfg)))
    if new is None:
        raise RejudgeError(f"{old.key}: the graph computed no result")
    how = {"windows": [w.index for w in todo.windows], "judge": judge.name}
    how.update({"rubric": rubric} if rubric is not None else {})
    how.update({"prompt": str(getattr(as_prompt(prompt), "path", "") or "")} if prompt is not None else {})
    return new.model_copy(update={"details": {**new.details, "rejudged": how}})


__all__ = [
    "REJUDGE_METRICS",
    "Plan",
    "RejudgeError",
    "arejudge",
    "as_prompt",
    "plan",
    "rejudge",
    "rejudge_result",
    "window_verdict",
]
