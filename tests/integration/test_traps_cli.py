"""Issue 27's command-line traps: what a new user meets on the first try says what is true, in plain words."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHATS = [{"id": "c1", "turns": [{"role": "user", "content": "Hi, when do you open on Saturdays?"},
                                {"role": "assistant", "content": "We open at 9 am on Saturdays."}]}]


def judgegraph(*args: str, env: dict, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "judgegraph.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, check=False, timeout=300)


def test_repeat_with_the_offline_judge_warns_in_one_plain_line(tmp_path: Path, bare_env):
    chats = tmp_path / "chats.jsonl"
    chats.write_text("".join(json.dumps(c) + "\n" for c in CHATS))
    done = judgegraph("eval", str(chats), "--repeat", "3", "--out", str(tmp_path / "r.jsonl"), "-q", "--no-progress",
                      env=bare_env)
    assert done.returncode in (0, 1), done.stderr
    warned = [line for line in done.stderr.splitlines() if "cannot vary" in line]
    assert warned == ["warning: --repeat with offline:all-MiniLM-L6-v2: this judge cannot vary (no seed), every repeat "
                      "is the same answer"]
    assert "UserWarning" not in done.stderr and "Jury.repeat(" not in done.stderr  # no Python source line
