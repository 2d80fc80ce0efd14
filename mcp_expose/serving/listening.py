"""`subscriptions/listen` (2026-07-28) within this process's limits: the SDK's handler, behind a count of the open
streams per caller, and the relay told who is listening."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError
from mcp_types import SubscriptionsListenRequestParams, SubscriptionsListenResult

from mcp_expose.core import telemetry
from mcp_expose.core.conf import get_settings
from mcp_expose.serving.capacity import CAPACITY_REACHED, Slots, caller_key
from mcp_expose.serving.events import audience_of

# Every listen handler of this process, for ending the streams of one bus when its server stops.
_handlers: weakref.WeakSet[BoundedListen] = weakref.WeakSet()


def _open_streams() -> list[tuple[float, dict[str, Any]]]:
    return [(float(sum(handler.slots.total for handler in list(_handlers))), {})]


telemetry.observe(
    "mcp_expose.listen.streams",
    _open_streams,
    unit="{stream}",
    description="Open subscriptions/listen streams in this process.",
)


class BoundedListen:
    """Serves each listen stream with the SDK's `ListenHandler` once the caller has room: at most
    `MAX_LISTEN_STREAMS` in the process and `MAX_LISTEN_STREAMS_PER_CALLER` for one caller, refused with
    `CAPACITY_REACHED` (retryable) past either. An open stream counts as a listener for the change relay."""

    def __init__(self, bus: Any, resolve: Callable[[ServerRequestContext[Any]], Awaitable[tuple[Any, Any]]]) -> None:
        conf = get_settings()
        self.slots = Slots("listen streams", conf.MAX_LISTEN_STREAMS, conf.MAX_LISTEN_STREAMS_PER_CALLER)
        self.audience = audience_of(bus)
        self.resolve = resolve
        # The SDK's own limit (answered as an internal error) is never the one reached first.
        self.handler = ListenHandler(bus, max_subscriptions=conf.MAX_LISTEN_STREAMS or sys.maxsize)
        self.bus = bus
        _handlers.add(self)

    async def __call__(
        self, ctx: ServerRequestContext[Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        principal, catalog = await self.resolve(ctx)
        client = ctx.request.client if ctx.request is not None else None
        key = caller_key(principal, client.host if client is not None else None)
        refusal = self.slots.take(key, principal.label)
        if refusal is not None:
            raise MCPError(code=CAPACITY_REACHED, message=refusal.message, data=refusal.error_data())
        self.audience.joined(catalog.revision)
        try:
            return await self.handler(ctx, params)
        finally:
            self.audience.left()
            self.slots.give_back(key)


def end_streams(bus: Any) -> int:
    """End every open listen stream on `bus` gracefully: each sends its `SubscriptionsListenResult` as its last
    frame. Returns how many were open. Call on the loop that serves them."""
    handlers = [handler for handler in _handlers if handler.bus is bus]
    open_streams = sum(handler.slots.total for handler in handlers)
    for handler in handlers:
        handler.handler.close()
    return open_streams
