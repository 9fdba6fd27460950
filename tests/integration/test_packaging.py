"""The wheel ships the prompts and the HTML report's page, style and script (and no test kit), and an installed
(non-editable) judgegraph reads its prompts and writes a report from them. One wheel, built and installed once for both (a wheel
build and an install are most of each test's time; the tests only read the wheel and run the installed copy)."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
ASSETS = ("report.html", "tables.html", "agreement.html", "graph.svg", "report.css", "report.js")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """The wheel built from the checkout, and the folder it is installed into (``pip install --target``)."""
    where = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(where), str(ROOT)],
                   check=True, timeout=300)
    (wheel,) = where.glob("judgegraph-*.whl")
    target = where / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, timeout=300)
    return wheel, target


def test_wheel_ships_prompts_and_no_test_kit(installed):
    """(From tests/unit/test_layers.py: the wheel is built once, here.)"""
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    kit = sorted(n for n in names if n.startswith(("tests/", "judgegraph/testing/"))
                 or n.endswith(("openai_server.py", "fake_chat.py")))
    assert kit == []
    prompts = {f"judgegraph/{p.relative_to(ROOT)}" for p in (ROOT / "prompts").rglob("*.md")}
    assert prompts and prompts <= names
    assert {"judgegraph/judges/scripted.py", "judgegraph/judges/schema_example.py",
            "judgegraph/judges/tokens.py", "judgegraph/cli/starter/judgegraph.yaml",
            "judgegraph/cli/starter/chats.jsonl"} <= names


def test_wheel_carries_prompts_and_reads_them_when_installed(installed, tmp_path):
    wheel, target = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {str(p.relative_to(ROOT)) for p in (ROOT / "prompts").rglob("*.md")}
    assert {f"judgegraph/{n}" for n in shipped} <= names
    code = ("import judgegraph.data.prompts as p; q = p.load_prompt('turn_relevancy/judge_turn'); "
            "print(q.path); assert 'site' in str(q.path), q.path")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert str(target) in out.stdout


def test_wheel_carries_the_report_assets_and_writes_a_report_when_installed(installed, tmp_path):
    wheel, target = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"judgegraph/outputs/assets/{a}" for a in ASSETS} <= names
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps({"type": "conversation", "conversation_id": "c1", "source": "x:1",
                                   "results": {}, "error": None}) + "\n")
    code = ("import judgegraph.outputs.html as h, sys; m = h.write_report(sys.argv[1], sys.argv[2], graphs=[]); "
            "print(h.__file__)")
    out = subprocess.run([sys.executable, "-c", code, str(results), str(tmp_path / "r.html")], check=False, cwd=tmp_path,
                         env={"PYTHONPATH": str(target)}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert str(target) in out.stdout
    page = (tmp_path / "r.html").read_text()
    assert '"id":"c1"' in page and "applyFilters" in page and "--pass:" in page
