"""What the app-side helpers judge: messages or conversations in, and the
inputs a metric graph reads for a scope (the whole conversation, or only the
latest exchange)."""

from __future__ import annotations

from typing import Any, Literal

from ..conversation import Conversation, as_conversation, from_messages
from ..windows import Exchange, check_window_size, exchanges

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


def latest_exchange(conversation: Conversation, window_size: int | None = 10) -> list[Exchange]:
    """The exchanges a metric judges when only the latest exchange counts: one
    exchange, the last user→assistant one, carrying the earlier turns of its
    window (the ``window_size - 1`` exchanges before it; all of them when
    None) as context, in its ``tool`` part, which metrics show the judge as the
    messages before the reply and never judge. A metric then builds one window
    and makes one judgement — the same request its own window over the whole
    conversation would make, so a shared judge cache answers either — and its
    verdict names the reply's own turn numbers. Empty when there is no exchange."""
    if window_size is not None:
        check_window_size(window_size)
    exs = exchanges(conversation)
    if not exs:
        return []
    last = exs[-1]
    before = exs[:-1] if window_size is None else exs[max(0, len(exs) - window_size):-1]
    earlier = tuple(it for ex in before for it in sorted((*ex.user, *ex.assistant, *ex.tool), key=lambda t: t.index))
    return [Exchange(last.index, last.user, last.assistant, (*earlier, *last.tool))]


def metric_input(conversation: Conversation, scope: Scope = "conversation",
                 window_size: int | None = 10) -> dict[str, Any]:
    """The input of a metric graph for ``scope`` (``window_size``: see :func:`latest_exchange`)."""
    if scope == "conversation":
        return {"conversation": conversation, "exchanges": exchanges(conversation)}
    if scope == "latest":
        return {"conversation": conversation, "exchanges": latest_exchange(conversation, window_size)}
    raise ValueError(f"scope must be 'conversation' or 'latest', got {scope!r}")
