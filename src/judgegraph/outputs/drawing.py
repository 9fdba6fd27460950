"""Graph pictures with no network and no system packages: SVG laid out by grandalf (pure Python, a Sugiyama layered
layout), PNG through resvg-py when installed (``pip install 'judgegraph[png]'``).

``draw_svg(graph)`` takes a compiled graph or the ``langchain_core`` drawable graph ``compiled.get_graph(xray=...)``
returns. Node ids of an x-rayed graph are ``"<subgraph>:<node>"``; every subgraph (a report's metrics) is drawn as a
labelled group around its nodes. Conditional edges are dashed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeAlias, Union, cast

__all__ = ["Drawable", "PngUnavailable", "draw_png", "draw_svg", "graph_layout"]

if TYPE_CHECKING:
    from langchain_core.runnables.graph import Graph, Node
    from langgraph.pregel import Pregel

#: What can be drawn: a compiled graph (a ``CompiledStateGraph``), or the drawable
#: ``langchain_core`` graph its ``get_graph(xray=...)`` returns.
Drawable: TypeAlias = Union["Pregel", "Graph"]

FONT_SIZE = 13
CHAR_W = 7.4  # average advance of a 13px sans-serif glyph; boxes are sized from it
BOX_H = 34
PAD_X = 14
CLUSTER_PAD = 16
CLUSTER_LABEL = 18
MARGIN = 16


class PngUnavailable(RuntimeError):
    """No SVG-to-PNG converter is installed."""


@dataclass
class Box:
    id: str
    label: str
    x: float  # centre
    y: float
    w: float
    h: float
    terminal: bool = False


@dataclass
class Line:
    source: str
    target: str
    points: list[tuple[float, float]]
    conditional: bool = False
    label: str = ""


@dataclass
class Group:
    name: str
    depth: int
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass
class Layout:
    boxes: list[Box] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0


def _drawable(graph: Drawable) -> Graph:
    if hasattr(graph, "nodes") and hasattr(graph, "edges") and not hasattr(graph, "get_graph"):
        return graph  # a Graph (or any object drawn like one)
    return cast("Pregel", graph).get_graph()


def _label(node: Node) -> str:
    last = str(node.id).rsplit(":", 1)[-1]
    if last in ("__start__", "__end__"):  # a subgraph's own entry/exit keeps its place, in lower case
        word = last.strip("_")
        return word.upper() if last == node.id else word
    return str(node.name or node.id).rsplit(":", 1)[-1]


def _prefixes(node_id: str) -> list[str]:
    parts = node_id.split(":")[:-1]
    return [":".join(parts[: i + 1]) for i in range(len(parts))]


class _EdgeView:
    def __init__(self) -> None:
        self.pts: list[tuple[float, float]] = []

    def setpath(self, pts: list[tuple[float, float]]) -> None:
        self.pts = [(float(x), float(y)) for x, y in pts]


def graph_layout(graph: Drawable) -> Layout:
    """Positions of every node, edge and subgraph group of ``graph``."""
    from grandalf.graphs import Edge, Graph, Vertex
    from grandalf.layouts import SugiyamaLayout
    from grandalf.routing import route_with_lines

    g = _drawable(graph)
    vertices: dict[str, Any] = {}  # grandalf's, untyped
    for node in g.nodes.values():
        label = _label(node)
        v = vertices[node.id] = Vertex(node.id)
        v.view = SimpleNamespace(w=max(len(label) * CHAR_W + 2 * PAD_X, 60.0), h=BOX_H, xy=(0.0, 0.0), label=label)
    edges = [Edge(vertices[e.source], vertices[e.target], data=e) for e in g.edges if e.source != e.target]
    for ge in edges:
        ge.view = _EdgeView()
    core = Graph(list(vertices.values()), edges)

    out = Layout()
    offset_x = 0.0
    for component in core.C:
        sug = SugiyamaLayout(component)
        sug.xspace = 40
        sug.yspace = 46 + 2 * CLUSTER_LABEL
        sug.route_edge = route_with_lines
        roots = [v for v in component.sV if v.data == "__start__"] or None
        sug.init_all(roots=roots)
        sug.draw(N=3)
        xs = [v.view.xy[0] - v.view.w / 2 for v in component.sV]
        shift = offset_x - min(xs)
        for v in component.sV:
            v.view.xy = (v.view.xy[0] + shift, v.view.xy[1])
        for ge in component.sE:
            ge.view.pts = [(x + shift, y) for x, y in ge.view.pts]
        offset_x = max(v.view.xy[0] + v.view.w / 2 for v in component.sV) + 60

    for node_id, v in vertices.items():
        x, y = v.view.xy
        out.boxes.append(Box(node_id, v.view.label, x, y, v.view.w, BOX_H,
                             terminal=node_id.rsplit(":", 1)[-1] in ("__start__", "__end__")))
    loops = [(e, None) for e in g.edges if e.source == e.target]
    for e, route in [(ge.data, ge.view.pts) for ge in edges] + loops:
        (sx, sy), (tx, ty), w = vertices[e.source].view.xy, vertices[e.target].view.xy, vertices[e.source].view.w
        if route is None:  # a loop: a small arc on the node's right
            pts = [(sx + w / 2, sy - 6), (sx + w / 2 + 26, sy - 10), (sx + w / 2 + 26, sy + 10), (sx + w / 2, sy + 6)]
        else:
            pts = list(route) or [(sx, sy), (tx, ty)]
            if _dist(pts[0], (tx, ty)) < _dist(pts[0], (sx, sy)):  # an edge grandalf inverted to break a cycle
                pts.reverse()
        out.lines.append(Line(e.source, e.target, pts, bool(e.conditional), "" if e.data is None else str(e.data)))

    # a group per subgraph prefix, outer groups around inner ones
    members: dict[str, list[Box]] = {}
    for box in out.boxes:
        for prefix in _prefixes(box.id):
            members.setdefault(prefix, []).append(box)
    max_depth = max((p.count(":") for p in members), default=0)
    for name in sorted(members, key=lambda p: p.count(":")):
        boxes = members[name]
        depth = name.count(":")
        pad = CLUSTER_PAD + 8 * (max_depth - depth)
        inside = {b.id for b in boxes}
        # the bends of the group's own edges stay inside its frame
        bends = [pt for ln in out.lines if ln.source in inside and ln.target in inside for pt in ln.points[1:-1]]
        out.groups.append(Group(
            name, depth,
            min([b.x - b.w / 2 for b in boxes] + [x for x, _ in bends]) - pad,
            min(b.y - b.h / 2 for b in boxes) - pad - CLUSTER_LABEL,
            max([b.x + b.w / 2 for b in boxes] + [x for x, _ in bends]) + pad,
            max(b.y + b.h / 2 for b in boxes) + pad,
        ))

    # move everything into positive coordinates with a margin
    xs = [b.x - b.w / 2 for b in out.boxes] + [gr.x0 for gr in out.groups]
    ys = [b.y - b.h / 2 for b in out.boxes] + [gr.y0 for gr in out.groups]
    dx, dy = MARGIN - min(xs), MARGIN - min(ys)
    for b in out.boxes:
        b.x, b.y = b.x + dx, b.y + dy
    for ln in out.lines:
        ln.points = [(x + dx, y + dy) for x, y in ln.points]
    for gr in out.groups:
        gr.x0, gr.x1, gr.y0, gr.y1 = gr.x0 + dx, gr.x1 + dx, gr.y0 + dy, gr.y1 + dy
    out.width = max([b.x + b.w / 2 for b in out.boxes] + [gr.x1 for gr in out.groups]
                    + [x for ln in out.lines for x, _ in ln.points]) + MARGIN
    out.height = max([b.y + b.h / 2 for b in out.boxes] + [gr.y1 for gr in out.groups]) + MARGIN
    return out


def _dist(a: tuple[float, float], b: tuple[float, float]) -> float:
    return (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2


def draw_svg(graph: Drawable, *, title: str | None = None, id_prefix: str = "jg") -> str:
    """An SVG document of ``graph``: a labelled box per node, an arrow per edge (dashed when conditional), a
    labelled frame per subgraph (``assets/graph.svg``)."""
    from .tables import templates

    name = title if title is not None else str(getattr(graph, "name", "") or "graph")
    return templates().get_template("graph.svg").render(lay=graph_layout(graph), name=name, marker=f"{id_prefix}-arrow",
                                                        font_size=FONT_SIZE) + "\n"


def draw_png(graph_or_svg: Drawable | str, *, scale: float = 2.0) -> bytes:
    """PNG bytes of a graph (or of an SVG string), through resvg-py.

    Raises :class:`PngUnavailable` naming the package to install when it is absent."""
    try:
        import resvg_py
    except ImportError as exc:
        raise PngUnavailable(
            "PNG needs an SVG renderer: pip install 'judgegraph[png]' (resvg-py), or use --format svg"
        ) from exc
    svg = graph_or_svg if isinstance(graph_or_svg, str) else draw_svg(graph_or_svg)
    return bytes(resvg_py.svg_to_bytes(svg_string=svg, zoom=scale, background="#ffffff"))
