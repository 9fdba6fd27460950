"""The HTTP clients of an LLM judge built from a model string: every request has a deadline and every reply a
size limit, whatever the server does (docs/judges.md). httpx's ``timeout`` bounds each socket operation, not a
request, and reads a reply whole (a gzip bomb decodes to gigabytes): so the deadline is enforced under httpcore,
on the socket, and the reply decoded here in bounded pieces.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import inspect
import os
import select
import ssl
import time
import urllib.request
import weakref
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import openai

# The HTTP library (httpx, or openai 3's httpx2) and its httpcore are chosen at run time (sdk_httpx):
# their streams, transports, requests and headers are typed Any here, as the module object they come from is.

DEFAULT_MAX_REPLY_BYTES = 8 * 1024 * 1024  # decoded; a judge's answer is a few hundred bytes
_PIECE = 1 << 20  # the most decoded bytes made from compressed input at once

#: The deadline (``time.monotonic()``) of the request being made in this
#: thread / task; set when a request starts, cleared when its reply is closed.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("judgegraph_deadline", default=None)

#: What answers a request in place of the network: ``(method, URL path, body bytes)`` → ``(status, JSON body)``.
StandIn = Callable[[str, str, bytes], tuple[int, dict[str, Any]]]

#: The stand-in answering the requests made in this thread / task (batch mode's, docs/batch.md); None: the network.
_STAND_IN: contextvars.ContextVar[StandIn | None] = contextvars.ContextVar("judgegraph_stand_in", default=None)

#: The clients :func:`openai_http_clients` made (their transport is the one a stand-in can answer in).
_MADE: weakref.WeakSet[Any] = weakref.WeakSet()


_UNSEEN = object()
_poll = getattr(select, "poll", None)  # not on Windows: there the inner stream's own check


class ReplyTooLarge(Exception):
    """A reply over the judge's size limit (not retried: the server would send it again)."""


class ReplyUndecodable(Exception):
    """A reply in a content encoding the judge did not ask for, or corrupt."""


