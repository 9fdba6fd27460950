"""A judge cache that cannot be used never costs a verdict (issue 21, C.1): real
broken files given to ``judgegraph eval --cache`` and ``judgegraph cache``, against
the loopback OpenAI-compatible server."""

import json
import os
import random
import sqlite3
from pathlib import Path

import pytest

from judgegraph.judges.cache import DiskCache
from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured

pytestmark = pytest.mark.integration

YES = structured({"reason": "It answers the question.", "verdict": "yes"})
N_CONVERSATIONS, TURNS = 5, 3


def conversations(tmp_path: Path) -> Path:
    path = tmp_path / "chats.jsonl"
    with path.open("w") as f:
        for i in range(N_CONVERSATIONS):
            turns = []
            for k in range(TURNS):
                turns += [{"role": "user", "content": f"question {i}.{k}?"},
                          {"role": "assistant", "content": f"answer {i}.{k}."}]
            f.write(json.dumps({"id": f"c{i}", "turns": turns}) + "\n")
    return path


def at_home(home: Path) -> dict[str, str]:
    """This process's environment with HOME at ``home``."""
    return {**os.environ, "HOME": str(home)}


def full_cache(path: Path, n: int = 300) -> Path:
    """A real judge cache of many pages (so damage can spare the header)."""
    disk = DiskCache(path)
    for i in range(n):
        disk.put(f"key{i}", json.dumps({"reason": "x" * 500, "verdict": "yes"}), reply="r" * 300, model="m")
    disk.close()
    assert path.stat().st_size > 8 * 4096
    return path


def garbage(tmp_path: Path) -> Path:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(random.Random(1).randbytes(20_000))
    return path


def truncated(tmp_path: Path) -> Path:
    path = full_cache(tmp_path / "truncated.sqlite")
    os.truncate(path, path.stat().st_size // 2 + 100)
    return path


def page_corrupt(tmp_path: Path) -> Path:
    """The header and the first page intact, every later page overwritten."""
    path = full_cache(tmp_path / "pages.sqlite")
    data = bytearray(path.read_bytes())
    rnd = random.Random(2)
    data[2 * 4096:] = bytes(rnd.randrange(256) for _ in range(len(data) - 2 * 4096))
    path.write_bytes(bytes(data))
    return path


def foreign(tmp_path: Path) -> Path:
    path = tmp_path / "other-app.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.close()
    return path


def foreign_answers(tmp_path: Path) -> Path:
    path = tmp_path / "other-answers.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE answers (id INTEGER PRIMARY KEY, text TEXT)")
    conn.close()
    return path


def directory(tmp_path: Path) -> Path:
    path = tmp_path / "a-folder.sqlite"
    path.mkdir()
    return path


def dev_null(tmp_path: Path) -> Path:
    return Path("/dev/null")


def under_a_file(tmp_path: Path) -> Path:
    """A folder that cannot be created (its parent is a file): fails for root too."""
    (tmp_path / "plain-file").write_text("x")
    return tmp_path / "plain-file" / "judge-cache.sqlite"


BROKEN = [garbage, truncated, page_corrupt, foreign, foreign_answers, directory, dev_null, under_a_file]


def judged(out: Path) -> list[dict]:
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return [res for r in records if r["type"] == "conversation" for res in r["results"].values()]


@pytest.mark.parametrize("make", BROKEN, ids=lambda f: f.__name__)
def test_a_broken_cache_file_is_warned_about_once_and_every_conversation_is_judged(tmp_path, make):
    cache = make(tmp_path)
    before = cache.read_bytes() if cache.is_file() else None
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        proc = cli.run(["eval", str(conversations(tmp_path)), "--model", "judge-model", "--base-url", server.base_url,
                        "--cache", str(cache), "--out", str(out), "--no-progress"], env=at_home(tmp_path))
        calls = server.calls["/v1/chat/completions"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = judged(out)
    assert len(results) == N_CONVERSATIONS and all(r["status"] == "passed" and r["score"] == 1.0 for r in results)
    assert calls == N_CONVERSATIONS * TURNS
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: judge cache")]
    assert len(warnings) == 1, proc.stderr
    assert str(cache) in warnings[0] and "--no-cache" in warnings[0] and "--cache PATH" in warnings[0]
    if make in (foreign, foreign_answers):  # another program's database is never written to
        assert cache.read_bytes() == before


def test_an_unwritable_default_cache_folder_is_warned_about_and_judging_goes_on(tmp_path):
    """$HOME/.cache is a file: the default cache folder cannot be made."""
    (tmp_path / ".cache").write_text("not a folder")
    env = {k: v for k, v in os.environ.items() if k not in ("JUDGEGRAPH_JUDGE_CACHE", "JUDGEGRAPH_CACHE_DIR")}
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        proc = cli.run(["eval", str(conversations(tmp_path)), "--model", "judge-model", "--base-url", server.base_url,
                        "--out", str(out), "--no-progress"], env={**env, "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(judged(out)) == N_CONVERSATIONS
    assert proc.stderr.count("warning: judge cache") == 1
    assert str(tmp_path / ".cache" / "judgegraph" / "judge-cache.sqlite") in proc.stderr


@pytest.mark.parametrize("make", [garbage, truncated, page_corrupt], ids=lambda f: f.__name__)
def test_cache_info_reports_a_damaged_file_and_clear_replaces_it(tmp_path, make):
    cache = make(tmp_path)
    info = cli.run(["cache", "info", "--cache", str(cache)], env=at_home(tmp_path))
    assert info.returncode == 3, info.stdout + info.stderr
    assert str(cache) in info.stderr and "cache clear" in info.stderr and "internal error" not in info.stderr
    cleared = cli.run(["cache", "clear", "--cache", str(cache)], env=at_home(tmp_path))
    assert cleared.returncode == 0, cleared.stdout + cleared.stderr
    assert "damaged" in cleared.stdout and not cache.exists()
    after = cli.run(["cache", "info", "--cache", str(cache)], env=at_home(tmp_path))
    assert after.returncode == 0 and "no file yet" in after.stdout


@pytest.mark.parametrize("make", [foreign, foreign_answers, directory, dev_null], ids=lambda f: f.__name__)
def test_cache_info_and_clear_refuse_what_is_not_a_cache_and_leave_it_alone(tmp_path, make):
    cache = make(tmp_path)
    before = cache.read_bytes() if cache.is_file() else None
    for action in ("info", "clear"):
        proc = cli.run(["cache", action, "--cache", str(cache)], env=at_home(tmp_path))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert str(cache) in proc.stderr and "not a judge cache" in proc.stderr
    assert cache.exists() and (before is None or cache.read_bytes() == before)
