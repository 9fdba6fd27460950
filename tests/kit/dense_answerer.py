"""A scripted relevance judge for both modes of turn relevancy: per window (``<reply_to_judge>``) and
dense (``<exchanges>`` + ``<items>``, judgegraph.core._dense). Each verdict depends only on the reply it
names, so a faithful dense mode gives the per-window verdicts exactly.

The label: a reply holding ``OFFTOPIC`` is irrelevant ("no"), any other relevant ("yes").
``break_exchanges`` / ``drop_exchanges``: exchanges (1-based) whose item is answered malformed / left
out of a dense answer the first time it is asked (every time with ``always``) — to test re-asks.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from typing import Any

from tests.kit.openai_server import ChatRequest, Reply, structured

MARK = "OFFTOPIC"


def label(reply: str) -> dict[str, str]:
    if MARK in reply:
        return {"reason": "The reply is about something else.", "verdict": "no"}
    return {"reason": "The reply answers the question.", "verdict": "yes"}


def _section(text: str, tag: str) -> str:
    m = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    return m.group(1) if m else ""


def dense_items(text: str) -> list[dict[str, Any]]:
    """Each item of a dense prompt with the text of the reply it names (``reply``)."""
    turns = {row["turn"]: row for row in map(json.loads, filter(None, _section(text, "exchanges").splitlines()))}
    items = []
    for row in map(json.loads, filter(None, _section(text, "items").splitlines())):
        reply = "\n\n".join(turns[t]["content"] for t in row["reply_turns"] if t in turns)
        items.append({**row, "reply": reply})
    return items


class RelevanceAnswerer:
    """A loopback-server responder (``FakeOpenAIServer(RelevanceAnswerer())``); thread safe."""

    def __init__(self, *, break_exchanges: Iterable[int] = (), drop_exchanges: Iterable[int] = (),
                 always: bool = False) -> None:
        self.break_exchanges, self.drop_exchanges = set(break_exchanges), set(drop_exchanges)
        self.always = always  # break / drop them every time, not only the first
        self.dense_calls: list[list[int]] = []  # the exchanges (1-based) of each dense request, in order
        self._seen: set[int] = set()
        self._lock = threading.Lock()

    def answer(self, text: str) -> dict[str, Any]:
        if "<items>" not in text:
            return label(_section(text, "reply_to_judge"))
        items = dense_items(text)
        with self._lock:
            self.dense_calls.append([i["exchange"] for i in items])
            fresh = {i["exchange"] for i in items} - (set() if self.always else self._seen)
            self._seen.update(fresh)
        out = []
        for i in items:
            if i["exchange"] in fresh & self.drop_exchanges:
                continue
            if i["exchange"] in fresh & self.break_exchanges:
                out.append({"item": i["item"], "reason": "?", "verdict": "maybe"})
                continue
            out.append({"item": i["item"], **label(i["reply"])})
        return {"items": out}

    def __call__(self, request: ChatRequest) -> Reply:
        return structured(self.answer(request.text))
