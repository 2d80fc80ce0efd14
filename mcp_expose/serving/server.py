"""The MCP side: the SDK's low-level `Server` with our handlers.

Handlers get the caller and the catalog from a resolver (the ASGI edge puts
both on the request scope; stdio and tests supply their own) and hand the call
to the dispatcher. This module only translates between the dispatcher's
outcomes and MCP wire types.
"""

from __future__ import annotations

import base64
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from mcp.server import Server, ServerRequestContext
from mcp.server.connection import allowed_log_levels
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_expose import __version__
from mcp_expose.access.policy import decide, visible_tools
from mcp_expose.access.protected_resource import request_origin
from mcp_expose.calls.confirmation import StaleConfirmation
from mcp_expose.calls.dispatch import CallRequest, ToolOutcome, call_tool
from mcp_expose.calls.listing_count import ListingTally
from mcp_expose.calls.reading import ReadFailed, UnknownPrompt, UnknownResource, complete, get_prompt, read_resource
from mcp_expose.calls.results import compact_json, structured
from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.core.asking import Answer, BackChannel, ClientInput, InputRequired, MissingClientCapability, Question
from mcp_expose.core.chain import InvalidChain, read_chain
from mcp_expose.core.conf import get_settings
from mcp_expose.core.content import Audio, ContentBundle, EmbeddedResource, Image, Text
from mcp_expose.core.context import LogSender
from mcp_expose.core.db import tidies_connections
from mcp_expose.core.errors import InvalidInput, UnknownTool
from mcp_expose.core.principal import PRINCIPAL_SCOPE_KEY, Principal
from mcp_expose.core.requests import WITHHELD_HEADERS
from mcp_expose.declare.json_schemas import thaw
from mcp_expose.declare.uri_templates import is_template
from mcp_expose.serving.events import Audience, audience_of
from mcp_expose.serving.listening import BoundedListen
from mcp_expose.serving.sessions import SessionMemory

logger = logging.getLogger("mcp_expose.server")

CATALOG_SCOPE_KEY = "mcp_expose.catalog"
# The caller and catalog of the HTTP request the SDK is answering, for what the SDK asks with a name only.
SDK_CALLER: ContextVar[tuple[Principal, Catalog] | None] = ContextVar("mcp_expose.sdk_caller", default=None)

Resolver = Callable[[ServerRequestContext[Any]], Awaitable[tuple[Principal, Catalog]]]
Handler = Callable[[ServerRequestContext[Any], Any], Awaitable[Any]]


async def resolve_from_scope(ctx: ServerRequestContext[Any]) -> tuple[Principal, Catalog]:
    """The caller and catalog the ASGI edge attached to this HTTP request."""
    scope = ctx.request.scope if ctx.request is not None else {}
    try:
        return scope[PRINCIPAL_SCOPE_KEY], scope[CATALOG_SCOPE_KEY]
    except KeyError:
        # Only reachable if the SDK app is mounted without our edge in front of it.
        raise MCPError(code=types.INTERNAL_ERROR, message="Request reached the MCP server unauthenticated") from None


def _refuse_cursor(params: types.PaginatedRequestParams | None) -> None:
    if params is not None and params.cursor is not None:
        # Every list fits in one page, so no cursor was ever issued.
        raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor")


def _read_error(failure: Any, data: dict[str, Any]) -> MCPError:
    """A failed read or prompt: not found is -32602 (as the spec asks), anything else -32603 with a safe message."""
    if failure.code == "not_found":
        return MCPError(code=types.INVALID_PARAMS, message="Resource not found", data=data)
    detail = {**data, "code": failure.code}
    if failure.incident:
        detail["incident"] = failure.incident
    return MCPError(code=types.INTERNAL_ERROR, message=failure.message, data=detail)


def prompt_definition(entry: ToolEntry) -> types.Prompt:
    schema = entry.input_schema
    required = set(schema.get("required", ()))
    arguments = [
        types.PromptArgument(name=name, description=spec.get("description"), required=name in required)
        for name, spec in schema.get("properties", {}).items()
    ]
    return types.Prompt(name=entry.name, title=entry.title, description=entry.description or None,
                        arguments=arguments or None)


def tool_definition(entry: ToolEntry, input_schema: Mapping[str, Any] | None = None) -> types.Tool:
    """The tool as `tools/list` sends it; `input_schema` is the caller's, for a tool whose schema varies."""
    annotations = entry.annotations.as_dict()
    return types.Tool(
        name=entry.name,
        title=entry.title,
        description=entry.description or None,
        input_schema=thaw(input_schema if input_schema is not None else entry.input_schema),
        output_schema=thaw(entry.output_schema) if entry.output_schema is not None else None,
        annotations=types.ToolAnnotations.model_validate(annotations) if annotations else None,
    )


