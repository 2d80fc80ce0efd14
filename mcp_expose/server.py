"""The MCP side: the SDK's low-level `Server` with our handlers.

Handlers get the caller and the catalog from a resolver (the ASGI edge puts
both on the request scope; stdio and tests supply their own) and hand the call
to the dispatcher. This module only translates between the dispatcher's
outcomes and MCP wire types.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from . import __version__
from .catalog import Catalog, CatalogProvider, ToolEntry
from .catalog import provider as default_provider
from .chain import InvalidChain, read_chain
from .conf import get_settings
from .confirmation import CONFIRM_FIELD, StaleConfirmation
from .dispatch import CallRequest, ToolOutcome, call_tool
from .errors import UnknownTool
from .oauth.resource import request_origin
from .policy import visible_tools
from .principal import Principal
from .results import compact_json, structured
from .schema import thaw
from .usage_report import count_list_call

logger = logging.getLogger("mcp_expose.server")

PRINCIPAL_SCOPE_KEY = "mcp_expose.principal"
CATALOG_SCOPE_KEY = "mcp_expose.catalog"

Resolver = Callable[[ServerRequestContext[Any]], Awaitable[tuple[Principal, Catalog]]]


async def resolve_from_scope(ctx: ServerRequestContext[Any]) -> tuple[Principal, Catalog]:
    """The caller and catalog the ASGI edge attached to this HTTP request."""
    scope = ctx.request.scope if ctx.request is not None else {}
    try:
        return scope[PRINCIPAL_SCOPE_KEY], scope[CATALOG_SCOPE_KEY]
    except KeyError:
        # Only reachable if the SDK app is mounted without our edge in front of it.
        raise MCPError(code=types.INTERNAL_ERROR, message="Request reached the MCP server unauthenticated") from None


def tool_definition(entry: ToolEntry) -> types.Tool:
    annotations = entry.annotations.as_dict()
    return types.Tool(
        name=entry.name,
        title=entry.title,
        description=entry.description or None,
        input_schema=thaw(entry.input_schema),
        output_schema=thaw(entry.output_schema) if entry.output_schema is not None else None,
        annotations=types.ToolAnnotations.model_validate(annotations) if annotations else None,
    )


def render_outcome(outcome: ToolOutcome) -> types.CallToolResult | types.InputRequiredResult:
    """A dispatcher outcome as a `CallToolResult` (structured content plus the same JSON as text),
    or the question a client must ask its user first."""
    if outcome.prompt is not None:
        form = types.ElicitRequestFormParams(
            message=outcome.prompt.message, requested_schema=thaw(outcome.prompt.requested_schema)
        )
        return types.InputRequiredResult(
            input_requests={CONFIRM_FIELD: types.ElicitRequest(params=form)},
            request_state=outcome.prompt.request_state,
        )
    if outcome.failure is not None:
        payload = {"error": outcome.failure.as_dict()}
        return types.CallToolResult(
            content=[types.TextContent(text=compact_json(payload))], structured_content=payload, is_error=True
        )
    content = structured(outcome.value)
    return types.CallToolResult(content=[types.TextContent(text=compact_json(content))], structured_content=content)


def build_server(
    *, resolve: Resolver = resolve_from_scope, provider: CatalogProvider | None = None
) -> Server[Any]:
    """A low-level SDK server serving the catalog through the dispatcher."""
    provider = provider if provider is not None else default_provider
    conf = get_settings()

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        if params is not None and params.cursor is not None:
            # Every list fits in one page, so no cursor was ever issued.
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor")
        principal, catalog = await resolve(ctx)
        await _count_listing()
        tools = [tool_definition(entry) for entry in visible_tools(catalog, principal)]
        return types.ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")

    async def call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        principal, catalog = await resolve(ctx)
        headers = _headers(ctx)
        request = CallRequest(
            protocol_version=ctx.protocol_version,
            headers=headers,
            report_progress=ctx.session.report_progress,
            chain=read_chain(headers),
            can_elicit=_can_elicit(ctx),
            input_responses=params.input_responses,
            request_state=params.request_state,
            base_url=_base_url(ctx),
            client_address=_client_address(ctx),
        )
        try:
            outcome = await call_tool(catalog, principal, params.name, params.arguments, request)
        except UnknownTool as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        except StaleConfirmation:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message="Invalid or expired requestState",
                data={"reason": "invalid_request_state"},
            ) from None
        return render_outcome(outcome)

    def input_schema_for(name: str) -> Mapping[str, Any] | None:
        # Used by the SDK only to check `Mcp-Param-*` headers; the last compiled catalog is enough.
        entry = provider.peek().get(name) if provider.peek() is not None else None
        return thaw(entry.input_schema) if entry is not None else None

    server = Server(
        conf.SERVER_NAME,
        version=__version__,
        title=conf.SERVER_TITLE,
        instructions=conf.INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call,
        get_tool_input_schema=input_schema_for,
    )
    server.middleware.append(refuse_bad_chains)
    server.middleware.append(RequestStateBoundary(request_state_security(), default_audience=conf.SERVER_NAME))
    return server


async def refuse_bad_chains(ctx: ServerRequestContext[Any], call_next: Any) -> Any:
    """Every request: a malformed or too-deep agent chain is refused before anything runs."""
    if ctx.request is not None:
        try:
            read_chain(_headers(ctx))
        except InvalidChain as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
    return await call_next(ctx)


def request_state_security() -> RequestStateSecurity:
    """Keys derived from SECRET_KEY (then SECRET_KEY_FALLBACKS, for rotation): any worker, any restart."""
    from django.conf import settings
    from django.utils.crypto import salted_hmac

    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    keys = [salted_hmac("mcp_expose.request-state", "key", secret=secret, algorithm="sha256").digest() for secret in secrets]
    return RequestStateSecurity(keys=keys, ttl=get_settings().CONFIRMATION_TTL)


async def _count_listing() -> None:
    try:
        await sync_to_async(count_list_call, thread_sensitive=False)()
    except Exception:  # noqa: BLE001  (a counter must never break a listing)
        logger.exception("Could not count a tools/list call")


def _can_elicit(ctx: ServerRequestContext[Any]) -> bool:
    """A 2026-07-28 request from a client that can show forms (an empty elicitation capability means forms)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def _client_address(ctx: ServerRequestContext[Any]) -> str | None:
    client = ctx.request.client if ctx.request is not None else None
    return client.host if client is not None else None


def _base_url(ctx: ServerRequestContext[Any]) -> str:
    if ctx.request is None:
        return ""
    headers = _headers(ctx)
    return request_origin(ctx.request.url.scheme, headers)


def _headers(ctx: ServerRequestContext[Any]) -> Mapping[str, str]:
    return dict(ctx.request.headers) if ctx.request is not None else {}
