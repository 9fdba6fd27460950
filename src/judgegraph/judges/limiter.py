"""One bound on judge calls for a whole run, shared by sync and async callers: calls in flight
(``max_in_flight``), and optionally requests and tokens per minute (``rpm``, ``tpm``)."""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager


class RateBucket:
    """A per-minute budget paced as a generic cell rate: each reservation gets the earliest
    moment it may start, at most ``burst`` ahead of the steady rate, in arrival order under
    a lock; ``adjust`` settles an estimate once the real cost is known."""

    def __init__(self, per_minute: float, *, burst: float | None = None) -> None:
        if not per_minute > 0:
            raise ValueError(f"a per-minute rate must be > 0, got {per_minute}")
        self.per_minute = per_minute
        self.rate = per_minute / 60.0  # units per second
        self.burst = max(1.0, burst if burst is not None else self.rate)  # one second's worth
        self._tat = 0.0  # theoretical arrival time of the next unit
        self._lock = threading.Lock()

    def reserve(self, cost: float = 1.0, now: float | None = None) -> float:
        """Seconds to wait before spending ``cost`` units (0 when there is room)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tat = max(self._tat, now)
            start = max(now, tat - max(0.0, self.burst - cost) / self.rate)  # a cost over the burst waits for an empty bucket
            self._tat = tat + cost / self.rate
        return start - now

    def adjust(self, delta: float) -> None:
        """Add (or give back) ``delta`` units to what was reserved."""
        if delta:
            with self._lock:
                self._tat += delta / self.rate


class CallLimiter:
    """At most ``max_in_flight`` judge calls at once and ``rpm``/``tpm`` per minute, across
    everything sharing it: a thread semaphore for sync callers, one asyncio semaphore per
    event loop for async ones; pacing waits inside the slot."""

    def __init__(self, max_in_flight: int = 16, *, rpm: float | None = None, tpm: float | None = None) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.rpm = RateBucket(rpm) if rpm else None
        self.tpm = RateBucket(tpm) if tpm else None
        self._sync = threading.BoundedSemaphore(max_in_flight)
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.requests = 0

    @contextmanager
    def _counted(self) -> Iterator[None]:
        with self._lock:
            self.in_flight += 1
            self.requests += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            with self._lock:
                self.in_flight -= 1

    def delay(self, tokens: int = 0) -> float:
        """Reserve one request (and ``tokens``) against the per-minute limits;
        the seconds to wait before sending."""
        wait = 0.0
        if self.rpm is not None:
            wait = self.rpm.reserve(1)
        if self.tpm is not None:
            wait = max(wait, self.tpm.reserve(max(1, tokens)))
        return wait

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """The tokens a call really used, after it was paced on an estimate."""
        if self.tpm is not None and actual_tokens:
            self.tpm.adjust(actual_tokens - max(1, estimated_tokens))

    @property
    def paced(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    @contextmanager
    def slot(self, tokens: int = 0) -> Iterator[None]:
        with self._sync:
            if self.paced and (wait := self.delay(tokens)) > 0:
                time.sleep(wait)
            with self._counted():
                yield

    @asynccontextmanager
    async def aslot(self, tokens: int = 0) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        with self._lock:
            sem = self._async.get(loop)
            if sem is None:
                sem = self._async[loop] = asyncio.Semaphore(self.max_in_flight)
        async with sem:
            if self.paced and (wait := self.delay(tokens)) > 0:
                await asyncio.sleep(wait)
            with self._counted():
                yield
