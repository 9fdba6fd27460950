"""The one reader of a results file, any command's (docs/architecture.md, "One evaluation"): :func:`read_run`.

A bad line (not UTF-8, not JSON, torn, too deep, not an object, a non-finite number, no known ``type``, a
conversation line whose fields are not what ``eval`` writes) is left out and named ``FILE:LINE: why``; the rest is
read. A conversation id read again is a later judgement (``watch`` retrying a thread): it replaces the earlier line
and keeps its place. A file with no results line, or a path that cannot be read, is :class:`NotAResultsFile`.
A resume reads with the same line reader (:func:`read_lines`, :func:`parse_line`), leniently.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .record import (
    RECORD_TYPES,
    STATUSES,
    BatchLine,
    ConversationLine,
    HeaderLine,
    InputErrorLine,
    ResultLine,
    SummaryLine,
    UsageLine,
    number,
    pass_rate,
    restore_elided,
    wrong_field,
)

__all__ = ["NOT_RESULTS", "NotAResultsFile", "RunFacts", "RunFile", "conversation_problem", "first_record",
           "is_results_file", "read_header", "read_run"]


class NotAResultsFile(ValueError):
    """``path`` is not a results file that can be read (missing, unreadable, or no line of it is a results line)."""

    def __init__(self, path: str | Path, why: str) -> None:
        self.path, self.why = str(path), why
        super().__init__(f"{path}: {why}")


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
    results = record["results"] = {} if record.get("results") is None else record["results"]
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


def parse_line(raw: bytes) -> dict[str, Any] | str:
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


#: why a file is refused when no line of it is a results line
NOT_RESULTS = "not a results file (written by judgegraph eval --out): no line of it is a results line"

def non_finite_field(value: object) -> str | None:
    """The dotted path of the first non-finite number in ``value`` (JSON ``1e999`` reads as ``inf``), or None."""
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path or "(the line)"
        if isinstance(item, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return None


@dataclass
class RunFacts:
    """What one results file says about its run; None where it is unknown (:meth:`RunFile.facts`)."""

    label: str  # "A", "B", ... : the run's column in the matrix
    path: str
    conversations: int
    version: str | None = None
    started_at: str | None = None
    judges: list[str] = field(default_factory=list)
    thresholds: dict[str, float | None] = field(default_factory=dict)  # per metric; None: not one value
    pass_rate: dict[str, float | None] = field(default_factory=dict)
    cost_usd: float | None = None
    duration_s: float | None = None
    calls: int | None = None
    tokens: int | None = None
    source: dict[str, str] = field(default_factory=dict)  # fact -> "header" | "summary" | "lines"
    header: bool = False  # the file has a run header
    judge_names: list[str] = field(default_factory=list)  # the judges by name only (``judges`` says more)

    def to_json(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class RunFile:
    """A results file read (:func:`read_run`): its header and last summary (None in an older file), its
    conversations by id (the latest line of each, in the order ids were first read), its input errors and batches,
    and a ``FILE:LINE: why`` per line left out. What the run says about itself is computed once, from the header
    and summary when the file has them, else from the conversation lines (``facts().source`` says which)."""

    path: str
    header: HeaderLine | None = None  # the first header record
    summary: SummaryLine | None = None  # the last summary record (a resumed run appends another)
    conversations: dict[str, ConversationLine] = field(default_factory=dict)
    input_errors: list[InputErrorLine] = field(default_factory=list)
    batches: list[BatchLine] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # FILE:LINE: why, for every line left out
    #: the results of the lines a later line of the same id replaced (kept when asked: their judgements cost too)
    replaced: list[dict[str, ResultLine]] = field(default_factory=list)

    @property
    def rejudged(self) -> int:
        """Conversations judged again later in the file (their earlier lines replaced)."""
        return sum(bool(c.replaces) for c in self.conversations.values())

    def in_input_order(self) -> list[ConversationLine]:
        """The conversations in the order of the inputs (their ``position``); those without one (an older file)
        keep the file's order, after the others."""
        return sorted(self.conversations.values(), key=lambda c: (c.place is None, c.place or 0))  # a stable sort

    @cached_property
    def metrics(self) -> list[str]:
        """The metrics judged in this file, in order of first appearance (none: those its header names)."""
        seen = dict.fromkeys(m for conv in self.conversations.values() for m in conv.results)
        if not seen and self.header is not None:
            seen = dict.fromkeys(self.header.metric_names())
        return list(seen)

    def _results(self, metric: str) -> list[ResultLine]:
        return [c.results[metric] for c in self.conversations.values() if metric in c.results]

    @cached_property
    def _facts(self) -> RunFacts:
        facts = RunFacts(label="", path=self.path, conversations=len(self.conversations),
                         header=self.header is not None)
        header, summary = self.header or HeaderLine(), self.summary or SummaryLine()
        metrics = [m for m in self.metrics if any(m in c.results for c in self.conversations.values())]

        def known(name: str, value: object, where: str) -> None:
            setattr(facts, name, value)
            facts.source[name] = where

        if isinstance(header.judgegraph, str):
            known("version", header.judgegraph, "header")
        if isinstance(header.started_at, str):
            known("started_at", header.started_at, "header")
        if entries := header.judge_entries():
            known("judges", [j.describe() for j in entries], "header")
            facts.judge_names = [j.name for j in entries]
        else:
            seen = [r.judge for m in metrics for r in self._results(m)]
            if names := list(dict.fromkeys(j for j in seen if isinstance(j, str))):
                known("judges", names, "lines")
                facts.judge_names = list(names)
        configured = header.thresholds()
        if metrics and all(configured.get(m) is not None for m in metrics):
            known("thresholds", {m: configured[m] for m in metrics}, "header")
        elif metrics:  # a metric's threshold when its lines agree on one
            values = {m: {number(r.threshold) for r in self._results(m)} - {None} for m in metrics}
            known("thresholds", {m: v.pop() if len(v) == 1 else None for m, v in values.items()}, "lines")
        if isinstance(summary.pass_rate, dict) and summary.pass_rate:
            known("pass_rate", {str(m): number(v) for m, v in summary.pass_rate.items()}, "summary")
        elif metrics:
            rates = {m: pass_rate(Counter(r.status for r in self._results(m) if r.status)) for m in metrics}
            known("pass_rate", rates, "lines")
        costs = [v for c in self.conversations.values() if (v := number(c.cost_usd)) is not None]
        if "cost_usd" in summary.model_fields_set:
            known("cost_usd", number(summary.cost_usd), "summary")
        elif costs:
            known("cost_usd", sum(costs), "lines")
        if number(summary.duration_s) is not None:
            known("duration_s", number(summary.duration_s), "summary")
        usage, where = summary.usage_line(), "summary"
        if usage is None and (usages := [r.usage for m in metrics for r in self._results(m) if r.usage]):
            keys = ("calls", "input_tokens", "output_tokens")
            usage, where = UsageLine(**{k: sum(getattr(u, k) or 0 for u in usages) for k in keys}), "lines"
        if usage is not None:
            known("calls", int(usage.calls or 0), where)
            known("tokens", usage.tokens, where)
        return facts

    def facts(self, label: str = "") -> RunFacts:
        """What the file says about its run (the HTML report's runs table, ``diff``'s run lines): conversations,
        judgegraph version, start, judges, thresholds, pass rates, cost, duration, judge calls and tokens."""
        return replace(self._facts, label=label)

    @property
    def pass_rate(self) -> dict[str, float | None]:
        return self._facts.pass_rate

    @property
    def judges(self) -> list[str]:
        return self._facts.judges

    @property
    def thresholds(self) -> dict[str, float | None]:
        return self._facts.thresholds

    @property
    def cost_usd(self) -> float | None:
        return self._facts.cost_usd

    @property
    def usage(self) -> tuple[int | None, int | None]:
        """Judge calls and tokens (None: unknown)."""
        return self._facts.calls, self._facts.tokens


