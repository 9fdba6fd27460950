"""The judge's HTTP client parts that need no server: the reply decoder and
the proxy the environment names (the network parts are tested against the
loopback server in tests/integration/test_hostile_replies.py)."""

import gzip
import zlib

import pytest

from judgegraph.judges.transport import ReplyTooLarge, ReplyUndecodable, _Decoded, _proxy_for

BODY = b'{"verdict": "yes"}' + b" " * 200_000


def decode(encoding: str, data: bytes, limit: int = 1 << 20, step: int = 4096) -> bytes:
    decoded = _Decoded(encoding, limit)
    out = [piece for i in range(0, len(data), step) for piece in decoded.feed(data[i : i + step])]
    return b"".join(out) + decoded.flush()


@pytest.mark.parametrize("encoding, data", [
    ("identity", BODY), ("gzip", gzip.compress(BODY)), ("deflate", zlib.compress(BODY)),
    ("deflate", zlib.compress(BODY)[2:-4]),  # raw deflate, as some servers send "deflate"
])
def test_replies_are_decoded_whole_under_the_limit(encoding, data):
    assert decode(encoding, data) == BODY


@pytest.mark.parametrize("encoding, data", [("identity", BODY), ("gzip", gzip.compress(BODY))])
def test_the_limit_counts_decoded_bytes_and_stops_just_past_it(encoding, data):
    decoded = _Decoded(encoding, 1000)
    with pytest.raises(ReplyTooLarge, match="size limit of 1,000 bytes"):
        for i in range(0, len(data), 4096):
            list(decoded.feed(data[i : i + 4096]))
    assert decoded.seen <= 4096 + 1000  # never a whole compressed chunk's worth decoded past the limit


def test_a_corrupt_body_is_undecodable():
    with pytest.raises(ReplyUndecodable, match="not valid gzip"):
        decode("gzip", b"this is not gzip")


def test_the_environment_proxy_is_kept_unless_no_proxy_covers_the_host(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert _proxy_for("https://api.openai.com/v1") is None
    monkeypatch.setenv("https_proxy", "http://proxy.internal:3128")
    monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")
    assert _proxy_for("https://api.openai.com/v1") == "http://proxy.internal:3128"
    assert _proxy_for("https://127.0.0.1:8000/v1") is None


def test_an_idle_connection_is_readable_as_httpcore_says_when_the_server_sends_or_closes():
    """``is_readable`` (asked of every idle connection on every request) from the socket looked up once: the
    same answer as the stream's own, idle, with data waiting, at the server's close and after the client's."""
    import socket

    import anyio

    from judgegraph.judges.transport import _Bounded, sdk_httpx

    core = __import__(sdk_httpx().__name__.replace("httpx", "httpcore"))

    async def main():
        with socket.create_server(("127.0.0.1", 0)) as server:
            backend = _Bounded(core.AnyIOBackend(), core)
            stream = await backend.connect_tcp("127.0.0.1", server.getsockname()[1])
            peer, _ = server.accept()
            seen = []
            for then in (lambda: None, lambda: peer.sendall(b"x"), peer.close):
                then()
                await anyio.sleep(0.05)
                seen.append((stream.get_extra_info("is_readable"), stream._inner.get_extra_info("is_readable")))
            await stream.aclose()
            seen.append((stream.get_extra_info("is_readable"), True))
            return seen

    assert anyio.run(main) == [(False, False), (True, True), (True, True), (True, True)]
