"""The loopback OpenAI server, exercised through the real client path:
ChatOpenAI -> openai SDK -> httpx -> HTTP -> FakeOpenAIServer."""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Literal, Optional

import httpx
import openai
import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from pydantic import BaseModel, Field, ValidationError

from judgegraph.judges.schema_example import example_from_schema
from judgegraph.judges.tokens import count_tokens
from tests.kit.openai_server import (
    ChatRequest,
    FakeOpenAIServer,
    ScriptedResponder,
    error,
    hashing_embedding,
    refusal,
    structured,
    text,
    tool_call,
)

pytestmark = pytest.mark.integration

MODEL = "gpt-4.1-mini"
GOOD = {"verdict": "pass", "score": 4, "reason": "answers the question"}


class Verdict(BaseModel):
    verdict: Literal["pass", "fail"]
    score: int = Field(ge=1, le=5)
    reason: str


def chat(server: FakeOpenAIServer, **kw) -> ChatOpenAI:
    kw.setdefault("max_retries", 0)
    return ChatOpenAI(model=MODEL, base_url=server.base_url, api_key="test-key", **kw)


def fake_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("FakeOpenAIServer")]


# --------------------------------------------------------------------------- #
# structured output
# --------------------------------------------------------------------------- #


def test_json_schema_method_parses_structured_reply_and_reports_usage():
    seen: list[ChatRequest] = []

    def responder(req: ChatRequest):
        seen.append(req)
        return structured(GOOD)

    with FakeOpenAIServer(responder) as server:
        llm = chat(server).with_structured_output(Verdict, method="json_schema", include_raw=True)
        out = llm.invoke("Is 2+2=4 a good answer?")

    assert out["parsing_error"] is None
    assert out["parsed"] == Verdict(**GOOD)
    usage = out["raw"].usage_metadata
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] == count_tokens(json.dumps(GOOD))
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    # What langchain-openai 1.7 actually sends for a Pydantic schema: chat.completions.parse
    # with response_format json_schema, strict=True, name = class name, no stream.
    (body,) = server.requests
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["name"] == "Verdict"
    assert "tools" not in body
    (req,) = seen
    assert req.wants == "json_schema" and req.schema_name == "Verdict"
    assert req.schema["required"] == ["verdict", "score", "reason"]
    assert req.last_user_text == "Is 2+2=4 a good answer?"
    assert server.calls["/v1/chat/completions"] == 1


def test_function_calling_method_parses_tool_call_reply():
    seen: list[ChatRequest] = []

    def responder(req: ChatRequest):
        seen.append(req)
        return structured(GOOD)

    with FakeOpenAIServer(responder) as server:
        llm = chat(server).with_structured_output(Verdict, method="function_calling", include_raw=True)
        out = llm.invoke("judge this")

    assert out["parsing_error"] is None
    assert out["parsed"] == Verdict(**GOOD)
    raw = out["raw"]
    assert raw.tool_calls[0]["name"] == "Verdict" and raw.tool_calls[0]["args"] == GOOD
    assert raw.response_metadata["finish_reason"] == "tool_calls"
    assert raw.usage_metadata["output_tokens"] > 0
    body = server.requests[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "Verdict"}}
    assert body["parallel_tool_calls"] is False
    assert seen[0].wants == "tool" and seen[0].tool_name == "Verdict"
    assert seen[0].schema["properties"]["verdict"]["enum"] == ["pass", "fail"]


def test_malformed_replies_surface_as_parsing_error():
    responder = ScriptedResponder(
        [
            ("malformed", text('{"verdict": "maybe"')),
            ("wrong enum", structured({"verdict": "maybe", "score": 9, "reason": "?"})),
        ]
    )
    with FakeOpenAIServer(responder) as server:
        json_mode = chat(server).with_structured_output(Verdict, method="json_mode", include_raw=True)
        out = json_mode.invoke("malformed please")
        assert out["parsed"] is None and out["parsing_error"] is not None
        assert out["raw"].content == '{"verdict": "maybe"'

        tools = chat(server).with_structured_output(Verdict, method="function_calling", include_raw=True)
        out = tools.invoke("wrong enum please")
        assert out["parsed"] is None and isinstance(out["parsing_error"], ValidationError)


