"""Run metrics over many conversations: concurrently, under one limit on judge
calls in flight, writing each conversation's results as soon as it is done (a
run that dies keeps everything finished before)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from .judges import Judge, NeedsLLMJudge
from .loaders import InputError, LoadedConversation
from .metrics import canonical_name, get_metric
from .report import build_report_graph
from .results import JudgeErrorInfo, MetricResult, Usage, build_result
from .state import MetricInput, MetricOutput, conversation_of


@dataclass
class ConversationOutcome:
    conversation_id: str
    source: str
    results: dict[str, MetricResult] = field(default_factory=dict)
    error: str | None = None  # the run of this conversation failed as a whole

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "source": self.source,
            "results": {k: v.model_dump(mode="json") for k, v in self.results.items()},
            "error": self.error,
        }


@dataclass
class RunSummary:
    outcomes: list[ConversationOutcome] = field(default_factory=list)
    input_errors: list[InputError] = field(default_factory=list)
    judge: str = ""

    @property
    def results(self) -> list[MetricResult]:
        return [r for o in self.outcomes for r in o.results.values()]

    @property
    def usage(self) -> Usage:
        return Usage.total(r.usage for r in self.results)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def judge_errors(self) -> int:
        return sum(len(r.errors) for r in self.results)

    @property
    def exit_code(self) -> int:
        """0 all passed (or not applicable); 1 a metric failed its threshold;
        3 something could not be judged (bad input, judge errors, a failed run)."""
        if self.input_errors or self.judge_errors or self.count("error") or any(o.error for o in self.outcomes):
            return 3
        if self.count("failed"):
            return 1
        return 0


class MetricPlan:
    """Which metric graphs run for a conversation: the metrics asked for, with
    options from (highest first) explicit overrides, the input file's own
    options (promptfoo threshold / windowSize / rubricPrompt), the defaults.
    Compiled graphs are cached per distinct option set."""

    def __init__(self, metrics: list[str] | None, judge: Judge, overrides: dict[str, Any] | None = None) -> None:
        self.metrics = [canonical_name(m) for m in metrics] if metrics else None
        for m in self.metrics or []:
            get_metric(m)  # unknown names fail before any work
        self.judge = judge
        self.overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        self._graphs: dict[str, CompiledStateGraph] = {}

    def check(self) -> None:
        """Build each chosen metric once with the overrides, so a bad setting
        (e.g. conversational-guidelines without guidelines) is a usage error
        before any work, not an error in every conversation. A metric that
        needs an LLM judge is not a usage error: each conversation gets its
        error result (:meth:`build`) and the other metrics run."""
        for name in self.metrics or []:
            self.build(name, {k: v for k, v in self.overrides.items() if k in get_metric(name).options})

    def build(self, name: str, options: dict[str, Any]) -> CompiledStateGraph:
        """The metric graph, or — when the metric needs an LLM judge and the
        run's judge is not one — a graph that gives that metric's error result."""
        try:
            return get_metric(name).factory(model=self.judge, **options)
        except NeedsLLMJudge as exc:
            return unavailable_metric(name, self.judge, str(exc))

    def metric_options(self, item: LoadedConversation) -> list[tuple[str, dict[str, Any]]]:
        """(metric, options) for each metric run on this conversation: one per
        assertion the file asks for (two promptfoo assertions: two results), with
        ``name`` set where a result needs its own key and ``negate`` for a
        ``not-`` assertion."""
        asked = [a for a in (item.assertions or (item.options,)) if a.get("metric")]
        names = self.metrics or list(dict.fromkeys(canonical_name(a["metric"]) for a in asked)) or ["turn_relevancy"]
        chosen = []
        for name in names:
            spec = get_metric(name)
            mine = [a for a in asked if canonical_name(a["metric"]) == name]
            for file_opts in (mine if asked else [item.options]) or [{}]:
                opts = {k: v for k, v in file_opts.items() if k in spec.options}
                opts.update({k: v for k, v in self.overrides.items() if k in spec.options})
                if file_opts.get("key"):
                    opts["name"] = file_opts["key"]
                if file_opts.get("negate"):
                    opts["negate"] = True
                chosen.append((name, opts))
        return chosen

    def report_for(self, item: LoadedConversation) -> CompiledStateGraph:
        """The report graph (all chosen metrics as subgraphs of one graph) for
        this conversation's metric set and options; one compiled graph per
        distinct set, all sharing this plan's judge."""
        chosen = self.metric_options(item)
        key = repr([(name, sorted(opts.items())) for name, opts in chosen])
        if key not in self._graphs:
            metrics = []
            for name, opts in chosen:
                negate = opts.pop("negate", False)
                graph = self.build(name, opts)
                metrics.append(_negated(graph, opts.get("name", name)) if negate else graph)
            self._graphs[key] = build_report_graph(metrics).compile(name="report")
        return self._graphs[key]


