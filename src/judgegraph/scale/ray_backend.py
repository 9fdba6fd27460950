"""A Ray cluster: one actor per worker slot, each with one event loop and its own judge rebuilt from settings, fed
by the driver (this process), which keeps the run and writes the one results file; the budget is split as for worker
processes (:mod:`.limits`), and a dead or silent actor is replaced as a worker is (docs/scale.md). Ray is imported
only when a :class:`RayPool` starts; usage statistics are off and no dashboard is started.
"""

from __future__ import annotations

import asyncio
import os
import socket
from contextlib import suppress
from types import ModuleType
from typing import Any

from typing_extensions import Self

from ..loaders import LoadedConversation
from ..runs.runner import ConversationOutcome
from .limits import ScaleStartError
from .spec import PlanSpec
from .workers import HEARTBEAT_S, START_TIMEOUT_S, WorkerLost, least_busy, resend_on_death, silence_limit

RAY_MISSING = "--ray needs Ray: pip install 'judgegraph[ray]'"


class JudgeActor:
    """The actor class (made remote at start: importing this module does not import Ray); async methods."""

    def __init__(self, spec: PlanSpec) -> None:
        self.plan = spec.build()

    async def ready(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}"

    async def judge(self, item: LoadedConversation) -> ConversationOutcome:
        from ..runs.runner import judge_conversation

        return await judge_conversation(item, self.plan)


def import_ray() -> ModuleType:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as exc:
        raise ScaleStartError(RAY_MISSING) from exc
    return ray


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """A ``HOST:PORT`` nobody answers at fails now: ``ray.init`` would retry for minutes."""
    if not address or "://" in address or address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ScaleStartError(f"--ray: expected HOST:PORT (or ray://HOST:PORT), got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ScaleStartError(f"no Ray cluster answers at {address}: {exc}") from exc


class RayPool:
    """``async with RayPool(spec, address=...) as pool: await pool.judge(item)``. ``address``: ``HOST:PORT`` (or
    ``ray://...``); None finds one as ``ray.init()`` does. ``workers``: how many actors (default: one per CPU of the
    cluster, at most the run's concurrency), each taking ``num_cpus``."""

    def __init__(self, spec: PlanSpec, *, address: str | None = None, workers: int | None = None,
                 num_cpus: float = 1.0, silent_after: float | None = None) -> None:
        self.spec = spec
        self.address = address
        self.requested = workers
        self.num_cpus = num_cpus
        self.silent_after = silent_after if silent_after is not None else silence_limit(spec.judge)
        self.actors: list[Any] = []  # Any: Ray actor handles (Ray is optional, imported at run time)
        self.in_flight: list[int] = []
        self.suspects: list[int] = []  # per actor: conversations in flight that were on an actor that died
        self.where: list[str] = []
        self.replaced = 0  # actors replaced during the run (dead or silent)
        self._shares: list[PlanSpec] = []
        self._remote: Any = None
        # id(actor handle) -> (the handle, kept so that its id is not reused; why the pool killed it)
        self._killed: dict[int, tuple[Any, str]] = {}
        self._up: dict[int, Any] = {}  # id(actor handle) -> the handle, for actors that have answered once
        self._watch: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # set when an actor can take a suspect again
        self._ray: Any = None
        self._connected_here = False

    async def __aenter__(self) -> Self:
        self.start()  # in this thread: ray.init wants the main thread; nothing else runs yet
        self._watch = asyncio.create_task(self._watchdog())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self.close()

    def start(self) -> None:
        _check_reachable(self.address)
        ray = self._ray = import_ray()
        try:
            if not ray.is_initialized():
                ray.init(address=self.address, include_dashboard=False, configure_logging=False,
                         log_to_driver=False, logging_level="WARNING")
                self._connected_here = True
            workers = self.requested or max(1, int(ray.cluster_resources().get("CPU", 1) // self.num_cpus))
            self._shares = self.spec.shares(workers)
            self._remote = ray.remote(JudgeActor)
            self.actors = [self._new_actor(share) for share in self._shares]
            self.in_flight = [0] * len(self.actors)
            self.suspects = [0] * len(self.actors)
            self.where = ray.get([a.ready.remote() for a in self.actors])
            self._up = {id(a): a for a in self.actors}
        except Exception as exc:
            self.close()
            where = f"at {self.address}" if self.address else "(ray.init's default)"
            raise ScaleStartError(f"Ray cluster {where}: {type(exc).__name__}: {exc}") from exc

    @property
    def workers(self) -> int:
        return len(self.actors)

    def _new_actor(self, share: PlanSpec) -> Any:
        return self._remote.options(num_cpus=self.num_cpus).remote(share)

    def _replace(self, i: int, dead: Any) -> None:
        """Actor ``i`` is dead: a new one takes its slot and share (once, however many calls report the death)."""
        if self.actors and self.actors[i] is dead:
            self.actors[i] = self._new_actor(self._shares[i])
            self.replaced += 1

    async def judge(self, item: LoadedConversation) -> ConversationOutcome:
        return await resend_on_death(item, self._send, none_left="the Ray pool is closed",
                                     died="Ray actors died with this conversation in flight (it may be what kills them)")

    async def _send(self, item: LoadedConversation, suspect: bool) -> ConversationOutcome | None:
        """One try of :meth:`judge` (:func:`.workers.resend_on_death`)."""
        i = await least_busy(lambda: list(range(len(self.actors))), self.in_flight.__getitem__,
                             lambda i: self.suspects[i] > 0, suspect, self._wake)
        if i is None:
            return None
        actor = self.actors[i]
        self.in_flight[i] += 1
        self.suspects[i] += suspect
        try:
            outcome: ConversationOutcome = await actor.judge.remote(item)
            return outcome
        except self._ray.exceptions.RayActorError as exc:  # the actor is gone: replace it, send the conversation again
            why = (self._killed[id(actor)][1] if id(actor) in self._killed
                   else f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
            self._replace(i, actor)
            raise WorkerLost(f"Ray actor {i} {why}") from exc
        except Exception as exc:  # noqa: BLE001 - this conversation's error, the run goes on
            return ConversationOutcome(item.conversation.id, item.source, error=f"{type(exc).__name__}: {exc}")
        finally:
            self.in_flight[i] -= 1
            self.suspects[i] -= suspect
            self._wake.set()

    async def _watchdog(self) -> None:
        """Ping every actor with work in flight; one silent for ``silent_after`` is killed: its calls then fail as a
        death and are sent again."""
        pinging: dict[int, asyncio.Task[None]] = {}
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            for i, actor in enumerate(self.actors):
                if self.in_flight[i] and (i not in pinging or pinging[i].done()):
                    pinging[i] = asyncio.create_task(self._ping(actor))

    async def _ping(self, actor: Any) -> None:
        # A new actor (a replacement) answers once it has started: it gets the start bound.
        limit = self.silent_after if id(actor) in self._up else START_TIMEOUT_S
        try:
            await asyncio.wait_for(actor.ready.remote(), limit)
            self._up[id(actor)] = actor
        except asyncio.TimeoutError:
            self._killed[id(actor)] = (actor, f"did not answer a ping for {limit:.0f} s with conversations "
                                              "in flight and was killed")
            with suppress(Exception):  # already gone
                self._ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - dead: its judge calls report it
            pass

    def close(self) -> None:
        ray = self._ray
        if ray is None:
            return
        for actor in self.actors:
            with suppress(Exception):  # already gone
                ray.kill(actor)
        self.actors = []
        self._wake.set()  # suspects waiting for an actor: they find none left
        if self._connected_here:
            ray.shutdown()
            self._connected_here = False
