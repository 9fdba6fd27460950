"""What a run's record is turned into: tables (:mod:`.tables`), the HTML report (:mod:`.html`) and its
sections, graph pictures (:mod:`.drawing`), CSV/Parquet/pandas (:mod:`.export`) and transcripts read
back (:mod:`.transcripts`)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jinja2 import Environment


@cache
def templates() -> Environment:
    """The Jinja templates of ``assets/``, loaded on first use, with autoescape on: every value is data, never
    markup or template text (what Python writes as markup itself, the page's JSON, CSS, script and SVG pictures, is
    marked ``|safe`` where the template puts it)."""
    from jinja2 import Environment, PackageLoader

    from .compare import differs_in
    from .drawing import num
    from .tables import STATUS_LABEL, cost, duration, histogram_svg, score

    env = Environment(loader=PackageLoader(__name__, "assets"), autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(score=score, duration=duration, cost=cost, num=num)
    env.globals.update(histogram=histogram_svg, differs_in=differs_in, STATUS_LABEL=STATUS_LABEL)
    return env
