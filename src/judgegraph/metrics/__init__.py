"""Metric graphs and the registry the CLI resolves metric names with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph.graph.state import CompiledStateGraph


@dataclass(frozen=True)
class MetricSpec:
    name: str
    factory: Callable[..., CompiledStateGraph]
    summary: str
    options: frozenset[str]  # keyword options the factory takes from the CLI / input files


def _relevancy():
    from .relevancy import create_conversation_relevance_judge, create_turn_relevancy_judge

    opts = frozenset({"window_size", "threshold", "strict_mode", "reason", "rubric"})
    return [
        MetricSpec("turn_relevancy", create_turn_relevancy_judge,
                   "Is each assistant reply relevant to its window of the conversation? (deepeval; window 10)", opts),
        MetricSpec("conversation_relevance", create_conversation_relevance_judge,
                   "Share of replies relevant in sliding windows of input/output pairs (promptfoo; window 5)", opts),
    ]


def registry() -> dict[str, MetricSpec]:
    return {spec.name: spec for spec in _relevancy()}


def canonical_name(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def get_metric(name: str) -> MetricSpec:
    specs = registry()
    key = canonical_name(name)
    if key not in specs:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(n.replace('_', '-') for n in specs)}")
    return specs[key]


def create_metric(name: str, **options: Any) -> CompiledStateGraph:
    spec = get_metric(name)
    return spec.factory(**options)
