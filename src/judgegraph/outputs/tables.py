"""The report's tables as HTML, so the page reads with JavaScript off: the runs' facts, the per-metric summary with
labelled histograms, and the conversations × runs × metrics matrix (failures first). The markup is in
``assets/tables.html`` (autoescaped Jinja macros); the page's script only sorts, filters and opens conversations.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from .compare import Comparison, RunFacts

if TYPE_CHECKING:
    from jinja2 import Environment

__all__ = ["MetricSummary", "StatusCounts", "abbreviations", "histogram_svg", "legend", "matrix", "runs_table", "summary_table",
           "templates"]


class StatusCounts(TypedDict):
    """Results per status."""

    passed: int
    failed: int
    error: int
    not_applicable: int


class MetricSummary(StatusCounts):
    """A metric's row of the summary table: its results per status, judge errors, score histogram and mean."""

    judge_errors: int
    histogram: list[int]  # results per score bin, 0 to 1 in BINS bins
    mean_score: float | None


STATUS_LABEL = {"passed": "passed", "failed": "failed", "error": "error", "not_applicable": "n/a"}


@cache
def templates() -> Environment:
    """The Jinja templates of ``assets/`` (every HTML output's), loaded on first use, with autoescape on: every value
    is data, never markup or template text (what Python writes as markup itself, the page's JSON, CSS, script and SVG
    pictures, is marked ``|safe`` where the template puts it); the formatters below are its filters."""
    from jinja2 import Environment, PackageLoader

    from .compare import differs_in

    env = Environment(loader=PackageLoader(__package__ or "judgegraph.outputs", "assets"), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(score=score, duration=duration, cost=cost, num=num)
    env.globals.update(histogram=histogram_svg, differs_in=differs_in, STATUS_LABEL=STATUS_LABEL)
    return env


def num(v: float) -> str:
    """A coordinate as the SVG writes it: one decimal at most."""
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _macro(name: str) -> Any:
    return getattr(templates().get_template("tables.html").module, name)


def score(value: object) -> str:
    """A score as the tables show it (two decimals), "—" when there is none."""
    return f"{value:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "—"


def abbreviations(metrics: Sequence[str], *, columns: int) -> dict[str, str]:
    """A short name per metric (its words' initials, longer where two would clash) when ``columns`` matrix columns
    would not fit a screen with whole names; else the names themselves."""
    if len(metrics) <= 3 and columns <= 6:
        return {m: m for m in metrics}
    out: dict[str, str] = {}
    for m in metrics:
        words = [w for w in m.replace("-", "_").split("_") if w] or [m]
        short = "".join(w[0] for w in words).upper()
        k = 1
        while short in out.values() and k < len(words[-1]):
            k += 1
            short = "".join(w[0] for w in words[:-1]).upper() + words[-1][:k].capitalize()
        if short in out.values():
            short = m
        out[m] = short
    return out


def duration(seconds: float) -> str:
    """A run's duration as a person reads it: seconds below two minutes, then minutes, then hours."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min {s:02d} s"


def cost(run: RunFacts) -> str | None:
    """The run's cost; a run that made no judge call costs nothing (the offline judge's, or every answer cached)."""
    if run.cost_usd is not None:
        return f"${run.cost_usd:.4f}"
    if run.calls == 0:
        offline = run.judge_names and all("offline" in j and "llm:" not in j for j in run.judge_names)
        return "no cost (offline judge)" if offline else "no cost (no judge calls)"
    return None


def runs_table(runs: Sequence[RunFacts], metrics: Sequence[str]) -> str:
    """One column per run, one row per fact; an unknown fact says "unknown"."""
    return str(_macro("runs_table")(runs, metrics))


def histogram_svg(counts: Sequence[int]) -> str:
    """Ten score bins from 0 to 1 as an SVG bar chart with labelled axes and each bar's count."""
    w, h, left, bottom, top = 170, 62, 26, 22, 10
    plot_w, plot_h = w - left - 6, h - bottom - top
    peak = max([*counts, 1])
    bar = plot_w / len(counts)
    parts = [f'<svg class="hist" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
             f'role="img" aria-label="score distribution: {", ".join(str(c) for c in counts)}" font-size="9">']
    for i, c in enumerate(counts):
        bh = plot_h * c / peak
        x = left + i * bar
        lo, hi = i / len(counts), (i + 1) / len(counts)
        parts.append(f'<rect x="{x + 1:.1f}" y="{top + plot_h - bh:.1f}" width="{bar - 2:.1f}" height="{bh:.1f}" '
                     f'fill="#4a78b5"><title>scores {lo:.1f}–{hi:.1f}: {c}</title></rect>')
        if c:
            parts.append(f'<text x="{x + bar / 2:.1f}" y="{top + plot_h - bh - 2:.1f}" text-anchor="middle">{c}</text>')
    base = top + plot_h
    parts.append(f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" stroke="#555"/>'
                 f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#555"/>')
    for v in (0, 0.5, 1):
        x = left + plot_w * v
        parts.append(f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 3}" stroke="#555"/>'
                     f'<text x="{x:.1f}" y="{base + 12}" text-anchor="middle">{v:g}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{h - 2}" text-anchor="middle" fill="#57606a">score</text>'
                 f'<text x="{left - 3}" y="{top + 3}" text-anchor="end">{peak}</text>'
                 f'<text x="{left - 3}" y="{base}" text-anchor="end">0</text>'
                 f'<text x="3" y="{top + plot_h / 2:.1f}" fill="#57606a" transform="rotate(-90 6 {top + plot_h / 2:.1f})" '
                 f'text-anchor="middle">convs</text></svg>')
    return "".join(parts)


def summary_table(runs: Sequence[RunFacts], summaries: Sequence[dict[str, MetricSummary]], metrics: Sequence[str]) -> str:
    """Per metric (and run, when more than one): the status counts, judge errors, mean score and histogram."""
    return str(_macro("summary_table")(runs, summaries, metrics))


def legend(compare: bool) -> str:
    """What the statuses (and, comparing runs, "missing" and "differs") mean."""
    return str(_macro("legend")(compare))


def matrix(comparison: Comparison, short: dict[str, str]) -> str:
    """The conversations table: a row per conversation (failures first), a column per metric and run."""
    return str(_macro("matrix")(comparison, short))
