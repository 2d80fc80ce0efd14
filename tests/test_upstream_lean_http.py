"""The fast path's HTTP/1.1: the framing refuses what it cannot frame with certainty, and the transport keeps a
connection only while it is clean. Bytes come from real sockets (a server in the test's own event loop) or a
real `asyncio.StreamReader`; hostile answers as a whole are `test_upstream_fast_call.py`'s corpus."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest

from mcp_expose.upstream.http1_framing import (
    MAX_HEAD_BYTES,
    Closed,
    FramingError,
    parse_head,
    read_body,
    read_head,
    request_head,
)
from mcp_expose.upstream.lean_http import LEAN, LeanTransport


def head(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize(
    ("raw", "length", "chunked", "reusable"),
    [
        (head("HTTP/1.1 200 OK", "Content-Length: 12"), 12, False, True),
        (head("HTTP/1.1 200 OK", "content-length: 12", "Content-Length: 12"), 12, False, True),
        (head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked"), None, True, True),
        (head("HTTP/1.1 200 OK", "Transfer-Encoding: Chunked ", "Connection: close"), None, True, False),
        (head("HTTP/1.1 200 OK"), None, False, False),  # to the connection's end: never kept
        (head("HTTP/1.0 200 OK", "Content-Length: 2"), 2, False, False),
        (head("HTTP/1.0 200 OK", "Content-Length: 2", "Connection: keep-alive"), 2, False, True),
        (head("HTTP/1.1 204 No Content", "Content-Length: 9"), 0, False, True),
    ],
)
def test_a_head_is_framed_by_its_length_its_chunks_or_the_connections_end(
    raw: bytes, length: int | None, chunked: bool, reusable: bool
) -> None:
    parsed = parse_head(raw)
    assert (parsed.length, parsed.chunked, parsed.reusable) == (length, chunked, reusable)


def test_a_heads_headers_keep_their_order_lowercased_and_trimmed() -> None:
    parsed = parse_head(head("HTTP/1.1 404 Not Found", "Content-Type:  application/json ", "X-A: 1", "x-a: 2"))
    assert parsed.status == 404 and parsed.reason == b"Not Found"
    assert parsed.headers == [(b"content-type", b"application/json"), (b"x-a", b"1"), (b"x-a", b"2")]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (head("HTTP/2 200 OK"), "status line"),
        (head("ICY 200 OK"), "status line"),
        (head("HTTP/1.1 20 OK"), "status line"),
        (head("HTTP/1.1 200 OK", "Content-Length: 1", "Transfer-Encoding: chunked"), "both"),
        (head("HTTP/1.1 200 OK", "Transfer-Encoding: gzip, chunked"), "other than chunked"),
        (head("HTTP/1.1 200 OK", "Content-Length: 1", "Content-Length: 2"), "not one number"),
        (head("HTTP/1.1 200 OK", "Content-Length: +5"), "not one number"),
        (head("HTTP/1.1 200 OK", "X-A: 1", " folded"), "not a header"),
        (head("HTTP/1.1 200 OK", "X A: 1"), "not a header"),
        (head("HTTP/1.1 200 OK", "no colon"), "not a header"),
        (head("HTTP/1.1 200 OK", "X-A: a\x00b"), "control character"),
    ],
)
def test_a_head_that_cannot_be_framed_with_certainty_is_refused(raw: bytes, words: str) -> None:
    with pytest.raises(FramingError, match=words):
        parse_head(raw)


def test_a_request_header_with_a_line_break_is_never_written() -> None:
    assert request_head(b"POST", b"/mcp", [(b"a", b"1")]) == b"POST /mcp HTTP/1.1\r\na: 1\r\n\r\n"
    with pytest.raises(FramingError, match="x-injected"):
        request_head(b"POST", b"/mcp", [(b"x-injected", b"1\r\nHost: elsewhere")])
    with pytest.raises(FramingError, match="request line"):
        request_head(b"POST", b"/mcp HTTP/1.1\r\n", [])


def fed(data: bytes, *, limit: int = MAX_HEAD_BYTES) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=limit)
    reader.feed_data(data)
    reader.feed_eof()
    return reader


async def body_of(data: bytes, raw_head: bytes) -> bytes:
    return b"".join([chunk async for chunk in read_body(fed(data), parse_head(raw_head), 1.0)])


CHUNKED = head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n", b"hello world"),
        (b"5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n", b"hello"),
        (b"A\r\n0123456789\r\n0\r\n\r\n", b"0123456789"),
    ],
)
def test_a_chunked_body_is_read_with_its_extensions_and_trailers(data: bytes, expected: bytes) -> None:
    assert anyio.run(body_of, data, CHUNKED) == expected


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"5\r\nhel", "incomplete chunked read"),
        (b"5\r\nhello", "incomplete chunked read"),
        (b"3\r\nhello\r\n0\r\n\r\n", "longer than its size"),
        (b"zz\r\nhello\r\n", "not a size"),
        (b"1" * 5000 + b"\r\n", "too long"),
    ],
)
def test_a_broken_chunked_body_is_refused(data: bytes, words: str) -> None:
    with pytest.raises(FramingError, match=words):
        anyio.run(body_of, data, CHUNKED)


def test_a_body_shorter_than_its_length_is_refused_and_one_without_a_length_ends_with_the_connection() -> None:
    with pytest.raises(FramingError, match="incomplete read"):
        anyio.run(body_of, b"abc", head("HTTP/1.1 200 OK", "Content-Length: 5"))
    assert anyio.run(body_of, b"abc" * 1000, head("HTTP/1.1 200 OK")) == b"abc" * 1000


def test_interim_answers_are_passed_over_and_an_empty_or_endless_head_is_refused() -> None:
    async def first_head(data: bytes, limit: int = MAX_HEAD_BYTES) -> int:
        return (await read_head(fed(data, limit=limit), 1.0)).status

    assert anyio.run(first_head, head("HTTP/1.1 100 Continue") + head("HTTP/1.1 201 Created")) == 201
    with pytest.raises(Closed, match="without sending a response"):
        anyio.run(first_head, b"")
    with pytest.raises(FramingError, match="middle of the answer's head"):
        anyio.run(first_head, b"HTTP/1.1 200 OK\r\n")
    with pytest.raises(FramingError, match="head is over"):
        anyio.run(first_head, b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * 200 + b"\r\n", 100)
    with pytest.raises(FramingError, match="switched protocols"):
        anyio.run(first_head, head("HTTP/1.1 101 Switching Protocols"))


# --- The transport, against a real socket server in the test's event loop.

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]


async def answered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, extra: bytes = b"") -> None:
    """Read one request (head and Content-Length body) and answer it with its own body."""
    raw = await reader.readuntil(b"\r\n\r\n")
    length = int(parse_request_length(raw))
    body = await reader.readexactly(length)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n" % len(body) + extra + b"\r\n" + body)
    await writer.drain()


def parse_request_length(raw: bytes) -> int:
    for line in raw.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return int(value)
    return 0


Settled = Callable[[Any], bool]


def idle_connections(transport: LeanTransport) -> list[Any]:
    return [connection for idle in transport._idle.values() for connection in idle]  # noqa: SLF001


async def serving(handler: Handler, calls: int, settled: Settled | None = None) -> tuple[list[Any], int]:
    """Run `calls` requests through one LeanTransport against a server whose connection handler is `handler`
    (it returns False to close the connection); each call's body (or its httpx2 error), and how many connections
    the server saw.
    `settled(connection)`: after each call, wait until each idle connection shows what the server did next (its
    FIN read, or bytes it sent unasked), as time between calls would show it."""
    connections = 0

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while await handler(reader, writer, connections):
                pass
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = LeanTransport(ssl.create_default_context())
    bodies: list[bytes | httpx2.HTTPError] = []
    try:
        for number in range(calls):
            request = httpx2.Request(
                "POST", f"http://127.0.0.1:{port}/mcp", content=b"call %d" % number, extensions={LEAN: True}
            )
            request.extensions["timeout"] = {"connect": 2.0, "read": 2.0, "write": 2.0, "pool": 2.0}
            try:
                response = await transport.handle_async_request(request)
                bodies.append(b"".join([chunk async for chunk in response.stream]))
                await response.aclose()
            except httpx2.HTTPError as exc:  # the call's failure, in its place: the calls after it still run
                bodies.append(exc)
            with anyio.fail_after(5):
                while settled and not all(settled(connection) for connection in idle_connections(transport)):
                    await asyncio.sleep(0)  # one turn of the loop: the connection reads what came meanwhile
    finally:
        await transport.aclose()
        server.close()
        await server.wait_closed()
    return bodies, connections


def run(handler: Handler, calls: int, settled: Settled | None = None) -> tuple[list[Any], int]:
    return anyio.run(serving, handler, calls, settled)


def test_calls_in_turn_share_one_kept_alive_connection() -> None:
    async def keep(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> bool:
        await answered(reader, writer)
        return True

    assert run(keep, 3) == ([b"call 0", b"call 1", b"call 2"], 1)


def test_an_answer_that_says_close_is_not_reused() -> None:
    async def close_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> bool:
        await answered(reader, writer, b"Connection: close\r\n")
        return False

    assert run(close_each, 3) == ([b"call 0", b"call 1", b"call 2"], 3)


def test_a_connection_the_server_closed_while_idle_is_not_used_again() -> None:
    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> bool:
        await answered(reader, writer)  # no Connection: close, yet the server hangs up after answering
        return False

    assert run(once, 3, lambda connection: connection.reader.at_eof()) == ([b"call 0", b"call 1", b"call 2"], 3)


def test_a_connection_with_bytes_nobody_asked_for_is_not_used_again() -> None:
    async def trailing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> bool:
        await answered(reader, writer)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")  # an answer to no request
        await writer.drain()
        return True

    unasked = lambda connection: bool(connection.reader._buffer)  # noqa: E731, SLF001
    assert run(trailing, 2, unasked) == ([b"call 0", b"call 1"], 2)


def test_a_broken_answer_is_httpxs_protocol_error_and_its_connection_is_not_used_again() -> None:
    async def broken_first(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> bool:
        if number > 1:
            await answered(reader, writer)
            return True
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        return True  # the server would go on: only the client can end this connection

    (failed, then), connections = run(broken_first, 2)
    assert isinstance(failed, httpx2.RemoteProtocolError)
    assert "both Content-Length and Transfer-Encoding" in str(failed)
    assert (then, connections) == (b"call 1", 2)  # the next call came on a new connection


def test_a_server_that_hangs_up_before_answering_is_a_protocol_error_in_httpcores_words() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> bool:
        await reader.readuntil(b"\r\n\r\n")
        return False

    (failed,), _ = run(hang_up, 1)
    assert isinstance(failed, httpx2.RemoteProtocolError)
    assert str(failed) == "Server disconnected without sending a response."


def test_a_refused_connection_is_httpxs_connect_error() -> None:
    async def call() -> Any:
        transport = LeanTransport(ssl.create_default_context())
        with anyio.fail_after(10):
            request = httpx2.Request("POST", "http://127.0.0.1:9/mcp", content=b"x")
            request.extensions["timeout"] = {"connect": 2.0, "read": 2.0, "write": 2.0, "pool": 2.0}
            try:
                return await transport.handle_async_request(request)
            finally:
                await transport.aclose()

    with pytest.raises(httpx2.ConnectError):
        anyio.run(call)
