"""Anthropic (``anthropic:NAME``): ``ChatAnthropic`` (``pip install 'judgegraph[anthropic]'``, imported when a model
is built), the key in ``$ANTHROPIC_API_KEY``, a server at ``--base-url`` (no key needed), the ``cache_control`` marks
on a prompt's stable part and the cache rule that reads them (docs/cost_cache.md), the SDK's errors.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import ModelConfigError, Provider
from .prefixcache import CacheRule, request_tokens

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import HumanMessage

    from ..data.prompts import Prompt
    from ..judges.cache_hints import SeenPrefixes
    from ..judges.scripted import ScriptedRequest

#: The cache hint Anthropic reads on a content block: cache the prefix up to and including it (5 minutes).
EPHEMERAL = {"type": "ephemeral"}


class Anthropic(Provider):
    name = "anthropic"
    title = "Anthropic"
    key_env = "ANTHROPIC_API_KEY"
    key_attributes = ("anthropic_api_key",)
    sdk = "anthropic"
    errors = {"timeout": ("APITimeoutError",), "connection": ("APIConnectionError",)}

    def chat_model(self, name: str, *, base_url: str | None, api_key: str | None, temperature: float | None,
                   timeout: float | None, max_retries: int, max_reply_bytes: int) -> BaseChatModel:
        """``ChatAnthropic`` for Claude model ``name``. ``timeout`` is the Anthropic SDK's own (per read, not a
        whole-request deadline), and its replies are not size-capped: judgegraph's transport clients are built
        on the openai SDK's HTTP library."""
        try:
            from langchain_anthropic import ChatAnthropic
        except ImportError as exc:
            raise ModelConfigError(f"model 'anthropic:{name}' needs langchain-anthropic: pip install"
                                   " 'judgegraph[anthropic]' (or pass a chat model object)") from exc
        key = self.api_key(api_key, base_url, f"model 'anthropic:{name}' needs ANTHROPIC_API_KEY (or --base-url for"
                           " an Anthropic-compatible server); leave the model out to use the offline judge")
        kwargs: dict[str, Any] = {"model": name, "api_key": key, "max_retries": max_retries, "timeout": timeout}
        if base_url:
            kwargs["base_url"] = base_url
        if temperature is not None:
            kwargs["temperature"] = temperature
        return ChatAnthropic(**kwargs)

    def owns(self, model: object) -> bool:
        """A ``ChatAnthropic`` (or a subclass), or a stand-in for one that says so (``marks_cache_control``: the
        dry run's recorder of an ``anthropic:`` model, which must be sent what ChatAnthropic would be sent)."""
        if getattr(model, "marks_cache_control", False) is True:
            return True
        cls = getattr(sys.modules.get("langchain_anthropic"), "ChatAnthropic", None)
        return isinstance(cls, type) and isinstance(model, cls)

    def base_url_of(self, model: object) -> str | None:
        return getattr(model, "anthropic_api_url", None)

    def prompt_message(self, prompt: Prompt, values: dict[str, str], rendered: str,
                       seen: SeenPrefixes | None) -> HumanMessage | None:
        """The stable part and the part that changes as two text blocks, the stable one marked for Anthropic's
        cache (when ``seen`` is given, only once it was sent before: a cache write costs 1.25 × the input
        price, so a prefix no other call sends is never written); None for a template with no boundary."""
        from langchain_core.messages import HumanMessage

        from ..judges.cache_hints import split_rendered

        parts = split_rendered(prompt, values, rendered)
        if parts is None:
            return None
        stable, changing = parts
        block: dict[str, object] = {"type": "text", "text": stable}
        if seen is None or seen.sent_before(stable):
            block["cache_control"] = dict(EPHEMERAL)
        return HumanMessage([block, {"type": "text", "text": changing}])

    def cache_rule(self, name: str) -> CacheRule:
        least = min_tokens(name)
        return CacheRule("anthropic", "marked", least or max(MIN_TOKENS.values()), least is not None,
                         title=self.title)

    def cache_counter(self, rule: CacheRule) -> Callable[[ScriptedRequest, int], int]:
        """Reads of the marked prefix, over the Messages API bodies a ChatAnthropic judge would send."""
        cache = MarkedCache(rule.min_tokens)
        return lambda request, tokens: cache.serve(*marked_parts(request_body(request)))[0]


provider = Anthropic()


def _tool(schema: Any) -> dict[str, Any]:
    """``schema`` as ChatAnthropic sends it (a tool: name, description, input_schema): langchain-anthropic's
    own conversion when installed, else the same fields from LangChain's OpenAI form."""
    if isinstance(schema, dict) and "input_schema" in schema:
        return schema
    try:
        from langchain_anthropic.chat_models import convert_to_anthropic_tool
    except ImportError:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        fn = convert_to_openai_tool(schema)["function"]
        return {"name": fn["name"], "description": fn.get("description", ""), "input_schema": fn.get("parameters", {})}
    return dict(convert_to_anthropic_tool(schema))


