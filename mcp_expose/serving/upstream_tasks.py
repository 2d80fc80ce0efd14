"""What a serving process does for upstream servers beside answering calls: watching them for changes while it
runs, and closing its pooled connections to them when it stops. The upstream layer is imported when first used."""

from __future__ import annotations


async def watch_upstreams(interval: float, listen: bool) -> None:
    """Periodic discovery and listening to upstreams (see `upstream.refresh`); runs until cancelled."""
    from mcp_expose.upstream.refresh import watch

    await watch(interval, listen)


async def close_upstream_connections() -> None:
    """At shutdown, the pooled connections to upstream servers (each closed alone; failures only logged)."""
    from mcp_expose.upstream.calling import close_connections

    await close_connections()
