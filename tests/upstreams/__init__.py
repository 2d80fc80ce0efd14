"""Upstream MCP servers for the tests: real processes on loopback, started by `tests/upstream_servers.py`."""

from __future__ import annotations

from typing import Any


async def read_body(receive: Any) -> bytes:
    """An ASGI request's whole body."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)
