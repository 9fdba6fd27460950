"""Re-judge chosen verdicts of any metric with a changed rubric, prompt or judge, paying only for those verdicts
(``docs/steering.md``).

The graph runs again with a :class:`~judgegraph.core.replay.Steer` in its config, so only the chosen verdicts'
requests go to the judge (the unit is a request: choosing one of five statements judged together re-judges the five).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot
from typing_extensions import Required, TypedDict, Unpack

from .core.replay import Steer, answers_of, with_steer
from .data.conversation import Conversation, as_conversation
from .data.prompts import Prompt, parse_prompt
from .data.results import MetricResult, Verdict
from .judges import ModelLike, resolve_judge

if TYPE_CHECKING:
    from .judges.base import Judge
    from .metrics import MetricSpec


class RejudgeError(ValueError):
    """A re-judge that cannot be done as asked (unknown verdict, no checkpointer, a thread never run, ...)."""


PromptLike = Prompt | str | os.PathLike[str] | None


def as_prompt(prompt: PromptLike) -> Prompt | None:
    """A :class:`~judgegraph.data.prompts.Prompt` from a prompt or a path, for the steps that write verdicts."""
    if prompt is None or isinstance(prompt, Prompt):
        return prompt
    path = Path(prompt)
    if not path.is_file():
        raise RejudgeError(f"prompt file {str(path)!r} not found")
    try:
        text = path.read_text(encoding="utf-8")  # not UTF-8: UnicodeDecodeError, for the caller to name the byte
    except OSError as exc:
        raise RejudgeError(f"prompt file {str(path)!r} cannot be read: {exc}") from exc
    parsed = parse_prompt(path.stem, text, path)
    if not parsed.placeholders:
        raise RejudgeError(f"prompt file {str(path)!r} has no placeholder: it would never show the judge the"
                           " conversation ({{ reply }}, {{ conversation }}, ...)")
    return parsed


def _ids(chosen: Iterable[int | str] | None) -> frozenset[str] | None:
    return None if chosen is None else frozenset(str(c) for c in chosen)


def steer_for(old: MetricResult | None, verdicts: list[Verdict], chosen: frozenset[str] | None, *,
              rubric: str | None, prompt: PromptLike, judge: Judge | None = None, review: bool = False) -> Steer:
    """The :class:`Steer` for re-judging ``chosen`` of ``verdicts`` (all when None)."""
    known = [v.id for v in verdicts]
    unknown = sorted((chosen or set()) - set(known))
    if unknown:
        what = "window" if any(hasattr(v, "window") for v in verdicts) else "verdict"
        raise RejudgeError(f"no {what} {', '.join(unknown)}: the {what}s are {', '.join(known) or 'none'}")
    results = [old] if old is not None else []
    replay = answers_of(results, leave_out=lambda v: chosen is None or v.id in chosen)
    return Steer(keep={v.id: v for v in verdicts}, chosen=chosen, replay=replay, prompt=as_prompt(prompt),
                 values={} if rubric is None else {"rubric": rubric}, judge=judge, review=review)


class Rejudged(TypedDict, total=False):
    """A re-judged result's ``details["rejudged"]``."""

    verdicts: Required[list[str]]  # the ids judged again
    judge: Required[str]
    judges: dict[str, list[str]]  # judge -> the ids it judged, when the result holds two judges' verdicts
    windows: list[int]
    rubric: str
    prompt: str


