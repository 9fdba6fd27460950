"""Aggregating several structured answers to one request into one (a jury's, :mod:`.jury`), generically over
the answer's schema (docs/juries.md): the *decisions* are its fields of a closed type (``Literal``, ``bool``,
``Enum``, ``int``, ``float``, lists of those, and those of sub-models in lists, plus the lists' lengths), free
text is never compared. Each decision is aggregated by ``mode``; the answer returned is the *representative*:
the first answer agreeing most with the aggregate, its decisions set to it (unchanged if the schema refuses).
"""

from __future__ import annotations

import enum
import statistics
import types
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ..data.aggregates import AGGREGATES, Aggregate

__all__ = ["AGGREGATES", "Aggregate", "combine", "decisions"]


Kind = Literal["choice", "whole", "real", "model", "models", "text"]
Path = tuple[Union[str, int], ...]
LENGTH = "#"  # the path step naming a list's length


def _kind(annotation: Any) -> Kind:
    """What aggregating a field of this type means (see the module doc)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _kind(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        kinds = {_kind(a) for a in get_args(annotation) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else "text"
    if origin is Literal or annotation is bool:
        return "choice"
    if origin in (list, tuple, set, frozenset):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        inner = {_kind(a) for a in args}
        if inner == {"model"}:
            return "models"
        return "choice" if inner and inner <= {"choice", "whole"} else "text"
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return "choice"
        if issubclass(annotation, BaseModel):
            return "model"
        if issubclass(annotation, int):
            return "whole"
        if issubclass(annotation, float):
            return "real"
    return "text"


def decisions(answer: BaseModel, path: Path = ()) -> dict[Path, tuple[Kind, Any]]:
    """Every decision of ``answer`` by its path (field names and list indices): ``(kind, value)``."""
    out: dict[Path, tuple[Kind, Any]] = {}
    for name, info in type(answer).model_fields.items():
        value, kind, here = getattr(answer, name, None), _kind(info.annotation), (*path, name)
        if kind == "model" and isinstance(value, BaseModel):
            out.update(decisions(value, here))
        elif kind == "models" and isinstance(value, (list, tuple)):
            out[here + (LENGTH,)] = ("whole", len(value))
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    out.update(decisions(item, (*here, i)))
        elif kind in ("choice", "whole", "real") and value is not None:
            out[here] = (kind, value)
    return out


def _key(value: Any) -> Hashable:
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(_key(v) for v in value)
    return value if isinstance(value, Hashable) else repr(value)


def _majority(values: Sequence[Any]) -> Any:
    """The value given most often; a tie: the one given first."""
    keys = [_key(v) for v in values]
    return values[keys.index(Counter(keys).most_common(1)[0][0])]  # most_common keeps first-seen order on ties


def _yes(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "yes")


def _tilted(values: Sequence[Any], mode: Aggregate) -> Any:
    """``unanimous``/``any`` on a yes/no decision (see the module doc)."""
    yes = [v for v in values if _yes(v)]
    if not yes:
        return _majority(values)
    if mode == "any":
        return yes[0]
    others = [v for v in values if not _yes(v)]
    return values[0] if not others else _majority(others)


def _aggregate(kind: Kind, values: Sequence[Any], mode: Aggregate) -> Any:
    if kind == "real":
        return statistics.fmean(values) if mode == "mean" else statistics.median(values)
    if kind == "whole" and mode == "mean" and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return round(statistics.fmean(values))
    if mode in ("unanimous", "any") and kind == "choice":
        return _tilted(values, mode)
    return _majority(values)


def _same(a: Any, b: Any) -> bool:
    return _key(a) == _key(b)


def combine(answers: Sequence[BaseModel], mode: Aggregate = "majority") -> BaseModel:
    """One answer from several answers to the same request (see the module doc)."""
    if not answers:
        raise ValueError("combine: no answers")
    found = [decisions(a) for a in answers]
    paths = list(dict.fromkeys(p for d in found for p in d))
    target: dict[Path, Any] = {}
    for path in paths:
        given = [d[path] for d in found if path in d]
        target[path] = _aggregate(given[0][0], [v for _, v in given], mode)
    if not target:
        return answers[0]

    def agreement(i: int) -> tuple[int, int]:
        mine = found[i]
        lengths = all(_same(mine.get(p, (None, None))[1], v) for p, v in target.items() if p[-1] == LENGTH)
        return int(lengths), sum(1 for p, v in target.items() if p in mine and _same(mine[p][1], v))

    best = max(range(len(answers)), key=lambda i: (agreement(i), -i))
    chosen = answers[best]
    changes = {p: v for p, v in target.items() if p[-1] != LENGTH and p in found[best] and not _same(found[best][p][1], v)}
    if not changes:
        return chosen
    data = chosen.model_dump()
    for path, value in changes.items():
        _set(data, path, list(value) if isinstance(value, tuple) else value)
    try:
        return type(chosen).model_validate(data)
    except ValidationError:
        return chosen


def _set(data: Any, path: Path, value: Any) -> None:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = value
