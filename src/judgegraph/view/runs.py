"""The results files a viewer serves, found under its folders and read once each (again when the file changes),
always through the one reader, :func:`judgegraph.runs.read_run`.

The one module of the viewer that reads results files: everything else asks it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..runs import NotAResultsFile, RunFacts, RunFile, first_record, is_results_file, read_run


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


def _scanned(path: Path) -> bool:
    """Whether a ``.jsonl`` file found in a folder is shown: a results file, or one whose first record cannot be
    read at all (named on the page as the CLI names it). Input and labels files are passed over."""
    return is_results_file(path) or first_record(path) is None


def _mean_scores(run: RunFile) -> dict[str, float | None]:
    scores: dict[str, list[float]] = {m: [] for m in run.metrics}
    for conv in run.conversations.values():
        for metric, result in conv.results.items():
            if (score := result.number) is not None:
                scores.setdefault(metric, []).append(score)
    return {m: (sum(s) / len(s) if s else None) for m, s in scores.items()}


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


class Library:
    """The results files under ``paths`` (files, or folders searched recursively for ``*.jsonl``)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = [Path(p) for p in paths]
        self._cache: dict[str, tuple[tuple[int, int], Run]] = {}
        self._full: tuple[str, tuple[int, int], RunFile] | None = None  # the last run read whole (the label queue's)

    def files(self) -> list[Path]:
        """The files given, and the results files (or unreadable ``.jsonl`` files) under the folders given."""
        found: list[Path] = []
        for p in self.paths:
            if p.is_dir():
                found.extend(f for f in sorted(p.rglob("*.jsonl")) if f.is_file() and _scanned(f))
            else:
                found.append(p)  # read_run names a missing file
        return found

    def runs(self) -> tuple[list[Run], list[str]]:
        """Every run, newest first (its header's start, else the file's time), and a line for every file (or line
        of one) that cannot be read: :class:`NotAResultsFile`'s message, the one the commands print."""
        problems: list[str] = []
        runs: list[tuple[str, int, Run]] = []
        for f in self.files():
            try:
                stamp = _stamp(f)
                cached = self._cache.get(str(f))
                if cached is None or cached[0] != stamp:
                    whole = read_run(f, keep_transcripts=False)
                    cached = stamp, Run(str(f), whole.facts(), _mean_scores(whole), whole.problems)
                    self._cache[str(f)] = cached
            except NotAResultsFile as exc:
                problems.append(str(exc))
                continue
            except OSError as exc:
                problems.append(str(NotAResultsFile(f, f"cannot read it: {exc.strerror or exc}")))
                continue
            run = cached[1]
            problems.extend(run.problems[:3])
            runs.append((run.started, stamp[0], run))
        runs.sort(key=lambda r: (r[0], r[1]), reverse=True)
        return [r[2] for r in runs], problems

    def read(self, key: str) -> RunFile:
        """The whole run ``key`` (one of :meth:`runs`): kept until another is asked for or the file changes.
        :class:`NotAResultsFile` when it can no longer be read."""
        try:
            stamp = _stamp(Path(key))
        except OSError as exc:
            raise NotAResultsFile(key, f"cannot read it: {exc.strerror or exc}") from None
        if self._full is None or self._full[:2] != (key, stamp):
            self._full = key, stamp, read_run(key)
        return self._full[2]
