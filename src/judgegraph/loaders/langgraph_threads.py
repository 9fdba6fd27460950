"""An agent's LangGraph thread as a conversation, read from a compiled graph or any checkpointer through the
public ``BaseCheckpointSaver`` API (:func:`from_thread`, :func:`load_checkpointer`); :func:`conversation_from_values`
is what they and the server reader (:mod:`.langgraph_server`) make of a state. What is read: docs/threads.md."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..data.conversation import Conversation, RetrievalNode, Turn, _message_objects, from_messages
from .base import InputError, LoadedConversation

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver

FORMAT = "langgraph"
#: The state keys read for the messages and for retrieval context by default.
MESSAGES_KEY = "messages"
CONTEXT_KEY = "documents"
#: Thread metadata kept on the conversation (scalars only: the rest stays in LangGraph).
META_PREFIX = "langgraph_"


class ThreadError(ValueError):
    """A thread that cannot be read as a conversation: which thread, which field, why."""

    def __init__(self, thread_id: str, field: str, message: str) -> None:
        super().__init__(f"thread {thread_id!r}: {field}: {message}")
        self.thread_id = thread_id
        self.field = field
        self.message = message

    def input_error(self, where: str) -> InputError:
        """This problem as the run reports it (``where``: the checkpointer or server)."""
        return InputError(where, None, None, self.field, f"thread {self.thread_id!r}: {self.message}")


@dataclass(frozen=True)
class ThreadInfo:
    """A thread as listed: its id, when its latest checkpoint was written, its metadata and (on a server) status."""

    thread_id: str
    updated_at: datetime | None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    status: str | None = None


def _documents(thread_id: str, key: str, value: object) -> list[RetrievalNode]:
    """The retrieval context in the state key ``key``: strings, ``Document`` objects or their dumps."""
    items = value if isinstance(value, (list, tuple)) else [value]
    nodes: list[RetrievalNode] = []
    for i, item in enumerate(items):
        text: object = item
        source: object = None
        if hasattr(item, "page_content"):  # a LangChain Document
            text, source = item.page_content, (getattr(item, "metadata", None) or {}).get("source")
        elif isinstance(item, Mapping):
            text = item.get("page_content", item.get("context"))
            source = item.get("source") or (item.get("metadata") or {}).get("source")
        if not isinstance(text, str):
            raise ThreadError(thread_id, f"values.{key}.{i}",
                              f"expected a string or a Document, got {type(item).__name__}")
        if text.strip():
            nodes.append(RetrievalNode(context=text, source=str(source) if source is not None else None))
    return nodes


def _messages(thread_id: str, values: Mapping[str, Any], key: str) -> list[BaseMessage]:
    raw = values.get(key)
    if raw is None:
        keys = ", ".join(map(repr, values)) or "none"
        hint = "; --messages-key KEY (messages_key=) reads another key" if values else ""
        raise ThreadError(thread_id, f"values.{key}", f"the thread's state has no {key!r} (its keys: {keys}){hint}")
    if not isinstance(raw, (list, tuple)):
        raise ThreadError(thread_id, f"values.{key}", f"expected a list of messages, got {type(raw).__name__}")
    if not raw:
        raise ThreadError(thread_id, f"values.{key}", "no messages: nothing to judge")
    out: list[BaseMessage] = []
    for i, message in enumerate(raw):
        try:
            out.extend(_message_objects([message]))
        except (ValueError, TypeError, KeyError, ValidationError) as exc:
            raise ThreadError(thread_id, f"values.{key}.{i}", str(exc).removeprefix("messages[0]: ")) from None
    return out


def conversation_from_values(thread_id: str, values: object, *, context_key: str | None = CONTEXT_KEY,
                             messages_key: str = MESSAGES_KEY, metadata: Mapping[str, Any] | None = None,
                             ) -> Conversation:
    """The conversation in a thread's state ``values`` (docs/threads.md); ``metadata`` goes on the conversation.
    Raises :class:`ThreadError` naming the field for a state that cannot be read."""
    if not isinstance(values, Mapping):
        raise ThreadError(thread_id, "values", f"expected the state's values as a mapping, got {type(values).__name__}")
    messages = _messages(thread_id, values, messages_key)
    try:
        conversation = from_messages(messages, id=thread_id, metadata=dict(metadata or {}))
    except (ValueError, ValidationError) as exc:
        raise ThreadError(thread_id, f"values.{messages_key}", str(exc)) from None
    if context_key and values.get(context_key) is not None:
        nodes = _documents(thread_id, context_key, values[context_key])
        last = max((i for i, t in enumerate(conversation.turns) if t.role == "assistant"), default=None)
        if nodes and last is not None and not conversation.turns[last].retrieval_context:
            turns: list[Turn] = list(conversation.turns)
            turns[last] = turns[last].model_copy(update={"retrieval_context": nodes})
            conversation = conversation.model_copy(update={"turns": turns})
    return conversation


def thread_metadata(info: ThreadInfo, checkpoint_id: str | None) -> dict[str, Any]:
    """What the conversation keeps of where it was read: thread id, checkpoint, time, scalar metadata."""
    meta: dict[str, Any] = {f"{META_PREFIX}thread_id": info.thread_id}
    if checkpoint_id:
        meta[f"{META_PREFIX}checkpoint_id"] = checkpoint_id
    if info.updated_at is not None:
        meta[f"{META_PREFIX}updated_at"] = info.updated_at.isoformat()
    for key in ("assistant_id", "graph_id"):
        if isinstance(value := info.metadata.get(key), str):
            meta[f"{META_PREFIX}{key}"] = value
    return meta


def matches(info: ThreadInfo, assistant: str | None, metadata: Mapping[str, str] | None) -> bool:
    """Whether a thread is one asked for: run by ``assistant`` (its ``assistant_id`` or ``graph_id`` metadata) and
    holding every ``metadata`` key with that value (compared as text; a checkpointer's: its latest checkpoint's)."""
    if assistant and assistant not in (info.metadata.get("assistant_id"), info.metadata.get("graph_id")):
        return False
    return all(k in info.metadata and str(info.metadata[k]) == v for k, v in (metadata or {}).items())


def _parse_time(value: object) -> datetime | None:
    if isinstance(value, str):
        with suppress(ValueError):
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value if isinstance(value, datetime) else None


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def from_thread(graph_or_checkpointer: object, thread_id: str, *, context_key: str | None = CONTEXT_KEY,
                messages_key: str = MESSAGES_KEY) -> Conversation:
    """The conversation of thread ``thread_id`` (docs/threads.md) read from a compiled graph with a checkpointer
    (``graph.get_state``) or a checkpointer (``get_tuple``). Raises :class:`ThreadError` (a ``ValueError``)."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    if isinstance(graph_or_checkpointer, BaseCheckpointSaver):
        tup = graph_or_checkpointer.get_tuple(_config(thread_id))
        if tup is None:
            raise ThreadError(thread_id, "thread", "the checkpointer has no checkpoint for this thread")
        info = ThreadInfo(thread_id, _parse_time(tup.checkpoint.get("ts")), dict(tup.metadata or {}))
        values: Mapping[str, Any] = tup.checkpoint.get("channel_values") or {}
        checkpoint_id = tup.config["configurable"].get("checkpoint_id")
    elif callable(getattr(graph_or_checkpointer, "get_state", None)):
        snapshot = graph_or_checkpointer.get_state(_config(thread_id))  # type: ignore[attr-defined]
        checkpoint_id = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
        if checkpoint_id is None:
            raise ThreadError(thread_id, "thread", "the graph's checkpointer has no checkpoint for this thread")
        info = ThreadInfo(thread_id, _parse_time(snapshot.created_at), dict(snapshot.metadata or {}))
        values = snapshot.values
    else:
        raise TypeError(f"expected a compiled LangGraph graph or a checkpointer, got {type(graph_or_checkpointer).__name__}")
    return conversation_from_values(thread_id, values, context_key=context_key, messages_key=messages_key,
                                    metadata=thread_metadata(info, checkpoint_id))


