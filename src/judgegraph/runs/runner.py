"""Run metrics over many conversations, streamed, a bounded number in flight, each one's results written when done
(docs/runs.md): :func:`judge_conversation` is the unit of work, :class:`RunSummary` takes outcomes in any order."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import heapq
import itertools
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph

from ..core.scoring import build_result
from ..core.state import MetricInput, MetricOutput, MetricState, conversation_of
from ..cost.pricing import Prices
from ..data.results import JudgeErrorInfo, MetricResult, Usage
from ..judges import Judge, NeedsLLMJudge
from ..loaders import InputError, LoadedConversation, ResultTransform, id_stems, iter_records, result_transform
from ..loaders.limits import Limits
from ..metrics import DEFAULT_METRICS, canonical_name, get_metric
from ..report import build_metric, check_unique_names, create_report_graph
from . import header as runheader
from .resultsfile import ResultsFileError, ResultsWriter, ResumeState, check_out_path, scan_results

__all__ = ["Answering", "ConversationOutcome", "JudgeOne", "MetricPlan", "ResultsFileError", "ResultsWriter",
           "RunSummary", "evaluate_async", "evaluate_to_file", "iter_inputs", "judge_conversation"]

#: Rows of outcomes a summary keeps to show (failures and errors first).
DEFAULT_ROWS = 50
#: Input errors a summary keeps whole (the rest are counted).
KEPT_INPUT_ERRORS = 1000

Item = LoadedConversation | InputError


@dataclass
class ConversationOutcome:
    conversation_id: str
    source: str
    results: dict[str, MetricResult] = field(default_factory=dict)
    error: str | None = None  # the run of this conversation failed as a whole
    position: int | None = None  # 0-based place of the conversation in the inputs (set by the runner)

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            **({} if self.position is None else {"position": self.position}),
            "source": self.source,
            "results": {k: v.model_dump(mode="json") for k, v in self.results.items()},
            "error": self.error,
        }

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> ConversationOutcome:
        """An outcome read back from a results line."""
        return cls(
            conversation_id=str(record.get("conversation_id")),
            source=str(record.get("source") or ""),
            results={k: MetricResult.model_validate(v) for k, v in (record.get("results") or {}).items()},
            error=record.get("error"),
            position=record["position"] if isinstance(record.get("position"), int) else None,
        )

    @property
    def usage(self) -> Usage:
        return Usage.total(r.usage for r in self.results.values())

    @property
    def priority(self) -> int:
        """How much a reader needs to see this outcome: errors, then failures, then judge errors."""
        return 3 if self.error else max(map(result_priority, self.results.values()), default=0)


def result_priority(result: MetricResult) -> int:
    """How much a reader needs to see a result (a table row): an error 3, a failure 2, judge errors 1, else 0."""
    return {"error": 3, "failed": 2}.get(result.status, 1 if result.errors else 0)


@dataclass
class RunSummary:
    """Counters over a run's conversations plus at most ``max_rows`` rows to show (errors and failures first);
    ``outcomes``: this run's outcomes (not the resumed), only with ``keep_outcomes`` (e.g. for MLflow)."""

    judge: str = ""
    keep_outcomes: bool = True
    max_rows: int = DEFAULT_ROWS
    prices: Prices | None = None
    # not in the repr: Python 3.11's asyncio.run reprs the main task, result included, as it ends (every verdict)
    outcomes: list[ConversationOutcome] = field(default_factory=list, repr=False)
    input_errors: list[InputError] = field(default_factory=list)
    input_error_count: int = 0
    conversations: int = 0
    resumed: int = 0  # of ``conversations``: already complete in the results file
    by_metric: dict[str, Counter[str]] = field(default_factory=dict)  # statuses per result key
    judge_errors: int = 0
    failed_runs: int = 0
    usage: Usage = field(default_factory=Usage)
    interrupted: bool = False
    problem: str | None = None  # why the run ended before every conversation was judged (a failed batch): exit 3
    unfinished: int = 0  # conversations left for a --resume (their judge requests not all answered)
    _rows: list[tuple[int, int, int, ConversationOutcome]] = field(default_factory=list, repr=False)  # a heap
    _seq: Iterator[int] = field(default_factory=lambda: itertools.count(-(10**12)), repr=False)
    _ties: Iterator[int] = field(default_factory=itertools.count, repr=False)

    def add(self, outcome: ConversationOutcome, *, resumed: bool = False, order: int | None = None) -> None:
        """Count one finished conversation; ``order`` (its input position) sorts the rows."""
        self.conversations += 1
        self.resumed += resumed
        self.failed_runs += bool(outcome.error)
        for key, r in outcome.results.items():
            self.by_metric.setdefault(key, Counter())[r.status] += 1
            self.judge_errors += len(r.errors)
            self.usage = self.usage + r.usage
        if self.keep_outcomes and not resumed:  # judged in this run (MLflow writes must not repeat the resumed)
            self.outcomes.append(outcome)
        if self.max_rows <= 0:
            return
        # a heap whose top is the row a new one replaces: the lowest priority, the latest of those (issue 28)
        row = (outcome.priority, -(next(self._seq) if order is None else order), next(self._ties), outcome)
        if len(self._rows) < self.max_rows:
            heapq.heappush(self._rows, row)
        elif row[0] > self._rows[0][0]:
            heapq.heapreplace(self._rows, row)

    def add_resumed(self, outcome: ConversationOutcome) -> None:
        """Count a conversation already in the resumed file, shown in its input place when the line has one."""
        self.add(outcome, resumed=True, order=outcome.position)

    def add_input_error(self, error: InputError) -> None:
        self.input_error_count += 1
        if len(self.input_errors) < KEPT_INPUT_ERRORS:
            self.input_errors.append(error)

    @property
    def rows(self) -> list[ConversationOutcome]:
        """The outcomes kept to show, in input order (resumed ones first)."""
        return [row[3] for row in sorted(self._rows, key=lambda row: -row[1])]

    @property
    def rows_left_out(self) -> int:
        return self.conversations - len(self._rows)

    @property
    def results(self) -> list[MetricResult]:
        """Every result (needs ``keep_outcomes``)."""
        return [r for o in self.outcomes for r in o.results.values()]

    @property
    def cost_usd(self) -> float | None:
        return None if self.prices is None else self.prices.cost(self.usage)

    def count(self, status: str) -> int:
        """Results of every metric with ``status``."""
        return sum(counts[status] for counts in self.by_metric.values())

    @property
    def result_count(self) -> int:
        return sum(sum(counts.values()) for counts in self.by_metric.values())

    @property
    def complete(self) -> bool:
        """Every conversation judged: the run is finished (a summary line ends its file)."""
        return not self.interrupted and self.problem is None and not self.unfinished

    @property
    def exit_code(self) -> int:
        """0 passed; 1 a threshold failed; 3 something could not be judged, or nothing was, or the run could not
        finish (``problem``); 130 stopped by Ctrl-C."""
        if self.interrupted:
            return 130
        if (self.input_error_count or self.judge_errors or self.count("error") or self.failed_runs
                or not self.conversations or self.problem):
            return 3
        if self.count("failed"):
            return 1
        return 0


