"""Nothing on the MCP endpoint answers a plain-text 500.

A server answers `Internal Server Error` in plain text when the app raises before it started its response.
At our endpoint that reaches MCP clients, which expect JSON-RPC, and it hides why. So:

- a dependency that is down (`DependencyUnavailable`: the database, the shared cache) answers 503 with
  `Retry-After` and a JSON-RPC error naming what is unavailable; the outage is logged as one, with no
  traceback per request;
- anything else answers 500 with a JSON-RPC error carrying a fixed, safe message and an incident id, logged
  once with its traceback under that id.

A failure after the response started cannot be answered any more: it is logged (with an incident id) and the
connection closes, as the server would close it.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable

from mcp_types import INTERNAL_ERROR
from starlette.types import Message, Receive, Scope, Send

from mcp_expose.core.conf import get_settings
from mcp_expose.core.outage import DependencyUnavailable, dependency_of, outage

logger = logging.getLogger("mcp_expose.asgi")

INCIDENT_MESSAGE = "The server failed unexpectedly (incident {incident}). Quote the incident id when reporting this."


async def answering_failures(
    serve: Callable[[Scope, Receive, Send], Awaitable[None]], scope: Scope, receive: Receive, send: Send
) -> None:
    """Run `serve`, answering what it raises before its response starts as a JSON-RPC error."""
    started = False

    async def tracked(message: Message) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
        await send(message)

    try:
        await serve(scope, receive, tracked)
    except Exception as exc:  # noqa: BLE001  (this is the last place a failure can be answered)
        dependency = dependency_of(exc)
        if dependency is not None:
            if dependency == "database" and not isinstance(exc, DependencyUnavailable):
                outage.refused("a request", exc)
            if not started:
                await _send(
                    send, 503, _unavailable_body(dependency), retry_after=get_settings().UNAVAILABLE_RETRY_AFTER
                )
            return
        incident = uuid.uuid4().hex[:16]
        logger.error(
            "The MCP endpoint failed %s (incident %s)",
            "after answering began" if started else "before answering",
            incident,
            exc_info=exc,
        )
        if not started:
            await _send(send, 500, _error_body(INCIDENT_MESSAGE.format(incident=incident), {"incident": incident}))


def _unavailable_body(dependency: str) -> bytes:
    retry_after = get_settings().UNAVAILABLE_RETRY_AFTER
    what = "database" if dependency == "database" else "shared cache"
    return _error_body(
        f"The {what} this request needs is unavailable right now; retry after {retry_after} s.",
        {"unavailable": dependency, "retry_after": retry_after},
    )


def _error_body(message: str, data: dict[str, object]) -> bytes:
    """A JSON-RPC error without an id: the failure may have come before the request was read."""
    return json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": INTERNAL_ERROR, "message": message, "data": data}}
    ).encode()


async def _send(send: Send, status: int, body: bytes, retry_after: int | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