@sync_to_async(thread_sensitive=False)
@tidies_connections
def caller_definitions(entries: Iterable[ToolEntry], principal: Principal) -> dict[str, types.Tool]:
    """The definitions of the tools whose schema depends on who calls, made for `principal` (in a worker
    thread: the view's code runs to tell)."""
    return {entry.name: tool_definition(entry, entry.input_schema_for(principal))
            for entry in entries if entry.varies_by_caller}


def render_outcome(outcome: ToolOutcome) -> types.CallToolResult | types.InputRequiredResult:
    """A dispatcher outcome as a `CallToolResult` (structured content plus the same JSON as text),
    or the questions a client must answer first."""
    if outcome.input_required is not None:
        return outcome.input_required.as_result()
    if isinstance(outcome.value, ContentBundle):
        return types.CallToolResult(content=[content_block(item) for item in outcome.value.items])
    content, text, is_error = json_outcome(outcome)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=content, is_error=is_error)


def json_outcome(outcome: ToolOutcome) -> tuple[dict[str, Any], str, bool]:
    """A value's or a failure's structured content, the same JSON as text, and whether it is an error."""
    if outcome.failure is not None:
        payload = {"error": outcome.failure.as_dict()}
        return payload, compact_json(payload), True
    content = structured(outcome.value)
    return content, outcome.text if outcome.text is not None and content is outcome.value else compact_json(content), False


def content_block(item: Any) -> Any:
    """One of our content items as the SDK's content block."""
    if isinstance(item, Text):
        return types.TextContent(text=item.text)
    if isinstance(item, Image):
        return types.ImageContent(data=_b64(item.data), mime_type=item.mime_type)
    if isinstance(item, Audio):
        return types.AudioContent(data=_b64(item.data), mime_type=item.mime_type)
    if isinstance(item, EmbeddedResource):
        return types.EmbeddedResource(resource=resource_contents(item.uri, item.text if item.text is not None else item.blob,
                                                                 item.mime_type))
    return types.ResourceLink(uri=item.uri, name=item.name, description=item.description, mime_type=item.mime_type)


