"""The one embeddings interface, :class:`Embedder`, that every embeddings call goes
through; :func:`as_embedder` adapts a LangChain ``Embeddings``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

__all__ = ["Embedder", "LangChainEmbedder", "as_embedder", "check_vectors", "cosines", "embeddings_name", "unit_rows"]

T = TypeVar("T")


def process_wide(make: Callable[[], T]) -> Callable[[], T]:
    """``make`` as a getter of one object per process: made on the first call, once even when threads race."""
    lock = threading.Lock()
    made: list[T] = []

    @functools.wraps(make)
    def get() -> T:
        if not made:
            with lock:
                if not made:
                    made.append(make())
        return made[0]

    return get


@runtime_checkable
class Embedder(Protocol):
    """Texts in, one vector per text out (in order), sync and async."""

    name: str

    def embed(self, texts: list[str]) -> list[list[float]]: ...

    async def aembed(self, texts: list[str]) -> list[list[float]]: ...


def embeddings_name(embeddings: Any) -> str:
    """``Kind:model`` (``OpenAIEmbeddings:text-embedding-3-small``), or the kind alone."""
    name = getattr(embeddings, "name", None)
    if isinstance(embeddings, Embedder) and isinstance(name, str):
        return name
    model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
    kind = type(embeddings).__name__
    return f"{kind}:{model}" if isinstance(model, str) and model else kind


def _is_local(embeddings: Any) -> bool:
    """judgegraph's numpy all-MiniLM-L6-v2: computed in this process."""
    return any(c.__name__ == "MiniLMEmbeddings" for c in type(embeddings).__mro__)


class LangChainEmbedder:
    """An :class:`Embedder` over a LangChain ``Embeddings`` (or an ``encode(texts)`` object); ``aembed``
    never blocks the event loop. A local model runs one ``embed`` at a time (its BLAS threads would
    fight); :meth:`encode` is the unlocked path for callers that bound their threads."""

    def __init__(self, embeddings: Any) -> None:
        from langchain_core.embeddings import Embeddings

        if not any(callable(getattr(embeddings, attr, None)) for attr in ("embed_documents", "encode")):
            raise TypeError(f"embeddings must be a LangChain Embeddings or a string, got {type(embeddings).__name__}")
        self.embeddings = embeddings
        self.name = embeddings_name(embeddings)
        impl = getattr(type(embeddings), "aembed_documents", None)
        self.native_async = impl is not None and impl is not Embeddings.aembed_documents
        self.local = _is_local(embeddings)
        self._lock: AbstractContextManager[Any] = threading.Lock() if self.local else contextlib.nullcontext()

    def embed(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            if callable(getattr(self.embeddings, "embed_documents", None)):
                return self.embeddings.embed_documents(texts)
            return self.encode(texts).tolist()

    async def aembed(self, texts: list[str]) -> list[list[float]]:
        if self.native_async:
            return await self.embeddings.aembed_documents(texts)
        return await asyncio.to_thread(self.embed, texts)

    def encode(self, texts: list[str]) -> np.ndarray:
        """``(n, d)`` float32 unit rows: the model's own ``encode`` if any, else ``embed_documents`` normalised."""
        enc = getattr(self.embeddings, "encode", None)
        if callable(enc):
            return np.asarray(enc(texts), dtype=np.float32)
        return unit_rows(self.embeddings.embed_documents(texts))

    def __repr__(self) -> str:
        return f"LangChainEmbedder({self.name})"


def as_embedder(embeddings: Any) -> Embedder:
    """``embeddings`` as an :class:`Embedder`: used as it is when it already is one."""
    if isinstance(embeddings, Embedder) and not callable(getattr(embeddings, "embed_documents", None)):
        return embeddings
    return LangChainEmbedder(embeddings)


def unit_rows(vectors: Any) -> np.ndarray:
    """``vectors`` as ``(n, d)`` float32 rows scaled to unit length (a zero row stays zero)."""
    arr = np.asarray(vectors, dtype=np.float32)
    return arr / np.maximum(np.linalg.norm(arr, axis=1, keepdims=True), np.float32(1e-12))


def check_vectors(vectors: Any, n: int) -> list[list[float]]:
    """``vectors`` as lists of floats; a ``ValueError`` unless there is one per text."""
    vectors = [list(map(float, v)) for v in vectors]
    if len(vectors) != n:
        raise ValueError(f"the embeddings returned {len(vectors)} vectors for {n} texts")
    return vectors


def cosines(vectors: list[list[float]]) -> list[float]:
    """cosine(vectors[i], vectors[0]) for i >= 1."""
    arr = np.asarray(vectors, dtype="float64")
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError("the embeddings returned no usable vectors")
    norms = np.linalg.norm(arr, axis=1)
    if not np.all(np.isfinite(arr)) or np.any(norms == 0):
        raise ValueError("the embeddings returned a zero or non-finite vector")
    unit = arr / norms[:, None]
    return [float(x) for x in unit[1:] @ unit[0]]
