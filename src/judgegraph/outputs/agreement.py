"""The agreement of judges with people as HTML: one ``<section>`` (:func:`agreement_section`) and, for
``judgegraph agree --html OUT``, a page holding only it (:func:`write_agreement_page`).

The markup is in ``assets/agreement.html`` (autoescaped Jinja macros): the section has no script and fetches nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .tables import templates

if TYPE_CHECKING:
    from ..trust.agreement import AgreementReport

__all__ = ["add_agreement_section", "agreement_section", "render_agreement_page", "write_agreement_page"]


def _macros() -> Any:
    return templates().get_template("agreement.html").module


def agreement_section(report: AgreementReport) -> str:
    """The report as one HTML ``<section id="agreement">``: figures per metric, confusion matrices, disagreements,
    labels that matched no verdict and label records that could not be used."""
    return str(_macros().section(report))


def render_agreement_page(report: AgreementReport, title: str = "Agreement with people") -> str:
    """A self-contained page holding :func:`agreement_section` (no script; nothing is fetched)."""
    return str(_macros().page(report, title))


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
