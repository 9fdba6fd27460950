"""Agents' threads as a source of conversations, shared by ``eval`` and ``watch``: ``--checkpointer sqlite:PATH``
(or ``postgres:DSN``) or ``--langgraph-url URL``, with ``--thread``, ``--assistant``, ``--metadata``, ``--messages-key`` and ``--context-key``
(docs/threads.md)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..loaders import InputError, LoadedConversation


def add_thread_options(parser: argparse.ArgumentParser, *, threads: bool = True) -> argparse._ArgumentGroup:
    """The LangGraph source options (``threads``: with ``--thread ID``, which ``watch`` does not take)."""
    g = parser.add_argument_group("LangGraph threads", "judge an agent's threads where they live (docs/threads.md)")
    g.add_argument("--checkpointer", metavar="sqlite:PATH|postgres:DSN",
                   help="a SqliteSaver checkpoint file or a PostgresSaver database (postgres:postgres://USER@HOST/DB), "
                        "read-only (pip install 'judgegraph[threads]')")
    g.add_argument("--langgraph-url", metavar="URL", help="a LangGraph server (langgraph dev or a deployment)")
    if threads:
        g.add_argument("--thread", action="append", dest="threads", metavar="ID",
                       help="a thread to judge, repeatable (default: every thread)")
    g.add_argument("--assistant", metavar="ID", help="only threads run by this assistant (its id, or its graph id)")
    g.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE",
                   help="only threads whose metadata (a checkpointer's: its latest checkpoint's) holds KEY=VALUE, "
                        "repeatable")
    g.add_argument("--messages-key", default="messages", metavar="KEY",
                   help="the state key holding the conversation's messages (default %(default)s)")
    g.add_argument("--context-key", default="documents", metavar="KEY",
                   help="the state key holding the retrieval context, given to the last reply (default %(default)s)")
    return g


def thread_filters(args: argparse.Namespace) -> dict[str, Any]:
    """Which threads are read and how (``--assistant``, ``--metadata KEY=VALUE`` pairs checked by
    :func:`thread_source_error`, the state keys), as the thread readers take them."""
    return {"assistant": args.assistant, "metadata": dict(item.split("=", 1) for item in args.metadata),
            "context_key": args.context_key, "messages_key": args.messages_key}


def thread_source_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the LangGraph source options, or None."""
    from ..loaders.langgraph_threads import checkpointer_spec_error

    if args.checkpointer and args.langgraph_url:
        return "--checkpointer and --langgraph-url exclude each other: judge one source's threads at a time"
    if (getattr(args, "threads", None) or args.assistant or args.metadata) and not (args.checkpointer or args.langgraph_url):
        return "--thread, --assistant and --metadata need --checkpointer sqlite:PATH or --langgraph-url URL"
    if bad := next((m for m in args.metadata if "=" not in m or not m.split("=", 1)[0]), None):
        return f"--metadata {bad!r}: expected KEY=VALUE"
    if args.checkpointer:
        return checkpointer_spec_error(args.checkpointer)
    if args.langgraph_url and not args.langgraph_url.startswith(("http://", "https://")):
        return f"--langgraph-url {args.langgraph_url!r}: expected an http:// or https:// URL"
    return None


def unique(items: Iterable[LoadedConversation | InputError], where: str, field: str,
           seen: set[str]) -> Iterator[LoadedConversation | InputError]:
    """``items``, read lazily; a conversation whose id is ``seen`` already (judged from an earlier source) is an
    input error at ``where``, as a duplicate is in files."""
    from ..loaders import InputError

    for item in items:
        if not isinstance(item, InputError):
            if (cid := item.conversation.id) in seen:
                yield InputError(where, None, None, field, f"duplicate conversation id {cid!r}")
                continue
            seen.add(cid)
        yield item


def thread_inputs(args: argparse.Namespace, seen: set[str]) -> Iterator[LoadedConversation | InputError]:
    """The threads asked for, read one at a time (after the files); a thread id already judged from another source
    is a duplicate, as in files."""
    from ..loaders import InputError

    if not (args.checkpointer or args.langgraph_url):
        return
    from ..loaders.langgraph_threads import checkpointer_name

    where = checkpointer_name(args.checkpointer) if args.checkpointer else args.langgraph_url
    with ExitStack() as stack:
        if args.checkpointer:
            from ..loaders.langgraph_threads import load_checkpointer, open_checkpointer

            try:
                saver = stack.enter_context(open_checkpointer(args.checkpointer))
            except OSError as exc:
                yield InputError(where, None, None, None, str(exc))
                return
            items = load_checkpointer(saver, where, args.threads, **thread_filters(args))
        else:
            from ..loaders.langgraph_server import load_server

            items = load_server(args.langgraph_url, args.threads, **thread_filters(args))
        yield from unique(items, where, "thread", seen)
