"""HTTP/1.1 framing for the upstream fast path: a request's head written, an answer's head and body read.

Strict on purpose: what an upstream sends is untrusted, and anything this cannot frame with certainty is a
`FramingError` (the call then fails as a broken answer), never a guess. An answer's head is at most
`MAX_HEAD_BYTES`; a body is framed by `Content-Length` (one value, or equal values), by `Transfer-Encoding:
chunked` alone, or by the connection's end; both at once, another coding, a folded header, a control character
or a chunk line past `MAX_CHUNK_LINE` are refused. Its size is bounded above this module (`transport._Bounded`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from mcp_expose.core.errors import McpExposeError

MAX_HEAD_BYTES = 100 * 1024  # an answer's status line and headers (httpcore's bound)
MAX_CHUNK_LINE = 4096  # a chunk's size line with its extensions, and each trailer line
READ_SIZE = 64 * 1024  # bytes asked of the socket per read of a body

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # controls but the tab
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9]{2})(?: ([^\x00-\x08\x0a-\x1f\x7f]*))?")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?")


INCOMPLETE_CHUNKED = "peer closed connection without sending complete message body: incomplete chunked read"


class FramingError(McpExposeError):
    """The other end's bytes are not an HTTP/1.1 answer this can frame; the message says what broke."""


class Closed(FramingError):
    """The connection ended before an answer began."""


@dataclass(frozen=True, slots=True)
class ResponseHead:
    """An answer's status, headers (names lowercased, in order) and how its body is framed: `length` bytes
    (`chunked` False, `length` not None), chunked, or up to the connection's end (`length` None)."""

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    length: int | None
    chunked: bool
    reusable: bool  # the connection may carry another request once the body was read whole


def request_head(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """A request's head, its headers checked: a name is a token, a value holds no line break or control."""
    if not _TOKEN.fullmatch(method) or not target.startswith(b"/") or _BAD_VALUE.search(target) or b" " in target:
        raise FramingError("the request line cannot be written")
    lines = [method + b" " + target + b" HTTP/1.1"]
    for name, value in headers:
        if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
            raise FramingError(f"the request header {name[:64]!r} cannot be written")
        lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def read_head(reader: asyncio.StreamReader, timeout: float | None) -> ResponseHead:
    """The answer's head, after any 1xx interim answers; `Closed` when nothing came before the end."""
    while True:
        try:
            async with asyncio.timeout(timeout):
                raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise Closed("Server disconnected without sending a response.") from None
            raise FramingError("the connection closed in the middle of the answer's head") from None
        except asyncio.LimitOverrunError:
            raise FramingError(f"the answer's head is over {MAX_HEAD_BYTES} bytes") from None
        head = parse_head(raw)
        if head.status >= 200:
            return head
        if head.status == 101:
            raise FramingError("the upstream switched protocols")


def parse_head(raw: bytes) -> ResponseHead:
    """A head as read (ending in an empty line) parsed, and its body's framing decided."""
    lines = raw[:-4].split(b"\r\n")
    status_line = _STATUS_LINE.fullmatch(lines[0])
    if status_line is None:
        raise FramingError("the answer's status line is not HTTP/1.x")
    minor, status, reason = status_line.group(1), int(status_line.group(2)), status_line.group(3) or b""
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):  # a folded line starts with a space: not a token either
            raise FramingError("the answer has a header line that is not a header")
        value = value.strip(b" \t")
        if _BAD_VALUE.search(value):
            raise FramingError("a header of the answer holds a control character")
        headers.append((name.lower(), value))
    lengths = {value for name, value in headers if name == b"content-length"}
    codings = [
        token.strip().lower()
        for name, value in headers
        if name == b"transfer-encoding"
        for token in value.split(b",")
        if token.strip()
    ]
    connection = {
        token.strip().lower() for name, value in headers if name == b"connection" for token in value.split(b",")
    }
    reusable = b"close" not in connection and (minor == b"1" or b"keep-alive" in connection)
    if status < 200 or status in (204, 304):
        return ResponseHead(status, reason, headers, 0, False, reusable)
    if codings:
        if lengths:
            raise FramingError("the answer is framed by both Content-Length and Transfer-Encoding")
        if codings != [b"chunked"]:
            raise FramingError("the answer has a transfer coding other than chunked")
        return ResponseHead(status, reason, headers, None, True, reusable)
    if lengths:
        if len(lengths) > 1 or not all(value.isdigit() and len(value) <= 18 for value in lengths):
            raise FramingError("the answer's Content-Length is not one number")
        return ResponseHead(status, reason, headers, int(next(iter(lengths))), False, reusable)
    return ResponseHead(status, reason, headers, None, False, False)


async def read_body(reader: asyncio.StreamReader, head: ResponseHead, timeout: float | None) -> AsyncIterator[bytes]:
    """The body's bytes as they arrive, each read within `timeout`; `FramingError` when the connection ends
    before the framing says the body does."""
    if head.chunked:
        async for chunk in _chunks(reader, timeout):
            yield chunk
        return
    left = head.length
    while left is None or left > 0:
        async with asyncio.timeout(timeout):
            data = await reader.read(READ_SIZE if left is None else min(left, READ_SIZE))
        if not data:
            if left is None:
                return
            raise FramingError("peer closed connection without sending complete message body: incomplete read")
        if left is not None:
            left -= len(data)
        yield data


async def _chunks(reader: asyncio.StreamReader, timeout: float | None) -> AsyncIterator[bytes]:
    while True:
        line = await _line(reader, timeout)
        size = _CHUNK_SIZE.fullmatch(line)
        if size is None:
            raise FramingError("a chunk's size line is not a size")
        left = int(size.group(1), 16)
        if left == 0:
            while await _line(reader, timeout):  # trailers, each bounded, up to the empty line
                pass
            return
        while left:
            async with asyncio.timeout(timeout):
                data = await reader.read(min(left, READ_SIZE))
            if not data:
                raise FramingError(INCOMPLETE_CHUNKED)
            left -= len(data)
            yield data
        if await _line(reader, timeout):
            raise FramingError("a chunk is longer than its size says")


async def _line(reader: asyncio.StreamReader, timeout: float | None) -> bytes:
    """One CRLF-ended line of a chunked body, without its end; at most MAX_CHUNK_LINE bytes."""
    try:
        async with asyncio.timeout(timeout):
            line = await reader.readuntil(b"\r\n")
    except asyncio.IncompleteReadError:
        raise FramingError(INCOMPLETE_CHUNKED) from None
    except asyncio.LimitOverrunError:
        raise FramingError("a chunk's size line is too long") from None
    if len(line) > MAX_CHUNK_LINE + 2:
        raise FramingError("a chunk's size line is too long")
    return line[:-2]
