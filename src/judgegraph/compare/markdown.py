"""A :class:`~judgegraph.compare.diff.RunDiff` as Markdown for a pull-request comment (``judgegraph diff
--markdown``). Every text from the data goes through :func:`cell`: it can neither break a table nor become markup
nor notify anyone (``@name`` gets a zero-width space); long texts are cut and tables bounded (``--json`` has all).
"""

from __future__ import annotations

from ..data.safetext import safe
from ..stats.paired import MeanDifference
from .diff import Pair, RunDiff, Side, VerdictSide, change_text, describe_run

#: characters of a data text shown in one cell (the rest cut, marked "…")
CELL_CHARS = 300
#: GitHub refuses a comment longer than 65,536 characters: the Markdown stays under this many
MAX_COMMENT_CHARS = 60_000
#: characters written as HTML entities: markup, table cells, code spans, mentions
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "|": "&#124;", "`": "&#96;",
             "@": "@&#8203;"}
#: Markdown punctuation written with a backslash: emphasis, links, images, headings, strikethrough
_BACKSLASHED = frozenset("\\*_[](){}#~!")
_CELL = str.maketrans({**_ENTITIES, **{ch: "\\" + ch for ch in _BACKSLASHED}, "\n": "<br>"})


def cell(text: object, limit: int = CELL_CHARS) -> str:
    """``text`` (data) as literal text of one table cell (see the module); newlines become ``<br>``."""
    s = str(text)
    if len(s) > limit:
        s = s[:limit] + "…"
    return safe(s.replace("\r\n", "\n").replace("\r", "\n")).translate(_CELL)


def rate_text(rate: float | None) -> str:
    return "—" if rate is None else f"{rate:.0%}"


def side_text(side: Side | None) -> str:
    if side is None:
        return "—"
    status = {"not_applicable": "n/a"}.get(side.status, side.status)
    return status + ("" if side.score is None else f" {side.score:.2f}")


def mean_text(m: MeanDifference) -> str:
    if m.mean is None:
        return "—"
    interval = f" [{m.low:+.3f}, {m.high:+.3f}]" if m.low is not None and m.high is not None else ""
    return f"{m.mean:+.3f}{interval}"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def _more(shown: int, total: int) -> list[str]:
    return ["", f"… and {total - shown} more (`judgegraph diff --json` lists every one)."] if total > shown else []


def _pairs(pairs: list[Pair], max_rows: int) -> list[str]:
    rows = [[cell(p.metric), cell(p.conversation_id), change_text(p), side_text(p.old), side_text(p.new),
             "—" if p.delta is None else f"{p.delta:+.2f}"] for p in pairs[:max_rows]]
    return _table(["metric", "conversation", "change", "OLD", "NEW", "Δ score"], rows) + _more(len(rows), len(pairs))


def said(side: VerdictSide | None) -> tuple[str, str]:
    """A verdict and its reason (an error and its message) as two cells."""
    if side is None:
        return "—", ""
    return ("error" if side.error else cell(side.verdict)), cell(side.error or side.reason)


def _verdicts(pairs: list[Pair], max_rows: int) -> list[str]:
    changes = [(p, v) for p in pairs for v in p.verdicts]
    rows = [[cell(p.metric), cell(p.conversation_id), cell(v.verdict_id), ",".join(map(str, v.turns)) or "—",
             *said(v.old), *said(v.new)] for p, v in changes[:max_rows]]
    return (_table(["metric", "conversation", "verdict", "turns", "OLD", "OLD judge's reason", "NEW",
                    "NEW judge's reason"], rows) + _more(len(rows), len(changes)))


def to_markdown(diff: RunDiff, *, max_rows: int = 50, max_chars: int = MAX_COMMENT_CHARS) -> str:
    """The diff as a pull-request comment: the judging differences, a summary per metric, the changed results
    and, folded, the changed verdicts with both judges' reasons. Kept under ``max_chars``: the tables list
    half as many rows until it fits (the rest counted)."""
    rows = max(1, max_rows)
    for _ in range(max_rows.bit_length() + 1):  # bounded: rows halve down to 1
        text = _render(diff, rows)
        if len(text) <= max_chars or rows == 1:
            break
        rows = max(1, rows // 2)
    return text


def _render(diff: RunDiff, max_rows: int) -> str:
    lines = [f"### judgegraph diff: {cell(diff.old)} → {cell(diff.new)}", ""]
    lines += [f"- {side.upper()}: {cell(describe_run(run))}" for side, run in diff.runs.items()]
    lines += ["", f"**{len(diff.regressions)} regressed**, {sum(p.kind == 'fixed' for p in diff.pairs)} fixed, "
                  f"{len(diff.undecided)} NEW could not judge, {len(diff.pairs)} results compared.", ""]
    s = diff.settings
    if s.judging:
        verb = "differs" if s.same_judging is False else "settings differ"
        lines.append(f"> **The judging {verb}** — a flip may be the judge's, not the bot's:")
        lines += [f"> - {cell(str(d))}" + (" (from the results lines)" if d.source == "results" else "")
                  for d in s.judging] + [""]
    if s.unknown:
        lines += [f"Judges, prompts and metric options: {cell(s.unknown)}.", ""]
    elif not s.judging:
        lines += ["Same judges, prompts and metric options (run headers).", ""]
    if s.speed:
        lines += [f"- {cell(str(d))}" for d in s.speed] + [""]
    rows = []
    for m in diff.metrics.values():
        c = m.counts
        p = m.mcnemar
        test = "—" if p.method == "none" else f"{p.p_value:.3g} ({'exact' if p.method == 'exact' else 'χ² cc'})"
        rows.append([cell(m.metric), rate_text(m.old.rate), rate_text(m.new.rate), str(c["regressed"]), str(c["fixed"]),
                     str(c["unchanged"]), str(c["errored"] + c["still_error"]), str(c["new"]), str(c["missing"]),
                     test, mean_text(m.scores)])
    lines += _table(["metric", "pass rate OLD", "pass rate NEW", "regressed", "fixed", "unchanged",
                     "NEW errors", "new", "missing", "McNemar p", "mean score Δ [95% CI]"], rows)
    changed = [p for p in diff.changed() if p.kind != "unchanged"]
    if changed:
        lines += ["", f"#### Changed results ({len(changed)})", "", *_pairs(changed, max_rows)]
    flipped = [p for p in diff.changed() if p.verdicts]
    if flipped:
        count = sum(len(p.verdicts) for p in flipped)
        lines += ["", f"<details><summary>Changed verdicts ({count})</summary>", "", *_verdicts(flipped, max_rows),
                  "", "</details>"]
    if diff.problems:
        lines += ["", f"**{len(diff.problems)} results lines could not be read:**", ""]
        lines += [f"- {cell(p)}" for p in diff.problems[:max_rows]] + _more(min(len(diff.problems), max_rows),
                                                                           len(diff.problems))
    return "\n".join(lines) + "\n"
