"""One results file read for a comparison: its run header and last summary (when it has them), its
conversation lines by id, and a ``FILE:LINE: why`` for every line that cannot be used.

Nothing here stops at a bad line: a line that is not JSON, not an object, holds a number that is not finite,
or a conversation line whose fields are not what ``judgegraph eval`` writes is named and left out, and the
rest is read. A last line without its newline (a run killed while writing it) is used when it is complete
JSON, else named as torn. Older files have no header: :attr:`RunFile.header` is None then.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..resultsfile import non_finite_field, restore_elided

#: a metric result's statuses (judgegraph.results.Status)
STATUSES = frozenset({"passed", "failed", "error", "not_applicable"})


@dataclass
class Conversation:
    """A conversation line: its id, position in the input (its ``position`` field, else its order in the file),
    the run's error (the whole conversation failed) and its results by metric (JSON data as written)."""

    conversation_id: str
    position: int
    line: int
    error: str | None
    results: dict[str, dict[str, Any]]


@dataclass
class RunFile:
    path: str
    header: dict[str, Any] | None = None  # the first header record
    summary: dict[str, Any] | None = None  # the last summary record (a resumed run appends another)
    conversations: dict[str, Conversation] = field(default_factory=dict)  # by id, the first line of each
    input_errors: int = 0
    problems: list[str] = field(default_factory=list)  # FILE:LINE: why, for every line left out
    notes: list[str] = field(default_factory=list)  # FILE:LINE: what was read but is worth knowing

    def facts(self) -> dict[str, Any]:
        """What the file says about its run: conversations, and from the header and summary (when there) the
        judgegraph version, start, judges, duration and cost."""
        header, summary = self.header or {}, self.summary or {}
        judges = header.get("judges")
        return {"path": self.path, "conversations": len(self.conversations), "header": self.header is not None,
                "judgegraph": header.get("judgegraph"), "started_at": header.get("started_at"),
                "judges": [str(j.get("name")) for j in judges if isinstance(j, dict)] if isinstance(judges, list)
                else None,
                "duration_s": summary.get("duration_s"), "cost_usd": summary.get("cost_usd")}

    @property
    def metrics(self) -> list[str]:
        """The metrics judged in this file, in order of first appearance; when no line has a result (every run
        failed), those its header names."""
        seen: dict[str, None] = {}
        for conv in self.conversations.values():
            seen.update(dict.fromkeys(conv.results))
        if not seen and self.header is not None and isinstance(self.header.get("metrics"), list):
            seen.update(dict.fromkeys(str(m["name"]) for m in self.header["metrics"] if isinstance(m, dict)
                                      and isinstance(m.get("name"), str)))
        return list(seen)


def _check_result(key: str, result: object) -> str | None:
    """What is wrong with a metric result read from a line, or None."""
    if not isinstance(result, dict):
        return f"field 'results.{key}': a metric result is an object, got {type(result).__name__}"
    status = result.get("status")
    if status is not None and status not in STATUSES:
        return f"field 'results.{key}.status': {status!r} is not one of {', '.join(sorted(STATUSES))}"
    score = result.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        return f"field 'results.{key}.score': a number or null, got {type(score).__name__}"
    verdicts = result.get("verdicts")
    if verdicts is not None and not (isinstance(verdicts, list) and all(isinstance(v, dict) for v in verdicts)):
        return f"field 'results.{key}.verdicts': a list of objects"
    return None


def _conversation(record: dict[str, Any], where: str, position: int, line: int) -> tuple[Conversation | None, str]:
    cid = record.get("conversation_id")
    if not isinstance(cid, str):
        return None, f"{where}: field 'conversation_id': a string, got {type(cid).__name__}"
    results = record.get("results")
    if results is None:
        results = {}
    if not isinstance(results, dict):
        return None, f"{where}: field 'results': an object, got {type(results).__name__}"
    for key, result in results.items():
        if (why := _check_result(key, result)) is not None:
            return None, f"{where}: {why}"
    for result in results.values():  # the judge transcripts are not compared: not kept in memory
        result.pop("transcript", None)
        for verdict in result.get("verdicts") or []:
            verdict.pop("transcript", None)
    pos = record.get("position")
    if isinstance(pos, int) and not isinstance(pos, bool) and pos >= 0:
        position = pos
    error = record.get("error")
    return Conversation(cid, position, line, str(error) if error else None, results), ""


def read_run(path: str | Path) -> RunFile:
    """The results file ``path`` as a :class:`RunFile`. OSError when it cannot be opened (the caller names it)."""
    run = RunFile(str(path))
    with Path(path).open("rb") as fh:
        order = 0
        for n, raw in enumerate(fh, start=1):
            order = _read_line(run, f"{path}:{n}", n, raw, order)
    return run


def _read_line(run: RunFile, where: str, n: int, raw: bytes, order: int) -> int:
    """Read one line into ``run``; the position the next conversation line has."""
    if not raw.strip():
        return order
    torn = not raw.endswith(b"\n")  # only a last line can end without one
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        run.problems.append(f"{where}: not valid UTF-8 (byte {exc.start + 1} of the line)")
        return order
    except (ValueError, RecursionError) as exc:
        run.problems.append(f"{where}: a torn last line (a run killed while writing it): left out" if torn
                            else f"{where}: not JSON ({exc})")
        return order
    if not isinstance(record, dict):
        run.problems.append(f"{where}: a results line is a JSON object, got {type(record).__name__}")
        return order
    if (bad := non_finite_field(record)) is not None:
        run.problems.append(f"{where}: field {bad!r}: not a finite number")
        return order
    kind = record.get("type")
    if kind is None and "conversation_id" not in record:
        run.problems.append(f"{where}: not a results line (no 'type', no 'conversation_id'): "
                            "is it an input file rather than a results file?")
    elif kind == "header":
        if run.header is None:
            run.header = record
    elif kind == "summary":
        run.summary = record
    elif kind == "input_error":
        run.input_errors += 1
    elif kind in (None, "conversation"):
        conv, why = _conversation(restore_elided(record), where, order, n)
        if conv is None:
            run.problems.append(why)
        elif conv.conversation_id in run.conversations:
            first = run.conversations[conv.conversation_id].line
            run.notes.append(f"{where}: conversation {conv.conversation_id!r} again (line {first} is used)")
        else:
            run.conversations[conv.conversation_id] = conv
            order += 1
    # any other type: a record of a newer judgegraph, not about a conversation's results
    return order
