"""Issue 27's command-line traps: what a new user meets on the first try says what is true, in plain words."""

from __future__ import annotations

import json
from pathlib import Path

from tests.kit import cli

CHATS = [{"id": "c1", "turns": [{"role": "user", "content": "Hi, when do you open on Saturdays?"},
                                {"role": "assistant", "content": "We open at 9 am on Saturdays."}]}]


def test_repeat_with_the_offline_judge_warns_in_one_plain_line(tmp_path: Path, bare_env):
    chats = tmp_path / "chats.jsonl"
    chats.write_text("".join(json.dumps(c) + "\n" for c in CHATS))
    done = cli.run(["eval", str(chats), "--repeat", "3", "--out", str(tmp_path / "r.jsonl"), "-q", "--no-progress"],
                   env=bare_env)
    assert done.returncode in (0, 1), done.stderr
    warned = [line for line in done.stderr.splitlines() if "cannot vary" in line]
    assert warned == ["warning: --repeat with offline:all-MiniLM-L6-v2: this judge cannot vary (no seed), every repeat "
                      "is the same answer"]
    assert "UserWarning" not in done.stderr and "Jury.repeat(" not in done.stderr  # no Python source line


def test_init_s_file_run_unedited_in_an_empty_folder_judges_its_sample_conversations(tmp_path: Path, bare_env):
    """The starter file names chats.jsonl: init writes two sample conversations there when there is none, so the
    file runs as written (before: an empty table and exit 3); a chats.jsonl of the user's own is never replaced."""
    assert cli.run(["init"], env=bare_env, cwd=tmp_path).returncode == 0
    done = cli.run(["eval", "--config", "judgegraph.yaml", "--no-progress"], env=bare_env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 conversations, 2 results: 2 passed" in " ".join(done.stdout.split() + done.stderr.split())
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "chats.jsonl").write_text(json.dumps(CHATS[0]) + "\n")
    assert cli.run(["init"], env=bare_env, cwd=mine).returncode == 0
    assert (mine / "chats.jsonl").read_text() == json.dumps(CHATS[0]) + "\n"


def test_diff_and_pairwise_each_say_which_kind_of_file_they_want_when_given_the_other(tmp_path: Path, capsys):
    """diff takes results files, pairwise conversation files: each names the other command for the other kind."""
    from judgegraph.cli import main

    chats = tmp_path / "chats-v1.jsonl"
    chats.write_text("".join(json.dumps(c) + "\n" for c in CHATS))
    results = tmp_path / "results-v1.jsonl"
    assert main(["eval", str(chats), "--out", str(results), "-q", "--no-progress"]) in (0, 1)
    capsys.readouterr()
    assert main(["diff", str(chats), str(results)]) == 3
    out, err = capsys.readouterr()
    said = " ".join(err.split())
    assert f"{chats}: a conversations file (what `eval` reads), not a results file" in said
    assert "use `judgegraph pairwise FILE FILE --model M`" in said and out == ""  # no empty table
    assert main(["pairwise", str(results), str(chats), "--model", "openai:gpt-4.1-mini", "--dry-run"]) == 3
    said = " ".join(capsys.readouterr().err.split())
    assert "this results line carries no conversation" in said and "compared by `judgegraph diff`" in said
