"""One encoder per process (:class:`BatchingEncoder`): one worker thread embeds every waiting request's distinct texts
in one call, with a text → vector LRU and bounded BLAS threads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from .base import LangChainEmbedder, _is_local, unit_rows

__all__ = ["BatchingEncoder", "EncoderStats", "adrive", "drive", "encode_function"]

T = TypeVar("T")
#: A scoring generator: yields lists of texts, receives their (n, d) vectors, returns a result.
Steps = Generator[list[str], np.ndarray, T]


def drive(steps: Steps[T], encode: Callable[[list[str]], np.ndarray]) -> T:
    """Run a scoring generator with a sync ``encode``; exceptions from ``encode`` propagate."""
    try:
        texts = next(steps)
        while True:
            texts = steps.send(encode(texts))
    except StopIteration as stop:
        return stop.value


async def adrive(steps: Steps[T], aencode: Callable[[list[str]], Awaitable[np.ndarray]]) -> T:
    """Run a scoring generator with an async ``aencode`` (same generator as :func:`drive`)."""
    try:
        texts = next(steps)
        while True:
            texts = steps.send(await aencode(texts))
    except StopIteration as stop:
        return stop.value


def encode_function(embeddings: Any) -> Callable[[list[str]], np.ndarray]:
    """``texts -> (n, d) float32 unit rows`` for an object with ``encode`` (``MiniLMEmbeddings``,
    ``LangChainEmbedder``), a LangChain ``Embeddings`` or any :class:`~.base.Embedder`."""
    if callable(getattr(embeddings, "encode", None)) or callable(getattr(embeddings, "embed_documents", None)):
        return LangChainEmbedder(embeddings).encode
    return lambda texts: unit_rows(embeddings.embed(texts))  # any Embedder


@dataclass
class EncoderStats:
    """Counters since the encoder was made (or :meth:`BatchingEncoder.clear`)."""

    requests: int = 0  # encode/aencode calls
    texts: int = 0  # texts asked for, duplicates included
    cache_hits: int = 0  # texts answered from the LRU
    encoded: int = 0  # texts actually embedded
    batches: int = 0  # encode calls made by the worker
    max_batch: int = 0  # most texts embedded in one call
    errors: int = 0  # requests answered with an exception

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class _Request:
    texts: list[str]  # distinct texts not found in the LRU when submitted
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


class BatchingEncoder:
    """Micro-batching, caching front of ``encode`` (``list[str] -> (n, d)`` unit rows); ``blas_threads``
    None leaves BLAS alone (a remote API)."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray], *, max_batch: int = 256, max_wait_s: float = 0.002,
                 cache_size: int = 8192, blas_threads: int | None = 1, encode_threads: int | None = None,
                 idle_s: float = 5.0, name: str = "encoder") -> None:
        if encode_threads is None:
            encode_threads = min(2, os.cpu_count() or 1)
        for bad, rule in ((max_batch < 1, "max_batch must be >= 1"), (cache_size < 0, "cache_size must be >= 0"),
                          (max_wait_s < 0 or idle_s <= 0, "max_wait_s must be >= 0 and idle_s > 0"),
                          (blas_threads is not None and blas_threads < 1, "blas_threads must be >= 1 or None"),
                          (encode_threads < 1, "encode_threads must be >= 1")):
            if bad:
                raise ValueError(rule)
        self._encode = encode
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.cache_size = cache_size
        self.blas_threads = blas_threads
        self.encode_threads = encode_threads
        self.idle_s = idle_s
        self.name = name
        self.stats = EncoderStats()
        self._reset_process_state()

    @classmethod
    def for_embeddings(cls, embeddings: Any, **kwargs: Any) -> BatchingEncoder:
        """An encoder over ``embeddings`` (a LangChain ``Embeddings`` or an :class:`~.base.Embedder`); BLAS
        threads are limited only for judgegraph's numpy MiniLM unless ``blas_threads`` is given."""
        if "blas_threads" not in kwargs and not (_is_local(embeddings) or getattr(embeddings, "local", False)):
            kwargs["blas_threads"] = None
        kwargs.setdefault("name", type(getattr(embeddings, "embeddings", embeddings)).__name__)
        return cls(encode_function(embeddings), **kwargs)

    def _reset_process_state(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._worker: threading.Thread | None = None
        self._threadpools: Any = None
        self._helpers: concurrent.futures.ThreadPoolExecutor | None = None  # encode_threads - 1 helpers

    def _check_process(self) -> None:
        if self._pid != os.getpid():  # a forked child: the parent's worker and locks are not ours
            self._reset_process_state()

    def _lookup(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors of ``texts`` (marked recently used); the caller holds the lock."""
        found = {text: self._cache[text] for text in texts if text in self._cache}
        for text in found:
            self._cache.move_to_end(text)
        return found

    def _remember(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        if not self.cache_size:
            return
        with self._lock:
            for text, vec in zip(texts, vectors):
                vec = np.array(vec, dtype=np.float32)  # own copy, not a view of the batch
                vec.flags.writeable = False
                self._cache[text] = vec
                self._cache.move_to_end(text)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def clear(self) -> None:
        """Forget every cached vector and reset :attr:`stats`."""
        self._check_process()
        with self._lock:
            self._cache.clear()
            self.stats = EncoderStats()

    def __len__(self) -> int:
        return len(self._cache)

    def _submit(self, texts: list[str]) -> tuple[dict[str, np.ndarray], _Request | None]:
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of strings")
        texts = [str(t) for t in texts]
        self._check_process()
        with self._lock:
            self.stats.requests += 1
            self.stats.texts += len(texts)
            found = self._lookup(texts)
            missing = list(dict.fromkeys(t for t in texts if t not in found))
            self.stats.cache_hits += sum(1 for t in texts if t in found)
            if not missing:
                return found, None
            request = _Request(missing)
            self._queue.put(request)
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name=f"judgegraph-{self.name}-batcher", daemon=True)
                self._worker.start()
        return found, request

    @staticmethod
    def _assemble(texts: list[str], found: dict[str, np.ndarray], computed: dict[str, np.ndarray] | None) -> np.ndarray:
        found = {**found, **(computed or {})}
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[str(t)] for t in texts]).astype(np.float32, copy=False)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts`` (``(n, d)`` float32, input order), waiting for the batch they join."""
        found, request = self._submit(texts)
        return self._assemble(texts, found, request.future.result() if request else None)

    async def aencode(self, texts: list[str]) -> np.ndarray:
        """:meth:`encode` for async callers: awaits the same future, never blocks the event loop."""
        found, request = self._submit(texts)
        computed = await asyncio.wrap_future(request.future) if request else None
        return self._assemble(texts, found, computed)

    # LangChain's names, so the encoder can stand in for an Embeddings object
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.encode(texts).tolist()

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return (await self.aencode(texts)).tolist()

    def _run(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:  # stop only if nothing arrived meanwhile (submit holds the lock to enqueue)
                    if self._queue.empty():
                        self._worker = None
                        return
                continue
            batch = [first]
            size = len(first.texts)
            deadline = time.monotonic() + self.max_wait_s
            while size < self.max_batch:
                try:  # a timeout of 0 takes what is queued without waiting
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                batch.append(item)
                size += len(item.texts)
            try:
                self._answer(batch)
            except Exception as exc:  # noqa: BLE001 - never leave a caller waiting
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(exc)

    def _answer(self, batch: list[_Request]) -> None:
        wanted = list(dict.fromkeys(t for r in batch for t in r.texts))
        with self._lock:
            known = self._lookup(wanted)  # embedded by an earlier batch since submission
            self.stats.cache_hits += len(known)
        todo = [t for t in wanted if t not in known]
        try:
            vectors = self._encode_checked(todo) if todo else np.zeros((0, 0), dtype=np.float32)
        except Exception as exc:  # noqa: BLE001 - find the request(s) at fault, answer the rest
            if len(batch) == 1:
                with self._lock:
                    self.stats.errors += 1
                batch[0].future.set_exception(exc)
            else:
                for request in batch:
                    self._answer([request])
            return
        computed = dict(zip(todo, vectors))
        self._remember(todo, vectors)
        with self._lock:
            self.stats.batches += bool(todo)
            self.stats.encoded += len(todo)
            self.stats.max_batch = max(self.stats.max_batch, len(todo))
        for request in batch:
            request.future.set_result({t: computed[t] if t in computed else known[t] for t in request.texts})

    def _encode_checked(self, texts: list[str]) -> np.ndarray:
        parts = self._split_indices(texts)
        with self._blas_limit():
            if len(parts) == 1:
                return self._encode_part(texts)
            if self._helpers is None:  # each part single-threaded in its own thread: numpy releases the GIL
                self._helpers = concurrent.futures.ThreadPoolExecutor(
                    self.encode_threads - 1, thread_name_prefix=f"judgegraph-{self.name}-encode")
            chunks = [[texts[i] for i in part] for part in parts]
            futures = [self._helpers.submit(self._encode_part, chunk) for chunk in chunks[1:]]
            try:
                results = [self._encode_part(chunks[0]), *(f.result() for f in futures)]
            finally:
                concurrent.futures.wait(futures)  # no part outlives the BLAS limit
        vectors = np.empty((len(texts), results[0].shape[1]), dtype=np.float32)
        for part, vecs in zip(parts, results):
            vectors[part] = vecs
        return vectors

    def _encode_part(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self._encode(texts), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"the encoder returned shape {vectors.shape} for {len(texts)} texts")
        return vectors

    #: fewer texts than this per thread are not worth splitting a batch for
    MIN_TEXTS_PER_THREAD = 16

    def _split_indices(self, texts: list[str]) -> list[list[int]]:
        """Indices of ``texts`` in ``encode_threads`` parts of similar text lengths (little padding)."""
        n = min(self.encode_threads, max(1, len(texts) // self.MIN_TEXTS_PER_THREAD))
        if n == 1:
            return [list(range(len(texts)))]
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        size = -(-len(order) // n)
        return [order[k:k + size] for k in range(0, len(order), size)]

    def _blas_limit(self) -> Any:
        """A context limiting BLAS threads during one batch (process-wide while it lasts, restored after)."""
        if self.blas_threads is None:
            return contextlib.nullcontext()
        if self._threadpools is None:
            from threadpoolctl import ThreadpoolController

            self._threadpools = ThreadpoolController()  # made in the worker: numpy's BLAS is loaded by now
        return self._threadpools.limit(limits=self.blas_threads, user_api="blas")

    def __repr__(self) -> str:
        return (f"BatchingEncoder(name={self.name!r}, max_batch={self.max_batch}, max_wait_s={self.max_wait_s}, "
                f"cache_size={self.cache_size}, blas_threads={self.blas_threads}, cached={len(self._cache)})")
