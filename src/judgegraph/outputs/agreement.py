"""The agreement of judges with people as HTML: one ``<section>`` (:func:`agreement_section`) and, for
``judgegraph agree --html OUT``, a page holding only it (:func:`write_agreement_page`).

Every value from data (ids, labels, reasons) is escaped: the section has no script and fetches nothing.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..stats.raters import Interval
    from ..trust.agreement import AgreementReport, MetricAgreement

__all__ = ["add_agreement_section", "agreement_section", "render_agreement_page", "write_agreement_page"]

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;color:#1d232a}
table{border-collapse:collapse;margin:.6rem 0 1.2rem}
th,td{border:1px solid #d5dae0;padding:.25rem .5rem;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.diag{background:#e6f4ea}
.muted{color:#66707a}
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _fig(value: float | None, interval: Interval | None, computed: bool = True) -> str:
    if not computed:
        return '<span class="muted">—</span>'
    if value is None:
        return '<span class="muted">undefined</span>'
    text = f"{value:.3f}"
    if interval is not None:
        text += f' <span class="muted">[{interval.low:.3f}, {interval.high:.3f}]</span>'
    return text


def _metric(m: MetricAgreement) -> list[str]:
    out = [f"<h3>{_e(m.metric)} <span class=\"muted\">({_e(m.kind)}, n = {m.n})</span></h3>"]
    if m.confusion:
        out.append('<table class="grid"><caption>person (rows) × judge (columns)</caption><tr><th></th>'
                   + "".join(f"<th>{_e(label)}</th>" for label in m.scale) + "</tr>")
        for i, (label, row) in enumerate(zip(m.scale, m.confusion)):
            cells = "".join(f'<td class="n{" diag" if i == j else ""}">{c}</td>' for j, c in enumerate(row))
            out.append(f"<tr><th>{_e(label)}</th>{cells}</tr>")
        out.append("</table>")
    listed = [*m.disagreements, *m.judge_errors]
    if listed:
        out.append('<table class="grid"><caption>disagreements</caption><tr><th>conversation</th><th>turn</th><th>verdict</th>'
                   "<th>person</th><th>judge</th><th>judge's reason</th><th>label from</th></tr>")
        for p in listed:
            judge = '<span class="muted">judge error</span>' if p.judge is None else _e(p.judge)
            out.append(f"<tr><td>{_e(p.conversation_id)}</td><td>{_e(','.join(map(str, p.turns)) or '—')}</td>"
                       f"<td>{_e(p.verdict_id)}</td><td>{_e(p.human)}</td><td>{judge}</td><td>{_e(p.reason)}</td>"
                       f"<td>{_e(p.source)}</td></tr>")
        out.append("</table>")
    else:
        out.append('<p class="muted">no disagreement</p>')
    return out


def agreement_section(report: AgreementReport) -> str:
    """The report as one HTML ``<section id="agreement">``: figures per metric, confusion matrices, disagreements,
    labels that matched no verdict and label records that could not be used."""
    out = ['<section id="agreement"><h2>Agreement with people</h2>',
           f'<p class="muted">{report.labels} labels; {report.level:.0%} percentile bootstrap intervals, '
           f"B = {report.resamples}, seed {report.seed}.</p>",
           '<table class="grid"><tr><th>metric</th><th>kind</th><th>n</th><th>agreement</th><th>kappa</th>'
           "<th>weighted kappa</th><th>spearman</th><th>judge errors</th></tr>"]
    for m in report.metrics.values():
        out.append(f"<tr><td>{_e(m.metric)}</td><td>{_e(m.kind)}</td><td class=\"n\">{m.n}</td>"
                   + "".join(f'<td class="n">{_fig(getattr(m, k), m.intervals.get(k), k in m.figures)}</td>'
                             for k in ("agreement", "kappa", "weighted_kappa", "spearman"))
                   + f'<td class="n">{len(m.judge_errors)}</td></tr>')
    out.append("</table>")
    for m in report.metrics.values():
        out.extend(_metric(m))
    for title, problems in (("Labels that match no verdict", report.unmatched),
                            ("Results lines that could not be read", report.unreadable),
                            ("Label records that could not be used", report.label_errors)):
        if problems:
            out.append(f"<h3>{title}</h3><ul>" + "".join(f"<li>{_e(x)}</li>" for x in problems) + "</ul>")
    out.append("</section>")
    return "\n".join(out)


def render_agreement_page(report: AgreementReport, title: str = "Agreement with people") -> str:
    """A self-contained page holding :func:`agreement_section` (no script; nothing is fetched)."""
    return ("<!doctype html><html><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body><h1>{_e(title)}</h1>\n"
            f"{agreement_section(report)}\n</body></html>\n")


def write_agreement_page(report: AgreementReport, out: str | Path, title: str = "Agreement with people") -> Path:
    """Write :func:`render_agreement_page` to ``out``."""
    path = Path(out)
    path.write_text(render_agreement_page(report, title), encoding="utf-8", errors="backslashreplace")
    return path


def add_agreement_section(page: str | Path, report: AgreementReport) -> None:
    """Put :func:`agreement_section` at the end of the ``<main>`` of a report page ``judgegraph report`` wrote
    (``judgegraph report RESULTS --labels FILE``). The page's data travels as escaped JSON (no ``</main>`` in it):
    the template's own ``</main>`` is the first one."""
    path = Path(page)
    html = path.read_text(encoding="utf-8")
    at = html.find("</main>")
    if at < 0:
        raise ValueError(f"{path}: not a judgegraph report page (no <main>)")
    path.write_text(html[:at] + agreement_section(report) + "\n" + html[at:], encoding="utf-8")
