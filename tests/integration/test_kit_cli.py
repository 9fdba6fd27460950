"""tests/kit/cli.py (the CLI forked from a pre-imported zygote) answers as ``python -m judgegraph.cli`` started
fresh does: same status, same stdout and stderr, in the working directory and environment given; a signal reaches
the run itself; a run that outlives its timeout is killed."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.kit import cli

pytestmark = pytest.mark.integration
JUDGE = ["--model", "openai:judge", "--base-url", "http://127.0.0.1:9/v1", "--no-progress"]  # never reached


@pytest.mark.parametrize("argv", [
    ["--version"],                                  # 0
    ["no-such-command"],                            # 2, argparse's message names the program "judgegraph"
    ["eval", "missing.jsonl", *JUDGE],              # 3, the path as given
    ["eval", "bad.jsonl", *JUDGE],                  # 3, a file of the working directory, its line and field named
    ["diff", "a.jsonl"],                            # 2, a subcommand's usage line
])
def test_a_forked_run_says_and_exits_what_a_fresh_interpreter_does(tmp_path, bare_env, argv):
    env = {**bare_env, "HOME": str(tmp_path)}
    for where in ("fresh", "forked"):  # two like folders: a run may leave a results file behind
        (tmp_path / where).mkdir()
        (tmp_path / where / "bad.jsonl").write_text('{"id": "c1", "turns": "not a list"}\n', encoding="utf-8")
    fresh = subprocess.run([sys.executable, "-m", "judgegraph.cli", *argv], cwd=tmp_path / "fresh", env=env,
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    forked = cli.run(argv, cwd=tmp_path / "forked", env=env, timeout=120)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.args == [sys.executable, "-m", "judgegraph.cli", *argv]
    if "bad.jsonl" in argv:
        assert "bad.jsonl:1: turns:" in forked.stderr, forked.stderr


def test_each_run_gets_its_own_directory_environment_and_pid(tmp_path, bare_env):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    runs = [cli.start(["eval", "missing.jsonl", *JUDGE], cwd=tmp_path / d, env={**bare_env, "HOME": str(d)})
            for d in ("a", "b")]
    assert len({r.pid for r in runs}) == 2
    for run in runs:
        assert run.wait(timeout=120) == 3
    assert "missing.jsonl" in runs[0].stderr
    assert not (tmp_path / "a" / "missing.jsonl").exists()


def test_a_signal_reaches_the_run_and_a_timeout_kills_it(tmp_path, bare_env):
    chats = tmp_path / "chats.jsonl"
    chats.write_text('{"id": "c1", "turns": [{"role": "user", "content": "Hi?"}, '
                     '{"role": "assistant", "content": "Hello."}]}\n', encoding="utf-8")
    # a judge at an address that never answers: the run waits until it is stopped
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        args = ["eval", str(chats), "--model", "openai:judge", "--base-url", url, "--no-cache", "--no-progress",
                "--timeout", "600", "--out", str(tmp_path / "r.jsonl")]
        run = cli.start(args, env={**bare_env, "HOME": str(tmp_path)})
        deadline = time.monotonic() + 120
        while not (tmp_path / "r.jsonl").exists() and time.monotonic() < deadline:  # the run header: it is judging
            assert run.poll() is None, run.communicate()
            time.sleep(0.05)
        assert run.poll() is None
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=60)
        assert run.returncode == 130, stdout + stderr  # Ctrl-C: the CLI's own status, so its handler ran
        with pytest.raises(subprocess.TimeoutExpired):
            cli.run([*args, "--overwrite"], env={**bare_env, "HOME": str(tmp_path)}, timeout=3)


@pytest.mark.parametrize("code", [
    "import os, sys; print(__name__, sys.argv, os.getcwd(), os.environ.get('ONLY_HERE')); sys.exit(5)",
    "import sys; sys.exit('a message')",                        # status 1, the message on stderr
    "def f():\n    raise ValueError('boom')\nf()",             # the traceback, status 1
    "import json, sys; print(json.loads(sys.stdin.read())['x'])",
])
def test_python_c_forked_runs_as_a_fresh_interpreter_does(tmp_path, bare_env, code):
    env = {**bare_env, "HOME": str(tmp_path), "ONLY_HERE": "yes"}
    fresh = subprocess.run([sys.executable, "-c", code, "an arg"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120, input='{"x": 1}')
    forked = cli.run(["an arg"], code=code, cwd=tmp_path, env=env, timeout=120, input='{"x": 1}')
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
