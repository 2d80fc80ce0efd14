"""Connections to upstreams, pooled per process, event loop and server: one HTTP connection pool each.

A call opens the SDK's client over a pooled transport, so keep-alive connections are reused and nothing is
negotiated again on the 2026-07-28 era. The pool is keyed by the target's fingerprint too, so that a changed URL,
header or timeout (a new catalog revision) starts a new pool rather than reusing one set up for the old row.
Closing the pools at shutdown closes each alone: one that fails to close is logged and the rest still close.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import weakref
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


@dataclass(slots=True)
class _Pooled:
    fingerprint: str
    transport: BoundedTransport


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
    under WSGI) takes its pools with it instead of leaving them behind."""

    def __init__(self) -> None:
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, _Pooled]] = (
            weakref.WeakKeyDictionary()
        )

    def of_this_loop(self) -> dict[int, _Pooled]:
        return self._pools.setdefault(asyncio.get_running_loop(), {})

    def client(self, target: UpstreamTarget, extra_headers: dict[str, str]) -> tuple[httpx2.AsyncClient, _Shared]:
        """An HTTP client for one call to `target` over its pooled connections, with this call's own headers
        (the depth and conversation) beside the target's, and the transport that saw its answers."""
        pools = self.of_this_loop()
        stamp = fingerprint(target)
        pooled = pools.get(target.pk)
        if pooled is None or pooled.fingerprint != stamp:
            if pooled is not None:
                # The row changed: the old connections close once the calls already under way are done with them
                # (their responses hold their own connections; the pool only stops handing them out).
                _closing.add(asyncio.get_running_loop().create_task(_close(pooled.transport, target.name)))
            pooled = _Pooled(stamp, BoundedTransport(target.name, max_bytes=get_settings().UPSTREAM_MAX_RESULT_BYTES))
            pools[target.pk] = pooled
        timeout = httpx2.Timeout(target.call_timeout, connect=target.connect_timeout)
        shared = _Shared(pooled.transport)
        client = httpx2.AsyncClient(
            transport=shared, headers={**target.headers, **extra_headers}, timeout=timeout, follow_redirects=False
        )
        return client, shared

    async def aclose(self) -> int:
        """Close every pool of the running loop; how many closed. Survives each failure (logged, not raised)."""
        pools = self._pools.pop(asyncio.get_running_loop(), {})
        closed = 0
        for server, pooled in pools.items():
            closed += await _close(pooled.transport, str(server))
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
