"""Worker processes, each with its own event loop and judge (rebuilt from settings), fed conversations by the
parent, which keeps the run; supervision (deaths, silence, poison inputs) as docs/scale.md says.

Wire protocol over one socket pair per worker (pickled): parent → worker its :class:`PlanSpec`, then
``(job_id, LoadedConversation)`` or ``None`` (finish and exit); worker → parent ``("ready", pid)``,
``("fatal", message)``, ``("beat",)`` (every :data:`HEARTBEAT_S`) or ``("done", job_id, ConversationOutcome)``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from typing_extensions import Self

from ..loaders import LoadedConversation
from ..runs.runner import ConversationOutcome
from .limits import ScaleStartError
from .spec import PlanSpec

T = TypeVar("T")

#: How long a worker may take to import and build its judge before the run gives up on it.
START_TIMEOUT_S = 120.0
#: How often a worker's event loop says it is alive, whether or not it is judging.
HEARTBEAT_S = 1.0
#: A conversation in flight on this many workers that died (or were killed as
#: silent) is written as a failed run instead of being sent again.
MAX_WORKER_DEATHS = 2
#: The judge request timeout when the settings give none (``judges.llm.DEFAULT_TIMEOUT_S``).
DEFAULT_JUDGE_TIMEOUT_S = 120.0
#: The shortest silence limit, whatever the judge timeout.
MIN_SILENCE_S = 10.0


def silence_limit(judge_settings: Mapping[str, object]) -> float:
    """How long a worker with conversations in flight may send nothing before it is killed and replaced: twice the
    judge's request timeout (``timeout``, default 120 s), at least :data:`MIN_SILENCE_S`. The heartbeat comes from
    the event loop while judge calls wait, so only a stopped, hung or blocked worker is silent this long."""
    timeout = judge_settings.get("timeout")
    timeout = float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else DEFAULT_JUDGE_TIMEOUT_S
    return max(MIN_SILENCE_S, 2.0 * timeout)


class WorkerLost(RuntimeError):
    """The worker holding a conversation died or was killed as silent."""


async def least_busy(choices: Callable[[], list[T]], load: Callable[[T], int], holds_suspect: Callable[[T], bool],
                     suspect: bool, wake: asyncio.Event) -> T | None:
    """The live worker (of ``choices()``) with the least ``load`` (None: none is left). A suspect — a conversation
    that was on a worker that died — only goes to a worker holding no other suspect, waiting (on ``wake``) for one
    if need be: when that worker dies too, the suspect alone is blamed for it, so one poison input never fails the
    conversations that happened to share its workers."""
    while True:
        live = choices()
        if not live:
            return None
        free = [c for c in live if not (suspect and holds_suspect(c))]
        if free:
            return min(free, key=load)
        wake.clear()
        await wake.wait()


async def resend_on_death(item: LoadedConversation,
                          send: Callable[[LoadedConversation, bool], Awaitable[ConversationOutcome | None]],
                          *, none_left: str, died: str) -> ConversationOutcome:
    """``item`` judged by ``send(item, suspect)`` (a pool's one try: None when no worker is left), sent again
    when the worker holding it dies (``send`` raises :class:`WorkerLost`), as a suspect after the first death,
    until :data:`MAX_WORKER_DEATHS` deaths: then, or when no worker is left (``none_left``), a failed outcome
    with the causes (``died``: what the deaths were, "worker processes died with ...")."""
    deaths: list[str] = []
    while True:
        try:
            outcome = await send(item, bool(deaths))
        except WorkerLost as exc:
            deaths.append(str(exc))
            if len(deaths) >= MAX_WORKER_DEATHS:
                return ConversationOutcome(item.conversation.id, item.source, error=(
                    f"not sent again: {len(deaths)} {died}: {'; '.join(deaths)}"))
            continue
        if outcome is None:
            return ConversationOutcome(item.conversation.id, item.source, error=none_left
                                       + (f" ({deaths[-1]})" if deaths else ""))
        return outcome


# --------------------------------------------------------------------------- worker process


BLAS_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_GONE = "parent gone"  # the inbox's mark for a closed connection (``None`` is the parent's "finish")

#: The worker's ``python -c`` program: the current directory, which ``-c`` puts first on ``sys.path`` (a ``yaml.py``
#: there would shadow a dependency), is moved last before anything is imported (as the parent does for ``-m``).
BOOTSTRAP = ("import os, sys\n"
             "if sys.path and sys.path[0] in ('', os.getcwd()): del sys.path[0]\n"
             "sys.path.append(os.getcwd())\n"
             "from judgegraph.scale.workers import worker_main; worker_main({fd})")


def worker_main(fd: int) -> None:
    """Entry point of a worker process (``python -c BOOTSTRAP``, its socket on ``fd``): a fresh interpreter, not a
    fork (no copy of the parent's threads and clients) nor ``multiprocessing``'s spawn (it re-runs ``__main__``)."""
    # Ctrl-C and a service manager's SIGTERM reach the process group: the parent decides (it finishes the file first)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    conn = Connection(fd)
    try:
        spec = conn.recv()
        asyncio.run(_serve(conn, spec))
    except (EOFError, KeyboardInterrupt, BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone (killed, even with -9): nobody to tell, exit quietly
    finally:
        conn.close()


async def _serve(conn: Connection, spec: PlanSpec) -> None:
    from ..runs.runner import judge_conversation

    try:
        plan = spec.build()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops the run
        conn.send(("fatal", f"{type(exc).__name__}: {exc}"))
        return
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def pump() -> None:  # a thread: blocking reads never stall the event loop
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                msg = _GONE
            loop.call_soon_threadsafe(inbox.put_nowait, msg)
            if msg is None or msg is _GONE:
                return

    threading.Thread(target=pump, name="judgegraph-worker-inbox", daemon=True).start()
    conn.send(("ready", os.getpid()))
    running: set[asyncio.Task[None]] = set()

    async def beat() -> None:  # from the event loop: it proves the loop runs, not just the process
        with suppress(OSError, ValueError):  # the parent is gone
            while True:
                await asyncio.sleep(HEARTBEAT_S)
                conn.send(("beat",))

    heart = asyncio.create_task(beat())

    async def one(job: int, item: LoadedConversation) -> None:
        outcome = await judge_conversation(item, plan)
        with suppress(OSError, ValueError):  # the parent is gone: nobody to tell
            try:
                conn.send(("done", job, outcome))
            except (OSError, ValueError):
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result: still report the conversation
                why = f"worker could not send the result: {type(exc).__name__}: {exc}"
                conn.send(("done", job, ConversationOutcome(outcome.conversation_id, outcome.source, error=why)))

    while (msg := await inbox.get()) is not None:
        if msg is _GONE:  # nobody will read the results: stop now
            for task in running:
                task.cancel()
            break
        task = asyncio.create_task(one(*msg))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.gather(*running, return_exceptions=True)
    heart.cancel()


def _spawn(spec: PlanSpec, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Connection]:
    ours, theirs = socket.socketpair()
    with theirs:
        proc = subprocess.Popen(
            [sys.executable, "-c", BOOTSTRAP.format(fd=theirs.fileno())],
            pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # the parent's stdout is the run's table or JSON; stderr stays for warnings
        )
    conn = Connection(ours.detach())
    conn.send(spec)
    return proc, conn


def worker_pythonpath(path: list[str], inherited: str = "") -> str:
    """The workers' ``PYTHONPATH``: the parent's import path (a ``module:factory`` metric must import there too)
    without the current directory, which the worker puts last itself (:data:`BOOTSTRAP`)."""
    cwd = os.path.realpath(os.getcwd())
    kept = [p for p in path if p and os.path.realpath(p) != cwd]
    return os.pathsep.join(p for p in [*kept, inherited] if p)


# --------------------------------------------------------------------------- parent's side


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[bytes]
    conn: Connection
    started: asyncio.Future[int]  # its pid once it is ready
    spawned: float = field(default_factory=time.monotonic)
    last_heard: float = field(default_factory=time.monotonic)  # set by the reader thread
    jobs: dict[int, asyncio.Future[ConversationOutcome]] = field(default_factory=dict)
    suspects: int = 0  # conversations in flight here that were on a worker that died (at most 1)
    alive: bool = True
    killed_why: str | None = None  # set when the parent kills it (silent, or too slow to start)
    outbox: queue.SimpleQueue[bytes | None] = field(default_factory=queue.SimpleQueue)

    @property
    def ready(self) -> bool:
        return self.started.done() and not self.started.exception()


class WorkerPool:
    """``async with WorkerPool(spec, workers=N) as pool: await pool.judge(item)``: the run's judge budget split
    across the workers (:mod:`.limits`); a worker dead, or silent for ``silent_after`` (default
    :func:`silence_limit`) with work in flight, is replaced and its conversations sent again
    (:func:`resend_on_death`). ``blas_threads``: numpy threads per worker (default cores // workers), unless
    ``OMP_NUM_THREADS`` etc. are set already."""

    def __init__(self, spec: PlanSpec, *, workers: int, blas_threads: int | None = None,
                 silent_after: float | None = None) -> None:
        self.shares = spec.shares(workers)
        self.workers = len(self.shares)
        self.blas_threads = blas_threads or max(1, (os.cpu_count() or 1) // self.workers)
        self.silent_after = silent_after if silent_after is not None else silence_limit(spec.judge)
        self._workers: list[_Worker] = []
        self._ids = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._env: dict[str, str] = {}
        self._watch: asyncio.Task[None] | None = None
        self._closing = False
        self._wake = asyncio.Event()  # set when a worker can take a suspect again
        self.pids: list[int] = []  # the workers' process ids (a replacement's in its slot)
        self.replaced = 0  # workers replaced during the run (dead or silent)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        env = self._env = dict(os.environ)
        # numpy BLAS pools: one per worker, sized so N workers do not fight over the cores
        env.update({var: env.get(var, str(self.blas_threads)) for var in BLAS_VARS})
        env["PYTHONPATH"] = worker_pythonpath(sys.path, env.get("PYTHONPATH", ""))
        self._workers = [self._start_worker(i) for i in range(len(self.shares))]
        try:
            started = asyncio.gather(*(w.started for w in self._workers))
            self.pids = list(await asyncio.wait_for(started, START_TIMEOUT_S))
        except (RuntimeError, asyncio.TimeoutError) as exc:
            await self.close()
            raise ScaleStartError(str(exc) or f"the workers did not start in {START_TIMEOUT_S:.0f} s") from exc
        except BaseException:
            await self.close()
            raise
        self._watch = asyncio.create_task(self._watchdog())

    def _start_worker(self, index: int) -> _Worker:
        assert self._loop is not None
        proc, conn = _spawn(self.shares[index], self._env)
        w = _Worker(index, proc, conn, self._loop.create_future())
        threading.Thread(target=self._read, args=(w,), name=f"judgegraph-pool-{index}", daemon=True).start()
        threading.Thread(target=self._write, args=(w,), name=f"judgegraph-pool-{index}-out", daemon=True).start()
        return w

    def _read(self, w: _Worker) -> None:
        """A thread per worker: results resolve the parent's futures on its loop."""
        loop = self._loop
        assert loop is not None
        while True:
            try:
                msg = w.conn.recv()
            except (EOFError, OSError):
                msg = None
                with suppress(subprocess.TimeoutExpired):  # the socket closes as the process exits:
                    w.process.wait(2)  # wait for its exit code (for the message)
            w.last_heard = time.monotonic()
            if msg is not None and msg[0] == "beat":
                continue
            try:
                loop.call_soon_threadsafe(self._deliver if msg is not None else self._lost, w, msg)
            except RuntimeError:  # the loop is closed: the run is over
                return
            if msg is None:
                return

    @staticmethod
    def _write(w: _Worker) -> None:
        """A thread per worker sends its messages: a stopped worker's full socket blocks it, never the event loop."""
        while (data := w.outbox.get()) is not None:
            try:
                w.conn.send_bytes(data)
            except (OSError, ValueError):  # the worker is gone: the reader reports it
                return

    def _deliver(self, w: _Worker, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "ready" and not w.started.done():
            w.started.set_result(msg[1])
        elif kind == "fatal" and not w.started.done():
            w.started.set_exception(RuntimeError(f"worker {w.index} could not start: {msg[1]}"))
        elif kind == "done":
            fut = w.jobs.pop(msg[1], None)
            if fut is not None and not fut.done():
                fut.set_result(msg[2])

    def _lost(self, w: _Worker, _msg: object = None) -> None:
        was_ready = w.ready
        w.alive = False
        w.outbox.put(None)
        code = w.process.poll()
        why = (f"worker process {w.index} (pid {w.process.pid}) "
               + (w.killed_why or f"exited with code {code if code is not None else 'unknown'}"))
        if not w.started.done():
            w.started.set_exception(RuntimeError(f"{why} while starting"))
            if self._watch is not None:  # a replacement: nobody awaits its start (no "never retrieved" warning)
                w.started.exception()
        for fut in w.jobs.values():
            if not fut.done():
                fut.set_exception(WorkerLost(why))
        w.jobs.clear()
        # A worker that had started is replaced (same share of the budget); one that
        # never started is not, or a broken environment would respawn workers forever.
        if was_ready and not self._closing and self._workers and self._workers[w.index] is w:
            self._workers[w.index] = new = self._start_worker(w.index)
            self.replaced += 1
            if w.index < len(self.pids):
                self.pids[w.index] = new.process.pid
        self._wake.set()

    def _kill(self, w: _Worker, why: str) -> None:
        """SIGKILL (a stopped process takes no other signal); its reader sees the socket end, :meth:`_lost` follows."""
        if w.killed_why is None:
            w.killed_why = why
        with suppress(OSError):
            w.process.kill()

    async def _watchdog(self) -> None:
        """Kill the workers silent with work in flight, or too slow to start."""
        while True:
            await asyncio.sleep(min(HEARTBEAT_S, self.silent_after / 4))
            now = time.monotonic()
            for w in list(self._workers):
                if not w.alive or w.killed_why:
                    continue
                if not w.started.done():
                    if now - w.spawned > START_TIMEOUT_S:
                        self._kill(w, f"did not start in {START_TIMEOUT_S:.0f} s and was killed")
                elif w.jobs and now - w.last_heard > self.silent_after:
                    self._kill(w, f"sent nothing for {now - w.last_heard:.0f} s with {len(w.jobs)} conversations "
                                  f"in flight (limit {self.silent_after:.0f} s) and was killed")

    async def judge(self, item: LoadedConversation) -> ConversationOutcome:
        return await resend_on_death(item, self._send, none_left="no worker process left", died=(
            "worker processes died with this conversation in flight "
            "(the second time as the only one there that had been on a dying worker before)"))

    async def _send(self, item: LoadedConversation, suspect: bool) -> ConversationOutcome | None:
        """One try of :meth:`judge` (:func:`resend_on_death`)."""
        w = await least_busy(lambda: [w for w in self._workers if w.alive], lambda w: len(w.jobs),
                             lambda w: w.suspects > 0, suspect, self._wake)
        if w is None:
            return None
        job = next(self._ids)
        try:
            data = pickle.dumps((job, item), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - this conversation's error; the run goes on
            return ConversationOutcome(item.conversation.id, item.source,
                                       error=f"cannot send to a worker: {type(exc).__name__}: {exc}")
        fut: asyncio.Future[ConversationOutcome] = asyncio.get_running_loop().create_future()
        w.jobs[job] = fut  # w is alive now, on this loop: its death (also on this loop) fails fut
        w.suspects += suspect
        w.outbox.put(data)
        try:
            return await fut
        except asyncio.CancelledError:
            w.jobs.pop(job, None)
            raise
        finally:
            if suspect:
                w.suspects -= 1
                self._wake.set()

    async def close(self, timeout: float = 30.0) -> None:
        """Workers finish what they hold and exit; killed at once when the run was stopped (work abandoned in
        flight) or when silent for a few heartbeats (stopped, hung)."""
        self._closing = True
        self._wake.set()  # suspects waiting for a worker: they find none left
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if any(w.jobs for w in self._workers):
            timeout = 0.0
        for w in self._workers:
            if w.alive:
                w.outbox.put(pickle.dumps(None))
            w.outbox.put(None)  # the writer thread ends after the worker's "finish"
        for w in self._workers:
            wait = timeout if time.monotonic() - w.last_heard < 5 * HEARTBEAT_S else 0.0
            try:
                await asyncio.to_thread(w.process.wait, max(wait, 0.01))
            except subprocess.TimeoutExpired:
                w.process.kill()
                await asyncio.to_thread(w.process.wait, 10)
            w.conn.close()
        self._workers = []
