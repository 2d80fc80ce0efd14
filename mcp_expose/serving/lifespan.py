"""The serving process's lifespan: what starts before the first request and stops after the last.

At startup: every declaration resolved (a broken one stops the server), the SDK's session managers, the relay of
catalog changes to listen streams, and the background loops (the listing tally, the revision audit, the upstream
watch, the usage writer), then `gc.freeze()`. At shutdown: listen streams ended gracefully, the last usage rows
and listing counts written, upstream connections closed. A server that sends no lifespan events (daphne,
runserver) gets the same on its first request (`ensure_started`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import TYPE_CHECKING

import anyio
from django.core.exceptions import ImproperlyConfigured
from mcp.server.subscriptions import InMemorySubscriptionBus
from starlette.types import Receive, Send

from mcp_expose.access.authenticators import get_authenticators
from mcp_expose.calls import usage_writer
from mcp_expose.catalog.compiled import CatalogProvider
from mcp_expose.catalog.revision import keep_auditing
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import in_worker_thread
from mcp_expose.serving.draining import end_streams_on_stop, server_stopping
from mcp_expose.serving.events import ChangeRelay
from mcp_expose.serving.listening import end_streams
from mcp_expose.serving.server import listing_tally
from mcp_expose.serving.upstream_tasks import close_upstream_connections, watch_upstreams

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

logger = logging.getLogger("mcp_expose.asgi")


class Lifespan:
    """Starts and stops what serving needs, once: from the server's lifespan events, or on first use."""

    def __init__(
        self,
        provider: CatalogProvider,
        managers: Sequence[StreamableHTTPSessionManager],
        relay: ChangeRelay,
        bus: InMemorySubscriptionBus,
        *,
        streams: bool,
    ) -> None:
        self.provider = provider
        self.managers = managers
        self.relay = relay
        self.bus = bus
        self.streams = streams
        self.started = asyncio.Event()
        self._start_lock = asyncio.Lock()
        self._background: asyncio.Task[None] | None = None
        self._exit = asyncio.Event()
        self._stop_announced = False

    async def __call__(self, receive: Receive, send: Send) -> None:
        """The ASGI lifespan protocol: startup, then shutdown."""
        await receive()  # lifespan.startup
        async with contextlib.AsyncExitStack() as stack:
            try:
                await in_worker_thread(self.resolve_declarations, shared_thread=True)()
                await stack.enter_async_context(self.serving())
                stack.push_async_callback(close_upstream_connections)
                # Usage rows in batches only where a shutdown is announced, so that it can write the last ones.
                if usage_writer.start(get_settings().USAGE_BATCH_SECONDS) is not None:
                    stack.push_async_callback(_write_queued_usage)
            except Exception as exc:
                logger.exception("MCP session manager failed to start")
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            self.started.set()
            if get_settings().FREEZE_GC:
                # Everything loaded so far lives as long as the process: keep the collector from scanning it
                # again on every full collection (a few percent of each request's CPU time otherwise).
                gc.collect()  # what startup threw away (schemas' throwaway models) first, or it would stay forever
                gc.freeze()
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})

    def begin_stopping(self) -> None:
        """Say that the server is about to stop (see `McpExposeASGI.begin_stopping`). Safe from any thread."""
        self._stop_announced = True

    def stopping(self) -> bool:
        return self._stop_announced or server_stopping()

    def resolve_declarations(self) -> None:
        """Build every tool's schema and the authenticators now, so a broken declaration or authenticator stops
        the server instead of failing requests."""
        get_authenticators()
        problems = self.provider.registry.resolution_problems()
        if problems:
            raise ImproperlyConfigured(
                "MCP declarations cannot be served:\n"
                + "\n".join(f"  [{pid}] {message}" for pid, message, _ in problems)
            )

    async def ensure_started(self) -> None:
        """Start serving for servers that send no lifespan events (daphne, runserver)."""
        if self.started.is_set():
            return
        async with self._start_lock:
            if self.started.is_set():
                return
            self._background = asyncio.get_running_loop().create_task(self._serve_until_exit())
            await self.started.wait()

    async def _serve_until_exit(self) -> None:
        async with self.serving():
            self.started.set()
            await self._exit.wait()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The SDK's session managers, the relay that feeds catalog changes to listen streams, and the loops."""
        async with contextlib.AsyncExitStack() as managers:
            # Each manager's own task group opens before ours and closes after it (cancel scopes nest).
            for manager in self.managers:
                await managers.enter_async_context(manager.run())
            async with anyio.create_task_group() as group:
                if self.streams:
                    group.start_soon(self.relay.run)
                    group.start_soon(end_streams_on_stop, partial(end_streams, self.bus), self.stopping)
                group.start_soon(listing_tally.keep_flushing)
                group.start_soon(keep_auditing)
                conf = get_settings()
                if conf.UPSTREAM_DISCOVERY_INTERVAL or conf.UPSTREAM_LISTEN:
                    group.start_soon(watch_upstreams, conf.UPSTREAM_DISCOVERY_INTERVAL, conf.UPSTREAM_LISTEN)
                try:
                    yield
                finally:
                    with anyio.CancelScope(shield=True):
                        if not await listing_tally.flush():  # the listings counted since the last flush
                            logger.warning(
                                "Could not add the last %d tools/list calls to the listing count",
                                listing_tally.pending,
                            )
                    group.cancel_scope.cancel()


async def _write_queued_usage() -> None:
    with anyio.CancelScope(shield=True):
        await in_worker_thread(usage_writer.stop)()
