"""Metric graphs and the registry the CLI resolves metric names with.

A metric is a :class:`MetricSpec` plus a graph built from :mod:`judgegraph.nodes`
(docs/architecture.md). The registry is every ``METRIC_SPECS`` of this package's modules
(a new metric is a new module) and every entry point in the group :data:`ENTRY_POINT_GROUP`
of an installed package (docs/guide/custom.md). A name containing ``:`` is an import path to a custom metric.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import pkgutil
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Literal

from langgraph.graph.state import CompiledStateGraph

if TYPE_CHECKING:
    from ..judges import ModelLike

#: The entry point group through which an installed package adds metrics: each entry point's object is a MetricSpec.
ENTRY_POINT_GROUP = "judgegraph.metrics"
#: What runs when neither the caller nor the input file names a metric.
DEFAULT_METRICS = ("turn_relevancy",)


Need = Literal["llm", "embeddings", "retrieval_context", "guidelines"]


@dataclass(frozen=True)
class MetricSpec:
    """What a metric is: ``factory(model=judge, **options)`` builds its graph; ``options``
    are those it takes from the CLI and input files; ``needs`` what it needs; ``scope``
    ``"exchange"`` (the latest scope judges the last one) or ``"conversation"`` (a session judge)."""

    name: str
    factory: Callable[..., CompiledStateGraph]
    summary: str
    options: frozenset[str]
    needs: frozenset[Need] = frozenset()
    scope: Literal["exchange", "conversation"] = "exchange"

    def __post_init__(self) -> None:  # the options every metric takes (scoring.JudgeOptions)
        object.__setattr__(self, "options", frozenset(self.options) | COMMON_OPTIONS)


@lru_cache(maxsize=1)
def built_ins() -> dict[str, MetricSpec]:
    """judgegraph's own metrics: the ``METRIC_SPECS`` of every module of this package."""
    specs: dict[str, MetricSpec] = {}
    for module in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{module.name}")
        for spec in getattr(mod, "METRIC_SPECS", ()):
            specs[spec.name] = spec
    return specs


@lru_cache(maxsize=1)
def _plugins() -> dict[str, MetricSpec]:
    """The metrics installed packages add: each entry point of :data:`ENTRY_POINT_GROUP` names a
    :class:`MetricSpec` (``name = "package.module:SPEC"``). A broken one is one warning naming it and why,
    and is left out; loaded once per process, only when the registry is listed or a name is not a built-in."""
    own, specs = built_ins(), {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            spec = point.load()
        except Exception as exc:  # noqa: BLE001 - another package's failure is reported, not raised
            problem = f"could not be loaded: {type(exc).__name__}: {exc}"
        else:
            if not isinstance(spec, MetricSpec):
                problem = f"is {type(spec).__name__}, not a judgegraph.metric.MetricSpec"
            elif spec.name != canonical_name(spec.name) or not spec.name.isidentifier():
                problem = f"names its metric {spec.name!r}: a metric name is lower case with underscores"
            elif spec.name in own:
                problem = f"declares {spec.name!r}, the name of a built-in metric"
            elif spec.name in specs:
                problem = f"declares {spec.name!r}, the name of another plugin's metric"
            else:
                specs[spec.name] = spec
                continue
        dist = f" (package {point.dist.name})" if point.dist is not None else ""
        warnings.warn(f"metric plugin {point.name} = {point.value}{dist} {problem}; it is left out", stacklevel=1)
    return specs


@lru_cache(maxsize=1)
def registry() -> dict[str, MetricSpec]:
    """Every metric by name: the built-ins, then the plugins' (:data:`ENTRY_POINT_GROUP`)."""
    return {**built_ins(), **_plugins()}


def canonical_name(name: str) -> str:
    if ":" in name:
        return name.strip()
    return name.strip().lower().replace("-", "_")


class MetricNotFound(KeyError):
    """An unknown metric name, or a custom metric that cannot be imported
    (a ``KeyError``, printed without quotes)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


#: Options the CLI and input files give metrics; a custom factory gets those it names.
CLI_OPTIONS = frozenset({"window_size", "threshold", "strict_mode", "reason", "rubric", "dense", "min_judged"})
#: Options every metric takes.
COMMON_OPTIONS = frozenset({"min_judged"})


def _import_attr(path: str) -> Any:
    module, _, attr = path.partition(":")
    if not module or not attr or not all(p.isidentifier() for p in module.split(".") + attr.split(".")):
        raise MetricNotFound(f"custom metric {path!r}: expected module.path:attribute, e.g. mypkg.judges:politeness")
    # Like uvicorn/gunicorn: a module in the current directory imports even when
    # the console script did not put it on sys.path (last, so it shadows nothing).
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    try:
        obj: Any = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        where = "" if exc.name != module.split(".")[0] else " (not on PYTHONPATH or in the current directory)"
        raise MetricNotFound(f"custom metric {path!r} could not be imported: {exc}{where}") from exc
    except Exception as exc:
        raise MetricNotFound(f"custom metric {path!r}: importing {module!r} failed: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise MetricNotFound(f"custom metric {path!r}: module {module!r} has no attribute {attr!r}") from exc
    return obj


def _factory_spec(path: str, fn: Callable[..., Any]) -> MetricSpec:
    """A callable returning a compiled graph, as a spec whose factory takes ``model=``: passed
    on as ``model=``, or as a Judge to one taking only ``judge=`` (an older spelling), with the
    options in :data:`CLI_OPTIONS` it names. The one place that looks at a factory's judge parameter."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    required = [n for n, p in params.items()
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                and n not in CLI_OPTIONS | {"judge", "model"}]
    if required:
        raise MetricNotFound(f"custom metric {path!r} needs arguments the command line cannot give: {', '.join(required)}")
    judge_arg = "model" if "model" in named else "judge" if "judge" in named else None
    options = frozenset(named & CLI_OPTIONS)

    def factory(*, model: ModelLike = None, **opts: Any) -> CompiledStateGraph:
        kwargs = {k: v for k, v in opts.items() if k in options}
        if judge_arg == "model" and model is not None:
            kwargs["model"] = model
        elif judge_arg == "judge" and model is not None:
            from ..judges import resolve_judge

            kwargs["judge"] = resolve_judge(model)
        graph = fn(**kwargs)
        if not isinstance(graph, CompiledStateGraph):
            raise TypeError(f"custom metric {path!r} returned {type(graph).__name__}, not a compiled graph")
        return graph

    return MetricSpec(path, factory, f"custom metric {path}", options)


