"""Sentence embeddings for judgegraph's offline (no-LLM) judge.

``MiniLMEmbeddings`` runs all-MiniLM-L6-v2 with numpy; nothing is loaded at import time.
"""

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
    "MiniLMEmbeddings",
    "OfflineModelUnavailable",
    "get_default_embeddings",
    "locate_model_dir",
    "model_cache_dir",
]
