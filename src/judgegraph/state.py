"""The public contract every metric graph shares, so metrics compose.

A metric graph reads ``conversation`` (a :class:`Conversation` or a dict in
judgegraph's format) and writes ``results``: ``{metric name: MetricResult}``,
merged across metrics by :func:`merge_results`. A report graph may also hand
its metrics the conversation's ``exchanges``, computed once.
"""

from __future__ import annotations

from typing import Annotated, Any

from typing_extensions import NotRequired, TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from .conversation import Conversation
from .results import MetricResult, merge_results
from .windows import Exchange


class MetricInput(TypedDict):
    conversation: Conversation | dict[str, Any]
    exchanges: NotRequired[list[Exchange]]  # precomputed by a report graph; metrics may reuse them


class MetricOutput(TypedDict):
    results: Annotated[dict[str, MetricResult], merge_results]
