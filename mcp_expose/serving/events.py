"""Tell open `subscriptions/listen` streams (and stateful 2025-11-25 sessions) that the catalog changed, in
this process and in the others, whoever changed it.

Each server process runs one `ChangeRelay`. While the process has listeners, the relay reads the catalog
revision every `LISTEN_REVISION_POLL_SECONDS` and tells them when it moved: that is what makes a change made
anywhere (the admin, a shell, `mcp_sync`, a cron job, a migration) reach them. A change saved in a serving
process is also announced at once, through the channel layer's group when a shared layer is configured (Redis),
or straight to this process's relays without one; the relay remembers the revisions it announced, so a
listener hears of one change once, whichever way it came first.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import deque
from functools import partial
from typing import Any

import anyio
from asgiref.sync import async_to_sync

from mcp_expose.core.db import in_worker_thread

logger = logging.getLogger("mcp_expose.events")

GROUP = "mcp_expose.catalog"
RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 30.0
MESSAGE_TYPE = "mcp_expose.catalog_changed"
RESOURCE_MESSAGE_TYPE = "mcp_expose.resource_updated"
# Revisions remembered as announced: a change seen by the watcher and by the channel layer is told once.
REMEMBERED_REVISIONS = 16

_relays: weakref.WeakSet[ChangeRelay] = weakref.WeakSet()
_audiences: weakref.WeakKeyDictionary[Any, Audience] = weakref.WeakKeyDictionary()


def shared_layer() -> Any:
    """The channel layer when it spans processes; None for no layer or the in-memory one."""
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    layer = get_channel_layer()
    return None if layer is None or isinstance(layer, InMemoryChannelLayer) else layer


class Audience:
    """This process's listeners on one subscription bus, as far as the relay needs to know them: how many listen
    streams are open, and the catalog revisions they were told of or started at (newest last)."""

    def __init__(self) -> None:
        self.streams = 0
        self.heard: deque[str] = deque(maxlen=REMEMBERED_REVISIONS)

    def joined(self, revision: str | None) -> None:
        """A listener opened, served at `revision`: what it knows is news to no one."""
        self.streams += 1
        self.started_at(revision)

    def left(self) -> None:
        self.streams -= 1

    def started_at(self, revision: str | None) -> None:
        """A listener knows the catalog as of `revision`; the first one after none sets what counts as news."""
        if revision is not None and not self.heard:
            self.heard.append(revision)


def audience_of(bus: Any) -> Audience:
    """The listeners on `bus`: the listen handler and the sessions count them in, the relay reads them."""
    audience = _audiences.get(bus)
    if audience is None:
        audience = _audiences[bus] = Audience()
    return audience


class ChangeRelay:
    """Delivers catalog changes to this process's subscription bus."""

    def __init__(self, bus: Any, sessions: Any = None) -> None:
        self.bus = bus
        # Stateful 2025-11-25 sessions (`sessions.SessionMemory`), told on their standing streams.
        self.sessions = sessions
        self.audience = audience_of(bus)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._layer_state = "local"  # no shared layer; "ok" or "unavailable" while following one

    async def run(self) -> None:
        """Watch the catalog revision while anyone listens, and listen to the channel layer, until cancelled."""
        from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

        from mcp_expose.core.conf import get_settings

        self._events = (ToolsListChanged(), PromptsListChanged(), ResourcesListChanged())
        self._loop = asyncio.get_running_loop()
        _relays.add(self)
        layer = shared_layer()
        async with anyio.create_task_group() as group:
            group.start_soon(self._watch_revision, get_settings().LISTEN_REVISION_POLL_SECONDS)
            if layer is not None:
                group.start_soon(self._follow_layer, layer)

    def layer_state(self) -> str:
        """For the health report: "local" (no shared layer), "ok" (listening to it) or "unavailable"."""
        return self._layer_state

    def has_listeners(self) -> bool:
        return self.audience.streams > 0 or (self.sessions is not None and self.sessions.reachable > 0)

    async def _watch_revision(self, every: float) -> None:
        """Every `every` seconds while this process has listeners, read the catalog revision in a thread and
        announce it when it moved. Reads nothing while no one listens. A revision that cannot be read (the
        cache is down) is read again next time: the change is announced once it can be, logged once when lost
        and once when back."""
        from mcp_expose.catalog.revision import current_revision
        from mcp_expose.core.db import tidies_connections

        read = tidies_connections(current_revision)
        lost = False
        while True:
            await anyio.sleep(every)
            if not self.has_listeners():
                self.audience.heard.clear()  # the next listener starts from what it is served
                continue
            try:
                revision = await in_worker_thread(read, abandon_on_cancel=True)()
            except Exception as exc:  # noqa: BLE001  (an outage of the cache must not end the watching)
                if not lost:
                    logger.warning(
                        "Cannot read the catalog revision (%s); listeners hear of changes once it can be read again",
                        type(exc).__name__,
                    )
                    lost = True
                continue
            if lost:
                logger.warning("The catalog revision can be read again")
                lost = False
            if not self.audience.heard:
                self.audience.heard.append(revision)
            else:
                await self.deliver(revision)

    async def _follow_layer(self, layer: Any) -> None:
        """Listen to the channel layer's group until cancelled.

        One channel serves the whole run, so messages sent to it while a read failed are still waiting in the
        layer when the next read starts. A read that fails after the layer answered is retried at once (with
        Redis, a blocking pop whose socket timeout races the pop's own timeout fails that way); a layer that
        cannot be reached is retried with backoff, logged once when it is lost and once when it is back. It
        never takes the server down.
        """
        channel = None
        try:
            delay, lost = RETRY_SECONDS, False
            while True:
                try:
                    if channel is None:
                        channel = await layer.new_channel()
                    await layer.group_add(GROUP, channel)  # again after a failure: membership is cheap to renew
                except Exception as exc:  # noqa: BLE001  (an outage of the layer must not end the serving)
                    self._layer_state = "unavailable"
                    if not lost:
                        logger.warning("Lost the channel layer (%s); listening again with backoff", type(exc).__name__)
                        lost = True
                    await anyio.sleep(delay)
                    delay = min(delay * 2, MAX_RETRY_SECONDS)
                    continue
                if lost:
                    logger.warning("The channel layer is back; listening again")
                delay, lost, self._layer_state = RETRY_SECONDS, False, "ok"
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
                revision = message.get("revision")
                await self.deliver(revision if isinstance(revision, str) else None)
            elif message.get("type") == RESOURCE_MESSAGE_TYPE and isinstance(message.get("uri"), str):
                await self.deliver_resource(message["uri"])

    async def deliver(self, revision: str | None = None) -> None:
        """Tell every listener the lists changed, unless they were already told of `revision`."""
        if revision is not None:
            if revision in self.audience.heard:
                return
            self.audience.heard.append(revision)
        for event in self._events:
            await self.bus.publish(event)
        if self.sessions is not None:
            await self.sessions.announce_lists_changed()

    async def deliver_resource(self, uri: str) -> None:
        from mcp.server.subscriptions import ResourceUpdated

        await self.bus.publish(ResourceUpdated(uri=uri))
        if self.sessions is not None:
            await self.sessions.announce_resource_updated(uri)

    def deliver_soon(self, uri: str | None = None, revision: str | None = None) -> None:
        """From any thread: schedule a delivery (of a list change at `revision`, or of `uri`'s update) on the
        relay's loop."""
        if self._loop is not None and not self._loop.is_closed():
            delivery = partial(self.deliver, revision) if uri is None else partial(self.deliver_resource, uri)
            self._loop.call_soon_threadsafe(lambda: self._loop.create_task(delivery()))  # type: ignore[union-attr]


