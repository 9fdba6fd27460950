"""Types for judges' structured answers: a verdict field reads any case, spacing or hyphenation, and a leading word
that stands alone (``"No, off-topic."``, not ``"No doubt, ..."``: re-asked; docs/judges.md)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Literal

from pydantic import BeforeValidator


def read_choice(choices: Sequence[str], aliases: Mapping[str, str] | None = None) -> Callable[[object], object]:
    """A before-validator: ``value`` as one of ``choices`` (or ``aliases``) when it plainly
    is one, else unchanged for the schema to reject."""
    longest_first = sorted(choices, key=len, reverse=True)
    extra = {k.lower(): v for k, v in (aliases or {}).items()}

    def read(value: object) -> object:
        if not isinstance(value, str):
            return value
        text = " ".join(value.strip().lower().split())
        for candidate in (text, text.replace(" ", "_").replace("-", "_")):
            if candidate in choices:
                return candidate
            if candidate in extra:
                return extra[candidate]
        return leading_choice(value, longest_first) or value

    return read


#: What may come before the answer word: spaces, emphasis, quotes, a quote or list mark, a heading.
_LEAD = " \t\r\n*_`'\"“‘>#:-"
# After the answer word: closing emphasis or quotes, then the end, punctuation, a
# spaced dash or a line break. "No doubt", "No-brainer" and "No/yes" do not match.
_ANSWER_END = r"""[*_`'"”’]*(?:\s*$|[ \t]*[.,;:!…–—]|[ \t]*-+(?:\s|$)|[ \t]*\r?\n)"""


def leading_choice(text: str, choices: Sequence[str]) -> str | None:
    """The choice ``text`` starts with when that word is the answer, else None (leading
    marks skipped; longer choices first: "none" before "no")."""
    lowered = text.lstrip(_LEAD).lower()
    for choice in sorted(choices, key=len, reverse=True):
        spelled = re.escape(choice.lower()).replace("_", r"[\s_-]+")
        if re.match(rf"{spelled}{_ANSWER_END}", lowered):
            return choice
    return None


YesNo = Annotated[Literal["yes", "no"], BeforeValidator(read_choice(("yes", "no")))]
