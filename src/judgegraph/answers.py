"""Types for the structured answers judges give.

A verdict field reads what real OpenAI-compatible servers send: any case and
spacing (``" Yes "``), spaces or hyphens for underscores (``"not applicable"``),
and a sentence that starts with the word (``"No, this is off-topic."``) — as
promptfoo and deepeval read them — before a reply would be re-asked::

    class TurnVerdict(BaseModel):
        reason: str
        verdict: YesNo = Field(description="...")
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator


def read_choice(choices: Sequence[str], aliases: Mapping[str, str] | None = None) -> Callable[[Any], Any]:
    """A before-validator: ``value`` as one of ``choices`` when it plainly is one
    (see the module's doc), else unchanged (the schema then rejects it and the
    judge is re-asked with the error). ``aliases`` map other spellings
    (``{"n/a": "not_applicable"}``)."""
    longest_first = sorted(choices, key=len, reverse=True)
    extra = {k.lower(): v for k, v in (aliases or {}).items()}

    def read(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = " ".join(value.strip().lower().split())
        for candidate in (text, text.replace(" ", "_").replace("-", "_")):
            if candidate in choices:
                return candidate
            if candidate in extra:
                return extra[candidate]
        for choice in longest_first:  # "No, this is off-topic." -> "no"; "none" is tried before "no"
            spelled = re.escape(choice).replace("_", "[ _-]")
            if re.match(rf"{spelled}(?![\w-])", text):
                return choice
        return value

    return read


YesNo = Annotated[Literal["yes", "no"], BeforeValidator(read_choice(("yes", "no")))]
