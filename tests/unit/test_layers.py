"""What the package is made of: the core never reaches into the test kit, the
wheel ships the prompts and no test kit (tests/integration/test_packaging.py, which builds the one wheel), one
scripted chat model, one token counter."""

import ast
import re
from pathlib import Path

from judgegraph.metrics import built_ins

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "judgegraph"


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports (relative ones written with their dots)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names += [module] if node.module else [f"{module}{alias.name}" for alias in node.names]
    return names


def test_no_package_module_imports_the_test_kit():
    bad = []
    for path in _modules():
        for name in _imports(path):
            parts = name.lstrip(".").split(".")
            if (parts[0] == "tests" and not name.startswith(".")) or "testing" in parts:
                bad.append(f"{path.relative_to(ROOT)}: {name}")
    assert bad == []
    assert not (PACKAGE / "testing").exists()


def test_one_scripted_chat_model_and_one_token_counter():
    fakes, tokenizers = [], []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & {"GenericFakeChatModel", "FakeListChatModel", "BaseChatModel", "SimpleChatModel"}:
                    fakes.append(f"{path.name}:{node.name}")
        if "tiktoken" in {n.split(".")[0] for n in _imports(path)}:
            tokenizers.append(path.name)
    assert fakes == ["scripted.py:ScriptedChatModel"]  # the dry run's recorder is one of them, configured
    assert tokenizers == ["tokens.py"]


# -- generic layers know no metric (issue 16, item 6) ---------------------------------------------------------

#: The modules every metric is built on or run by: they may use the registry (``judgegraph.metrics``:
#: ``get_metric``, ``MetricSpec``, ``DEFAULT_METRICS``) but no metric module, and name no metric.
GENERIC = [
    "core/nodes.py", "core/statements.py", "runs/runner.py", "report.py", "data/results.py", "core/state.py", "data/windows.py", "data/conversation.py",
    "core/replay.py", "steering.py", "outputs/transcripts.py", "runs/resultsfile.py", "loaders/base.py",
    "judges/*.py", "embeddings/*.py", "outputs/*.py", "scale/*.py",
]
#: Every built-in metric's name, from the registry.
METRIC_NAMES = tuple(built_ins())
_NAMED = re.compile("|".join(rf"{n}|{n.replace('_', '-')}" for n in METRIC_NAMES))
#: Metric modules: the registry's submodules (``judgegraph.metrics.<module>``), packages included.
METRIC_MODULES = {p.stem if p.suffix else p.name for p in (PACKAGE / "metrics").iterdir()
                  if p.suffix == ".py" and p.stem != "__init__" or (p.is_dir() and (p / "__init__.py").exists())}
#: Explicit exceptions, each with why: none today.
ALLOWED: dict[str, set[str]] = {}


def _generic_modules() -> list[Path]:
    found = {p for pattern in GENERIC for p in PACKAGE.glob(pattern)}
    assert len(found) > 30  # the patterns still match the package
    return sorted(found)


