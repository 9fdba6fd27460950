"""What the app-side helpers judge: messages or conversations in, and the
inputs a metric graph reads for a scope (the whole conversation, or only the
latest exchange)."""

from __future__ import annotations

from typing import Any, Literal

from ..conversation import Conversation, as_conversation, from_messages
from ..windows import Exchange, exchanges

Scope = Literal["conversation", "latest"]


def to_conversation(value: Any, **fields: Any) -> Conversation:
    """A :class:`Conversation` from a Conversation, a dict in judgegraph's
    format (``{"turns": [...]}``), a ``{"messages": [...]}`` dict, or a list of
    LangChain messages / their dicts / ``{"role", "content"}`` dicts
    (:func:`judgegraph.conversation.from_messages`)."""
    if isinstance(value, Conversation):
        return value.model_copy(update=fields) if fields else value
    if isinstance(value, dict) and "messages" in value and "turns" not in value:
        return from_messages(value["messages"], **{**{k: v for k, v in value.items() if k != "messages"}, **fields})
    if isinstance(value, dict):
        return as_conversation({**value, **fields})
    if isinstance(value, (list, tuple)):
        return from_messages(value, **fields)
    raise TypeError(f"expected messages, a Conversation or a conversation dict, got {type(value).__name__}")


def latest_exchange(conversation: Conversation) -> list[Exchange]:
    """The exchanges a metric judges when only the latest exchange counts: one
    exchange, the last user→assistant one, carrying every earlier turn as
    context (in its ``tool`` part, which metrics show the judge as the messages
    before the reply and never judge). A metric then builds one window and
    makes one judgement; its verdict names the reply's own turn numbers.
    Empty when there is no exchange to judge."""
    exs = exchanges(conversation)
    if not exs:
        return []
    last = exs[-1]
    first = min(last.turn_indices)
    earlier = tuple(it for ex in exs[:-1] for it in sorted((*ex.user, *ex.assistant, *ex.tool), key=lambda t: t.index)
                    if it.index < first)
    return [Exchange(last.index, last.user, last.assistant, (*earlier, *last.tool))]


def metric_input(conversation: Conversation, scope: Scope = "conversation") -> dict[str, Any]:
    """The input of a metric graph for ``scope``."""
    if scope == "conversation":
        return {"conversation": conversation, "exchanges": exchanges(conversation)}
    if scope == "latest":
        return {"conversation": conversation, "exchanges": latest_exchange(conversation)}
    raise ValueError(f"scope must be 'conversation' or 'latest', got {scope!r}")
