"""The command line tried as a new user would: the README's and docs' commands as
written, run twice, with no key, in a fresh folder (issue 21, section B)."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.kit import cli

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"


def readme_command(starts: str) -> list[str]:
    """The README's command line that starts with ``starts``, its comment cut off, as argv."""
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith(starts):
            return line.split("#", 1)[0].split()
    raise AssertionError(f"no README line starts with {starts!r}")


def test_dry_run_needs_no_key_and_leaves_an_existing_results_file_alone(tmp_path, bare_env):
    """It used to exit 2 twice: 'needs OPENAI_API_KEY', then 'r.jsonl already holds results'."""
    out = tmp_path / "r.jsonl"
    out.write_text('{"type": "conversation", "conversation_id": "old", "results": {}}\n')
    before = out.read_bytes()
    assert "OPENAI_API_KEY" not in bare_env
    proc = cli.run(["eval", str(EX / "support_chats.jsonl"), "--model", "openai:gpt-4.1-mini", "--dry-run",
                    "--out", str(out)], env=bare_env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"total\W+20\W+\d+", proc.stdout), proc.stdout  # 20 windows in the six example conversations
    assert "prices: $0.4 in / $1.6 out" in proc.stdout  # the real judge's name: its price is found
    assert "No call was made." in proc.stdout
    assert out.read_bytes() == before
    offline = cli.run(["eval", str(EX / "support_chats.jsonl"), "--dry-run", "--out", str(out)], env=bare_env,
                      cwd=tmp_path)
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert "6 conversations to judge" in offline.stdout and out.read_bytes() == before


def test_dry_run_still_checks_the_judge_options(tmp_path, bare_env):
    proc = cli.run(["eval", str(EX / "support_chats.jsonl"), "--base-url", "http://127.0.0.1:1/v1", "--dry-run"],
                   env=bare_env, cwd=tmp_path)
    assert proc.returncode == 2 and "--base-url needs --model" in proc.stderr


def test_the_readme_html_command_runs_twice(tmp_path, bare_env):
    """README 'Report in the browser': the second run used to exit 2 (the results file exists)."""
    argv = readme_command("judgegraph eval examples/support_chats.jsonl --overwrite --html")
    assert "--html" in argv
    (tmp_path / "examples").mkdir()
    shutil.copy(EX / "support_chats.jsonl", tmp_path / "examples")
    for _ in range(2):
        proc = cli.run([*argv[1:], "--no-progress"], env=bare_env, cwd=tmp_path)
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 1: a conversation failed its threshold
        assert (tmp_path / "report.html").stat().st_size > 0
    lines = (tmp_path / "judgegraph-results.jsonl").read_text().splitlines()
    assert sum(json.loads(line)["type"] == "conversation" for line in lines) == 6


@pytest.mark.parametrize("argv", [
    ["graph", "conversational-guidelines"],
    ["eval", str(EX / "session_chats.jsonl"), "-m", "conversational-guidelines", "--model", "openai:gpt-4.1-mini",
     "--dry-run"],
], ids=["graph", "eval"])
def test_a_missing_guideline_is_asked_for_as_the_command_line_flag(tmp_path, bare_env, argv):
    """It used to say `needs guidelines=[...]` (Python) to a command line user."""
    proc = cli.run([*argv], env=bare_env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "conversational-guidelines needs at least one --guideline TEXT" in proc.stderr
    assert "guidelines=[" not in proc.stderr
    drawn = cli.run(["graph", "conversational-guidelines", "--guideline", "Be kind."], env=bare_env, cwd=tmp_path)
    assert drawn.returncode == 0 and "judge_guideline" in drawn.stdout


def test_openai_base_url_is_honoured_and_shown_when_no_base_url_flag_is_given(tmp_path, bare_env):
    """As the openai client does; it used to be ignored: 'needs OPENAI_API_KEY (or --base-url ...)', exit 2."""
    from tests.kit.openai_server import FakeOpenAIServer, structured

    with FakeOpenAIServer(lambda request: structured({"reason": "On topic.", "verdict": "yes"})) as server:
        env = {**bare_env, "OPENAI_BASE_URL": server.base_url}
        proc = cli.run(["eval", str(EX / "support_chats.jsonl"), "--model", "openai:gpt-4.1-mini", "-q",
                        "--no-progress", "--out", "r.jsonl"], env=env, cwd=tmp_path)
        calls, url = server.calls["/v1/chat/completions"], server.base_url
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls == 20
    assert f"judge: llm:gpt-4.1-mini at {url} (OPENAI_BASE_URL)" in proc.stderr
    assert "6 passed" in proc.stdout


def bash_command(markdown: Path, starts: str) -> list[str]:
    """The command of ``markdown`` that starts with ``starts``, its ``\\`` continuations joined, as argv."""
    lines = markdown.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith(starts):
            text = line
            while text.rstrip().endswith("\\"):
                i += 1
                text = text.rstrip()[:-1] + " " + lines[i].strip()
            return text.split("#", 1)[0].split()
    raise AssertionError(f"no line of {markdown} starts with {starts!r}")


@pytest.mark.parametrize("doc", ["docs/guide/steering.md", "docs/steering.md"])
def test_the_documented_rejudge_command_runs_as_written(tmp_path, bare_env, doc):
    """After the README's first command, the rejudge example names a conversation and a rubric
    file that exist (it named refund-42 and @strict.txt, neither of which does)."""
    from tests.kit.openai_server import FakeOpenAIServer, structured

    shutil.copytree(EX, tmp_path / "examples")
    first = readme_command("pip install -e . && judgegraph eval")
    first = first[first.index("&&") + 1:]
    assert first == ["judgegraph", "eval", "examples/support_chats.jsonl"]
    made = cli.run([*first[1:], "--no-progress"], env=bare_env, cwd=tmp_path)
    assert made.returncode in (0, 1), made.stdout + made.stderr
    argv = bash_command(ROOT / doc, "judgegraph rejudge judgegraph-results.jsonl")
    strict = structured({"reason": "Trivia, not the tracking link.", "verdict": "no"})
    with FakeOpenAIServer(lambda request: strict) as server:
        proc = cli.run([*argv[1:]], env={**bare_env, "OPENAI_BASE_URL": server.base_url}, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "re-judged with" in proc.stdout and "  shipping-delay: 0.67 → " in proc.stdout
    assert (tmp_path / "rejudged.jsonl").is_file()


def test_what_the_documented_commands_leave_behind_is_ignored_by_git():
    """report.html (README's eval --html) and .langgraph_api/ (langgraph dev) were shown as untracked."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = ["report.html", ".langgraph_api/store.pckl", "judgegraph-results.jsonl"]
    proc = subprocess.run([git, "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.stdout.split() == paths, proc.stdout + proc.stderr
