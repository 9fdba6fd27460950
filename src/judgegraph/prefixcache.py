"""What a provider's prompt cache would serve, by the provider's own rule (docs/cost_cache.md). One
implementation for the dry run, the loopback test servers and the benchmarks, so their figures agree.

- OpenAI (:class:`PrefixCache`): automatic; a request's longest prefix already sent in an earlier request is
  served from the cache when it is at least 1,024 tokens long, counted in steps of 128 tokens. Every earlier
  request counts, not only the one before: a provider keeps prefixes for minutes, across requests. The figure
  is an upper bound (a provider may route two requests to machines that do not share a cache, or evict a
  prefix first).
- Anthropic (:class:`MarkedCache`): only where the request asks; the prefix up to and including the last block
  marked ``cache_control`` is written when it is at least the model's minimum (:func:`anthropic_min_tokens`)
  and read by a later request with the same prefix.
- Any other provider: no rule is known (:func:`cache_rule`), and nothing is estimated.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: The shortest prefix OpenAI serves from its cache, in tokens.
MIN_PREFIX_TOKENS = 1024
#: The steps in which a cached prefix grows past the minimum, in tokens.
STEP_TOKENS = 128


def request_tokens(parts: Iterable[str]) -> list[int]:
    """The token ids of a request given as its parts in the order sent (the schema, then each message's role
    and content), each part encoded on its own (cl100k)."""
    from .judges.tokens import encoding

    enc = encoding()
    out: list[int] = []
    for part in parts:
        out.extend(enc.encode(part, disallowed_special=()))
    return out


class PrefixCache:
    """The prefixes sent so far, as hashes of every ``step``-token boundary; :meth:`serve` says how many
    tokens of a new request the cache would serve, then remembers the request. Thread-safe."""

    def __init__(self, min_tokens: int = MIN_PREFIX_TOKENS, step: int = STEP_TOKENS) -> None:
        if step < 1 or min_tokens < 0:
            raise ValueError(f"a prefix cache needs step >= 1 and min_tokens >= 0, got {step}, {min_tokens}")
        self.min_tokens = min_tokens
        self.step = step
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def _boundaries(self, tokens: Sequence[int]) -> list[bytes]:
        digest = hashlib.blake2b(digest_size=16)
        out = []
        for start in range(0, len(tokens) - len(tokens) % self.step, self.step):
            digest.update(array("q", tokens[start:start + self.step]).tobytes())
            out.append(digest.copy().digest())
        return out

    def serve(self, tokens: Sequence[int]) -> int:
        """The tokens of ``tokens`` an earlier request's prefix covers (a multiple of ``step``, at least
        ``min_tokens``, else 0); the request is then remembered."""
        boundaries = self._boundaries(tokens)
        with self._lock:
            hit = 0
            for i, h in enumerate(boundaries):
                if h not in self._seen:
                    break
                hit = i + 1
            self._seen.update(boundaries[hit:])
        served = hit * self.step
        return served if served >= self.min_tokens else 0


def cacheable_share(prompts: Iterable[Sequence[int]], cache: PrefixCache | None = None) -> tuple[int, int]:
    """(tokens a prefix cache would serve, all input tokens) over ``prompts`` sent in that order."""
    cache = cache or PrefixCache()
    served = total = 0
    for tokens in prompts:
        served += cache.serve(tokens)
        total += len(tokens)
    return served, total


def chat_parts(schema: str | None, messages: Iterable[tuple[str, str]]) -> list[str]:
    """A chat request as the parts :func:`request_tokens` encodes: the output schema first (a provider
    places it before the messages), then each message's role and content."""
    parts = [schema] if schema else []
    for role, content in messages:
        parts += [role, content]
    return parts


# --------------------------------------------------------------------------- Anthropic: cache_control

#: The shortest prefix Anthropic caches, in tokens, by Claude model (family, version). From Anthropic's prompt
#: caching documentation, "Cache limitations" (platform.claude.com/docs/en/build-with-claude/prompt-caching, as
#: read through the search tool on 2026-11-26 in a mirror of that page; the same table is at
#: docs.orq.ai/docs/ai-gateway/prompt-caching): 4,096 for Opus 4.6, Opus 4.5 and Haiku 4.5; 2,048 for Sonnet 4.6,
#: Haiku 3.5 and Haiku 3; 1,024 for Sonnet 4.5, Opus 4.1, Opus 4, Sonnet 4, Sonnet 3.7 (and Opus 3, in the
#: page's earlier text). "Shorter prompts cannot be cached, even if marked with cache_control."
ANTHROPIC_MIN_TOKENS: dict[tuple[str, str], int] = {
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


def anthropic_min_tokens(model: str) -> int | None:
    """Anthropic's minimum cacheable length for ``model`` (:data:`ANTHROPIC_MIN_TOKENS`), or None when the model
    is not in the table."""
    found = claude_family(model)
    return None if found is None else ANTHROPIC_MIN_TOKENS.get(found)


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


# --------------------------------------------------------------------------- the rule of each provider

#: The providers whose cache rule is known: ``openai`` (automatic prefixes), ``anthropic`` (``cache_control``).
CacheKind = Literal["prefix", "marked", "unknown"]


@dataclass(frozen=True)
class CacheRule:
    """How a provider's prompt cache decides what it serves: ``kind`` ``prefix`` (OpenAI's automatic rule),
    ``marked`` (Anthropic's: what judgegraph marks, from ``min_tokens``) or ``unknown`` (no estimate)."""

    provider: str
    kind: CacheKind
    min_tokens: int = 0
    #: For ``marked``: whether ``min_tokens`` was found for the model (else the largest minimum known is assumed).
    model_known: bool = True

    def describe(self) -> str:
        """The rule in words (the dry run's basis)."""
        if self.kind == "prefix":
            return (f"{self.provider}'s automatic prefix rule (prefixes of at least {MIN_PREFIX_TOKENS:,} tokens "
                    f"already sent, in steps of {STEP_TOKENS}; an upper bound)")
        if self.kind == "marked":
            least = (f"at least {self.min_tokens:,} tokens, the model's minimum" if self.model_known else
                     f"at least {self.min_tokens:,} tokens, the largest minimum known: the model is not in "
                     f"judgegraph's table, so this may undercount")
            return (f"{self.provider}'s cache_control rule (only the stable part judgegraph marks, from its second "
                    f"sending; read when written before, written when {least})")
        return f"unknown: no prompt-cache rule is known for provider {self.provider!r}, so none is counted"


#: OpenAI's automatic prefix rule: the rule of an ``openai:`` (or bare) model, and the dry run's by default.
OPENAI_PREFIX_RULE = CacheRule("openai", "prefix", MIN_PREFIX_TOKENS)


def cache_rule(model: str) -> CacheRule:
    """The cache rule of the provider of ``model`` (``provider:name``; a bare name is OpenAI's, as the judge
    reads it: :func:`judgegraph.judges.llm.split_model`)."""
    from .judges.llm import split_model

    provider, name = split_model(model)
    if provider == "openai":
        return OPENAI_PREFIX_RULE
    if provider == "anthropic":
        least = anthropic_min_tokens(name)
        return CacheRule("anthropic", "marked", least or max(ANTHROPIC_MIN_TOKENS.values()), least is not None)
    return CacheRule(provider, "unknown")
