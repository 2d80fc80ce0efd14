"""Pooled 2025-11-25 sessions: one SDK client session per upstream and event loop, kept open between calls.

A 2025-11-25 session costs an `initialize` exchange and a notification to open, and a DELETE to close: three
requests around every call when each call opens its own. Here a session is opened by the first call and shared
by the calls after it (the SDK's session takes concurrent requests).

- **Ownership.** Each session is held open by a task of its own, started with an empty context: the scopes of
  the SDK's task groups must be left by the task that entered them, and nothing of the first caller (its chain,
  its token) may stick to the session.
- **Per-call headers.** The depth, the conversation and a client-credentials token differ per call, and the HTTP
  client is shared. The SDK sends each request in its sender's context, so a call puts its headers in a context
  variable and `_PerCall` adds them to that request alone, and notes the HTTP error status the request got.
- **Closing.** A session is closed, and the next call opens a new one, after a failure of the transport (the
  connection, an unreadable answer, an HTTP error: the session may be gone), when its row changes, and when its
  event loop's pools close. A call that finds a reused session expired (HTTP 404: nothing was acted on) is sent
  once more on a new one.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_expose.upstream.discovery import UpstreamTarget
from mcp_expose.upstream.pool import fingerprint, pool
from mcp_expose.upstream.quiet_sdk import talking_to
from mcp_expose.upstream.transport import UpstreamRefused

logger = logging.getLogger("mcp_expose.upstream")


@dataclass(slots=True)
class CallState:
    """One call's own headers, and the HTTP error status its request got (None below 400)."""

    headers: dict[str, str]
    error_status: int | None = None
    # What the bounded transport refused of the answer (its size): the SDK's session only sees the stream end.
    refusal: UpstreamRefused | None = None


_call: contextvars.ContextVar[CallState | None] = contextvars.ContextVar("mcp_expose_upstream_call", default=None)


class _PerCall(httpx2.AsyncBaseTransport):
    """The pooled transport as a shared session sees it: each request gets its call's headers, and its call
    (or, while it opens, the session) learns the status; closing the session's client leaves the pool open."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, session: _Session) -> None:
        self.inner = inner
        self.session = session

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        state = _call.get()
        if state is not None:
            request.headers.update(state.headers)
        response = await self.inner.handle_async_request(request)
        if response.status_code >= 400 and request.method == "POST":
            (state if state is not None else self.session).error_status = response.status_code
        if state is not None:
            response.stream = _Noting(response.stream, state)
        return response

    async def aclose(self) -> None:
        return None


class _Noting(httpx2.AsyncByteStream):
    """A response body that notes on its call a refusal the transport raised while it was read."""

    def __init__(self, stream: Any, state: CallState) -> None:
        self.stream = stream
        self.state = state

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.stream:
                yield chunk
        except UpstreamRefused as refused:
            self.state.refusal = refused
            raise

    async def aclose(self) -> None:
        await self.stream.aclose()


@dataclass(eq=False)
class _Session:
    stamp: str
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    client: Client | None = None
    failure: BaseException | None = None
    error_status: int | None = None  # the status of a request of the session's own (initialize)
    used: int = 0
    task: asyncio.Task[None] | None = None


class LegacySessions:
    """The open sessions, by event loop (weakly, as the pools are) and server."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, _Session]] = (
            weakref.WeakKeyDictionary()
        )

    async def call(
        self,
        target: UpstreamTarget,
        headers: dict[str, str],
        send: Callable[[Client], Awaitable[types.CallToolResult]],
    ) -> tuple[types.CallToolResult | None, BaseException | None, int | None]:
        """`send` over `target`'s session: its result, or the exception and the HTTP error status it ended with.
        The session is closed after a failure of the transport; a reused one found expired is replaced once."""
        for attempt in range(2):
            session = await self._session(target)
            reused = session.used > 0
            session.used += 1
            if session.client is None:  # it did not open: its failure is this call's
                self._close(target.pk, session)
                return None, session.failure or RuntimeError("the session did not open"), session.error_status
            state = CallState(headers)
            token = _call.set(state)
            try:
                return await send(session.client), None, None
            except Exception as exc:  # noqa: BLE001  (the caller classifies it)
                if answered_by_upstream(exc, state.error_status):
                    return None, exc, None
                self._close(target.pk, session)
                if reused and state.error_status == 404 and attempt == 0:
                    continue  # the upstream forgot the session (a restart): nothing was acted on
                return None, state.refusal or exc, state.error_status
            finally:
                _call.reset(token)
        raise AssertionError("unreachable: the second attempt returns")

    async def _session(self, target: UpstreamTarget) -> _Session:
        sessions = self._sessions.setdefault(asyncio.get_running_loop(), {})
        stamp = fingerprint(target)
        session = sessions.get(target.pk)
        if session is not None and session.stamp != stamp:
            self._close(target.pk, session)
            session = None
        if session is None:
            session = _Session(stamp)
            sessions[target.pk] = session
            # An empty context: nothing of this first caller (its chain, its token) sticks to the session.
            session.task = asyncio.get_running_loop().create_task(_hold(session, target), context=contextvars.Context())
        await session.opened.wait()
        return session

    def _close(self, server: int, session: _Session) -> None:
        sessions = self._sessions.get(asyncio.get_running_loop(), {})
        if sessions.get(server) is session:
            del sessions[server]
        session.closing.set()

    async def aclose(self) -> int:
        """Close every session of the running loop, each waited for; how many there were."""
        sessions = self._sessions.pop(asyncio.get_running_loop(), {})
        for session in sessions.values():
            session.closing.set()
        tasks = [session.task for session in sessions.values() if session.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        return len(sessions)

    def open_count(self) -> int:
        """Sessions open in the running loop (for tests and the doctor)."""
        sessions = self._sessions.get(asyncio.get_running_loop(), {})
        return sum(1 for session in sessions.values() if session.client is not None)


def answered_by_upstream(exc: BaseException, status: int | None) -> bool:
    """Whether `exc` is an error the upstream answered over a working session (a JSON-RPC error, no HTTP error):
    the session is fine, and stays open."""
    from mcp import MCPError

    inner = exc
    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
        inner = inner.exceptions[0]
    return (
        isinstance(inner, MCPError)
        and status is None
        and inner.error.code not in (types.CONNECTION_CLOSED, types.PARSE_ERROR, types.REQUEST_TIMEOUT)
    )


async def _hold(session: _Session, target: UpstreamTarget) -> None:
    """Open the session, keep it open until it is closed, and close it from this same task. It holds its lease
    on the upstream's pool for as long: a pool replaced meanwhile closes after the session."""
    try:
        authorization = await target.authorization()
        timeout = httpx2.Timeout(target.call_timeout, connect=target.connect_timeout)
        with talking_to(target.name):
            async with (
                pool.leased(target) as transport,
                httpx2.AsyncClient(
                    transport=_PerCall(transport, session),
                    headers={**target.headers, **authorization},
                    timeout=timeout,
                    follow_redirects=False,
                ) as http,
                Client(streamable_http_client(target.url, http_client=http), mode="legacy") as client,
            ):
                session.client = client
                session.opened.set()
                await session.closing.wait()
    except Exception as exc:  # noqa: BLE001  (the waiting call classifies it)
        session.failure = exc
    finally:
        session.client = None
        session.opened.set()  # a call waiting on a session that never opened sees its failure


sessions = LegacySessions()
