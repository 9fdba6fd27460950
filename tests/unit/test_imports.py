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
    assert "judgegraph.runner" in graph["judgegraph.batch.run"]


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
