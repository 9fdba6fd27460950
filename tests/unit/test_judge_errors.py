"""How the LLM judge reads a failed request: by the exception's type (openai's
and the HTTP library's), never its class name; and what it keeps of the
message (no credentials)."""

import openai
import pytest

from judgegraph.judges.llm import _is_fatal, _is_transient, _retry_after, describe_request_error
from judgegraph.judges.redact import REDACTED, Redactor
from judgegraph.judges.transport import ReplyTooLarge, sdk_httpx

HTTPX = sdk_httpx()  # the library the SDK raises from (httpx, or httpx2 under openai 3)
SDK_REQUEST = HTTPX.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def status_error(status: int, headers: dict | None = None) -> openai.APIStatusError:
    response = HTTPX.Response(status, headers=headers or {}, request=SDK_REQUEST, json={"error": {"message": "x"}})
    cls = {401: openai.AuthenticationError, 403: openai.PermissionDeniedError, 404: openai.NotFoundError,
           429: openai.RateLimitError}.get(status, openai.APIStatusError)
    return cls("x", response=response, body=None)


def wrapped(cause: BaseException, outer: type = openai.APIConnectionError) -> BaseException:
    exc = outer(request=SDK_REQUEST)
    exc.__cause__ = cause
    return exc


def test_names_that_merely_look_likedescribe_request_errors_are_not_taken_for_them():
    # the old classifier read class names: any "...Timeout..." was retried, any "ConnectError" stopped the judge
    looks_like_timeout = type("TimeoutBudgetExceeded", (Exception,), {})("a bug, not a timeout")
    looks_like_refused = type("ConnectError", (Exception,), {})("a bug in a plugin")
    looks_like_dropped = type("ConnectionPoolExhausted", (Exception,), {})("a bug")
    for exc in (looks_like_timeout, looks_like_refused, looks_like_dropped):
        assert not _is_transient(exc) and not _is_fatal(exc), type(exc).__name__


@pytest.mark.parametrize("status, fatal, transient", [
    (401, True, False), (403, True, False), (404, True, False), (400, False, False), (422, False, False),
    (408, False, True), (409, False, True), (429, False, True), (500, False, True), (503, False, True)])
def test_status_errors_by_type_and_code(status, fatal, transient):
    exc = status_error(status)
    assert (_is_fatal(exc), _is_transient(exc)) == (fatal, transient)


def test_connection_errors_by_type():
    refused = wrapped(HTTPX.ConnectError("[Errno 111] Connection refused"))
    assert _is_fatal(refused) and "connection refused" in describe_request_error(refused, None, Redactor())
    timeout = wrapped(HTTPX.ReadTimeout("timed out"), openai.APITimeoutError)
    assert _is_transient(timeout) and not _is_fatal(timeout)
    assert "deadline of 5 s" in describe_request_error(timeout, 5.0, Redactor())
    dropped = wrapped(HTTPX.RemoteProtocolError("Server disconnected without sending a response."))
    assert _is_transient(dropped) and not _is_fatal(dropped)
    assert _is_transient(ConnectionResetError("reset by peer"))


def test_a_reply_too_large_is_neither_retried_nor_fatal_and_names_the_limit():
    for exc in (ReplyTooLarge("reply over the size limit of 10 bytes (max_reply_bytes)"),
                wrapped(ReplyTooLarge("reply over the size limit of 10 bytes (max_reply_bytes)"))):
        assert not _is_transient(exc) and not _is_fatal(exc)
        assert describe_request_error(exc, None, Redactor()).startswith("ReplyTooLarge: reply over the size limit of 10")


def test_retry_after_is_read_from_the_reply():
    assert _retry_after(status_error(429, {"retry-after": "7"})) == 7.0
    assert _retry_after(status_error(429, {"retry-after-ms": "250"})) == 0.25


KEY = "sk-proj-AbCdEf0123456789_secretvalue"


@pytest.mark.parametrize("text", [
    f"headers were Host: x, authorization: Bearer {KEY}, accept: */*",
    f"{{'authorization': 'Bearer {KEY}', 'host': 'x'}}",
    f'{{"Authorization": "Bearer {KEY}"}}',
    f"api-key: {KEY}",
    f"x-api-key: {KEY}\nnext line",
    f"token Bearer {KEY} leaked",
    f"the key {KEY} in prose",
    f"https://user:{KEY}@proxy.example:8080/v1",
])
def test_credentials_are_redacted_in_every_shape(text):
    out = Redactor([KEY])(text)
    assert KEY not in out and "secretvalue" not in out and REDACTED in out


def test_the_clients_own_key_is_redacted_even_when_it_has_no_known_shape():
    key = "custom-gateway-token-42abc"
    assert Redactor([key])(f"echo: {key}!") == f"echo: {REDACTED}!"
    assert Redactor(["short"])("a short word stays") == "a short word stays"  # too short to be told from prose
    for prose in ("verdict: yes, the api is fine", "a basic example of bearer bonds", "I use sk-learn daily"):
        assert Redactor()(prose) == prose
