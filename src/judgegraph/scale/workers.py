"""Worker processes: N processes, each with its own event loop and its own
judge (rebuilt from settings), fed conversations by the parent.

The parent keeps the run: it reads the input, skips what is done, dispatches
each conversation to the worker with the fewest in flight, and writes each
outcome as it arrives (``runner.evaluate_async`` with ``judge_one=pool.judge``).
A worker judges a conversation with ``runner.judge_conversation`` — the same
code as a one-process run — so results are the same.

Wire protocol over one socket pair per worker (``multiprocessing.connection``,
pickled): parent → worker first the worker's :class:`PlanSpec`, then ``(job_id, LoadedConversation)`` or ``None`` (finish and exit);
worker → parent ``("ready", pid)``, ``("fatal", message)`` or
``("done", job_id, ConversationOutcome)``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from typing_extensions import Self

from ..loaders import LoadedConversation
from ..runner import ConversationOutcome
from .limits import ScaleStartError
from .spec import PlanSpec

#: How long a worker may take to import and build its judge before the run gives up on it.
START_TIMEOUT_S = 120.0


# --------------------------------------------------------------------------- #
# The worker process
# --------------------------------------------------------------------------- #


BLAS_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_GONE = "parent gone"  # the inbox's mark for a closed connection (``None`` is the parent's "finish")


def worker_main(fd: int) -> None:
    """Entry point of a worker process: ``python -c "...worker_main(FD)"``, the
    parent's end of a socket pair on ``FD``. A fresh interpreter, not a fork
    (no copy of the parent's threads and open clients) and not
    ``multiprocessing``'s spawn (which re-runs the caller's ``__main__``)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    conn = Connection(fd)
    try:
        spec = conn.recv()
        asyncio.run(_serve(conn, spec))
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        conn.close()


async def _serve(conn: Any, spec: PlanSpec) -> None:
    from ..runner import judge_conversation

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

    async def one(job: int, item: LoadedConversation) -> None:
        outcome = await judge_conversation(item, plan)
        try:
            try:
                conn.send(("done", job, outcome))
            except (OSError, ValueError):
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result: still report the conversation
                conn.send(("done", job, ConversationOutcome(
                    outcome.conversation_id, outcome.source,
                    error=f"worker could not send the result: {type(exc).__name__}: {exc}")))
        except (OSError, ValueError):  # the parent is gone: nobody to tell
            pass

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


def _spawn(spec: PlanSpec, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Connection]:
    ours, theirs = socket.socketpair()
    with theirs:
        proc = subprocess.Popen(
            [sys.executable, "-c", f"from judgegraph.scale.workers import worker_main; worker_main({theirs.fileno()})"],
            pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # the parent's stdout is the run's table or JSON; stderr stays for warnings
        )
    conn = Connection(ours.detach())
    conn.send(spec)
    return proc, conn


# --------------------------------------------------------------------------- #
# The parent's side
# --------------------------------------------------------------------------- #


@dataclass
class _Worker:
    index: int
    process: Any
    conn: Any
    jobs: dict[int, asyncio.Future[ConversationOutcome]] = field(default_factory=dict)
    started: asyncio.Future[int] | None = None
    alive: bool = True
    send_lock: threading.Lock = field(default_factory=threading.Lock)


