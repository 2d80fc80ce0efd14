"""Connections to upstreams, pooled per process, event loop and server: one HTTP connection pool each.

A call leases its upstream's pooled transport, so keep-alive connections are reused and nothing is negotiated
again on the 2026-07-28 era. The pool is keyed by the target's fingerprint too, so that a changed URL, header or
timeout (a new catalog revision) starts a new pool rather than reusing one set up for the old row; the old one
closes when the calls that hold it are done.
Closing the pools at shutdown closes each alone: one that fails to close is logged and the rest still close.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx2

from mcp_expose.core.conf import get_settings
from mcp_expose.upstream.discovery import UpstreamTarget
from mcp_expose.upstream.transport import BoundedTransport

logger = logging.getLogger("mcp_expose.upstream")


class _Shared(httpx2.AsyncBaseTransport):
    """The pool's transport as one call's client sees it: closing that client leaves the pool open, and the
    HTTP error status the upstream answered this call with is kept for the call's error message."""

    def __init__(self, inner: BoundedTransport) -> None:
        self.inner = inner
        self.error_status: int | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if response.status_code >= 400 and request.method == "POST":
            self.error_status = response.status_code
        return response

    async def aclose(self) -> None:
        return None


@dataclass(slots=True, eq=False)
class _Pooled:
    fingerprint: str
    transport: BoundedTransport
    server: str
    target: UpstreamTarget  # the row it was made for: the same object again needs no fingerprint
    users: int = 0  # calls (and sessions) holding it now
    retired: bool = False  # replaced by a pool for the changed row: closed when its last user is done


def fingerprint(target: UpstreamTarget) -> str:
    """What identifies a target's connection setup (its secrets hashed, never kept in the key as they are)."""
    parts = [
        target.url,
        target.protocol,
        target.connect_timeout,
        target.call_timeout,
        sorted(target.headers.items()),
        repr(target.oauth) if target.oauth is None else [target.oauth.token_url, target.oauth.client_id],
    ]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]


class UpstreamPool:
    """Pools by event loop, weakly: a loop that ends (`async_to_sync` makes one per call where no loop runs, as
    under WSGI) takes its pools with it instead of leaving them behind.

    A pool is used under a lease (`leased`): a pool replaced because its row changed stops being handed out, and
    closes when the last call that holds it is done, never under a call still reading from it."""

    def __init__(self) -> None:
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, _Pooled]] = (
            weakref.WeakKeyDictionary()
        )
        self._retired: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, set[_Pooled]] = weakref.WeakKeyDictionary()

    def of_this_loop(self) -> dict[int, _Pooled]:
        return self._pools.setdefault(asyncio.get_running_loop(), {})

    @asynccontextmanager
    async def leased(self, target: UpstreamTarget) -> AsyncIterator[BoundedTransport]:
        """`target`'s pooled transport in this event loop, held for the block: made on first use, and again
        when the row changed (the old one then closes once its last holder is done)."""
        pooled = self._current(target)
        pooled.users += 1
        try:
            yield pooled.transport
        finally:
            pooled.users -= 1
            if pooled.retired and pooled.users == 0:
                self._close_soon(pooled)

    def http_client(
        self, target: UpstreamTarget, transport: BoundedTransport, extra_headers: dict[str, str]
    ) -> tuple[httpx2.AsyncClient, _Shared]:
        """An HTTP client for one call to `target` over `transport` (leased), with this call's own headers (the
        depth and conversation) beside the target's, and the wrapper that saw its answers."""
        timeout = httpx2.Timeout(target.call_timeout, connect=target.connect_timeout)
        shared = _Shared(transport)
        client = httpx2.AsyncClient(
            transport=shared, headers={**target.headers, **extra_headers}, timeout=timeout, follow_redirects=False
        )
        return client, shared

    def _current(self, target: UpstreamTarget) -> _Pooled:
        pools = self.of_this_loop()
        pooled = pools.get(target.pk)
        if pooled is not None and pooled.target is target:
            return pooled
        stamp = fingerprint(target)
        if pooled is None or pooled.fingerprint != stamp:
            if pooled is not None:
                pooled.retired = True
                if pooled.users == 0:
                    self._close_soon(pooled)
                else:
                    self._retired.setdefault(asyncio.get_running_loop(), set()).add(pooled)
            transport = BoundedTransport(target.name, max_bytes=get_settings().UPSTREAM_MAX_RESULT_BYTES)
            pooled = _Pooled(stamp, transport, target.name, target)
            pools[target.pk] = pooled
        else:
            pooled.target = target
        return pooled

    def _close_soon(self, pooled: _Pooled) -> None:
        loop = asyncio.get_running_loop()
        self._retired.get(loop, set()).discard(pooled)
        _closing.add(loop.create_task(_close(pooled.transport, pooled.server)))

    async def aclose(self) -> int:
        """Close every pool of the running loop, replaced ones still held included; how many closed. Survives
        each failure (logged, not raised)."""
        loop = asyncio.get_running_loop()
        pools = [*self._pools.pop(loop, {}).values(), *self._retired.pop(loop, set())]
        closed = 0
        for pooled in pools:
            closed += await _close(pooled.transport, pooled.server)
        return closed


# Closing tasks, kept until done (the event loop holds only weak references to its tasks).
_closing: set[asyncio.Task[int]] = set()


async def _close(transport: BoundedTransport, server: str) -> int:
    task = asyncio.current_task()
    try:
        await transport.aclose()
    except Exception as exc:  # noqa: BLE001  (shutdown goes on with the other pools)
        logger.warning("Closing the connections to upstream %s failed: %s", server, type(exc).__name__)
        return 0
    finally:
        _closing.discard(task)
    return 1


pool = UpstreamPool()
