"""Limits that keep one bad record from breaking a run: nesting depth, record
size (after YAML alias expansion), and text that is not valid Unicode.

A record over a limit is refused with an error naming its field; the other
records of the file still load. The defaults suit real conversations (a
conversation of a few megabytes, tool arguments nested a few levels); raise them
with ``Limits(...)`` (Python) or the ``JUDGEGRAPH_MAX_RECORD_CHARS`` /
``JUDGEGRAPH_MAX_DEPTH`` environment variables (read when a file is opened).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

Path_ = tuple[Any, ...]

DEFAULT_MAX_RECORD_CHARS = 10_000_000
DEFAULT_MAX_DEPTH = 100


@dataclass(frozen=True)
class Limits:
    """``max_record_chars``: the characters a record may hold, counting every
    string (and key) as often as YAML aliases repeat it; ``max_depth``: how deeply
    objects and lists may nest inside a record."""

    max_record_chars: int = DEFAULT_MAX_RECORD_CHARS
    max_depth: int = DEFAULT_MAX_DEPTH

    @classmethod
    def from_env(cls) -> Limits:
        def read(name: str, default: int) -> int:
            raw = os.environ.get(name, "").strip()
            if not raw:
                return default
            try:
                value = int(raw.replace("_", ""))
            except ValueError:
                raise ValueError(f"{name} must be a whole number (got {raw!r})") from None
            if value < 1:
                raise ValueError(f"{name} must be >= 1 (got {value})")
            return value

        return cls(read("JUDGEGRAPH_MAX_RECORD_CHARS", DEFAULT_MAX_RECORD_CHARS),
                   read("JUDGEGRAPH_MAX_DEPTH", DEFAULT_MAX_DEPTH))


class Refused:
    """Put in place of a part of a document that was not built (too deep, or
    expanding past the size limit through aliases); reported as that field's error."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __repr__(self) -> str:
        return f"Refused({self.message!r})"


def _surrogate(text: str) -> int | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def check_record(value: Any, limits: Limits) -> list[tuple[Path_, str]]:
    """Problems that make a parsed record unsafe to use, each with its path.

    Walks the value without recursion, so any nesting is reported, never a
    ``RecursionError``. Shared sub-objects (YAML aliases) are counted each time
    they are reached, up to the size limit, which bounds the walk."""
    problems: list[tuple[Path_, str]] = []
    refused: set[int] = set()  # each refused part once, however many aliases reach it
    chars = 0
    stack: list[tuple[Path_, Any, int]] = [((), value, 0)]
    while stack:
        path, item, depth = stack.pop()
        if isinstance(item, Refused):
            if id(item) not in refused:
                refused.add(id(item))
                problems.append((_short(path), item.message))
            continue
        if isinstance(item, str):
            chars += len(item)
            at = _surrogate(item)
            if at is not None:
                problems.append((path, (
                    f"text holds a lone surrogate {item[at]!r} at character {at + 1} (an escape such as "
                    "\\udfff that is not valid Unicode): the record is refused; fix the escape in the file"
                )))
        elif isinstance(item, (dict, list)):
            if depth >= limits.max_depth:
                problems.append((_short(path), f"nested more than {limits.max_depth} levels deep: the record is refused"))
                continue
            pairs = list(item.items() if isinstance(item, dict) else enumerate(item))
            for key, child in reversed(pairs):  # visited in document order
                if isinstance(key, str):
                    chars += len(key)
                    if _surrogate(key) is not None:
                        problems.append((path, f"a key holds a lone surrogate ({key!r}): the record is refused"))
                        continue
                stack.append((path + (key,), child, depth + 1))
        if chars > limits.max_record_chars:
            return [(path, (
                f"the record holds more than {limits.max_record_chars:,} characters (YAML aliases counted "
                "as often as they repeat): refused; raise JUDGEGRAPH_MAX_RECORD_CHARS if it is genuine"
            ))]
        if len(problems) > 20:
            break
    return problems


def _short(path: Path_, keep: int = 6) -> Path_:
    """A field path fit to print: a 1,000-level path is cut after ``keep`` steps."""
    return path if len(path) <= keep else (*path[:keep], f"...({len(path) - keep} more levels)")
