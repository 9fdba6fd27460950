"""Metric graphs and the registry the CLI resolves metric names with.

A metric is a :class:`MetricSpec` plus a graph built from :mod:`judgegraph.core.nodes`
(docs/architecture.md). The registry is every MetricSpec bound to a public name in this package's modules
(a new metric is a new module) and every entry point in the group :data:`ENTRY_POINT_GROUP`
of an installed package (docs/guide/custom.md). A name containing ``:`` is an import path to a custom metric.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import pkgutil
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import MISSING, Field, dataclass, field
from functools import lru_cache
from importlib.metadata import entry_points
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal

from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph

from .._lazy import import_object
from ..core.scoring import JudgeOptions

if TYPE_CHECKING:
    from ..judges import ModelLike

#: The entry point group through which an installed package adds metrics: each entry point's object is a MetricSpec.
ENTRY_POINT_GROUP = "judgegraph.metrics"
#: What runs when neither the caller nor the input file names a metric.
DEFAULT_METRICS = ("turn_relevancy",)


Need = Literal["llm", "embeddings", "retrieval_context", "guidelines"]
#: What a metric can do beyond what every metric built from the blocks can (transcripts, review, re-judging, dry run,
#: juries): ``offline_rule``, its verdicts are what ``judgegraph align --model offline`` fits the offline judge's rule to.
Capability = Literal["offline_rule"]


@dataclass(frozen=True)
class MetricSpec:
    """A metric, declared once: its ``name``, a one-line ``summary``, its options (the fields of its ``settings``
    class, a :class:`~judgegraph.core.scoring.JudgeOptions`: typed, with defaults and help, checked once), what it
    ``needs``, its ``scope`` (``"exchange"``: the latest scope judges the last one; ``"conversation"``: a session
    judge), ``build`` (settings → the uncompiled graph), ``defaults`` over the settings' own, the judge ``tasks``
    only an LLM judge answers, its ``capabilities`` and ``prompt_values`` (``{prompt step: the values its node
    passes}``: the run header hashes these files, tests/unit/test_prompts.py checks their placeholders). From it come its ``factory``
    (``create_<name>_metric(*, model=None, **options, name=..., **compile)``, signature and docstring included:
    :meth:`create`), ``options`` (those the command line and input files give), ``judgegraph metrics NAME``, its
    entry in the registry and in the docs.

    The older form, ``MetricSpec(name, factory, summary, options)`` (a factory of one's own, the option names it
    takes from the command line), still works."""

    name: str
    factory: Callable[..., CompiledStateGraph] = None  # type: ignore[assignment]  # generated from settings
    summary: str = ""
    options: frozenset[str] = frozenset()
    needs: frozenset[Need] = frozenset()
    scope: Literal["exchange", "conversation"] = "exchange"
    settings: type[JudgeOptions] | None = None
    build: Callable[[Any], StateGraph] | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    tasks: tuple[str, ...] = ()
    doc: str = ""
    factory_name: str = ""  # default: create_<name>_metric
    capabilities: frozenset[Capability] = frozenset()
    prompt_values: Mapping[str, AbstractSet[str]] = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "needs", frozenset(self.needs))
        if self.settings is None or self.build is None:
            if self.factory is None:
                raise TypeError(f"MetricSpec {self.name!r}: give settings and build (or a factory of your own)")
            object.__setattr__(self, "options", frozenset(self.options) | {"min_judged"})  # every metric takes it
            return
        fields = self.fields()
        if unknown := set(self.defaults) - set(fields) - {"name"}:
            raise TypeError(f"MetricSpec {self.name!r}: defaults for no option: {', '.join(sorted(unknown))}")
        object.__setattr__(self, "options", frozenset(n for n, f in fields.items() if f.metadata.get("cli", True)))
        if self.factory is None:
            object.__setattr__(self, "factory", _generated_factory(self))

    def fields(self) -> dict[str, Field[Any]]:
        """The options of a declared metric: its settings' fields but ``name`` and ``judge``, by name."""
        own = [f for f in dataclasses.fields(self.settings or JudgeOptions)
               if f.init and f.name not in ("name", "judge")]  # not init: derived by the settings' check
        common = {f.name for f in dataclasses.fields(JudgeOptions)}  # listed last: the metric's own first
        return {f.name: f for f in sorted(own, key=lambda f: f.name in common)}

    def default(self, option: str) -> Any:
        """An option's default: the spec's own, else its settings field's (``dataclasses.MISSING``: required)."""
        return self.defaults.get(option, self.fields()[option].default)

    def option_table(self) -> list[tuple[str, str, str]]:
        """``(option, default, help)`` of each option the command line and input files give (a spec of the older
        form: its option names alone)."""
        if self.settings is None:
            return [(name, "", "") for name in sorted(self.options)]
        fields = self.fields()
        return [(n, _show(self.default(n)), fields[n].metadata.get("help", "")
                 + (f" ({' | '.join(choices)})" if (choices := self.choices(n)) else "")) for n in fields if n in self.options]

    def kinds(self, option: str) -> tuple[Any, ...]:
        """The types an option's declaration allows (a union's members; ``None`` left in)."""
        hint = _hints(self.settings).get(option)
        return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, UnionType) else (hint,)

    def choices(self, option: str) -> list[str]:
        """The values an option's ``Literal`` type allows (none: any value of its type)."""
        return [c for k in self.kinds(option) if typing.get_origin(k) is Literal for c in typing.get_args(k)]

    def typed(self, option: str, text: str) -> Any:
        """The command line's ``text`` for ``option`` (``--option NAME=VALUE``) as its declared type: a number, true or
        false, one of a ``Literal``'s values (another: a ``ValueError`` naming them), ``[text]`` for a list; a text
        that is not of the type is returned as it is, for the settings' check to refuse with its own message."""
        kinds = self.kinds(option)
        if choices := self.choices(option):
            if text in choices:
                return text
            raise ValueError(f"{option} must be one of {', '.join(choices)}, got {text!r}")
        for kind, read in ((bool, _BOOLS.__getitem__), (int, int), (float, float)):
            if kind in kinds:
                try:
                    return read(text.strip().lower())
                except (KeyError, ValueError):
                    return text
        return [text] if any(typing.get_origin(k) in (list, tuple, Sequence) for k in kinds) else text

    def create(self, model: ModelLike = None, **options: Any) -> CompiledStateGraph:
        """The metric's compiled graph: the judge made from ``model`` (a chat model, a model string, a Judge, or
        None: the offline judge), the settings from ``options`` (checked once; ``name`` the result's key) and
        compiled with the rest, LangGraph's compile options (an unknown keyword is a ``TypeError`` naming the
        closest valid one). A metric whose ``tasks`` the judge cannot answer is :class:`NeedsLLMJudge`."""
        from ..core.compiling import check_options, compile_graph
        from ..judges import require_tasks, resolve_judge

        fields = self.fields()
        check_options({k: v for k, v in options.items() if k not in fields and k != "name"}, self.factory)
        name = options.pop("name", self.defaults.get("name", self.name))
        values = {k: options.pop(k) if k in options else self.default(k) for k in fields}
        if missing := [k for k, v in {"name": name, **values}.items() if v is MISSING]:
            raise TypeError(f"{self.factory.__name__}() missing required keyword argument(s): {', '.join(missing)}")
        judge = resolve_judge(model)
        settings = self.settings(name=name, judge=judge,  # type: ignore[misc]
                                 **{k: v for k, v in values.items() if v is not MISSING})
        require_tasks(judge, self.tasks, settings.name)
        return compile_graph(self.build(settings), settings.name, options, self.factory)  # type: ignore[misc]