class MetricPlan:
    """Which metric graphs run for a conversation, options from overrides over the input file's own over defaults;
    one compiled graph per distinct option set."""

    def __init__(self, metrics: list[str] | None, judge: Judge, overrides: Mapping[str, object] | None = None,
                 per_metric: Mapping[str, Mapping[str, object]] | None = None) -> None:
        self.metrics = [canonical_name(m) for m in metrics] if metrics else None
        for m in self.metrics or []:
            get_metric(m)  # unknown names fail before any work
        check_unique_names(self.metrics or [])  # each result is keyed by its metric's name
        self.judge = judge
        self.overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        #: options of one metric (a config file's ``metrics: [{name: {threshold: 0.8}}]``), over ``overrides``
        self.per_metric = {canonical_name(k): dict(v) for k, v in (per_metric or {}).items()}
        self._graphs: dict[str, CompiledStateGraph] = {}
        self._runs: dict[str, CompiledStateGraph] = {}  # what runs: a report of one metric is that metric

    def check(self) -> None:
        """Build each chosen metric (and their report) once: a bad setting or two metrics with one name is a usage
        error before any work (needing an LLM judge is not: see :meth:`build`)."""
        graphs = [self.build(name, opts) for name, opts in self.options_by_metric().items()]
        if graphs:
            create_report_graph(graphs)

    def options_by_metric(self, *, defaults: bool = False) -> dict[str, dict[str, object]]:
        """The options each chosen metric is built with (those it takes, of the overrides and its own); with
        ``defaults``, no metric chosen means the default metrics."""
        out = {}
        for name in self.metrics or (list(DEFAULT_METRICS) if defaults else []):
            spec = get_metric(name)
            out[name] = {k: v for k, v in {**self.overrides, **self.per_metric.get(name, {})}.items()
                         if k in spec.options}
        return out

    def build(self, name: str, options: Mapping[str, object]) -> CompiledStateGraph:
        """The metric graph, or one giving its error result when it needs an LLM judge the run lacks."""
        try:
            return build_metric(name, self.judge, **options)
        except NeedsLLMJudge as exc:
            return unavailable_metric(name, self.judge, str(exc))

    def metric_options(self, item: LoadedConversation) -> list[tuple[str, dict[str, object], ResultTransform | None]]:
        """(metric, options, transform) per assertion the file asks for: the options with its ``name`` key where
        needed, the transform of its result (promptfoo's ``not-``) or None."""
        asked = [a for a in (item.assertions or (item.options,)) if a.get("metric")]
        names = self.metrics or list(dict.fromkeys(canonical_name(a["metric"]) for a in asked)) or list(DEFAULT_METRICS)
        chosen = []
        for name in names:
            spec = get_metric(name)
            mine = [a for a in asked if canonical_name(a["metric"]) == name]
            for file_opts in (mine if asked else [item.options]) or [{}]:
                given = {**file_opts, **self.overrides, **self.per_metric.get(name, {})}
                opts = {k: v for k, v in given.items() if k in spec.options}
                if file_opts.get("key"):
                    opts["name"] = file_opts["key"]
                chosen.append((name, opts, result_transform(file_opts)))
        return chosen

    @property
    def graphs(self) -> list[CompiledStateGraph]:
        """The report graphs compiled so far (one per distinct metric set and options)."""
        return list(self._graphs.values())

    def report_for(self, item: LoadedConversation) -> CompiledStateGraph:
        """The report graph of this conversation's metrics and options (cached per distinct set)."""
        return self._graphs[self._key(item)]

    def graph_for(self, item: LoadedConversation) -> CompiledStateGraph:
        """What judges this conversation: its report graph, or the one metric graph a report of one metric
        runs (the same results without the report's own super-steps, issue 28)."""
        return self._runs[self._key(item)]

    def _key(self, item: LoadedConversation) -> str:
        chosen = self.metric_options(item)
        key = repr([(name, sorted(opts.items()), transform) for name, opts, transform in chosen])
        if key not in self._graphs:
            metrics = []
            for name, opts, transform in chosen:
                graph = self.build(name, opts)
                metrics.append(_then(graph, str(opts.get("name", name)), transform) if transform else graph)
            self._graphs[key] = create_report_graph(metrics)
            self._runs[key] = metrics[0] if len(metrics) == 1 else self._graphs[key]
        return key


