"""Sentence embeddings for judgegraph's offline (no-LLM) judge.

``MiniLMEmbeddings`` runs all-MiniLM-L6-v2 with numpy; ``BatchingEncoder`` is the
one-per-process front that micro-batches concurrent requests, embeds each
distinct text once and bounds BLAS threads. Nothing is loaded at import time.
"""

from judgegraph.embeddings.batching import BatchingEncoder, EncoderStats, get_default_encoder
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

__all__ = [
    "EMBEDDING_DIM",
    "MODEL_NAME",
    "MODEL_PACKAGE",
    "MODEL_PACKAGE_VERSION",
    "MODEL_SHA256",
    "BatchingEncoder",
    "EncoderStats",
    "MiniLMEmbeddings",
    "OfflineModelUnavailable",
    "get_default_embeddings",
    "get_default_encoder",
    "locate_model_dir",
    "model_cache_dir",
]