def resource_contents(uri: str, value: Any, mime_type: str | None) -> Any:
    """Text stays text, bytes travel as base64, anything else as JSON."""
    if isinstance(value, bytes | bytearray):
        return types.BlobResourceContents(uri=uri, blob=_b64(bytes(value)), mime_type=mime_type or "application/octet-stream")
    if isinstance(value, str):
        return types.TextResourceContents(uri=uri, text=value, mime_type=mime_type or "text/plain")
    return types.TextResourceContents(uri=uri, text=compact_json(value), mime_type=mime_type or "application/json")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def build_server(
    *,
    resolve: Resolver = resolve_from_scope,
    base_url: str = "",
    subscription_bus: Any = None,
    stateful_legacy: bool = False,
    sessions: SessionMemory | None = None,
) -> Server[Any]:
    """A low-level SDK server serving the catalog through the dispatcher.

    `base_url` is used for links (approval pages) when there is no HTTP request to take it from (stdio).
    `stateful_legacy` adds what only a 2025-11-25 session can use: `logging/setLevel` and resource
    subscriptions (stdio, and HTTP with `LEGACY_SESSIONS`).
    """
    conf = get_settings()
    sessions = sessions if sessions is not None else SessionMemory()

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        _refuse_cursor(params)
        principal, catalog = await resolve(ctx)
        await count_listing()
        definitions = catalog.remember("tool_definitions", lambda: {e.name: tool_definition(e) for e in catalog.tools})
        visible = visible_tools(catalog, principal)
        own = await caller_definitions(visible, principal) if any(entry.varies_by_caller for entry in visible) else {}
        tools = [own.get(entry.name) or definitions[entry.name] for entry in visible]
        return types.ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")

    def call_request(ctx: ServerRequestContext[Any], params: types.InputResponseRequestParams) -> CallRequest:
        """Everything the dispatcher needs to know about this request beyond its name and arguments."""
        headers = _headers(ctx)
        client = ClientInput.for_round(
            ctx.session.client_capabilities, params.request_state, params.input_responses,
            rounds=ctx.protocol_version in MODERN_PROTOCOL_VERSIONS, back_channel=_back_channel(ctx),
        )
        return CallRequest(
            protocol_version=ctx.protocol_version,
            headers=headers,
            report_progress=ctx.session.report_progress,
            send_log=_log_sender(ctx, sessions),
            close_stream=ctx.close_sse_stream,
            chain=read_chain(headers),
            client=client,
            request_state=params.request_state,
            base_url=_base_url(ctx) or base_url,
            client_address=_client_address(ctx),
        )

    async def call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        principal, catalog = await resolve(ctx)
        return await answer_call(catalog, principal, params.name, params.arguments, call_request(ctx, params))

    async def list_resources(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        _refuse_cursor(params)
        principal, catalog = await resolve(ctx)
        resources = [
            types.Resource(uri=entry.uri, name=entry.name, title=entry.title, description=entry.description or None,
                           mime_type=entry.capability.mime_type)
            for entry in catalog.resources if not is_template(entry.uri) and decide(principal, entry).allowed
        ]
        return types.ListResourcesResult(resources=resources, ttl_ms=0, cache_scope="private")

    async def list_resource_templates(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        _refuse_cursor(params)
        principal, catalog = await resolve(ctx)
        templates = [
            types.ResourceTemplate(uri_template=entry.uri, name=entry.name, title=entry.title,
                                   description=entry.description or None, mime_type=entry.capability.mime_type)
            for entry in catalog.resources if is_template(entry.uri) and decide(principal, entry).allowed
        ]
        return types.ListResourceTemplatesResult(resource_templates=templates, ttl_ms=0, cache_scope="private")

    async def read(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> Any:
        principal, catalog = await resolve(ctx)
        uri = str(params.uri)
        try:
            entry, value = await read_resource(catalog, principal, uri, call_request(ctx, params))
        except UnknownResource:
            raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri}) from None
        except InvalidInput as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=exc.message, data={"uri": uri, "details": exc.details}) from None
        except ReadFailed as exc:
            raise _read_error(exc.failure, {"uri": uri}) from None
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
            entry, found = await get_prompt(catalog, principal, params.name, params.arguments, call_request(ctx, params))
        except UnknownPrompt as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        except InvalidInput as exc:
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid prompt arguments", data=exc.details) from None
        except ReadFailed as exc:
            raise _read_error(exc.failure, {"prompt": params.name}) from None
        return types.GetPromptResult(
            description=entry.description or None,
            messages=[types.PromptMessage(role=m.role, content=_message_content(m.content)) for m in found],
        )

    async def completion(ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> Any:
        principal, catalog = await resolve(ctx)
        ref = params.ref
        values, total = await complete(
            catalog, principal,
            prompt=getattr(ref, "name", None) if ref.type == "ref/prompt" else None,
            uri=getattr(ref, "uri", None) if ref.type == "ref/resource" else None,
            argument=params.argument.name, prefix=params.argument.value,
        )
        return types.CompleteResult(completion=types.Completion(values=values, total=total, has_more=total > len(values)))

    async def set_log_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> Any:
        """2025-11-25 only: later log messages to this session start at this level."""
        sessions.get(_session_id(ctx)).log_level = params.level
        return types.EmptyResult()

    async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> Any:
        """2025-11-25 only: remember the subscription (a resource the caller can read)."""
        principal, catalog = await resolve(ctx)
        uri = str(params.uri)
        found = catalog.find_resource(uri)
        if found is None or not decide(principal, found[0]).allowed:
            raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri})
        try:
            sessions.subscribe(_session_id(ctx), uri)
        except ValueError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc), data={"uri": uri}) from None
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> Any:
        sessions.unsubscribe(_session_id(ctx), str(params.uri))
        return types.EmptyResult()

    def input_schema_for(name: str) -> Mapping[str, Any] | None:
        # Used by the SDK only to check `Mcp-Param-*` headers. A tool the caller may not call has no schema for
        # it: its headers go unchecked, and the call is answered as any unknown name is.
        caller = SDK_CALLER.get()
        if caller is None:
            return None
        principal, catalog = caller
        entry = catalog.get(name)
        # (A view whose schema varies by caller declares no header-bound argument, so its schema for nobody serves.)
        return thaw(entry.input_schema) if entry is not None and decide(principal, entry).allowed else None

    server = Server(
        conf.SERVER_NAME,
        version=__version__,
        title=conf.SERVER_TITLE,
        instructions=conf.INSTRUCTIONS,
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
    if stateful_legacy:
        # Registered directly: these 2025-11-25 methods are gone from 2026-07-28, where the SDK answers 404.
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_log_level)
        server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
        server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
        audience = audience_of(subscription_bus) if subscription_bus is not None else None
        server.middleware.append(functools.partial(remember_session, sessions, audience))
    server.middleware.insert(0, hide_internal_errors)
    server.middleware.append(refuse_bad_chains)
    server.middleware.append(RequestStateBoundary(request_state_security(), default_audience=conf.SERVER_NAME))
    return server


