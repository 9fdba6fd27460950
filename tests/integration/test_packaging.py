"""The wheel ships the prompts, and an installed (non-editable) judgegraph reads them."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_wheel_carries_prompts_and_reads_them_when_installed(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, timeout=300)
    (wheel,) = tmp_path.glob("judgegraph-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {str(p.relative_to(ROOT)) for p in (ROOT / "prompts").rglob("*.md")}
    assert {f"judgegraph/{n}" for n in shipped} <= names
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, timeout=300)
    code = ("import judgegraph.data.prompts as p; q = p.load_prompt('turn_relevancy/judge_turn'); "
            "print(q.path); assert 'site' in str(q.path), q.path")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert str(target) in out.stdout
