"""The ASGI entry: the MCP endpoint in front of Django.

`get_asgi_application()` returns an app that serves the MCP path itself (edge
checks, authentication, then the SDK's Streamable HTTP manager) and hands
every other request to Django. It owns the lifespan, which Django refuses, and
starts the SDK manager on first use when the server sends no lifespan events.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from functools import partial
from typing import cast
from urllib.parse import parse_qsl

import anyio
from django.core.exceptions import ImproperlyConfigured
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.subscriptions import InMemorySubscriptionBus
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_expose.access.authenticators import get_authenticators
from mcp_expose.access.credential_cache import CREDENTIALS_KEY
from mcp_expose.access.credentials import authenticate, authenticate_known
from mcp_expose.access.failures import AuthFailure
from mcp_expose.access.protected_resource import (
    PRM_PREFIX,
    bearer_challenge,
    protected_resource_metadata,
    request_origin,
    resource_uri,
)
from mcp_expose.access.stepup import may_be_tool_call, missing_scopes, tool_call_name
from mcp_expose.calls import usage_writer
from mcp_expose.catalog.compiled import Catalog, CatalogProvider
from mcp_expose.catalog.compiled import provider as default_provider
from mcp_expose.catalog.revision import REVISION_KEY, keep_auditing, local_stamp_cache, read_stamps
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import in_worker_thread
from mcp_expose.core.endpoints import Endpoint, endpoints
from mcp_expose.core.principal import PRINCIPAL_SCOPE_KEY, Principal
from mcp_expose.serving import fastpath, fastpath_legacy, fastpath_requests, sdk_internals
from mcp_expose.serving.draining import end_streams_on_stop, server_stopping
from mcp_expose.serving.edge import check_host, check_request
from mcp_expose.serving.edge_failures import answering_failures
from mcp_expose.serving.events import ChangeRelay
from mcp_expose.serving.health import health_paths, serve_health
from mcp_expose.serving.listening import end_streams
from mcp_expose.serving.request_context import CATALOG_SCOPE_KEY, SDK_CALLER, SdkCaller
from mcp_expose.serving.server import build_server, listing_tally
from mcp_expose.serving.sessions import RecentEvents, SessionManager, SessionMemory
from mcp_expose.serving.upstream_tasks import close_upstream_connections, watch_upstreams

logger = logging.getLogger("mcp_expose.asgi")
QueryPairs = tuple[tuple[str, str], ...]
# How soon a 2025-11-25 client reconnects to a stream the server closed (SSE `retry`), in milliseconds.
LEGACY_RETRY_MS = 500


def get_asgi_application(django_app: ASGIApp | None = None) -> McpExposeASGI:
    """Wrap Django's ASGI app (or `django_app`) with the MCP endpoint."""
    if django_app is None:
        from django.core.asgi import get_asgi_application as django_asgi

        return McpExposeASGI(cast(ASGIApp, django_asgi()))
    return McpExposeASGI(django_app)


class EndpointServing:
    """One endpoint's SDK server and session manager: its own server name and instructions."""

    def __init__(
        self, endpoint: Endpoint, *, bus: InMemorySubscriptionBus | None, sessions: SessionMemory | None, json: bool
    ) -> None:
        conf = get_settings()
        stateful = sessions is not None
        self.endpoint = endpoint
        self.manager = SessionManager(
            app=build_server(
                subscription_bus=bus,
                stateful_legacy=stateful,
                sessions=sessions,
                endpoint=endpoint,
                streams=bus is not None,
            ),
            json_response=json,
            # By default the legacy (2025-11-25) path runs stateless too: any worker can answer any request.
            stateless=not stateful,
            event_store=RecentEvents() if stateful else None,
            retry_interval=LEGACY_RETRY_MS if stateful else None,
            # Host and Origin are checked by our edge against Django's settings.
            security_settings=None,
            max_request_body_size=conf.MAX_REQUEST_BODY_SIZE,
        )
        self.mcp_app = AuthContextMiddleware(StreamableHTTPASGIApp(self.manager))