def test_langchain_structured_output_gotchas_are_what_we_think():
    """Characterises langchain-openai 1.7 so judges handle each failure shape."""
    responder = ScriptedResponder(
        [
            ("truncated json", text('{"verdict": "maybe"')),
            ("truncated args", tool_call('{"verdict": "ma')),
            ("prose", text("I think it passes.")),
            ("refuse", refusal("no")),
        ]
    )
    with FakeOpenAIServer(responder) as server:
        js = chat(server).with_structured_output(Verdict, method="json_schema", include_raw=True)
        # json_schema + Pydantic: the openai SDK parses client-side inside the model call,
        # so malformed JSON RAISES (pydantic ValidationError) instead of parsing_error.
        with pytest.raises(ValidationError):
            js.invoke("truncated json")
        out = js.invoke("refuse")
        assert out["parsed"] is None and "refus" in type(out["parsing_error"]).__name__.lower()

        fc = chat(server).with_structured_output(Verdict, method="function_calling", include_raw=True)
        # function_calling: broken arguments or no tool call at all give parsed=None and
        # parsing_error=None; the evidence is in raw.invalid_tool_calls / raw.content.
        out = fc.invoke("truncated args")
        assert out["parsed"] is None and out["parsing_error"] is None
        assert out["raw"].invalid_tool_calls[0]["args"] == '{"verdict": "ma'
        out = fc.invoke("prose")
        assert out["parsed"] is None and out["parsing_error"] is None
        assert out["raw"].content == "I think it passes."

        # json_schema with a *dict* schema uses a partial JSON parser: truncated JSON
        # is silently "repaired" into {'verdict': 'maybe'} without any error.
        dict_js = chat(server).with_structured_output(
            Verdict.model_json_schema(), method="json_schema", include_raw=True
        )
        out = dict_js.invoke("truncated json")
        assert out["parsed"] == {"verdict": "maybe"} and out["parsing_error"] is None


