"""The loaders' result types, where a record sits in its file (:class:`Ctx`) and the problems found in it
(:class:`RecordErrors`: a path inside the record and a message), which :mod:`.detect` turns into :class:`InputError` s."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgegraph.data.conversation import Conversation

from .limits import Limits, Path_

MAX_ERRORS_PER_RECORD = 5

@dataclass(frozen=True)
class InputError:
    """One problem with an input file or one of its records: ``line`` 1-based, ``record`` the record's 0-based index
    in its file (``.jsonl``: among its non-skipped lines), ``field`` a dotted path inside it (``turns.2.role``)."""

    file: str
    line: int | None
    record: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        parts = [f"{self.file}:{self.line}" if self.line is not None else self.file]
        if self.line is None and self.record is not None:
            parts.append(f"record {self.record}")
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)


@dataclass(frozen=True)
class LoadedConversation:
    """A conversation plus where it came from and the options found with it."""

    conversation: Conversation
    source: str
    format: str
    options: dict[str, Any] = field(default_factory=dict)
    #: every metric the file asks for, in order (promptfoo: one per (not-)conversation-relevance
    #: assertion), each an options dict like ``options`` plus ``negate`` / ``key`` where set
    assertions: tuple[dict[str, Any], ...] = ()


@dataclass
class LoadResult:
    conversations: list[LoadedConversation] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def raise_for_errors(self) -> None:
        if self.errors:
            raise InputFormatError(self.errors)


class InputFormatError(ValueError):
    """Raised by :func:`load_conversations` when any input problem was found."""

    def __init__(self, errors: list[InputError]):
        self.errors = list(errors)
        shown = "\n".join(f"  {e}" for e in self.errors[:20])
        more = f"\n  ... and {len(self.errors) - 20} more" if len(self.errors) > 20 else ""
        n = len(self.errors)
        super().__init__(f"{n} input error{'s' if n != 1 else ''}:\n{shown}{more}")


class RecordErrors(Exception):
    """Problems found while converting one record: (path inside record, message)."""

    def __init__(self, problems: list[tuple[Path_, str]]):
        super().__init__(problems)
        self.problems = problems


def fail(path: Path_, message: str) -> RecordErrors:
    return RecordErrors([(path, message)])


def unknown_key(key: object, allowed: Iterable[str]) -> str:
    allowed = list(allowed)
    close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{hint}; allowed: {', '.join(allowed)}"


def check_keys(obj: dict[str, Any], allowed: Iterable[str], path: Path_) -> list[tuple[Path_, str]]:
    allowed = list(allowed)
    return [(path + (k,), unknown_key(k, allowed)) for k in obj if k not in allowed]


def record_messages(rec: dict[str, Any], allowed: Iterable[str]) -> list[Any]:
    """The messages of a ``{"messages": [...], ...}`` record; :class:`RecordErrors` for every key not in ``allowed``
    and a ``messages`` that is not a non-empty list."""
    problems = check_keys(rec, allowed, ())
    messages = rec.get("messages")
    if not isinstance(messages, list):
        problems.append((("messages",), f"must be a list of messages (got {type(messages).__name__})"))
    if problems:
        raise RecordErrors(problems)
    if not messages:
        raise fail(("messages",), "a conversation needs at least one message")
    return messages


_TYPE_TAG = re.compile(r"[\[\]()]|^(str|int|float|bool|dict|list|none|bytes|function-\w+)$")


def pydantic_problems(exc: ValidationError) -> list[tuple[Path_, str]]:
    """Turn a pydantic error into (path, message) pairs; union branches are merged."""
    merged: dict[Path_, list[str]] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(err.get("loc", ()))
        kind = err.get("type", "")
        if kind == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}" if loc else "unknown key"
        else:
            loc = tuple(s for s in loc if not (isinstance(s, str) and _TYPE_TAG.search(s)))
            msg = err.get("msg", "invalid value").removeprefix("Value error, ")
            if kind == "literal_error":
                msg += f" (got {err.get('input')!r})"
            elif kind.endswith("_type") and "input" in err:
                msg += f" (got {type(err['input']).__name__})"
            if not loc and "at least one turn" in msg:
                loc = ("turns",)
        msgs = merged.setdefault(loc, [])
        if msg not in msgs:
            msgs.append(msg)
    return [(loc, " or ".join(msgs)) for loc, msgs in merged.items()]


def rename(path: Path_, renames: list[tuple[Path_, Path_]]) -> Path_:
    """Map a path of the normalised dict back to the path in the raw record."""
    best = max((r for r in renames if path[:len(r[0])] == r[0]), key=lambda r: len(r[0]), default=None)
    return path if best is None else best[1] + path[len(best[0]):]


@dataclass
class Ctx:
    """Where a record sits, for ids, sources and error positions."""

    file: str
    stem: str
    kind: str  # jsonl | json | yaml
    record: int
    line: int | None  # the record's first line
    base: Path_  # path of the record from the document root
    prefix: Path_ = ()  # shown before fields (("tests", 3) for promptfoo documents)
    line_of: Callable[[Path_], int | None] | None = None
    doc: dict[str, Any] | None = None  # promptfoo document (prompts, defaultTest)
    limits: Limits = field(default_factory=Limits)
    folder: Path | None = None  # the file's folder: where promptfoo file:// references are read from
    allow_outside_files: bool = False  # file:// references may leave that folder

    @property
    def fallback_id(self) -> str:
        if self.kind == "jsonl" and self.line is not None:
            return f"{self.stem}:{self.line}"
        return f"{self.stem}#{self.record}"

    @property
    def source(self) -> str:
        # .jsonl and .yaml records are found by line; .json records by index
        if self.kind != "json" and self.line is not None:
            return f"{self.file}:{self.line}"
        return f"{self.file}#{self.record}"

    def error(self, path: Path_, message: str) -> InputError:
        line = (self.line_of(self.base + path) if self.line_of else None) or self.line
        fld = ".".join(str(p) for p in self.prefix + path) or None
        return InputError(self.file, line, self.record, fld, message)


def clean_id(value: object, ctx: Ctx, path: Path_) -> str:
    if value is None or value == "":
        return ctx.fallback_id
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise fail(path, f"id must be a string (got {type(value).__name__})")
    return str(value)


def validate(data: dict[str, Any], renames: list[tuple[Path_, Path_]] | None = None) -> Conversation:
    turns = data.get("turns")
    if isinstance(turns, list) and not turns:
        raise fail(rename(("turns",), renames or []), "a conversation needs at least one turn")
    try:
        return Conversation.model_validate(data)
    except ValidationError as exc:
        raise RecordErrors([(rename(p, renames or []), m) for p, m in pydantic_problems(exc)]) from None


def metadata(value: object, path: Path_) -> dict[str, Any]:
    """A record's metadata object at ``path`` (a copy; None: empty), else a record error naming ``path``."""
    if value is not None and not isinstance(value, dict):
        raise fail(path, f"must be an object (got {type(value).__name__})")
    return dict(value or {})


def pick(obj: dict[str, Any], path: Path_, *names: str) -> tuple[str | None, Any]:
    present = [n for n in names if n in obj]
    if len(present) > 1:
        raise fail(path + (present[1],), f"give only one of {', '.join(map(repr, present))}")
    return (present[0], obj[present[0]]) if present else (None, None)
