"""Graphs for LangGraph Studio and the LangGraph server, with run-time settings.

The settings are the graph's ``context_schema`` (:class:`JudgeSettings`: a form in Studio; docs/steering.md). Each
combination is built once, on first use (in a worker thread under async: building a judge reads files), nothing at
import; the metric runs as a subgraph, so its checkpoints, interrupts and updates go through.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Annotated, Any, cast

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from typing_extensions import NotRequired, TypedDict

from .core.state import MetricInput, MetricOutput
from .data.results import MetricResult, merge_results

if TYPE_CHECKING:
    from .judges.base import Judge


@dataclass(frozen=True)
class JudgeSettings:
    """Run-time settings of a judge graph (its LangGraph context)."""

    model: str = ""  # e.g. "openai:gpt-4.1-mini"; empty: $JUDGEGRAPH_MODEL, else the offline judge
    base_url: str = ""  # an OpenAI-compatible server for the model; empty: $JUDGEGRAPH_BASE_URL
    threshold: float | None = None  # empty: the metric's default
    window_size: int | None = None  # exchanges per window; empty: the metric's default
    strict_mode: bool = False
    review: bool = False  # pause in review_verdicts so a person can override verdicts (needs a checkpointer)
    max_tries: int = 3  # asks per judgement when the model's reply is invalid
    guidelines: str = ""  # one a line: what conversational_guidelines checks (it needs them); other metrics ignore it


class StudioState(TypedDict):
    conversation: NotRequired[Any]
    messages: NotRequired[list[Any]]
    results: NotRequired[Annotated[dict[str, MetricResult], merge_results]]


Builder = Callable[[JudgeSettings], CompiledStateGraph]


def resolved(settings: JudgeSettings | dict[str, Any] | None) -> JudgeSettings:
    """``settings`` (a dict from a client, or None) with the environment's defaults filled in."""
    if settings is None:
        settings = JudgeSettings()
    elif isinstance(settings, dict):
        known = {f.name for f in fields(JudgeSettings)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ValueError(f"unknown judge settings {unknown}; known: {sorted(known)}")
        settings = JudgeSettings(**settings)
    return replace(settings, model=settings.model or os.environ.get("JUDGEGRAPH_MODEL", ""),
                   base_url=settings.base_url or os.environ.get("JUDGEGRAPH_BASE_URL", ""))


def judge_for(s: JudgeSettings) -> Judge:
    """The judge the settings name: an LLM judge for ``model`` (at ``base_url``), else the offline judge."""
    from .judges import resolve_judge

    client: dict[str, str] = {"base_url": s.base_url} if s.base_url else {}
    return resolve_judge(s.model, max_tries=s.max_tries, **client) if s.model else resolve_judge()


def options_for(metric: str, s: JudgeSettings) -> dict[str, float | bool | list[str]]:
    """The settings a metric declares (a metric with no window has no ``window_size``)."""
    from .metrics import get_metric

    wanted = {"threshold": s.threshold, "window_size": s.window_size, "strict_mode": s.strict_mode or None,
              "review": s.review or None, "guidelines": [g.strip() for g in s.guidelines.splitlines() if g.strip()] or None}
    spec = get_metric(metric)
    return {k: v for k, v in wanted.items() if v is not None and k in (spec.fields() if spec.settings else spec.options)}


def metric_builder(metric: str) -> Builder:
    """A :data:`Builder` for a registered metric: its factory with the settings it takes."""

    def build(s: JudgeSettings) -> CompiledStateGraph:
        from .report import build_metric

        return build_metric(metric, judge_for(s), **options_for(metric, s))

    return build


def configurable(
    metric: str, build: Builder | None = None, *, name: str | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A graph running ``metric`` with each run's :class:`JudgeSettings`; ``build`` makes the
    graph for one combination (default: :func:`metric_builder`)."""
    make = build or metric_builder(metric)
    cache: dict[JudgeSettings, CompiledStateGraph] = {}
    lock = threading.Lock()

    def graph_for(settings: JudgeSettings) -> CompiledStateGraph:
        with lock:
            if settings not in cache:
                cache[settings] = make(settings)
            return cache[settings]

    def settings_now() -> JudgeSettings:
        return resolved(get_runtime(JudgeSettings).context)

    def run(state: StudioState) -> MetricOutput:
        out = graph_for(settings_now()).invoke(_inputs(state))
        return MetricOutput(results=out.get("results") or {})

    async def arun(state: StudioState) -> MetricOutput:
        graph = await asyncio.to_thread(graph_for, settings_now())  # building reads prompt files, loads clients
        out = await graph.ainvoke(_inputs(state))
        return MetricOutput(results=out.get("results") or {})

    builder = StateGraph(StudioState, context_schema=JudgeSettings, input_schema=MetricInput,
                         output_schema=MetricOutput)
    builder.add_node(metric, RunnableLambda(run, afunc=arun, name=metric))
    builder.add_edge(START, metric)
    builder.add_edge(metric, END)
    graph = builder.compile(name=name or metric)
    graph.graph_for = graph_for  # type: ignore[attr-defined]  # for tests and warm-up
    return graph


def _inputs(state: StudioState) -> MetricInput:
    given = {k: state[k] for k in ("conversation", "messages") if state.get(k) is not None}
    return cast(MetricInput, given)


__all__ = ["JudgeSettings", "configurable", "judge_for", "metric_builder", "options_for", "resolved"]
