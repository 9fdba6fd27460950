"""Metric graphs and the registry the CLI resolves metric names with.

Each metric module declares ``METRIC_SPECS: list[MetricSpec]``; the registry
imports the modules in :data:`METRIC_MODULES` lazily. A name containing ``:``
is an import path to a custom metric (``mypkg.judges:politeness``): a compiled
graph, or a factory called with the options.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from langgraph.graph.state import CompiledStateGraph

METRIC_MODULES = ("relevancy", "contextual", "response", "session")


@dataclass(frozen=True)
class MetricSpec:
    name: str
    factory: Callable[..., CompiledStateGraph]
    summary: str
    options: frozenset[str]  # keyword options the factory takes from the CLI / input files


@lru_cache(maxsize=1)
def registry() -> dict[str, MetricSpec]:
    specs: dict[str, MetricSpec] = {}
    for module in METRIC_MODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{module}":
                continue  # not written yet
            raise
        for spec in getattr(mod, "METRIC_SPECS", []):
            specs[spec.name] = spec
    return specs


def canonical_name(name: str) -> str:
    if ":" in name:
        return name.strip()
    return name.strip().lower().replace("-", "_")


def _import_path(path: str) -> MetricSpec:
    module, _, attr = path.partition(":")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise KeyError(f"custom metric {path!r} could not be imported: {exc}") from exc
    if isinstance(obj, CompiledStateGraph):
        graph = obj
        return MetricSpec(path, lambda **_: graph, f"custom metric {path}", frozenset())
    if callable(obj):
        return MetricSpec(path, obj, f"custom metric {path}", frozenset({"threshold"}))
    raise KeyError(f"custom metric {path!r} is neither a compiled graph nor a factory")


def get_metric(name: str) -> MetricSpec:
    key = canonical_name(name)
    if ":" in key:
        return _import_path(key)
    specs = registry()
    if key not in specs:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(n.replace('_', '-') for n in specs)}")
    return specs[key]


def create_metric(name: str, **options: Any) -> CompiledStateGraph:
    return get_metric(name).factory(**options)