def _generated_factory(spec: MetricSpec) -> Callable[..., CompiledStateGraph]:
    """``create_<name>_metric``: :meth:`MetricSpec.create` with the options as keyword parameters (the signature and
    docstring ``help()`` and ``inspect.signature`` show), defined in the module of the spec's ``build``."""
    def factory(*, model: ModelLike = None, **options: Any) -> CompiledStateGraph:
        return spec.create(model, **options)

    fields, hints = spec.fields(), _hints(spec.settings)
    empty, kw = inspect.Parameter.empty, inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("model", kw, default=None, annotation="ModelLike")]
    for n in fields:
        default = spec.default(n)
        params.append(inspect.Parameter(n, kw, default=empty if default is MISSING else default,
                                        annotation=hints.get(n, fields[n].type)))
    name = spec.defaults.get("name", spec.name)
    params += [inspect.Parameter("name", kw, default=empty if name is MISSING else name, annotation=str),
               inspect.Parameter("compile", inspect.Parameter.VAR_KEYWORD, annotation="Unpack[CompileOptions]")]
    factory.__signature__ = inspect.Signature(params, return_annotation=CompiledStateGraph)  # type: ignore[attr-defined]
    factory.__name__ = factory.__qualname__ = spec.factory_name or f"create_{spec.name}_metric"
    factory.__module__ = getattr(spec.build, "__module__", __name__)
    options = "\n".join(f"- ``{n}`` ({_show(spec.default(n))}): {f.metadata.get('help', '')}" for n, f in fields.items())
    factory.__doc__ = "\n\n".join(p for p in (
        spec.summary, spec.doc, "``model``: a chat model, a model string or a Judge (None: the offline judge); ``name``:"
        " the result's key; ``compile``: LangGraph's compile options (a checkpointer, interrupts). Options:", options) if p)
    return factory


