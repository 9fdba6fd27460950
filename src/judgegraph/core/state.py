"""The public contract every metric graph shares, so metrics compose.

A metric graph reads ``conversation`` or ``messages`` (as in ``MessagesState``) and
writes ``results`` (``{metric name: MetricResult}``, merged by :func:`merge_results`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from typing_extensions import NotRequired, TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from ..data.conversation import Conversation, as_conversation, from_messages
from ..data.results import JudgeAttempt, MetricResult, merge_calls, merge_results


class MetricInput(TypedDict):
    conversation: NotRequired[Conversation | dict[str, Any]]
    messages: NotRequired[list[Any]]  # LangChain messages, when there is no ``conversation``


class MetricOutput(TypedDict):
    results: Annotated[dict[str, MetricResult], merge_results]


class MetricState(TypedDict, total=False):
    """What every metric graph's state holds besides its own keys (metric states extend it)."""

    conversation: Conversation | dict[str, Any]
    messages: list[Any]
    results: Annotated[dict[str, MetricResult], merge_results]
    #: Requests of judge steps whose update holds no verdict (extractions, ...): the score node puts them in
    #: the result's ``transcript`` (:func:`judgegraph.core.nodes.judge_step` fills it).
    judge_calls: Annotated[list[JudgeAttempt], merge_calls]


def conversation_of(state: Mapping[str, Any]) -> Conversation:
    """The state's ``conversation`` (validated), or its ``messages`` converted."""
    if state.get("conversation") is not None:
        return as_conversation(state["conversation"])
    if state.get("messages"):
        return from_messages(state["messages"])
    raise ValueError("a judge graph's input needs 'conversation' (a Conversation or a dict in judgegraph's format)"
                     " or 'messages' (LangChain messages)")