def test_scripted_responder_is_keyed_by_prompt_not_call_order():
    responder = ScriptedResponder(
        [
            ("What about 3+3?", [text("not json"), structured({"verdict": "pass", "score": 6 // 2, "reason": "6"})]),
            ("What about 2+2?", [structured({"verdict": "fail", "score": 1, "reason": "5"})]),
        ],
        default=structured({"verdict": "pass", "score": 5, "reason": "default"}),
    )
    with FakeOpenAIServer(responder, latency=0.05) as server:
        llm = chat(server).with_structured_output(Verdict, method="json_mode", include_raw=True)
        prompts = ["What about 2+2?", "Something else", "What about 3+3?", "What about 2+2?"]
        outs = asyncio.run(llm.abatch(prompts))
        assert [o["parsed"] and o["parsed"].reason for o in outs] == ["5", "default", None, "5"]
        assert outs[2]["parsing_error"] is not None  # first 3+3 reply was "not json"
        again = llm.invoke("What about 3+3?")
        assert again["parsed"].reason == "6"
        assert llm.invoke("What about 3+3? (retry)")["parsed"].reason == "6"  # last reply repeats
    assert responder.hits == {"What about 3+3?": 3, "What about 2+2?": 2}
    assert responder.unmatched == 1


def test_unmatched_prompt_without_default_and_responder_exception_give_500():
    with FakeOpenAIServer(ScriptedResponder([("x", text("y"))])) as server:
        with pytest.raises(openai.InternalServerError, match="no rule matched"):
            chat(server).invoke("nothing matches")

    def boom(req):
        raise RuntimeError("kaput")

    with FakeOpenAIServer(boom) as server:
        with pytest.raises(openai.InternalServerError, match="kaput"):
            chat(server).invoke("hi")
        assert isinstance(server.errors[0], RuntimeError)


def test_n_choices_call_responder_per_choice():
    def responder(req: ChatRequest):
        return text(f"choice {req.index} of {req.n}")

    with FakeOpenAIServer(responder) as server:
        result = chat(server, n=3).generate([[HumanMessage("hi")]])
    assert [g.text for g in result.generations[0]] == ["choice 0 of 3", "choice 1 of 3", "choice 2 of 3"]


# The openai SDK's own stream accumulator warns when serialising `parsed`; not ours.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_streaming_structured_output():
    with FakeOpenAIServer(lambda req: structured(GOOD)) as server:
        llm = chat(server, streaming=True, stream_usage=True)
        out = llm.with_structured_output(Verdict, method="json_schema", include_raw=True).invoke("x")
        assert out["parsed"] == Verdict(**GOOD)
        assert out["raw"].usage_metadata["output_tokens"] == count_tokens(json.dumps(GOOD))
        out = llm.with_structured_output(Verdict, method="function_calling").invoke("x")
        assert out == Verdict(**GOOD)
        assert all(b["stream"] is True for b in server.requests)


# --------------------------------------------------------------------------- #
# errors, retries, timeouts, concurrency
# --------------------------------------------------------------------------- #


def test_429_with_retry_after_is_retried_by_openai_client():
    responder = ScriptedResponder([("judge", [error(429, retry_after=0), structured(GOOD)])])
    with FakeOpenAIServer(responder) as server:
        llm = chat(server, max_retries=1).with_structured_output(Verdict, method="json_schema")
        assert llm.invoke("judge this") == Verdict(**GOOD)
        assert server.calls["/v1/chat/completions"] == 2
        assert len(server.requests) == 2


def test_error_reply_shape_and_headers():
    responder = ScriptedResponder([("x", error(429, retry_after=1.5)), ("y", error(400, {"custom": True}))])
    with FakeOpenAIServer(responder) as server, httpx.Client(base_url=server.base_url) as client:
        r = client.post("/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
        assert r.status_code == 429
        assert r.headers["retry-after"] == "1.5" and r.headers["retry-after-ms"] == "1500"
        err = r.json()["error"]
        assert set(err) >= {"message", "type", "code"} and err["code"] == "rate_limit_exceeded"
        r = client.post("/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "y"}]})
        assert r.status_code == 400 and r.json() == {"custom": True}
        r = client.post("/chat/completions", content=b"{not json")
        assert r.status_code == 400 and "error" in r.json()


def test_500_forever_without_retries_raises():
    with FakeOpenAIServer(lambda req: error(500)) as server:
        with pytest.raises(openai.InternalServerError):
            chat(server, max_retries=0).invoke("hi")
        assert server.calls["/v1/chat/completions"] == 1


def test_slow_reply_times_out():
    # the reply would come after a minute; only the client's 0.2 s timeout can end the call sooner
    with FakeOpenAIServer(lambda req: structured(GOOD, delay=60)) as server:
        t0 = time.perf_counter()
        with pytest.raises(openai.APITimeoutError):
            chat(server, timeout=0.2, max_retries=0).invoke("hi")
        assert time.perf_counter() - t0 < 30
        assert server.calls["/v1/chat/completions"] == 1


def all_in_flight(n: int, reply):
    """A responder that answers only once ``n`` requests are being handled at the same time.

    Serialised requests never get there: the barrier breaks after 30 s and each gets an HTTP 500.
    """
    barrier = threading.Barrier(n, timeout=30)

    def responder(request):
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return error(500)
        return reply

    return responder


def test_concurrent_slow_requests_are_not_serialised():
    with FakeOpenAIServer(all_in_flight(20, structured(GOOD))) as server:
        llm = chat(server, max_retries=0).with_structured_output(Verdict, method="json_schema")
        outs = asyncio.run(llm.abatch([f"conversation {i}" for i in range(20)]))
        assert outs == [Verdict(**GOOD)] * 20  # all 20 were in flight at once
        assert server.calls["/v1/chat/completions"] == 20


def test_64_concurrent_slow_connections():
    async def run(url: str) -> float:
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=10) as client:
            body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
            t0 = time.perf_counter()
            rs = await asyncio.gather(*(client.post("/chat/completions", json=body) for _ in range(64)))
            assert all(r.status_code == 200 for r in rs)
            return time.perf_counter() - t0

    with FakeOpenAIServer(all_in_flight(64, text("ok"))) as server:
        elapsed = asyncio.run(run(server.base_url))  # every reply 200: all 64 were handled at once
        print(f"64 connections held open together: {elapsed:.2f} s")


def test_stop_closes_keepalive_connections_and_threads():
    before = fake_threads()
    server = FakeOpenAIServer(lambda req: text("ok")).start()
    port = server.port
    client = httpx.Client(base_url=server.base_url)  # keeps its connection open
    assert client.post("/chat/completions", json={"messages": [{"role": "user", "content": "x"}]}).status_code == 200
    assert len(fake_threads()) > len(before)
    server.stop()
    assert fake_threads() == before  # the client still holds its connection open: stop closed it
    client.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port)).close()


# --------------------------------------------------------------------------- #
# embeddings, models, 404
# --------------------------------------------------------------------------- #


def test_embeddings_through_langchain_in_one_request():
    with FakeOpenAIServer() as server:
        emb = OpenAIEmbeddings(
            model="text-embedding-3-small", base_url=server.base_url, api_key="test",
            check_embedding_ctx_length=False,
        )
        docs = ["the cat sat on the mat", "the cat sat down", "quantum chromodynamics"]
        vecs = emb.embed_documents(docs)
        assert server.calls["/v1/embeddings"] == 1
        assert server.embedding_requests[0]["input"] == docs
        assert len(vecs) == 3 and all(len(v) == 64 for v in vecs)

        def cos(a, b):
            return sum(x * y for x, y in zip(a, b))

        assert abs(cos(vecs[0], vecs[0]) - 1) < 1e-5
        assert cos(vecs[0], vecs[1]) > cos(vecs[0], vecs[2])
        assert vecs[0] == pytest.approx(hashing_embedding(docs[0]), abs=1e-6)  # deterministic
        assert emb.embed_query("the cat") == pytest.approx(hashing_embedding("the cat"), abs=1e-6)


def test_custom_embedder_dimensions_and_token_input():
    with FakeOpenAIServer(embedder=lambda texts: [[float(len(t)), 1.0] for t in texts]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k")
        r = client.embeddings.create(model="e", input=["ab", "abcd"], encoding_format="float")
        assert [d.embedding for d in r.data] == [[2.0, 1.0], [4.0, 1.0]]
        assert r.usage.prompt_tokens > 0
    with FakeOpenAIServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k")
        r = client.embeddings.create(model="e", input="hello world", dimensions=16)
        assert len(r.data[0].embedding) == 16
        r = client.embeddings.create(model="e", input=[[15339, 1917]])  # token ids: "hello world"
        assert r.data[0].embedding == pytest.approx(hashing_embedding("hello world"), abs=1e-6)


def test_models_listing_and_unknown_paths():
    with FakeOpenAIServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        ids = [m.id for m in client.models.list()]
        assert MODEL in ids
        with httpx.Client(base_url=server.base_url) as h:
            r = h.post("/responses", json={})
            assert r.status_code == 404 and r.json()["error"]["type"]
            assert h.get("/nope").status_code == 404
        assert server.calls["/v1/responses"] == 1


# --------------------------------------------------------------------------- #
# schema filling and the CLI
# --------------------------------------------------------------------------- #


class Level(BaseModel):
    name: Literal["low", "high"]
    weight: float = Field(gt=0, le=1)


class Report(BaseModel):
    title: str = Field(min_length=5)
    levels: list[Level]
    primary: Level
    note: Optional[str] = None
    tags: list[str] = Field(min_length=1)
    count: int = Field(ge=3)
    ok: bool


def test_example_from_schema_validates_against_pydantic():
    example = example_from_schema(Report.model_json_schema())
    Report.model_validate(example)
    assert example["primary"]["name"] == "low" and example["levels"] == []
    assert example["count"] == 3 and example["tags"] == ["ok"]
    assert example_from_schema({"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "number"}}}) == {
        "s": "ok", "n": 0,
    }


def test_cli_serves_until_terminated():
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.kit.openai_server", "--port", "0", "--latency", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=Path(__file__).resolve().parents[2],
    )
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=10), "CLI printed no URL"
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        llm = ChatOpenAI(model=MODEL, base_url=url, api_key="test-key", max_retries=0)
        t0 = time.perf_counter()
        out = llm.with_structured_output(Verdict, method="json_schema").invoke("judge")
        assert time.perf_counter() - t0 >= 0.2
        assert out == Verdict(verdict="pass", score=1, reason="ok")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, proc.stderr.read()
