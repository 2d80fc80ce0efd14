"""The choice between the fast path and the SDK's, for a request the gate admitted; and each endpoint's SDK
serving (its server and session manager), which answers whatever the fast path does not.

A request is plain when its era's check (`fastpath_requests`, `fastpath_legacy`) says so from its method, headers
and body; the fast path may still hand it back (`fastpath.Exchange.fallback`), which lands in `through_sdk`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import partial

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.subscriptions import InMemorySubscriptionBus
from starlette.types import Receive, Scope, Send

from mcp_expose.core.conf import get_settings
from mcp_expose.core.endpoints import Endpoint
from mcp_expose.core.principal import PRINCIPAL_SCOPE_KEY
from mcp_expose.core.telemetry import timed
from mcp_expose.serving import fastpath, fastpath_legacy, fastpath_requests
from mcp_expose.serving.edge_answers import read_body, replay, too_large
from mcp_expose.serving.gate import Admitted
from mcp_expose.serving.request_context import CATALOG_SCOPE_KEY, SDK_CALLER, SdkCaller
from mcp_expose.serving.server import build_server
from mcp_expose.serving.sessions import RecentEvents, SessionManager, SessionMemory

# How soon a 2025-11-25 client reconnects to a stream the server closed (SSE `retry`), in milliseconds.
LEGACY_RETRY_MS = 500
PlainReader = Callable[[Scope, Mapping[str, str], bytes, bool], Awaitable["fastpath_requests.PlainRequest | None"]]


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


async def answer(
    serving: EndpointServing, admitted: Admitted, send: Send, *, stateful: bool, json_response: bool
) -> None:
    """Answer on the fast path when the request is plain and the fast path keeps it; else through the SDK."""
    scope, receive = admitted.scope, admitted.receive
    conf = get_settings()
    reader = plain_reader(scope["method"], admitted.headers, stateful) if conf.FAST_PATH else None
    if reader is not None and fastpath_requests.usable():
        body = await read_body(receive, conf.MAX_REQUEST_BODY_SIZE)
        if body is None:
            await too_large()(scope, receive, send)
            return
        receive = replay(body, receive)
        plain = await reader(scope, admitted.headers, body, json_response)
        if plain is not None:
            fallback = partial(through_sdk, serving, scope, receive, admitted.caller)
            exchange = fastpath.Exchange(scope, receive, send, fallback, admitted.caller)
            await fastpath.serve(
                plain, admitted.principal, admitted.catalog, serving.manager.app, exchange, json_response
            )
            return
    await through_sdk(serving, scope, receive, admitted.caller, send)


async def through_sdk(
    serving: EndpointServing, scope: Scope, receive: Receive, caller: Callable[[], AuthenticatedUser], send: Send
) -> None:
    """The SDK's Streamable HTTP app answers, with the caller and catalog at hand for what it asks by name."""
    token = SDK_CALLER.set(SdkCaller(scope[PRINCIPAL_SCOPE_KEY], scope[CATALOG_SCOPE_KEY], timed=timed(scope)))
    try:
        await serving.mcp_app({**scope, "user": caller()}, receive, send)
    finally:
        SDK_CALLER.reset(token)


def plain_reader(method: str, headers: Mapping[str, str], stateful: bool) -> PlainReader | None:
    """Which era's plain check may apply to this request, from its method and headers alone (None: the SDK's)."""
    if fastpath_requests.is_candidate(method, headers):
        return fastpath_requests.plain_request
    if fastpath_legacy.is_legacy_candidate(method, headers, sessions=stateful):
        return fastpath_legacy.plain_legacy_request
    return None
