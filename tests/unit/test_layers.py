"""What the package is made of: the core never reaches into the test kit, the
wheel ships the prompts and no test kit, one scripted chat model, one token counter."""

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

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


def test_wheel_ships_prompts_and_no_test_kit(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, timeout=300)
    (wheel,) = tmp_path.glob("judgegraph-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    kit = sorted(n for n in names if n.startswith(("tests/", "judgegraph/testing/"))
                 or n.endswith(("openai_server.py", "fake_chat.py")))
    assert kit == []
    prompts = {f"judgegraph/{p.relative_to(ROOT)}" for p in (ROOT / "prompts").rglob("*.md")}
    assert prompts and prompts <= names
    assert {"judgegraph/judges/scripted.py", "judgegraph/judges/schema_example.py",
            "judgegraph/judges/tokens.py"} <= names