class McpExposeASGI:
    """`streams=False` serves only what fits one request and one response (the WSGI entry's mode): JSON answers,
    stateless 2025-11-25, and a clear refusal naming the ASGI entry for whatever needs a stream."""

    def __init__(self, django_app: ASGIApp, *, provider: CatalogProvider | None = None, streams: bool = True) -> None:
        self.django_app = django_app
        self.provider = provider if provider is not None else default_provider
        conf = get_settings()
        self.streams = streams
        self.endpoints = endpoints()
        self.path = self.endpoints[0].path
        self.health = health_paths(self.path, conf.HEALTH_PATH)
        # Stateful only while the SDK still has what the sessions override (else one warning, and stateless).
        self.stateful = conf.LEGACY_SESSIONS and streams and sdk_internals.sessions_can_be_stateful()
        self.json_response = conf.JSON_RESPONSE or not streams
        sessions = SessionMemory() if self.stateful else None
        self.bus = InMemorySubscriptionBus()
        self.relay = ChangeRelay(self.bus, sessions)
        self.servings = [
            EndpointServing(endpoint, bus=self.bus if streams else None, sessions=sessions, json=self.json_response)
            for endpoint in self.endpoints
        ]
        self.routes: dict[str, EndpointServing] = {}
        self.metadata_routes: dict[str, Endpoint] = {PRM_PREFIX: self.endpoints[0]}
        for serving in self.servings:
            self.routes[serving.endpoint.path] = self.routes[serving.endpoint.path + "/"] = serving
            self.metadata_routes[PRM_PREFIX + serving.endpoint.path] = serving.endpoint
        # The default endpoint's manager: what tests and the fast path's checks of the SDK look at.
        self.manager = self.servings[0].manager
        if conf.FAST_PATH:
            fastpath_requests.usable()  # checks the SDK pieces it borrows now, so that one missing is told at startup
        self._started = asyncio.Event()
        self._start_lock = asyncio.Lock()
        self._background: asyncio.Task[None] | None = None
        self._exit = asyncio.Event()
        self._stop_announced = False
        self._authenticate_in_thread = in_worker_thread(self._authenticate)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http" and scope["path"] in self.routes:
            await answering_failures(partial(self._serve_mcp, self.routes[scope["path"]]), scope, receive, send)
        elif scope["type"] == "http" and self.health is not None and scope["path"] in self.health:
            await serve_health(scope, receive, send, deep=scope["path"] == self.health[1], relay=self.relay)
        elif scope["type"] == "http" and scope["path"] in self.metadata_routes:
            endpoint = self.metadata_routes[scope["path"]]
            await answering_failures(partial(self._serve_metadata, endpoint), scope, receive, send)
        else:
            await self.django_app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with contextlib.AsyncExitStack() as stack:
            try:
                await in_worker_thread(self._resolve_declarations, shared_thread=True)()
                await stack.enter_async_context(self._serving())
                stack.push_async_callback(close_upstream_connections)
                # Usage rows in batches only where a shutdown is announced, so that it can write the last ones.
                if usage_writer.start(get_settings().USAGE_BATCH_SECONDS) is not None:
                    stack.push_async_callback(_write_queued_usage)
            except Exception as exc:
                logger.exception("MCP session manager failed to start")
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            self._started.set()
            if get_settings().FREEZE_GC:
                # Everything loaded so far lives as long as the process: keep the collector from scanning it
                # again on every full collection (a few percent of each request's CPU time otherwise).
                gc.collect()  # what startup threw away (schemas' throwaway models) first, or it would stay forever
                gc.freeze()
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})

    def begin_stopping(self) -> None:
        """Say that the server is about to stop, so that open listen streams end (each with its result) and the
        server's wait for open responses ends. uvicorn's own stop is seen without this; call it where the server
        cannot be seen stopping (an embedded server, a custom shutdown trigger). Safe from any thread."""
        self._stop_announced = True

    def _stopping(self) -> bool:
        return self._stop_announced or server_stopping()

    def _resolve_declarations(self) -> None:
        """Build every tool's schema and the authenticators now, so a broken declaration or authenticator stops
        the server instead of failing requests."""
        get_authenticators()
        problems = self.provider.registry.resolution_problems()
        if problems:
            raise ImproperlyConfigured(
                "MCP declarations cannot be served:\n"
                + "\n".join(f"  [{pid}] {message}" for pid, message, _ in problems)
            )

    async def _ensure_started(self) -> None:
        """Start the manager for servers that send no lifespan events (daphne, runserver)."""
        if self._started.is_set():
            return
        async with self._start_lock:
            if self._started.is_set():
                return
            self._background = asyncio.get_running_loop().create_task(self._run_manager_until_exit())
            await self._started.wait()

    async def _run_manager_until_exit(self) -> None:
        async with self._serving():
            self._started.set()
            await self._exit.wait()

    @contextlib.asynccontextmanager
    async def _serving(self) -> AsyncIterator[None]:
        """The SDK's session manager, and the relay that feeds catalog changes to listen streams."""
        async with contextlib.AsyncExitStack() as managers:
            # Each manager's own task group opens before ours and closes after it (cancel scopes nest).
            for serving in self.servings:
                await managers.enter_async_context(serving.manager.run())
            async with anyio.create_task_group() as group:
                if self.streams:
                    group.start_soon(self.relay.run)
                    group.start_soon(end_streams_on_stop, partial(end_streams, self.bus), self._stopping)
                group.start_soon(listing_tally.keep_flushing)
                group.start_soon(keep_auditing)
                conf = get_settings()
                if conf.UPSTREAM_DISCOVERY_INTERVAL or conf.UPSTREAM_LISTEN:
                    group.start_soon(watch_upstreams, conf.UPSTREAM_DISCOVERY_INTERVAL, conf.UPSTREAM_LISTEN)
                try:
                    yield
                finally:
                    with anyio.CancelScope(shield=True):
                        if not await listing_tally.flush():  # the listings counted since the last flush
                            logger.warning(
                                "Could not add the last %d tools/list calls to the listing count",
                                listing_tally.pending,
                            )
                    group.cancel_scope.cancel()

    async def _serve_mcp(self, serving: EndpointServing, scope: Scope, receive: Receive, send: Send) -> None:
        scope = _without_outer_whitespace(scope)
        headers = _headers(scope)
        scheme = scope.get("scheme", "http")
        refusal = check_request(scheme, headers)
        if refusal is not None:
            await _json_error(refusal.status, refusal.error, refusal.description)(scope, receive, send)
            return
        if not self.streams and scope["method"] in ("GET", "DELETE"):
            await _needs_streams(scope["method"])(scope, receive, send)
            return
        endpoint = serving.endpoint
        resource = resource_uri(scheme, headers, endpoint)
        query = tuple(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        # Not thread_sensitive: outside Django's handler that would put every request on one global thread.
        # With a stamp cache on this machine the stamps are read here, and the hop is taken only when needed.
        cache = local_stamp_cache()
        stamps = read_stamps(REVISION_KEY, CREDENTIALS_KEY, cache=cache) if cache is not None else None
        resolved = self._authenticate_in_loop(headers, query, resource, stamps) if stamps is not None else None
        if resolved is None:
            resolved = await self._authenticate_in_thread(headers, query, resource, stamps)
        result, whole = resolved
        if isinstance(result, AuthFailure):
            await _challenge(result, resource)(scope, receive, send)
            return
        assert whole is not None
        catalog = whole.for_endpoint(endpoint)
        if result.method == "oauth":
            tool_name = None
            if may_be_tool_call(headers) and not get_settings().HIDE_FORBIDDEN_TOOLS:
                body = await _read_body(receive, get_settings().MAX_REQUEST_BODY_SIZE)
                if body is None:
                    await _json_error(413, "request_too_large", "The request body is too large.")(scope, receive, send)
                    return
                tool_name = tool_call_name(headers, body)
                receive = _replay(body, receive)
            lacking = missing_scopes(result, catalog, tool_name)
            if lacking:
                await _insufficient_scope(lacking, resource)(scope, receive, send)
                return
        await self._ensure_started()
        scope = {**scope, PRINCIPAL_SCOPE_KEY: result, CATALOG_SCOPE_KEY: catalog}
        # The SDK's view of the caller (it binds request state to it), made only for what the SDK answers.
        caller = functools.cache(lambda: AuthenticatedUser(_access_token_for(result, resource)))
        conf = get_settings()
        reader = _plain_reader(scope["method"], headers, self.stateful) if conf.FAST_PATH else None
        if reader is not None and fastpath_requests.usable():
            body = await _read_body(receive, conf.MAX_REQUEST_BODY_SIZE)
            if body is None:
                await _json_error(413, "request_too_large", "The request body is too large.")(scope, receive, send)
                return
            receive = _replay(body, receive)
            plain = await reader(scope, headers, body, self.json_response)
            if plain is not None:
                exchange = fastpath.Exchange(
                    scope, receive, send, partial(self._through_sdk, serving, scope, receive, caller), caller
                )
                await fastpath.serve(plain, result, catalog, serving.manager.app, exchange, self.json_response)
                return
        await self._through_sdk(serving, scope, receive, caller, send)

    async def _through_sdk(
        self,
        serving: EndpointServing,
        scope: Scope,
        receive: Receive,
        caller: Callable[[], AuthenticatedUser],
        send: Send,
    ) -> None:
        token = SDK_CALLER.set(SdkCaller(scope[PRINCIPAL_SCOPE_KEY], scope[CATALOG_SCOPE_KEY]))
        try:
            await serving.mcp_app({**scope, "user": caller()}, receive, send)
        finally:
            SDK_CALLER.reset(token)

    async def _serve_metadata(self, endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> None:
        """RFC 9728 protected resource metadata of one endpoint, at its path form (the root form: the default's)."""
        headers = _headers(scope)
        refusal = check_host(headers)
        if refusal is not None:
            await _json_error(refusal.status, refusal.error, refusal.description)(scope, receive, send)
            return
        cors = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, OPTIONS"}
        if scope["method"] == "OPTIONS":
            await Response(status_code=204, headers={**cors, "Access-Control-Allow-Headers": "*"})(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await Response(status_code=405, headers={"Allow": "GET, OPTIONS"})(scope, receive, send)
            return
        scheme = scope.get("scheme", "http")
        document = await in_worker_thread(protected_resource_metadata)(
            resource_uri(scheme, headers, endpoint), request_origin(scheme, headers), endpoint
        )
        await JSONResponse(document, headers={**cors, "Cache-Control": "public, max-age=3600"})(scope, receive, send)

    def _authenticate_in_loop(
        self, headers: Mapping[str, str], query: QueryPairs, resource: str, stamps: Mapping[str, str]
    ) -> tuple[Principal | AuthFailure, Catalog | None] | None:
        """`_authenticate`'s answer without the thread hop, from stamps already read (from a cache on this
        machine), when it needs no database: this process has compiled the catalog of the current revision and
        knows the credential (or none is needed). None: take the hop."""
        catalog = self.provider.peek()
        if catalog is None or catalog.revision != stamps[REVISION_KEY]:
            return None
        result = authenticate_known(headers, query, resource, stamps[CREDENTIALS_KEY])
        if result is None:
            return None
        return result, (None if isinstance(result, AuthFailure) else catalog)

    def _authenticate(
        self,
        headers: Mapping[str, str],
        query: QueryPairs,
        resource: str,
        stamps: Mapping[str, str] | None = None,
    ) -> tuple[Principal | AuthFailure, Catalog | None]:
        """One thread hop, and one cache round trip for both stamps (unless already read), for everything a
        request needs from the database and cache."""
        stamps = stamps if stamps is not None else read_stamps(REVISION_KEY, CREDENTIALS_KEY)
        result = authenticate(headers, query, resource, credentials_stamp=stamps[CREDENTIALS_KEY])
        if isinstance(result, AuthFailure):
            return result, None
        return result, self.provider.get_sync(stamps[REVISION_KEY])


PlainReader = Callable[[Scope, Mapping[str, str], bytes, bool], Awaitable["fastpath_requests.PlainRequest | None"]]


def _plain_reader(method: str, headers: Mapping[str, str], stateful: bool) -> PlainReader | None:
    """Which era's plain check may apply to this request, from its method and headers alone (None: the SDK's)."""
    if fastpath_requests.is_candidate(method, headers):
        return fastpath_requests.plain_request
    if fastpath_legacy.is_legacy_candidate(method, headers, sessions=stateful):
        return fastpath_legacy.plain_legacy_request
    return None


async def _write_queued_usage() -> None:
    with anyio.CancelScope(shield=True):
        await in_worker_thread(usage_writer.stop)()


def _without_outer_whitespace(scope: Scope) -> Scope:
    """Header values without the optional whitespace around them (RFC 9110 5.5), which some servers'
    parsers keep: `Mcp-Name:  x ` names the tool `x`, for us and for the SDK's header checks."""
    raw = scope.get("headers", [])
    if not any(value[:1] in WHITESPACE or value[-1:] in WHITESPACE for _, value in raw):
        return scope
    return {**scope, "headers": [(name, value.strip(b" \t")) for name, value in raw]}


WHITESPACE = (b" ", b"\t")


def _headers(scope: Scope) -> dict[str, str]:
    # ASGI gives lower-case names; repeated headers are joined as HTTP allows.
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def _access_token_for(principal: Principal, resource: str) -> AccessToken:
    """The SDK's view of the caller (binds request state to it). Carries identifiers, never the secret."""
    if principal.method == "api_key":
        client_id = f"api-key:{principal.api_key_prefix}"
    else:
        client_id = principal.client_id or principal.method
    user_pk = getattr(principal.user, "pk", None)
    return AccessToken(
        token=client_id,
        client_id=client_id,
        scopes=sorted(principal.scopes),
        resource=resource,
        subject=str(user_pk) if user_pk is not None else None,
    )


def _json_error(status: int, error: str, description: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status, headers=headers)


def _challenge(failure: AuthFailure, resource: str) -> JSONResponse:
    """401 telling the client where our metadata is and which scope to ask for (error= only if a token came)."""
    challenge = bearer_challenge(
        resource=resource,
        scopes=[get_settings().BASE_SCOPE] if get_settings().BASE_SCOPE else [],
        error=failure.error,
        description=failure.description if failure.error else None,
    )
    return _json_error(
        failure.status, failure.error or "unauthorized", failure.description, {"WWW-Authenticate": challenge}
    )


def _needs_streams(method: str) -> JSONResponse:
    """What the WSGI entry answers a stream's request (GET opens one, DELETE ends a session): 405, saying why."""
    return _json_error(
        405,
        "streams_unavailable",
        f"{method} needs a streaming connection (a standing SSE stream or a 2025-11-25 session), which this "
        "server's WSGI entry cannot hold. Serve the MCP endpoint with mcp_expose.asgi.get_asgi_application() "
        "under an ASGI server (uvicorn, daphne, hypercorn) for streams; POST requests are served here.",
        {"Allow": "POST"},
    )


def _insufficient_scope(scopes: frozenset[str], resource: str) -> JSONResponse:
    description = "This request needs the scopes: " + " ".join(sorted(scopes)) + "."
    challenge = bearer_challenge(resource=resource, scopes=scopes, error="insufficient_scope", description=description)
    return _json_error(403, "insufficient_scope", description, {"WWW-Authenticate": challenge})


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None once it exceeds `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that yields the already-read body once, then defers to the real one (disconnects)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