def checkpointer_threads(checkpointer: BaseCheckpointSaver[Any]) -> list[ThreadInfo]:
    """Every thread of ``checkpointer`` (root namespace), oldest update first, with its latest checkpoint's time
    and metadata. Reads every checkpoint's tuple once (``checkpointer.list(None)``); keeps one entry per thread."""
    latest: dict[str, ThreadInfo] = {}
    for tup in checkpointer.list(None):
        conf = tup.config.get("configurable", {})
        if conf.get("checkpoint_ns") or conf.get("thread_id") is None:
            continue  # a subgraph's checkpoint: its parent thread is the conversation
        tid = str(conf["thread_id"])
        ts = _parse_time(tup.checkpoint.get("ts"))
        seen = latest.get(tid)
        if seen is None or (ts is not None and (seen.updated_at is None or ts > seen.updated_at)):
            latest[tid] = ThreadInfo(tid, ts, dict(tup.metadata or {}))
    return sorted(latest.values(), key=lambda t: (t.updated_at is None, t.updated_at or datetime.min, t.thread_id))


def load_checkpointer(checkpointer: BaseCheckpointSaver[Any], where: str, thread_ids: Sequence[str] | None = None, *,
                      assistant: str | None = None, metadata: Mapping[str, str] | None = None,
                      context_key: str | None = CONTEXT_KEY, messages_key: str = MESSAGES_KEY,
                      ) -> Iterator[LoadedConversation | InputError]:
    """The threads ``thread_ids`` (default: every thread run by ``assistant`` with ``metadata``: :func:`matches`) of
    ``checkpointer`` as conversations, read one at a time; a thread that cannot be read is an :class:`InputError`
    in the stream (``where`` names the checkpointer)."""
    try:
        ids: Iterable[str] = thread_ids if thread_ids else [
            t.thread_id for t in checkpointer_threads(checkpointer) if matches(t, assistant, metadata)]
    except Exception as exc:  # noqa: BLE001 - any saver's own failure (a corrupt file ...) is an input error
        yield InputError(where, None, None, None, f"cannot list the threads: {type(exc).__name__}: {exc}")
        return
    for tid in ids:
        yield loaded_thread(where, tid, partial(_checkpointed, checkpointer, tid, context_key, messages_key))


