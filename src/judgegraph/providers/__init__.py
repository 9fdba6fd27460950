"""Judge model providers (docs/providers.md): a model string is ``provider:name`` (a bare name is OpenAI's); a
prefix in :data:`PROVIDERS` is built by its module's :class:`Provider`, any other goes to LangChain's
``init_chat_model``. A provider module is imported when a model names it, its SDK when a model is built.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import HumanMessage
    from pydantic import BaseModel

    from ..data.prompts import Prompt
    from ..judges.base import Endpoint
    from ..judges.cache_hints import SeenPrefixes
    from ..judges.scripted import ScriptedRequest
    from .prefixcache import CacheRule

__all__ = ["PROVIDERS", "ModelConfigError", "Provider", "cache_rule", "default_rule", "get", "of_model", "register",
           "resolve_model", "server_url", "split_model"]

#: Each built-in provider prefix and the module holding its :class:`Provider` (as ``provider``).
PROVIDERS: dict[str, str] = {
    "openai": "judgegraph.providers.openai",
    "anthropic": "judgegraph.providers.anthropic",
}
#: The provider of a model named without a prefix.
DEFAULT = "openai"
#: Key attributes of the other LangChain chat models (``init_chat_model``'s): taken out of what is kept too.
OTHER_KEY_ATTRIBUTES = ("api_key", "google_api_key", "mistral_api_key", "groq_api_key", "azure_ad_token")
#: The deadline of a request to a provider built from a string, seconds.
DEFAULT_TIMEOUT_S = 120.0


class ModelConfigError(ValueError):
    """A judge model that cannot be built as given (no key, an unknown provider at a base URL, a missing
    package); the message says what to give."""


class Provider:
    """One provider's knowledge; a module in :data:`PROVIDERS` subclasses it as ``provider``. Only
    :attr:`name` and :meth:`chat_model` are required: every other method's default is "nothing special"
    (no key variable, no cache hints, no known cache rule, no SDK errors)."""

    #: The prefix of its model strings (``openai`` in ``openai:gpt-4.1-mini``).
    name: str = ""
    #: Its name as a person writes it (``OpenAI``).
    title: str = ""
    #: The environment variable its client reads the key from.
    key_env: str | None = None
    #: An environment variable naming its server that its client reads; honoured without a key (a local server).
    url_env: str | None = None
    #: The attributes of its chat model that hold a key (redacted wherever they appear).
    key_attributes: tuple[str, ...] = ()
    #: Its SDK's module and the names of its exception classes by kind (``timeout``, ``connection``,
    #: ``invalid_output``: a reply that came back unusable), read by the judge's error rules.
    sdk: str | None = None
    errors: dict[str, tuple[str, ...]] = {}

    def chat_model(self, name: str, *, base_url: str | None, api_key: str | None, temperature: float | None,
                   timeout: float | None, max_retries: int, max_reply_bytes: int) -> BaseChatModel:
        """The chat model ``name`` (``timeout``: the deadline of a request; ``max_reply_bytes``: the largest
        reply read, where the client can cap it)."""
        raise NotImplementedError

    def embeddings(self, name: str, *, base_url: str | None, api_key: str | None, timeout: float | None,
                   max_reply_bytes: int) -> Any:
        """Its embeddings model ``name`` (a LangChain ``Embeddings``)."""
        raise ModelConfigError(f"embeddings '{self.name}:{name}': provider {self.name!r} has no embeddings built in;"
                               " pass an Embeddings object")

    def server_url(self, base_url: str | None) -> str | None:
        """The server a model talks to: ``base_url``, else :attr:`url_env` as its client reads it."""
        if base_url:
            return base_url
        return (os.environ.get(self.url_env, "").strip() or None) if self.url_env else None

    def api_key(self, given: str | None, base_url: str | None, missing: str) -> SecretStr:
        """``given``, else ``$key_env``, else a placeholder when ``base_url`` (a local server needs none);
        ``ModelConfigError(missing)`` when there is neither."""
        key = given or (os.environ.get(self.key_env) if self.key_env else None)
        if not key and not base_url:
            raise ModelConfigError(missing)
        return SecretStr(key or "not-needed")

    def owns(self, model: object) -> bool:
        """Whether the chat model object ``model`` is this provider's (checked without importing its package)."""
        return False

    def base_url_of(self, model: object) -> str | None:
        """The server ``model`` (one it :meth:`owns`) talks to."""
        return None

    def bounded(self, model: object) -> bool:
        """Whether ``model``'s requests end by the judge's deadline and its replies are capped (judgegraph's
        own HTTP clients, :mod:`judgegraph.judges.transport`)."""
        return False

    def endpoint(self, model: object, deadline: float | None, max_reply_bytes: int | None) -> Endpoint | None:
        """Where ``model`` is served, for what is sent beside the judge (embeddings, batches); None: nowhere known."""
        return None

    def structured(self, model: BaseChatModel, schema: type[BaseModel], method: str | None) -> Any:
        """What a structured request is sent through when the provider has a better way than
        ``with_structured_output`` (None: that)."""
        return None

    def prompt_message(self, prompt: Prompt, values: dict[str, str], rendered: str,
                       seen: SeenPrefixes | None) -> HumanMessage | None:
        """The judge's first message with this provider's cache hints (None: the prompt as one string)."""
        return None

    def cache_rule(self, name: str) -> CacheRule:
        """Its prompt cache's rule for model ``name`` (the dry run's estimate; docs/cost_cache.md)."""
        from .prefixcache import CacheRule

        return CacheRule(self.name, "unknown")

    def cache_counter(self, rule: CacheRule) -> Callable[[ScriptedRequest, int], int]:
        """For the dry run: the input tokens of each request (in order; with its messages' token count) its
        prompt cache would serve."""
        return lambda request, tokens: 0

    def error_types(self, kind: str) -> tuple[type[BaseException], ...]:
        """Its SDK's exception classes of ``kind`` (:attr:`errors`), once the SDK is imported (before, none of
        its errors can exist)."""
        sdk = sys.modules.get(self.sdk) if self.sdk else None
        found = (getattr(sdk, name, None) for name in self.errors.get(kind, ()))
        return tuple(t for t in found if isinstance(t, type) and issubclass(t, BaseException))


