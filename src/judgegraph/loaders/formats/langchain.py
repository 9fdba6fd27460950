"""LangChain messages: a record ``{"messages": [...]}`` of ``messages_to_dict`` or ``model_dump()`` dumps, converted
by :func:`judgegraph.data.conversation.from_messages` (LangChain's own readers)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from judgegraph.data.conversation import Conversation, from_messages

from ..base import Ctx, Path_, RecordErrors, clean_id, fail, metadata, record_messages

LANGCHAIN_KEYS = ("messages", "id", "metadata", "chatbot_role", "expected_outcome")
#: ``type`` of the message dicts LangChain writes (``model_dump`` / ``messages_to_dict``).
MESSAGE_TYPES = frozenset({"human", "ai", "system", "tool", "HumanMessageChunk", "AIMessageChunk",
                           "SystemMessageChunk", "ToolMessageChunk", "chat", "function"})


def is_langchain_message(value: object) -> bool:
    """A dict as LangChain dumps a message (not an OpenAI ``{"role", ...}`` dict)."""
    return isinstance(value, dict) and "role" not in value and value.get("type") in MESSAGE_TYPES


def _problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        return f"not a LangChain message: {where + ': ' if where else ''}{err.get('msg', 'invalid')}"
    return str(exc).split(": ", 1)[-1] if str(exc).startswith("messages[") else str(exc)


def from_langchain(rec: dict[str, Any], ctx: Ctx) -> tuple[Conversation, dict[str, Any]]:
    messages = record_messages(rec, LANGCHAIN_KEYS)
    problems: list[tuple[Path_, str]] = []
    for i, message in enumerate(messages):  # each alone first, so an error names its message
        try:
            from_messages([message])
        except (ValueError, TypeError, KeyError) as exc:
            problems.append((("messages", i), _problem(exc)))
    if problems:
        raise RecordErrors(problems)
    meta = metadata(rec.get("metadata"), ("metadata",))
    fields: dict[str, Any] = {"id": clean_id(rec.get("id"), ctx, ("id",)), "metadata": meta}
    for key in ("chatbot_role", "expected_outcome"):
        if rec.get(key) is not None:
            if not isinstance(rec[key], str):
                raise fail((key,), f"must be a string (got {type(rec[key]).__name__})")
            fields[key] = rec[key]
    try:
        return from_messages(messages, **fields), {}
    except (ValueError, TypeError) as exc:
        raise fail(("messages",), _problem(exc)) from None
