"""``judgegraph graph``: draw a metric's graph (several: the report graph); with several ``--model``s
(or ``--repeat``) the jury graph every judge step runs per request, drawn after it (with ``-o FILE``,
in ``FILE``'s name with ``.jury`` before the suffix)."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from .common import EXIT_ERRORS, EXIT_OK, add_shared, fail, guidelines_missing, read_guidelines

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
    add_shared(p, "--guideline")
    p.add_argument("--verify", action="store_true", default=None,
                   help="turn-contextual-relevancy: draw the optional verify_verdict node")
    p.add_argument("--reason", choices=["deterministic", "llm", "none"],
                   help="'llm' draws the optional write_reason node")
    p.add_argument("--model", action="append", dest="models", metavar="MODEL",
                   help="repeated (or with --repeat): also draw the jury every judge step asks (docs/juries.md)")
    p.add_argument("--repeat", type=int, metavar="N", help="with --model: draw a jury of N repeats")
    from ..data.aggregates import AGGREGATES

    p.add_argument("--aggregate", default="majority", choices=AGGREGATES,
                   help="with --model: the jury's aggregation (its name)")
    p.set_defaults(run=run)


def _jury(args: argparse.Namespace) -> CompiledStateGraph | None:
    """The jury graph for the ``--model``s given (jurors with no model: drawn, never run), or None for one judge."""
    from ..judges import NoModel
    from ..judges.jury import Jury

    models = args.models or []
    if len(models) < 2 and (args.repeat or 1) == 1:
        return None
    jurors = [type("Juror", (NoModel,), {"name": m if ":" in m else f"llm:{m}"})() for m in models or ["(no model)"]]
    jury = Jury(jurors, aggregate=args.aggregate)
    if args.repeat and args.repeat > 1:
        with warnings.catch_warnings():  # drawn, never run: whether repeats could vary is no matter here
            warnings.simplefilter("ignore")
            jury = Jury.repeat(jury if len(jurors) > 1 else jurors[0], args.repeat, aggregate=args.aggregate)
    graph: CompiledStateGraph = jury.graph
    return graph


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
    from ..outputs.drawing import PngUnavailable, draw_png, draw_svg

    suffix = Path(args.out).suffix.lower().lstrip(".") if args.out else ""
    fmt = args.format or {"svg": "svg", "png": "png", "mmd": "mermaid", "mermaid": "mermaid"}.get(suffix, "mermaid")
    try:
        graph, jury = _build(args), _jury(args)
    except (KeyError, ValueError, TypeError, OSError) as exc:
        return fail(exc.args[0] if exc.args else exc)
    if fmt == "png" and not args.out:
        return fail("--format png needs -o FILE")
    # a report is drawn with its metrics' subgraphs expanded
    pictures = [(graph, graph.get_graph(xray=1 if len(args.metrics) > 1 else False), args.out)]
    if jury is not None:  # the jury each judge step asks, drawn beside the metric (its own picture)
        out = Path(args.out) if args.out else None
        pictures.append((jury, jury.get_graph(), str(out.with_name(f"{out.stem}.jury{out.suffix}")) if out else None))
    for shown, picture, path in pictures:
        text = picture.draw_mermaid() if fmt == "mermaid" else draw_svg(picture, title=shown.name or "graph")
        if not path:  # outside the try: a closed pipe (`| head`) is main()'s to handle
            print(text, end="" if text.endswith("\n") else "\n")
            continue
        try:
            if fmt == "png":
                Path(path).write_bytes(draw_png(text))
            else:
                Path(path).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        except PngUnavailable as exc:
            return fail(exc, EXIT_ERRORS)
        except OSError as exc:
            return fail(f"{path}: {exc.strerror or exc}", EXIT_ERRORS)
    return EXIT_OK
