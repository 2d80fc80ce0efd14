"""Writing the fast path's answers as the SDK writes its own: JSON, or past the ping interval an event stream kept
alive with pings, and nothing at all for a client that went away."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable
from typing import Any, TypeVar

from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
)
from pydantic import ValidationError
from starlette.types import Receive, Send

from mcp_expose.serving.fastpath_requests import (
    PlainRequest,
    sdk_pieces,
)

T = TypeVar("T")

# Seconds a call runs before a task starts watching for its client to go away (sooner ones are never watched).
WATCH_AFTER = 0.05


def error_reply(plain: PlainRequest, exc: MCPError | ValidationError) -> tuple[int, bytes]:
    """As the SDK writes an error reply: on 2026-07-28 with the HTTP status its table maps the code to."""
    error = sdk_pieces().modern_error_data(exc)  # for these two exceptions, what every era's dispatcher writes
    encoded = encode(error.model_dump(mode="json", by_alias=True, exclude_none=True))
    status = ERROR_CODE_HTTP_STATUS.get(error.code, 200) if plain.modern else 200  # 2025-11-25 maps no status
    return status, reply(plain.id_json, b"error", encoded)


def reply(id_json: bytes, member: bytes, encoded: bytes) -> bytes:
    """A JSON-RPC response from its encoded parts, copied once (a listing of many tools is tens of KB)."""
    return b"".join((b'{"jsonrpc":"2.0","id":', id_json, b',"', member, b'":', encoded, b"}"))


def encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


async def send_json(reply: tuple[int, bytes], send: Send) -> None:
    status, body = reply
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def answer_in_sse_mode(call: Awaitable[tuple[int, bytes]], receive: Receive, send: Send) -> None:
    """As the SDK answers in SSE mode: JSON when the answer comes within the ping interval; past it, an
    event stream kept alive with pings until the answer; a client that goes away cancels the call."""
    keep_alive = KeepAlive(send)
    timer = asyncio.get_running_loop().call_later(sdk_pieces().sse_ping_interval, keep_alive.start)
    try:
        answer = await answered_unless_gone(call, receive)
    finally:
        timer.cancel()
        if keep_alive.started:
            await keep_alive.stop()
    if answer is None:
        return
    status, body = answer
    if keep_alive.started:
        await send(
            {"type": "http.response.body", "body": b"event: message\r\ndata: " + body + b"\r\n\r\n", "more_body": False}
        )
    else:
        await send_json((status, body), send)


async def answered_unless_gone(call: Awaitable[T], receive: Receive) -> T | None:
    """The call's answer; or None once its client went away, which cancels the call (as the SDK does).

    The call runs in this task. One still running after WATCH_AFTER gets a small task watching for the client
    to go away: a task group per call (two tasks, cancel scopes), or even one watcher task per call, costs more
    than the rest of a small call."""
    loop = asyncio.get_running_loop()
    this_task = asyncio.current_task()
    assert this_task is not None
    gone = False
    watcher: asyncio.Task[None] | None = None

    async def watch_disconnect() -> None:
        nonlocal gone
        while (await receive()).get("type") != "http.disconnect":
            pass
        gone = True
        this_task.cancel()

    def start_watching() -> None:
        nonlocal watcher
        watcher = loop.create_task(watch_disconnect())

    timer = loop.call_later(WATCH_AFTER, start_watching)
    try:
        answer = await call
    except asyncio.CancelledError:
        if gone and this_task.uncancel() == 0:
            return None  # the client went away (and nothing else cancelled us): nothing to answer, like the SDK
        raise
    finally:
        timer.cancel()
        if watcher is not None:
            watcher.cancel()
    if gone:  # the call ignored the cancellation and finished: still nobody to answer
        this_task.uncancel()
        return None
    return answer


class KeepAlive:
    """The event stream a slow answer switches to: headers and a ping at once, a ping every interval after.
    Stopping lets a started stream finish what it is sending (headers always go first), never cuts it.
    Nothing is made for a call answered before it starts."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False
        self._stopping: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.started = True
        self._stopping = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._ping(self._stopping))

    async def _ping(self, stopping: asyncio.Event) -> None:
        sdk = sdk_pieces()
        await self.send({"type": "http.response.start", "status": 200, "headers": sdk.sse_headers})
        while not stopping.is_set():
            await self.send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), sdk.sse_ping_interval)

    async def stop(self) -> None:
        if self._stopping is not None and self._task is not None:
            self._stopping.set()
            await self._task
