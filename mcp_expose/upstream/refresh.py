"""Discovery without a person pressing a button: every `UPSTREAM_DISCOVERY_INTERVAL` seconds, and whenever an
upstream says its tools changed (`notifications/tools/list_changed`, where its era lets us listen).

Each serving process runs this in its lifespan (`serving.asgi`). Several processes share the work through the
database: a server discovered by another process within the interval is not discovered again, and discoveries of
one server are serialised by `record_discovery`'s row lock. A discovery only records a reading: nothing is served
before a person approves it, so an upstream that keeps announcing changes costs discoveries, never a rug pull.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import anyio
import httpx2
import mcp_types as types
from django.utils import timezone
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_expose.core.db import in_worker_thread, tidies_connections
from mcp_expose.models import UpstreamServer
from mcp_expose.upstream.discovery import MODES, Discovery, UpstreamTarget, describe_failure, discover
from mcp_expose.upstream.quiet_sdk import talking_to
from mcp_expose.upstream.sealing import SecretUnavailable
from mcp_expose.upstream.snapshots import record_discovery
from mcp_expose.upstream.transport import BoundedTransport

logger = logging.getLogger("mcp_expose.upstream")

# A listener that failed waits this long before it connects again, doubling up to the most.
LISTEN_RETRY = (5.0, 300.0)
# How often the set of listeners is brought in line with the enabled servers, in seconds.
RECONCILE_SECONDS = 30.0
# An upstream's announcements cause at most one discovery this often, per process: one that announces without end
# costs a discovery every so often, not one per announcement.
ANNOUNCED_DISCOVERY_SECONDS = 10.0
# Largest listen stream read before it is opened again (events are small; the bound is the transport's).
LISTEN_STREAM_BYTES = 4 * 1024 * 1024


async def watch(interval: float, listen: bool) -> None:
    """Discover due servers every `interval` seconds (0: never), and listen to each enabled server's changes
    when `listen` is on. Runs until cancelled; nothing an upstream does ends it."""
    async with anyio.create_task_group() as group:
        if interval > 0:
            group.start_soon(_periodically, interval)
        if listen:
            group.start_soon(_listening)


async def _periodically(interval: float) -> None:
    while True:
        try:
            for server in await _servers(due_within=interval):
                await refresh(server, "periodic")
        except Exception:  # noqa: BLE001  (the database may be down: try again next time)
            logger.warning("Periodic upstream discovery could not run; it runs again in %g s", interval)
        await anyio.sleep(min(interval, 60.0))


async def refresh(server: UpstreamServer, why: str) -> Discovery:
    """Discover `server` now and record what was read."""
    try:
        target = UpstreamTarget.from_row(server)
    except SecretUnavailable as exc:
        discovery = Discovery(error=str(exc))
    else:
        discovery = await discover(target)
    counts = await _record(server, discovery)
    logger.info("Upstream %s discovered (%s): %s", server.name, why, discovery.error or counts)
    return discovery


_record = in_worker_thread(tidies_connections(record_discovery))


@in_worker_thread
@tidies_connections
def _servers(due_within: float | None = None) -> list[UpstreamServer]:
    """The enabled servers; with `due_within`, only those no process discovered within that many seconds."""
    servers = UpstreamServer.objects.filter(enabled=True)
    if due_within is not None:
        cutoff = timezone.now() - timedelta(seconds=due_within)
        servers = servers.filter(discovered_at__isnull=True) | servers.filter(discovered_at__lt=cutoff)
    return list(servers.order_by("name"))


async def _listening() -> None:
    """One listener per enabled server, started and stopped as servers come, go or change."""
    running: dict[int, tuple[str, anyio.CancelScope]] = {}
    async with anyio.create_task_group() as group:
        while True:
            try:
                servers = {server.pk: server for server in await _servers()}
            except Exception:  # noqa: BLE001
                servers = None
            if servers is not None:
                for pk in list(running):
                    stamp, scope = running[pk]
                    if pk not in servers or _stamp(servers[pk]) != stamp:
                        scope.cancel()
                        del running[pk]
                for pk, server in servers.items():
                    if pk not in running:
                        scope = anyio.CancelScope()
                        running[pk] = (_stamp(server), scope)
                        group.start_soon(_listen_to, server, scope)
            await anyio.sleep(RECONCILE_SECONDS)


def _stamp(server: UpstreamServer) -> str:
    return f"{server.url} {server.protocol} {server.sealed_headers} {server.updated_at.isoformat()}"


async def _listen_to(server: UpstreamServer, scope: anyio.CancelScope) -> None:
    """Listen to `server` until cancelled; each announced change is a discovery. Reconnects with backoff."""
    delay = LISTEN_RETRY[0]
    last = -ANNOUNCED_DISCOVERY_SECONDS

    async def announced() -> None:
        nonlocal last
        wait = last + ANNOUNCED_DISCOVERY_SECONDS - anyio.current_time()
        if wait > 0:
            await anyio.sleep(wait)  # announcements meanwhile are folded into this one by the stream
        last = anyio.current_time()
        await refresh(server, "list_changed")

    with scope:
        while True:
            connected = anyio.Event()
            try:
                target = UpstreamTarget.from_row(server)
                await listen_once(target, announced, connected)
            except Exception as exc:  # noqa: BLE001  (whatever the upstream does, listening goes on later)
                logger.info("Upstream %s: not listening (%s)", server.name, describe_failure(exc, _placeholder(server)))
            delay = next_delay(delay, connected.is_set())
            await anyio.sleep(delay)


def next_delay(delay: float, connected: bool) -> float:
    """The wait before listening again: the shortest after a connection that was made (however it ended: a
    2025-11-25 session's stream ends only in an error), doubling up to the longest after one that was not."""
    return LISTEN_RETRY[0] if connected else min(delay * 2, LISTEN_RETRY[1])


def _placeholder(server: UpstreamServer) -> UpstreamTarget:
    return UpstreamTarget(server.pk, server.name, server.url)


async def listen_once(target: UpstreamTarget, changed: Any, connected: anyio.Event | None = None) -> None:
    """One listening connection: a `subscriptions/listen` stream on 2026-07-28, the standing event stream of a
    session on 2025-11-25. Calls `changed()` for each tools change, and sets `connected` once the connection is
    made (a 2025-11-25 session's stream never ends but in an error, so the caller cannot tell by the return)."""
    connected = connected if connected is not None else anyio.Event()
    transport = BoundedTransport(target.name, max_bytes=LISTEN_STREAM_BYTES)
    # No read timeout: the stream is quiet until something changes.
    timeout = httpx2.Timeout(None, connect=target.connect_timeout)
    wake = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            wake.set()

    headers = {**target.headers, **await target.authorization()}
    mode = MODES.get(target.protocol, "auto")
    with talking_to(target.name):
        async with (
            httpx2.AsyncClient(transport=transport, headers=headers, timeout=timeout, follow_redirects=False) as http,
            Client(
                streamable_http_client(target.url, http_client=http), mode=mode, message_handler=on_message
            ) as client,
        ):
            if client.protocol_version == "2025-11-25" or mode == "legacy":
                connected.set()
                while True:  # notifications arrive on the session's standing stream
                    await wake.wait()
                    wake = anyio.Event()
                    await changed()
            async with client.listen(tools_list_changed=True) as subscription:
                connected.set()
                async for _event in subscription:
                    await changed()
