"""The shapes of a trace's request and response, read as chat messages, and the history de-duplication that adds only
what a request brings new. Pure: no MLflow needed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ...loaders.base import RecordErrors
from ...loaders.formats.openai import OPENAI_ROLES, content_text, tool_call

T = TypeVar("T")

# Where the user's message is looked for in a trace's inputs (a dict of the traced
# function's arguments), and the reply in its outputs, when the shape is not a chat one.
REQUEST_KEYS = ("messages", "input", "question", "query", "prompt", "message", "user_input",
                "user_message", "text", "content", "request", "inputs")
RESPONSE_KEYS = ("output", "answer", "response", "content", "text", "result", "reply", "completion",
                 "generation", "message", "outputs")
ROLES = {**OPENAI_ROLES, "human": "user", "ai": "assistant", "model": "assistant"}  # LangChain's and Gemini's too
_DEPTH = 3  # how deep a wrapped value (``{"request": {"messages": [...]}}``) is unwrapped


class Unreadable(Exception):
    """A request or response that cannot be read; ``field`` is ``request`` or ``response``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Msg:
    """One chat message read from a trace."""

    role: str
    content: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    meta: tuple[tuple[str, Any], ...] = ()

    @property
    def key(self) -> tuple[str, str, tuple[str, ...]]:
        """What two messages must share to be the same message of a history."""
        return (self.role, " ".join(self.content.split()), tuple(str(c.get("name")) for c in self.tool_calls))

    @property
    def blank(self) -> bool:
        """Nothing to judge: whitespace-only (or empty) content and no tool calls.
        MLflow's session judges drop such messages from the conversation too."""
        return not self.content.strip() and not self.tool_calls


def _text(value: object, path: str) -> str:
    """Message content, read as an OpenAI chat file's (:func:`~judgegraph.loaders.formats.openai.content_text`)."""
    try:
        return content_text(value)
    except RecordErrors as exc:
        where, message = exc.problems[0]
        raise Unreadable("".join([path, *(f".{p}" for p in where)]),
                         message) from None


def _tool_call(raw: object) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    function = raw.get("function")
    fn: dict[str, Any] = function if isinstance(function, dict) else raw
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        return None
    return tool_call(name, fn.get("arguments", fn.get("args")), raw.get("id"))


def _role_of(item: object) -> str | None:
    if not isinstance(item, dict):
        return None
    role = item.get("role", item.get("type"))
    return ROLES.get(role) if isinstance(role, str) else None


def _is_message(item: object) -> bool:
    return isinstance(item, dict) and _role_of(item) is not None and ("content" in item or "tool_calls" in item)


def _message(item: dict[str, Any], path: str) -> Msg:
    role = _role_of(item)
    assert role is not None
    calls = tuple(c for c in (_tool_call(c) for c in (item.get("tool_calls") or [])) if c)
    meta = tuple((k, item[k]) for k in ("name", "tool_call_id") if isinstance(item.get(k), str))
    return Msg(role, _text(item.get("content"), f"{path}.content"), calls, meta)


def _messages(items: list[Any], path: str) -> list[Msg]:
    """Chat messages (OpenAI / LangChain dicts, Responses API items); items that
    are not messages (function calls, reasoning) are skipped."""
    return [_message(item, f"{path}.{i}") for i, item in enumerate(items) if _is_message(item)]


def request_messages(value: object, path: str = "request", depth: int = 0) -> list[Msg]:
    """The messages a trace's inputs hold: the user's message, or a whole history."""
    if isinstance(value, str):
        return [Msg("user", value)]
    if isinstance(value, list):
        msgs = _messages(value, path)
        if msgs:
            return msgs
        raise Unreadable(path, "a list of inputs that holds no chat message")
    if isinstance(value, dict) and depth < _DEPTH:
        if _is_message(value):
            return [_message(value, path)]
        return _under_keys(value, REQUEST_KEYS, path, depth, request_messages,
                           "cannot tell which input is the user's message", "request_key= (--request-key)")
    if value is None:
        raise Unreadable(path, "the trace has no inputs")
    raise Unreadable(path, f"cannot read a user message from a {type(value).__name__}")