def read_lines(path: str | Path) -> Iterator[tuple[int, int, bytes]]:
    """Each line of ``path``: its number, the byte offset after it, its bytes (what :func:`parse_line` reads)."""
    with Path(path).open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            yield n, fh.tell(), raw


def read_run(path: str | Path, *, keep_transcripts: bool = True, keep_replaced: bool = False) -> RunFile:
    """The results file ``path`` as a :class:`RunFile` (module doc). ``keep_transcripts=False`` drops the judge
    transcripts as it reads; ``keep_replaced`` keeps the results of replaced lines (:attr:`RunFile.replaced`)."""
    run = RunFile(str(path))
    readable, first_bad = 0, ""
    try:
        for n, _, raw in read_lines(path):
            if not raw.strip():
                continue
            if isinstance(record := parse_line(raw), str):
                run.problems.append(f"{path}:{n}: {record}")
                first_bad = first_bad or f"line {n}: {record}"
                continue
            readable += 1
            kind = record["type"]
            if kind == "header":
                run.header = run.header or HeaderLine.model_validate(record)
            elif kind == "summary":
                run.summary = SummaryLine.model_validate(record)
            elif kind == "input_error":
                run.input_errors.append(InputErrorLine.model_validate(record))
            elif kind == "batch":
                run.batches.append(BatchLine.model_validate(record))
            if kind != "conversation":
                continue
            restore_elided(record)
            if not keep_transcripts:
                for result in record["results"].values():
                    result.pop("transcript", None)
                    for verdict in result["verdicts"]:
                        verdict.pop("transcript", None)
            try:
                conv = ConversationLine.model_validate({**record, "line": n})
            except ValidationError as exc:  # the fields conversation_problem checks cannot fail here
                run.problems.append(f"{path}:{n}: {wrong_field(exc)}")
                continue
            if (earlier := run.conversations.get(conv.conversation_id)) is not None:
                conv.replaces = (*earlier.replaces, earlier.line)
                conv.order = earlier.order
                if keep_replaced:
                    run.replaced.append(earlier.results)
            else:
                conv.order = len(run.conversations)
            run.conversations[conv.conversation_id] = conv  # an id read again keeps its first place
    except IsADirectoryError:
        raise NotAResultsFile(path, "is a directory, not a results file") from None
    except FileNotFoundError:
        raise NotAResultsFile(path, "no such file") from None
    except OSError as exc:
        raise NotAResultsFile(path, f"cannot read it: {exc.strerror or exc}") from None
    if readable:
        return run
    first = first_record(path)
    if isinstance(first, dict) and "type" not in first and ("turns" in first or "messages" in first):
        raise NotAResultsFile(path, "a conversations file (what `eval` reads), not a results file (`eval --out`): "
                                    "to compare two versions' conversations, use `judgegraph pairwise FILE FILE "
                                    "--model M`")
    raise NotAResultsFile(path, f"{NOT_RESULTS} ({first_bad or 'the file is empty'})")


def first_record(path: str | Path) -> object:
    """The first JSON record of ``path`` (blank and ``//`` lines passed over), or None when there is none to read."""
    try:
        with Path(path).open("rb") as fh:
            for raw in itertools.islice(fh, 1000):
                if raw.strip() and not raw.lstrip().startswith(b"//"):
                    return json.loads(raw)
    except (OSError, ValueError, RecursionError):  # RecursionError: a line nested thousands deep
        return None
    return None


def is_results_file(path: str | Path) -> bool:
    """Whether ``path`` is a results JSONL, from its first record only (for commands that take input files)."""
    p = Path(path)
    if p.suffix.lower() != ".jsonl" or not p.is_file():
        return False
    first = first_record(p)
    return isinstance(first, dict) and first.get("type") in RECORD_TYPES and (
        first.get("type") != "conversation" or "results" in first)


def read_header(path: str | Path) -> HeaderLine | None:
    """The header of a results file (its first line, when that is a header), or None: a resume's lenient look."""
    try:
        for _, _, raw in read_lines(path):
            if not raw.strip():
                continue
            if isinstance(record := parse_line(raw), str):
                return None
            return HeaderLine.model_validate(record) if record["type"] == "header" else None
    except OSError:
        return None
    return None

