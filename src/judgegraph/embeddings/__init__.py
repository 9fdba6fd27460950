"""Embeddings: the interface (``Embedder``), the runner (``EmbeddingRunner``, batching with ``BatchingEncoder``),
``resolve_embeddings`` and ``MiniLMEmbeddings`` (all-MiniLM-L6-v2 with numpy). Nothing loads at import time."""

from judgegraph.embeddings.base import Embedder, LangChainEmbedder, as_embedder, cosines, embeddings_name
from judgegraph.embeddings.batching import BatchingEncoder, EncoderStats
from judgegraph.embeddings.minilm import (
    EMBEDDING_DIM,
    MODEL_NAME,
    MODEL_PACKAGE,
    MODEL_PACKAGE_VERSION,
    MODEL_SHA256,
    MiniLMEmbeddings,
    OfflineModelUnavailable,
    get_default_embeddings,
    locate_model_dir,
    model_cache_dir,
)
from judgegraph.embeddings.resolve import resolve_embeddings
from judgegraph.embeddings.runner import EmbeddingRunner, get_default_encoder, get_default_runner

__all__ = ["EMBEDDING_DIM", "MODEL_NAME", "MODEL_PACKAGE", "MODEL_PACKAGE_VERSION", "MODEL_SHA256", "BatchingEncoder",
           "Embedder", "EmbeddingRunner", "EncoderStats", "LangChainEmbedder", "MiniLMEmbeddings",
           "OfflineModelUnavailable", "as_embedder", "cosines", "embeddings_name", "get_default_embeddings",
           "get_default_encoder", "get_default_runner", "locate_model_dir", "model_cache_dir", "resolve_embeddings"]