def _finish(new: MetricResult | None, steer: Steer, judge_name: str | None, rubric: str | None,
            prompt: PromptLike, old_judge: str | None = None) -> MetricResult | None:
    """``new`` with ``details.rejudged``: the verdicts judged again, by which judge, with which rubric or prompt;
    ``judges`` when the result holds verdicts of two judges (``old_judge``'s kept, the re-judge's new)."""
    if new is None:
        return None
    if rubric is not None and "rubric" not in steer.replaced and steer.rejudged:
        raise RejudgeError(f"metric {new.key!r} has no rubric to change: give a prompt file instead")
    # the verdicts a judge step wrote, and those a later node made from a new answer (they differ from the kept)
    done = sorted(steer.rejudged | {v.id for v in new.verdicts if steer.keep.get(v.id) is not v})
    how: Rejudged = {"verdicts": done, "judge": judge_name or (steer.judge.name if steer.judge else "")}
    kept = [v.id for v in new.verdicts if v.id not in done]
    if kept and old_judge and old_judge != how["judge"]:  # the verdicts came from two judges: say which from which
        how["judges"] = {how["judge"]: done, old_judge: kept}
    windows: list[int] = [w for v in new.verdicts
                          if v.id in steer.rejudged and (w := getattr(v, "window", None)) is not None]
    if windows:
        how["windows"] = sorted(windows)
    if rubric is not None:
        how["rubric"] = rubric
    if prompt is not None:
        how["prompt"] = str(getattr(as_prompt(prompt), "path", "") or "")
    return new.model_copy(update={"details": {**new.details, "rejudged": how}})


class RejudgeOptions(TypedDict, total=False):
    """What :func:`rejudge` and :func:`arejudge` take (one definition for both)."""

    model: Required[ModelLike]  # the judge: model string, chat model, or Judge
    verdict_ids: Iterable[int | str] | None  # the verdicts to judge again (Verdict.id); all when None
    rubric: str | None  # a new rubric, for metrics that have one
    prompt: PromptLike  # a Prompt or a prompt file replacing the prompt of the steps that write verdicts
    review: bool  # on a review=True graph: pause in review_verdicts again with the new verdicts


def _thread(graph: CompiledStateGraph, values: Mapping[str, Any], options: RejudgeOptions) -> tuple[Steer, Conversation]:
    result = (values.get("results") or {}).get(graph.name)
    verdicts = list(result.verdicts) if result is not None else list(values.get("verdicts") or [])
    if values.get("conversation") is None or (result is None and not verdicts):
        raise RejudgeError("the thread has no judged verdicts yet: run the graph on it first")
    judge = resolve_judge(options["model"])
    steer = steer_for(result, verdicts, _ids(options.get("verdict_ids")), rubric=options.get("rubric"),
                      prompt=options.get("prompt"), judge=judge, review=options.get("review", False))
    return steer, as_conversation(values["conversation"])


def _no_checkpointer(graph: CompiledStateGraph, exc: Exception) -> RejudgeError:
    return RejudgeError(f"graph {graph.name!r} has no checkpointer ({exc}): build it with checkpointer=...")


def _paused_or_result(graph: CompiledStateGraph, output: Any, snapshot: StateSnapshot, steer: Steer,
                      options: RejudgeOptions) -> MetricResult | None:
    """The re-judged result, or None when the run paused (a review, an interrupt) before the score."""
    if snapshot.next:
        return None
    results = (output or {}).get("results") if isinstance(output, Mapping) else None
    new = (results or (snapshot.values or {}).get("results") or {}).get(graph.name)
    return _finish(new, steer, None, options.get("rubric"), options.get("prompt"))


def rejudge(graph: CompiledStateGraph, config: RunnableConfig, **options: Unpack[RejudgeOptions]) -> MetricResult | None:
    """Re-judge verdicts (``verdict_ids``, :attr:`Verdict.id`; all when None) of a thread
    ``graph`` (built with a checkpointer) already ran, with a new ``rubric``, ``prompt`` or
    ``model``; only they cost calls. The recomputed result, or None when the graph paused."""
    try:
        snapshot = graph.get_state(config)
    except ValueError as exc:
        raise _no_checkpointer(graph, exc) from exc
    steer, conversation = _thread(graph, snapshot.values or {}, options)
    output = graph.invoke({"conversation": conversation}, with_steer(_latest(config), steer))
    return _paused_or_result(graph, output, graph.get_state(_latest(config)), steer, options)


async def arejudge(
    graph: CompiledStateGraph, config: RunnableConfig, **options: Unpack[RejudgeOptions]
) -> MetricResult | None:
    """:func:`rejudge` for async code: the chosen verdicts are judged concurrently."""
    try:
        snapshot = await graph.aget_state(config)
    except ValueError as exc:
        raise _no_checkpointer(graph, exc) from exc
    steer, conversation = await asyncio.to_thread(_thread, graph, snapshot.values or {}, options)  # reads files
    output = await graph.ainvoke({"conversation": conversation}, with_steer(_latest(config), steer))
    return _paused_or_result(graph, output, await graph.aget_state(_latest(config)), steer, options)


