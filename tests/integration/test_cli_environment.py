"""Errors of the environment and of settings (issue 21 C.11, C.16): a full disk,
a --junit that is a directory, a prompt file that is not UTF-8, a --base-url that
is not a URL, a --concurrency no machine can hold. Each is a clear message and
exit 2 (usage, before any work) or 3 (could not complete), never 4 ("a bug"), and
what was written before stays."""

import json
import os

import pytest

from judgegraph.cli import main
from judgegraph.cli.common import MAX_CONCURRENCY
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured

pytestmark = pytest.mark.integration

YES = structured({"reason": "It answers the question.", "verdict": "yes"})


def chat(cid):
    return {"id": cid, "turns": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."}]}


@pytest.fixture
def chats(tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(chat(c)) + "\n" for c in ("a", "b")), encoding="utf-8")
    return path


def run_eval(server, chats, out, *extra):
    return main(["eval", str(chats), "--model", "openai:judge", "--base-url", server.base_url, "--out", str(out),
                 "--no-progress", "-q", "--no-cache", *extra])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_is_exit_3_with_the_file_named(chats, capsys):
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        code = run_eval(server, chats, "/dev/full")
    err = capsys.readouterr().err
    assert code == 3, err  # exit 4 "internal error: OSError" before
    assert "could not complete" in err and "/dev/full: No space left on device" in err
    assert "internal error" not in err


def test_junit_that_is_a_directory_is_refused_before_the_run(tmp_path, chats, capsys):
    (tmp_path / "ci").mkdir()
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        code = run_eval(server, chats, out, "--junit", str(tmp_path / "ci"))
        assert sum(server.calls.values()) == 0  # the whole run was made before, then exit 4 (IsADirectoryError)
    assert code == 2 and "--junit" in capsys.readouterr().err and not out.exists()


def test_junit_under_a_file_is_refused_before_the_run(tmp_path, chats, capsys):
    (tmp_path / "file").write_text("not a folder")
    out = tmp_path / "r.jsonl"
    code = main(["eval", str(chats), "--out", str(out), "--junit", str(tmp_path / "file" / "junit.xml"), "-q"])
    assert code == 2 and "a folder on its path is a file" in capsys.readouterr().err and not out.exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_junit_that_cannot_be_written_after_the_run_keeps_the_results(tmp_path, chats, capsys):
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        code = run_eval(server, chats, out, "--junit", "/dev/full")
    err = capsys.readouterr().err
    assert code == 3 and "cannot write --junit" in err and "internal error" not in err
    assert sum('"type": "conversation"' in line for line in out.read_text(encoding="utf-8").splitlines()) == 2
    assert main(["report", str(out), "-o", "/dev/full"]) == 3  # exit 2 before, with no file named
    assert "/dev/full: No space left on device" in capsys.readouterr().err


def test_files_named_by_options_that_are_not_utf8_are_usage_errors(tmp_path, chats, capsys):
    bad = tmp_path / "prompt.md"
    bad.write_bytes(b"Judge {reply}\n\xff\xfe")
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        assert run_eval(server, chats, out, "-m", "turn-relevancy") == 0
        code = main(["rejudge", str(out), "--input", str(chats), "-m", "turn-relevancy", "--prompt", str(bad),
                     "--model", "openai:judge", "--base-url", server.base_url, "--out", str(tmp_path / "new.jsonl")])
        assert code == 2  # exit 4 (UnicodeDecodeError) before
        assert f"--prompt {bad}: not valid UTF-8 (byte 15)" in capsys.readouterr().err
        code = run_eval(server, chats, tmp_path / "r2.jsonl", "--rubric", f"@{bad}")
        assert code == 2 and f"--rubric {bad}: not valid UTF-8" in capsys.readouterr().err
        assert server.calls["/v1/chat/completions"] == 2  # only the first run's


def test_rejudge_copies_a_line_with_a_bad_byte_or_too_deep_as_it_is(tmp_path, chats, capsys):
    out, new = tmp_path / "r.jsonl", tmp_path / "new.jsonl"
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        assert run_eval(server, chats, out, "-m", "turn-relevancy") == 0
        junk = b'{"type": "conversation", "conversation_id": "\xff"}\n' + b"[" * 100_000 + b"]" * 100_000 + b"\n"
        out.write_bytes(out.read_bytes() + junk)
        code = main(["rejudge", str(out), "--input", str(chats), "-m", "turn-relevancy", "--rubric", "STRICT",
                     "--model", "openai:judge", "--base-url", server.base_url, "--out", str(new)])
    assert code == 3, capsys.readouterr().err  # exit 4 (UnicodeDecodeError, then RecursionError) before
    assert "nested too deeply to read; copied as it is" in capsys.readouterr().err
    assert new.read_bytes().endswith(junk)


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:port/v1", "127.0.0.1:8000"])
def test_a_base_url_that_is_not_a_url_is_a_usage_error(tmp_path, chats, capsys, url):
    out = tmp_path / "r.jsonl"
    code = main(["eval", str(chats), "--model", "openai:judge", "--base-url", url, "--out", str(out), "-q"])
    assert code == 2 and "--base-url" in capsys.readouterr().err  # exit 4 (httpx InvalidURL) before
    code = main(["rejudge", str(out), "--input", str(chats), "-m", "turn-relevancy", "--rubric", "x",
                 "--model", "openai:judge", "--base-url", url, "--out", str(tmp_path / "new.jsonl")])
    assert code == 2 and "--base-url" in capsys.readouterr().err


def test_concurrency_beyond_the_maximum_is_refused(tmp_path, chats, capsys):
    out = tmp_path / "r.jsonl"
    code = main(["eval", str(chats), "--concurrency", "100000", "--out", str(out), "-q"])
    assert code == 2 and f"--concurrency must be at most {MAX_CONCURRENCY}, got 100000" in capsys.readouterr().err
    assert not out.exists()
    code = main(["rejudge", str(out), "--input", str(chats), "-m", "turn-relevancy", "--rubric", "x",
                 "--model", "openai:judge", "--concurrency", "100000", "--out", str(tmp_path / "new.jsonl")])
    assert code == 2 and f"at most {MAX_CONCURRENCY}" in capsys.readouterr().err
    code = main(["simulate", "x:y", "--scenarios", str(chats), "--user-model", "openai:u",
                 "--concurrency", str(MAX_CONCURRENCY + 1)])
    assert code == 2 and f"at most {MAX_CONCURRENCY}" in capsys.readouterr().err
