"""The ASGI entry: the MCP endpoint in front of Django, as small pieces in Starlette's spirit.

`get_asgi_application()` returns `McpExposeASGI`, which only routes:
- the lifespan (which Django refuses) to `serving/lifespan`, which also starts serving on first use when the server
  sends no lifespan events;
- each MCP endpoint's path to `serving/gate` (Host and Origin, limits, authentication, step-up), then to
  `serving/path_choice` (the fast path, or the SDK's session manager);
- the health paths to `serving/health`, and the protected resource metadata to `serving/resource_metadata`;
- every other request to Django.
"""

from __future__ import annotations

from functools import partial
from typing import cast

from mcp.server.subscriptions import InMemorySubscriptionBus
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_expose.access.protected_resource import PRM_PREFIX
from mcp_expose.catalog.compiled import CatalogProvider
from mcp_expose.catalog.compiled import provider as default_provider
from mcp_expose.core.conf import get_settings
from mcp_expose.core.endpoints import Endpoint, endpoints
from mcp_expose.serving import fastpath_requests, path_choice, sdk_internals
from mcp_expose.serving.edge_failures import answering_failures
from mcp_expose.serving.events import ChangeRelay
from mcp_expose.serving.gate import Gate
from mcp_expose.serving.health import health_paths, serve_health
from mcp_expose.serving.lifespan import Lifespan
from mcp_expose.serving.path_choice import EndpointServing
from mcp_expose.serving.resource_metadata import serve_metadata
from mcp_expose.serving.sessions import SessionMemory


def get_asgi_application(django_app: ASGIApp | None = None) -> McpExposeASGI:
    """Wrap Django's ASGI app (or `django_app`) with the MCP endpoint."""
    if django_app is None:
        from django.core.asgi import get_asgi_application as django_asgi

        return McpExposeASGI(cast(ASGIApp, django_asgi()))
    return McpExposeASGI(django_app)


class McpExposeASGI:
    """`streams=False` serves only what fits one request and one response (the WSGI entry's mode): JSON answers,
    stateless 2025-11-25, and a clear refusal naming the ASGI entry for whatever needs a stream."""

    def __init__(self, django_app: ASGIApp, *, provider: CatalogProvider | None = None, streams: bool = True) -> None:
        self.django_app = django_app
        self.provider = provider if provider is not None else default_provider
        conf = get_settings()
        self.streams = streams
        self.endpoints = endpoints()
        self.health = health_paths(self.endpoints[0].path, conf.HEALTH_PATH)
        # Stateful only while the SDK still has what the sessions override (else one warning, and stateless).
        self.stateful = conf.LEGACY_SESSIONS and streams and sdk_internals.sessions_can_be_stateful()
        self.json_response = conf.JSON_RESPONSE or not streams
        sessions = SessionMemory() if self.stateful else None
        bus = InMemorySubscriptionBus()
        self.relay = ChangeRelay(bus, sessions)
        self.servings = [
            EndpointServing(endpoint, bus=bus if streams else None, sessions=sessions, json=self.json_response)
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
        self.gate = Gate(self.provider, streams=streams)
        managers = [serving.manager for serving in self.servings]
        self.lifespan = Lifespan(self.provider, managers, self.relay, bus, streams=streams)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
        elif scope["type"] == "http" and scope["path"] in self.routes:
            await answering_failures(partial(self._serve_mcp, self.routes[scope["path"]]), scope, receive, send)
        elif scope["type"] == "http" and self.health is not None and scope["path"] in self.health:
            await serve_health(scope, receive, send, deep=scope["path"] == self.health[1], relay=self.relay)
        elif scope["type"] == "http" and scope["path"] in self.metadata_routes:
            endpoint = self.metadata_routes[scope["path"]]
            await answering_failures(partial(serve_metadata, endpoint), scope, receive, send)
        else:
            await self.django_app(scope, receive, send)

    def begin_stopping(self) -> None:
        """Say that the server is about to stop, so that open listen streams end (each with its result) and the
        server's wait for open responses ends. uvicorn's own stop is seen without this; call it where the server
        cannot be seen stopping (an embedded server, a custom shutdown trigger). Safe from any thread."""
        self.lifespan.begin_stopping()

    async def _serve_mcp(self, serving: EndpointServing, scope: Scope, receive: Receive, send: Send) -> None:
        admitted = await self.gate.admit(serving.endpoint, scope, receive, send)
        if admitted is None:
            return
        if not self.lifespan.started.is_set():  # a server that sent no lifespan events: start on first use
            await self.lifespan.ensure_started()
        await path_choice.answer(serving, admitted, send, stateful=self.stateful, json_response=self.json_response)
