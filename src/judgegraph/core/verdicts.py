"""What judge steps make of a judge's answer and show of an exchange, written once for every metric: the
:class:`~judgegraph.data.results.Verdict` fields of an outcome (:func:`answer_fields`), a window's verdict
(:func:`window_verdict`), the prompt values of an exchange (:func:`exchange_values`) and an answer that is a list
of items (:func:`list_answer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, Field, create_model

from ..data.results import WindowVerdict
from ..data.windows import Window
from ..judges.base import JudgeOutcome
from .nodes import OutcomeFields, outcome_fields, render_messages, turn_label

W = TypeVar("W", bound=WindowVerdict)

#: What a prompt shows for an exchange with no earlier message, and for a reply no user message asked for.
NO_CONTEXT = "(none: this is the first exchange)"
NO_USER = "(none: the assistant spoke first)"


class AnswerFields(OutcomeFields):
    """:class:`~judgegraph.core.nodes.OutcomeFields` and the answer's ``verdict`` and ``reason``."""

    verdict: Any
    reason: str


def answer(outcome: JudgeOutcome) -> Any:
    """The judge's answer (its structured value), None on a judge error."""
    return outcome.value if outcome.ok else None


def answer_fields(outcome: JudgeOutcome) -> AnswerFields:
    """The verdict fields an outcome fills: the :func:`answer`'s ``verdict`` and ``reason`` (None and "" on a judge
    error) and :func:`~judgegraph.core.nodes.outcome_fields`."""
    value = answer(outcome)
    return AnswerFields(verdict=getattr(value, "verdict", None), reason=getattr(value, "reason", ""),
                        **outcome_fields(outcome))


def window_verdict(cls: type[W], window: Window, outcome: JudgeOutcome, **fields: Any) -> W:
    """The verdict of one window's judge call: the window, its reply's turns and text, the answer's fields
    (:func:`answer_fields`) and the metric's own ``fields``."""
    return cls(window=window.index, turns=list(window.target.reply_turn_indices), reply=window.target.reply_text,
               **answer_fields(outcome), **fields)


def window_where(v: Any) -> str:
    """Where a window's verdict is, for an error: ``"window 3 (turn 6)"``."""
    return f"window {getattr(v, 'window', '?')} ({turn_label(v.turns)})"


def exchange_values(
    user_message: str, context: Sequence[tuple[str, str]], system: Sequence[str] | None = None
) -> dict[str, str]:
    """An exchange's prompt values: ``system`` (the system messages, when given), ``context`` (the messages
    before the judged reply, :func:`~judgegraph.core.nodes.render_messages`) and ``user_message``, each with the
    text a prompt shows when there is none."""
    values = {} if system is None else {"system": "\n\n".join(system) or "(none)"}
    return {**values, "context": render_messages(context, empty=NO_CONTEXT), "user_message": user_message or NO_USER}


def list_answer(
    name: str, field: str, item: type[BaseModel], description: str, *, module: str, doc: str | None = None
) -> type[BaseModel]:
    """The schema of an answer that is one list, ``field``, of ``item`` answers (``description``: the field's, for the
    judge), named ``name`` in ``module`` with the docstring ``doc``: the same JSON schema as the class written out."""
    fields: dict[str, Any] = {field: (list[item], Field(description=description))}  # type: ignore[valid-type]
    return create_model(name, __doc__=doc, __module__=module, **fields)
