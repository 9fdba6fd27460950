"""A LangGraph server's threads as conversations, through ``langgraph_sdk`` (``threads.search``, ``threads.get_state``;
docs/threads.md). The SDK reads its own API key (``LANGGRAPH_API_KEY`` / ``LANGSMITH_API_KEY``); judgegraph never does."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from ..data.conversation import Conversation
from .base import InputError, LoadedConversation
from .langgraph_threads import (
    CONTEXT_KEY,
    MESSAGES_KEY,
    ThreadError,
    ThreadInfo,
    _parse_time,
    conversation_from_values,
    loaded_thread,
    matches,
    thread_metadata,
)
from .probe import no_answer

if TYPE_CHECKING:
    from langgraph_sdk.client import SyncLangGraphClient

PAGE_SIZE = 100
#: Pages read at most per listing (PAGE_SIZE each): a bound, not a limit anyone should meet.
MAX_PAGES = 10_000
TIMEOUT = 30.0  # seconds for one request to the server


class ServerUnreachable(OSError):
    """The LangGraph server did not answer (refused, unknown host, timed out)."""


def unreachable(url: str, timeout: float = 5.0) -> str | None:
    """Why the server at ``url`` cannot be reached, or None (it answered ``/ok``, even with an HTTP error)."""
    why = no_answer(url, "/ok", timeout)
    return None if why is None else f"cannot reach the LangGraph server at {url}: {why}"


def client(url: str) -> SyncLangGraphClient:
    """A synchronous SDK client for ``url`` (raises :class:`ServerUnreachable` when nothing answers there)."""
    if why := unreachable(url):
        raise ServerUnreachable(why)
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=url, timeout=TIMEOUT)


def server_threads(sdk: SyncLangGraphClient, *, assistant: str | None = None,
                   metadata: Mapping[str, str] | None = None) -> Iterator[ThreadInfo]:
    """The server's threads (newest update first) run by ``assistant`` with ``metadata`` (see :func:`matches`)."""
    wanted = dict(metadata or {})
    for page in range(MAX_PAGES):
        found = sdk.threads.search(metadata=wanted or None, limit=PAGE_SIZE, offset=page * PAGE_SIZE,
                                   sort_by="updated_at", sort_order="desc")
        for t in found:
            info = ThreadInfo(str(t["thread_id"]), _parse_time(t.get("updated_at")), dict(t.get("metadata") or {}),
                              status=t.get("status"))
            if matches(info, assistant, wanted):
                yield info
        if len(found) < PAGE_SIZE:
            return


def read_thread(sdk: SyncLangGraphClient, info: ThreadInfo, *, context_key: str | None = CONTEXT_KEY,
                messages_key: str = MESSAGES_KEY) -> Conversation:
    """The conversation of one server thread (raises :class:`ThreadError`)."""
    from langgraph_sdk.errors import NotFoundError

    try:
        state = sdk.threads.get_state(info.thread_id)
    except NotFoundError:
        raise ThreadError(info.thread_id, "thread", "the server has no such thread") from None
    values = state.get("values") or {}
    checkpoint_id = (state.get("checkpoint") or {}).get("checkpoint_id")
    return conversation_from_values(info.thread_id, values, context_key=context_key, messages_key=messages_key,
                                    metadata=thread_metadata(info, checkpoint_id))


def load_server(url: str, thread_ids: Sequence[str] | None = None, *, assistant: str | None = None,
                metadata: Mapping[str, str] | None = None, context_key: str | None = CONTEXT_KEY,
                messages_key: str = MESSAGES_KEY) -> Iterator[LoadedConversation | InputError]:
    """The threads ``thread_ids`` (default: every thread run by ``assistant`` with ``metadata``) of the server at
    ``url``, read one at a time; an unreachable server or an unreadable thread is an :class:`InputError`."""
    try:
        sdk = client(url)
    except ServerUnreachable as exc:
        yield InputError(url, None, None, None, str(exc))
        return
    import httpx
    from langgraph_sdk.errors import BadRequestError, LangGraphError, UnprocessableEntityError
    from langgraph_sdk.errors import NotFoundError as Missing

    try:
        if thread_ids:
            infos: list[ThreadInfo] = []
            for tid in thread_ids:
                try:
                    t = sdk.threads.get(tid)
                except Missing:
                    yield InputError(url, None, None, "thread", f"thread {tid!r}: the server has no such thread")
                    continue
                except (BadRequestError, UnprocessableEntityError) as exc:  # e.g. "Invalid thread ID: must be a UUID"
                    yield InputError(url, None, None, "thread", f"thread {tid!r}: the server refused it: {exc}")
                    continue
                infos.append(ThreadInfo(tid, _parse_time(t.get("updated_at")), dict(t.get("metadata") or {}),
                                        status=t.get("status")))
            listed: Iterator[ThreadInfo] = iter(infos)
        else:
            listed = server_threads(sdk, assistant=assistant, metadata=metadata)
        for info in listed:
            yield loaded_thread(url, info.thread_id,
                                partial(read_thread, sdk, info, context_key=context_key, messages_key=messages_key))
    except (LangGraphError, httpx.HTTPError, OSError) as exc:  # the server stopped answering part-way: what was read is judged
        yield InputError(url, None, None, None, f"the LangGraph server failed: {type(exc).__name__}: {exc}")