async def hide_internal_errors(ctx: ServerRequestContext[Any], call_next: Any) -> Any:
    """Every request: an unexpected exception in our handlers reaches the client as a plain internal
    error with an incident id, never as its own text (the 2025-11-25 runner would send that verbatim)."""
    try:
        return await call_next(ctx)
    except (MCPError, ValidationError):
        raise  # protocol errors, and malformed params the SDK answers with -32602
    except Exception:
        raise internal_error(ctx.method) from None


def internal_error(method: str) -> MCPError:
    """-32603 with an incident id, for an unexpected exception being handled (logged with its traceback)."""
    incident = uuid.uuid4().hex[:16]
    logger.exception("MCP request %s failed unexpectedly (incident %s)", method, incident)
    return MCPError(
        code=types.INTERNAL_ERROR, message="Internal error. Quote the incident id when reporting this.",
        data={"incident": incident},
    )


async def answer_call(
    catalog: Catalog, principal: Principal, name: str, arguments: Mapping[str, Any] | None, request: CallRequest
) -> types.CallToolResult | types.InputRequiredResult:
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


async def remember_session(
    sessions: SessionMemory, audience: Audience | None, ctx: ServerRequestContext[Any], call_next: Any
) -> Any:
    """Stateful 2025-11-25 requests: keep a way to reach the session's standing stream (list changes), and tell
    the change relay which catalog revision the session has seen."""
    session_id = _session_id(ctx)
    if session_id is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        sessions.saw(session_id, ctx.session)
        catalog = ctx.request.scope.get(CATALOG_SCOPE_KEY) if ctx.request is not None else None
        if audience is not None and catalog is not None:
            audience.started_at(catalog.revision)
    return await call_next(ctx)


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


listing_tally = ListingTally()


async def count_listing() -> None:
    await listing_tally.count()  # never raises: what cannot be written now is kept for the next flush


def asks_in_rounds(handler: Handler) -> Handler:
    """The three methods that may ask the client (tools/call, resources/read, prompts/get), in protocol terms:
    questions become an `input_required` result, an undeclared capability -32021, and a request state
    already used (a replay) or naming a confirmation no longer pending -32602, as the SDK answers a state
    that fails its seal."""

    @functools.wraps(handler)
    async def answered(ctx: ServerRequestContext[Any], params: Any) -> Any:
        try:
            return await handler(ctx, params)
        except InputRequired as exc:
            return exc.as_result()
        except (MissingClientCapability, StaleConfirmation) as exc:
            raise question_error(exc) from None

    return answered


def question_error(exc: MissingClientCapability | StaleConfirmation) -> MCPError:
    """The protocol error for a question the client cannot answer, or a round already answered."""
    if isinstance(exc, MissingClientCapability):
        return MCPError(code=types.MISSING_REQUIRED_CLIENT_CAPABILITY, message=str(exc), data=exc.error_data())
    return MCPError(code=types.INVALID_PARAMS, message="Invalid or expired requestState",
                    data={"reason": "invalid_request_state"})


def _back_channel(ctx: ServerRequestContext[Any]) -> BackChannel | None:
    """On a 2025-11-25 connection that can carry server requests: send a question on this request's stream."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or not ctx.session.can_send_request:
        return None
    metadata = ServerMessageMetadata(related_request_id=ctx.request_id)

    async def send(question: Question) -> Answer:
        return await ctx.session.send_request(question.as_request(), question.answer_type, metadata=metadata)

    return send


def _log_sender(ctx: ServerRequestContext[Any], sessions: SessionMemory) -> LogSender:
    """Log messages ride this request's stream: on 2026-07-28 only at or above the level the request
    asked for (none when it asked for none); on 2025-11-25 at or above the session's level."""
    allowed = allowed_log_levels(ctx.protocol_version, ctx.meta)
    session_id = _session_id(ctx)
    legacy = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS

    async def send(level: str, data: Any) -> None:
        if level not in allowed or (legacy and not sessions.allows(session_id, level)):
            return
        notification = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level=level, data=data)
        )
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

    return send


def _session_id(ctx: ServerRequestContext[Any]) -> str | None:
    """The legacy session this request belongs to (None on stdio, which is one session)."""
    return ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None


def _message_content(content: Any) -> Any:
    return types.TextContent(text=content) if isinstance(content, str) else content_block(content)


def _client_address(ctx: ServerRequestContext[Any]) -> str | None:
    client = ctx.request.client if ctx.request is not None else None
    return client.host if client is not None else None


def _base_url(ctx: ServerRequestContext[Any]) -> str:
    if ctx.request is None:
        return ""
    # The scope's scheme is what `request.url.scheme` says, without building and parsing the whole URL.
    return request_origin(ctx.request.scope.get("scheme", "http"), _headers(ctx))


def _headers(ctx: ServerRequestContext[Any]) -> Mapping[str, str]:
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
