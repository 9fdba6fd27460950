"""What a provider's prefix cache would serve, by OpenAI's rule (docs/cost_cache.md): a request's longest
prefix already sent in an earlier request is served from the cache when it is at least 1,024 tokens long,
counted in steps of 128 tokens. One implementation for the dry run, the loopback test server and the
benchmarks, so their figures agree.

Every earlier request counts, not only the one before: a provider keeps prefixes for minutes, across
requests. The figure is an upper bound (a provider may route two requests to machines that do not share a
cache, or evict a prefix first).
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections.abc import Iterable, Sequence

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
