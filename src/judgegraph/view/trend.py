"""Each metric's pass rate and mean score across runs, as numbers an inline SVG draws (runs.html)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runs import Run

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
