"""Durable runs through the CLI, as a user runs them, against the loopback
OpenAI-compatible server: kill -9 then --resume, Ctrl-C, --dry-run beside the
real count, --out refused before any work, text from data printed literally."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from judgegraph.cli import main
from judgegraph.cost.pricing import TABLE_DATE
from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, structured

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def write_chats(path: Path, n: int) -> Path:
    """``n`` conversations of two exchanges; every third one has off-topic replies (score 0: failed)."""
    with path.open("w") as fh:
        for i in range(n):
            first = "Off-topic: the weather is nice." if i % 3 == 0 else f"Order {i} is in the warehouse."
            second = "Off-topic: my cat likes boxes." if i % 3 == 0 else f"Order {i} ships on Monday."
            fh.write(json.dumps({"id": f"c{i:03d}", "turns": [
                {"role": "user", "content": f"Where is my order {i}?"},
                {"role": "assistant", "content": first},
                {"role": "user", "content": "When does it ship?"},
                {"role": "assistant", "content": second},
            ]}) + "\n")
    return path


def responder(request):
    """Relevant unless the judged reply is the off-topic one (keyed by content, not order)."""
    reply = re.search(r"<reply_to_judge>(.*?)</reply_to_judge>", request.text, re.DOTALL)
    off = reply is not None and "Off-topic" in reply.group(1)
    return structured({"reason": "judged", "verdict": "no" if off else "yes"})


def conversation_lines(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]  # every line valid JSON
    return [r for r in records if r["type"] == "conversation"]


def scores(path: Path) -> dict[str, float]:
    return {r["conversation_id"]: r["results"]["turn_relevancy"]["score"] for r in conversation_lines(path)}


def wait_for_lines(path: Path, n: int, proc: cli.Started, timeout: float = 60) -> None:
    """Wait for ``n`` lines after the run header (the file's first line)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= n + 1:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {n} lines")


def test_kill_9_then_resume_gives_every_conversation_once_with_the_scores_of_a_full_run(tmp_path, bare_env):
    chats = write_chats(tmp_path / "chats.jsonl", 40)
    common = ["--model", "openai:gpt-4.1-mini", "--concurrency", "4", "--no-progress", "-q"]
    killed_cache = ["--cache", str(tmp_path / "killed.sqlite")]  # the killed run and its resume share one cache
    with FakeOpenAIServer(responder, latency=0.03) as server:
        full = tmp_path / "full.jsonl"
        done = cli.run(["eval", str(chats), *common, "--base-url", server.base_url, "--out", str(full),
                        "--cache", str(tmp_path / "full.sqlite")],
                       env=bare_env, timeout=180)
        assert done.returncode == 1, done.stderr  # the off-topic replies fail their threshold
        one_run = server.calls["/v1/chat/completions"]
        server.reset()

        out = tmp_path / "killed.jsonl"
        proc = cli.start(["eval", str(chats), *common, *killed_cache, "--base-url", server.base_url, "--out", str(out)],
                         env=bare_env)
        wait_for_lines(out, 8, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        killed_lines = len(conversation_lines(out)) if out.read_bytes().endswith(b"\n") else None
        # a torn last line, as a kill mid-write leaves it, must be repaired by the resume
        with out.open("a", encoding="utf-8") as fh:
            fh.write('{"type": "conversation", "conversation_id": "c0')
        again = cli.run(["eval", str(chats), *common, "--base-url", server.base_url, "--out", str(out)],
                        env=bare_env, timeout=60)
        assert again.returncode == 2 and "--resume" in again.stderr  # never truncated without asking
        resumed = cli.run(["eval", str(chats), *common, *killed_cache, "--base-url", server.base_url, "--out", str(out),
                           "--resume"],
                          env=bare_env, timeout=180)
        both_runs = server.calls["/v1/chat/completions"]
    assert resumed.returncode == 1, resumed.stderr
    ids = [r["conversation_id"] for r in conversation_lines(out)]
    assert sorted(ids) == [f"c{i:03d}" for i in range(40)]  # every conversation exactly once
    assert scores(out) == scores(full)
    assert "40 conversations" in resumed.stdout
    assert killed_lines is None or 8 <= killed_lines < 40
    # windows finished before the kill come from the judge cache: what is paid again is
    # at most the calls in flight at the kill (--concurrency 4)
    print(f"calls: one run {one_run}, killed + resumed {both_runs}, repaid {both_runs - one_run}")
    assert one_run == 80 and one_run <= both_runs <= one_run + 4


def test_ctrl_c_stops_cleanly_with_a_summary_and_resume_finishes(tmp_path, bare_env):
    chats = write_chats(tmp_path / "chats.jsonl", 40)
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(responder, latency=0.05) as server:
        args = ["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "--concurrency", "2",
                "--no-progress", "-q", "--out", str(out)]
        proc = cli.start(args, env=bare_env)
        wait_for_lines(out, 4, proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert "Traceback" not in stderr and "interrupted" in stdout
        written = conversation_lines(out)
        assert 4 <= len(written) < 40 and out.read_bytes().endswith(b"\n")
        assert re.search(rf"\b{len(written)} conversations?\b", stdout)  # the summary counts what finished
        done = cli.run([*args, "--resume"], env=bare_env, timeout=180)
    assert done.returncode == 1, done.stderr
    assert sorted(r["conversation_id"] for r in conversation_lines(out)) == [f"c{i:03d}" for i in range(40)]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_stops_like_ctrl_c_with_a_summary_and_exit_143(tmp_path, bare_env, workers):
    chats = write_chats(tmp_path / "chats.jsonl", 40)
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(responder, latency=0.05) as server:
        args = ["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "--concurrency", "2",
                "--workers", workers, "--no-cache", "--no-progress", "-q", "--out", str(out)]
        proc = cli.start(args, env=bare_env)
        wait_for_lines(out, 1, proc)
        proc.send_signal(signal.SIGTERM)  # the old run died at once: no summary, status -15
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr and "terminated" in stderr and "interrupted" in stdout
    written = conversation_lines(out)  # every line valid JSON, the file ends with a whole line
    assert 1 <= len(written) < 40 and out.read_bytes().endswith(b"\n")
    assert re.search(rf"\b{len(written)} conversations?\b", stdout)  # the summary counts what finished


def test_a_second_run_on_the_same_out_is_refused_at_once_while_the_first_holds_it(tmp_path, bare_env):
    chats = write_chats(tmp_path / "chats.jsonl", 60)
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(responder, latency=0.25) as server:
        args = ["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "--concurrency", "2",
                "--no-cache", "--no-progress", "-q", "--out", str(out)]
        # ~15 s: 120 calls of 0.25 s, 2 at a time, while the two refused runs (forked from the kit's pre-imported
        # zygote, not fresh interpreters) take about a second each; `alive` below fails the test if not
        first = cli.start(args, env=bare_env)
        wait_for_lines(out, 1, first)
        calls = server.calls["/v1/chat/completions"]
        # --resume and --overwrite both pass the "already holds results" check: the lock refuses them
        seconds = [cli.run([*args, flag], env=bare_env, timeout=120)
                   for flag in ("--resume", "--overwrite")]
        alive = first.poll() is None
        stdout, stderr = first.communicate(timeout=120)
        first_calls = server.calls["/v1/chat/completions"]
    assert alive, "the first run ended before the second was tried: the test proves nothing"
    for second in seconds:
        assert second.returncode == 2, second.stderr
        assert f"{out} is in use by process {first.pid}" in second.stderr and "Traceback" not in second.stderr
        assert "judge:" not in second.stderr  # refused before any work
    assert first.returncode == 1, stderr
    ids = [r["conversation_id"] for r in conversation_lines(out)]  # every line whole and valid
    assert sorted(ids) == [f"c{i:03d}" for i in range(60)]  # each once: nothing interleaved, nothing truncated
    assert first_calls == 120 and calls <= 120  # no call paid twice
    assert not (tmp_path / "r.jsonl.lock").exists()  # released and removed at the end


def test_the_lock_of_a_killed_run_does_not_block_the_resume(tmp_path, bare_env):
    chats = write_chats(tmp_path / "chats.jsonl", 40)
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(responder, latency=0.05) as server:
        args = ["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "--concurrency", "2",
                "--no-progress", "-q", "--out", str(out)]
        proc = cli.start(args, env=bare_env)
        wait_for_lines(out, 1, proc)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert (tmp_path / "r.jsonl.lock").exists()  # left behind by the kill, but no longer locked (the OS let go)
        resumed = cli.run([*args, "--resume"], env=bare_env,
                          timeout=180)
    assert resumed.returncode == 1, resumed.stderr
    assert sorted(r["conversation_id"] for r in conversation_lines(out)) == [f"c{i:03d}" for i in range(40)]


def test_dry_run_counts_the_calls_and_input_tokens_the_run_then_makes(tmp_path, bare_env):
    chats = write_chats(tmp_path / "chats.jsonl", 12)
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(responder) as server:
        args = ["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "--no-progress",
                "--out", str(out)]
        dry = cli.run([*args, "--dry-run"], env=bare_env, timeout=120)
        assert dry.returncode == 0, dry.stderr
        assert server.calls["/v1/chat/completions"] == 0 and not out.exists()  # no call, no file
        real = cli.run([*args, "-q"], env=bare_env, timeout=120)
        calls = server.calls["/v1/chat/completions"]
    total = re.search(r"total\W+(\d+)\W+(\d+)\W+~(\d+)\W+\$([0-9.]+)", dry.stdout)
    assert total, dry.stdout
    est_calls, est_tokens = int(total.group(1)), int(total.group(2))
    usage = [r["results"]["turn_relevancy"]["usage"] for r in conversation_lines(out)]
    assert real.returncode == 1, real.stderr
    assert est_calls == calls == sum(u["calls"] for u in usage) == 24
    assert est_tokens == sum(u["input_tokens"] for u in usage)  # exact: same rendering, same accounting
    assert "turn_relevancy" in dry.stdout and "basis:" in dry.stdout and TABLE_DATE in dry.stdout  # the table says when it was checked
    # the real cost is on each line and in the summary
    cost = sum(r["cost_usd"] for r in conversation_lines(out))
    assert cost > 0 and f"${cost:.4f}" in real.stdout


def test_dry_run_prices_from_the_command_line_and_unknown_models(tmp_path, bare_env):
    chats = write_chats(tmp_path / "chats.jsonl", 2)
    with FakeOpenAIServer(responder) as server:
        base = ["eval", str(chats), "--base-url", server.base_url, "--dry-run", "--out", str(tmp_path / "r.jsonl")]
        unknown = cli.run([*base, "--model", "openai:my-local-model"], env=bare_env,
                          timeout=120)
        given = cli.run([*base, "--model", "openai:my-local-model", "--price-in", "1000000",
                         "--price-out", "0"], env=bare_env, timeout=120)
    assert unknown.returncode == 0 and "cost unknown" in unknown.stdout
    tokens = int(re.search(r"total\W+\d+\W+(\d+)", given.stdout).group(1))
    assert f"${tokens:.2f}" in given.stdout  # $1M per million tokens: a dollar a token


@pytest.mark.parametrize("where", ["input", "directory", "unwritable"])
def test_a_bad_out_is_a_usage_error_before_any_work(tmp_path, capsys, where):
    chats = write_chats(tmp_path / "chats.jsonl", 2)
    before = chats.read_bytes()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = {"input": chats, "directory": tmp_path, "unwritable": blocker / "r.jsonl"}[where]
    assert main(["eval", str(chats), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and chats.read_bytes() == before


def test_an_existing_results_file_is_refused_kept_and_replaced_only_with_overwrite(tmp_path, capsys):
    chats = write_chats(tmp_path / "chats.jsonl", 2)
    out = tmp_path / "r.jsonl"
    out.write_text('{"type": "conversation", "conversation_id": "old", "results": {}}\n')
    assert main(["eval", str(chats), "--out", str(out), "--no-progress", "-q"]) == 2
    assert "old" in out.read_text()
    assert main(["eval", str(chats), "--out", str(out), "--no-progress", "-q", "--resume", "--overwrite"]) == 2
    assert main(["eval", str(chats), "--out", str(out), "--no-progress", "-q", "--overwrite"]) in (0, 1)
    assert sorted(r["conversation_id"] for r in conversation_lines(out)) == ["c000", "c001"]


@pytest.mark.parametrize("content", ["", "\n  \n\t\n"])
def test_an_empty_or_blank_input_is_an_input_error_never_a_pass(tmp_path, capsys, content):
    empty = tmp_path / "empty.jsonl"
    empty.write_text(content)
    out = tmp_path / "r.jsonl"
    assert main(["eval", str(empty), "--out", str(out), "--no-progress"]) == 3
    assert "empty" in capsys.readouterr().err
    assert [json.loads(line)["type"] for line in out.read_text().splitlines()] == ["header", "input_error", "summary"]


def test_markup_and_escape_sequences_from_data_are_printed_literally(tmp_path, capsys):
    chats = tmp_path / "chats.jsonl"
    cid = "[bold]id[/] \x1b[31mred\x1b[0m"
    chats.write_text(json.dumps({"id": cid, "turns": [
        {"role": "user", "content": "Where is [italic]my order[/]?"},
        {"role": "assistant", "content": "[/] It ships [link=http://x]today[/link]."},
    ]}) + "\n" + '{"id": "[red]bad[/]", "turns": [{"role": "robot", "content": "[/]"}]}\n')
    code = main(["eval", str(chats), "--out", str(tmp_path / "r.jsonl"), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 3  # the bad record is an input error; the other is judged
    assert "\x1b" not in captured.out + captured.err  # never written raw to the terminal
    assert "[bold]id[/] \\x1b[31mred\\x1b[0m" in captured.out
    assert "[red]bad[/]" in captured.err or "robot" in captured.err


def test_an_internal_failure_exits_4_without_a_traceback(tmp_path, capsys, monkeypatch):
    import judgegraph.runs.runner

    async def broken(*args, **kwargs):
        raise RuntimeError("boom [/] \x1b[2J")

    monkeypatch.setattr(judgegraph.runs.runner, "evaluate_to_file", broken)
    chats = write_chats(tmp_path / "chats.jsonl", 1)
    assert main(["eval", str(chats), "--out", str(tmp_path / "r.jsonl"), "--no-progress"]) == 4
    err = capsys.readouterr().err
    assert "internal error" in err and "boom [/] \\x1b[2J" in err and "Traceback" not in err


def test_show_prints_the_transcript_kept_with_the_results(tmp_path, bare_env):
    chats = write_chats(tmp_path / "chats.jsonl", 3)
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(responder) as server:
        run = cli.run(["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url,
                       "--no-progress", "-q", "--out", str(out)], env=bare_env,
                      timeout=120)
    assert run.returncode == 1, run.stderr
    show = cli.run(["show", str(out), "--conversation", "c000",
                    "--metric", "turn-relevancy", "--window", "1"], env=bare_env,
                   timeout=60)
    assert show.returncode == 0, show.stderr
    assert "c000" in show.stdout and "window 1" in show.stdout and "verdict: no" in show.stdout
    missing = cli.run(["show", str(out), "--conversation", "nope"],
                      env=bare_env, timeout=60)
    assert missing.returncode == 2 and "c000" in missing.stderr
