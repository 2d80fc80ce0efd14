"""Tell open `subscriptions/listen` streams that the catalog changed, in this process and in the others.

Each server process runs one `ChangeRelay`. A change (an exposure row or a prompt
saved, after commit) is announced through the channel layer's group when a shared
layer is configured (Redis), so every process's relay hears it; with no layer, or
the in-memory one, it is delivered straight to this process's relays.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

import anyio
from asgiref.sync import async_to_sync

logger = logging.getLogger("mcp_expose.events")

GROUP = "mcp_expose.catalog"
RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 30.0
MESSAGE_TYPE = "mcp_expose.catalog_changed"

_relays: weakref.WeakSet[ChangeRelay] = weakref.WeakSet()


def shared_layer() -> Any:
    """The channel layer when it spans processes; None for no layer or the in-memory one."""
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    layer = get_channel_layer()
    return None if layer is None or isinstance(layer, InMemoryChannelLayer) else layer


class ChangeRelay:
    """Delivers catalog changes to this process's subscription bus."""

    def __init__(self, bus: Any) -> None:
        self.bus = bus
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self) -> None:
        """Listen to the channel layer's group (or just wait for direct deliveries) until cancelled.

        A failing channel layer is logged and retried with backoff; it never takes the server down.
        """
        from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

        self._events = (ToolsListChanged(), PromptsListChanged(), ResourcesListChanged())
        self._loop = asyncio.get_running_loop()
        _relays.add(self)
        layer = shared_layer()
        if layer is None:
            await anyio.sleep_forever()
        delay = RETRY_SECONDS
        while True:
            try:
                await self._listen(layer)
            except Exception:  # noqa: BLE001  (an outage of the layer must not end the process's serving)
                logger.exception("Lost the channel layer; listening again in %.0f s", delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)

    async def _listen(self, layer: Any) -> None:
        channel = await layer.new_channel()
        await layer.group_add(GROUP, channel)
        try:
            while True:
                message = await layer.receive(channel)
                if message.get("type") == MESSAGE_TYPE:
                    await self.deliver()
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await layer.group_discard(GROUP, channel)
                except Exception:  # noqa: BLE001  (the layer is what failed; the group entry expires by itself)
                    logger.warning("Could not leave the channel layer group cleanly", exc_info=True)

    async def deliver(self) -> None:
        for event in self._events:
            await self.bus.publish(event)

    def deliver_soon(self) -> None:
        """From any thread: schedule a delivery on the relay's event loop."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(lambda: self._loop.create_task(self.deliver()))  # type: ignore[union-attr]


def announce_catalog_change() -> None:
    """Sync (called after a commit): every process's listeners learn that the lists changed."""
    layer = shared_layer()
    if layer is not None:
        try:
            async_to_sync(layer.group_send)(GROUP, {"type": MESSAGE_TYPE})
            return
        except Exception:  # noqa: BLE001  (a layer outage must not fail the admin's save)
            logger.exception("Could not announce a catalog change through the channel layer; telling this process only")
    for relay in list(_relays):
        relay.deliver_soon()
