"""Run metrics over many conversations: concurrently, under one limit on judge
calls in flight, writing each conversation's results as soon as it is done (a
run that dies keeps everything finished before)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from langgraph.graph.state import CompiledStateGraph

from .judges import Judge
from .loaders import InputError, LoadedConversation
from .metrics import canonical_name, get_metric
from .report import build_report_graph
from .results import MetricResult, Usage


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
        before any work, not an error in every conversation."""
        for name in self.metrics or []:
            spec = get_metric(name)
            spec.factory(judge=self.judge, **{k: v for k, v in self.overrides.items() if k in spec.options})

    def metric_options(self, item: LoadedConversation) -> list[tuple[str, dict[str, Any]]]:
        hinted = item.options.get("metric")
        names = self.metrics or ([canonical_name(hinted)] if hinted else ["turn_relevancy"])
        chosen = []
        for name in names:
            spec = get_metric(name)
            file_opts = item.options if (not hinted or canonical_name(hinted) == name) else {}
            opts = {k: v for k, v in file_opts.items() if k in spec.options}
            opts.update({k: v for k, v in self.overrides.items() if k in spec.options})
            chosen.append((name, opts))
        return chosen

    def report_for(self, item: LoadedConversation) -> CompiledStateGraph:
        """The report graph (all chosen metrics as subgraphs of one graph) for
        this conversation's metric set and options; one compiled graph per
        distinct set, all sharing this plan's judge."""
        chosen = self.metric_options(item)
        key = repr([(name, sorted(opts.items())) for name, opts in chosen])
        if key not in self._graphs:
            metrics = [get_metric(name).factory(judge=self.judge, **opts) for name, opts in chosen]
            self._graphs[key] = build_report_graph(metrics).compile(name="report")
        return self._graphs[key]


async def judge_conversation(item: LoadedConversation, plan: MetricPlan) -> ConversationOutcome:
    """One conversation in, its outcome out (never raises): the unit of work a
    worker process or a Ray actor runs (:mod:`judgegraph.scale`)."""
    outcome = ConversationOutcome(item.conversation.id, item.source)
    try:
        out = await plan.report_for(item).ainvoke({"conversation": item.conversation})
        outcome.results.update(out["results"])
    except Exception as exc:  # noqa: BLE001 - one conversation's failure is reported, the run goes on
        outcome.error = f"{type(exc).__name__}: {exc}"
    return outcome


async def evaluate_async(
    items: Iterable[LoadedConversation | InputError],
    plan: MetricPlan,
    *,
    max_conversations: int = 32,
    on_outcome: Callable[[ConversationOutcome], None] | None = None,
    on_input_error: Callable[[InputError], None] | None = None,
    judge_one: Callable[[LoadedConversation], Awaitable[ConversationOutcome]] | None = None,
) -> RunSummary:
    """``judge_one`` (default: :func:`judge_conversation` with ``plan`` in this
    process) judges one conversation; worker pools pass their own."""
    summary = RunSummary(judge=plan.judge.name)
    gate = asyncio.Semaphore(max_conversations)
    work = judge_one or (lambda item: judge_conversation(item, plan))

    async def run_one(item: LoadedConversation) -> ConversationOutcome:
        async with gate:
            return await work(item)

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
