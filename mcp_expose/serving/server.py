"""The MCP side: the SDK's low-level `Server` with our handlers.

Handlers get the caller and the catalog from a resolver (the ASGI edge puts
both on the request scope; stdio and tests supply their own) and hand the call
to the dispatcher. This module only translates between the dispatcher's
outcomes and MCP wire types.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_expose import __version__
from mcp_expose.access.policy import decide, visible_tools
from mcp_expose.calls.app_pages import pages_for
from mcp_expose.calls.dispatch import CallRequest, ToolOutcome, call_tool
from mcp_expose.calls.listing_count import ListingTally
from mcp_expose.calls.reading import ReadFailed, UnknownPrompt, UnknownResource, complete, get_prompt, read_resource
from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.catalog.memo import MemoKind
from mcp_expose.core import telemetry
from mcp_expose.core.asking import ClientInput
from mcp_expose.core.chain import read_chain
from mcp_expose.core.conf import get_settings
from mcp_expose.core.context import no_progress
from mcp_expose.core.endpoints import Endpoint, default_endpoint
from mcp_expose.core.errors import InvalidInput, UnknownTool
from mcp_expose.core.principal import Principal
from mcp_expose.declare.apps import EXTENSION_ID, URI_PREFIX, apps_negotiated
from mcp_expose.declare.json_schemas import thaw
from mcp_expose.declare.uri_templates import is_template
from mcp_expose.serving.app_pages import page_listing, read_page
from mcp_expose.serving.events import audience_of
from mcp_expose.serving.listening import BoundedListen
from mcp_expose.serving.request_context import (
    SDK_CALLER,
    Resolver,
    back_channel,
    base_url_of,
    client_address,
    log_sender,
    resolve_from_scope,
    session_id_of,
    tool_headers_of,
)
from mcp_expose.serving.server_middleware import (
    around_sdk_span,
    asks_in_rounds,
    hide_internal_errors,
    refuse_bad_chains,
    refuse_streams,
    remember_session,
    request_state_security,
)
from mcp_expose.serving.sessions import SessionMemory
from mcp_expose.serving.tasks import client_supports_tasks, register_task_methods, start_task
from mcp_expose.serving.wire import (
    caller_definitions,
    message_content,
    prompt_definition,
    read_error,
    render_outcome,
    resource_contents,
    tool_definition,
)

logger = logging.getLogger("mcp_expose.server")
# The wire definition of each tool, by whether the client negotiated MCP Apps (which adds `_meta.ui`).
TOOL_DEFINITIONS: MemoKind[bool, dict[str, types.Tool]] = MemoKind("tool definitions", limit=2)


def _refuse_cursor(params: types.PaginatedRequestParams | None) -> None:
    if params is not None and params.cursor is not None:
        # Every list fits in one page, so no cursor was ever issued.
        raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor")


def build_server(
    *,
    resolve: Resolver = resolve_from_scope,
    base_url: str = "",
    subscription_bus: Any = None,
    stateful_legacy: bool = False,
    sessions: SessionMemory | None = None,
    endpoint: Endpoint | None = None,
    streams: bool = True,
) -> Server[Any]:
    """A low-level SDK server serving the catalog through the dispatcher.

    `base_url` is used for links (approval pages) when there is no HTTP request to take it from (stdio).
    `stateful_legacy` adds what only a 2025-11-25 session can use: `logging/setLevel` and resource
    subscriptions (stdio, and HTTP with `LEGACY_SESSIONS`).
    """
    serving: Endpoint = endpoint if endpoint is not None else default_endpoint()
    conf = get_settings()
    sessions = sessions if sessions is not None else SessionMemory()

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        _refuse_cursor(params)
        principal, catalog = await resolve(ctx)
        await count_listing()
        apps = apps_negotiated(ctx.session.client_capabilities)
        definitions = catalog.remember(
            TOOL_DEFINITIONS, apps, lambda: {e.name: tool_definition(e, apps=apps) for e in catalog.tools}
        )
        visible = visible_tools(catalog, principal, apps=apps)
        varying = any(entry.varies_by_caller for entry in visible)
        own = await caller_definitions(visible, principal, apps) if varying else {}
        tools = [own.get(entry.name) or definitions[entry.name] for entry in visible]
        return types.ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")

    def call_request(
        ctx: ServerRequestContext[Any], params: types.InputResponseRequestParams, allowed: ToolEntry | None = None
    ) -> CallRequest:
        """Everything the dispatcher needs to know about this request beyond its name and arguments."""
        headers = tool_headers_of(ctx)
        client = ClientInput.for_round(
            ctx.session.client_capabilities,
            params.request_state,
            params.input_responses,
            rounds=ctx.protocol_version in MODERN_PROTOCOL_VERSIONS,
            back_channel=back_channel(ctx),
        )
        return CallRequest(
            protocol_version=ctx.protocol_version,
            headers=headers,
            report_progress=ctx.session.report_progress if _asks_progress(params) else no_progress,
            send_log=log_sender(ctx, sessions),
            close_stream=ctx.close_sse_stream,
            chain=read_chain(headers),
            client=client,
            request_state=params.request_state,
            base_url=base_url_of(ctx) or base_url,
            client_address=client_address(ctx),
            start_task=functools.partial(start_task, endpoint=serving.name) if client_supports_tasks(ctx) else None,
            allowed=allowed,
        )

    async def call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        principal, catalog = await resolve(ctx)
        caller = SDK_CALLER.get()  # the policy allowed the tool already when the SDK asked for its schema
        allowed = caller.allowed_for(principal, catalog) if caller is not None else None
        return await answer_call(catalog, principal, params.name, params.arguments, call_request(ctx, params, allowed))

    async def list_resources(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        _refuse_cursor(params)
        principal, catalog = await resolve(ctx)
        resources = [
            types.Resource(
                uri=entry.uri,
                name=entry.name,
                title=entry.title,
                description=entry.description or None,
                mime_type=entry.capability.mime_type,
            )
            for entry in catalog.resources
            if not is_template(entry.uri) and decide(principal, entry).allowed
        ]
        if apps_negotiated(ctx.session.client_capabilities):
            resources += [page_listing(page) for page in pages_for(catalog, principal)]
        return types.ListResourcesResult(resources=resources, ttl_ms=0, cache_scope="private")

    async def list_resource_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> Any:
        _refuse_cursor(params)
        principal, catalog = await resolve(ctx)
        templates = [
            types.ResourceTemplate(
                uri_template=entry.uri,
                name=entry.name,
                title=entry.title,
                description=entry.description or None,
                mime_type=entry.capability.mime_type,
            )
            for entry in catalog.resources
            if is_template(entry.uri) and decide(principal, entry).allowed
        ]
        return types.ListResourceTemplatesResult(resource_templates=templates, ttl_ms=0, cache_scope="private")

    async def read(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> Any:
        principal, catalog = await resolve(ctx)
        uri = str(params.uri)
        if uri.startswith(URI_PREFIX) and apps_negotiated(ctx.session.client_capabilities):
            return await read_page(catalog, principal, uri)
        try:
            entry, value = await read_resource(catalog, principal, uri, call_request(ctx, params))
        except UnknownResource:
            raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri}) from None
        except InvalidInput as exc:
            raise MCPError(
                code=types.INVALID_PARAMS, message=exc.message, data={"uri": uri, "details": exc.details}
            ) from None
        except ReadFailed as exc:
            raise read_error(exc.failure, {"uri": uri}) from None
        return types.ReadResourceResult(
            contents=[resource_contents(uri, value, entry.capability.mime_type)], ttl_ms=0, cache_scope="private"
        )

    async def list_prompts(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        _refuse_cursor(params)
        principal, catalog = await resolve(ctx)
        prompts = [prompt_definition(entry) for entry in catalog.prompts if decide(principal, entry).allowed]
        return types.ListPromptsResult(prompts=prompts, ttl_ms=0, cache_scope="private")

    async def get(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> Any:
        principal, catalog = await resolve(ctx)
        try:
            entry, found = await get_prompt(
                catalog, principal, params.name, params.arguments, call_request(ctx, params)
            )
        except UnknownPrompt as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        except InvalidInput as exc:
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid prompt arguments", data=exc.details) from None
        except ReadFailed as exc:
            raise read_error(exc.failure, {"prompt": params.name}) from None
        return types.GetPromptResult(
            description=entry.description or None,
            messages=[types.PromptMessage(role=m.role, content=message_content(m.content)) for m in found],
        )

    async def completion(ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> Any:
        principal, catalog = await resolve(ctx)
        ref = params.ref
        values, total = await complete(
            catalog,
            principal,
            prompt=getattr(ref, "name", None) if ref.type == "ref/prompt" else None,
            uri=getattr(ref, "uri", None) if ref.type == "ref/resource" else None,
            argument=params.argument.name,
            prefix=params.argument.value,
        )
        return types.CompleteResult(
            completion=types.Completion(values=values, total=total, has_more=total > len(values))
        )

    async def set_log_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> Any:
        """2025-11-25 only: later log messages to this session start at this level."""
        sessions.get(session_id_of(ctx)).log_level = params.level
        return types.EmptyResult()

    async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> Any:
        """2025-11-25 only: remember the subscription (a resource the caller can read)."""
        principal, catalog = await resolve(ctx)
        uri = str(params.uri)
        found = catalog.find_resource(uri)
        if found is None or not decide(principal, found[0]).allowed:
            raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri})
        try:
            sessions.subscribe(session_id_of(ctx), uri)
        except ValueError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc), data={"uri": uri}) from None
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> Any:
        sessions.unsubscribe(session_id_of(ctx), str(params.uri))
        return types.EmptyResult()

    def input_schema_for(name: str) -> Mapping[str, Any] | None:
        # Used by the SDK only to check `Mcp-Param-*` headers. A tool the caller may not call has no schema for
        # it: its headers go unchecked, and the call is answered as any unknown name is.
        caller = SDK_CALLER.get()
        if caller is None:
            return None
        deciding = telemetry.now() if caller.timed else 0
        entry = caller.catalog.get(name)
        if entry is None or not decide(caller.principal, entry).allowed:
            return None
        caller.allowed = entry  # the call that follows is not decided again
        if deciding:
            caller.laps.append(telemetry.Lap("mcp_expose.policy", deciding, telemetry.now(), {}))
        # (A view whose schema varies by caller declares no header-bound argument, so its schema for nobody serves.)
        return thaw(entry.input_schema)

    server = Server(
        serving.server_name,
        version=__version__,
        title=serving.server_title,
        instructions=serving.instructions,
        on_list_tools=list_tools,
        on_call_tool=asks_in_rounds(call),
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=asks_in_rounds(read),
        on_list_prompts=list_prompts,
        on_get_prompt=asks_in_rounds(get),
        on_completion=completion,
        on_subscriptions_listen=BoundedListen(subscription_bus, resolve) if subscription_bus is not None else None,
        get_tool_input_schema=input_schema_for,
    )
    # Inside the SDK's span (the middleware it ships), so that it records the incident id, never an exception's text.
    around_sdk_span(server.middleware, hide_internal_errors)
    if conf.TASKS:
        register_task_methods(server, resolve, serving.name)
    if conf.APPS:
        server.extensions[EXTENSION_ID] = {}
    if stateful_legacy:
        # Registered directly: these 2025-11-25 methods are gone from 2026-07-28, where the SDK answers 404.
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_log_level)
        server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
        server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
        audience = audience_of(subscription_bus) if subscription_bus is not None else None
        server.middleware.append(functools.partial(remember_session, sessions, audience))
    server.middleware.append(refuse_bad_chains)
    if not streams:
        server.middleware.append(refuse_streams)
    server.middleware.append(RequestStateBoundary(request_state_security(), default_audience=serving.server_name))
    return server


async def answer_call(
    catalog: Catalog, principal: Principal, name: str, arguments: Mapping[str, Any] | None, request: CallRequest
) -> Any:
    """A tools/call through the dispatcher, as its result (a tool the caller may not use: -32602)."""
    return render_outcome(await call_outcome(catalog, principal, name, arguments, request))


async def call_outcome(
    catalog: Catalog, principal: Principal, name: str, arguments: Mapping[str, Any] | None, request: CallRequest
) -> ToolOutcome:
    """A tools/call through the dispatcher, as its outcome (a tool the caller may not use: -32602)."""
    try:
        return await call_tool(catalog, principal, name, arguments, request)
    except UnknownTool as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None


listing_tally = ListingTally()


async def count_listing() -> None:
    await listing_tally.count()  # never raises: what cannot be written now is kept for the next flush


def _asks_progress(params: types.RequestParams) -> bool:
    """Whether the request carries a progress token: only then is there anyone to report progress to."""
    meta = params.meta or {}
    return meta.get("progress_token", meta.get("progressToken")) is not None
