from __future__ import annotations

from typing import Any

import anyio
from django.core.management.base import BaseCommand

from mcp_expose.catalog.compiled import provider
from mcp_expose.core.db import in_worker_thread
from mcp_expose.management.cli import local_principal
from mcp_expose.serving.server import build_server, listing_tally


class Command(BaseCommand):
    help = (
        "Serve the MCP catalog over stdio, as one user, for local clients (Claude Desktop, editors). "
        "The same catalog, policy, confirmation and usage log as over HTTP."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--user", required=True, help="Serve as this user (their Django permissions apply).")
        parser.add_argument("--scopes", help="Space-separated scopes to hold (default: every scope tools use).")
        parser.add_argument(
            "--base-url",
            default="",
            help="This site's address (e.g. http://localhost:8000), for approval-page links and the links views build.",
        )

    def handle(self, *args: Any, user: str, scopes: str | None, base_url: str, **options: Any) -> None:
        # Fail before the client connects: a missing user is an error on stderr, not a broken session.
        principal = local_principal(user, scopes, provider.get_sync(), via="stdio")
        anyio.run(self._serve, principal, base_url)

    async def _serve(self, principal: Any, base_url: str) -> None:
        from mcp.server.stdio import stdio_server
        from mcp.server.subscriptions import InMemorySubscriptionBus

        from mcp_expose.serving.events import ChangeRelay

        async def resolve(ctx: Any) -> Any:
            # Every request sees admin changes: the catalog rechecks its revision stamp each time.
            return principal, await in_worker_thread(provider.get_sync)()

        bus = InMemorySubscriptionBus()
        server = build_server(resolve=resolve, base_url=base_url, subscription_bus=bus, stateful_legacy=True)
        async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as group:
            group.start_soon(ChangeRelay(bus).run)
            group.start_soon(listing_tally.keep_flushing)
            try:
                await server.run(read_stream, write_stream, server.create_initialization_options())
            finally:
                with anyio.CancelScope(shield=True):
                    await listing_tally.flush()
            group.cancel_scope.cancel()
