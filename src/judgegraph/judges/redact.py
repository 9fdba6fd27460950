"""Credentials taken out of text before it is kept: a server may echo the request's
headers in an error body. What is taken out: docs/judges.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[REDACTED]"

_HEADER = re.compile(
    r"""(?ix)
    (\b(?:proxy-)?authorization|\b(?:x-|openai-)?api[-_]key)   # the header's name
    (["']?\s*[:=]\s*["']?)                                     # its separator, quoted or not
    ([^"'\r\n,;}]+)                                            # its value, to the quote or the field's end
    """
)
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{16,}")  # 16+: "bearer bonds" stays
_SK = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):[^/\s@]+@")
#: libpq's keyword form (``host=... password=secret`` or ``password='a b\\'c'``): the value, quoted or not.
_KEYWORD_PASSWORD = re.compile(r"(?i)\b(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s']+)")

_MIN_SECRET = 8  # a shorter "key" ("x", "none") would blank out ordinary words


class Redactor:
    """Calls as ``redact(text) -> text``; ``secrets`` are literal values
    (keys) taken out wherever they appear, besides the shapes above."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = {s for s in secrets if isinstance(s, str) and len(s) >= _MIN_SECRET and s != "not-needed"}
        self.secrets = sorted(kept, key=len, reverse=True)  # a longer one first: one may contain another

    @classmethod
    def for_model(cls, model: object) -> Redactor:
        """A redactor for a chat model's keys and every provider's key variable
        (:func:`judgegraph.providers.secrets`)."""
        from ..providers import secrets

        return cls(secrets(model))

    def __call__(self, text: str) -> str:
        if not text:
            return text
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        # each pattern only where its marker is (a plain substring test): a prompt of a few KB
        # with none costs microseconds, not the regex scans' ~0.4 ms
        low = text.lower()
        if "authoriz" in low or "api-key" in low or "api_key" in low:
            text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        if "bearer" in low:
            text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        if "sk-" in text:
            text = _SK.sub(REDACTED, text)
        if "@" in text and "://" in text:
            text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
        if "password" in low:
            text = _KEYWORD_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
        return text