def _chain(name: str, *nodes: tuple[str, Any]) -> CompiledStateGraph:
    """``nodes`` run one after the other, as a metric graph's input and output."""
    builder = StateGraph(MetricState, input_schema=MetricInput, output_schema=MetricOutput)
    return builder.add_sequence(nodes).set_entry_point(nodes[0][0]).compile(name=name)


def _then(metric: CompiledStateGraph, key: str, transform: ResultTransform) -> CompiledStateGraph:
    """``metric`` followed by ``transform`` on its result ``key``."""

    def apply(state: MetricState) -> MetricState:
        return {"results": {key: transform(state["results"][key])}}

    return _chain(key, ("metric", metric), ("transform", apply))


def unavailable_metric(name: str, judge: Judge, message: str) -> CompiledStateGraph:
    """A one-node graph whose result is ``name``'s error ``message``; no call is made."""

    def reduce_score(state: MetricState) -> MetricState:
        error = JudgeErrorInfo(where="conversation", step=name, message=message)
        result = build_result(name, conversation_of(state), judge=judge, threshold=None, status="error",
                              reason=message, errors=[error])
        return {"results": {name: result}}

    return _chain(name, ("reduce_score", reduce_score))


def iter_inputs(paths: Iterable[str | Path], *, seen: set[str] | None = None, limits: Limits | None = None,
                allow_outside_files: bool | None = None) -> Iterator[LoadedConversation | InputError]:
    """Every conversation of several files, read lazily (options go to :func:`~judgegraph.loaders.iter_records`);
    an id seen in an earlier file, and an empty file, are input errors."""
    seen = set() if seen is None else seen
    paths = list(paths)
    stems = id_stems(paths)  # records without an id: named after their file, unique across the inputs
    for path in paths:
        yielded = False
        for item in iter_records(path, id_stem=stems[str(path)], limits=limits, allow_outside_files=allow_outside_files):
            yielded = True
            if isinstance(item, LoadedConversation):
                cid = item.conversation.id
                if cid in seen:
                    src = item.source[len(str(path)):]
                    line = int(src[1:]) if src.startswith(":") and src[1:].isdigit() else None
                    yield InputError(str(path), line, None, "id", f"duplicate conversation id {cid!r} (an earlier file has it)")
                    continue
                seen.add(cid)
            yield item
        if not yielded:
            yield InputError(str(path), None, None, None, "no conversations: the file is empty or blank")