@cache
def get(prefix: str) -> Provider | None:
    """The provider of ``prefix`` (its module imported on first use), or None for a prefix not built in."""
    module = PROVIDERS.get(prefix)
    if module is None:
        return None
    found: Provider = importlib.import_module(module).provider
    return found


def register(prefix: str, module: str) -> None:
    """Adds (or replaces) the provider of ``prefix``: the ``provider`` of module ``module``, imported on first
    use (docs/providers.md)."""
    PROVIDERS[prefix] = module
    get.cache_clear()


def every() -> list[Provider]:
    return [p for p in map(get, PROVIDERS) if p is not None]


def split_model(spec: str) -> tuple[str, str]:
    """``"provider:name"`` → (provider, name); a bare name is :data:`DEFAULT`'s."""
    provider, _, name = spec.partition(":") if ":" in spec else (DEFAULT, "", spec)
    return provider, name


def of_model(model: object) -> Provider | None:
    """The provider whose chat model ``model`` is, or None (another LangChain chat model)."""
    return next((p for p in every() if p.owns(model)), None)


def server_url(model: object, base_url: str | None) -> str | None:
    """The server a judge built from ``model`` talks to: ``base_url``, else the server its provider's client
    reads from the environment (``$OPENAI_BASE_URL``; a local server needs no key). One rule for the command
    line, ``resolve_judge`` and the pytest plugin."""
    if base_url or not isinstance(model, str):
        return base_url or None
    found = get(split_model(model.strip())[0])
    return found.server_url(None) if found else None


def secrets(model: object) -> list[str]:
    """Every key ``model`` holds and every provider's key variable: what a redactor takes out."""
    found = [os.environ.get(p.key_env, "") for p in every() if p.key_env]
    for name in (*(a for p in every() for a in p.key_attributes), *OTHER_KEY_ATTRIBUTES):
        value = getattr(model, name, None)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if isinstance(value, str):
            found.append(value)
    return found


def error_types(kind: str) -> tuple[type[BaseException], ...]:
    """Every provider's exception classes of ``kind`` (:meth:`Provider.error_types`)."""
    return tuple(t for p in every() for t in p.error_types(kind))


def resolve_model(model: str | BaseChatModel, *, base_url: str | None = None, api_key: str | None = None,
                  temperature: float | None = 0.0, timeout: float | None = DEFAULT_TIMEOUT_S, max_retries: int = 0,
                  max_reply_bytes: int | None = None) -> BaseChatModel:
    """A chat model from an object (as it is) or a string: ``openai:gpt-4.1-mini``, ``gpt-4.1-mini``,
    ``anthropic:claude-…`` through their providers, any other ``provider:model`` through ``langchain``'s
    ``init_chat_model`` when installed. ``base_url``: the provider's server (an OpenAI-compatible one for
    ``openai:``); with one, a prefix no built-in provider serves is an error naming the closest one."""
    from langchain_core.language_models import BaseChatModel

    from ..judges.transport import DEFAULT_MAX_REPLY_BYTES

    if isinstance(model, BaseChatModel):
        return model
    if not isinstance(model, str) or not model.strip():
        raise ModelConfigError(f"model must be a chat model object or a string, got {model!r}")
    prefix, name = split_model(model)
    found = get(prefix)
    url = server_url(model, base_url)
    if found is None and url:
        close = difflib.get_close_matches(prefix, list(PROVIDERS), n=1)
        hint = f"did you mean '{close[0]}:{name}'? " if close else ""
        served = " or ".join(f"'{p}:NAME'" + (" (OpenAI-compatible)" if p == DEFAULT else "") for p in PROVIDERS)
        raise ModelConfigError(f"model {model!r}: a server at a base URL takes {served} models, not {prefix!r};"
                               f" {hint}a name holding ':' is written whole after the prefix ('{DEFAULT}:{model}')")
    if found is not None:
        return found.chat_model(name, base_url=url, api_key=api_key, temperature=temperature, timeout=timeout,
                                max_retries=max_retries, max_reply_bytes=max_reply_bytes or DEFAULT_MAX_REPLY_BYTES)
    try:
        from langchain.chat_models import init_chat_model  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise ModelConfigError(
            f"model {model!r}: only {', '.join(repr(p + ':') for p in PROVIDERS)} models are built in; install"
            f" 'langchain' and the provider's package for {prefix!r}, or pass a chat model object") from exc
    return init_chat_model(model, temperature=temperature)  # type: ignore[no-any-return, unused-ignore]


def cache_rule(model: str) -> CacheRule:
    """The prompt-cache rule of the provider of ``model`` (``provider:name``; a bare name is the default
    provider's, as the judge reads it: :func:`split_model`); an ``unknown`` rule for a provider not registered."""
    from .prefixcache import CacheRule

    prefix, name = split_model(model)
    found = get(prefix)
    return found.cache_rule(name) if found is not None else CacheRule(prefix, "unknown")


def default_rule() -> CacheRule:
    """The dry run's rule when it is given none: the default provider's."""
    return cache_rule("")