def _latest(config: RunnableConfig) -> RunnableConfig:
    """The thread's config without a checkpoint id: its latest state."""
    conf = {k: v for k, v in (config.get("configurable") or {}).items() if k not in ("checkpoint_id", "checkpoint_ns")}
    return {**config, "configurable": conf}


def result_options(result: MetricResult, takes: Iterable[str]) -> dict[str, object]:
    """The options ``result`` was computed with, among those its metric ``takes``."""
    known = set(takes)
    opts: dict[str, object] = {}
    if "threshold" in known and result.threshold is not None and not result.strict_mode:
        opts["threshold"] = result.threshold
    if "strict_mode" in known and result.strict_mode:
        opts["strict_mode"] = True
    for key in ("window_size", "verify", "n_questions", "batch_size", "dense", "trajectory", "arguments", "topics",
                "mode", "penalize_ambiguous_claims"):
        if key in known and result.details.get(key) is not None:
            opts[key] = result.details[key]
    return opts


def rejudge_result(
    result: MetricResult | Mapping[str, Any],
    conversation: Conversation,
    *,
    model: ModelLike,
    verdict_ids: Iterable[int | str] | None = None,
    windows: Iterable[int | str] | None = None,
    rubric: str | None = None,
    prompt: PromptLike = None,
    metric: str | MetricSpec | CompiledStateGraph | None = None,
    options: Mapping[str, Any] | None = None,
) -> MetricResult:
    """A results-file result with the chosen verdicts (all when None) judged again, the others
    kept, scored by the metric's own reduce node. ``metric`` defaults to the result's key; a spec
    is built with the result's options plus ``options`` (e.g. guidelines, which results do not record)."""
    from .metrics import MetricNotFound, MetricSpec, get_metric
    from .report import build_metric

    old = result if isinstance(result, MetricResult) else MetricResult.model_validate(result)
    if old.conversation_id != conversation.id:
        raise RejudgeError(f"result is for conversation {old.conversation_id!r}, not {conversation.id!r}")
    judge = resolve_judge(model)
    chosen = _ids(verdict_ids if verdict_ids is not None else windows)
    try:
        if isinstance(metric, CompiledStateGraph):
            graph, takes_rubric = metric, rubric is not None  # checked once the run shows whether it has one
            steer = steer_for(old, list(old.verdicts), chosen, rubric=rubric, prompt=prompt, judge=judge)
        else:
            spec = metric if isinstance(metric, MetricSpec) else get_metric(metric or old.key)
            takes_rubric = "rubric" in spec.options
            steer = steer_for(old, list(old.verdicts), chosen, rubric=rubric, prompt=prompt)
            opts = {**result_options(old, spec.options), **dict(options or {})}
            if spec.name != old.key:  # the result was given its own name (name=..., a promptfoo metric key)
                opts["name"] = old.key
            graph = build_metric(spec, judge, **opts)
    except MetricNotFound as exc:
        raise RejudgeError(f"{exc}; name the metric the result came from (-m)") from exc
    except (TypeError, ValueError) as exc:
        raise RejudgeError(f"{old.key}: {exc}") from exc
    if rubric is not None and not takes_rubric:
        raise RejudgeError(f"metric {old.key!r} has no rubric to change: give a prompt file instead")
    try:
        output = graph.invoke({"conversation": conversation}, with_steer(None, steer))
    except (TypeError, ValueError) as exc:
        raise RejudgeError(f"{old.key}: {exc}") from exc
    new = _finish((output.get("results") or {}).get(graph.name), steer, judge.name, rubric, prompt, old.judge)
    if new is None:
        raise RejudgeError(f"{old.key}: the graph computed no result")
    return new


__all__ = [
    "RejudgeError",
    "RejudgeOptions",
    "arejudge",
    "as_prompt",
    "rejudge",
    "rejudge_result",
    "result_options",
    "steer_for",
]