def _under_keys(value: dict[str, Any], keys: Sequence[str], path: str, depth: int, read: Callable[[Any, str, int], T],
                unsure: str, option: str) -> T:
    """``read`` of the first of ``keys`` that reads, else of the only entry that can hold a message
    (:func:`_only_value`); else Unreadable(``unsure``, naming the keys and the ``option`` that names the right one)."""
    for key in keys:
        if key in value and isinstance(value[key], (str, list, dict)):
            try:
                return read(value[key], f"{path}.{key}", depth + 1)
            except Unreadable:
                continue
    found = _only_value(value)
    if found is not None:
        return read(found[1], f"{path}.{found[0]}", depth + 1)
    names = ", ".join(map(str, value)) or "(none)"
    raise Unreadable(path, f"{unsure} (keys: {names}); pass {option} to name it")


def _only_value(value: dict[str, Any]) -> tuple[str, Any] | None:
    """The one entry that can hold a message: the only entry, or the only
    string/list/dict entry that is not an id (``session_id``, ``user_id``)."""
    if len(value) == 1:
        return next(iter(value.items()))
    useful = [(k, v) for k, v in value.items() if isinstance(v, (str, list, dict))
              and not (isinstance(k, str) and (k.lower() == "id" or k.endswith(("_id", "Id", "_ID"))))]
    return useful[0] if len(useful) == 1 else None


def reply_message(value: object, path: str = "response", depth: int = 0) -> Msg:
    """The assistant's reply in a trace's outputs."""
    if isinstance(value, str):
        return Msg("assistant", value)
    if isinstance(value, list):
        msgs = _messages(value, path)
        if msgs:
            return _last_assistant(msgs, path)
        if value and depth < _DEPTH:
            return reply_message(value[0], f"{path}.0", depth + 1)  # e.g. a pyfunc's [prediction]
        raise Unreadable(path, "an empty list of outputs")
    if isinstance(value, dict) and depth < _DEPTH:
        choices = value.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            first = choices[0]
            if isinstance(first.get("message"), dict):
                return _message({**first["message"], "role": "assistant"}, f"{path}.choices.0.message")
            if isinstance(first.get("text"), str):
                return Msg("assistant", first["text"])
        if _is_message(value):
            return replace(_message(value, path), role="assistant")
        if isinstance(value.get("messages"), list):
            return _last_assistant(_messages(value["messages"], f"{path}.messages"), f"{path}.messages")
        if isinstance(value.get("output"), list):  # OpenAI Responses API
            return _last_assistant(_messages(value["output"], f"{path}.output"), f"{path}.output")
        return _under_keys(value, RESPONSE_KEYS, path, depth, reply_message,
                           "cannot tell which output is the assistant's reply", "response_key= (--response-key)")
    if value is None:
        raise Unreadable(path, "the trace has no outputs")
    raise Unreadable(path, f"cannot read a reply from a {type(value).__name__}")


def _last_assistant(msgs: list[Msg], path: str) -> Msg:
    last = next((msg for msg in reversed(msgs) if msg.role == "assistant"), None)
    if last is None:
        raise Unreadable(path, "no assistant message in the outputs")
    return last


def pick(value: object, key: str | None, path: str) -> tuple[Any, str]:
    """``value``, or its entry ``key`` (``request_key=``, ``response_key=``), and the path it is read at."""
    if key is None:
        return value, path
    if not isinstance(value, dict) or key not in value:
        keys = ", ".join(map(str, value)) if isinstance(value, dict) else type(value).__name__
        raise Unreadable(path, f"no {key!r} in the trace's {'inputs' if path == 'request' else 'outputs'} "
                                f"(has: {keys})")
    return value[key], f"{path}.{key}"


def new_messages(prior: list[Msg], request: list[Msg]) -> tuple[list[Msg], bool]:
    """What a trace's request adds to the conversation so far.

    The request's non-system messages are matched against the end of the conversation: the longest prefix of the
    request that equals a suffix of the conversation is history already there (a history trimmed at the front still
    matches), and only what follows it is new. System messages already in the conversation are not repeated. When the
    request holds an assistant message but does not line up with the conversation at all (a rewritten or summarised
    history), only the messages after its last assistant message are taken, and the second value is True.
    """
    if not prior:
        return list(request), False
    seen_system = {m.key for m in prior if m.role == "system"}
    extra_system = [m for m in request if m.role == "system" and m.key not in seen_system]
    body = [m for m in request if m.role != "system"]
    keys = [m.key for m in body]
    tail = [m.key for m in prior if m.role != "system"]
    for k in range(min(len(keys), len(tail)), 0, -1):
        if keys[:k] == tail[-k:]:
            return extra_system + body[k:], False
    if any(m.role == "assistant" for m in body):
        last = max(i for i, m in enumerate(body) if m.role == "assistant")
        return extra_system + body[last + 1:], True
    return extra_system + body, False
