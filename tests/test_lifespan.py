"""What the ASGI lifespan does besides starting the SDK: freezing the collector, the usage writer."""

from __future__ import annotations

import gc
from typing import Any

import anyio
import pytest
from django.test import override_settings

from mcp_expose.calls import usage_writer
from mcp_expose.catalog.compiled import CatalogProvider
from mcp_expose.core.conf import changed_settings
from mcp_expose.serving.asgi import McpExposeASGI

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def run_lifespan(app: McpExposeASGI, while_up: Any) -> list[str]:
    """Start the app's lifespan, call `while_up()`, shut it down; the lifespan messages sent."""
    inbox: anyio.abc.ObjectSendStream[dict[str, str]]
    inbox, messages = anyio.create_memory_object_stream[dict[str, str]](2)
    sent: list[str] = []
    started = anyio.Event()

    async def send(message: dict[str, str]) -> None:
        sent.append(message["type"])
        if message["type"] == "lifespan.startup.complete":
            started.set()

    async with inbox, messages, anyio.create_task_group() as group:
        group.start_soon(app, {"type": "lifespan"}, messages.receive, send)
        await inbox.send({"type": "lifespan.startup"})
        with anyio.fail_after(30):
            await started.wait()
        await while_up()
        await inbox.send({"type": "lifespan.shutdown"})
    return sent


@pytest.mark.parametrize("freeze", [True, False])
async def test_the_collector_is_frozen_after_startup_unless_told_not_to(freeze: bool) -> None:
    gc.unfreeze()
    seen: list[int] = []

    async def look() -> None:
        seen.append(gc.get_freeze_count())

    try:
        with override_settings(MCP_EXPOSE=changed_settings(FREEZE_GC=freeze)):
            app = McpExposeASGI(lambda *args: None, provider=CatalogProvider())
            sent = await run_lifespan(app, look)
    finally:
        gc.unfreeze()
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert (seen[0] > 0) is freeze


async def test_usage_rows_are_batched_while_up_and_written_at_shutdown() -> None:
    states: list[bool] = []

    async def look() -> None:
        states.append(usage_writer.writer is not None and usage_writer.writer.running)

    with override_settings(MCP_EXPOSE=changed_settings(FREEZE_GC=False, USAGE_BATCH_SECONDS=0.2)):
        await run_lifespan(McpExposeASGI(lambda *args: None, provider=CatalogProvider()), look)
    assert states == [True] and usage_writer.writer is None  # stopped (and flushed) at shutdown
