"""One bound on judge calls in flight, shared by sync and async callers."""

from __future__ import annotations

import asyncio
import threading
import weakref
from contextlib import asynccontextmanager, contextmanager


class CallLimiter:
    """At most ``max_in_flight`` judge calls at once.

    Sync callers (threads of ``invoke``/``batch``) share a thread semaphore;
    async callers share one asyncio semaphore per event loop. ``in_flight`` and
    ``peak`` are kept for benchmarks and tests.
    """

    def __init__(self, max_in_flight: int = 16) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self._sync = threading.BoundedSemaphore(max_in_flight)
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def _exit(self) -> None:
        with self._lock:
            self.in_flight -= 1

    @contextmanager
    def slot(self):
        with self._sync:
            self._enter()
            try:
                yield
            finally:
                self._exit()

    @asynccontextmanager
    async def aslot(self):
        loop = asyncio.get_running_loop()
        with self._lock:
            sem = self._async.get(loop)
            if sem is None:
                sem = self._async[loop] = asyncio.Semaphore(self.max_in_flight)
        async with sem:
            self._enter()
            try:
                yield
            finally:
                self._exit()
