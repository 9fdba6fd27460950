"""A run judged through a batch API (``judgegraph eval --batch``, :func:`evaluate_batch_to_file`; docs/batch.md):
a *pass* judges every conversation not yet written with the answers so far; the requests it found unanswered
(:mod:`.answers`) go into the next batch, whose answers the next pass uses, at most ``max_rounds`` batches. Each
batch is a ``"batch"`` record of the results file, so ``--resume`` collects it instead of sending it again.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, cast

import openai

from ..cost.pricing import Prices
from ..data.results import Usage
from ..judges import Judge, JudgeCache
from ..runs import BatchLine, NotAResultsFile, read_run
from ..runs.record import number as _number
from ..runs.resultsfile import ResultsWriter
from ..runs.runner import (
    DEFAULT_ROWS,
    ConversationOutcome,
    JudgeOne,
    MetricPlan,
    OpenRun,
    RunSummary,
    evaluate_to_file,
    judge_conversation,
)
from .answers import BatchAnswers, PendingWatch
from .client import BatchClient, BatchState, NoBatchAPI, chunks

if TYPE_CHECKING:
    from ..judges.cache import DiskCache
    from ..judges.llm import LLMJudge
    from ..loaders import InputError, LoadedConversation

__all__ = ["BatchSummary", "NoBatchAPI", "batch_client", "batch_judges", "evaluate_batch_to_file"]

#: The first wait between polls of a batch, in seconds (it doubles up to a minute).
DEFAULT_POLL_S = 5.0
#: Batches (each a pass of follow-ups: re-asks, steps after an extraction) one run sends at most.
DEFAULT_MAX_ROUNDS = 12
RECORD = "batch"
#: The status recorded for a batch the endpoint no longer knows (a resume sends its requests again).
GONE = "gone"

Item = Union["LoadedConversation", "InputError"]
Inputs = Union[Callable[[], Iterable[Item]], Iterable[Union[str, Path, Item]]]


@dataclass
class BatchSummary(RunSummary):
    """A :class:`~judgegraph.runs.runner.RunSummary` with the run's batches (each one's last state) and the list
    prices (``list_prices``); its ``problem``: a failed or expired batch."""

    batches: list[BatchLine] = field(default_factory=list)
    list_prices: Prices | None = None

    @property
    def list_cost_usd(self) -> float | None:
        return None if self.list_prices is None else self.list_prices.cost(self.usage)


def batch_judges(judge: Judge) -> list[LLMJudge]:
    """The LLM judges behind ``judge`` (itself, a jury's jurors, an aligned judge's model), each an OpenAI chat
    model with structured output; :class:`NoBatchAPI` when one is not."""
    from ..judges.llm import LLMJudge
    from ..judges.transport import has_judge_transport
    from ..providers.openai import is_chat_openai as _is_openai_chat

    if judge.kind != "llm":
        raise NoBatchAPI(f"the {judge.name} judge makes no LLM calls, so there is nothing to batch: "
                         "--batch needs an OpenAI model (--model openai:...)")
    found: list[LLMJudge] = []
    stack: list[Judge] = [judge]
    while stack:
        j = stack.pop()
        if isinstance(j, LLMJudge):
            if (not _is_openai_chat(j.model) or j.method not in (None, "json_schema")
                    or getattr(j.model, "use_responses_api", None)):
                raise NoBatchAPI(f"{j.name} has no batch API here: --batch sends OpenAI Batch API requests, "
                                 "so it needs an OpenAI-compatible model ('openai:...' or --base-url) with "
                                 "json_schema output")
            if not all(has_judge_transport(getattr(j.model, name, None)) for name in ("http_client", "http_async_client")):
                raise NoBatchAPI(f"{j.name}: --batch answers the judge's requests at judgegraph's own HTTP clients, "
                                 "and this chat model was built with others: give the model as a string "
                                 "('openai:...', with base_url) instead of a ChatOpenAI object")
            found.append(j)
        elif (jurors := getattr(j, "jurors", None)) is not None:
            stack.extend(jurors)
        elif isinstance(inner := getattr(j, "inner", None), Judge):
            stack.append(inner)
        else:
            raise NoBatchAPI(f"{j.name} is not an OpenAI judge: --batch has no batch API to send its requests to")
    endpoints = {(e.base_url if (e := j.endpoint) else None) for j in found}
    if len(endpoints) > 1:
        raise NoBatchAPI("--batch sends a run's requests to one endpoint; these jurors use several: "
                         + ", ".join(sorted(str(e) for e in endpoints)))
    return found


def batch_client(judge: Judge, *, check: bool = True) -> BatchClient:
    """The Batch API client of ``judge``'s endpoint, checked to answer unless ``check`` is false;
    :class:`NoBatchAPI` says why there is none."""
    judges = batch_judges(judge)
    endpoint = judges[0].endpoint
    if endpoint is None:
        raise NoBatchAPI(f"{judges[0].name} names no OpenAI endpoint: --batch has nowhere to send")
    client = BatchClient(endpoint)
    if check:
        client.check()
    return client


class _RunDisk:
    """A judge's disk cache in batch mode: answers stored before the run are served, those stored in this
    run are not read back (the pass that writes a conversation counts the tokens its answers cost)."""

    def __init__(self, disk: DiskCache) -> None:
        self._disk = disk
        self._mine: set[str] = set()

    def get(self, key: str) -> Any:
        return None if key in self._mine else self._disk.get(key)

    def put(self, key: str, value_json: str, **kwargs: Any) -> None:
        self._mine.add(key)
        self._disk.put(key, value_json, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._disk, name)


def _recorded(out: str | Path) -> dict[str, BatchLine]:
    """The batches a results file records: id → its records merged (the last state), in the order first recorded."""
    found: dict[str, BatchLine] = {}
    try:
        lines = read_run(out, keep_transcripts=False).batches
    except NotAResultsFile:
        return found
    for line in lines:
        if isinstance(line.id, str):
            found[line.id] = BatchLine.model_validate({**(found[line.id].data() if line.id in found else {}),
                                                       **line.data()})
    return found


async def evaluate_batch_to_file(
    inputs: Inputs, plan: MetricPlan, out: str | Path, *, prices: Prices | None = None, keep_outcomes: bool = True,
    max_rows: int = DEFAULT_ROWS, poll_s: float = DEFAULT_POLL_S, max_rounds: int = DEFAULT_MAX_ROUNDS,
    client: BatchClient | None = None, on_batch: Callable[[str], None] | None = None, **options: Any,
) -> BatchSummary:
    """:func:`~judgegraph.runs.runner.evaluate_to_file` (its ``options``) with the judge's requests answered by the
    Batch API of its endpoint (:class:`BatchAnswering`). ``prices``: list prices (the summary's are their
    :meth:`~judgegraph.cost.pricing.Prices.batch`); ``poll_s``: the first wait between polls; ``on_batch``: a line
    per batch event (submitted, progress, ended)."""
    summary = BatchSummary(judge=plan.judge.name, keep_outcomes=keep_outcomes, max_rows=max_rows,
                           prices=prices.batch() if prices else None, list_prices=prices)
    answering = BatchAnswering(plan, summary, client=client, poll_s=poll_s, max_rounds=max_rounds, say=on_batch)
    given = inputs if callable(inputs) else list(inputs)  # read once per pass
    await evaluate_to_file(given, plan, out, prices=summary.prices, summary=summary, answering=answering.passes,
                           **options)
    return summary


class BatchAnswering:
    """The Batch API as the way a run's judge requests are answered (``answering=`` of
    :func:`~judgegraph.runs.runner.evaluate_to_file`): sending, waiting, collecting, recording."""

    writer: ResultsWriter  # the run's (set when its passes start)

    def __init__(self, plan: MetricPlan, summary: BatchSummary, *, client: BatchClient | None = None,
                 poll_s: float = DEFAULT_POLL_S, max_rounds: int = DEFAULT_MAX_ROUNDS,
                 say: Callable[[str], None] | None = None) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self.judges = batch_judges(plan.judge)
        self.plan, self.summary, self.poll_s, self.max_rounds = plan, summary, poll_s, max_rounds
        self.client = client or batch_client(plan.judge, check=False)
        self.answers = BatchAnswers(max_retries=max(getattr(self.judges[0], "max_retries", 3), 0))
        self.say: Callable[[str], None] = say or (lambda _line: None)
        self.rounds = 0  # rounds of batches this run submitted (a round is split over several past 50,000 requests)
        self.stop = asyncio.Event()

    async def judge_one(self, item: LoadedConversation) -> ConversationOutcome | None:
        """The conversation judged with the answers so far; None when a request of it waits for a batch."""
        with PendingWatch() as watch:
            outcome = await judge_conversation(item, self.plan)
        self.summary.unfinished += bool(watch.keys)
        return None if watch.keys else outcome

    async def passes(self, run: OpenRun, stop: asyncio.Event) -> AsyncGenerator[JudgeOne | None, None]:
        """The run's passes: what an earlier run sent is collected first, then each pass's requests are sent as a
        batch and its answers awaited before the next pass."""
        self.writer, self.stop = run.writer, stop
        recorded = _recorded(run.writer.path) if run.resumed is not None else {}
        disks = {id(j): _RunDisk(j.cache.disk) for j in self.judges if j.cache is not None and j.cache.disk is not None}
        caches = {id(j): j.cache for j in self.judges}  # given back after the run
        for j in self.judges:
            j.via = self.answers.via
        try:
            for batch_id, record in recorded.items():  # a resumed run collects what it sent before
                if record.status not in ("failed", "cancelled", GONE) and not stop.is_set():
                    await self._collect_recorded(batch_id, record)
            rounds = itertools.count(max((int(_number(r.round) or 0) for r in recorded.values()), default=0) + 1)
            while not stop.is_set():
                number = next(rounds)
                self.answers.final = self.rounds >= self.max_rounds and self.summary.problem is None
                for j in self.judges:  # a pass's own cache: what an earlier pass judged is judged again and counted
                    if j.cache is not None:
                        j.cache = JudgeCache(j.cache.maxsize, disk=cast("DiskCache | None", disks.get(id(j))))
                self.summary.unfinished = 0
                yield self.judge_one
                bodies = self.answers.take_pending()
                if not bodies or self.answers.final or self.summary.problem is not None or stop.is_set():
                    break
                await self.send(bodies, number, self.plan.judge.name)
            if self.answers.given_up and self.summary.problem is None:
                self.summary.problem = (f"{self.answers.given_up} requests still had no answer after "
                                        f"{self.max_rounds} batches (max_rounds): their conversations are written "
                                        "with those judge errors")
        finally:
            for j in self.judges:
                j.via, j.cache = None, caches[id(j)]

    async def _collect_recorded(self, batch_id: str, record: BatchLine) -> None:
        try:
            await self.collect(batch_id, int(_number(record.round) or 0), int(_number(record.requests) or 0),
                               ended=record.status in ("completed", "expired"))
        except openai.NotFoundError:  # deleted at the provider (or another endpoint): its requests are sent again
            self.writer.write({"type": RECORD, "id": batch_id, "round": record.round, "status": GONE})
            self.say(f"batch {batch_id} is unknown to the endpoint (404): its requests are sent again")

    async def send(self, bodies: dict[str, dict[str, Any]], number: int, judge: str) -> None:
        states = []
        self.rounds += 1
        for part in chunks(bodies):
            state = await asyncio.to_thread(self.client.submit, part, {"judgegraph_round": str(number)})
            self.writer.write({"type": RECORD, "id": state.id, "round": number, "status": "submitted",
                               "requests": len(part), "endpoint": "/v1/chat/completions", "judge": judge})
            self.say(f"batch {state.id} (round {number}): {len(part)} requests submitted")
            states.append((state, len(part)))
        for state, n in states:
            await self.collect(state.id, number, n, ended=False)
            if self.stop.is_set():
                return

    async def collect(self, batch_id: str, number: int, requests: int, *, ended: bool) -> None:
        """Wait for the batch (unless it is known to have ended), add its answers, record its end."""
        seen: list[str] = []

        def progress(state: BatchState) -> None:
            line = f"batch {state.id} (round {number}): {state.status}, {state.completed}/{state.total or requests} " \
                   f"done" + (f", {state.failed} failed" if state.failed else "")
            if not seen or seen[-1] != line:
                seen.append(line)
                self.say(line)

        state = await asyncio.to_thread(self.client.wait, batch_id, poll_s=self.poll_s, on_poll=progress,
                                        stop=self.stop.is_set)
        if state is None:  # stopped: the batch goes on at the provider
            self.say(f"batch {batch_id} left running at the provider: --resume collects it")
            return
        usage = await asyncio.to_thread(self._load, state)
        if not ended:
            record: dict[str, Any] = {
                "type": RECORD, "id": state.id, "round": number, "status": state.status, "requests": requests,
                "completed": state.completed, "failed": state.failed, "output_file_id": state.output_file_id,
                "error_file_id": state.error_file_id, "usage": usage.model_dump(mode="json"),
            }
            if self.summary.list_prices is not None:
                record["cost_usd"] = self.summary.list_prices.batch().cost(usage)
                record["list_cost_usd"] = self.summary.list_prices.cost(usage)
            if state.errors:
                record["errors"] = [self.judges[0].redact(e) for e in state.errors]
            self.writer.write(record)
        self.summary.batches.append(BatchLine(id=state.id, round=number, status=state.status, requests=requests,
                                              completed=state.completed, failed=state.failed))
        if state.status != "completed" and self.summary.problem is None and not ended:  # an earlier run reported it
            why = f": {'; '.join(self.judges[0].redact(e) for e in state.errors[:3])}" if state.errors else ""
            self.summary.problem = (f"batch {state.id} {state.status}{why}; {state.completed} of {state.total or requests} "
                            "requests answered and used; --resume sends the rest")

    def _load(self, state: BatchState) -> Usage:
        """The answers and failures of an ended batch into :attr:`answers`; the tokens of its answers."""
        usage = Usage()
        for line in self.client.results(state):
            if line.status == 200 and line.body is not None and not line.message:
                self.answers.add_answer(line.custom_id, line.body)
                reported = line.body["usage"] if isinstance(line.body.get("usage"), dict) else {}
                counts: list[Any] = [reported.get(k) for k in ("prompt_tokens", "completion_tokens")]
                if all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in counts):
                    usage = usage + Usage(calls=1, input_tokens=counts[0], output_tokens=counts[1])
            else:
                self.answers.add_failure(line.custom_id, line.status, line.message)
        return usage
