"""``--base-url`` with an ``anthropic:`` model: a REAL ``langchain_anthropic.ChatAnthropic`` pointed at the loopback
Anthropic server (tests.kit.anthropic_server), from the library (``resolve_judge``) and the command line (``eval``):
the judgements are made there, a 429 is retried (or reported, counted, exit 3), a dead port stops the judge with
one clear error; the key (``ANTHROPIC_API_KEY``, sent as ``x-api-key``) reaches no results file, transcript, cache
or output, even when the server echoes it."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from judgegraph.judges import resolve_judge
from judgegraph.metrics import get_metric
from tests.kit import cli
from tests.kit.anthropic_server import AnthropicError, AnthropicRequest, FakeAnthropicServer

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")]

anthropic = pytest.importorskip("langchain_anthropic")

KEY = "sk-ant-api03-test-secret-0123456789abcdef"
MODEL = "anthropic:claude-sonnet-4-5"
CONVERSATION = {"id": "c1", "turns": [{"role": "user", "content": "When does my order ship?"},
                                      {"role": "assistant", "content": "It ships tomorrow morning."}]}


def key_sent(headers: dict[str, str]) -> str | None:
    """The key a request carried: ``x-api-key``, or ``authorization: Bearer KEY`` (as anthropic 2.14 sends it)."""
    bearer = headers.get("authorization", "")
    return headers.get("x-api-key") or (bearer.removeprefix("Bearer ") if bearer.startswith("Bearer ") else None)


def yes(request: AnthropicRequest) -> dict[str, str]:
    return {"reason": "It answers.", "verdict": "yes"}


def echoing_429(request: AnthropicRequest) -> AnthropicError:
    """A rate limit whose message echoes the request's key, as some gateways do."""
    return AnthropicError(429, f"rate limited (key {key_sent(request.headers)})", retry_after=0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eval_cli(tmp_path: Path, env: dict[str, str], base_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps(CONVERSATION) + "\n", encoding="utf-8")
    return cli.run(["eval", str(chats), "-m", "turn-relevancy", "--model", MODEL, "--base-url", base_url,
                    "--no-progress", "--overwrite", "--out", str(tmp_path / "r.jsonl"), *extra],
                   env={**env, "ANTHROPIC_API_KEY": KEY}, timeout=120)


def everything_written(tmp_path: Path, done: subprocess.CompletedProcess[str]) -> str:
    """The run's output, and every file under ``tmp_path`` and the judge cache, as text."""
    import os

    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    cache = Path(os.environ["JUDGEGRAPH_JUDGE_CACHE"])
    files += [p for p in cache.parent.glob(cache.name + "*") if p.is_file()]
    return done.stdout + done.stderr + "".join(p.read_bytes().decode("utf-8", "replace") for p in files)


def test_resolve_judge_points_chat_anthropic_at_the_base_url(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with FakeAnthropicServer(yes) as server:
        judge = resolve_judge(model=MODEL, base_url=server.base_url, cache=False)
        result = get_metric("turn_relevancy").factory(model=judge).invoke(
            {"conversation": CONVERSATION})["results"]["turn_relevancy"]
    assert isinstance(judge.model, anthropic.ChatAnthropic)  # type: ignore[attr-defined]
    assert judge.model.anthropic_api_url == server.base_url and judge.base_url == server.base_url  # type: ignore[attr-defined]
    assert [v.verdict for v in result.verdicts] == ["yes"] and not result.errors
    assert len(server.requests) == 1 and server.requests[0]["model"] == "claude-sonnet-4-5"
    assert key_sent(server.headers[0]) == KEY  # the key from the environment, sent to the server
    assert KEY not in result.model_dump_json()


def test_an_anthropic_model_needs_a_key_or_a_base_url(monkeypatch):
    from judgegraph.judges.llm import ModelConfigError, resolve_model

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        resolve_model(MODEL)
    local = resolve_model(MODEL, base_url="http://127.0.0.1:9")  # a local server needs no key
    assert local.anthropic_api_url == "http://127.0.0.1:9"  # type: ignore[attr-defined]


def test_eval_judges_through_the_base_url_and_writes_no_key(tmp_path, bare_env):
    with FakeAnthropicServer(yes) as server:
        done = eval_cli(tmp_path, bare_env, server.base_url)
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 1 and key_sent(server.headers[0]) == KEY
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()]
    (record,) = [r for r in records if r["type"] == "conversation"]
    result = record["results"]["turn_relevancy"]
    assert result["status"] == "passed" and result["verdicts"][0]["verdict"] == "yes"
    header = next(r for r in records if r["type"] == "header")
    assert server.base_url in json.dumps(header)  # the run names the server it judged with
    assert KEY not in everything_written(tmp_path, done)


def test_a_429_is_retried_after_its_retry_after(tmp_path, bare_env):
    replies = iter([echoing_429])

    def limited_once(request: AnthropicRequest) -> dict[str, str] | AnthropicError:
        return next(replies, yes)(request)

    with FakeAnthropicServer(limited_once) as server:
        done = eval_cli(tmp_path, bare_env, server.base_url, "--concurrency", "1")
    assert done.returncode == 0, done.stderr
    assert len(server.headers) == 2 and len(server.requests) == 1  # the 429, then the answer
    assert KEY not in everything_written(tmp_path, done)


def test_a_429_past_the_retries_is_a_counted_judge_error_without_the_key(tmp_path, bare_env):
    with FakeAnthropicServer(echoing_429) as server:
        done = eval_cli(tmp_path, bare_env, server.base_url, "--max-retries", "1")
    assert done.returncode == 3, done.stdout + done.stderr  # could not judge
    assert len(server.headers) == 2  # the first try and one retry
    record = next(r for r in map(json.loads, (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines())
                  if r["type"] == "conversation")
    (error,) = record["results"]["turn_relevancy"]["errors"]
    assert "429" in json.dumps(error) and "[REDACTED]" in json.dumps(error)
    assert KEY not in everything_written(tmp_path, done)


def test_a_dead_port_stops_the_judge_with_one_clear_error(tmp_path, bare_env):
    url = f"http://127.0.0.1:{free_port()}"
    done = eval_cli(tmp_path, bare_env, url)
    assert done.returncode == 3, done.stdout + done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert "connection refused" in said.lower() and f"127.0.0.1:{url.rsplit(':', 1)[1]}" in said
    assert KEY not in everything_written(tmp_path, done)