def sdk_httpx() -> ModuleType:
    """The HTTP library the installed openai SDK is built on (``httpx``, or
    ``httpx2`` from openai 3 on): the clients given to it must be its own."""
    import openai

    roots = (c.__module__.split(".")[0] for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client")
    return importlib.import_module(next((r for r in roots if r in ("httpx", "httpx2")), "httpx"))


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the request's deadline; ``error`` when none is."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _Bounded:
    """httpcore's network backend or stream, every operation (sync or async) ending
    by the deadline; connecting returns a bounded stream."""

    def __init__(self, inner: Any, core: ModuleType) -> None:
        self._inner, self._core = inner, core
        self._socket: Any = _UNSEEN

    def __getattr__(self, name: str) -> Any:  # close, aclose, sleep: as they are
        return getattr(self._inner, name)

    def get_extra_info(self, info: str) -> Any:
        """The inner stream's, but ``is_readable`` (httpcore's pool asks it of every idle connection on every
        request) polls the socket looked up once: anyio builds a dict of a stream's attributes per look-up."""
        if info != "is_readable" or _poll is None:
            return self._inner.get_extra_info(info)
        if self._socket is _UNSEEN:
            self._socket = self._inner.get_extra_info("socket")
        fd = -1 if self._socket is None else self._socket.fileno()
        if fd < 0:  # closed: as httpcore says, readable (the next read returns b"")
            return True
        poll = _poll()
        poll.register(fd, select.POLLIN)
        return bool(poll.poll(0))

    def _wrap(self, made: Any) -> Any:
        if not inspect.isawaitable(made):
            return _Bounded(made, self._core)

        async def bounded() -> _Bounded:
            return _Bounded(await made, self._core)

        return bounded()

    def read(self, max_bytes: int, timeout: float | None = None) -> Any:
        return self._inner.read(max_bytes, _left(timeout, self._core.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> Any:
        return self._inner.write(buffer, _left(timeout, self._core.WriteTimeout))

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> Any:
        return self._wrap(self._inner.start_tls(ssl_context, server_hostname, _left(timeout, self._core.ConnectTimeout)))

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> Any:
        return self._wrap(self._inner.connect_tcp(host, port, _left(timeout, self._core.ConnectTimeout), local_address,
                                                  socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        return self._wrap(self._inner.connect_unix_socket(path, _left(timeout, self._core.ConnectTimeout),
                                                          socket_options))


class _Decoded:
    """The reply body decoded and counted as it arrives: at most ``limit``
    decoded bytes, made at most :data:`_PIECE` at a time."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.limit, self.seen = limit, 0
        self._encoding = encoding
        wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}.get(encoding)
        self._inflate = None if wbits is None else zlib.decompressobj(wbits)

    def _count(self, piece: bytes) -> bytes:
        self.seen += len(piece)
        if self.seen > self.limit:
            raise ReplyTooLarge(f"reply over the size limit of {self.limit:,} bytes (max_reply_bytes); not read further")
        return piece

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._inflate is None:
            yield self._count(data)
            return
        while data:
            try:
                piece = self._inflate.decompress(data, min(_PIECE, self.limit - self.seen + 1))
            except zlib.error as exc:
                if self._encoding == "deflate" and self.seen == 0:  # raw deflate, as some servers send it
                    self._inflate, self._encoding = zlib.decompressobj(-zlib.MAX_WBITS), "raw deflate"
                    continue
                raise ReplyUndecodable(f"reply body not valid {self._encoding}: {exc}") from exc
            data = self._inflate.unconsumed_tail
            if piece:
                yield self._count(piece)

    def flush(self) -> bytes:
        return b"" if self._inflate is None else self._count(self._inflate.flush())


def _decoder(headers: Any, limit: int) -> tuple[_Decoded, Any]:
    """The body's decoder and the headers the client sees (no Content-Encoding:
    the body it gets is decoded already)."""
    encoding = (headers.get("content-encoding") or "identity").strip().lower()
    if encoding not in ("identity", "gzip", "deflate"):
        raise ReplyUndecodable(f"reply in content encoding {encoding!r}, not one asked for (gzip, deflate)")
    if encoding == "identity":
        length = headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > limit:
            raise ReplyTooLarge(f"reply of {int(length):,} bytes, over the size limit of {limit:,} bytes"
                                " (max_reply_bytes); not read")
        return _Decoded("identity", limit), headers
    kept = [(k, v) for k, v in headers.multi_items() if k.lower() not in ("content-encoding", "content-length")]
    return _Decoded(encoding, limit), kept


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY`` ... unless
    ``NO_PROXY`` covers it): a client given its own transport no longer looks."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def _bounded(transport: Any) -> Any:
    """``transport`` (httpx's) with its httpcore pool's network backend bounded
    by the deadline (httpx has no public way in; checked, so a change fails loudly)."""
    pool = getattr(transport, "_pool", None)
    current = getattr(pool, "_network_backend", None)
    if current is None:
        raise RuntimeError(f"{type(transport).__name__} keeps no httpcore pool: its requests cannot be bounded")
    core = importlib.import_module(type(pool).__module__.split(".")[0])
    pool._network_backend = _Bounded(current, core)  # type: ignore[union-attr]
    return transport


@contextlib.contextmanager
def _request(request: Any, timeout: float | None) -> Iterator[None]:
    """One request's deadline set (cleared again if no reply comes), its reply asked for in the encodings read here."""
    request.headers["Accept-Encoding"] = "gzip, deflate"
    _DEADLINE.set(None if timeout is None else time.monotonic() + timeout)
    try:
        yield
    except BaseException:
        _DEADLINE.set(None)
        raise


@contextlib.contextmanager
def answered_by(stand_in: StandIn) -> Iterator[None]:
    """Within it, a request made in this thread / task through the judge's transport is not sent:
    ``stand_in`` answers it, and the reply is read by the client as a server's would be. The reply says
    ``x-should-retry: false`` (the openai SDK then sends nothing again, whatever its ``max_retries``)."""
    token = _STAND_IN.set(stand_in)
    try:
        yield
    finally:
        _STAND_IN.reset(token)


def has_judge_transport(client: object) -> bool:
    """``client`` is one :func:`openai_http_clients` made: its requests can be answered by a stand-in."""
    try:
        return client in _MADE
    except TypeError:  # not weakly referenceable: not one of ours
        return False


@functools.lru_cache(maxsize=2)
def _transport_class(httpx: ModuleType) -> type:
    """The transport, sync and async, on ``httpx``'s base classes (the client checks its
    streams' types): a deadline per request, the reply decoded and counted."""

    class Body(httpx.SyncByteStream, httpx.AsyncByteStream):  # type: ignore[name-defined]
        def __init__(self, raw: Any, decoded: _Decoded) -> None:
            self._raw, self._decoded = raw, decoded

        def __iter__(self) -> Iterator[bytes]:
            for data in self._raw:
                yield from self._decoded.feed(data)
            if tail := self._decoded.flush():
                yield tail

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for data in self._raw:
                for piece in self._decoded.feed(data):
                    yield piece
            if tail := self._decoded.flush():
                yield tail

        def close(self) -> None:
            _DEADLINE.set(None)
            self._raw.close()

        async def aclose(self) -> None:
            _DEADLINE.set(None)
            await self._raw.aclose()

    class Transport(httpx.BaseTransport, httpx.AsyncBaseTransport):  # type: ignore[name-defined]
        def __init__(self, inner: Any, timeout: float | None, limit: int) -> None:
            self._inner, self._timeout, self._limit = inner, timeout, limit

        def _bounded(self, response: Any) -> Any:
            """The response with its body read through the decoder that counts against the limit."""
            decoded, headers = _decoder(response.headers, self._limit)
            return httpx.Response(response.status_code, headers=headers, stream=Body(response.stream, decoded),
                                  extensions=response.extensions)

        def _stood_in(self, stand_in: StandIn, request: Any) -> Any:
            """The stand-in's answer to ``request`` (its body is in memory: the SDK sends JSON)."""
            status, payload = stand_in(request.method, request.url.path, request.content)
            return httpx.Response(status, json=payload, headers={"x-should-retry": "false"})

        def handle_request(self, request: Any) -> Any:
            if (stand_in := _STAND_IN.get()) is not None:
                return self._stood_in(stand_in, request)
            with _request(request, self._timeout):
                return self._bounded(self._inner.handle_request(request))

        async def handle_async_request(self, request: Any) -> Any:
            if (stand_in := _STAND_IN.get()) is not None:
                return self._stood_in(stand_in, request)
            with _request(request, self._timeout):
                return self._bounded(await self._inner.handle_async_request(request))

        def close(self) -> None:
            self._inner.close()

        async def aclose(self) -> None:
            await self._inner.aclose()

    return Transport


@functools.lru_cache(maxsize=2)
def _ssl_context(httpx: ModuleType) -> ssl.SSLContext:
    """One verifying SSL context per process (certifi's bundle, or
    ``SSL_CERT_FILE``): loading it costs a file read and ~10 ms, per transport."""
    return httpx.create_ssl_context()


def openai_http_clients(base_url: str | None, *, timeout: float | None,
                        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
                        ) -> tuple[openai.DefaultHttpxClient, openai.DefaultAsyncHttpxClient]:
    """Sync and async HTTP clients for ``ChatOpenAI``: each request ends within ``timeout``
    seconds and reads at most ``max_reply_bytes`` decoded bytes."""
    import openai

    httpx = sdk_httpx()
    url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    proxy = _proxy_for(url)
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)  # the SDK's own
    transport, tls = _transport_class(httpx), _ssl_context(httpx)
    sync_inner = _bounded(httpx.HTTPTransport(verify=tls, proxy=proxy, limits=limits))
    async_inner = _bounded(httpx.AsyncHTTPTransport(verify=tls, proxy=proxy, limits=limits))
    clients = (
        openai.DefaultHttpxClient(base_url=url, timeout=timeout, transport=transport(sync_inner, timeout, max_reply_bytes)),
        openai.DefaultAsyncHttpxClient(base_url=url, timeout=timeout,
                                       transport=transport(async_inner, timeout, max_reply_bytes)),
    )
    _MADE.update(clients)
    return clients
