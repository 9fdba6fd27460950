"""A real HTTP server on loopback that speaks (enough of) the OpenAI API.

It lets the real client path ``ChatOpenAI -> openai SDK -> httpx -> HTTP`` run
end to end with no API key and no internet: structured output (``response_format``
json_schema / json_object and function tools), malformed replies, HTTP errors
with ``Retry-After``, slow replies, streaming (SSE) and embeddings.

Typical use in a test::

    from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured, text

    responder = ScriptedResponder(
        [("What about 3+3?", [text("not json"), structured({"verdict": "pass"})])],
        default=structured({"verdict": "fail"}),
    )
    with FakeOpenAIServer(responder) as server:
        llm = ChatOpenAI(model="gpt-4.1-mini", base_url=server.base_url, api_key="test-key")
        ...
        assert server.calls["/v1/chat/completions"] == 2

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/embeddings``,
``GET /v1/models`` (and ``/v1/models/{id}``), and the Batch API: ``POST /v1/files``
(multipart upload), ``GET /v1/files/{id}[/content]``, ``POST /v1/batches``,
``GET /v1/batches[/{id}]`` (see :class:`FakeBatches`: each poll moves a batch on,
validating → in_progress → completed, failed or expired; requests answered by the
responder, an :func:`error` reply going to the error file); anything else is a 404
with an OpenAI-style error body.

Command line (serves :func:`schema_responder`, prints the base URL on the first
stdout line, runs until SIGTERM/SIGINT)::

    python -m tests.kit.openai_server --port 0 --latency 0.2        # from the repository root
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import functools
import hashlib
import itertools
import json
import logging
import math
import re
import signal
import socket
import struct
import sys
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from judgegraph.judges.schema_example import example_from_schema
from judgegraph.judges.tokens import count_tokens, encoding
from judgegraph.providers.prefixcache import PrefixCache, chat_parts, request_tokens

__all__ = [
    "ChatRequest",
    "FakeBatches",
    "FakeOpenAIServer",
    "Reply",
    "Responder",
    "ScriptedResponder",
    "echo_headers",
    "endless",
    "error",
    "gzip_bomb",
    "hashing_embedding",
    "huge",
    "main",
    "refusal",
    "schema_responder",
    "structured",
    "text",
    "tool_call",
    "trickle",
]

log = logging.getLogger(__name__)

Wants = Literal["json_schema", "tool", "json_object", "text"]


# --------------------------------------------------------------------------- #
# Requests and replies
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class ChatRequest:
    """What a responder sees of one ``POST /v1/chat/completions`` request."""

    raw: dict[str, Any]
    """The parsed JSON request body, untouched."""
    model: str
    messages: list[dict[str, Any]]
    text: str
    """All message contents joined with newlines (key replies on prompt content)."""
    last_user_text: str
    wants: Wants
    """``json_schema`` | ``tool`` | ``json_object`` | ``text``."""
    schema: dict[str, Any] | None
    """JSON schema from ``response_format`` or the requested tool's parameters."""
    schema_name: str | None
    """``response_format.json_schema.name`` or the tool name."""
    tool_name: str | None
    temperature: float | None = None
    n: int = 1
    seed: int | None = None
    stream: bool = False
    index: int = 0
    """Choice index (``0 <= index < n``); the responder is called once per choice."""

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ChatRequest:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        contents = [_content_text(m.get("content")) for m in messages]
        user = [c for m, c in zip(messages, contents) if m.get("role") == "user"]
        wants, schema, schema_name, tool_name = _classify(body)
        try:
            n = max(1, int(body.get("n") or 1))
        except (TypeError, ValueError):
            n = 1
        return cls(
            raw=dict(body),
            model=str(body.get("model") or "gpt-4.1-mini"),
            messages=messages,
            text="\n".join(c for c in contents if c),
            last_user_text=user[-1] if user else "",
            wants=wants,
            schema=schema,
            schema_name=schema_name,
            tool_name=tool_name,
            temperature=body.get("temperature"),
            n=n,
            seed=body.get("seed"),
            stream=bool(body.get("stream")),
        )


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


def _classify(body: Mapping[str, Any]) -> tuple[Wants, dict | None, str | None, str | None]:
    rf = body.get("response_format")
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    tool_choice = body.get("tool_choice")
    tool_name = None
    tool_schema = None
    if tools and tool_choice != "none":
        wanted = None
        if isinstance(tool_choice, dict):
            wanted = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
        elif isinstance(tool_choice, str) and tool_choice not in ("auto", "required", "none"):
            wanted = tool_choice
        fns = [t.get("function") or t for t in tools]
        fn = next((f for f in fns if f.get("name") == wanted), None) or fns[0]
        tool_name = fn.get("name")
        tool_schema = fn.get("parameters")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        js = rf.get("json_schema") or {}
        return "json_schema", js.get("schema"), js.get("name"), tool_name
    if isinstance(rf, dict) and rf.get("type") == "json_object":
        return "json_object", None, None, tool_name
    if tool_name is not None:
        return "tool", tool_schema, tool_name, tool_name
    return "text", None, None, None


