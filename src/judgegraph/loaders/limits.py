"""Limits that keep one bad record from breaking a run (nesting depth, size after YAML aliases, invalid Unicode;
``Limits(...)`` or ``JUDGEGRAPH_MAX_RECORD_CHARS`` / ``JUDGEGRAPH_MAX_DEPTH``), and readers that hold at most a limit's
worth of a line or a referenced file (:func:`read_lines`, :func:`read_small_file`)."""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

#: where a value is inside a parsed document: its keys and list indexes from the root
Path_ = tuple[str | int, ...]

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


@dataclass(frozen=True, eq=False)
class Refused:
    """Put in place of a part of a document that was not built (too deep, or
    expanding past the size limit through aliases); reported as that field's error."""

    message: str


def _surrogate(text: str) -> int | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def check_record(value: object, limits: Limits) -> list[tuple[Path_, str]]:
    """Problems that make a parsed record unsafe to use, each with its path; walked without recursion, shared parts
    (YAML aliases) counted each time they are reached, up to the size limit."""
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


CHUNK_BYTES = 1 << 16
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 bytes that do not start a character


def _chars(data: bytes) -> int:
    """Characters in UTF-8 ``data``: its bytes less the continuation bytes (C speed)."""
    return len(data.translate(None, _CONTINUATION))


@dataclass(frozen=True)
class TooLong:
    """Stands for a line longer than the limit: it was not kept."""

    max_chars: int


def read_lines(fh: BinaryIO, max_chars: int, chunk: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes | TooLong]]:
    """(line number, line) for each line of a binary file, its newline kept; a line of more than ``max_chars``
    characters is :class:`TooLong` once its ``max_chars + 1``-th is read, the rest skipped in chunks, never kept."""
    for lineno in itertools.count(1):
        parts: list[bytes] = []
        chars = 0
        while chars <= max_chars and not (parts and parts[-1].endswith(b"\n")):
            piece = fh.readline(min(chunk, max(1, max_chars + 1 - chars)))
            if not piece:
                break
            parts.append(piece)
            chars += _chars(piece) - piece.endswith(b"\n")
        if not parts:
            return
        if chars <= max_chars:
            yield lineno, b"".join(parts)
            continue
        piece, parts = parts[-1], []
        yield lineno, TooLong(max_chars)
        while piece and not piece.endswith(b"\n"):  # the rest of the line: read in chunks, dropped
            piece = fh.readline(chunk)


class NotARegularFile(OSError):
    """A referenced path that is a FIFO, a device, a socket or a directory."""


class FileTooLarge(Exception):
    """A referenced file over the size limit; ``size`` from ``stat`` when known."""

    def __init__(self, size: int | None) -> None:
        super().__init__(size)
        self.size = size


_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def read_small_file(path: str | Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (else :class:`FileTooLarge`), opened non-blocking and
    checked with ``fstat``: a FIFO, device, socket or directory is :class:`NotARegularFile` at once, never waited on."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(f"is {_KINDS.get(stat.S_IFMT(info.st_mode), 'not a regular file')}, not a regular file")
        if info.st_size > max_bytes:
            raise FileTooLarge(info.st_size)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise FileTooLarge(None)
        return data
    finally:
        os.close(fd)

