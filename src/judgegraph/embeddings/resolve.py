"""Embeddings from a setting: an object, a model string, or nothing (the offline all-MiniLM-L6-v2)."""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from ..judges.transport import DEFAULT_MAX_REPLY_BYTES
from ..providers import DEFAULT_TIMEOUT_S

__all__ = ["OFFLINE_NAMES", "resolve_embeddings"]

#: Strings that mean judgegraph's own offline model.
OFFLINE_NAMES = frozenset({"minilm", "offline", "all-minilm-l6-v2"})


def resolve_embeddings(embeddings: Any = None, *, base_url: str | None = None,
                       api_key: str | SecretStr | None = None, timeout: float | None = DEFAULT_TIMEOUT_S,
                       max_reply_bytes: int | None = None) -> Any:
    """A LangChain ``Embeddings`` from an object (as it is) or a string (docs/response_relevancy.md): None or
    ``"minilm"`` for all-MiniLM-L6-v2, a built-in provider's through its client, else ``init_embeddings``."""
    if embeddings is None:
        from .minilm import get_default_embeddings

        return get_default_embeddings()
    if not isinstance(embeddings, str):
        if not callable(getattr(embeddings, "embed_documents", None)):
            raise TypeError(f"embeddings must be a LangChain Embeddings or a string, got {type(embeddings).__name__}")
        return embeddings
    spec = embeddings.strip()
    if spec.lower() in OFFLINE_NAMES:
        return resolve_embeddings(None)
    from ..providers import DEFAULT, ModelConfigError, get, split_model

    prefix, name = split_model(spec)
    if not name:
        raise ValueError(f"embeddings {embeddings!r}: give a model name, e.g. 'openai:text-embedding-3-small'")
    # a base URL is a server of the default provider's kind whatever the prefix (as embeddings_base_url documents)
    found = get(DEFAULT if base_url else prefix)
    if found is not None:
        given = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        return found.embeddings(name, base_url=base_url, api_key=given, timeout=timeout,
                                max_reply_bytes=max_reply_bytes or DEFAULT_MAX_REPLY_BYTES)
    try:
        from langchain.embeddings import init_embeddings
    except ImportError as exc:
        raise ModelConfigError(
            f"embeddings {embeddings!r}: only '{DEFAULT}:' embeddings are built in; install 'langchain' and the"
            f" provider's package for {prefix!r}, or pass an Embeddings object"
        ) from exc
    return init_embeddings(spec)
