"""Judge caches (docs/judges.md): a bounded in-memory one per judge, and a
persistent SQLite one shared by processes. The disk cache is never a reason to
lose a judgement: a file that fails turns it off with one warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

if TYPE_CHECKING:
    from .base import JudgeOutcome

ENV_JUDGE_CACHE = "JUDGEGRAPH_JUDGE_CACHE"
ENV_CACHE_DIR = "JUDGEGRAPH_CACHE_DIR"  # the folder the offline model is also kept in
CACHE_FILE = "judge-cache.sqlite"

log = logging.getLogger("judgegraph.cache")
_warned: set[str] = set()  # paths already warned about in this process (one warning per file)
_CORRUPT = ("SQLITE_NOTADB", "SQLITE_CORRUPT")  # the file itself is damaged: ``cache clear`` may replace it
_COLUMNS = {"key", "value_json", "reply", "model", "step", "created"}


class CacheInfo(TypedDict):
    """What :meth:`DiskCache.info` says about a cache file (``judgegraph cache info``)."""

    path: str
    exists: bool
    entries: int
    bytes: int  # the database file and its journal files
    models: dict[str, int]  # answers per model
    steps: dict[str, int]  # answers per step


class CacheFileError(Exception):
    """The cache file cannot be used: ``corrupt`` (damaged, may be removed) or
    ``not_a_cache`` (a directory, another program's database: never touched)."""

    def __init__(self, path: Path, cause: str, *, corrupt: bool = False, not_a_cache: bool = False) -> None:
        super().__init__(f"{path}: {cause}")
        self.path, self.cause, self.corrupt, self.not_a_cache = path, cause, corrupt, not_a_cache


class _Foreign(Exception):
    """A SQLite file that holds something other than judge answers."""


def _busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is SQLite's "another connection holds the lock" (SQLITE_BUSY or SQLITE_LOCKED)."""
    return str(getattr(exc, "sqlite_errorname", "")).startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))


def _describe(exc: BaseException) -> str:
    """The cause of a cache failure in a few words, with SQLite's error name."""
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", None)
        return f"{exc}{f' ({name})' if name else ''}"
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return str(exc)


