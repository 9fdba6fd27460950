"""Exchanges and sliding windows over a conversation: window ``i`` holds the last ``min(i + 1, window_size)``
exchanges, its *target* the last one's reply (the rules: tests/unit/test_windows.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .conversation import Conversation, Turn


@dataclass(frozen=True)
class IndexedTurn:
    index: int  # position in Conversation.turns
    turn: Turn


@dataclass(frozen=True)
class Exchange:
    index: int
    user: tuple[IndexedTurn, ...]
    assistant: tuple[IndexedTurn, ...]
    tool: tuple[IndexedTurn, ...] = ()
    opening: tuple[IndexedTurn, ...] = ()  # assistant turns before the first user turn (a greeting)

    @property
    def turns(self) -> tuple[IndexedTurn, ...]:
        """Every turn of the exchange in conversation order (opening, user, reply, tool)."""
        return tuple(sorted((*self.opening, *self.user, *self.assistant, *self.tool), key=lambda t: t.index))

    @property
    def user_text(self) -> str:
        return "\n\n".join(t.turn.content for t in self.user)

    @property
    def reply_text(self) -> str:
        return "\n\n".join(t.turn.content for t in self.assistant)

    @property
    def turn_indices(self) -> tuple[int, ...]:
        return tuple(t.index for t in self.turns)

    @property
    def reply_turn_indices(self) -> tuple[int, ...]:
        return tuple(t.index for t in self.assistant)


@dataclass(frozen=True)
class Window:
    index: int  # == index of its last exchange
    exchanges: tuple[Exchange, ...]
    system: tuple[str, ...] = field(default=())

    @property
    def target(self) -> Exchange:
        return self.exchanges[-1]

    @property
    def context(self) -> tuple[Exchange, ...]:
        return self.exchanges[:-1]

    def context_messages(self) -> list[tuple[str, str]]:
        """(role, content) of what comes before the judged reply: earlier exchanges, then a greeting the assistant
        opened the conversation with (deepeval: part of exchange 1)."""
        target = self.target
        return [(it.turn.role, it.turn.content) for ex in self.exchanges for it in ex.turns
                if ex is not target or it in target.opening]

    def offline_inputs(self) -> dict[str, Any]:
        """What the offline judge reads of the window (``reply``, ``latest_user``, ``context``): the features an
        offline rule is fit on (``judgegraph align --offline``)."""
        target = self.target
        return {"reply": target.reply_text, "latest_user": target.user_text,
                "context": [f"{r}: {c}" for r, c in self.context_messages()]}

    def transcript(self, *, include_target_reply: bool = True) -> list[tuple[str, str]]:
        """(role, content) pairs in order, tool turns included."""
        return [(it.turn.role, it.turn.content) for ex in self.exchanges for it in ex.turns
                if include_target_reply or ex is not self.target or it not in ex.assistant]


def check_window_size(window_size: int) -> int:
    if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 1:
        raise ValueError(f"window_size must be a whole number >= 1, got {window_size!r}")
    return window_size


def exchanges(conversation: Conversation) -> list[Exchange]:
    """Group the turns of a conversation into user→assistant exchanges."""
    result: list[Exchange] = []
    opening: list[IndexedTurn] = []
    user: list[IndexedTurn] = []
    assistant: list[IndexedTurn] = []
    tool: list[IndexedTurn] = []

    def close() -> None:
        nonlocal opening, user, assistant, tool
        if not user:  # no user spoke yet: what the assistant said opens the first exchange
            opening, assistant = opening + assistant, []
            return
        if assistant:
            result.append(Exchange(len(result), tuple(user), tuple(assistant), tuple(tool), tuple(opening)))
            opening, user, assistant, tool = [], [], [], []

    for i, turn in enumerate(conversation.turns):
        it = IndexedTurn(i, turn)
        if turn.role == "system":
            continue
        if turn.role == "user":
            close()
            user.append(it)
        elif turn.role == "assistant":
            assistant.append(it)
        else:  # tool output: context of the reply being built
            tool.append(it)
    close()  # a trailing user turn with no reply is dropped here
    return result


def sliding_windows(conversation: Conversation, window_size: int) -> list[Window]:
    """One window per exchange: the last ``min(i + 1, window_size)`` exchanges."""
    return windows_from_exchanges(conversation, exchanges(conversation), window_size)


def windows_from_exchanges(conversation: Conversation, exs: list[Exchange], window_size: int) -> list[Window]:
    """:func:`sliding_windows` over exchanges computed once."""
    check_window_size(window_size)
    system = tuple(t.content for t in conversation.turns if t.role == "system")
    return [Window(i, tuple(exs[max(0, i - window_size + 1) : i + 1]), system) for i in range(len(exs))]
