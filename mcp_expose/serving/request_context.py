"""What a handler learns from the SDK's request context: the caller and catalog the edge attached, the headers a
tool may see, its session, its client's address, this site's address, and the ways back to the client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.connection import allowed_log_levels
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_expose.access.protected_resource import request_origin
from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.core.asking import Answer, BackChannel, Question
from mcp_expose.core.context import LogSender
from mcp_expose.core.principal import PRINCIPAL_SCOPE_KEY, Principal
from mcp_expose.core.requests import WITHHELD_HEADERS
from mcp_expose.core.telemetry import Lap
from mcp_expose.serving.sessions import SessionMemory

CATALOG_SCOPE_KEY = "mcp_expose.catalog"


@dataclass(slots=True)
class SdkCaller:
    """The caller and catalog of the HTTP request the SDK is answering, for what the SDK asks with a name only."""

    principal: Principal
    catalog: Catalog
    # The tool the policy allowed this caller on this request, decided when the SDK asked for its schema (to check
    # `Mcp-Param-*` headers), so that the call is not decided again.
    allowed: ToolEntry | None = None
    # Whether the edge timed this request (tracing was on), and the decision above, timed for the request's span
    # (which the SDK opens after it): taken by the first to replay it.
    timed: bool = False
    laps: list[Lap] = field(default_factory=list)

    def allowed_for(self, principal: Principal, catalog: Catalog) -> ToolEntry | None:
        """The allowed tool, when this is the request of `principal` on `catalog` (a stateful session's handler
        runs in the context of the request that opened it)."""
        return self.allowed if self.principal is principal and self.catalog is catalog else None


SDK_CALLER: ContextVar[SdkCaller | None] = ContextVar("mcp_expose.sdk_caller", default=None)


Resolver = Callable[[ServerRequestContext[Any]], Awaitable[tuple[Principal, Catalog]]]


async def resolve_from_scope(ctx: ServerRequestContext[Any]) -> tuple[Principal, Catalog]:
    """The caller and catalog the ASGI edge attached to this HTTP request."""
    scope = ctx.request.scope if ctx.request is not None else {}
    try:
        return scope[PRINCIPAL_SCOPE_KEY], scope[CATALOG_SCOPE_KEY]
    except KeyError:
        # Only reachable if the SDK app is mounted without our edge in front of it.
        raise MCPError(code=types.INTERNAL_ERROR, message="Request reached the MCP server unauthenticated") from None


def back_channel(ctx: ServerRequestContext[Any]) -> BackChannel | None:
    """On a 2025-11-25 connection that can carry server requests: send a question on this request's stream."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or not ctx.session.can_send_request:
        return None
    metadata = ServerMessageMetadata(related_request_id=ctx.request_id)

    async def send(question: Question) -> Answer:
        return await ctx.session.send_request(question.as_request(), question.answer_type, metadata=metadata)

    return send


def log_sender(ctx: ServerRequestContext[Any], sessions: SessionMemory) -> LogSender:
    """Log messages ride this request's stream: on 2026-07-28 only at or above the level the request
    asked for (none when it asked for none); on 2025-11-25 at or above the session's level."""
    allowed = allowed_log_levels(ctx.protocol_version, ctx.meta)
    session_id = session_id_of(ctx)
    legacy = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS

    async def send(level: str, data: Any) -> None:
        if level not in allowed or (legacy and not sessions.allows(session_id, level)):
            return
        notification = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level=level, data=data)
        )
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

    return send


def session_id_of(ctx: ServerRequestContext[Any]) -> str | None:
    """The legacy session this request belongs to (None on stdio, which is one session)."""
    return ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None


def client_address(ctx: ServerRequestContext[Any]) -> str | None:
    client = ctx.request.client if ctx.request is not None else None
    return client.host if client is not None else None


def base_url_of(ctx: ServerRequestContext[Any]) -> str:
    if ctx.request is None:
        return ""
    # The scope's scheme is what `request.url.scheme` says, without building and parsing the whole URL.
    return request_origin(ctx.request.scope.get("scheme", "http"), tool_headers_of(ctx))


def tool_headers_of(ctx: ServerRequestContext[Any]) -> Mapping[str, str]:
    """The tools' view of the request's headers, made once per request (three readers ask for it)."""
    if ctx.request is None:
        return {}
    scope = ctx.request.scope
    headers = scope.get(TOOL_HEADERS_SCOPE_KEY)
    if headers is None:
        headers = scope[TOOL_HEADERS_SCOPE_KEY] = tool_headers(ctx.request.headers.items())
    return headers


TOOL_HEADERS_SCOPE_KEY = "mcp_expose.tool_headers"


def tool_headers(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The request's headers as tools see them: credentials stay with the edge."""
    return {name: value for name, value in items if name not in WITHHELD_HEADERS}