#: How the command line writes true and false (as YAML does).
_BOOLS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def _show(default: Any) -> str:
    return "required" if default is MISSING else f"default {default!r}"


def _hints(cls: type | None) -> dict[str, Any]:
    """The settings' field types, evaluated (text where one cannot be: a name only type checkers import)."""
    from ..judges.base import Judge

    try:
        return typing.get_type_hints(cls, localns={"Judge": Judge}) if cls else {}
    except Exception:  # noqa: BLE001 - a forward reference: the annotations' text is shown
        return {}


@lru_cache(maxsize=1)
def built_ins() -> dict[str, MetricSpec]:
    """judgegraph's own metrics: in every module of this package and its subpackages, each MetricSpec it defines
    bound to a public name, in order (one bound to a private name, e.g. pairwise's, is not in the registry)."""
    specs: dict[str, MetricSpec] = {}
    for module in pkgutil.walk_packages(__path__, f"{__name__}."):
        mod = importlib.import_module(module.name)
        for key, spec in vars(mod).items():
            if isinstance(spec, MetricSpec) and not key.startswith("_") and spec.factory.__module__ == mod.__name__:
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
    return name.strip() if ":" in name else name.strip().lower().replace("-", "_")


class MetricNotFound(KeyError):
    """An unknown metric name, or a custom metric that cannot be imported
    (a ``KeyError``, printed without quotes)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def known_options() -> frozenset[str]:
    """Every option a built-in metric takes from the command line and input files (what a custom factory may name)."""
    return frozenset().union(*(spec.options for spec in built_ins().values()))


def undeclared(option: str, specs: Sequence[MetricSpec], takes: str, renamed: Mapping[str, str] | None = None
               ) -> str | None:
    """None when a metric of ``specs`` declares ``option`` (by its name in ``renamed``, if there); else why, the one
    message of a config file's and the command line's (``--option``) options: ``takes`` (``"NAME takes:"``, ``"known
    here:"``) and the options they declare, the nearest first."""
    renamed = renamed or {}
    if any(renamed.get(option, option) in s.options for s in specs):
        return None
    back = {v: k for k, v in renamed.items()}
    known = sorted({back.get(o, o) for s in specs for o in s.options})
    close = difflib.get_close_matches(option, known, n=1)
    what = (f"{takes[:-1]} no {option} (it takes:" if renamed.get(option, option) in known_options() and len(specs) == 1
            else f"unknown key ({f'did you mean {close[0]}? ' if close else ''}{takes}")
    return f"{what} {', '.join(known) or 'none'})"


def _import_attr(path: str) -> Any:
    try:
        return import_object(path, "mypkg.judges:politeness")
    except ValueError as exc:
        raise MetricNotFound(f"custom metric {exc}") from exc


def _factory_spec(path: str, fn: Callable[..., Any]) -> MetricSpec:
    """A callable returning a compiled graph, as a spec whose factory takes ``model=``: passed
    on as ``model=``, or as a Judge to one taking only ``judge=`` (an older spelling), with the
    options of :func:`known_options` it names. The one place that looks at a factory's judge parameter."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    known = known_options()
    required = [n for n, p in params.items()
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                and n not in known | {"judge", "model"}]
    if required:
        raise MetricNotFound(f"custom metric {path!r} needs arguments the command line cannot give: {', '.join(required)}")
    judge_arg = "model" if "model" in named else "judge" if "judge" in named else None
    options = frozenset(named & known)

    def factory(*, model: ModelLike = None, **opts: Any) -> CompiledStateGraph:
        kwargs: dict[str, Any] = {k: v for k, v in opts.items() if k in options}
        if judge_arg is not None and model is not None:
            from ..judges import resolve_judge

            kwargs[judge_arg] = model if judge_arg == "model" else resolve_judge(model)
        graph = fn(**kwargs)
        if not isinstance(graph, CompiledStateGraph):
            raise TypeError(f"custom metric {path!r} returned {type(graph).__name__}, not a compiled graph")
        return graph

    return MetricSpec(path, factory, f"custom metric {path}", options)


def _import_path(path: str) -> MetricSpec:
    """A custom metric by import path ``module.path:attribute``: a compiled
    graph (used as it is, with its own judge), a :class:`MetricSpec`, or a callable returning one
    (``make_metric``-style factories, ``functools.partial(make_metric, ...)``)."""
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