def _checkpointed(checkpointer: BaseCheckpointSaver[Any], tid: str, context_key: str | None,
                  messages_key: str) -> Conversation:
    try:
        return from_thread(checkpointer, tid, context_key=context_key, messages_key=messages_key)
    except ThreadError:
        raise
    except Exception as exc:  # a checkpoint the saver cannot read back: that thread only
        raise ThreadError(tid, "thread", f"unreadable checkpoint: {type(exc).__name__}: {exc}") from exc


def loaded_thread(where: str, tid: str, read: Callable[[], Conversation]) -> LoadedConversation | InputError:
    """Thread ``tid`` of ``where`` (a checkpointer or server) read by ``read``: a conversation, or the
    :class:`InputError` naming why it cannot be read."""
    try:
        conversation = read()
    except ThreadError as exc:
        return exc.input_error(where)
    return LoadedConversation(conversation=conversation, source=f"{FORMAT}:{where}#{tid}", format=FORMAT)


def checkpointer_name(spec: str) -> str:
    """``spec`` as the run shows and writes it (a PostgreSQL URL's password redacted)."""
    from .langgraph_postgres import postgres_dsn, postgres_name

    return postgres_name(spec) if postgres_dsn(spec) is not None else spec


def checkpointer_spec_error(spec: str) -> str | None:
    """What is wrong with a ``--checkpointer`` value, or None (``sqlite:PATH`` or ``postgres:DSN``, the kinds read
    from a command)."""
    from .langgraph_postgres import postgres_dsn, postgres_spec_error

    if postgres_dsn(spec) is not None:
        return postgres_spec_error(spec)
    kind, _, path = spec.partition(":")
    if kind != "sqlite" or not path:
        return f"--checkpointer {spec!r}: expected sqlite:PATH (a SqliteSaver file) or postgres:DSN (a PostgresSaver)"
    from importlib.util import find_spec

    if find_spec("langgraph.checkpoint.sqlite") is None:
        return "--checkpointer sqlite:PATH needs langgraph-checkpoint-sqlite: pip install 'judgegraph[threads]'"
    return None


@contextmanager
def open_checkpointer(spec: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """The checkpointer named by ``spec`` (``sqlite:PATH``, or ``postgres:DSN``: :mod:`.langgraph_postgres`), opened
    read-only: the agent may be writing to it. Raises ``OSError`` for a file that is missing or not a readable SQLite
    database, or a database that cannot be reached or read."""
    from .langgraph_postgres import open_postgres, postgres_dsn

    if postgres_dsn(spec) is not None:
        with open_postgres(spec) as saver:
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(spec.partition(":")[2])
    if not path.is_file():
        raise FileNotFoundError(2, "no such SqliteSaver file", str(path))
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        conn.execute("SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise OSError(f"{path}: not a SqliteSaver checkpoint file ({exc})") from None
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()
