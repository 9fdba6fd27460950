"""Judge an agent's live threads as they end (``judgegraph watch``; docs/threads.md): each poll judges the threads
of a checkpointer or a LangGraph server that have ended (:func:`is_due`), are in the sample (:func:`sampled`) and
were not judged before (:class:`Remembered`, on disk: a restart judges nothing twice), into one results file with
a run header (:func:`begin`) and, each time a watch ends, a summary of the whole file (:func:`file_summary`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import sqlite3
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..data.conversation import Conversation
from ..loaders import InputError, LoadedConversation
from ..loaders.langgraph_threads import (
    CONTEXT_KEY,
    FORMAT,
    MESSAGES_KEY,
    ThreadError,
    ThreadInfo,
    checkpointer_threads,
    from_thread,
    matches,
)

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph_sdk.client import SyncLangGraphClient

    from ..cost.pricing import Prices
    from .header import RunStart
    from .runner import ConversationOutcome, MetricPlan, OpenRun, RunSummary

#: Judgements of a thread at most, when each one had judge errors.
MAX_TRIES = 3
#: A server thread's statuses that mean its run has ended.
ENDED = ("idle", "error")


class ThreadSource(Protocol):
    """Where threads are listed and read."""

    where: str

    def threads(self) -> Iterator[ThreadInfo]:
        """The threads, any order, lazily."""
        ...

    def read(self, info: ThreadInfo) -> LoadedConversation:
        """One thread as a conversation (raises :class:`ThreadError`)."""
        ...


@dataclass(kw_only=True)
class _Filtered:
    """Which threads of a source are watched (``assistant``, ``metadata``) and how one reads as a conversation."""

    assistant: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    context_key: str | None = CONTEXT_KEY
    messages_key: str = MESSAGES_KEY


@dataclass
class CheckpointerThreads(_Filtered):
    """The threads of a checkpointer (``where`` names it in sources and errors)."""

    checkpointer: BaseCheckpointSaver[Any]
    where: str

    def threads(self) -> Iterator[ThreadInfo]:
        return (t for t in checkpointer_threads(self.checkpointer) if matches(t, self.assistant, self.metadata))

    def read(self, info: ThreadInfo) -> LoadedConversation:
        conversation = from_thread(self.checkpointer, info.thread_id, context_key=self.context_key,
                                   messages_key=self.messages_key)
        return LoadedConversation(conversation, f"{FORMAT}:{self.where}#{info.thread_id}", FORMAT)


@dataclass
class ServerThreads(_Filtered):
    """The threads of a LangGraph server."""

    client: SyncLangGraphClient
    where: str

    def threads(self) -> Iterator[ThreadInfo]:
        from ..loaders.langgraph_server import server_threads

        return server_threads(self.client, assistant=self.assistant, metadata=self.metadata)

    def read(self, info: ThreadInfo) -> LoadedConversation:
        from ..loaders.langgraph_server import read_thread

        conversation = read_thread(self.client, info, context_key=self.context_key, messages_key=self.messages_key)
        return LoadedConversation(conversation, f"{FORMAT}:{self.where}#{info.thread_id}", FORMAT)


class Remembered:
    """The threads already judged, on disk (SQLite): ``(source, thread id) -> tries, done``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        with self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS judged (source TEXT NOT NULL, thread_id TEXT NOT NULL, "
                             "tries INTEGER NOT NULL, done INTEGER NOT NULL, judged_at TEXT NOT NULL, "
                             "PRIMARY KEY (source, thread_id))")

    def done(self, source: str, thread_id: str) -> bool:
        row = self._db.execute("SELECT done FROM judged WHERE source = ? AND thread_id = ?",
                               (source, thread_id)).fetchone()
        return bool(row and row[0])

    def record(self, source: str, thread_id: str, *, ok: bool) -> None:
        """One judgement of a thread: done when ``ok`` or after :data:`MAX_TRIES` tries."""
        now = datetime.now(timezone.utc).isoformat()
        with self._db:
            row = self._db.execute("SELECT tries FROM judged WHERE source = ? AND thread_id = ?",
                                   (source, thread_id)).fetchone()
            tries = (row[0] if row else 0) + 1
            self._db.execute("INSERT OR REPLACE INTO judged VALUES (?, ?, ?, ?, ?)",
                             (source, thread_id, tries, int(ok or tries >= MAX_TRIES), now))

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM judged WHERE done = 1").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def sampled(thread_id: str, rate: float, seed: int) -> bool:
    """Whether a thread is in the sample: a hash of (seed, thread id), the same at every poll and restart."""
    if rate >= 1:
        return True
    digest = hashlib.sha256(f"{seed}\0{thread_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def is_due(info: ThreadInfo, idle: float, now: datetime | None = None) -> bool:
    """Whether a thread has ended: not updated for ``idle`` seconds (and, on a server, not running or interrupted)."""
    if (info.status is not None and info.status not in ENDED) or info.updated_at is None:
        return False
    at = info.updated_at if info.updated_at.tzinfo else info.updated_at.replace(tzinfo=timezone.utc)
    return ((now or datetime.now(timezone.utc)) - at).total_seconds() >= idle


def _ok(outcome: ConversationOutcome) -> bool:
    return not outcome.error and not any(r.status == "error" or r.errors for r in outcome.results.values())


def begin(out: str | Path, plan: MetricPlan, source: ThreadSource, *, argv: list[str] | None = None,
          judge_settings: Mapping[str, object] | None = None, watched: Mapping[str, object] | None = None) -> RunStart:
    """How a watch begins its results file ``out``, before any poll: a torn last line cut off, this watch's header
    checked against the file's (:class:`~judgegraph.runs.header.RunSettingsChanged` names each difference)."""
    from .header import run_header, start_run
    from .resultsfile import cut_torn_tail

    where: dict[str, object] = {"path": source.where, "sha256": None, "kind": "langgraph threads"}
    for key in ("assistant", "metadata"):
        if value := getattr(source, key, None):
            where[key] = value
    header = run_header(plan, argv=argv, judge_settings=judge_settings, sources=[where])
    if watched:
        header["watch"] = watched
    cut_torn_tail(out)  # the file's end is read, nothing else is rewritten
    return start_run(out, plan, [], header, resume=True)


@dataclass
class Watch:
    """What one watcher judges and how. ``on_poll(n, judged)`` is told after each poll; ``on_judged`` (e.g. a
    write-back to MLflow) too, in a worker thread, with the threads whose judgement is final and their
    conversations; ``start``: what :func:`begin` returned (by default :meth:`run` calls it)."""

    source: ThreadSource
    plan: MetricPlan
    out: str | Path
    remembered: Remembered
    idle: float = 300.0
    sample: float = 1.0
    seed: int = 0
    interval: float = 30.0
    max_polls: int | None = None
    transcripts: str = "full"
    prices: Prices | None = None
    max_conversations: int = 8
    on_outcome: Callable[[ConversationOutcome], None] | None = None
    on_input_error: Callable[[InputError], None] | None = None
    on_poll: Callable[[int, int], None] | None = None
    on_judged: Callable[[list[tuple[Conversation, ConversationOutcome]]], None] | None = None
    start: RunStart | None = None
    polls: int = 0
    _read: dict[str, Conversation] = field(default_factory=dict, repr=False)
    _final: list[tuple[Conversation, ConversationOutcome]] = field(default_factory=list, repr=False)

    def due(self) -> Iterator[LoadedConversation | InputError]:
        """One poll's threads to judge, read one at a time."""
        key = self.source.where
        listing = self.source.threads()
        while True:
            try:
                info = next(listing)
            except StopIteration:
                return
            except Exception as exc:  # noqa: BLE001 - a server gone, a locked file: this poll ends, the next tries
                yield InputError(key, None, None, None, f"poll {self.polls}: cannot list the threads: "
                                 f"{type(exc).__name__}: {exc}")
                return
            if (not is_due(info, self.idle) or not sampled(info.thread_id, self.sample, self.seed)
                    or self.remembered.done(key, info.thread_id)):
                continue
            try:
                item = self.source.read(info)
                if self.on_judged is not None:
                    self._read[item.conversation.id] = item.conversation
                yield item
            except ThreadError as exc:
                self.remembered.record(key, info.thread_id, ok=True)  # it will not read better: not read again
                yield exc.input_error(key)
            except Exception as exc:  # noqa: BLE001 - the server failed on this read: tried again at the next poll
                yield InputError(key, None, None, "thread", f"thread {info.thread_id!r}: cannot read it: "
                                 f"{type(exc).__name__}: {exc}")

    async def run(self, stop: asyncio.Event) -> RunSummary:
        """Poll until ``stop`` is set or ``max_polls`` polls are done, ``interval`` seconds apart: the runner's one
        loop, a pass per poll."""
        from .header import run_summary
        from .resultsfile import ResultsWriter
        from .runner import OpenRun, RunSummary

        start = self.start or begin(self.out, self.plan, self.source)
        summary = RunSummary(judge=self.plan.judge.name, keep_outcomes=False, max_rows=0, prices=self.prices)
        writer = ResultsWriter(self.out, mode="a", transcripts=self.transcripts,
                               cost=self.prices.cost if self.prices else None)
        start.write_header(writer)
        run = OpenRun(start, summary, writer, [], set(), None)
        key = self.source.where

        def judged(outcome: ConversationOutcome) -> None:
            self.remembered.record(key, outcome.conversation_id, ok=_ok(outcome))
            conversation = self._read.pop(outcome.conversation_id, None)
            if conversation is not None and self.remembered.done(key, outcome.conversation_id):
                self._final.append((conversation, outcome))
            if self.on_outcome:
                self.on_outcome(outcome)

        try:
            await run.execute(self.plan, lambda _first: self.due(), self._polls, stop,
                              max_conversations=self.max_conversations, on_outcome=judged,
                              on_input_error=self.on_input_error)
            writer.write(run_summary(file_summary(self.out, self.plan.judge.name, self.prices), start.started,
                                     self.prices))
        finally:
            writer.close()
        return summary

    async def _polls(self, run: OpenRun, stop: asyncio.Event) -> AsyncGenerator[None, None]:
        """The watch's passes (:data:`~judgegraph.runs.runner.Answering`, answered here): a poll each."""
        while not stop.is_set():
            self.polls += 1
            before = run.summary.conversations
            started = time.monotonic()
            yield None
            self._read.clear()  # read but not judged (stopped): read again at the next poll
            if self.on_judged is not None and self._final:
                await asyncio.to_thread(self.on_judged, self._final.copy())
                self._final.clear()
            if self.on_poll:
                self.on_poll(self.polls, run.summary.conversations - before)
            if stop.is_set() or (self.max_polls is not None and self.polls >= self.max_polls):
                break
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, self.interval - (time.monotonic() - started)))


def file_summary(path: str | Path, judge: str = "", prices: Prices | None = None) -> RunSummary:
    """The counts of a watch's whole results file, every restart included: each thread once, by its last
    judgement, and the usage of every judgement (the retried ones cost too)."""
    from . import NotAResultsFile, read_run
    from .runner import ConversationOutcome, RunSummary

    summary = RunSummary(judge=judge, keep_outcomes=False, max_rows=0, prices=prices)
    try:
        run = read_run(path, keep_replaced=True)
    except NotAResultsFile:
        return summary
    for conv in run.conversations.values():
        try:
            summary.add(ConversationOutcome.from_json(conv.data()))
        except ValueError:  # a line another writer mangled: report and diff name it, the summary leaves it out
            continue
    for results in run.replaced:
        try:
            summary.usage = summary.usage + ConversationOutcome.from_json(
                {"results": {k: r.data() for k, r in results.items()}}).usage
        except ValueError:
            continue
    return summary
