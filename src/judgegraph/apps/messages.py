"""What the app-side helpers judge: messages or conversations in, one
:class:`Conversation` out."""

from __future__ import annotations

from typing import Any, Literal

from ..data.conversation import Conversation, as_conversation, from_messages

#: What a judge looks at: every exchange, or only the latest one (:mod:`judgegraph.apps.latest`).
Scope = Literal["conversation", "latest"]


def to_conversation(value: Any, **fields: Any) -> Conversation:  # Any: checked below, a TypeError otherwise
    """A :class:`Conversation` from a Conversation, a dict in judgegraph's
    format (``{"turns": [...]}``), a ``{"messages": [...]}`` dict, or a list of
    LangChain messages / their dicts / ``{"role", "content"}`` dicts
    (:func:`judgegraph.data.conversation.from_messages`)."""
    if isinstance(value, Conversation):
        return value.model_copy(update=fields) if fields else value
    if isinstance(value, dict) and "messages" in value and "turns" not in value:
        return from_messages(value["messages"], **{**{k: v for k, v in value.items() if k != "messages"}, **fields})
    if isinstance(value, dict):
        return as_conversation({**value, **fields})
    if isinstance(value, (list, tuple)):
        return from_messages(value, **fields)
    raise TypeError(f"expected messages, a Conversation or a conversation dict, got {type(value).__name__}")
