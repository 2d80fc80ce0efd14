"""The upstream fast path's HTTP: one request with its body in hand, one answer, over kept-alive HTTP/1.1.

httpcore's pool, locks and anyio layers cost a plain proxied call more CPU than our whole local echo does (a
py-spy profile of the gateway under load: 40% of its event loop). A plain call needs none of them: this
transport keeps idle connections per origin, and writes the request and reads the answer with
`http1_framing` (strict, bounded) on asyncio's own streams. It does nothing else: no HTTP/2, no proxies, no
streamed uploads, no compression (nothing here asks for it).

It is an httpx2 transport, so `BoundedTransport` puts the same SSRF guard, pin, byte bounds and TLS context in
front of it as in front of httpx's, and the SDK's path keeps httpx's own. Its failures are httpx2's exception
classes with httpcore's words, so a caller cannot tell which of the two carried a call; the differential test
(`tests/test_upstream_fast_call.py`) holds that over the hostile corpus.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2

from mcp_expose.upstream.http1_framing import (
    MAX_HEAD_BYTES,
    FramingError,
    ResponseHead,
    read_body,
    read_head,
    request_head,
)

# The request extension that sends a request this way (`BoundedTransport` reads it).
LEAN = "mcp_expose.lean_http"
IDLE_EXPIRY = 5.0  # seconds an idle connection is kept (httpx's default keep-alive expiry)
MAX_IDLE = 20  # idle connections kept per origin (httpx's default)
MAX_CONNECTIONS = 100  # connections open at once per origin (httpx's default); more calls wait for one
CLOSE_WAIT = 1.0  # seconds a closing connection may take before it is aborted

Origin = tuple[str, str, int, str]


@dataclass(eq=False, slots=True)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def reusable(self, now: float) -> bool:
        """Within its expiry, and not closed by the other end meanwhile (asyncio has read its FIN, if one
        came: the stream reads while the connection waits), with nothing unasked for in its buffer."""
        return (
            now - self.idle_since < IDLE_EXPIRY
            and not self.reader.at_eof()
            and not self.writer.is_closing()
            and not self.reader._buffer  # type: ignore[attr-defined]  # noqa: SLF001  (bytes unasked for: not clean)
        )

    async def closed(self) -> None:
        """Closed, and waited for: a socket closed in a loop that then ends is otherwise never released. An
        upstream that leaves TLS's closing exchange unanswered is cut off after CLOSE_WAIT seconds."""
        self.writer.close()
        try:
            async with asyncio.timeout(CLOSE_WAIT):
                await self.writer.wait_closed()
        except TimeoutError:
            self.writer.transport.abort()
        except Exception:  # noqa: BLE001, S110  (whatever the connection died of, it is closed now)
            pass


