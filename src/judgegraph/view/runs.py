"""The results files a viewer serves, found under its folders and read once each (again when the file changes),
always through the one reader, :func:`judgegraph.runs.read_run`, and each metric's trend across them.

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
        """The files given, and the results files under the folders given, or ``.jsonl`` files there whose first
        record cannot be read at all (named on the page as the CLI names them); input and labels files are not."""
        found: list[Path] = []
        for p in self.paths:
            if p.is_dir():
                found.extend(f for f in sorted(p.rglob("*.jsonl"))
                             if f.is_file() and (is_results_file(f) or first_record(f) is None))
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


#: The size of a trend's drawing (runs.html), in SVG units.
WIDTH, HEIGHT, PAD = 640, 150, 24


@dataclass
class Point:
    x: float
    y: float
    value: float
    run: str
    regression: bool = False  # lower than the run before


@dataclass
class Trend:
    metric: str
    pass_rate: list[Point] = field(default_factory=list)
    mean_score: list[Point] = field(default_factory=list)

    @staticmethod
    def polyline(points: list[Point]) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in points)

    @property
    def regressions(self) -> list[Point]:
        return [p for p in self.pass_rate if p.regression]


def _points(runs: list[Run], values: list[float | None]) -> list[Point]:
    step = (WIDTH - 2 * PAD) / max(len(runs) - 1, 1)
    out: list[Point] = []
    for i, (run, value) in enumerate(zip(runs, values)):
        if value is None:
            continue
        out.append(Point(PAD + i * step, HEIGHT - PAD - value * (HEIGHT - 2 * PAD), value, run.key,
                         regression=bool(out) and value < out[-1].value - 1e-12))
    return out


def trends(newest_first: list[Run], metrics: list[str]) -> list[Trend]:
    """One trend per metric, oldest run on the left; a pass rate lower than the run before is a regression."""
    runs = list(reversed(newest_first))
    return [Trend(m, _points(runs, [r.facts.pass_rate.get(m) for r in runs]),
                  _points(runs, [min(max(s, 0.0), 1.0) if (s := r.mean_score.get(m)) is not None else None
                                 for r in runs]))
            for m in metrics]