def request_body(request: ScriptedRequest) -> dict[str, Any]:
    """The Messages API body a ChatAnthropic judge would send for a recorded ``request`` (what its cache rule
    reads): the schema as its tool, then the messages with their blocks and ``cache_control`` marks as the
    judge made them."""
    from ..judges.tokens import ROLES

    tools = [_tool(request.schema)] if request.schema is not None else []
    messages = [{"role": ROLES.get(m.type, m.type), "content": m.content} for m in request.messages]
    return {"tools": tools, "messages": messages}


# --------------------------------------------------------------------------- the cache_control rule

#: The shortest prefix Anthropic caches, in tokens, by Claude model (family, version): Anthropic's prompt caching
#: documentation, "Cache limitations" (platform.claude.com/docs/en/build-with-claude/prompt-caching, read on
#: 2026-11-26 in a mirror; the same table is at docs.orq.ai/docs/ai-gateway/prompt-caching; Opus 3 from the page's
#: earlier text). "Shorter prompts cannot be cached, even if marked with cache_control."
MIN_TOKENS: dict[tuple[str, str], int] = {
    ("opus", "4.6"): 4096, ("opus", "4.5"): 4096, ("haiku", "4.5"): 4096,
    ("sonnet", "4.6"): 2048, ("haiku", "3.5"): 2048, ("haiku", "3"): 2048,
    ("sonnet", "4.5"): 1024, ("opus", "4.1"): 1024, ("opus", "4"): 1024, ("sonnet", "4"): 1024,
    ("sonnet", "3.7"): 1024, ("opus", "3"): 1024,
}
_VERSION_PART = re.compile(r"\d{1,2}")  # 8-digit snapshot dates (20250929) are not version numbers


def claude_family(model: str) -> tuple[str, str] | None:
    """``(family, version)`` of a Claude model name, ``claude-sonnet-4-5-20250929`` or ``claude-3-5-haiku-latest``
    alike: ``("sonnet", "4.5")``, ``("haiku", "3.5")``; None when the name names no family."""
    parts = model.lower().removeprefix("anthropic:").split("-")
    family = next((p for p in parts if p in ("opus", "sonnet", "haiku")), None)
    numbers = [p for p in parts if _VERSION_PART.fullmatch(p)]
    return (family, ".".join(numbers[:2])) if family and numbers else None


def min_tokens(model: str) -> int | None:
    """Anthropic's minimum cacheable length for ``model`` (:data:`MIN_TOKENS`), or None when the model
    is not in the table."""
    found = claude_family(model)
    return None if found is None else MIN_TOKENS.get(found)


def block_text(content: object) -> str:
    """A Messages API content's text: a string as it is, a list of blocks as its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def marked_parts(body: Mapping[str, Any]) -> tuple[list[str], int | None]:
    """A Messages API request body as Anthropic's cache sees it, in its order (each tool, each system block, each
    message's content blocks, the first prefixed by the role), and how many parts run up to and including the
    last one marked ``cache_control`` (None: nothing marked)."""
    parts: list[str] = []
    marked: int | None = None

    def add(item: object, text: str) -> None:
        nonlocal marked
        parts.append(text)
        if isinstance(item, dict) and item.get("cache_control"):
            marked = len(parts)

    for tool in body.get("tools") or []:
        add(tool, json.dumps({k: v for k, v in tool.items() if k != "cache_control"}, sort_keys=True))
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else (system or []):
        add(block, str(block.get("text", "")))
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for i, block in enumerate(blocks):
            add(block, (message.get("role", "") + ":" if i == 0 else "") + block_text([block]))
    return parts, marked


class MarkedCache:
    """Anthropic's rule: the prefixes written so far (hashes of their parts); :meth:`serve` says what a new
    request reads and writes. Thread-safe."""

    def __init__(self, min_tokens: int) -> None:
        if min_tokens < 0:
            raise ValueError(f"a cache needs min_tokens >= 0, got {min_tokens}")
        self.min_tokens = min_tokens
        self._written: set[bytes] = set()
        self._lock = threading.Lock()

    def serve(self, parts: Sequence[str], marked: int | None) -> tuple[int, int]:
        """``(read, written)`` tokens of the request ``parts`` marked up to part ``marked``: the marked prefix
        is read when written before, else written when at least ``min_tokens`` long (and remembered), else
        neither; nothing is cached without a mark."""
        if marked is None:
            return 0, 0
        prefix = len(request_tokens(parts[:marked]))
        key = hashlib.blake2b(json.dumps(list(parts[:marked])).encode("utf-8", "surrogatepass"),
                              digest_size=16).digest()
        with self._lock:
            if key in self._written:
                return prefix, 0
            if prefix >= self.min_tokens:
                self._written.add(key)
                return 0, prefix
        return 0, 0
