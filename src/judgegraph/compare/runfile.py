"""One results file read for a comparison: its run header and last summary (when it has them), its
conversation lines by id, and a ``FILE:LINE: why`` for every line that cannot be used.

Read by :func:`judgegraph.resultsread.read_lines`, whose rule this follows: a bad line (not JSON, not an
object, a number that is not finite, a torn last line, a conversation line whose fields are not what
``judgegraph eval`` writes) is named in :attr:`RunFile.problems` and left out, and the rest is read; a
conversation judged again later in the file (a watch's retry) is read as its latest line. Older files have no header: :attr:`RunFile.header` is None then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..resultsread import STATUSES, BadLine, read_lines
from ..runfacts import RunFacts, facts_of

__all__ = ["STATUSES", "Conversation", "RunFile", "read_run"]


@dataclass
class Conversation:
    """A conversation line: its id, position in the input (its ``position`` field, else its order in the file),
    the run's error (the whole conversation failed) and its results by metric (JSON data as written)."""

    conversation_id: str
    position: int
    line: int
    error: str | None
    results: dict[str, dict[str, Any]]
    cost_usd: object = None  # the line's cost_usd, as written


@dataclass
class RunFile:
    path: str
    header: dict[str, Any] | None = None  # the first header record
    summary: dict[str, Any] | None = None  # the last summary record (a resumed run appends another)
    conversations: dict[str, Conversation] = field(default_factory=dict)  # by id, the latest line of each
    input_errors: int = 0
    rejudged: int = 0  # conversations judged again later in the file (their earlier lines replaced)
    problems: list[str] = field(default_factory=list)  # FILE:LINE: why, for every line left out

    def facts(self) -> RunFacts:
        """What the file says about its run (:func:`judgegraph.runfacts.facts_of`, as the HTML report reads it):
        conversations, and from the header and summary (else the lines) judges, thresholds, pass rates, judgegraph
        version, start, duration and cost."""
        return facts_of(self.path, self.header, self.summary,
                        [{"results": c.results, "cost_usd": c.cost_usd} for c in self.conversations.values()])

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


def _conversation(record: dict[str, Any], position: int, line: int) -> Conversation:
    """A conversation record (its shape checked by the reader) as a :class:`Conversation`."""
    results: dict[str, dict[str, Any]] = record["results"]
    for result in results.values():  # the judge transcripts are not compared: not kept in memory
        result.pop("transcript", None)
        for verdict in result["verdicts"]:
            verdict.pop("transcript", None)
    pos = record.get("position")
    if isinstance(pos, int) and not isinstance(pos, bool) and pos >= 0:
        position = pos
    error = record.get("error")
    return Conversation(record["conversation_id"], position, line, str(error) if error else None, results,
                        record.get("cost_usd"))


def read_run(path: str | Path) -> RunFile:
    """The results file ``path`` as a :class:`RunFile`. OSError when it cannot be opened (the caller names it)."""
    run = RunFile(str(path))
    for item in read_lines(path):
        if isinstance(item, BadLine):
            run.problems.append(str(item))
        elif item.type == "header":
            run.header = run.header or item.data
        elif item.type == "summary":
            run.summary = item.data
        elif item.type == "input_error":
            run.input_errors += 1
        elif item.type == "conversation":
            run.rejudged += bool(item.replaces)
            run.conversations[item.data["conversation_id"]] = _conversation(item.data, len(run.conversations),
                                                                            item.line)
    return run