@dataclass(frozen=True)
class Reply:
    """One canned answer. Build with :func:`structured`, :func:`text`, :func:`error`,
    :func:`tool_call` or :func:`refusal`."""

    kind: Literal["structured", "text", "error", "tool_call", "refusal", "hostile"]
    obj: Any = None
    content: str | None = None
    status: int = 200
    body: Any = None
    retry_after: float | None = None
    delay: float = 0.0
    finish_reason: str | None = None
    tool_name: str | None = None
    hostile: Hostile | None = None

    def with_delay(self, seconds: float) -> Reply:
        return dataclasses.replace(self, delay=float(seconds))


def structured(obj: Any, *, delay: float = 0.0) -> Reply:
    """``obj`` encoded the way the request asked: JSON ``content`` for response_format
    json_schema/json_object, a ``tool_calls`` entry when tools were given, else JSON text."""
    return Reply("structured", obj=obj, delay=delay)


def text(s: str, *, delay: float = 0.0, finish_reason: str = "stop") -> Reply:
    """Plain ``content`` (prose, malformed JSON such as ``'{"verdict": "maybe"'`` ...),
    even if the request asked for a tool call."""
    return Reply("text", content=s, delay=delay, finish_reason=finish_reason)


def tool_call(arguments: str | Mapping[str, Any], *, name: str | None = None, delay: float = 0.0) -> Reply:
    """A tool call whose ``arguments`` string is sent verbatim (use a str for malformed
    arguments). ``name`` defaults to the requested tool."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Reply("tool_call", content=args, tool_name=name, delay=delay)


def refusal(message: str = "I'm sorry, I can't help with that.", *, delay: float = 0.0) -> Reply:
    """A structured-output refusal (``message.refusal`` set, ``content`` null)."""
    return Reply("refusal", content=message, delay=delay)


def error(status: int, body: Any = None, retry_after: float | None = None, *, delay: float = 0.0) -> Reply:
    """An HTTP error. ``body``: None (OpenAI-style default), a str (the message) or a
    dict/list sent verbatim as JSON. ``retry_after`` sets ``Retry-After`` (seconds) and
    ``retry-after-ms``."""
    return Reply("error", status=int(status), body=body, retry_after=retry_after, delay=delay)


@dataclass(frozen=True)
class Hostile:
    """How a hostile reply misbehaves on the wire (see :func:`trickle`, :func:`endless`,
    :func:`huge`, :func:`gzip_bomb`, :func:`echo_headers`)."""

    mode: Literal["trickle", "endless", "huge", "gzip_bomb", "echo_headers"]
    interval: float = 0.5
    """trickle: seconds between bytes."""
    headers: bool = False
    """trickle: the status line and headers trickle too (else only the body)."""
    size: int = 0
    """huge / gzip_bomb: bytes of padding after the JSON completion (decoded size)."""
    max_seconds: float = 60.0
    """trickle / endless: the server gives up after this long (every loop bounded)."""


def trickle(obj: Any, *, interval: float = 0.5, headers: bool = False, max_seconds: float = 60.0) -> Reply:
    """A valid completion for ``obj`` sent one byte every ``interval`` seconds (with
    ``headers``, from the status line on; else after the headers, announced with its
    Content-Length)."""
    return Reply("hostile", obj=obj, hostile=Hostile("trickle", interval=interval, headers=headers,
                                                      max_seconds=max_seconds))


def endless(*, max_seconds: float = 60.0) -> Reply:
    """A 200 chunked reply that starts a JSON completion and then sends whitespace
    (64 KiB chunks) until the client hangs up or ``max_seconds`` pass."""
    return Reply("hostile", hostile=Hostile("endless", max_seconds=max_seconds))


def huge(obj: Any, size: int) -> Reply:
    """A valid completion for ``obj`` followed by ``size`` bytes of whitespace (still
    valid JSON), announced with its Content-Length, written 1 MiB at a time."""
    return Reply("hostile", obj=obj, hostile=Hostile("huge", size=int(size)))


def gzip_bomb(obj: Any, size: int) -> Reply:
    """``Content-Encoding: gzip``: ``size`` bytes of whitespace then a valid completion
    for ``obj``, compressed (about 1,000 to 1); decoded, a valid reply."""
    return Reply("hostile", obj=obj, hostile=Hostile("gzip_bomb", size=int(size)))


def echo_headers(status: int = 400, obj: Any = None) -> Reply:
    """An HTTP error whose message repeats every request header (``Authorization``
    included), as some misconfigured proxies and debug servers do. With ``status`` 200, a
    successful structured reply ``obj`` whose string values have ``{headers}`` replaced by them."""
    return Reply("hostile", status=int(status), obj=obj, hostile=Hostile("echo_headers"))


Responder = Callable[[ChatRequest], Reply]


class ScriptedResponder:
    """Replies chosen by prompt content, never by global call order.

    ``rules``: ``(pattern, replies)`` pairs (or a mapping). ``pattern`` is a substring
    of ``request.text`` (or a predicate ``ChatRequest -> bool``); the first matching
    rule wins. ``replies`` is a Reply or a sequence consumed in order *per rule*, the
    last one repeating. ``default`` (a Reply or a responder callable) answers
    unmatched requests; without it they get a 500 whose message says so.
    Thread safe.
    """

    def __init__(
        self,
        rules: Iterable[tuple[str | Callable[[ChatRequest], bool], Reply | Sequence[Reply]]]
        | Mapping[str, Reply | Sequence[Reply]] = (),
        *,
        default: Reply | Responder | None = None,
    ) -> None:
        items = rules.items() if isinstance(rules, Mapping) else rules
        self._rules: list[tuple[Any, list[Reply]]] = []
        for pattern, replies in items:
            seq = [replies] if isinstance(replies, Reply) else list(replies)
            if not seq or not all(isinstance(r, Reply) for r in seq):
                raise ValueError(f"rule {pattern!r}: replies must be a Reply or a non-empty list of Reply")
            self._rules.append((pattern, seq))
        self.default = default
        self._lock = threading.Lock()
        self._counts = [0] * len(self._rules)
        self.unmatched = 0

    def _matches(self, pattern: Any, request: ChatRequest) -> bool:
        if callable(pattern):
            return bool(pattern(request))
        return str(pattern) in request.text

    def __call__(self, request: ChatRequest) -> Reply:
        for i, (pattern, seq) in enumerate(self._rules):
            if self._matches(pattern, request):
                with self._lock:
                    k = self._counts[i]
                    self._counts[i] += 1
                return seq[min(k, len(seq) - 1)]
        with self._lock:
            self.unmatched += 1
        if isinstance(self.default, Reply):
            return self.default
        if self.default is not None:
            return self.default(request)
        return error(
            500,
            "ScriptedResponder: no rule matched and no default; prompt text starts with "
            + repr(request.text[:200]),
        )

    @property
    def hits(self) -> dict[str, int]:
        """How many requests each rule answered (keyed by ``repr`` of callables)."""
        with self._lock:
            return {
                (p if isinstance(p, str) else repr(p)): c for (p, _), c in zip(self._rules, self._counts)
            }


def schema_responder(request: ChatRequest) -> Reply:
    """Default responder (used by the CLI): a schema-conforming object for structured
    requests (``{}`` for json_object), ``"ok"`` for plain-text ones; a dense request
    (judgegraph.core._dense: ``items`` whose ``item`` is one of 1..N) gets one item per number."""
    if request.wants == "text":
        return text("ok")
    item = ((request.schema or {}).get("properties", {}).get("items") or {}).get("items")
    numbers = (item or {}).get("properties", {}).get("item", {}).get("enum") if isinstance(item, dict) else None
    if numbers and isinstance(item, dict):
        defs = (request.schema or {}).get("$defs")
        one = example_from_schema({**item, "$defs": defs} if defs else item)
        fields = one if isinstance(one, dict) else {}
        return structured({"items": [{**fields, "item": k} for k in numbers]})
    return structured(example_from_schema(request.schema))


# --------------------------------------------------------------------------- #
# Tokens and embeddings
# --------------------------------------------------------------------------- #

def _decode_tokens(tokens: Sequence[int]) -> str:  # token ids in an embeddings request
    return encoding().decode(list(tokens))


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    # OpenAI's cookbook accounting: 3 per message (+1 per name) + 3 to prime the reply.
    total = 3
    for m in messages:
        total += 3 + count_tokens(str(m.get("role") or "")) + count_tokens(_content_text(m.get("content")))
        if m.get("name"):
            total += 1 + count_tokens(str(m["name"]))
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            total += count_tokens(str(fn.get("name") or "")) + count_tokens(str(fn.get("arguments") or ""))
    return total


_WORD = re.compile(r"\w+", re.UNICODE)


def hashing_embedding(s: str, dim: int = 64) -> list[float]:
    """Deterministic signed hashing bag-of-words vector, L2-normalised (texts sharing
    words have positive cosine similarity). Empty text → the first basis vector."""
    vec = [0.0] * dim
    for word in _WORD.findall(s.lower()):
        h = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
        vec[h % dim] += 1.0 if (h >> 63) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


# --------------------------------------------------------------------------- #
# The server
# --------------------------------------------------------------------------- #

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    409: ("conflict_error", None),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}

MODELS = ("gpt-4.1-mini", "gpt-4.1", "gpt-4o-mini", "text-embedding-3-small")


def _error_body(status: int, message: str | None = None, type_: str | None = None, code: str | None = None) -> dict:
    default_type, default_code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    if message is None:
        message = {
            429: "Rate limit reached for requests (fake server).",
            500: "The server had an error while processing your request (fake server).",
            503: "The engine is currently overloaded (fake server).",
        }.get(status, f"HTTP {status} from fake OpenAI server")
    return {"error": {"message": message, "type": type_ or default_type, "param": None, "code": code or default_code}}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # we join our own bookkeeping in FakeOpenAIServer.stop()
    request_queue_size = 256  # listen backlog: 64+ simultaneous connects without SYN drops
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], owner: FakeOpenAIServer) -> None:
        self.owner = owner
        super().__init__(addr, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        owner = self.owner
        t = threading.Thread(
            target=self._run,
            args=(request, client_address),
            name=f"FakeOpenAIServer-conn-{next(owner._conn_ids)}",
            daemon=True,
        )
        with owner._lock:
            owner._conns[t] = request
        t.start()

    def _run(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - a handler's failure is reported by the server, never raised into it
            if not self.owner._stopping.is_set():
                self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            with self.owner._lock:
                self.owner._conns.pop(threading.current_thread(), None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            return  # client went away (timeouts, closed pools): not interesting
        log.exception("fake OpenAI server: error handling request from %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    server_version = "judgegraph-fake-openai/1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - " + format, self.address_string(), *args)

    def setup(self) -> None:
        super().setup()
        if self.server.owner.nodelay:  # reply at once, as uvicorn and nginx do (not held by Nagle + delayed ACK)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # --- plumbing -------------------------------------------------------- #

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:24]}")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error_reply(self, reply: Reply) -> None:
        headers = {}
        if reply.retry_after is not None:
            ra = float(reply.retry_after)
            headers["Retry-After"] = str(int(ra)) if ra.is_integer() else repr(ra)
            headers["retry-after-ms"] = str(int(round(ra * 1000)))
        if isinstance(reply.body, (dict, list)):
            body = reply.body
        else:
            body = _error_body(reply.status, None if reply.body is None else str(reply.body))
        self._send_json(reply.status, body, headers)

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    # --- verbs ----------------------------------------------------------- #

    def do_GET(self) -> None:
        path = self._path()
        owner = self.server.owner
        owner._count(path)
        owner._sleep(owner.latency)
        if path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [_model_obj(m) for m in owner.models]})
        elif path.startswith("/v1/models/"):
            self._send_json(200, _model_obj(path[len("/v1/models/") :]))
        elif owner.batch_api and (path.startswith("/v1/files/") or path == "/v1/batches"
                                  or path.startswith("/v1/batches/")):
            self._batch_get(path)
        else:
            self._not_found(path)

    def do_POST(self) -> None:
        path = self._path()
        owner = self.server.owner
        owner._count(path)
        raw = self._read_body()
        if owner.batch_api and path == "/v1/files":
            self._upload(raw)
            return
        if path not in ("/v1/chat/completions", "/v1/embeddings", "/v1/batches") or (
                path == "/v1/batches" and not owner.batch_api):
            self._not_found(path)
            return
        try:
            body = json.loads(raw.decode("utf-8") or "null")
            if not isinstance(body, dict):
                raise ValueError("request body must be a JSON object")
        except (ValueError, UnicodeDecodeError) as exc:
            self._send_json(400, _error_body(400, f"We could not parse the JSON body of your request: {exc}"))
            return
        owner._record(path, body)
        if path == "/v1/chat/completions":
            self._chat(body)
        elif path == "/v1/batches":
            status, payload = owner.batches.create(body)
            self._send_json(status, payload)
        else:
            self._embeddings(body)

    def _upload(self, raw: bytes) -> None:
        """``POST /v1/files``: a multipart form with ``purpose`` and ``file``."""
        from email.parser import BytesParser
        from email.policy import HTTP

        ctype = self.headers.get("Content-Type") or ""
        form = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in form.iter_parts() if form.is_multipart() else ():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            if isinstance(name, str) and isinstance(payload, bytes):
                fields[name] = (part.get_filename(), payload)
        if "file" not in fields or "purpose" not in fields:
            self._send_json(400, _error_body(400, "a file upload needs the fields 'file' and 'purpose'"))
            return
        filename, data = fields["file"]
        self._send_json(200, self.server.owner.batches.add_file(data, filename or "upload.jsonl",
                                                                fields["purpose"][1].decode()))

    def _batch_get(self, path: str) -> None:
        batches = self.server.owner.batches
        if path.startswith("/v1/files/") and path.endswith("/content"):
            data = batches.files.get(path[len("/v1/files/"):-len("/content")])
            if data is None:
                self._not_found(path)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if path.startswith("/v1/files/"):
            found = batches.file_objects.get(path[len("/v1/files/"):])
        elif path == "/v1/batches":
            found = {"object": "list", "data": batches.listed(), "has_more": False}
        else:
            found = batches.poll(path[len("/v1/batches/"):])
        if found is None:
            self._not_found(path)
        else:
            self._send_json(200, found)

    def _other(self) -> None:
        path = self._path()
        self.server.owner._count(path)
        self._read_body()
        self._not_found(path)

    do_PUT = do_DELETE = do_PATCH = _other

    def _not_found(self, path: str) -> None:
        self._send_json(404, _error_body(404, f"Unknown request URL: {self.command} {path}."))

    # --- endpoints ------------------------------------------------------- #

    def _chat(self, body: dict[str, Any]) -> None:
        owner = self.server.owner
        if not isinstance(body.get("messages"), list) or not body.get("messages"):
            self._send_json(400, _error_body(400, "'messages' must be a non-empty array"))
            return
        request = ChatRequest.from_body(body)
        replies: list[Reply] = []
        for i in range(request.n):
            req_i = request if i == 0 else dataclasses.replace(request, index=i)
            try:
                reply = owner.responder(req_i)
                if not isinstance(reply, Reply):
                    raise TypeError(f"responder returned {type(reply).__name__}, expected Reply")
            except Exception as exc:
                owner._errors.append(exc)
                log.exception("fake OpenAI server: responder failed")
                reply = error(500, f"responder raised {type(exc).__name__}: {exc}")
            replies.append(reply)
        owner._sleep(owner.latency + max(r.delay for r in replies))
        if owner._stopping.is_set():
            self.close_connection = True
            return
        bad = next((r for r in replies if r.hostile is not None), None)
        if bad is not None and bad.hostile is not None:
            self._hostile(request, bad, bad.hostile)
            return
        failed = next((r for r in replies if r.kind == "error"), None)
        if failed is not None:
            self._send_error_reply(failed)
            return
        completion = _completion(request, replies, cached_tokens=owner.prefix_cache.serve(_prefix_tokens(request)))
        if request.stream:
            self._stream(request, completion)
        else:
            self._send_json(200, completion)

    def _hostile(self, request: ChatRequest, reply: Reply, how: Hostile) -> None:
        """Misbehave as ``how`` says; every loop ends when the client hangs up, the
        server stops, or ``max_seconds`` pass."""
        owner = self.server.owner
        self.close_connection = True
        if how.mode == "echo_headers":
            seen = ", ".join(f"{k}: {v}" for k, v in self.headers.items())
            if reply.status == 200:
                obj = {k: v.replace("{headers}", seen) if isinstance(v, str) else v for k, v in reply.obj.items()}
                self._send_json(200, _completion(request, [structured(obj)]))
                return
            self._send_json(reply.status, _error_body(reply.status, f"bad request; request headers were {seen}"))
            return
        if how.mode == "endless":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            pad = b" " * 65536
            frame = b"%x\r\n" % len(pad) + pad + b"\r\n"
            head = b'{"id": "chatcmpl-endless", "object": "chat.completion", "choices": [' + b" " * 100
            self.wfile.write(b"%x\r\n" % len(head) + head + b"\r\n")
            until = time.monotonic() + how.max_seconds
            while time.monotonic() < until and not owner._stopping.is_set():
                self.wfile.write(frame)
            return
        body = json.dumps(_completion(request, [structured(reply.obj)])).encode("utf-8")
        if how.mode == "gzip_bomb":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            packed = _gzip_padded(body, how.size)
            self.send_header("Content-Length", str(len(packed)))
            self.end_headers()
            self.wfile.write(packed)
            return
        if how.mode == "huge":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body) + how.size))
            self.end_headers()
            self.wfile.write(body)
            left, pad = how.size, b" " * (1 << 20)
            while left > 0 and not owner._stopping.is_set():
                self.wfile.write(pad[: min(left, len(pad))])
                left -= len(pad)
            return
        # trickle
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n").encode("ascii")
        if how.headers:
            data = head + body
        else:
            self.wfile.write(head)
            self.wfile.flush()
            data = body
        until = time.monotonic() + how.max_seconds
        for i in range(len(data)):
            if time.monotonic() >= until or owner._stopping.wait(how.interval):
                return
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()

    def _stream(self, request: ChatRequest, completion: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        base = {k: completion[k] for k in ("id", "object", "created", "model", "system_fingerprint")}
        base["object"] = "chat.completion.chunk"

        def emit(choices: list[dict], **extra: Any) -> None:
            chunk = {**base, "choices": choices, **extra}
            self.wfile.write(b"data: " + json.dumps(chunk).encode("utf-8") + b"\n\n")

        for choice in completion["choices"]:
            idx, msg = choice["index"], choice["message"]
            first = {"role": "assistant", "content": "" if msg["content"] is not None else None, "refusal": None}
            emit([{"index": idx, "delta": first, "logprobs": None, "finish_reason": None}])
            if msg["content"]:
                for piece in _pieces(msg["content"]):
                    emit([{"index": idx, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}])
            if msg.get("refusal"):
                emit([{"index": idx, "delta": {"refusal": msg["refusal"]}, "logprobs": None, "finish_reason": None}])
            for k, tc in enumerate(msg.get("tool_calls") or []):
                head = {"index": k, "id": tc["id"], "type": "function",
                        "function": {"name": tc["function"]["name"], "arguments": ""}}
                emit([{"index": idx, "delta": {"tool_calls": [head]}, "logprobs": None, "finish_reason": None}])
                for piece in _pieces(tc["function"]["arguments"]):
                    delta = {"tool_calls": [{"index": k, "function": {"arguments": piece}}]}
                    emit([{"index": idx, "delta": delta, "logprobs": None, "finish_reason": None}])
            emit([{"index": idx, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}])
        if (request.raw.get("stream_options") or {}).get("include_usage"):
            emit([], usage=completion["usage"])
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _embeddings_error(self, reply: Reply) -> None:
        """An embedder's :func:`error` or :func:`echo_headers` reply (other replies need a chat request)."""
        if reply.hostile is not None and reply.hostile.mode == "echo_headers":
            self.close_connection = True
            seen = ", ".join(f"{k}: {v}" for k, v in self.headers.items())
            self._send_json(reply.status, _error_body(reply.status, f"bad request; request headers were {seen}"))
        elif reply.kind == "error":
            self._send_error_reply(reply)
        else:
            raise ValueError(f"an embedder may return error(...) or echo_headers(...), not a {reply.kind} reply")

    def _embeddings(self, body: dict[str, Any]) -> None:
        owner = self.server.owner
        inp = body.get("input")
        if isinstance(inp, str):
            texts = [inp]
        elif isinstance(inp, list) and inp and all(isinstance(x, int) for x in inp):
            texts = [_decode_tokens(inp)]
        elif isinstance(inp, list) and inp:
            texts = [x if isinstance(x, str) else _decode_tokens(x) for x in inp]
        else:
            self._send_json(400, _error_body(400, "'input' must be a non-empty string or array"))
            return
        dim = int(body.get("dimensions") or owner.embedding_dim)
        try:
            if owner.embedder is not None:
                made = owner.embedder(texts)
                if isinstance(made, Reply):  # an error reply for the embeddings request
                    self._embeddings_error(made)
                    return
                vectors = [list(map(float, v)) for v in made]
            else:
                vectors = [hashing_embedding(t, dim) for t in texts]
        except Exception as exc:
            owner._errors.append(exc)
            log.exception("fake OpenAI server: embedder failed")
            self._send_json(500, _error_body(500, f"embedder raised {type(exc).__name__}: {exc}"))
            return
        owner._sleep(owner.latency)
        base64_out = body.get("encoding_format") == "base64"
        data = []
        for i, vec in enumerate(vectors):
            emb: Any = vec
            if base64_out:
                emb = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(count_tokens(t) for t in texts)
        self._send_json(200, {
            "object": "list",
            "data": data,
            "model": str(body.get("model") or "text-embedding-3-small"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })


@functools.lru_cache(maxsize=4)
def _gzip_padding(size: int) -> tuple[bytes, Any]:
    """``size`` spaces gzipped a MiB at a time (never held decoded): the bytes so
    far and the compressor, to be copied and finished with each reply's body."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = []
    pad = b" " * (1 << 20)
    left = size
    while left > 0:
        out.append(packer.compress(pad[: min(left, len(pad))]))
        left -= len(pad)
    return b"".join(out), packer


def _gzip_padded(body: bytes, size: int) -> bytes:
    """``size`` spaces then ``body`` (JSON allows the leading whitespace), gzipped;
    the padding is compressed once per size."""
    head, packer = _gzip_padding(size)
    finish = packer.copy()
    return head + finish.compress(body) + finish.flush()


def _pieces(s: str, size: int = 24) -> list[str]:
    return [s[i : i + size] for i in range(0, len(s), size)] or [""]


def _model_obj(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 1700000000, "owned_by": "judgegraph-fake"}


def _prefix_tokens(request: ChatRequest) -> list[int]:
    """The request as a provider's prefix cache sees it: the output schema (response_format or tools),
    then every message's role and content (judgegraph.providers.prefixcache)."""
    raw = request.raw
    shape = raw.get("response_format") or raw.get("tools")
    schema = json.dumps(shape, sort_keys=True) if shape else None
    messages = [(str(m.get("role") or ""), _content_text(m.get("content"))) for m in request.messages]
    return request_tokens(chat_parts(schema, messages))


def _completion(request: ChatRequest, replies: list[Reply], cached_tokens: int = 0) -> dict[str, Any]:
    choices = []
    completion_tokens = 0
    for i, reply in enumerate(replies):
        content: str | None = None
        tool_calls = None
        refusal_msg = None
        finish = reply.finish_reason or "stop"
        if reply.kind == "structured":
            encoded = json.dumps(reply.obj)
            if request.wants == "tool":
                tool_calls = [_tool_call_obj(request.tool_name or "tool", encoded)]
                finish = "tool_calls"
            else:
                content = encoded
        elif reply.kind == "tool_call":
            tool_calls = [_tool_call_obj(reply.tool_name or request.tool_name or "tool", reply.content or "")]
            finish = "tool_calls"
        elif reply.kind == "refusal":
            refusal_msg = reply.content
        else:
            content = reply.content or ""
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal_msg}
        if tool_calls:
            message["tool_calls"] = tool_calls
            completion_tokens += sum(
                count_tokens(tc["function"]["name"]) + count_tokens(tc["function"]["arguments"]) for tc in tool_calls
            )
        completion_tokens += count_tokens(content or refusal_msg or "")
        choices.append({"index": i, "message": message, "logprobs": None, "finish_reason": finish})
    prompt_tokens = _prompt_tokens(request.messages)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "system_fingerprint": "fp_judgegraph",
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": min(cached_tokens, prompt_tokens), "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
    }