class LeanTransport(httpx2.AsyncBaseTransport):
    """Kept-alive HTTP/1.1 connections per origin (scheme, address, port, TLS name), for requests whose body is
    in memory. Honours the request's `timeout` extension (connect, read, write, pool) and `sni_hostname`."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self._ssl = ssl_context
        self._idle: dict[Origin, list[_Connection]] = {}
        self._slots: dict[Origin, asyncio.Semaphore] = {}
        self._open: set[_Connection] = set()
        self._closing: set[asyncio.Task[None]] = set()  # kept until done (the loop holds tasks weakly)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url.scheme}://'.")
        timeouts = request.extensions.get("timeout", {})
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80), _tls_name(request))
        slots = self._slots.setdefault(origin, asyncio.Semaphore(MAX_CONNECTIONS))
        try:
            async with asyncio.timeout(timeouts.get("pool")):
                await slots.acquire()
        except TimeoutError:
            raise httpx2.PoolTimeout("Timed out waiting for a connection from the pool.") from None
        try:
            connection = self._idle_connection(origin) or await self._connect(origin, timeouts.get("connect"))
            self._open.add(connection)
            head = await self._exchange(connection, request, timeouts)
        except BaseException:
            slots.release()
            raise
        body = _Body(self, origin, connection, head, slots, timeouts.get("read"))
        extensions = {"http_version": b"HTTP/1.1", "reason_phrase": head.reason}
        return httpx2.Response(head.status, headers=head.headers, stream=body, extensions=extensions)

    async def aclose(self) -> None:
        open_now = {*self._open, *(connection for idle in self._idle.values() for connection in idle)}
        self._open.clear()
        self._idle.clear()
        for connection in open_now:
            await connection.closed()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def _idle_connection(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.reusable(now):
                return connection
            self._forget(connection)
        return None

    async def _connect(self, origin: Origin, timeout: float | None) -> _Connection:
        scheme, host, port, tls_name = origin
        secure = scheme == "https"
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host,
                    port,
                    ssl=self._ssl if secure else None,
                    server_hostname=tls_name if secure else None,
                    limit=MAX_HEAD_BYTES,
                )
        except TimeoutError:
            raise httpx2.ConnectTimeout("timed out") from None
        except OSError as exc:  # ssl.SSLError is an OSError: its words name the certificate's fault
            raise httpx2.ConnectError(str(exc)) from None
        return _Connection(reader, writer)

    async def _exchange(
        self, connection: _Connection, request: httpx2.Request, timeouts: dict[str, float | None]
    ) -> ResponseHead:
        """Write `request` and read its answer's head; httpx2's errors, in httpcore's words."""
        content = await request.aread()  # in memory already: the fast path builds it whole
        try:
            try:
                head = request_head(request.method.encode(), request.url.raw_path, request.headers.raw)
            except FramingError as exc:
                raise httpx2.LocalProtocolError(str(exc)) from None
            try:
                connection.writer.write(head + content)
                async with asyncio.timeout(timeouts.get("write")):
                    await connection.writer.drain()
            except TimeoutError:
                raise httpx2.WriteTimeout("timed out") from None
            except OSError as exc:
                raise httpx2.WriteError(str(exc)) from None
            return await _framed(read_head(connection.reader, timeouts.get("read")))
        except BaseException:
            self._forget(connection)
            raise

    def _finished(self, origin: Origin, connection: _Connection, reusable: bool) -> None:
        """An answer read to its end: the connection goes back to the idle ones when it may carry another."""
        idle = self._idle.setdefault(origin, [])
        if reusable and len(idle) < MAX_IDLE:
            connection.idle_since = time.monotonic()
            idle.append(connection)
        else:
            self._forget(connection)

    def _forget(self, connection: _Connection) -> None:
        """Close a connection that cannot carry another request (`aclose` waits for the ones still closing)."""
        self._open.discard(connection)
        connection.writer.close()
        task = asyncio.get_running_loop().create_task(connection.closed())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


async def _framed(reading: Any) -> Any:
    """What `reading` gives, with the framing's and the socket's failures as httpx2's (httpcore's classes)."""
    try:
        return await reading
    except TimeoutError:
        raise httpx2.ReadTimeout("timed out") from None
    except FramingError as exc:  # `Closed` included: httpcore's words for it are its message
        raise httpx2.RemoteProtocolError(str(exc)) from None
    except OSError as exc:
        raise httpx2.ReadError(str(exc)) from None


class _Body(httpx2.AsyncByteStream):
    """An answer's body as it arrives; its connection is kept for the next call once the body was read whole,
    and closed when it was left unread or broke."""

    def __init__(
        self,
        transport: LeanTransport,
        origin: Origin,
        connection: _Connection,
        head: ResponseHead,
        slots: asyncio.Semaphore,
        timeout: float | None,
    ) -> None:
        self.transport = transport
        self.origin = origin
        self.connection = connection
        self.head = head
        self.slots = slots
        self.timeout = timeout
        self.done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.done:
            return
        chunks = read_body(self.connection.reader, self.head, self.timeout)
        try:
            while True:
                chunk = await _framed(anext(chunks, None))
                if chunk is None:
                    break
                yield chunk
        except BaseException:
            await self.aclose()
            raise
        self.transport._finished(self.origin, self.connection, self.head.reusable)
        self._release()

    async def aclose(self) -> None:
        if not self.done:
            self.transport._forget(self.connection)
            self._release()

    def _release(self) -> None:
        self.done = True
        self.slots.release()


def _tls_name(request: httpx2.Request) -> str:
    """The name the TLS handshake asks for and checks: the URL's host, or the pinned request's original one."""
    return request.extensions.get("sni_hostname") or request.url.host
