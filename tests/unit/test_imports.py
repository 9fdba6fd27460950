"""The import direction of the package, read from its own code (issue 25.3): no import circles, nothing imports
the command line but the command line, and no module outside ``metrics/`` imports a metric's module but the app or
command named after it. The metric modules are the registry's (each registered metric's factory module), never a
list typed here. Imports are the ones that run: at module level and inside functions; those under
``if TYPE_CHECKING:`` never run and are left out."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "judgegraph"


def _module_names() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _module_names()


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The package modules an import statement of ``module`` reaches (the deepest that exists)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".")
            if MODULES[module].name != "__init__.py":
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        names = [f"{target}.{alias.name}" for alias in node.names]
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            yield name


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports at run time."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        typing_only = {id(n) for block in ast.walk(tree)
                       if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
                       for n in ast.walk(block)}
        graph[module] = {t for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                         and id(node) not in typing_only for t in _targets(module, node)}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_sees_a_circle_and_an_upward_import():
    """The checks below cannot pass by seeing nothing."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "judgegraph.cli.common" in graph["judgegraph.cli.eval"]  # in-function and module-level both read
    assert "judgegraph.runs.runner" in graph["judgegraph.batch.run"]


def test_no_import_circles():
    assert circles(import_graph()) == []


def test_nothing_but_the_command_line_imports_it():
    upward = sorted(f"{m} -> {t}" for m, targets in import_graph().items()
                    if not m.startswith("judgegraph.cli") and m != "judgegraph.__main__"
                    for t in targets if t.startswith("judgegraph.cli"))
    assert upward == []


def test_no_module_outside_the_metrics_imports_a_metric_but_its_own_app_or_command():
    from judgegraph.metrics import registry

    metric_modules = {spec.factory.__module__ for spec in registry().values()}
    metric_modules = {m if m in MODULES else m.rpartition(".")[0] for m in metric_modules}
    assert "judgegraph.metrics.relevancy" in metric_modules and len(metric_modules) > 5  # from the registry
    upward = []
    for module, targets in import_graph().items():
        if module.startswith("judgegraph.metrics") or module == "judgegraph":  # judgegraph: the lazy public names
            continue
        for target in targets & metric_modules:
            if target.rpartition(".")[2] != module.rpartition(".")[2]:  # apps/pairwise, cli/pairwise: its own
                upward.append(f"{module} -> {target}")
    assert sorted(upward) == []


# -- the layers (written by relayout.py from its LAYERS; docs/architecture.md shows the same table) --

#: The layers, lowest first: a module may import its own layer and the ones below it, never one above.
#: A module belongs to the layer of its longest prefix here (``judgegraph`` alone: the root's lazy table).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("package root", ("judgegraph", "judgegraph._lazy")),
    ("data", ("judgegraph.data",)),
    ("judging", ("judgegraph.providers", "judgegraph.judges", "judgegraph.embeddings")),
    ("core", ("judgegraph.core",)),
    ("metrics", ("judgegraph.metrics",)),
    ("composition", ("judgegraph.report", "judgegraph.steering", "judgegraph.studio", "judgegraph.metric")),
    ("cost", ("judgegraph.cost",)),
    ("inputs", ("judgegraph.loaders",)),
    ("runs", ("judgegraph.runs", "judgegraph.batch", "judgegraph.scale")),
    ("statistics", ("judgegraph.stats",)),
    ("trust and compare", ("judgegraph.trust", "judgegraph.compare")),
    ("outputs", ("judgegraph.outputs",)),
    ("integrations", ("judgegraph.apps", "judgegraph.integrations", "judgegraph.view")),
    ("command line", ("judgegraph.cli",)),
]


def layer_of(module: str) -> int | None:
    """The index in LAYERS of ``module``'s layer (its longest matching prefix), None when no layer holds it."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or (prefix != "judgegraph" and module.startswith(prefix + "."))) and (
                    best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a lower layer into a higher one, named ``module (layer) -> module (layer)``. The root
    package is imported by all (``__version__``) and imports at attribute access only: the lazy face of them all."""
    found = []
    for module, targets in graph.items():
        if module == "judgegraph":
            continue
        here = layer_of(module)
        for target in targets:
            there = layer_of(target)
            if here is not None and there is not None and there > here:
                found.append(f"{module} ({LAYERS[here][0]}) -> {target} ({LAYERS[there][0]})")
    return sorted(found)


def test_the_layer_check_sees_an_upward_import():
    graph = {"judgegraph.core.nodes": {"judgegraph.cli.eval"}, "judgegraph.cli.eval": {"judgegraph.core.nodes"}}
    assert upward_imports(graph) == ["judgegraph.core.nodes (core) -> judgegraph.cli.eval (command line)"]


def test_every_module_has_a_layer():
    assert sorted(m for m in MODULES if layer_of(m) is None) == []


def test_nothing_imports_a_higher_layer():
    assert upward_imports(import_graph()) == []

# -- end of the layers --
