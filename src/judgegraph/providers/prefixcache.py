"""What a provider's prompt cache would serve, by the provider's own rule (docs/cost_cache.md), one implementation
for the dry run, the loopback test servers and the benchmarks. Kinds (:class:`CacheRule`): ``prefix`` (automatic:
an earlier request's prefix of at least 1,024 tokens, in steps of 128; an upper bound), ``marked`` (only up to the
last ``cache_control`` mark, from the model's minimum) and ``unknown`` (nothing estimated).
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

#: The shortest prefix an automatic prefix cache serves, in tokens.
MIN_PREFIX_TOKENS = 1024
#: The steps in which a cached prefix grows past the minimum, in tokens.
STEP_TOKENS = 128


def request_tokens(parts: Iterable[str]) -> list[int]:
    """The token ids of a request given as its parts in the order sent (the schema, then each message's role
    and content), each part encoded on its own (cl100k)."""
    from ..judges.tokens import encoding

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
            hit = next((i for i, h in enumerate(boundaries) if h not in self._seen), len(boundaries))
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


# --------------------------------------------------------------------------- the rule of each provider

CacheKind = Literal["prefix", "marked", "unknown"]


@dataclass(frozen=True)
class CacheRule:
    """How a provider's prompt cache decides what it serves: ``kind`` ``prefix`` (automatic prefixes of at least
    ``min_tokens``), ``marked`` (what judgegraph marks, from ``min_tokens``) or ``unknown`` (no estimate)."""

    provider: str
    kind: CacheKind
    min_tokens: int = 0
    #: For ``marked``: whether ``min_tokens`` was found for the model (else the largest minimum known is assumed).
    model_known: bool = True
    #: The provider's name as a person writes it.
    title: str = ""

    @property
    def short(self) -> str:
        """The rule in a few words (the dry run's cache line)."""
        title = self.title or self.provider
        if self.kind == "marked":
            return f"{title}'s cache_control rule, from {self.min_tokens:,} tokens"
        return f"{title}'s rule"

    def describe(self) -> str:
        """The rule in words (the dry run's basis)."""
        if self.kind == "prefix":
            return (f"{self.provider}'s automatic prefix rule (prefixes of at least {self.min_tokens:,} tokens "
                    f"already sent, in steps of {STEP_TOKENS}; an upper bound)")
        if self.kind == "marked":
            least = (f"at least {self.min_tokens:,} tokens, the model's minimum" if self.model_known else
                     f"at least {self.min_tokens:,} tokens, the largest minimum known: the model is not in "
                     f"judgegraph's table, so this may undercount")
            return (f"{self.provider}'s cache_control rule (only the stable part judgegraph marks, from its second "
                    f"sending; read when written before, written when {least})")
        return f"unknown: no prompt-cache rule is known for provider {self.provider!r}, so none is counted"
