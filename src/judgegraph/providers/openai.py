"""OpenAI and OpenAI-compatible servers (``openai:NAME``, or a bare name): ``ChatOpenAI`` on judgegraph's own HTTP
clients (:mod:`judgegraph.judges.transport`), the key in ``$OPENAI_API_KEY``, the server in ``--base-url`` or
``$OPENAI_BASE_URL`` (no key needed), a strict ``response_format``, the prefix-cache rule and the SDK's errors.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from . import Provider
from .prefixcache import MIN_PREFIX_TOKENS, CacheRule, PrefixCache, chat_parts
from .prefixcache import request_tokens as tokens

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from pydantic import BaseModel

    from ..judges.base import Endpoint
    from ..judges.scripted import ScriptedRequest

#: Where a key or a server is missing: every way to give a server.
WAYS = ("the URL of an OpenAI-compatible server ($OPENAI_BASE_URL; base_url= in Python, --base-url on the command"
        " line, --judgegraph-base-url with pytest)")


class OpenAI(Provider):
    name = "openai"
    title = "OpenAI"
    key_env = "OPENAI_API_KEY"
    url_env = "OPENAI_BASE_URL"
    key_attributes = ("openai_api_key",)
    sdk = "openai"
    errors = {"timeout": ("APITimeoutError",), "connection": ("APIConnectionError",),
              "invalid_output": ("LengthFinishReasonError", "ContentFilterFinishReasonError")}  # cut off, filtered

    def chat_model(self, name: str, *, base_url: str | None, api_key: str | None, temperature: float | None,
                   timeout: float | None, max_retries: int, max_reply_bytes: int) -> BaseChatModel:
        from langchain_openai import ChatOpenAI

        from ..judges.transport import openai_http_clients

        key = self.api_key(api_key, base_url, f"model 'openai:{name}' needs OPENAI_API_KEY, or {WAYS};"
                           " leave the model out to use the offline judge")
        sync_client, async_client = openai_http_clients(base_url, timeout=timeout, max_reply_bytes=max_reply_bytes)
        optional: dict[str, Any] = {"temperature": temperature} if temperature is not None else {}
        return ChatOpenAI(model=name, api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries,
                          http_client=sync_client, http_async_client=async_client, **optional)

    def embeddings(self, name: str, *, base_url: str | None, api_key: str | None, timeout: float | None,
                   max_reply_bytes: int) -> Any:
        from langchain_openai import OpenAIEmbeddings

        from ..judges.transport import openai_http_clients

        key = self.api_key(api_key, base_url, f"embeddings 'openai:{name}' need OPENAI_API_KEY (or"
                           " embeddings_base_url for an OpenAI-compatible server); leave embeddings out to use the"
                           " offline all-MiniLM-L6-v2")
        sync_client, async_client = openai_http_clients(base_url, timeout=timeout, max_reply_bytes=max_reply_bytes)
        return OpenAIEmbeddings(model=name, base_url=base_url, api_key=key, check_embedding_ctx_length=False,
                                max_retries=3, timeout=timeout, http_client=sync_client, http_async_client=async_client)

    def owns(self, model: object) -> bool:
        """An OpenAI-compatible chat model (``ChatOpenAI``, ``AzureChatOpenAI``, ...)."""
        return hasattr(model, "openai_api_base") or getattr(model, "openai_api_key", None) is not None

    def base_url_of(self, model: object) -> str | None:
        return getattr(model, "openai_api_base", None)

    def bounded(self, model: object) -> bool:
        return hasattr(model, "openai_api_base")

    def endpoint(self, model: object, deadline: float | None, max_reply_bytes: int | None) -> Endpoint | None:
        from ..judges.base import Endpoint

        key = getattr(model, "openai_api_key", None)
        return Endpoint(self.base_url_of(model), key if isinstance(key, SecretStr) else None, deadline,
                        max_reply_bytes)

    def structured(self, model: BaseChatModel, schema: type[BaseModel], method: str | None) -> Any:
        """For ``ChatOpenAI`` with ``json_schema``: the model bound once to the strict ``response_format`` (the
        same request on the wire as ``with_structured_output``, without its per-call cost, docs/judges.md)."""
        if method not in (None, "json_schema") or not is_chat_openai(model):
            return None
        extra = dict(getattr(model, "extra_body", None) or {})
        return model.bind(extra_body={**extra, "response_format": json.loads(_response_format(schema))})

    def cache_rule(self, name: str) -> CacheRule:
        return CacheRule("openai", "prefix", MIN_PREFIX_TOKENS, title=self.title)

    def cache_counter(self, rule: CacheRule) -> Callable[[ScriptedRequest, int], int]:
        """The automatic prefix rule over the requests as sent: the strict schema, then each message (at most
        the messages' own tokens)."""
        cache = PrefixCache(rule.min_tokens)

        def served(request: ScriptedRequest, tokens: int) -> int:
            # A request shorter than the minimum is served nothing, and remembering it changes nothing served
            # later: a later prefix long enough to be served was sent whole by a request as long (which
            # remembered every boundary of it). So its parts (``tokens`` less 3 a message and 3 for the reply,
            # plus the schema's) are not encoded again.
            if tokens - 3 - 3 * len(request.messages) + _schema_tokens(request.schema) < rule.min_tokens:
                return 0
            return min(tokens, cache.serve(request_tokens(request)))

        return served


provider = OpenAI()


def is_chat_openai(model: object) -> bool:
    """A ``langchain_openai.ChatOpenAI`` itself (checked without importing the package): the model whose
    structured requests go out as a strict ``response_format`` (and in batches)."""
    cls = getattr(sys.modules.get("langchain_openai"), "ChatOpenAI", None)
    return cls is not None and type(model) is cls


def strict_json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The schema in OpenAI's strict form, by the SDK's own function."""
    from openai.lib._pydantic import to_strict_json_schema

    return to_strict_json_schema(schema)


@lru_cache(maxsize=256)
def _response_format(schema: type[BaseModel]) -> str:
    """``schema`` as the LLM judge sends it (a strict ``response_format``), as JSON text."""
    shape = {"type": "json_schema",
             "json_schema": {"name": schema.__name__, "schema": strict_json_schema(schema), "strict": True}}
    return json.dumps(shape, sort_keys=True)


def _schema_tokens(schema: Any) -> int:
    """The tokens of ``schema`` as :func:`request_tokens` sends it."""
    from ..judges.tokens import count_tokens

    if isinstance(schema, type):
        return _format_tokens(schema)
    return count_tokens(json.dumps(schema, sort_keys=True)) if schema else 0


@lru_cache(maxsize=256)
def _format_tokens(schema: type[BaseModel]) -> int:
    from ..judges.tokens import count_tokens

    return count_tokens(_response_format(schema))


def request_tokens(request: ScriptedRequest) -> list[int]:
    """A recorded request as the prefix cache sees it (:func:`judgegraph.providers.prefixcache.chat_parts`)."""
    from ..judges.tokens import ROLES

    schema = request.schema
    if isinstance(schema, type):
        text: str | None = _response_format(schema)
    else:  # a tool's schema, as given
        text = json.dumps(schema, sort_keys=True) if schema else None
    return tokens(chat_parts(text, [(ROLES.get(m.type, m.type), m.text) for m in request.messages]))
