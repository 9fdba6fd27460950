"""``judgegraph eval`` judge flags and ``judgegraph cache`` through the CLI, against
the loopback OpenAI-compatible server."""

import json
import os
import socket
import time
from pathlib import Path

import pytest

from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, error, structured

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
YES = structured({"reason": "It answers the question.", "verdict": "yes"})


def conversations(tmp_path, n=20):
    path = tmp_path / "chats.jsonl"
    with path.open("w") as f:
        for i in range(n):
            turns = []
            for k in range(3):
                turns += [{"role": "user", "content": f"question {i}.{k}?"}, {"role": "assistant", "content": f"answer {i}.{k}."}]
            f.write(json.dumps({"id": f"c{i}", "turns": turns}) + "\n")
    return path


def home(tmp_path):
    """This process's environment with HOME in the test's folder (where the default judge cache would go)."""
    return {**os.environ, "HOME": str(tmp_path)}


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def records(path):
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in lines if r["type"] not in ("header", "summary")]  # the run's own records


def test_a_dead_port_ends_the_run_within_seconds_with_exit_3(tmp_path):
    url = f"http://127.0.0.1:{dead_port()}/v1"
    out = tmp_path / "r.jsonl"
    assert cli.run(["--version"], env=home(tmp_path)).returncode == 0  # the kit's zygote up: what is timed is the run
    started = time.monotonic()
    proc = cli.run(["eval", str(conversations(tmp_path)), "--model", "judge-model", "--base-url", url, "--out", str(out),
                    "--no-progress", "--max-retries", "5"], env=home(tmp_path))
    elapsed = time.monotonic() - started
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert elapsed < 20
    results = [res for r in records(out) if r["type"] == "conversation" for res in r["results"].values()]
    assert len(results) == 20 and all(r["status"] == "error" for r in results)
    messages = [e["message"] for r in results for e in r["errors"]]
    assert len(messages) == 60 and all(url in m for m in messages)
    assert sum(e["attempts"] for r in results for e in r["errors"]) <= 16  # at most what was in flight at the first failure


def test_a_401_server_is_asked_once_not_retried(tmp_path):
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(ScriptedResponder([], default=error(401))) as server:
        proc = cli.run(["eval", str(conversations(tmp_path)), "--model", "judge-model", "--base-url", server.base_url,
                        "--out", str(out), "--no-progress", "--concurrency", "1"], env=home(tmp_path))
        calls = server.calls["/v1/chat/completions"]
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert calls == 1
    assert "HTTP 401" in out.read_text()


def test_rerun_makes_zero_calls_with_identical_results_and_cache_subcommand(tmp_path):
    cache = tmp_path / "jc.sqlite"
    data = conversations(tmp_path, n=5)
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        args = ["eval", str(data), "--model", "judge-model", "--base-url", server.base_url, "--no-progress",
                "--cache", str(cache)]
        first = cli.run([*args, "--out", str(tmp_path / "1.jsonl")], env=home(tmp_path))
        n1 = server.calls["/v1/chat/completions"]
        second = cli.run([*args, "--out", str(tmp_path / "2.jsonl")], env=home(tmp_path))
        n2 = server.calls["/v1/chat/completions"] - n1
        third = cli.run([*args[:-2], "--no-cache", "--out", str(tmp_path / "3.jsonl")], env=home(tmp_path))
        n3 = server.calls["/v1/chat/completions"] - n1 - n2
    assert first.returncode == second.returncode == third.returncode == 0, first.stderr + second.stderr
    assert n1 == 15 and n2 == 0 and n3 == 15
    assert "15 answers from the cache" in " ".join(second.stdout.split())

    def scores(name):
        return sorted((r["conversation_id"], k, v["score"], [x["verdict"] for x in v["verdicts"]])
                      for r in records(tmp_path / name) if r["type"] == "conversation" for k, v in r["results"].items())

    assert scores("1.jsonl") == scores("2.jsonl")
    verdict = next(r for r in records(tmp_path / "2.jsonl") if r["type"] == "conversation")["results"]
    assert next(iter(verdict.values()))["verdicts"][0]["transcript"][0]["cached"] is True

    info = cli.run(["cache", "info", "--cache", str(cache)], env=home(tmp_path))
    assert info.returncode == 0 and "15 answers" in info.stdout and "judge-model" in info.stdout
    cleared = cli.run(["cache", "clear", "--cache", str(cache)], env=home(tmp_path))
    assert cleared.returncode == 0 and "15 answers removed" in cleared.stdout
    assert "0 answers" in cli.run(["cache", "info", "--cache", str(cache)], env=home(tmp_path)).stdout


@pytest.mark.parametrize("flag, value", [("--timeout", "0"), ("--max-retries", "-1"), ("--rpm", "0"), ("--tpm", "nan"),
                                         ("--max-prompt-tokens", "0")])
def test_bad_judge_settings_are_usage_errors(tmp_path, flag, value):
    proc = cli.run(["eval", str(conversations(tmp_path, 1)), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                    flag, value, "--out", str(tmp_path / "r.jsonl")], env=home(tmp_path))
    assert proc.returncode == 2 and flag in proc.stderr


def test_rpm_on_the_command_line_paces_the_whole_run(tmp_path):
    import threading

    times: list[float] = []
    lock = threading.Lock()

    def responder(request):
        with lock:
            times.append(time.monotonic())
        return YES

    with FakeOpenAIServer(responder) as server:
        proc = cli.run(["eval", str(conversations(tmp_path, n=2)), "--model", "judge-model", "--base-url", server.base_url,
                        "--rpm", "120", "--no-cache", "--out", str(tmp_path / "r.jsonl"), "--no-progress"], env=home(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # 6 requests at 120/min (2 a second, a burst of 2): the last starts at least 2 s after the first
    # paced from the 3rd request on, 0.5 s apart (the 1st may reach the server late: its connection is opened)
    assert len(times) == 6 and max(times) - sorted(times)[2] >= 3 * 0.5 * 0.95
