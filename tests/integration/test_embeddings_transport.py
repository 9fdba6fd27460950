"""Embeddings called as the LLM judge is (issue 21 C.5 / C.12 for embeddings):
the judge's HTTP clients (its reply-size limit) and its redaction of errors,
against the loopback OpenAI server's /v1/embeddings."""

from __future__ import annotations

import asyncio
import json

import pytest

from judgegraph.embeddings import EmbeddingRunner, resolve_embeddings
from judgegraph.judges import resolve_judge
from judgegraph.runs.runner import MetricPlan, evaluate_to_file
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, echo_headers, structured

SECRET = "sk-test-EMBEDSECRET-0123456789abcdef"
QUESTIONS = {"reason": "It gives the shipping date.", "questions": [
    {"question": "When does my parcel ship?", "noncommittal": False},
    {"question": "What is the shipping date?", "noncommittal": False},
    {"question": "Is the parcel sent tomorrow?", "noncommittal": False},
]}


def write_conversation(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"id": "c1", "turns": [
        {"role": "user", "content": "When will my parcel ship?"},
        {"role": "assistant", "content": "It ships tomorrow."},
    ]}) + "\n")
    return path


def judge_response_relevancy(tmp_path, server, **judge_settings):
    """response_relevancy with an LLM judge on the server and embeddings served beside it; its result."""
    judge = resolve_judge("openai:judge-model", base_url=server.base_url, cache=False, **judge_settings)
    plan = MetricPlan(["response_relevancy"], judge, {"embeddings": "openai:text-embedding-3-small"})
    out = tmp_path / "results.jsonl"
    asyncio.run(evaluate_to_file([write_conversation(tmp_path)], plan, out, overwrite=True))
    (line,) = [line for line in out.read_text().splitlines() if json.loads(line)["type"] == "conversation"]
    return json.loads(line)["results"]["response_relevancy"], out.read_bytes()


@pytest.mark.timeout(120)
def test_an_embeddings_error_echoing_the_headers_leaves_no_key_in_the_results(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # the judge's key, which the embeddings client is given too
    with FakeOpenAIServer(ScriptedResponder([], default=structured(QUESTIONS)),
                          embedder=lambda texts: echo_headers(400)) as server:
        result, data = judge_response_relevancy(tmp_path, server)
        assert server.calls["/v1/embeddings"] == 1  # a 400: not retried
        # the same client, by hand: the server's error does echo the key, the runner's redactor takes it out
        runner = EmbeddingRunner(resolve_embeddings("openai:text-embedding-3-small", base_url=server.base_url))
        with pytest.raises(Exception) as raised:
            runner.embed(["a text"])
    (error,) = result["errors"]
    assert error["step"] == "response_relevancy/embed_questions"
    assert error["message"].startswith("BadRequestError (HTTP 400)") and "request headers were" in error["message"]
    assert SECRET.encode() not in data and b"EMBEDSECRET" not in data
    assert SECRET in str(raised.value)  # the server did echo the key
    redacted = runner.redact(str(raised.value))
    assert SECRET not in redacted and "authorization: [REDACTED]" in redacted


@pytest.mark.timeout(120)
def test_embeddings_beside_the_judge_get_its_reply_size_limit(tmp_path):
    big = [[0.001 * (i % 7 + 1)] * 20_000 for i in range(4)]  # 4 vectors: ~100 KB of reply each
    with FakeOpenAIServer(ScriptedResponder([], default=structured(QUESTIONS)),
                          embedder=lambda texts: big[: len(texts)]) as server:
        limited, _ = judge_response_relevancy(tmp_path, server, api_key=SECRET, max_reply_bytes=64 * 1024)
        plain, _ = judge_response_relevancy(tmp_path, server, api_key=SECRET)  # the judge's default: 8 MiB
    assert limited["status"] == "error"
    message = limited["errors"][0]["message"]  # the reply was cut off, named as the chat judge names it
    assert message.startswith("ReplyTooLarge: ") and "over the size limit of 65,536 bytes" in message
    assert plain["status"] != "error" and plain["score"] is not None
