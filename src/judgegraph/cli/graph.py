"""``judgegraph graph``: draw a metric's graph (several: the report graph)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .common import EXIT_ERRORS, EXIT_OK, fail, guidelines_missing, read_guidelines

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from .common import Subparsers

FORMATS = ("mermaid", "svg", "png")


def register(sub: Subparsers) -> None:
    p = sub.add_parser("graph", help="draw a metric's graph (several: the report graph) as Mermaid, SVG or PNG",
                       description="Draw a metric's graph; several metrics draw the report graph, each metric a "
                                   "labelled group. SVG and PNG are drawn here, with no network.")
    p.add_argument("metrics", nargs="+", metavar="METRIC")
    p.add_argument("--format", choices=FORMATS,
                   help="mermaid (default), svg, or png (pip install 'judgegraph[png]'); default: from -o's suffix")
    p.add_argument("-o", "--out", metavar="FILE", help="write the picture here (default: print Mermaid/SVG)")
    p.add_argument("--guideline", action="append", dest="guidelines", metavar="TEXT",
                   help="conversational-guidelines needs at least one to be built (repeatable)")
    p.add_argument("--verify", action="store_true", default=None,
                   help="turn-contextual-relevancy: draw the optional verify_verdict node")
    p.add_argument("--reason", choices=["deterministic", "llm", "none"],
                   help="'llm' draws the optional write_reason node")
    p.set_defaults(run=run)


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    suffix = Path(args.out).suffix.lower().lstrip(".") if args.out else ""
    return {"svg": "svg", "png": "png", "mmd": "mermaid", "mermaid": "mermaid"}.get(suffix, "mermaid")


def _build(args: argparse.Namespace) -> CompiledStateGraph:
    from ..judges import NoModel
    from ..metrics import get_metric
    from ..report import build_metric, create_report_graph

    if (missing := guidelines_missing(args)) is not None:
        raise ValueError(missing)
    guidelines = read_guidelines(args.guidelines)
    settings = {"guidelines": guidelines, "verify": args.verify, "reason": args.reason}
    options = {m: {k: v for k, v in settings.items() if v and k in get_metric(m).options} for m in args.metrics}
    # drawn, never run: the graph as built for an LLM judge, with no model, no key, no connection
    if len(args.metrics) == 1:
        return build_metric(args.metrics[0], NoModel(), **options[args.metrics[0]])
    return create_report_graph(args.metrics, model=NoModel(), options=options)


def run(args: argparse.Namespace) -> int:
    fmt = _format(args)
    try:
        graph = _build(args)
    except (KeyError, ValueError, TypeError, OSError) as exc:
        return fail(exc.args[0] if exc.args else exc)
    if fmt == "png" and not args.out:
        return fail("--format png needs -o FILE")
    # a report is drawn with its metrics' subgraphs expanded
    drawable = graph.get_graph(xray=1 if len(args.metrics) > 1 else False)
    from ..reporting.drawing import PngUnavailable, draw_png, draw_svg

    text = drawable.draw_mermaid() if fmt == "mermaid" else draw_svg(drawable, title=graph.name or "graph")
    if not args.out:  # outside the try: a closed pipe (`| head`) is main()'s to handle
        print(text, end="" if text.endswith("\n") else "\n")
        return EXIT_OK
    try:
        if fmt == "png":
            Path(args.out).write_bytes(draw_png(text))
        else:
            Path(args.out).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    except PngUnavailable as exc:
        return fail(exc, EXIT_ERRORS)
    except OSError as exc:
        return fail(f"{args.out}: {exc.strerror or exc}", EXIT_ERRORS)
    return EXIT_OK
