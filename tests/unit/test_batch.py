"""Batch mode's pure parts: request identity, result lines, splitting (docs/batch.md)."""

from __future__ import annotations

import json

import pytest

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