def _tool_call_obj(name: str, arguments: str) -> dict[str, Any]:
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": {"name": name, "arguments": arguments}}


class FakeBatches:
    """The Batch API of a :class:`FakeOpenAIServer` (``server.batches``).

    A batch is ``validating`` when created; each poll (``GET /v1/batches/{id}``) moves it on:
    ``in_progress``, then after ``polls`` more polls it ends as ``outcomes[n]`` says for the n-th
    batch created (``completed`` by default; ``failed``: no output, an error; ``expired``: only the
    first half of its requests answered, the rest in the error file as ``batch_expired``). While
    ``hold`` is set, a batch stays ``in_progress``. Each request is answered by the server's
    responder; an :func:`error` reply goes to the error file with its status. ``created`` counts
    the batches created (a resumed run must not create them again)."""

    def __init__(self, owner: FakeOpenAIServer, *, polls: int = 2) -> None:
        self.owner = owner
        self.polls = polls
        self.outcomes: list[str] = []
        self.hold = threading.Event()
        self.files: dict[str, bytes] = {}
        self.file_objects: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._polled: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def created(self) -> int:
        with self._lock:
            return len(self.batches)

    def add_file(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        with self._lock:
            file_id = f"file-{uuid.uuid4().hex[:24]}"
            self.files[file_id] = data
            self.file_objects[file_id] = {"id": file_id, "object": "file", "bytes": len(data),
                                          "created_at": int(time.time()), "filename": filename,
                                          "purpose": purpose, "status": "processed"}
            return self.file_objects[file_id]

    def create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if body.get("input_file_id") not in self.files:
                return 400, _error_body(400, f"no file {body.get('input_file_id')!r}")
            if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
                return 400, _error_body(400, "endpoint must be /v1/chat/completions and completion_window 24h")
            batch_id = f"batch_{uuid.uuid4().hex[:24]}"
            lines = self.files[body["input_file_id"]].decode("utf-8").splitlines()
            outcome = self.outcomes[len(self.batches)] if len(self.batches) < len(self.outcomes) else "completed"
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                "input_file_id": body["input_file_id"], "completion_window": "24h", "status": "validating",
                "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": body.get("metadata"), "_outcome": outcome,
            }
            return 200, self._public(batch_id)

    def _public(self, batch_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    def listed(self) -> list[dict[str, Any]]:
        with self._lock:
            return [self._public(b) for b in self.batches]

    def poll(self, batch_id: str) -> dict[str, Any] | None:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            self._polled[batch_id] += 1
            if batch["status"] == "validating":
                batch["status"] = "in_progress"
            elif batch["status"] == "in_progress" and not self.hold.is_set() and self._polled[batch_id] > self.polls:
                self._end(batch)
            return self._public(batch_id)

    def _end(self, batch: dict[str, Any]) -> None:
        outcome = batch["_outcome"]
        if outcome == "failed":
            batch.update(status="failed", errors={"object": "list", "data": [
                {"code": "invalid_request", "message": "the fake server was told to fail this batch", "line": 1}]})
            return
        requests = [json.loads(line) for line in self.files[batch["input_file_id"]].decode("utf-8").splitlines()]
        cut = len(requests) // 2 if outcome == "expired" else len(requests)
        out, errs = [], []
        for n, item in enumerate(requests):
            custom_id = item["custom_id"]
            if n >= cut:
                errs.append({"id": f"batch_req_{n}", "custom_id": custom_id, "response": None,
                             "error": {"code": "batch_expired", "message": "This request could not be executed "
                                                                          "before the completion window expired."}})
                continue
            request = ChatRequest.from_body(item["body"])
            self.owner._record("/v1/batches#request", item["body"])
            reply = self.owner.responder(request)
            if reply.kind == "error":
                body = reply.body if isinstance(reply.body, dict) else _error_body(
                    reply.status, None if reply.body is None else str(reply.body))
                errs.append({"id": f"batch_req_{n}", "custom_id": custom_id,
                             "response": {"status_code": reply.status, "request_id": f"req_{n}", "body": body},
                             "error": None})
            else:
                out.append({"id": f"batch_req_{n}", "custom_id": custom_id, "error": None,
                            "response": {"status_code": 200, "request_id": f"req_{n}",
                                         "body": _completion(request, [reply])}})
        for kind, lines in (("output_file_id", out), ("error_file_id", errs)):
            if lines:
                data = "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")
                file_id = f"file-{uuid.uuid4().hex[:24]}"
                self.files[file_id] = data
                batch[kind] = file_id
        batch["request_counts"] = {"total": len(requests), "completed": len(out), "failed": len(errs)}
        batch["status"] = outcome


