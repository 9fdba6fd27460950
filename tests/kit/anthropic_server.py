"""A real HTTP server on loopback that speaks enough of Anthropic's Messages API for structured output as
``langchain_anthropic.ChatAnthropic.with_structured_output`` sends it (tests only; docs/cost_cache.md).

``ChatAnthropic.with_structured_output(schema)`` (default ``method="function_calling"``, langchain-anthropic
1.7.10) posts to ``/v1/messages`` the schema as a tool (``tools=[{"name", "description", "input_schema"}]``)
with ``tool_choice={"type": "tool", "name": ...}``, and parses the reply's ``tool_use`` content block
(``{"type": "tool_use", "id", "name", "input"}``) into the schema. The reply's ``usage`` carries Anthropic's
cache counts by Anthropic's rule, as :mod:`judgegraph.providers.prefixcache` implements it for the dry run too
(:func:`~judgegraph.providers.anthropic.marked_parts`, :class:`~judgegraph.providers.anthropic.MarkedCache`), over the requests
served so far:

- the cached prefix of a request is everything sent up to and including the last block marked
  ``cache_control`` (tools, then system, then the messages' content blocks, in that order, as Anthropic
  orders its cache); a request with no mark caches nothing;
- when the same prefix (byte for byte) was written before, its tokens are ``cache_read_input_tokens``; else,
  when it is at least ``min_tokens`` long (Anthropic's minimum cacheable length for the request's model,
  :func:`~judgegraph.providers.cache_rule`: 1,024 for Claude Sonnet 4.5; a model not in judgegraph's
  table: the largest minimum known, as the dry run assumes), it is written: ``cache_creation_input_tokens``; shorter prefixes are not cached at all;
- ``input_tokens`` is the rest (Anthropic's ``input_tokens`` excludes cache reads and writes). Tokens are
  counted with cl100k, which is not Claude's tokenizer: the counts are consistent, not Anthropic's.

A responder may answer :class:`AnthropicError` instead (a 429 with ``retry-after``, a 500...): the server sends
Anthropic's error body with that status.

Use::

    with FakeAnthropicServer(lambda request: {"reason": "ok", "verdict": "yes"}) as server:
        model = ChatAnthropic(model="claude-sonnet-4-5", base_url=server.base_url, api_key="test-key")
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from judgegraph.providers import cache_rule
from judgegraph.providers.anthropic import MarkedCache, block_text, marked_parts
from judgegraph.providers.prefixcache import request_tokens

#: Anthropic's error type for each status this server is asked to send.
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


@dataclass(frozen=True)
class AnthropicError:
    """An error reply a responder asks for: ``status``, Anthropic's error body with ``message``, and
    ``retry_after`` seconds as the ``retry-after`` header when given."""

    status: int
    message: str = "error"
    retry_after: float | None = None


@dataclass(frozen=True)
class AnthropicRequest:
    """One request to ``/v1/messages``, as a responder sees it."""

    body: dict[str, Any]
    #: The request's headers, lower-cased names (a responder may echo them, as some servers' errors do).
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def tool_name(self) -> str | None:
        """The tool the request forces (the structured output's schema name)."""
        choice = self.body.get("tool_choice") or {}
        return choice.get("name") if isinstance(choice, dict) else None

    @property
    def text(self) -> str:
        """Every message's text, blocks joined, messages separated by blank lines."""
        return "\n\n".join(block_text(m.get("content")) for m in self.body.get("messages", []))


Responder = Callable[[AnthropicRequest], "dict[str, Any] | AnthropicError"]


def _invalid(body: dict[str, Any]) -> str | None:
    """What Anthropic would refuse in ``body`` among what this server checks: a text block that is empty or only
    whitespace, more than 4 ``cache_control`` marks."""
    blocks = [b for m in body.get("messages") or [] if isinstance(m.get("content"), list) for b in m["content"]]
    if any(b.get("type") == "text" and not str(b.get("text", "")).strip() for b in blocks):
        return "messages: text content blocks must contain non-whitespace text"
    if json.dumps(body).count('"cache_control"') > 4:
        return "A maximum of 4 blocks with cache_control may be provided."
    return None


@dataclass
class FakeAnthropicServer:
    """``POST /v1/messages`` on 127.0.0.1 (any other path: 404; a body Anthropic would refuse, :func:`_invalid`:
    400; an :class:`AnthropicError` the responder returns: its status); ``requests`` holds every body answered."""

    responder: Responder
    #: The minimum cacheable length for every model; None: each request's model's (:func:`cache_rule`).
    min_tokens: int | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: The headers of every request received (errors too), lower-cased names.
    headers: list[dict[str, str]] = field(default_factory=list)
    #: The ``usage`` of each reply, in the order of :attr:`requests`.
    usage_reported: list[dict[str, int]] = field(default_factory=list)
    _caches: dict[int, MarkedCache] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """Anthropic's usage for ``body`` by the prefix rule (module docstring); remembers a written prefix."""
        parts, marked = marked_parts(body)
        total = len(request_tokens(parts))
        least = self.min_tokens
        if least is None:
            least = cache_rule(f"anthropic:{body.get('model', '')}").min_tokens  # the dry run's, for the model
        with self._lock:
            cache = self._caches.setdefault(least, MarkedCache(least))
        read, written = cache.serve(parts, marked)
        return {"input_tokens": total - read - written, "output_tokens": 20,
                "cache_read_input_tokens": read, "cache_creation_input_tokens": written}

    def reply(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any] | AnthropicError:
        request = AnthropicRequest(body, headers or {})
        answer = self.responder(request)
        if isinstance(answer, AnthropicError):
            return answer
        return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                "model": body.get("model", "claude"), "stop_reason": "tool_use", "stop_sequence": None,
                "content": [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}",
                             "name": request.tool_name or "answer", "input": answer}],
                "usage": self.usage(body)}

    def __enter__(self) -> FakeAnthropicServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(min(length, 50_000_000))
                if self.path.split("?")[0] != "/v1/messages":
                    return self._send(404, {"type": "error", "error": {"type": "not_found_error",
                                                                        "message": f"no route {self.path!s}"}})
                body = json.loads(raw)
                headers = {k.lower(): v for k, v in self.headers.items()}
                with owner._lock:
                    owner.headers.append(headers)
                if (refusal := _invalid(body)) is not None:
                    return self._send(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                        "message": refusal}})
                answer = owner.reply(body, headers)
                if isinstance(answer, AnthropicError):
                    extra = {} if answer.retry_after is None else {"retry-after": f"{answer.retry_after:g}"}
                    return self._send(answer.status, {"type": "error", "error": {
                        "type": ERROR_TYPES.get(answer.status, "api_error"), "message": answer.message}}, extra)
                with owner._lock:
                    owner.requests.append(body)
                    owner.usage_reported.append(answer["usage"])
                self._send(200, answer)

            def _send(self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (extra or {}).items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"