class WorkerPool:
    """``async with WorkerPool(spec, workers=N) as pool: await pool.judge(item)``.

    The run's judge budget (``spec.judge["max_concurrency"]``, rates) is split
    across the workers (:mod:`.limits`), so the total holds. A worker that dies
    fails only its conversations in flight (reported as that conversation's
    error, never as a verdict); the others go on.
    """

    def __init__(self, spec: PlanSpec, *, workers: int, blas_threads: int | None = None) -> None:
        """``blas_threads``: numpy threads per worker (default cores // workers),
        unless ``OMP_NUM_THREADS`` etc. are set already."""
        self.shares = spec.shares(workers)
        self.workers = len(self.shares)
        cpus = os.cpu_count() or 1
        self.blas_threads = blas_threads or max(1, cpus // self.workers)
        self._workers: list[_Worker] = []
        self._ids = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.pids: list[int] = []

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        env = dict(os.environ)
        # numpy BLAS pools: one per worker, sized so N workers do not fight over the cores
        env.update({var: env.get(var, str(self.blas_threads)) for var in BLAS_VARS})
        # the parent's import path (a metric given as module:factory must import in the worker too)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [*sys.path, env.get("PYTHONPATH", "")] if p)
        for i, share in enumerate(self.shares):
            proc, conn = _spawn(share, env)
            w = _Worker(i, proc, conn, started=self._loop.create_future())
            self._workers.append(w)
            threading.Thread(target=self._read, args=(w,), name=f"judgegraph-pool-{i}", daemon=True).start()
        try:
            self.pids = list(await asyncio.wait_for(
                asyncio.gather(*(w.started for w in self._workers if w.started)), START_TIMEOUT_S))
        except (RuntimeError, asyncio.TimeoutError) as exc:
            await self.close()
            raise ScaleStartError(str(exc) or f"the workers did not start in {START_TIMEOUT_S:.0f} s") from exc
        except BaseException:
            await self.close()
            raise

    def _read(self, w: _Worker) -> None:
        """A thread per worker: results resolve the parent's futures on its loop."""
        assert self._loop is not None
        loop = self._loop
        while True:
            try:
                msg = w.conn.recv()
            except (EOFError, OSError):
                msg = None
            try:
                loop.call_soon_threadsafe(self._deliver if msg is not None else self._lost, w, msg)
            except RuntimeError:  # the loop is closed: the run is over
                return
            if msg is None:
                return

    def _deliver(self, w: _Worker, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "ready" and w.started and not w.started.done():
            w.started.set_result(msg[1])
        elif kind == "fatal" and w.started and not w.started.done():
            w.started.set_exception(RuntimeError(f"worker {w.index} could not start: {msg[1]}"))
        elif kind == "done":
            fut = w.jobs.pop(msg[1], None)
            if fut is not None and not fut.done():
                fut.set_result(msg[2])

    def _lost(self, w: _Worker, _msg: Any = None) -> None:
        w.alive = False
        why = f"worker process {w.index} (pid {w.process.pid}) exited with code {w.process.poll()}"
        if w.started and not w.started.done():
            w.started.set_exception(RuntimeError(f"{why} while starting"))
        for fut in w.jobs.values():
            if not fut.done():
                fut.set_exception(RuntimeError(why))
        w.jobs.clear()

    async def judge(self, item: LoadedConversation) -> ConversationOutcome:
        live = [w for w in self._workers if w.alive]
        if not live:
            return ConversationOutcome(item.conversation.id, item.source, error="no worker process left")
        w = min(live, key=lambda w: len(w.jobs))
        job = next(self._ids)
        fut: asyncio.Future[ConversationOutcome] = asyncio.get_running_loop().create_future()
        w.jobs[job] = fut
        try:
            with w.send_lock:
                w.conn.send((job, item))
            return await fut
        except Exception as exc:  # noqa: BLE001 - this conversation's error; the run goes on
            w.jobs.pop(job, None)
            return ConversationOutcome(item.conversation.id, item.source, error=f"{type(exc).__name__}: {exc}")

    async def close(self, timeout: float = 30.0) -> None:
        """Workers finish what they hold and exit; when the run was stopped
        (conversations abandoned in flight) they are terminated at once."""
        if any(w.jobs for w in self._workers):
            timeout = 0.0
        for w in self._workers:
            if w.alive:
                try:
                    with w.send_lock:
                        w.conn.send(None)
                except (OSError, ValueError):
                    pass
        for w in self._workers:
            try:
                await asyncio.to_thread(w.process.wait, max(timeout, 0.01))
            except subprocess.TimeoutExpired:
                w.process.terminate()
                await asyncio.to_thread(w.process.wait, 5)
            w.conn.close()
        self._workers = []
