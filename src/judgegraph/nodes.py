"""Building blocks for metric graphs, public so custom judges can reuse them.

A *judge step* is a graph node that turns its input into one
:class:`~judgegraph.judges.JudgeRequest`, asks a judge, and turns the outcome
into a state update. :func:`judge_step` makes one such node that works under
``invoke`` and ``ainvoke`` alike from the same two pure functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableLambda

from .judges.base import Judge, JudgeOutcome, JudgeRequest


def judge_step(
    name: str,
    judge: Judge,
    build: Callable[[Any], JudgeRequest],
    finish: Callable[[Any, JudgeOutcome], dict[str, Any]],
) -> RunnableLambda:
    """A node: ``finish(input, judge(build(input)))``, sync and async."""

    def run(task: Any) -> dict[str, Any]:
        return finish(task, judge.run(build(task)))

    async def arun(task: Any) -> dict[str, Any]:
        return finish(task, await judge.arun(build(task)))

    return RunnableLambda(run, afunc=arun, name=name)


def render_messages(pairs: list[tuple[str, str]], *, empty: str = "(none)") -> str:
    """Messages as data for a prompt: one ``role: content`` block each."""
    if not pairs:
        return empty
    return "\n\n".join(f"[{role}]\n{content}" for role, content in pairs)


def conversation_json(conversation: Any, *, numbered: bool = True) -> str:
    """The whole conversation as a JSON list of ``{turn, role, content}`` (MLflow's
    session transcript shape, plus 1-based turn numbers so judges can cite turns).
    It is a value for a prompt placeholder: data, never template source."""
    import json

    rows = []
    for i, turn in enumerate(conversation.turns):
        row: dict[str, Any] = {"turn": i + 1} if numbered else {}
        row.update(role=turn.role, content=turn.content)
        rows.append(row)
    return json.dumps(rows, ensure_ascii=False, indent=1)
