"""A ``.json`` list of records read one record at a time, never whole (:class:`JsonArray`): memory holds one record
and one chunk whatever the file's size; a record too deep or too big is skipped by counting brackets, unkept."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

CHUNK_CHARS = 1 << 20
#: JSON white space (a run of it, maybe empty)
WHITESPACE = re.compile(r"[ \t\n\r]*")
_SIGNIFICANT = re.compile(r'["\[\]{}]')  # outside a string: what changes the depth
_IN_STRING = re.compile(r'["\\]')  # inside a string: its end, or an escape
_SCALAR_END = re.compile(r"[,\]\s]")


@dataclass(frozen=True)
class Element:
    """One element of the list: its index, its first line, its value, or why it was skipped undecoded
    (``problem``: ``"deep"``, ``"big"`` or ``"invalid"``)."""

    index: int
    line: int
    value: Any = None
    problem: str | None = None


class JsonSyntaxError(ValueError):
    """The list is broken at ``line``/``column``: the rest of the file is not read."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.line = line


class NotUtf8(ValueError):
    """The file has a byte that is not UTF-8 at ``line``: the list ends there."""

    def __init__(self, line: int) -> None:
        super().__init__(f"not valid UTF-8 at line {line}")
        self.line = line


_BAD_BYTE = re.compile("[\udc80-\udcff]")  # a byte that was not UTF-8, as surrogateescape decodes it


class JsonArray:
    """The :class:`Element` s of the JSON list in a binary file, decoded one by one (one of more than ``max_chars``
    characters skipped unread); :class:`JsonSyntaxError` or :class:`NotUtf8` ends the list."""

    def __init__(self, fh: BinaryIO, max_chars: int, chunk: int = CHUNK_CHARS, head: bytes = b"") -> None:
        self._read = getattr(fh, "read1", fh.read)  # read1: what is there, never waits for a whole chunk
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="surrogateescape")
        self._json = json.JSONDecoder()
        self.max_chars = max_chars
        self.chunk = chunk
        self._head = head  # bytes already read from ``fh``: decoded first
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._line = 1  # the line number at buffer index self._line_at
        self._line_at = 0
        self._dropped = 0  # characters dropped from the front of the buffer so far
        self._newline = -1  # where the last newline before self._line_at is, counted from the file's start
        self._broken = False  # the text stops before a byte that is not UTF-8

    def _more(self) -> bool:
        """Read one more chunk into the buffer (dropping what is done); False at the end of the file."""
        if self.eof:
            return False
        self._compact()
        data, self._head = self._head or self._read(self.chunk), b""
        text = self._decoder.decode(data, final=not data)
        self.eof = not data
        bad = _BAD_BYTE.search(text)
        if bad is not None:  # keep the text before it; the list ends there
            text, self._broken, self.eof = text[:bad.start()], True, True
        self.buf += text
        return bool(text) or not self.eof

    def _compact(self) -> None:
        if self.pos > 0:
            self.line(self.pos)
            self.buf = self.buf[self.pos:]
            self._line_at -= self.pos
            self._dropped += self.pos
            self.pos = 0

    def line(self, at: int) -> int:
        """The line of buffer index ``at`` (``at`` never goes back before the last asked)."""
        newlines = self.buf.count("\n", self._line_at, at)
        if newlines:
            self._line += newlines
            self._newline = self._dropped + self.buf.rfind("\n", self._line_at, at)
        self._line_at = at
        return self._line

    def peek(self) -> str | None:
        """The next character after white space, or None at the end of the file."""
        while True:
            self.pos = WHITESPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return None

    def _fail(self, message: str) -> ValueError:
        """The error that ends the list: :class:`NotUtf8` when the text ran out at a bad byte."""
        at = min(self.pos, len(self.buf))
        line, column = self.line(at), self._dropped + at - self._newline
        if self._broken and self.pos >= len(self.buf) - 6:
            return NotUtf8(self.line(len(self.buf)))
        return JsonSyntaxError(message, line, column)

    def __iter__(self) -> Iterator[Element]:
        if self.peek() != "[":
            raise self._fail("Expecting '['")
        self.pos += 1
        index = 0
        if self.peek() == "]":
            self.pos += 1
        else:
            while True:
                if self.peek() is None:
                    raise self._fail("Expecting value")
                yield self._element(index)
                index += 1
                sep = self.peek()
                if sep == "]":
                    self.pos += 1
                    break
                if sep != ",":
                    raise self._fail("Expecting ',' delimiter" if sep is not None else "Expecting ',' or ']'")
                self.pos += 1
                if self.peek() == "]":
                    raise self._fail("Expecting value (a ',' before ']')")
        if self.peek() is not None:
            raise self._fail("Extra data")

    def _element(self, index: int) -> Element:
        line = self.line(self.pos)
        while True:
            try:
                value, end = self._json.raw_decode(self.buf, self.pos)
            except RecursionError:
                self._skip_value()
                return Element(index, line, problem="deep")
            except json.JSONDecodeError as exc:
                if self._broken and self._at_end(exc):
                    self.pos = len(self.buf)
                    raise self._fail(exc.msg) from None
                if self.eof or not self._at_end(exc):  # more text cannot finish the element
                    self.pos = exc.pos
                    raise self._fail(exc.msg) from None
                if len(self.buf) - self.pos > self.max_chars:
                    self._skip_value()
                    return Element(index, line, problem="big")
                if not self._grow():
                    self.pos = exc.pos
                    raise self._fail(exc.msg) from None
                continue
            except ValueError:  # an integer of more than 4,300 digits
                self._skip_value()
                return Element(index, line, problem="invalid")
            if end == len(self.buf) and self._grow():  # a number may go on in the next chunk
                continue
            big = end - self.pos > self.max_chars
            self.pos = end
            return Element(index, line, None if big else value, "big" if big else None)

    def _at_end(self, exc: json.JSONDecodeError) -> bool:
        """Whether the decoder stopped at the end of the text (not at an error inside it)."""
        return exc.pos >= len(self.buf) - 6 or exc.msg.startswith("Unterminated string")

    def _grow(self) -> bool:
        """Read until the unfinished element's text has doubled (so decoding it
        again and again costs twice its size at most); False at the end."""
        want = max(self.chunk, 2 * (len(self.buf) - self.pos))
        self._compact()
        grew = False
        while len(self.buf) < want and self._more():
            grew = True
        return grew

    def _skip_value(self) -> None:
        """Move past the element at ``pos`` by counting brackets outside strings,
        reading on in chunks and dropping what was passed: never held whole."""
        if self.peek() not in ("[", "{", '"'):  # a number or a literal: it ends at a delimiter
            while (m := _SCALAR_END.search(self.buf, self.pos)) is None:
                self.pos = len(self.buf)
                if not self._more():
                    return
            self.pos = m.start()
            return
        depth, in_string = 0, False
        while True:
            m = (_IN_STRING if in_string else _SIGNIFICANT).search(self.buf, self.pos)
            if m is None or (m.group() == "\\" and m.end() == len(self.buf)):  # read on (an escape needs what follows)
                self.pos = len(self.buf) if m is None else m.start()
                if not self._more():
                    self.pos = len(self.buf)
                    raise self._fail("Unterminated value")
                continue
            ch, self.pos = m.group(), m.end()
            if ch == "\\":
                self.pos += 1  # the escaped character
            elif ch == '"':
                in_string = not in_string
            else:
                depth += 1 if ch in "[{" else -1
            if depth == 0 and not in_string:
                return
