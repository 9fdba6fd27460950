"""Reading replies when structured output is not enforced (fenced JSON, JSON with
text around it, a plain verdict sentence) before re-asking."""

from __future__ import annotations

import json
import re
import typing
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ValidationError

from ..data.answers import leading_choice

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def _json_candidates(text: str) -> list[str]:
    out = [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        out.append(text[start : end + 1])
    return out


@lru_cache(maxsize=128)
def _verdict_shape(schema: type[BaseModel]) -> tuple[str, dict[str, str], str | None] | None:
    """(verdict field, its words by lower case, a text field for the reply) for a "one word plus text" schema."""
    verdict: tuple[str, dict[str, str]] | None = None
    text_field: str | None = None
    for name, info in schema.model_fields.items():
        ann = info.annotation
        args = typing.get_args(ann)
        if typing.get_origin(ann) is typing.Union:  # Optional[Literal[...]]
            inner = [a for a in args if a is not type(None)]
            ann, args = (inner[0], typing.get_args(inner[0])) if len(inner) == 1 else (ann, args)
        if typing.get_origin(ann) is typing.Literal and all(isinstance(a, str) for a in args):
            if verdict is not None:
                return None  # two closed fields: a sentence cannot fill both
            verdict = (name, {a.lower(): a for a in args})
        elif ann is str:
            text_field = text_field or name
        elif info.is_required():
            return None
    return None if verdict is None else (*verdict, text_field)


def _from_sentence(text: str, schema: type[BaseModel]) -> BaseModel | None:
    shape = _verdict_shape(schema)
    if shape is None:
        return None
    field, words, text_field = shape
    word = leading_choice(text, tuple(words))  # "No doubt, ..." is not "no": re-asked
    if word is None:
        return None
    data: dict[str, Any] = {field: words[word]}
    if text_field is not None:
        data[text_field] = text.strip()
    try:
        return schema.model_validate(data)
    except ValidationError:
        return None


def lenient_parse(text: str | None, schema: type[BaseModel]) -> BaseModel | None:
    """A valid ``schema`` answer read from a reply that is not plain JSON, or None."""
    if not text or not text.strip():
        return None
    for candidate in _json_candidates(text):
        try:
            return schema.model_validate(json.loads(candidate))
        except (ValueError, ValidationError):
            continue
    return _from_sentence(text, schema)
