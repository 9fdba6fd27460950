"""The results files a viewer serves, found under its folders and read once each (again when the file changes).

The one module of the viewer that reads results files: everything else asks it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare.runfile import RunFile, read_run
from ..runfacts import RunFacts

RECORD_TYPES = ("header", "conversation", "input_error", "summary")


@dataclass
class Run:
    """What the runs page shows of one results file."""

    key: str  # its path as given / found: the id the pages use
    facts: RunFacts
    mean_score: dict[str, float | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def started(self) -> str:
        return self.facts.started_at or ""


def _is_results(path: Path) -> bool:
    """A scanned ``.jsonl`` file is a results file when its first line is a results record (input and labels files
    are skipped). A first line that is not JSON: a results file that cannot be read (named on the page)."""
    with path.open("rb") as fh:
        first = fh.readline(1 << 20)
    try:
        record = json.loads(first)
    except ValueError:
        return True
    return isinstance(record, dict) and record.get("type") in RECORD_TYPES


def _mean_scores(run: RunFile) -> dict[str, float | None]:
    scores: dict[str, list[float]] = {m: [] for m in run.metrics}
    for conv in run.conversations.values():
        for metric, result in conv.results.items():
            score = result.get("score")
            if isinstance(score, (int, float)) and not isinstance(score, bool):
                scores.setdefault(metric, []).append(float(score))
    return {m: (sum(s) / len(s) if s else None) for m, s in scores.items()}


class Library:
    """The results files under ``paths`` (files, or folders searched recursively for ``*.jsonl``)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = [Path(p) for p in paths]
        self._cache: dict[str, tuple[tuple[int, int], Run]] = {}
        self._full: tuple[str, tuple[int, int], RunFile] | None = None  # the last run read whole (the label queue's)

    def files(self) -> tuple[list[Path], list[str]]:
        found: list[Path] = []
        problems: list[str] = []
        for p in self.paths:
            if p.is_dir():
                for f in sorted(p.rglob("*.jsonl")):
                    try:
                        if f.is_file() and _is_results(f):
                            found.append(f)
                    except OSError as exc:
                        problems.append(f"{f}: cannot be read: {exc.strerror or exc}")
            elif p.is_file():
                found.append(p)
            else:
                problems.append(f"{p}: no such file or folder")
        return found, problems

    def runs(self) -> tuple[list[Run], list[str]]:
        """Every run, newest first (its header's start, else the file's time), and the files that cannot be read."""
        files, problems = self.files()
        runs: list[tuple[str, float, Run]] = []
        for f in files:
            try:
                stat = f.stat()
                stamp = (stat.st_mtime_ns, stat.st_size)
                cached = self._cache.get(str(f))
                if cached is None or cached[0] != stamp:
                    whole = read_run(f)
                    facts = whole.facts()
                    if not whole.conversations and whole.header is None:
                        problems.append(f"{f}: not a results file"
                                        + (f" ({whole.problems[0]})" if whole.problems else " (no records)"))
                        continue
                    cached = stamp, Run(str(f), facts, _mean_scores(whole), whole.problems)
                    self._cache[str(f)] = cached
                run = cached[1]
            except OSError as exc:
                problems.append(f"{f}: cannot be read: {exc.strerror or exc}")
                continue
            problems.extend(run.problems[:3])
            runs.append((run.started, stat.st_mtime, run))
        runs.sort(key=lambda r: (r[0], r[1]), reverse=True)
        return [r[2] for r in runs], problems

    def read(self, key: str) -> RunFile:
        """The whole run ``key`` (one of :meth:`runs`): kept until another is asked for or the file changes."""
        stat = Path(key).stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._full is None or self._full[:2] != (key, stamp):
            self._full = key, stamp, read_run(key)
        return self._full[2]


def conversation_records(run: RunFile) -> list[dict[str, Any]]:
    """The run's conversation lines as results records (what ``trust.agreement.agreement`` reads)."""
    return [{"type": "conversation", "conversation_id": c.conversation_id, "results": c.results, "error": c.error}
            for c in run.conversations.values()]