def _metric_imports(source: str, package: tuple[str, ...]) -> list[str]:
    """Imports of a metric module by a module of ``package`` (its folders under judgegraph):
    ``from .metrics import response`` counts, the registry (``from .metrics import get_metric``) does not."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = (["judgegraph"] + base if node.level else []) + (node.module or "").split(".")
            module = [m for m in module if m]
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[:2] == ["judgegraph", "metrics"] and len(parts) > 2:
                    bad.append(alias.name)
            continue
        else:
            continue
        if module[:2] == ["judgegraph", "metrics"]:
            if len(module) > 2:
                bad.append(".".join(module))
            else:
                bad += [f"judgegraph.metrics.{n}" for n in names if n in METRIC_MODULES]
    return bad


def _metric_strings(source: str) -> list[str]:
    """String constants naming a metric, docstrings left out (comments are not in the tree)."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
        and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [f"line {node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and _NAMED.search(node.value)]


def test_the_checks_see_what_they_look_for():
    """The two checks find a metric import and a metric name where there is one (and not in a docstring)."""
    probe = ('"""turn_relevancy in a docstring."""\nfrom ..metrics import get_metric, response\n'
             'from ..metrics.session import completeness\nimport judgegraph.metrics.relevancy\n'
             'from .metrics import MetricSpec\nDEFAULT = "turn-relevancy"\n')
    assert _metric_imports(probe, ("scale",)) == ["judgegraph.metrics.response", "judgegraph.metrics.session",
                                                  "judgegraph.metrics.relevancy"]  # .metrics there: scale's own
    assert _metric_strings(probe) == ["line 6: 'turn-relevancy'"]


def test_generic_modules_import_no_metric_module_and_name_no_metric():
    bad = []
    for path in _generic_modules():
        rel = str(path.relative_to(PACKAGE))
        source = path.read_text(encoding="utf-8")
        found = ([f"imports {m}" for m in _metric_imports(source, path.relative_to(PACKAGE).parent.parts)]
                 + [f"names {s}" for s in _metric_strings(source)])
        bad += [f"{rel}: {f}" for f in found if f not in ALLOWED.get(rel, set())]
    assert bad == []


def test_runner_knows_no_input_format():
    """promptfoo's rules (its ``not-`` negation) live with its loader: the runner and the report graph
    import no format module and hold no format's rule, only the generic hook (``result_transform``)."""
    for name in ("runs/runner.py", "report.py"):
        path = PACKAGE / name
        assert not [i for i in _imports(path) if "formats" in i or "promptfoo" in i], name
        words = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                words.add(node.name)
            elif isinstance(node, ast.Name):
                words.add(node.id)
            elif isinstance(node, ast.Attribute):
                words.add(node.attr)
            elif isinstance(node, ast.keyword) and node.arg:
                words.add(node.arg)
        assert not [w for w in words if "negat" in w.lower() or "promptfoo" in w.lower()], name


#: Private attributes read on purpose: the HTTP library's own pool and backend, which the judge's
#: transport wraps to enforce its deadline (judges/transport.py; no public hook exists). Batch mode reads
#: each request's body at that transport (issue 20), not through langchain-openai's private request builder.
PRIVATE_READS = {"judges/transport.py": {"_pool", "_network_backend"}}


def test_no_module_reads_private_attributes_of_another_object():
    """A judge exposes what others need (``Judge.embeddings``, ``Judge.endpoint``): nobody does
    ``getattr(judge, "_embeddings")`` or digs the key out of its client."""
    bad = []
    for path in _modules():
        rel = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and isinstance(node.args[1].value, str) and node.args[1].value.startswith("_")
                    and not node.args[1].value.startswith("__")
                    and node.args[1].value not in PRIVATE_READS.get(rel, set())):
                bad.append(f"{rel}:{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    assert bad == []


def test_batch_mode_touches_nothing_private_of_another_object():
    """Batch mode answers at the judge's HTTP transport (issue 20): no ``model._get_request_payload(...)``
    nor ``model._create_chat_result(...)``, written as an attribute or through ``getattr``."""
    bad = []
    for path in sorted((PACKAGE / "batch").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.attr if isinstance(node, ast.Attribute) else None
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):
                name = str(node.args[1].value)
            owner = node.value if isinstance(node, ast.Attribute) else None
            if (name and name.startswith("_") and not name.startswith("__")
                    and not (isinstance(owner, ast.Name) and owner.id in ("self", "cls"))):
                bad.append(f"{path.name}:{node.lineno}: {name}")
    assert bad == []


def _unannotated(source: str) -> list[str]:
    """The functions of ``source`` missing an annotation (a parameter's, or the return's): what mypy's
    ``disallow_untyped_defs`` reports (``self``/``cls`` and an ``__init__`` with typed parameters aside)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                  *([a.kwarg] if a.kwarg else [])]
        untyped = [p.arg for i, p in enumerate(params) if p.annotation is None and not (i == 0 and p.arg in ("self", "cls"))]
        if untyped or (node.returns is None and node.name != "__init__"):
            out.append(f"line {node.lineno}: {node.name}")
    return out


def test_every_function_of_the_package_is_annotated():
    """Issue 16 item 7: mypy runs with ``disallow_untyped_defs`` on the whole package (pyproject.toml)."""
    assert _unannotated("def f(self, x: int) -> int: ...\ndef g(x):\n    def h() -> None: ...\n") == ["line 2: g"]
    bad = [f"{path.relative_to(PACKAGE)} {f}" for path in _modules() for f in _unannotated(path.read_text(encoding="utf-8"))]
    assert bad == []


def _private(name: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def test_the_example_metric_imports_only_public_names():
    """``examples/reply_language.py`` imports no module or name with a leading underscore, and from a module with an
    ``__all__`` (every judgegraph module it uses has one) only the names it lists."""
    import importlib

    tree = ast.parse((ROOT / "examples" / "reply_language.py").read_text(encoding="utf-8"))
    imported, bad = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad += [alias.name for alias in node.names if _private(alias.name) or alias.name.startswith("judgegraph")]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            assert node.level == 0 and node.module
            module = importlib.import_module(node.module)
            public = getattr(module, "__all__", None)
            if node.module.startswith("judgegraph") and public is None:
                bad.append(f"{node.module} (no __all__)")
            for alias in node.names:
                imported.append(f"{node.module}:{alias.name}")
                if _private(node.module) or _private(alias.name) or (public is not None and alias.name not in public):
                    bad.append(f"{node.module}:{alias.name}")
    assert bad == []
    assert "judgegraph.metric:MetricSpec" in imported  # the check saw the imports it is about
    assert _private("judgegraph._x") and _private("_y") and not _private("__future__")
