"""The one embeddings runner, :class:`EmbeddingRunner`, that every embeddings call goes through."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..judges.limiter import CallLimiter
from ..judges.redact import Redactor
from .base import Embedder, as_embedder, check_vectors, process_wide, unit_rows
from .batching import BatchingEncoder

__all__ = ["EmbeddingRunner", "get_default_encoder", "get_default_runner"]


class EmbeddingRunner:
    """Runs the calls of one :class:`~.base.Embedder` (or LangChain ``Embeddings``): at most ``max_concurrency`` in
    flight, one vector per text checked; ``batching=True`` puts a :class:`BatchingEncoder` (``batch_options``) before it."""

    def __init__(self, embeddings: Any, *, max_concurrency: int = 16, batching: bool = False,
                 redact: Redactor | None = None, **batch_options: Any) -> None:
        self.embedder: Embedder = as_embedder(embeddings)
        self.embeddings = getattr(self.embedder, "embeddings", self.embedder)
        self.name = self.embedder.name
        self.limiter = CallLimiter(max_concurrency)
        self.redact = redact or Redactor.for_model(self.embeddings)
        self.batcher = BatchingEncoder.for_embeddings(self.embedder, **batch_options) if batching else None

    def embed(self, texts: list[str]) -> list[list[float]]:
        if self.batcher is not None:
            return check_vectors(self.batcher.encode(texts), len(texts))
        with self.limiter.slot():
            return check_vectors(self.embedder.embed(texts), len(texts))

    async def aembed(self, texts: list[str]) -> list[list[float]]:
        if self.batcher is not None:
            return check_vectors(await self.batcher.aencode(texts), len(texts))
        async with self.limiter.aslot():
            return check_vectors(await self.embedder.aembed(texts), len(texts))

    def encode(self, texts: list[str]) -> np.ndarray:
        """``(n, d)`` float32 unit rows of ``texts``."""
        if self.batcher is not None:
            return self.batcher.encode(texts)
        return unit_rows(self.embed(texts))

    async def aencode(self, texts: list[str]) -> np.ndarray:
        if self.batcher is not None:
            return await self.batcher.aencode(texts)
        return unit_rows(await self.aembed(texts))

    def describe(self, exc: BaseException) -> str:
        """``Type: message`` of an embeddings error, as the LLM judge describes its own, credentials taken out
        (an embeddings server that echoes the request's headers leaves no key behind)."""
        from ..judges.llm import describe_request_error

        if type(exc).__module__.startswith("judgegraph."):  # our own errors (a model not found) are read whole:
            return f"{type(exc).__name__}: {self.redact(' '.join(str(exc).split()))}"  # they end with the fix
        return describe_request_error(exc, None, self.redact)

    def __repr__(self) -> str:
        return f"EmbeddingRunner({self.name}, batching={self.batcher is not None})"


@process_wide
def get_default_runner() -> EmbeddingRunner:
    """The process-wide batching runner over the shared MiniLM (nothing loads before the first request)."""
    from .minilm import get_default_embeddings

    return EmbeddingRunner(get_default_embeddings(), batching=True, name="minilm")


def get_default_encoder() -> BatchingEncoder:
    """The process-wide :class:`BatchingEncoder` over the shared MiniLM: the batching front of
    :func:`~judgegraph.embeddings.runner.get_default_runner` (nothing loads before the first request)."""
    batcher = get_default_runner().batcher
    assert batcher is not None
    return batcher
