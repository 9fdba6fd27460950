"""The one strict reader of a results file (``judgegraph eval --out``): :func:`read_lines`.

Every command that reads a results file to show, compare or score it (``report``, ``diff``, ``agree``,
``stability``, ``pairwise`` on a ``simulate --out`` file) reads it here, with one rule for a bad line:
**it is left out and named** (``FILE:LINE: why``, the why naming the field at fault), and the rest of the file
is read; no line is dropped silently and none stops the reading. A line is bad when it is not UTF-8, not JSON
(a last line without its newline, a run killed while writing it, is named as torn), nested too deeply, not an
object, holds a number that is not finite (``1e999`` reads as infinity), has no ``type`` or one no judgegraph
writes, or is a conversation line whose fields are not what ``eval`` writes.

A conversation id read again is **not** a bad line: the later line is a later judgement of the same
conversation (``judgegraph watch`` appends one when it retries a thread whose judge failed) and replaces the
earlier one, keeping the earlier one's place in the order; :attr:`Record.replaces` names the lines it replaced.

(A resume's own scan and ``iter_records`` stay lenient: they skip what they cannot read, and the resume
repairs a torn tail.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from .resultsfile import non_finite_field, restore_elided

RecordType = Literal["header", "conversation", "input_error", "summary", "batch"]
#: the record types a results file holds (``batch``: a batch of an ``eval --batch`` run, docs/batch.md)
RECORD_TYPES: tuple[str, ...] = get_args(RecordType)
#: a metric result's statuses (judgegraph.results.Status)
STATUSES = frozenset({"passed", "failed", "error", "not_applicable"})


@dataclass(frozen=True)
class Record:
    """A usable line: its number, its ``type`` and its JSON object (elided texts restored). A conversation's
    ``results`` is an object of metric results, each with ``verdicts`` and ``errors`` lists (empty when absent)."""

    line: int
    type: RecordType
    data: dict[str, Any]
    #: a conversation's earlier lines this one replaced (the same ``conversation_id`` judged again)
    replaces: tuple[int, ...] = ()


@dataclass(frozen=True)
class BadLine:
    """A line left out, and why (naming the field at fault when there is one)."""

    path: str
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}"


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _is_objects(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(i, dict) for i in value)


def conversation_problem(record: dict[str, Any]) -> str | None:
    """What keeps a conversation record from being used, naming the field; None when it can be. Fills in the
    absent ``results`` and each result's absent ``verdicts`` and ``errors`` (as empty) in place."""
    cid = record.get("conversation_id")
    if not isinstance(cid, str):
        return f"field 'conversation_id': expected a string, got {_type_name(cid)}"
    if record.get("results") is None:
        record["results"] = {}
    results = record["results"]
    if not isinstance(results, dict):
        return f"field 'results': expected an object of metric results, got {_type_name(results)}"
    for metric, result in results.items():
        where = f"results.{metric}"
        if not isinstance(result, dict):
            return f"field '{where}': expected an object, got {_type_name(result)}"
        status = result.get("status")
        if status is not None and status not in STATUSES:
            return f"field '{where}.status': {status!r} is not one of {', '.join(sorted(STATUSES))}"
        score = result.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            return f"field '{where}.score': expected a number or null, got {_type_name(score)}"
        for key in ("verdicts", "errors"):
            if result.get(key) is None:
                result[key] = []
            if not _is_objects(result[key]):
                return f"field '{where}.{key}': expected a list of objects"
        for i, verdict in enumerate(result["verdicts"]):
            transcript = verdict.get("transcript")
            if transcript is not None and not _is_objects(transcript):
                return f"field '{where}.verdicts[{i}].transcript': expected a list of objects"
    return None


def _parse(raw: bytes) -> dict[str, Any] | str:
    """A line as its JSON object, or why it is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not valid UTF-8 (byte {exc.start + 1} of the line)"
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        if not raw.endswith(b"\n"):  # only a last line can end without one
            return "a torn last line (a run killed while writing it): left out"
        return f"not JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:
        return "nested too deeply to read"
    if not isinstance(record, dict):
        return f"a results line is a JSON object, got {type(record).__name__}"
    if (bad := non_finite_field(record)) is not None:
        return f"field {bad!r}: not a finite number (1e999 reads as infinity): the line is left out"
    kind = record.get("type")
    if kind is None:
        return "field 'type': missing: not a results line (is it an input file rather than a results file?)"
    if kind not in RECORD_TYPES:
        return f"field 'type': expected one of {', '.join(map(repr, RECORD_TYPES))}, got {kind!r}"
    if kind == "conversation" and (wrong := conversation_problem(record)) is not None:
        return wrong
    return record


def read_lines(path: str | Path) -> Iterator[Record | BadLine]:
    """Each non-blank line of the results file ``path``: a :class:`Record` when it can be used, else a
    :class:`BadLine` (module doc). Other records and bad lines are streamed as read; conversations come last, in
    the order their ids were first read, each as its latest line. OSError when the file cannot be opened (the
    caller names it)."""
    conversations: dict[str, Record] = {}
    with Path(path).open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            record = _parse(raw)
            if isinstance(record, str):
                yield BadLine(str(path), n, record)
                continue
            kind: RecordType = record["type"]
            if kind != "conversation":
                yield Record(n, kind, record)
                continue
            restore_elided(record)
            cid = record["conversation_id"]
            earlier = conversations.get(cid)
            replaces = () if earlier is None else (*earlier.replaces, earlier.line)
            conversations[cid] = Record(n, kind, record, replaces)
    yield from conversations.values()