class _NegatedState(MetricInput, MetricOutput):
    pass


def _negated(metric: CompiledStateGraph, key: str) -> CompiledStateGraph:
    """``metric`` followed by :func:`negate_result` on its result ``key``."""

    def negate(state: _NegatedState) -> dict[str, Any]:
        return {"results": {key: negate_result(state["results"][key])}}

    builder = StateGraph(_NegatedState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("metric", metric)
    builder.add_node("negate", negate)
    builder.add_edge(START, "metric")
    builder.add_edge("metric", "negate")
    builder.add_edge("negate", END)
    return builder.compile(name=key)


def negate_result(result: MetricResult) -> MetricResult:
    """A negated assertion's result (promptfoo's ``not-`` rules for scored
    assertions): passes when the score is at or below the threshold; the score
    becomes ``1 - score``. A result that could not be judged (error, not
    applicable, no score) is never flipped into a pass: it is returned as is,
    its reason saying so."""
    note = f"negated assertion {result.key!r}"
    if result.status in ("error", "not_applicable") or result.score is None or result.threshold is None:
        return result.model_copy(update={"reason": f"{note}: not flipped ({result.status}); {result.reason}",
                                         "details": {**result.details, "negated": True}})
    passed = result.score <= result.threshold
    return result.model_copy(update={
        "score": 1.0 - result.score,
        "passed": passed,
        "status": "passed" if passed else "failed",
        "reason": (f"{note}: passes when the metric's score {result.score:.2f} is at or below the threshold "
                   f"{result.threshold:g} — {'it is' if passed else 'it is not'}; the metric said: {result.reason}"),
        "details": {**result.details, "negated": True, "metric_score": result.score, "metric_passed": result.passed},
    })


class UnavailableState(MetricInput, MetricOutput, total=False):
    pass


def unavailable_metric(name: str, judge: Judge, message: str) -> CompiledStateGraph:
    """A one-node graph whose result is ``name``'s error: the metric could not
    be built with ``judge`` (``message`` says why). No call is made."""

    def reduce_score(state: UnavailableState) -> dict[str, Any]:
        error = JudgeErrorInfo(where="conversation", step=name, message=message)
        result = build_result(name, conversation_of(state), judge=judge, threshold=None, status="error",
                              reason=message, errors=[error])
        return {"results": {name: result}}

    builder = StateGraph(UnavailableState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("reduce_score", reduce_score)
    builder.add_edge(START, "reduce_score")
    return builder.compile(name=name)


async def evaluate_async(
    items: Iterable[LoadedConversation | InputError],
    plan: MetricPlan,
    *,
    max_conversations: int = 32,
    on_outcome: Callable[[ConversationOutcome], None] | None = None,
    on_input_error: Callable[[InputError], None] | None = None,
) -> RunSummary:
    summary = RunSummary(judge=plan.judge.name)
    gate = asyncio.Semaphore(max_conversations)

    async def run_one(item: LoadedConversation) -> ConversationOutcome:
        async with gate:
            outcome = ConversationOutcome(item.conversation.id, item.source)
            try:
                out = await plan.report_for(item).ainvoke({"conversation": item.conversation})
                outcome.results.update(out["results"])
            except Exception as exc:  # noqa: BLE001 - one conversation's failure is reported, the run goes on
                outcome.error = f"{type(exc).__name__}: {exc}"
            return outcome

    tasks = []
    for item in items:
        if isinstance(item, InputError):
            summary.input_errors.append(item)
            if on_input_error:
                on_input_error(item)
        else:
            tasks.append(asyncio.ensure_future(run_one(item)))
    for fut in asyncio.as_completed(tasks):
        outcome = await fut
        summary.outcomes.append(outcome)
        if on_outcome:
            on_outcome(outcome)
    return summary


class ResultsWriter:
    """Appends one JSON line per conversation (and per input error), flushed at once."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] = self.path.open("w", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()

    def outcome(self, outcome: ConversationOutcome) -> None:
        self.write({"type": "conversation", **outcome.to_json()})

    def input_error(self, error: InputError) -> None:
        self.write({"type": "input_error", "file": error.file, "line": error.line, "record": error.record,
                    "field": error.field, "message": error.message, "error": str(error)})

    def close(self) -> None:
        self._fh.close()