def _import_path(path: str) -> MetricSpec:
    """A custom metric by import path ``module.path:attribute``: a compiled
    graph (used as it is, with its own judge), a :class:`MetricSpec`, or a callable returning one
    (``make_judge``-style factories, ``functools.partial(make_judge, ...)``)."""
    obj = _import_attr(path)
    if isinstance(obj, MetricSpec):
        return obj
    if isinstance(obj, CompiledStateGraph):
        graph = obj
        return MetricSpec(path, lambda **_: graph, f"custom metric {path}", frozenset())
    if callable(obj):
        return _factory_spec(path, obj)
    raise MetricNotFound(f"custom metric {path!r} is {type(obj).__name__}: neither a compiled graph nor a factory")


def get_metric(name: str) -> MetricSpec:
    key = canonical_name(name)
    if ":" in key:
        return _import_path(key)
    if key in built_ins():  # a plugin is loaded only for a name that is not a built-in
        return built_ins()[key]
    specs = registry()
    if key not in specs:
        close = difflib.get_close_matches(key, list(specs), n=1, cutoff=0.7)
        hint = f" (did you mean {close[0].replace('_', '-')!r}?)" if close else ""
        raise MetricNotFound(f"unknown metric {name!r}{hint}; known: {', '.join(n.replace('_', '-') for n in specs)}")
    return specs[key]


def build_metric(metric: str | MetricSpec, model: ModelLike = None, **options: Any) -> CompiledStateGraph:
    """The metric's compiled graph: its factory called with ``model`` (a model string, a chat
    model, a Judge used as it is, or None: offline) and ``options``; the one place a factory is called."""
    spec = metric if isinstance(metric, MetricSpec) else get_metric(metric)
    return spec.factory(model=model, **options)


def create_metric(metric: str | MetricSpec, model: ModelLike = None, **options: Any) -> CompiledStateGraph:
    """Any metric's compiled graph, by name (a built-in, a plugin's, ``module:attribute``) or spec, its judge made
    from ``model`` and built with its own ``options``: the one public way to make a metric's graph
    (:func:`build_metric`)."""
    return build_metric(metric, model, **options)
