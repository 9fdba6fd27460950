"""The options eval, simulate and rejudge share (issue 16, "one core"): one check, one message naming the flag,
exit 2 before any work, whichever command gets the bad value."""

import json

import pytest

from judgegraph.cli import main
from judgegraph.cli.common import MAX_CONCURRENCY

pytestmark = pytest.mark.integration

@pytest.fixture
def chats(tmp_path):
    path = tmp_path / "chats.jsonl"
    turns = [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."}]
    path.write_text(json.dumps({"id": "a", "turns": turns}) + "\n", encoding="utf-8")
    return path


def command(name, tmp_path, chats):
    """The command line of ``name`` up to its options, and the file it would write."""
    out = tmp_path / f"{name}-out.jsonl"
    return out, {
        "eval": ["eval", str(chats), "--out", str(out), "-q", "--no-progress"],
        "simulate": ["simulate", "nosuchmodule_xyz:app", "--scenarios", str(chats), "--user-model", "openai:u",
                     "--out", str(out)],
        "rejudge": ["rejudge", str(tmp_path / "results.jsonl"), "--input", str(chats), "-m", "turn-relevancy",
                    "--rubric", "x", "--model", "openai:judge", "--out", str(out)],
    }[name]


@pytest.mark.parametrize("flag, value, message, commands", [
    ("--threshold", "1.5", "--threshold must be between 0 and 1, got 1.5", ("eval", "simulate")),
    ("--threshold", "nan", "--threshold must be between 0 and 1, got nan", ("eval", "simulate")),
    ("--window-size", "0", "--window-size must be a whole number >= 1, got 0", ("eval", "simulate")),
    ("--concurrency", "0", "--concurrency must be a whole number >= 1, got 0", ("eval", "simulate", "rejudge")),
    ("--concurrency", str(MAX_CONCURRENCY + 1),
     f"--concurrency must be at most {MAX_CONCURRENCY}, got {MAX_CONCURRENCY + 1} (each one in flight holds memory)",
     ("eval", "simulate", "rejudge")),
    ("--max-tries", "0", "--max-tries must be a whole number >= 1, got 0", ("eval", "rejudge")),
    ("--base-url", "127.0.0.1:8000", "--base-url '127.0.0.1:8000' must be an http:// or https:// URL",
     ("eval", "simulate", "rejudge")),
])
def test_a_bad_shared_option_is_the_same_usage_error_in_every_command(tmp_path, chats, capsys, flag, value, message,
                                                                      commands):
    for name in commands:
        out, argv = command(name, tmp_path, chats)
        extra = ["--model", "openai:judge"] if name == "eval" and flag == "--base-url" else []
        assert main([*argv, *extra, flag, value]) == 2, name
        assert message in capsys.readouterr().err, name
        assert not out.exists(), name  # refused before any work


@pytest.mark.parametrize("name", ["eval", "simulate", "rejudge"])
def test_an_unreadable_guideline_file_is_a_usage_error_before_any_work(tmp_path, chats, capsys, name):
    # simulate stopped with "internal error" (exit 4), rejudge judged every conversation and kept each result
    # (exit 3), before the three read --guideline the same way
    out, argv = command(name, tmp_path, chats)
    if name == "rejudge":  # a results file to re-judge: rejudge reads --guideline before it
        (tmp_path / "results.jsonl").write_text("", encoding="utf-8")
    else:
        argv += ["-m", "conversational-guidelines"]
    missing = tmp_path / "no-such-guidelines.txt"
    assert main([*argv, "--guideline", f"@{missing}"]) == 2
    assert f"--guideline {missing}: cannot read it" in capsys.readouterr().err
    assert not out.exists()