def _is_corrupt(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and str(getattr(exc, "sqlite_errorname", "")).startswith(_CORRUPT)


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
    """Valid judge answers in one SQLite file, keyed by the judge's cache key; one
    connection per process (opened on first use, again after a fork), locked."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path).expanduser() if path is not None else default_cache_path()
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self.hits = 0
        self.misses = 0
        self.stored = 0
        self.problem: str | None = None  # why the cache is off for the rest of the run (None: in use)

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
        if self.path.exists() and not self.path.is_file():
            raise _Foreign("not a regular file (a directory or a device)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(exc.errno, f"its folder {self.path.parent} cannot be created: {exc.strerror or exc}") from None
        deadline = time.monotonic() + self.busy_timeout_s
        pause = 0.02
        while True:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, check_same_thread=False,
                                   isolation_level=None)
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
                _check_schema(conn)  # reads the header first: a file that is not a database fails here
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute(_SCHEMA)
            except sqlite3.OperationalError as exc:
                conn.close()
                # processes opening a new file together (workers): setting it up may meet SQLITE_BUSY at once,
                # without SQLite's busy wait; it is tried again, within the busy timeout
                if not _busy(exc) or time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
                continue
            except BaseException:
                conn.close()
                raise
            self._conn, self._pid = conn, os.getpid()
            return conn

    def _disable(self, exc: BaseException, doing: str) -> None:
        """Turn the cache off for the rest of the run and warn once per file."""
        cause = _describe(exc)
        self.problem = f"{doing}: {cause}"
        if self._conn is not None and self._pid == os.getpid():
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
        self._conn = None
        key = str(self.path)
        if key in _warned:
            return
        _warned.add(key)
        fix = (f"`judgegraph cache clear --cache {self.path}` replaces a damaged file; "
               if _is_corrupt(exc) else "")
        log.warning("warning: judge cache %s %s (%s); judging goes on without the cache (answers already paid for"
                    " are kept). To fix: %s--cache PATH for another file, or --no-cache.", self.path, doing, cause, fix)

    def _execute(self, doing: str, sql: str, args: tuple[Any, ...] = ()) -> list[Any] | None:
        """``sql``'s rows, under the lock; None when the cache is off, or the statement failed (that turns it off:
        the file ``doing``, or "cannot be used" when it could not be opened)."""
        with self._lock:
            if self.problem is not None:
                return None
            try:
                return self._connect().execute(sql, args).fetchall()
            except (sqlite3.Error, OSError, _Foreign) as exc:
                self._disable(exc, doing if self._conn is not None else "cannot be used")
                return None

    def usable(self) -> bool:
        """Open the file now (``judgegraph eval`` does, to say up front when it
        cannot be used); False, after one warning, when it cannot."""
        self._execute("cannot be used", "SELECT 1")
        return self.problem is None

    def get(self, key: str) -> CachedAnswer | None:
        """The stored answer, or None: not stored, or the cache is off (a
        failure here turns it off and counts as a miss)."""
        rows = self._execute("could not be read", "SELECT value_json, reply, model, created FROM answers WHERE key = ?",
                             (key,))
        if rows is None:
            return None
        with self._lock:
            if not rows:
                self.misses += 1
                return None
            self.hits += 1
        return CachedAnswer(*rows[0])

    def put(self, key: str, value_json: str, *, reply: str | None, model: str = "", step: str = "") -> None:
        """Keep an answer; a failure turns the cache off, never loses the answer (the caller keeps it)."""
        done = self._execute("could not be written", "INSERT OR REPLACE INTO answers (key, value_json, reply, model,"
                             " step, created) VALUES (?, ?, ?, ?, ?, ?)", (key, value_json, reply, model, step, time.time()))
        if done is not None:
            with self._lock:
                self.stored += 1

    def forget(self, key: str) -> None:
        """Drop an answer (one that made a judge error); a failure turns the cache off."""
        self._execute("could not be written", "DELETE FROM answers WHERE key = ?", (key,))

    @contextlib.contextmanager
    def _checked(self, what: str) -> Iterator[sqlite3.Connection]:
        """The connection for ``info``/``clear``, under the lock; any failure
        opening or using it is a :class:`CacheFileError` (the file cannot be ``what``)."""
        with self._lock:
            try:
                yield self._connect()
            except _Foreign as exc:
                raise CacheFileError(self.path, str(exc), not_a_cache=True) from None
            except (sqlite3.Error, OSError) as exc:
                raise CacheFileError(self.path, f"cannot be {what}: {_describe(exc)}",
                                     corrupt=_is_corrupt(exc)) from None

    def info(self) -> CacheInfo:
        """Path, size, number of answers, and answers per model and per step;
        :class:`CacheFileError` when the file cannot be read."""
        if not self.path.exists():
            return {"path": str(self.path), "exists": False, "entries": 0, "bytes": 0, "models": {}, "steps": {}}
        with self._checked("read") as conn:
            entries = conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
            models = dict(conn.execute("SELECT model, COUNT(*) FROM answers GROUP BY model ORDER BY 2 DESC"))
            steps = dict(conn.execute("SELECT step, COUNT(*) FROM answers GROUP BY step ORDER BY 2 DESC"))
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        return {"path": str(self.path), "exists": True, "entries": entries, "bytes": size,
                "models": models, "steps": steps}

    def clear(self) -> int:
        """Remove every stored answer; how many there were.
        :class:`CacheFileError` when the file cannot be emptied (see :meth:`remove`)."""
        if not self.path.exists():
            return 0
        with self._checked("emptied") as conn:
            n = conn.execute("DELETE FROM answers").rowcount
            conn.execute("VACUUM")
        return int(n)

    def remove(self) -> list[Path]:
        """Delete the cache file and its journals (regular files only); the files removed."""
        self.close()
        removed = []
        for p in (self.path, *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm", "-journal"))):
            if p.is_file() and not p.is_symlink():
                p.unlink()
                removed.append(p)
        return removed

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


def _check_schema(conn: sqlite3.Connection) -> None:
    """An empty database, or one with judgegraph's ``answers`` table; anything
    else is another program's database, never written to."""
    tables = sorted(name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    if "answers" in tables:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(answers)")}
        if not _COLUMNS <= columns:
            raise _Foreign(f"another program's SQLite database (its 'answers' table has the columns"
                           f" {', '.join(sorted(columns))})")
    elif tables:
        raise _Foreign(f"another program's SQLite database (tables: {', '.join(tables[:5])})")


class JudgeCache:
    """Identical judge requests are made once per cache (a run); concurrent ones wait
    for the first; only successes are kept. An LRU of ``maxsize`` outcomes in
    memory, then ``disk`` (a :class:`DiskCache`) on a miss."""

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

    def forget(self, key: str) -> None:
        """Never replay ``key``'s answer again (it made a judge error): out of memory and off disk."""
        with self._lock:
            self._values.pop(key, None)
        if self.disk is not None:
            self.disk.forget(key)

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
