"""A judge as a node of your own LangGraph graph (:func:`judge_node`), and a guardrail that routes on its verdict
(:func:`route_on_verdict`, :func:`verdict_reason`): docs/apps.md, "A judge as a node". The node writes
``{metric name: result}`` to ``results_key`` as plain JSON, a ``MetricResult`` or a feedback record; the routers
read all three forms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, cast

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END
from langgraph.graph.state import CompiledStateGraph

from ..core.state import MetricInput
from ..data.results import MetricResult
from ..judges import ModelLike
from ..metrics import MetricNotFound, MetricSpec, canonical_name, get_metric, registry
from .metrics import MetricLike, Scope, judge_graph, to_conversation


def judge_node(
    metrics: MetricLike | Sequence[MetricLike],
    *,
    model: ModelLike = None,
    messages_key: str = "messages",
    results_key: str = "judgements",
    scope: Scope = "conversation",
    conversation_id: str | None = None,
    output: Literal["dict", "result", "feedback"] = "dict",
    name: str = "judge",
) -> RunnableLambda:
    """A node for ``StateGraph.add_node`` that judges the messages in ``state[messages_key]`` (LangChain messages
    or their dicts) and writes ``{results_key: {metric: result}}`` (docs/apps.md, "A judge as a node").

    ``metrics``: a metric name, a compiled metric graph, or a list of them (names are built with ``model``).
    ``scope="latest"`` judges only the last user→assistant exchange, with the earlier messages as its context
    (session-level metrics always read the whole conversation). ``conversation_id`` defaults to the run's
    ``thread_id``; ``output``: what is written per metric (the module docs). Works under invoke and ainvoke."""
    if output not in ("dict", "result", "feedback"):
        raise ValueError(f"output must be 'dict', 'result' or 'feedback', got {output!r}")
    graph = judge_graph(metrics, model=model, scope=scope)

    def shape(results: dict[str, MetricResult]) -> dict[str, Any]:
        if output == "result":
            return {results_key: dict(results)}
        if output == "feedback":
            return {results_key: {k: r.to_feedback() for k, r in results.items()}}
        return {results_key: {k: r.model_dump(mode="json") for k, r in results.items()}}

    def prepare(state: Mapping[str, Any], config: RunnableConfig | None) -> MetricInput:
        if messages_key not in state:
            raise KeyError(f"judge_node: the state has no {messages_key!r} key (state keys: {sorted(state)});"
                           " pass messages_key= to name the key holding the messages")
        cid = conversation_id or str(((config or {}).get("configurable") or {}).get("thread_id") or "")
        return MetricInput(conversation=to_conversation(state[messages_key], id=cid))

    def run(state: Mapping[str, Any], config: RunnableConfig | None = None) -> dict[str, Any]:
        return shape(graph.invoke(prepare(state, config))["results"])

    async def arun(state: Mapping[str, Any], config: RunnableConfig | None = None) -> dict[str, Any]:
        return shape((await graph.ainvoke(prepare(state, config)))["results"])

    return RunnableLambda(run, afunc=arun, name=name)


def result_key(metric: MetricLike) -> str:
    """The key :func:`judge_node` writes ``metric``'s result under: a name as the command line takes it
    (``turn-relevancy``, ``Turn_Relevancy``: :func:`~judgegraph.metrics.canonical_name`), a spec's or a compiled
    graph's own name. An unknown name is a ``ValueError`` naming the nearest known one: a router on a name that no
    result has would route every state to its ``failed`` node."""
    if isinstance(metric, CompiledStateGraph):
        return metric.name or "metric"
    if isinstance(metric, MetricSpec):
        return metric.name
    key = canonical_name(metric)
    if ":" not in key and key in registry():
        return key
    try:
        spec = get_metric(metric)
    except MetricNotFound as exc:  # its message says the nearest known name
        raise ValueError(f"{exc}; for a metric of your own, pass its compiled graph or MetricSpec") from None
    if ":" in spec.name:  # an import path whose graph names itself when built
        raise ValueError(f"metric {metric!r}: pass its compiled graph or MetricSpec (its result is keyed by the"
                         " graph's own name)")
    return spec.name


def _result(state: Mapping[str, Any], metric: str, results_key: str) -> MetricResult | None:
    """The metric's result (``metric``: a :func:`result_key`) in any of the node's output forms."""
    value = (state.get(results_key) or {}).get(metric)
    if value is None or isinstance(value, MetricResult):
        return value
    if isinstance(value, Mapping) and "extra" in value and "status" not in value:  # a to_feedback() record
        extra = value["extra"]
        return MetricResult(key=value["key"], conversation_id=extra.get("conversation_id", ""), score=value["score"],
                            threshold=extra.get("threshold"), passed=extra.get("passed"), status=extra["status"],
                            reason=value.get("comment") or "", judge=extra.get("judge", ""),
                            errors=extra.get("errors") or [])
    return MetricResult.model_validate(value)


class VerdictRouter(Protocol):
    """What :func:`route_on_verdict` returns: a router of the state to the next node's name, with ``destinations``,
    the nodes it can go to (``add_conditional_edges``' path map)."""

    destinations: list[str]

    def __call__(self, state: Mapping[str, Any]) -> str: ...


def route_on_verdict(
    metric: MetricLike,
    *,
    results_key: str = "judgements",
    passed: str = END,
    failed: str = "regenerate",
    error: str | None = None,
    not_applicable: str | None = None,
) -> VerdictRouter:
    """A router for ``add_conditional_edges`` on ``metric``'s result in ``state[results_key]``: its status picks
    the next node. ``error`` (the judge could not judge, or no result) defaults to the ``failed`` node, so a
    guardrail fails closed; ``not_applicable`` (nothing to judge) defaults to ``passed``. The router's
    ``destinations`` is the path map to pass along.

    ``metric``: as :func:`result_key` takes it. An unknown name is a ``ValueError`` here, when the graph is built;
    a state whose ``results_key`` holds other metrics' results but not this one's is a ``KeyError`` (the judge
    node does not judge it: routing on would loop)."""
    key = result_key(metric)
    targets = {"passed": passed, "failed": failed, "error": error or failed,
               "not_applicable": not_applicable or passed}

    def route(state: Mapping[str, Any]) -> str:
        result = _result(state, key, results_key)
        if result is None and (judged := state.get(results_key)):
            raise KeyError(f"route_on_verdict: no result for {key!r} in state[{results_key!r}], which holds"
                           f" {', '.join(sorted(judged))}: route on a metric the judge node judges")
        return targets["error" if result is None else result.status]

    route.__name__ = f"route_on_{key.replace(':', '_').replace('.', '_')}"
    router = cast(VerdictRouter, route)
    router.destinations = sorted(set(targets.values()))
    return router


def verdict_reason(state: Mapping[str, Any], metric: MetricLike, *, results_key: str = "judgements") -> str:
    """Why ``metric`` (named as :func:`route_on_verdict` takes it) did not pass, for a regenerate node's prompt:
    the reasons of the failing verdicts (a judge error says so), else the result's reason."""
    key = result_key(metric)
    result = _result(state, key, results_key)
    if result is None:
        return f"{key} has not judged this conversation ({results_key!r} has no result for it)."
    if result.status == "error" or (result.errors and not result.verdicts):
        messages = "; ".join(e.message for e in result.errors)
        return f"The judge could not judge the reply: {messages}" if messages else result.reason
    bad = [v.reason for v in result.verdicts if v.verdict == "no"]
    return " ".join(r for r in bad if r) or result.reason
