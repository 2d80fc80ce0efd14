"""Long-lived connections against live servers: a change made outside the serving processes reaches listen streams
and stateful sessions; listen streams and sessions are bounded per process and per caller, with a clear,
retryable error; a session whose client went away without DELETE is ended after a short idle time."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from mcp_expose.serving.capacity import CAPACITY_REACHED
from mcp_expose.testing.live import mcp_http_client

from .live import (
    HANG_GUARD_SECONDS,
    LIVE_SETTINGS,
    LiveServer,
    create_api_key,
    prepare_demo,
    run_server,
    run_snippet,
)
from .mcp_client import connect

pytestmark = [pytest.mark.anyio, pytest.mark.live]

DISABLE_FROM_A_SHELL = (
    "from mcp_expose.models import ExposedTool\n"
    "row = ExposedTool.objects.get(key='library.popular_authors')\n"
    "row.enabled = False\n"
    "row.save()\n"
)


async def next_event(subscription: Any) -> str:
    with anyio.fail_after(HANG_GUARD_SECONDS):
        return type(await subscription.__anext__()).__name__


async def test_a_change_saved_from_a_shell_reaches_listen_streams_and_sessions(tmp_path: Path) -> None:
    """The demo's in-memory channel layer cannot carry a shell's change: the revision the server watches does."""
    key = prepare_demo(tmp_path)
    heard_by_session = anyio.Event()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            heard_by_session.set()

    with run_server(tmp_path, **LIVE_SETTINGS, MCP_TEST_LEGACY_SESSIONS="1") as server:
        http = mcp_http_client(headers={"Authorization": f"Bearer {key}"})
        legacy = Client(
            streamable_http_client(server.mcp_url, http_client=http),
            mode="legacy",  # type: ignore[arg-type]
            message_handler=on_message,
        )
        async with http, legacy, connect(server.mcp_url, key, "auto") as client:
            await legacy.list_tools()  # the session is known to the server once it made a request
            async with client.listen(tools_list_changed=True) as subscription:
                await anyio.to_thread.run_sync(lambda: run_snippet(tmp_path, DISABLE_FROM_A_SHELL))
                assert await next_event(subscription) == "ToolsListChanged"
                with anyio.fail_after(HANG_GUARD_SECONDS):
                    await heard_by_session.wait()
                names = [tool.name for tool in (await client.list_tools()).tools]
    assert "library.popular_authors" not in names and "library.search_books" in names


@asynccontextmanager
async def listening(url: str, key: str) -> AsyncIterator[Any]:
    async with connect(url, key, "auto") as client, client.listen(tools_list_changed=True) as subscription:
        yield subscription


async def refused(url: str, key: str) -> MCPError:
    async with connect(url, key, "auto") as client:
        with pytest.raises(MCPError) as refusal:
            async with client.listen(tools_list_changed=True):
                pass
    return refusal.value


async def test_listen_streams_are_bounded_per_caller_and_per_process(tmp_path: Path) -> None:
    key = prepare_demo(tmp_path)
    other = create_api_key(tmp_path, "admin", "mcp library:read")
    limits = {"MCP_TEST_MAX_LISTEN_STREAMS_PER_CALLER": "2", "MCP_TEST_MAX_LISTEN_STREAMS": "3"}
    with run_server(tmp_path, **LIVE_SETTINGS, **limits) as server:
        async with AsyncExitStack() as streams:
            for _ in range(2):
                await streams.enter_async_context(listening(server.mcp_url, key))
            for _ in range(3):  # a client retrying in a loop
                per_caller = await refused(server.mcp_url, key)
            await streams.enter_async_context(listening(server.mcp_url, other))  # another caller still has room
            per_process = await refused(server.mcp_url, other)
        async with listening(server.mcp_url, key):  # the streams closed: their slots are free again
            pass
        log = server.log()
    assert per_caller.error.code == per_process.error.code == CAPACITY_REACHED
    assert (
        per_caller.error.message
        == "Too many open listen streams for this caller (at most 2): close one, or retry later."
    )
    assert per_caller.error.data == {"reason": "listen_streams_per_caller", "limit": 2, "retryable": True}
    assert per_process.error.message == "This server process holds its limit of 3 listen streams; retry later."
    assert per_process.error.data == {"reason": "listen_streams_per_process", "limit": 3, "retryable": True}
    # Three refusals of one caller are one burst, logged once, naming the caller by its key's public prefix.
    assert len(re.findall(r"Refusing listen streams to admin \(API key [^)]+\): it holds its limit of 2", log)) == 1
    assert len(re.findall(r"Refusing listen streams: this process holds its limit of 3", log)) == 1
    assert key not in log and other not in log


async def test_legacy_sessions_are_bounded_per_caller(tmp_path: Path) -> None:
    key = prepare_demo(tmp_path)
    other = create_api_key(tmp_path, "admin", "mcp library:read")
    with run_server(
        tmp_path, **LIVE_SETTINGS, MCP_TEST_LEGACY_SESSIONS="1", MCP_TEST_MAX_LEGACY_SESSIONS_PER_CALLER="2"
    ) as server:
        async with AsyncExitStack() as sessions:
            for _ in range(2):
                await sessions.enter_async_context(connect(server.mcp_url, key, "legacy"))
            with pytest.RaisesGroup(MCPError, flatten_subgroups=True) as refusal:  # the SDK's client groups it
                async with connect(server.mcp_url, key, "legacy"):
                    pass
            async with httpx2.AsyncClient(timeout=HANG_GUARD_SECONDS) as http:
                plain = await http.post(server.mcp_url, headers=legacy_headers(key), content=INITIALIZE)
            async with connect(server.mcp_url, other, "legacy") as admitted:
                assert (await admitted.call_tool("library.echo", {"message": "hi"})).structured_content[
                    "message"
                ] == "hi"
        async with connect(server.mcp_url, key, "legacy") as again:  # closing (DELETE) gave the slots back
            await again.list_tools()
    error = refusal.value.exceptions[0]
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert error.error.code == CAPACITY_REACHED
    assert error.error.message == "Too many open sessions for this caller (at most 2): close one, or retry later."
    assert error.error.data == {"reason": "sessions_per_caller", "limit": 2, "retryable": True}
    assert plain.status_code == 429 and plain.json()["error"] == error.error.model_dump(exclude_none=True)


def legacy_headers(key: str, session_id: str | None = None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {key}",
        "MCP-Protocol-Version": "2025-11-25",
    }
    return {**headers, "Mcp-Session-Id": session_id} if session_id else headers


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
    }
)


async def open_session(http: httpx2.AsyncClient, url: str, key: str) -> str:
    """initialize and initialized, as a 2025-11-25 client sends them; the new session's id."""
    opened = await http.post(url, headers=legacy_headers(key), content=INITIALIZE)
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    done = await http.post(
        url,
        headers=legacy_headers(key, session_id),
        content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    assert done.status_code == 202, done.text
    return session_id


async def list_tools_status(http: httpx2.AsyncClient, url: str, key: str, session_id: str) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    return (await http.post(url, headers=legacy_headers(key, session_id), content=body)).status_code


async def wait_for_log(server: LiveServer, pattern: str) -> None:
    with anyio.fail_after(HANG_GUARD_SECONDS):
        while not re.search(pattern, server.log()):
            await anyio.sleep(0.05)


async def test_a_session_whose_client_went_away_is_ended_after_the_idle_time(tmp_path: Path) -> None:
    key = prepare_demo(tmp_path)
    settings = {
        "MCP_TEST_LEGACY_SESSIONS": "1",
        "MCP_TEST_LEGACY_SESSION_IDLE_SECONDS": "2",
        "MCP_EXPOSE_LOG_LEVEL": "DEBUG",
    }
    with run_server(tmp_path, **LIVE_SETTINGS, **settings) as server:
        async with httpx2.AsyncClient(timeout=HANG_GUARD_SECONDS) as http:
            kept = await open_session(http, server.mcp_url, key)
            abandoned = await open_session(http, server.mcp_url, key)
            async with anyio.create_task_group() as group:
                standing = anyio.Event()

                async def hold_standing_stream() -> None:
                    get_headers = {**legacy_headers(key, kept), "Accept": "text/event-stream"}
                    async with http.stream("GET", server.mcp_url, headers=get_headers) as stream:
                        assert stream.status_code == 200
                        standing.set()
                        await anyio.sleep_forever()

                group.start_soon(hold_standing_stream)
                await standing.wait()
                # The abandoned session's client opens its standing stream and drops the connection, no DELETE.
                async with httpx2.AsyncClient(timeout=HANG_GUARD_SECONDS) as gone:
                    get_headers = {**legacy_headers(key, abandoned), "Accept": "text/event-stream"}
                    async with gone.stream("GET", server.mcp_url, headers=get_headers) as stream:
                        assert stream.status_code == 200
                await wait_for_log(server, rf"Ended session {abandoned[:8]}\.\.\. idle for 2 s; 1 open")
                # The ended session answers 404, as the spec says; the one holding its standing stream lives on.
                assert await list_tools_status(http, server.mcp_url, key, abandoned) == 404
                assert await list_tools_status(http, server.mcp_url, key, kept) == 200
                group.cancel_scope.cancel()
    assert f"Ended session {kept[:8]}" not in server.log()