class FakeOpenAIServer:
    """OpenAI-compatible HTTP server on a background thread (real sockets).

    ``responder(ChatRequest) -> Reply`` answers chat completions (default:
    :func:`schema_responder`). ``latency`` is added to every request, on top of each
    reply's own ``delay``. ``embedder(list[str]) -> list[vector]`` replaces the default
    hashing bag-of-words embedding (``embedding_dim`` = 64, or the request's
    ``dimensions``); it may return :func:`error` or :func:`echo_headers` instead. ``nodelay`` (default) sends each reply at once (``TCP_NODELAY``,
    as real servers do); ``False`` leaves replies to Nagle's algorithm (each one
    then waits ~40 ms for the client's delayed ACK). Use as a context manager or
    call :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        embedder: Callable[[list[str]], Sequence[Sequence[float]] | Reply] | None = None,
        embedding_dim: int = 64,
        models: Sequence[str] = MODELS,
        nodelay: bool = True,
        batch_api: bool = True,
        batch_polls: int = 2,
    ) -> None:
        self.responder: Responder = responder if responder is not None else schema_responder
        self.nodelay = nodelay
        self.latency = float(latency)
        self.host = host
        self.port = int(port)
        self.embedder = embedder
        self.embedding_dim = int(embedding_dim)
        self.models = tuple(models)
        #: The prompts served so far: each reply reports the ``cached_tokens`` OpenAI's prefix rule gives.
        self.prefix_cache = PrefixCache()
        self._lock = threading.Lock()
        self._requests: list[tuple[str, dict[str, Any]]] = []
        self._calls: Counter[str] = Counter()
        self._errors: list[BaseException] = []
        self._conns: dict[threading.Thread, socket.socket] = {}
        self._conn_ids = itertools.count(1)
        self._stopping = threading.Event()
        # The Batch API (/v1/files, /v1/batches): see FakeBatches.
        self.batch_api = batch_api
        self.batches = FakeBatches(self, polls=batch_polls)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------- #

    def start(self) -> FakeOpenAIServer:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        encoding()  # load the tokenizer once, up front, outside request latency
        self._stopping.clear()
        self._httpd = _HTTPServer((self.host, self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"FakeOpenAIServer-{self.port}", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, close open (keep-alive) connections, join every thread."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()  # wakes handlers sleeping on latency/delay
        httpd.shutdown()
        if thread is not None:
            thread.join(timeout)
        with self._lock:
            conns = list(self._conns.items())
        for _, sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # unblocks handlers waiting on keep-alive reads
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for t, _ in conns:
            t.join(max(0.0, deadline - time.monotonic()))
        httpd.server_close()
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/v1"

    # --- records --------------------------------------------------------- #

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies (parsed JSON) of every POST received, in arrival order."""
        with self._lock:
            return [body for _, body in self._requests]

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [b for p, b in self._requests if p == "/v1/chat/completions"]

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [b for p, b in self._requests if p == "/v1/embeddings"]

    @property
    def calls(self) -> Counter[str]:
        """Request count per path, e.g. ``calls["/v1/chat/completions"]`` (0 if none)."""
        with self._lock:
            return Counter(self._calls)

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by the responder/embedder (they were answered with a 500)."""
        with self._lock:
            return list(self._errors)

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._calls.clear()
            self._errors.clear()

    def _record(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self._requests.append((path, body))

    def _count(self, path: str) -> None:
        with self._lock:
            self._calls[path] += 1

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


# --------------------------------------------------------------------------- #
# CLI
# --------------------------------------------------------------------------- #


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.kit.openai_server",
        description="Serve a fake OpenAI API on loopback; structured requests get schema-conforming objects.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)

    done = threading.Event()

    def _handle(signum: int, frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _handle)
    signal.signal(signal.SIGINT, _handle)
    server = FakeOpenAIServer(
        schema_responder, latency=args.latency, host=args.host, port=args.port, embedding_dim=args.embedding_dim
    )
    server.start()
    try:
        print(server.base_url, flush=True)
        while not done.wait(0.2):
            pass
    finally:
        server.stop()
    print(f"stopped after {sum(server.calls.values())} requests", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