async def judge_conversation(item: LoadedConversation, plan: MetricPlan) -> ConversationOutcome:
    """One conversation through its report graph; a failed run is the outcome's ``error``, never raised."""
    outcome = ConversationOutcome(item.conversation.id, item.source)
    try:
        out = await plan.graph_for(item).ainvoke({"conversation": item.conversation})
        outcome.results.update(out["results"])
    except Exception as exc:  # noqa: BLE001 - one conversation's failure is reported, the run goes on
        outcome.error = f"{type(exc).__name__}: {exc}"
    return outcome


async def evaluate_async(
    items: Iterable[LoadedConversation | InputError], plan: MetricPlan, *, max_conversations: int = 32,
    on_outcome: Callable[[ConversationOutcome], None] | None = None,
    on_input_error: Callable[[InputError], None] | None = None, summary: RunSummary | None = None,
    skip: set[str] | frozenset[str] = frozenset(), stop: asyncio.Event | None = None,
    judge_one: JudgeOne | None = None,
) -> RunSummary:
    """Judge ``items`` lazily, at most ``max_conversations`` at once, passing over ids in ``skip``; setting ``stop``
    starts nothing new and cancels (neither writes nor counts) what is in flight. ``judge_one`` (default
    :func:`judge_conversation`): how a conversation is answered (:data:`JudgeOne`)."""
    if max_conversations < 1:
        raise ValueError(f"max_conversations must be >= 1, got {max_conversations}")
    summary = summary if summary is not None else RunSummary(judge=plan.judge.name)
    stop = stop if stop is not None else asyncio.Event()
    stopper = asyncio.ensure_future(stop.wait())
    work = judge_one or functools.partial(judge_conversation, plan=plan)
    positions = itertools.count()  # every conversation of the input, skipped ones too: its place in the inputs
    order: dict[asyncio.Task[ConversationOutcome | None], int] = {}  # its place in the input: rows in this order
    pending: set[asyncio.Task[ConversationOutcome | None]] = set()

    def finish(done: set[asyncio.Task[ConversationOutcome | None]]) -> None:
        pending.difference_update(done)
        for task in done:
            outcome, position = task.result(), order.pop(task, None)
            if outcome is not None:  # else not finished in this pass
                outcome.position = position
                summary.add(outcome, order=position)
                if on_outcome:
                    on_outcome(outcome)

    async def wait_some() -> None:
        done, _ = await asyncio.wait({*pending, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finish({t for t in pending if t in done})

    # What exists when the run starts (modules, compiled graphs, the judge's client) lives through it: kept out
    # of the collector's full passes while it runs (each one would walk it all again), given back at the end.
    gc.freeze()
    try:
        for item in items:
            if stop.is_set():
                break
            if isinstance(item, InputError):
                summary.add_input_error(item)
                if on_input_error:
                    on_input_error(item)
                continue
            position = next(positions)
            if item.conversation.id in skip:
                continue
            while len(pending) >= max_conversations and not stop.is_set():
                await wait_some()
            if stop.is_set():
                break
            task = asyncio.ensure_future(work(item))
            order[task] = position
            pending.add(task)
            await asyncio.sleep(0)  # let it start before reading the next record
        while pending and not stop.is_set():
            await wait_some()
    finally:
        if stop.is_set():
            summary.interrupted = True
        finish({t for t in pending if t.done() and not t.cancelled()})
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        stopper.cancel()
        gc.unfreeze()
    return summary


@dataclass
class OpenRun:
    """A run opened on its results file (:func:`open_run`): its start, its counters, and the writer every line
    goes through."""

    start: runheader.RunStart
    summary: RunSummary
    writer: ResultsWriter
    paths: list[str | Path]  # the input files (empty when the caller gave loaded items)
    done: set[str]  # conversation ids the resumed file holds complete
    resumed: ResumeState | None

    def finish(self, prices: Prices | None) -> None:
        """The summary line of a finished run (a stopped one is finished by its resume)."""
        self.writer.write(runheader.run_summary(self.summary, self.start.started, prices))

    async def execute(self, plan: MetricPlan, read: Callable[[bool], Iterable[Item]], answering: Answering,
                      stop: asyncio.Event, *, skip: set[str] | None = None, max_conversations: int = 32,
                      on_outcome: Callable[[ConversationOutcome], None] | None = None,
                      on_input_error: Callable[[InputError], None] | None = None) -> RunSummary:
        """The one run loop: each pass ``answering`` yields reads its conversations (``read(first pass)``), judges
        them (:func:`evaluate_async`) and writes each finished one (added to ``skip``, when given) and each input
        error. The writer stays open."""

        def wrote(outcome: ConversationOutcome) -> None:
            self.writer.outcome(outcome)
            if skip is not None:
                skip.add(outcome.conversation_id)
            if on_outcome:
                on_outcome(outcome)

        def bad(error: InputError) -> None:
            self.writer.input_error(error)
            if on_input_error:
                on_input_error(error)

        async with contextlib.aclosing(answering(self, stop)) as passes:
            first = True
            async for judge in passes:
                await evaluate_async(read(first), plan, max_conversations=max_conversations, on_outcome=wrote,
                                     on_input_error=bad, summary=self.summary, stop=stop, judge_one=judge,
                                     skip=frozenset() if skip is None else skip)
                first = False
        self.summary.interrupted = self.summary.interrupted or stop.is_set()
        return self.summary


#: How one conversation is judged (worker processes, Ray, the Batch API); None: not finished in this pass.
JudgeOne = Callable[[LoadedConversation], Awaitable["ConversationOutcome | None"]]
#: How a run's judge requests are answered: given the opened run and its stop event, yields each pass's
#: ``judge_one`` (None: here) until no pass is needed (:func:`evaluate_to_file`).
Answering = Callable[["OpenRun", asyncio.Event], AsyncGenerator["JudgeOne | None", None]]


def open_run(inputs: Iterable[object], plan: MetricPlan, out: str | Path, summary: RunSummary, *,
             resume: bool = False, retry_errors: bool = False, overwrite: bool = False, transcripts: str = "full",
             cost: Callable[[Usage], float | None] | None = None, header: Mapping[str, Any] | None = None,
             on_resumed: Callable[[ResumeState], None] | None = None) -> OpenRun:
    """Open a run on ``out``, however its requests are answered: the ``--out`` checks, the header (checked against
    the resumed file's: :class:`~judgegraph.runs.header.RunSettingsChanged`), the resumed file scanned (a torn last
    line cut, with ``retry_errors`` errored lines taken out) and counted into ``summary``, and the writer."""
    if resume and overwrite:
        raise ResultsFileError("resume and overwrite exclude each other")
    if retry_errors and not resume:
        raise ResultsFileError("retry_errors needs resume")
    paths = [i for i in inputs if isinstance(i, (str, Path))]
    check_out_path(out, paths, resume=resume, overwrite=overwrite)
    start = runheader.start_run(out, plan, paths, header, resume=resume)
    state: ResumeState | None = None
    if resume:
        state = scan_results(out, lambda rec: summary.add_resumed(ConversationOutcome.from_json(rec)),
                             retry_errors=retry_errors)
        state.header = start.old
        if on_resumed:
            on_resumed(state)
    writer = ResultsWriter(out, mode="a" if resume else "w", transcripts=transcripts,
                           skip_input_errors=state.input_errors if state else set(), cost=cost)
    start.write_header(writer)
    return OpenRun(start, summary, writer, paths, set(state.done) if state else set(), state)


async def evaluate_to_file(
    inputs: Iterable[str | Path | Item] | Callable[[], Iterable[Item]],
    plan: MetricPlan, out: str | Path, *,
    resume: bool = False, retry_errors: bool = False, overwrite: bool = False, transcripts: str = "full",
    prices: Prices | None = None, max_conversations: int = 32, keep_outcomes: bool = True, max_rows: int = DEFAULT_ROWS,
    on_outcome: Callable[[ConversationOutcome], None] | None = None,
    on_input_error: Callable[[InputError], None] | None = None,
    on_resumed: Callable[[ResumeState], None] | None = None, stop: asyncio.Event | None = None,
    judge_one: JudgeOne | None = None, answering: Answering | None = None, summary: RunSummary | None = None,
    header: Mapping[str, Any] | None = None,
) -> RunSummary:
    """Judge ``inputs`` (paths, loaded items, or a function giving the items afresh) into the results file ``out``:
    the run opened once (:func:`open_run`) and executed by the one loop (:meth:`OpenRun.execute`), its requests
    answered here, by ``judge_one`` (:func:`judgegraph.scale.judge_pool`) or by ``answering``, pass by pass
    (:func:`judgegraph.batch.evaluate_batch_to_file`). A finished run ends with a summary record."""
    given = inputs if callable(inputs) or isinstance(inputs, Iterator) else list(inputs)
    if summary is None:
        summary = RunSummary(judge=plan.judge.name, keep_outcomes=keep_outcomes, max_rows=max_rows, prices=prices)
    run = open_run(given if isinstance(given, list) else [], plan, out, summary, resume=resume,
                   retry_errors=retry_errors, overwrite=overwrite, transcripts=transcripts,
                   cost=prices.cost if prices else None, header=header, on_resumed=on_resumed)
    stop = stop if stop is not None else asyncio.Event()

    def stream(first: bool) -> Iterator[Item]:
        items = given() if callable(given) else cast("Iterable[Item]", given)  # no paths: loaded items
        read = iter_inputs(run.paths, seen=set()) if run.paths else iter(items)
        return read if first else (i for i in read if not isinstance(i, InputError))  # said by the first pass

    try:
        await run.execute(plan, stream, answering or live(judge_one), stop, skip=run.done,
                          max_conversations=max_conversations, on_outcome=on_outcome, on_input_error=on_input_error)
        if summary.complete:  # a stopped or failed run is finished by its resume
            run.finish(summary.prices)
        return summary
    finally:
        run.writer.close()


def live(judge_one: JudgeOne | None = None) -> Answering:
    """Answering in one pass, by ``judge_one`` (None: here; worker processes, Ray: :mod:`judgegraph.scale`)."""

    async def one_pass(_run: OpenRun, _stop: asyncio.Event) -> AsyncGenerator[JudgeOne | None, None]:
        yield judge_one

    return one_pass