def announce_catalog_change(revision: str | None = None) -> None:
    """Sync (called after a commit): every process's listeners learn that the lists changed, now rather than at
    their relay's next look at the revision. `revision` is the stamp the change wrote: a relay that already
    announced it does not again."""
    _announce({"type": MESSAGE_TYPE, "revision": revision} if revision else {"type": MESSAGE_TYPE}, None, revision)


def resource_updated(uri: str) -> None:
    """Tell clients subscribed to `uri` that it changed, in every server process.

    Call it when the data behind a resource changes (from a `post_save` receiver, say; in a
    transaction, via `transaction.on_commit`). Subscribers are 2026-07-28 `subscriptions/listen`
    streams that named the URI and 2025-11-25 sessions that sent `resources/subscribe` for it.
    """
    if not isinstance(uri, str) or not uri:
        raise ValueError("resource_updated() takes the resource's URI, a non-empty string.")
    _announce({"type": RESOURCE_MESSAGE_TYPE, "uri": uri}, uri)


def _announce(message: dict[str, Any], uri: str | None, revision: str | None = None) -> None:
    layer = shared_layer()
    if layer is not None:
        try:
            async_to_sync(layer.group_send)(GROUP, message)
            return
        except Exception:  # noqa: BLE001  (a layer outage must not fail the caller's save)
            logger.exception("Could not announce a change through the channel layer; telling this process only")
    for relay in list(_relays):
        relay.deliver_soon(uri, revision)
