"""Judge caches: a bounded in-memory one per judge (identical requests in one
run are made once), and a persistent one on disk (re-running the same thing
costs nothing).

The disk cache is one SQLite file, safe for several processes at once (WAL
journal, a busy timeout). Where it lives, first match wins: the ``path`` given
(``resolve_judge(cache=PATH)``, ``--cache PATH``), ``$JUDGEGRAPH_JUDGE_CACHE``,
``$JUDGEGRAPH_CACHE_DIR/judge-cache.sqlite``, ``~/.cache/judgegraph/judge-cache.sqlite``.
Only valid answers are stored; the key is the judge's (for an LLM judge: model
identity and generation settings, prompt template text, rendered request,
output schema), so editing a prompt file or a rubric misses.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import JudgeOutcome

ENV_JUDGE_CACHE = "JUDGEGRAPH_JUDGE_CACHE"
ENV_CACHE_DIR = "JUDGEGRAPH_CACHE_DIR"  # the folder the offline model is also kept in
CACHE_FILE = "judge-cache.sqlite"


def default_cache_path() -> Path:
    """Where the persistent judge cache is when no path is given."""
    env = os.environ.get(ENV_JUDGE_CACHE, "").strip()
    if env and env.lower() not in ("off", "0", "false", "none"):
        return Path(env).expanduser()
    root = os.environ.get(ENV_CACHE_DIR) or "~/.cache/judgegraph"
    return Path(root).expanduser() / CACHE_FILE


@dataclass(frozen=True)
class CachedAnswer:
    value_json: str  # the validated structured answer, as JSON
    reply: str | None  # the raw reply text it came from
    model: str
    created: float


_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    value_json TEXT NOT NULL,
    reply TEXT,
    model TEXT NOT NULL DEFAULT '',
    step TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL
)
"""


class DiskCache:
    """Valid judge answers in one SQLite file, keyed by the judge's cache key.

    The connection opens on first use (nothing at construction or import) and
    again in a forked child; one connection per process, shared by its threads
    under a lock."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path).expanduser() if path is not None else default_cache_path()
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self.hits = 0
        self.misses = 0
        self.stored = 0

    def __repr__(self) -> str:
        return f"DiskCache({str(self.path)!r})"

    def __getstate__(self) -> dict[str, Any]:  # worker processes reopen the file
        state = self.__dict__.copy()
        state.update(_conn=None, _pid=0, _lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, check_same_thread=False,
                               isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(_SCHEMA)
        self._conn, self._pid = conn, os.getpid()
        return conn

    def get(self, key: str) -> CachedAnswer | None:
        with self._lock:
            row = self._connect().execute(
                "SELECT value_json, reply, model, created FROM answers WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
            return CachedAnswer(*row)

    def put(self, key: str, value_json: str, *, reply: str | None, model: str = "", step: str = "") -> None:
        with self._lock:
            self._connect().execute(
                "INSERT OR REPLACE INTO answers (key, value_json, reply, model, step, created) VALUES (?, ?, ?, ?, ?, ?)",
                (key, value_json, reply, model, step, time.time()))
            self.stored += 1

    def info(self) -> dict[str, Any]:
        """Path, size, number of answers, and answers per model and per step."""
        if not self.path.exists():
            return {"path": str(self.path), "exists": False, "entries": 0, "bytes": 0, "models": {}, "steps": {}}
        with self._lock:
            conn = self._connect()
            entries = conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
            models = dict(conn.execute("SELECT model, COUNT(*) FROM answers GROUP BY model ORDER BY 2 DESC"))
            steps = dict(conn.execute("SELECT step, COUNT(*) FROM answers GROUP BY step ORDER BY 2 DESC"))
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        return {"path": str(self.path), "exists": True, "entries": entries, "bytes": size,
                "models": models, "steps": steps}

    def clear(self) -> int:
        """Remove every stored answer; how many there were."""
        if not self.path.exists():
            return 0
        with self._lock:
            conn = self._connect()
            n = conn.execute("DELETE FROM answers").rowcount
            conn.execute("VACUUM")
        return int(n)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


class JudgeCache:
    """Identical judge requests are made once per cache (e.g. one run): a
    statement extraction shared by two metrics, or by every window holding the
    same turn, costs one call. Concurrent identical requests wait for the first.
    Only successful outcomes are kept; a failed judgement is asked again.

    In memory it keeps the ``maxsize`` most recently used outcomes (LRU), and a
    key's lock lives only while someone waits on it. ``disk`` (a
    :class:`DiskCache`) is consulted by the judge on a memory miss."""

    def __init__(self, maxsize: int = 10_000, *, disk: DiskCache | None = None) -> None:
        if maxsize < 0:
            raise ValueError(f"maxsize must be >= 0, got {maxsize}")
        self.maxsize = maxsize
        self.disk = disk
        self._values: OrderedDict[str, JudgeOutcome] = OrderedDict()
        self._locks: dict[str, list[Any]] = {}  # key -> [lock, users]
        self._pending: dict[tuple[int, str], asyncio.Future[None]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._values)

    def __getstate__(self) -> dict[str, Any]:  # a copy for another process starts empty
        return {"maxsize": self.maxsize, "disk": self.disk}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["maxsize"], disk=state["disk"])  # type: ignore[misc]

    def _hit(self, key: str) -> JudgeOutcome | None:
        with self._lock:
            out = self._values.get(key)
            if out is None:
                return None
            self._values.move_to_end(key)
            self.hits += 1
        return out.as_cached()

    def _store(self, key: str, out: JudgeOutcome) -> None:
        with self._lock:
            self.misses += 1
            if out.ok and self.maxsize:
                self._values[key] = out
                self._values.move_to_end(key)
                while len(self._values) > self.maxsize:
                    self._values.popitem(last=False)

    def get_or_compute(self, key: str, compute: Callable[[], JudgeOutcome]) -> JudgeOutcome:
        if (hit := self._hit(key)) is not None:
            return hit
        with self._lock:
            entry = self._locks.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                if (hit := self._hit(key)) is not None:
                    return hit
                out = compute()
                self._store(key, out)
                return out
        finally:
            with self._lock:
                entry[1] -= 1
                if entry[1] == 0:
                    self._locks.pop(key, None)

    async def aget_or_compute(self, key: str, compute: Callable[[], Awaitable[JudgeOutcome]]) -> JudgeOutcome:
        if (hit := self._hit(key)) is not None:
            return hit
        loop = asyncio.get_running_loop()
        pkey = (id(loop), key)
        with self._lock:
            fut = self._pending.get(pkey)
            owner = fut is None
            if fut is None:
                fut = self._pending[pkey] = loop.create_future()
        if not owner:
            await asyncio.shield(fut)
            return self._hit(key) or await self.aget_or_compute(key, compute)
        try:
            out = await compute()
            self._store(key, out)
            return out
        finally:
            with self._lock:
                self._pending.pop(pkey, None)
            if not fut.done():
                fut.set_result(None)
