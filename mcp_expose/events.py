"""Tell open `subscriptions/listen` streams (and stateful 2025-11-25 sessions) that the catalog changed, in
this process and in the others.

Each server process runs one `ChangeRelay`. A change (an exposure row or a prompt
saved, after commit) is announced through the channel layer's group when a shared
layer is configured (Redis), so every process's relay hears it; with no layer, or
the in-memory one, it is delivered straight to this process's relays.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from functools import partial
from typing import Any

import anyio
from asgiref.sync import async_to_sync

logger = logging.getLogger("mcp_expose.events")

GROUP = "mcp_expose.catalog"
RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 30.0
MESSAGE_TYPE = "mcp_expose.catalog_changed"
RESOURCE_MESSAGE_TYPE = "mcp_expose.resource_updated"

_relays: weakref.WeakSet[ChangeRelay] = weakref.WeakSet()


def shared_layer() -> Any:
    """The channel layer when it spans processes; None for no layer or the in-memory one."""
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    layer = get_channel_layer()
    return None if layer is None or isinstance(layer, InMemoryChannelLayer) else layer


class ChangeRelay:
    """Delivers catalog changes to this process's subscription bus."""

    def __init__(self, bus: Any, sessions: Any = None) -> None:
        self.bus = bus
        # Stateful 2025-11-25 sessions (`sessions.SessionMemory`), told on their standing streams.
        self.sessions = sessions
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self) -> None:
        """Listen to the channel layer's group (or just wait for direct deliveries) until cancelled.

        One channel serves the whole run, so messages sent to it while a read failed are still waiting in the
        layer when the next read starts. A read that fails after the layer answered is retried at once (with
        Redis, a blocking pop whose socket timeout races the pop's own timeout fails that way); a layer that
        cannot be reached is retried with backoff, logged once when it is lost and once when it is back. It
        never takes the server down.
        """
        from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

        self._events = (ToolsListChanged(), PromptsListChanged(), ResourcesListChanged())
        self._loop = asyncio.get_running_loop()
        _relays.add(self)
        layer = shared_layer()
        if layer is None:
            await anyio.sleep_forever()
        channel = None
        try:
            delay, lost = RETRY_SECONDS, False
            while True:
                try:
                    if channel is None:
                        channel = await layer.new_channel()
                    await layer.group_add(GROUP, channel)  # again after a failure: membership is cheap to renew
                except Exception as exc:  # noqa: BLE001  (an outage of the layer must not end the serving)
                    if not lost:
                        logger.warning("Lost the channel layer (%s); listening again with backoff", type(exc).__name__)
                        lost = True
                    await anyio.sleep(delay)
                    delay = min(delay * 2, MAX_RETRY_SECONDS)
                    continue
                if lost:
                    logger.warning("The channel layer is back; listening again")
                delay, lost = RETRY_SECONDS, False
                reading_since = time.monotonic()
                try:
                    await self._listen(layer, channel)
                except Exception as exc:  # noqa: BLE001  (retried at once: the layer answered a moment ago)
                    logger.debug("Reading the channel layer failed (%s); reading again", type(exc).__name__)
                    if time.monotonic() - reading_since < RETRY_SECONDS:
                        await anyio.sleep(RETRY_SECONDS)  # failing at once, not after a wait: no busy loop
        finally:
            if channel is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await layer.group_discard(GROUP, channel)
                    except Exception:  # noqa: BLE001  (the layer is what failed; the group entry expires by itself)
                        logger.warning("Could not leave the channel layer group cleanly", exc_info=True)

    async def _listen(self, layer: Any, channel: str) -> None:
        while True:
            message = await layer.receive(channel)
            if message.get("type") == MESSAGE_TYPE:
                await self.deliver()
            elif message.get("type") == RESOURCE_MESSAGE_TYPE and isinstance(message.get("uri"), str):
                await self.deliver_resource(message["uri"])

    async def deliver(self) -> None:
        for event in self._events:
            await self.bus.publish(event)
        if self.sessions is not None:
            await self.sessions.announce_lists_changed()

    async def deliver_resource(self, uri: str) -> None:
        from mcp.server.subscriptions import ResourceUpdated

        await self.bus.publish(ResourceUpdated(uri=uri))
        if self.sessions is not None:
            await self.sessions.announce_resource_updated(uri)

    def deliver_soon(self, uri: str | None = None) -> None:
        """From any thread: schedule a delivery (of a list change, or of `uri`'s update) on the relay's loop."""
        if self._loop is not None and not self._loop.is_closed():
            delivery = self.deliver if uri is None else partial(self.deliver_resource, uri)
            self._loop.call_soon_threadsafe(lambda: self._loop.create_task(delivery()))  # type: ignore[union-attr]


def announce_catalog_change() -> None:
    """Sync (called after a commit): every process's listeners learn that the lists changed."""
    _announce({"type": MESSAGE_TYPE}, None)


def resource_updated(uri: str) -> None:
    """Tell clients subscribed to `uri` that it changed, in every server process.

    Call it when the data behind a resource changes (from a `post_save` receiver, say; in a
    transaction, via `transaction.on_commit`). Subscribers are 2026-07-28 `subscriptions/listen`
    streams that named the URI and 2025-11-25 sessions that sent `resources/subscribe` for it.
    """
    if not isinstance(uri, str) or not uri:
        raise ValueError("resource_updated() takes the resource's URI, a non-empty string.")
    _announce({"type": RESOURCE_MESSAGE_TYPE, "uri": uri}, uri)


def _announce(message: dict[str, Any], uri: str | None) -> None:
    layer = shared_layer()
    if layer is not None:
        try:
            async_to_sync(layer.group_send)(GROUP, message)
            return
        except Exception:  # noqa: BLE001  (a layer outage must not fail the caller's save)
            logger.exception("Could not announce a change through the channel layer; telling this process only")
    for relay in list(_relays):
        relay.deliver_soon(uri)
