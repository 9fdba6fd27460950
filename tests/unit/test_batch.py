"""Batch mode's pure parts: request identity, result lines, splitting (docs/batch.md)."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from judgegraph.batch import client as batch_client_module
from judgegraph.batch.answers import (
    BatchAnswers,
    BatchPending,
    BatchRequestError,
    PendingWatch,
    request_body,
    request_key,
)
from judgegraph.batch.client import chunks, parse_results
from judgegraph.judges.llm import resolve_model


def test_a_request_body_is_what_a_live_call_sends_and_its_key_ignores_key_order():
    payload = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "hi"}],
               "extra_body": {"response_format": {"type": "json_schema"}}}
    body = request_body(payload)
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                    "response_format": {"type": "json_schema"}}
    assert request_key(body) == request_key(dict(reversed(list(body.items()))))
    assert request_key(body) != request_key({**body, "messages": [{"role": "user", "content": "hi!"}]})


def test_result_lines_answers_errors_and_junk():
    lines = [
        {"custom_id": "a", "response": {"status_code": 200, "body": {"choices": []}}, "error": None},
        {"custom_id": "b", "response": {"status_code": 500, "body": {"error": {"message": "boom"}}}, "error": None},
        {"custom_id": "c", "response": None, "error": {"code": "batch_expired", "message": "too late"}},
        "not json", {"no": "custom_id"},
    ]
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    got = {r.custom_id: (r.status, r.message) for r in parse_results(text)}
    assert got == {"a": (200, ""), "b": (500, "HTTP 500: boom"), "c": (None, "batch_expired: too late")}


def test_pending_failed_and_answered_requests():
    answers = BatchAnswers(max_retries=1)
    body = {"model": "m", "messages": []}
    key = request_key(body)
    with PendingWatch() as watch, pytest.raises(BatchPending):
        answers.answer(body)
    assert watch.keys == {key} and answers.take_pending() == {key: body}
    answers.add_failure(key, 503, "HTTP 503: busy")  # transient: asked again, once (max_retries 1)
    with pytest.raises(BatchPending):
        answers.answer(body)
    assert list(answers.take_pending()) == [key]
    answers.add_failure(key, 503, "HTTP 503: busy")
    with pytest.raises(BatchRequestError, match="busy .2 batches") as failed:
        answers.answer(body)
    assert not hasattr(failed.value, "status_code")  # a judge error, not a retry of the live path
    answers.add_answer(key, {"choices": []})
    assert answers.answer(body) == {"choices": []}
    other = {"model": "other", "messages": []}
    answers.add_failure(request_key(other), 401, "HTTP 401: no key")  # not transient: never asked again
    with pytest.raises(BatchRequestError) as denied:
        answers.answer(other)
    assert denied.value.status_code == 401  # 401/403/404 stop the judge, as live
    assert answers.take_pending() == {}


def test_a_round_past_the_limits_is_split(monkeypatch):
    monkeypatch.setattr(batch_client_module, "MAX_REQUESTS_PER_BATCH", 2)
    bodies = {f"k{i}": {"n": i} for i in range(5)}
    assert [list(c) for c in chunks(bodies)] == [["k0", "k1"], ["k2", "k3"], ["k4"]]
    monkeypatch.setattr(batch_client_module, "MAX_REQUESTS_PER_BATCH", 50_000)
    monkeypatch.setattr(batch_client_module, "MAX_BATCH_FILE_BYTES", 250)
    assert [len(c) for c in chunks(bodies)] == [2, 2, 1]


class CountedAnswers(BatchAnswers):
    def __init__(self) -> None:
        super().__init__(max_retries=3)
        self.asked = 0

    def answer(self, body):
        self.asked += 1
        return super().answer(body)


def completion(content: str) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}


def test_a_batch_call_is_answered_at_the_judges_http_transport_and_never_sent():
    """The body is read where the SDK sends it (nothing listens on port 9: a request that left would
    fail to connect); pending and failed-for-good reach the caller as themselves, asked once even with
    the SDK's own retries on; an answer is parsed by the chat model as a live reply."""
    model = resolve_model("openai:gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", max_retries=3)
    fmt = {"type": "json_schema", "json_schema": {"name": "V", "schema": {"type": "object"}, "strict": True}}
    answers = CountedAnswers()
    call = answers.via(model.bind(extra_body={"response_format": fmt}))
    with PendingWatch() as watch, pytest.raises(BatchPending):
        call.invoke([HumanMessage("hi")])
    assert answers.asked == 1  # not sent again by the SDK (max_retries 3)
    ((key, body),) = answers.take_pending().items()
    assert watch.keys == {key}
    assert body["model"] == "gpt-4.1-mini" and body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["response_format"] == fmt and body["temperature"] == 0.0 and "stream" not in body
    answers.add_answer(key, completion('{"verdict": "yes"}'))
    for reply in (call.invoke([HumanMessage("hi")]), asyncio.run(call.ainvoke([HumanMessage("hi")]))):
        assert isinstance(reply, AIMessage) and reply.content == '{"verdict": "yes"}'
        assert reply.usage_metadata is not None and reply.usage_metadata["input_tokens"] == 7
    other = [HumanMessage("hello")]
    with pytest.raises(BatchPending):
        asyncio.run(call.ainvoke(other))
    (other_key,) = answers.take_pending()
    answers.add_failure(other_key, 401, "HTTP 401: no key")
    asked = answers.asked
    with pytest.raises(BatchRequestError, match="no key") as denied:
        call.invoke(other)
    assert denied.value.status_code == 401 and answers.asked == asked + 1


def test_a_chat_model_on_other_http_clients_is_not_batched():
    """Its requests would leave for the network: refused rather than sent live."""
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", api_key="not-needed")
    with pytest.raises(TypeError, match="built by judgegraph"):
        BatchAnswers().via(model.bind(extra_body={}))
