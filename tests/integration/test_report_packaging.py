"""The wheel ships the HTML report's page, style and script, and an installed
(non-editable) judgegraph writes a report from them."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
ASSETS = ("report.html", "report.css", "report.js")


def test_wheel_carries_the_report_assets_and_writes_a_report_when_installed(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, timeout=300)
    (wheel,) = tmp_path.glob("judgegraph-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"judgegraph/outputs/assets/{a}" for a in ASSETS} <= names
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, timeout=300)
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
