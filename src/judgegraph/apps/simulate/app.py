"""The chatbot under simulation (a graph over ``{"messages"}``, a Runnable, a sync or async callable), called with
the whole conversation so far."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias, Union

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.pregel import Pregel

#: The chatbot under simulation: a compiled graph or any Runnable, or a callable (sync or async) taking the
#: list of messages; its reply may be messages, a string or a dict (:func:`new_messages`), hence ``Any``.
AppLike: TypeAlias = Union[Runnable, Callable[..., Any]]

REPLY_KEYS = ("output", "answer", "response", "content")


def new_messages(sent: list[BaseMessage], out: Any) -> list[BaseMessage]:
    """The app's reply as messages: a message, a string, a list of messages (the whole conversation when it is
    longer than what was sent, else only the new ones), ``{"messages": [...]}`` (the same rule), or a dict with
    ``output`` / ``answer`` / ``response`` / ``content``."""
    if isinstance(out, BaseMessage):
        return [out]
    if isinstance(out, str):
        return [AIMessage(out)]
    if isinstance(out, dict) and "messages" in out:
        out = out["messages"]
    elif isinstance(out, dict):
        reply = next((out[k] for k in REPLY_KEYS if out.get(k) is not None), None)
        if reply is None:
            raise ValueError(f"the app returned a dict without 'messages' or a reply key ({', '.join(REPLY_KEYS)});"
                             f" keys: {sorted(out)}")
        return new_messages(sent, reply)
    if isinstance(out, (list, tuple)):
        msgs = convert_to_messages(list(out))
        return msgs[len(sent):] if len(msgs) > len(sent) else msgs
    raise TypeError(f"the app returned {type(out).__name__}; expected messages, a string or a dict")


def as_app(app: AppLike) -> tuple[Runnable, bool]:
    """``(runnable, takes_state)``: a graph takes ``{"messages": ...}``, anything else the list."""
    if isinstance(app, Pregel):
        return app, True
    if isinstance(app, Runnable):
        return app, False
    if callable(app):
        return RunnableLambda(app, name=getattr(app, "__name__", "app")), False
    raise TypeError(f"the app must be a compiled LangGraph graph, a Runnable or a callable, got {type(app).__name__}")
