"""OpenAI chat ``{"messages": [...]}`` records (fine-tuning / chat-completions shape)."""

from __future__ import annotations

import json
from typing import Any

from judgegraph.data.conversation import Conversation
from judgegraph.data.toolref import parse_arguments

from ..base import Ctx, Path_, RecordErrors, check_keys, clean_id, fail, metadata, record_messages, validate

OPENAI_KEYS = ("messages", "id", "metadata", "tools", "functions", "parallel_tool_calls")
OPENAI_MESSAGE_KEYS = (
    "role", "content", "name", "tool_calls", "tool_call_id", "function_call",
    "refusal", "weight", "audio", "annotations", "reasoning_content",
)
OPENAI_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool",
                "developer": "system", "function": "tool"}


def content_text(value: object, path: Path_ = ()) -> str:
    """An OpenAI-style message ``content`` as text (the one reader: chat files, MLflow traces): a string, or its text
    parts joined by newlines, other parts skipped; None is empty. :class:`~judgegraph.loaders.base.RecordErrors` at
    ``path`` for a malformed content or part."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts: list[str] = []
        for j, part in enumerate(value):
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                if part.get("type", "text") in ("text", "input_text", "output_text"):
                    text = part.get("text")
                    if not isinstance(text, str):
                        raise fail(path + (j, "text"), "a text part needs a string 'text'")
                    texts.append(text)
            else:
                raise fail(path + (j,), f"content part must be an object (got {type(part).__name__})")
        return "\n".join(texts)
    raise fail(path, f"content must be a string or a list of parts (got {type(value).__name__})")


def tool_call(name: str, args: object, call_id: object) -> dict[str, Any]:
    """A tool call as a turn holds it, from an OpenAI-style call: ``arguments``
    decoded when they are a JSON object in a string, other non-dict values kept as JSON text."""
    if isinstance(args, str):
        args = parse_arguments(args)
    elif args is not None and not isinstance(args, dict):
        args = json.dumps(args)
    return {"name": name, "arguments": args, **({"id": str(call_id)} if call_id is not None else {})}


def _openai_tool_call(raw: object, path: Path_) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise fail(path, f"a tool call must be an object (got {type(raw).__name__})")
    fn = raw.get("function")
    if not isinstance(fn, dict):
        raise fail(path + ("function",), "a tool call needs a 'function' object with 'name' and 'arguments'")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise fail(path + ("function", "name"), "a tool call needs a function name")
    return tool_call(name, fn.get("arguments"), raw.get("id"))


def from_openai(rec: dict[str, Any], ctx: Ctx) -> tuple[Conversation, dict[str, Any]]:
    messages = record_messages(rec, OPENAI_KEYS)
    problems: list[tuple[Path_, str]] = []
    meta = metadata(rec.get("metadata"), ("metadata",))
    for key in ("tools", "functions", "parallel_tool_calls"):
        if rec.get(key) is not None:
            meta[key] = rec[key]
    turns: list[Any] = []
    for i, msg in enumerate(messages):
        path = ("messages", i)
        if not isinstance(msg, dict):
            raise fail(path, f"a message must be an object (got {type(msg).__name__})")
        problems.extend(check_keys(msg, OPENAI_MESSAGE_KEYS, path))
        role = msg.get("role")
        if not isinstance(role, str) or role not in OPENAI_ROLES:
            problems.append((path + ("role",), (
                "Field required" if "role" not in msg else
                f"unknown role {role!r}; expected one of " + ", ".join(OPENAI_ROLES)
            )))
            continue
        if "content" not in msg and not msg.get("tool_calls") and not msg.get("function_call"):
            problems.append((path + ("content",), "Field required"))
            continue
        try:
            content = content_text(msg.get("content"), path + ("content",))
            calls = msg.get("tool_calls") or []
            if not isinstance(calls, list):
                raise fail(path + ("tool_calls",), "must be a list")
            tool_calls = [_openai_tool_call(c, path + ("tool_calls", j)) for j, c in enumerate(calls)]
            if isinstance(msg.get("function_call"), dict):
                tool_calls.append(_openai_tool_call({"function": msg["function_call"]}, path + ("function_call",)))
        except RecordErrors as exc:
            problems.extend(exc.problems)
            continue
        tmeta = {k: msg[k] for k in ("name", "tool_call_id", "refusal", "weight", "audio", "annotations",
                                     "reasoning_content") if msg.get(k) not in (None, [])}
        if role != OPENAI_ROLES[role]:
            tmeta["openai_role"] = role
        turns.append({"role": OPENAI_ROLES[role], "content": content, "tool_calls": tool_calls,
                      "metadata": tmeta})
    if problems:
        raise RecordErrors(problems)
    data = {"id": clean_id(rec.get("id"), ctx, ("id",)), "turns": turns, "metadata": meta}
    return validate(data, [(("turns",), ("messages",))]), {}
