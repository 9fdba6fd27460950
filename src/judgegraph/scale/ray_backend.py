"""A Ray cluster: one actor per worker slot on the cluster's nodes, each with
one event loop and its own judge, rebuilt from settings.

* Distribution: the driver (this process) dispatches each conversation to the
  actor with the fewest in flight; outcomes come back as the actors finish
  and the driver writes them (``runner.evaluate_async``), so there is one
  results file, resume works as in a local run, and no actor writes files.
* Global limits: the run's judge budget (``max_concurrency``, and ``rpm`` /
  ``tpm`` when the judge has them) is split into one share per actor
  (:mod:`.limits`); the shares add up to the total, so the bound holds across
  the whole cluster with no per-call round trip to a limiter service.
* Cache: each actor's judge uses its node's cache directory
  (``JUDGEGRAPH_CACHE_DIR`` as seen on that node). Point it at a shared path
  (NFS) to share one cache across nodes; otherwise each node has its own.

Ray is imported only when a :class:`RayPool` starts. Usage statistics are off
(``RAY_USAGE_STATS_ENABLED=0``) and no dashboard is started.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from typing_extensions import Self

from ..loaders import LoadedConversation
from ..runner import ConversationOutcome
from .limits import ScaleStartError
from .spec import PlanSpec

RAY_MISSING = "--ray needs Ray: pip install 'judgegraph[ray]'"


class JudgeActor:
    """The actor class (made remote at start, so importing this module does not
    import Ray). Its methods are async: Ray runs them on one event loop."""

    def __init__(self, spec: PlanSpec) -> None:
        self.plan = spec.build()

    async def ready(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}"

    async def judge(self, item: LoadedConversation) -> ConversationOutcome:
        from ..runner import judge_conversation

        return await judge_conversation(item, self.plan)


def import_ray() -> Any:
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
    """``async with RayPool(spec, address=...) as pool: await pool.judge(item)``.

    ``address``: a cluster's ``HOST:PORT`` (or ``ray://...``); None finds one
    as ``ray.init()`` does (``RAY_ADDRESS``, a cluster started on this machine,
    else a new local one). ``workers``: how many actors (default: one per CPU
    of the cluster, at most the run's concurrency), each taking ``num_cpus``.
    """

    def __init__(self, spec: PlanSpec, *, address: str | None = None, workers: int | None = None,
                 num_cpus: float = 1.0) -> None:
        self.spec = spec
        self.address = address
        self.requested = workers
        self.num_cpus = num_cpus
        self.actors: list[Any] = []
        self.in_flight: list[int] = []
        self.where: list[str] = []
        self._ray: Any = None
        self._connected_here = False

    async def __aenter__(self) -> Self:
        self.start()  # in this thread: ray.init wants the main thread; nothing else runs yet
        return self

    async def __aexit__(self, *exc: object) -> None:
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
            shares = self.spec.shares(workers)
            remote = ray.remote(JudgeActor)
            self.actors = [remote.options(num_cpus=self.num_cpus).remote(share) for share in shares]
            self.in_flight = [0] * len(self.actors)
            self.where = ray.get([a.ready.remote() for a in self.actors])
        except Exception as exc:
            self.close()
            where = f"at {self.address}" if self.address else "(ray.init's default)"
            raise ScaleStartError(f"Ray cluster {where}: {type(exc).__name__}: {exc}") from exc

    @property
    def workers(self) -> int:
        return len(self.actors)

    async def judge(self, item: LoadedConversation) -> ConversationOutcome:
        i = min(range(len(self.actors)), key=self.in_flight.__getitem__)
        self.in_flight[i] += 1
        try:
            return await self.actors[i].judge.remote(item)
        except Exception as exc:  # noqa: BLE001 - an actor lost: this conversation's error, the run goes on
            return ConversationOutcome(item.conversation.id, item.source, error=f"{type(exc).__name__}: {exc}")
        finally:
            self.in_flight[i] -= 1

    def close(self) -> None:
        ray = self._ray
        if ray is None:
            return
        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []
        if self._connected_here:
            ray.shutdown()
            self._connected_here = False
