"""A real HTTP server on loopback that speaks enough of Anthropic's Messages API for structured output as
``langchain_anthropic.ChatAnthropic.with_structured_output`` sends it (tests only; docs/cost_cache.md).

``ChatAnthropic.with_structured_output(schema)`` (default ``method="function_calling"``, langchain-anthropic
1.7.10) posts to ``/v1/messages`` the schema as a tool (``tools=[{"name", "description", "input_schema"}]``)
with ``tool_choice={"type": "tool", "name": ...}``, and parses the reply's ``tool_use`` content block
(``{"type": "tool_use", "id", "name", "input"}``) into the schema. The reply's ``usage`` carries Anthropic's
cache counts, by this prefix rule over the requests served so far:

- the cached prefix of a request is everything sent up to and including the last block marked
  ``cache_control`` (tools, then system, then the messages' content blocks, in that order, as Anthropic
  orders its cache); a request with no mark caches nothing;
- when the same prefix (byte for byte) was written before, its tokens are ``cache_read_input_tokens``; else,
  when it is at least ``min_tokens`` long (Anthropic's minimum cacheable length; 1,024 for Claude Sonnet 4.5),
  it is written: ``cache_creation_input_tokens``; shorter prefixes are not cached at all (as Anthropic does);
- ``input_tokens`` is the rest (Anthropic's ``input_tokens`` excludes cache reads and writes). Tokens are
  counted with cl100k, which is not Claude's tokenizer: the counts are consistent, not Anthropic's.

Use::

    with FakeAnthropicServer(lambda request: {"reason": "ok", "verdict": "yes"}) as server:
        model = ChatAnthropic(model="claude-sonnet-4-5", base_url=server.base_url, api_key="test-key")
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from judgegraph.prefixcache import request_tokens

#: The shortest prefix Anthropic caches for Claude Sonnet 4.5 (Haiku 4.5 and Opus 4.5: 4,096), in tokens.
MIN_CACHE_TOKENS = 1024


@dataclass(frozen=True)
class AnthropicRequest:
    """One request to ``/v1/messages``, as a responder sees it."""

    body: dict[str, Any]

    @property
    def tool_name(self) -> str | None:
        """The tool the request forces (the structured output's schema name)."""
        choice = self.body.get("tool_choice") or {}
        return choice.get("name") if isinstance(choice, dict) else None

    @property
    def text(self) -> str:
        """Every message's text, blocks joined, messages separated by blank lines."""
        return "\n\n".join(_text(m.get("content")) for m in self.body.get("messages", []))


Responder = Callable[[AnthropicRequest], dict[str, Any]]


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _parts(body: dict[str, Any]) -> tuple[list[str], int | None]:
    """The request as Anthropic's cache sees it, in order (tools, system, each message's blocks), and the
    number of parts up to and including the last one marked ``cache_control`` (None: none marked)."""
    parts: list[str] = []
    marked: int | None = None

    def add(item: object, text: str) -> None:
        nonlocal marked
        parts.append(text)
        if isinstance(item, dict) and item.get("cache_control"):
            marked = len(parts)

    for tool in body.get("tools") or []:
        add(tool, json.dumps({k: v for k, v in tool.items() if k != "cache_control"}, sort_keys=True))
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else (system or []):
        add(block, str(block.get("text", "")))
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for i, block in enumerate(blocks):
            add(block, (message.get("role", "") + ":" if i == 0 else "") + _text([block]))
    return parts, marked


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
    400); ``requests`` holds every body received."""

    responder: Responder
    min_tokens: int = MIN_CACHE_TOKENS
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    #: The ``usage`` of each reply, in the order of :attr:`requests`.
    usage_reported: list[dict[str, int]] = field(default_factory=list)
    _written: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """Anthropic's usage for ``body`` by the prefix rule (module docstring); remembers a written prefix."""
        parts, marked = _parts(body)
        total = len(request_tokens(parts))
        read = written = 0
        if marked is not None:
            prefix = len(request_tokens(parts[:marked]))
            key = hashlib.sha256(json.dumps(parts[:marked]).encode()).hexdigest()
            with self._lock:
                if key in self._written:
                    read = prefix
                elif prefix >= self.min_tokens:
                    written = prefix
                    self._written.add(key)
        return {"input_tokens": total - read - written, "output_tokens": 20,
                "cache_read_input_tokens": read, "cache_creation_input_tokens": written}

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        request = AnthropicRequest(body)
        answer = self.responder(request)
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
                if (refusal := _invalid(body)) is not None:
                    return self._send(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                        "message": refusal}})
                answer = owner.reply(body)
                with owner._lock:
                    owner.requests.append(body)
                    owner.headers.append({k.lower(): v for k, v in self.headers.items()})
                    owner.usage_reported.append(answer["usage"])
                self._send(200, answer)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
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
