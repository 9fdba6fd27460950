"""The report's tables written as HTML by Python, so the page reads with JavaScript off: the runs' facts, the
per-metric summary with labelled histograms, and the conversations × runs × metrics matrix (failures first). The
page's script only sorts, filters and opens conversations.

Every value from data (paths, ids, metric and judge names, errors) goes through :func:`html.escape`; numbers are
formatted here.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from typing_extensions import TypedDict

from ..runs import ConversationLine
from .compare import Comparison, RunFacts, differs_in

__all__ = ["MetricSummary", "StatusCounts", "abbreviations", "histogram_svg", "legend", "matrix", "runs_table", "summary_table"]


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
SOURCE_NOTE = {"header": "from the run's header record", "summary": "from the run's summary record",
               "lines": "computed from the conversation lines (the file has no header or summary for it)"}


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _score(value: object) -> str:
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


UNKNOWN = '<span class="muted unknown">unknown</span>'


def _cell(fact: str, run: RunFacts, body: str) -> str:
    where = run.source.get(fact)
    cls = f' class="from-{where}"' if where else ""
    title = f' title="{_e(SOURCE_NOTE[where])}"' if where in SOURCE_NOTE else ""
    return f"<td{cls}{title}>{body}</td>"


def _per_metric(values: dict[str, float | None], metrics: Sequence[str], fmt: str) -> str:
    shown = {m: "unknown" if values[m] is None else fmt.format(values[m]) for m in metrics if m in values}
    items = "".join(f'<li><span class="muted">{_e(m)}</span> {_e(v)}</li>' for m, v in shown.items())
    return f'<ul class="facts">{items}</ul>' if items else UNKNOWN


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min {s:02d} s"


def _cost(run: RunFacts) -> str:
    """The run's cost; a run that made no judge call costs nothing (the offline judge's, or every answer cached)."""
    if run.cost_usd is not None:
        return f"${run.cost_usd:.4f}"
    if run.calls == 0:
        offline = run.judge_names and all("offline" in j and "llm:" not in j for j in run.judge_names)
        return "no cost (offline judge)" if offline else "no cost (no judge calls)"
    return UNKNOWN


def runs_table(runs: Sequence[RunFacts], metrics: Sequence[str]) -> str:
    """One column per run, one row per fact; an unknown fact says "unknown"."""
    head = "".join(f'<th scope="col" data-run="{i}">run {_e(r.label)}</th>' for i, r in enumerate(runs))
    rows: list[tuple[str, str, Any]] = [
        ("results file", "path", lambda r: f'<span class="path">{_e(r.path)}</span>'),
        ("conversations", "conversations", lambda r: _e(r.conversations)),
        ("judge", "judges", lambda r: "<br>".join(_e(j) for j in r.judges) if r.judges else UNKNOWN),
        ("thresholds", "thresholds", lambda r: _per_metric(r.thresholds, metrics, "{:.2f}")),
        ("pass rate", "pass_rate", lambda r: _per_metric({m: None if v is None else 100 * v
                                                          for m, v in r.pass_rate.items()}, metrics, "{:.0f}%")),
        ("cost", "cost_usd", _cost),
        ("judge calls / tokens", "calls",
         lambda r: UNKNOWN if r.calls is None else f"{r.calls:,} / {r.tokens or 0:,}"),
        ("duration", "duration_s", lambda r: UNKNOWN if r.duration_s is None else _e(_duration(r.duration_s))),
        ("started", "started_at", lambda r: _e(r.started_at) if r.started_at else UNKNOWN),
        ("judgegraph", "version", lambda r: _e(r.version) if r.version else UNKNOWN),
    ]
    body = "".join(f'<tr data-fact="{fact}"><th scope="row">{name}</th>'
                   + "".join(_cell(fact, r, render(r)) for r in runs) + "</tr>" for name, fact, render in rows)
    return f'<table id="runs-table" class="grid facts-table"><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>'


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
    many = len(runs) > 1
    head = ("<tr><th>metric</th>" + ("<th>run</th>" if many else "")
            + "<th>passed</th><th>failed</th><th>errors</th><th>n/a</th>"
            '<th><abbr title="judgements the judge could not make (counted, never as a verdict)">judge err</abbr></th>'
            '<th>mean</th><th title="conversations per score bin, 0 to 1">scores</th></tr>')
    rows = []
    for m in metrics:
        for i, (run, summary) in enumerate(zip(runs, summaries)):
            s = summary.get(m)
            if s is None:
                continue
            run_cell = f'<td title="{_e(run.path)}">{_e(run.label)}</td>' if many else ""
            rows.append(f'<tr data-metric="{_e(m)}" data-run="{i}"><td>{_e(m)}</td>{run_cell}'
                        + "".join(f'<td class="num">{s[k]}</td>'
                                  for k in ("passed", "failed", "error", "not_applicable", "judge_errors"))
                        + f'<td class="num">{_score(s["mean_score"])}</td><td>{histogram_svg(s["histogram"])}</td></tr>')
    return f'<table id="summary-table" class="grid"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def legend(compare: bool) -> str:
    items = [("passed", "passed", "the score reached the threshold"), ("failed", "failed", "below the threshold"),
             ("error", "error", "the judge could not decide: counted apart, never as a pass or a fail"),
             ("not_applicable", "n/a", "nothing to judge")]
    items += [("missing", "missing", "the run has no line for this conversation")] if compare else []
    differs = (' <span class="differs-mark">≠ differs</span> <span class="muted">the runs disagree on the '
               "conversation (shaded: the metrics where they do)</span>") if compare else ""
    return ('<p class="legend">' + " ".join(f'<span class="status {cls}">{label}</span> <span class="muted">{_e(note)}'
                                            "</span>" for cls, label, note in items) + differs + "</p>")


def _matrix_cell(record: ConversationLine | None, metric: str, run: int, label: str, compare: bool,
                 changed: bool = False) -> str:
    attrs = f'data-metric="{_e(metric)}" data-run="{run}"' + (' class="changed"' if changed else "")
    if record is None:
        return f'<td {attrs} data-status="missing"><span class="status missing">missing</span></td>'
    result = record.results.get(metric)
    if result is None:
        return f'<td {attrs}>—</td>'
    status, score = result.status, result.score
    sort = f' data-score="{score:.6f}"' if score is not None else ""
    errors = len(result.errors)
    err = f'<div class="judge-error small">{errors} judge err</div>' if errors else ""
    title = f' title="run {_e(label)}: {_e(metric)}"' if compare else ""
    return (f'<td {attrs} data-status="{_e(status)}"{sort}{title}><span class="status {_e(status or "none")}">'
            f'{_e(STATUS_LABEL.get(str(status), status or "—"))}</span> {_score(score)}{err}</td>')


def matrix(comparison: Comparison, short: dict[str, str]) -> str:
    """The conversations table: a row per conversation (failures first), a column per metric and run."""
    runs, metrics = comparison.runs, comparison.metrics
    compare = len(runs) > 1

    def name(m: str) -> str:
        text = _e(short.get(m, m))
        return text if short.get(m, m) == m else f'<abbr title="{_e(m)}">{text}</abbr>'

    if compare:
        head = ('<tr><th rowspan="2" data-sort="id"><button type="button" class="sort">conversation</button></th>'
                + "".join(f'<th colspan="{len(runs)}" data-metric="{_e(m)}" class="group">{name(m)}</th>' for m in metrics)
                + "</tr><tr>"
                + "".join(f'<th data-metric="{_e(m)}" data-run="{i}" data-sort="score"><button type="button" class="sort" '
                          f'title="{_e(m)}, run {_e(r.label)}: {_e(r.path)} (sort by score)">{_e(r.label)}</button></th>'
                          for m in metrics for i, r in enumerate(runs))
                + "</tr>")
    else:
        head = ('<tr><th data-sort="id"><button type="button" class="sort">conversation</button></th>'
                + "".join(f'<th data-metric="{_e(m)}" data-run="0" data-sort="score"><button type="button" class="sort">'
                          f"{name(m)}</button></th>" for m in metrics)
                + "</tr>")
    body = []
    for index, row in enumerate(comparison.rows):
        errors = "".join(
            f'<div class="run-error">run failed{" in " + _e(runs[i].label) if compare else ""}: {_e(r.run_error)}</div>'
            for i, r in enumerate(row.records) if r is not None and r.run_error)
        changed = {m for m in metrics if compare and differs_in(row.records, m)}
        cells = "".join(_matrix_cell(row.records[i], m, i, runs[i].label, compare, m in changed)
                        for m in metrics for i in range(len(runs)))
        mark = '<div class="differs-mark" title="the runs disagree">≠ differs</div>' if row.differs else ""
        body.append(f'<tr class="row{" failing" if row.failing else ""}" tabindex="0" data-index="{index}" '
                    f'data-id="{_e(row.conversation_id)}" data-position="{row.position}" '
                    f'data-failing="{int(row.failing)}" data-differs="{int(row.differs)}">'
                    f'<td class="conv-id">{_e(row.conversation_id)}{mark}{errors}</td>{cells}</tr>')
    return (f'<table id="conversations-table" class="grid{" compare" if compare else ""}"><thead>{head}</thead>'
            f'<tbody>{"".join(body)}</tbody></table>')
