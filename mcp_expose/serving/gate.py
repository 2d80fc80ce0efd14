"""The gate every MCP request passes before anything answers it: Host and Origin, the entry's limits, the caller
(authenticated from this process's memory when it can, else in one thread hop), the endpoint's catalog, and
step-up for an OAuth caller lacking scopes. What passes comes out as an `Admitted` request; anything else is
answered here."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import Receive, Scope, Send

from mcp_expose.access.credential_cache import CREDENTIALS_KEY
from mcp_expose.access.credentials import authenticate, authenticate_known
from mcp_expose.access.failures import AuthFailure
from mcp_expose.access.protected_resource import resource_uri
from mcp_expose.access.stepup import may_be_tool_call, missing_scopes, tool_call_name
from mcp_expose.catalog.compiled import Catalog, CatalogProvider
from mcp_expose.catalog.revision import REVISION_KEY, local_stamp_cache, read_stamps
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import in_worker_thread
from mcp_expose.core.endpoints import Endpoint
from mcp_expose.core.principal import PRINCIPAL_SCOPE_KEY, Principal
from mcp_expose.core.telemetry import LAPS_SCOPE_KEY, Lap, now, tracing
from mcp_expose.serving.edge import check_request
from mcp_expose.serving.edge_answers import (
    challenge,
    headers_of,
    insufficient_scope,
    json_error,
    needs_streams,
    read_body,
    replay,
    too_large,
    without_outer_whitespace,
)
from mcp_expose.serving.request_context import CATALOG_SCOPE_KEY

QueryPairs = tuple[tuple[str, str], ...]
Authenticated = tuple[Principal | AuthFailure, Catalog | None]


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request the gate let through: its scope (carrying the principal and the endpoint's catalog), a `receive`
    that replays any body the gate read, and the SDK's view of the caller, made only if the SDK answers."""

    scope: Scope
    receive: Receive
    headers: Mapping[str, str]
    principal: Principal
    catalog: Catalog
    caller: Callable[[], AuthenticatedUser]


class Gate:
    """Admits MCP requests against one catalog provider; `streams=False` (the WSGI entry) refuses GET and DELETE."""

    def __init__(self, provider: CatalogProvider, *, streams: bool = True) -> None:
        self.provider = provider
        self.streams = streams
        self._authenticate_in_thread = in_worker_thread(self.authenticate)

    async def admit(self, endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> Admitted | None:
        """The request admitted, or None once its refusal is sent."""
        scope = without_outer_whitespace(scope)
        headers = headers_of(scope)
        scheme = scope.get("scheme", "http")
        refusal = check_request(scheme, headers)
        if refusal is not None:
            await json_error(refusal.status, refusal.error, refusal.description)(scope, receive, send)
            return None
        if not self.streams and scope["method"] in ("GET", "DELETE"):
            await needs_streams(scope["method"])(scope, receive, send)
            return None
        resource = resource_uri(scheme, headers, endpoint)
        query = tuple(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        started = now() if tracing() else 0  # authentication's span is made once the request's own exists
        # With a stamp cache on this machine the stamps are read here, and the hop is taken only when needed.
        cache = local_stamp_cache()
        stamps = read_stamps(REVISION_KEY, CREDENTIALS_KEY, cache=cache) if cache is not None else None
        resolved = self.authenticate_in_loop(headers, query, resource, stamps) if stamps is not None else None
        if resolved is None:
            resolved = await self._authenticate_in_thread(headers, query, resource, stamps)
        result, whole = resolved
        authenticated = now() if started else 0
        if isinstance(result, AuthFailure):
            await challenge(result, resource)(scope, receive, send)
            return None
        assert whole is not None
        catalog = whole.for_endpoint(endpoint)
        if result.method == "oauth":
            stepped = await self._step_up(result, catalog, resource, headers, scope, receive, send)
            if stepped is None:
                return None
            receive = stepped
        scope = {**scope, PRINCIPAL_SCOPE_KEY: result, CATALOG_SCOPE_KEY: catalog}
        if started:
            lap = Lap("mcp_expose.authenticate", started, authenticated, {"mcp_expose.auth.method": result.method})
            scope[LAPS_SCOPE_KEY] = (lap,)
        caller = functools.cache(lambda: AuthenticatedUser(access_token_for(result, resource)))
        return Admitted(scope, receive, headers, result, catalog, caller)

    async def _step_up(
        self,
        principal: Principal,
        catalog: Catalog,
        resource: str,
        headers: Mapping[str, str],
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> Receive | None:
        """An OAuth caller lacking only scopes for an enabled tool gets 403 with a step-up challenge, unless
        `HIDE_FORBIDDEN_TOOLS`; the `receive` to go on with (the body replayed), or None once refused."""
        tool_name = None
        if may_be_tool_call(headers) and not get_settings().HIDE_FORBIDDEN_TOOLS:
            body = await read_body(receive, get_settings().MAX_REQUEST_BODY_SIZE)
            if body is None:
                await too_large()(scope, receive, send)
                return None
            tool_name = tool_call_name(headers, body)
            receive = replay(body, receive)
        lacking = missing_scopes(principal, catalog, tool_name)
        if lacking:
            await insufficient_scope(lacking, resource)(scope, receive, send)
            return None
        return receive

    def authenticate_in_loop(
        self, headers: Mapping[str, str], query: QueryPairs, resource: str, stamps: Mapping[str, str]
    ) -> Authenticated | None:
        """`authenticate`'s answer without the thread hop, from stamps already read (from a cache on this
        machine), when it needs no database: this process has compiled the catalog of the current revision and
        knows the credential (or none is needed). None: take the hop."""
        catalog = self.provider.peek()
        if catalog is None or catalog.revision != stamps[REVISION_KEY]:
            return None
        result = authenticate_known(headers, query, resource, stamps[CREDENTIALS_KEY])
        if result is None:
            return None
        return result, (None if isinstance(result, AuthFailure) else catalog)

    def authenticate(
        self,
        headers: Mapping[str, str],
        query: QueryPairs,
        resource: str,
        stamps: Mapping[str, str] | None = None,
    ) -> Authenticated:
        """One thread hop, and one cache round trip for both stamps (unless already read), for everything a
        request needs from the database and cache."""
        stamps = stamps if stamps is not None else read_stamps(REVISION_KEY, CREDENTIALS_KEY)
        result = authenticate(headers, query, resource, credentials_stamp=stamps[CREDENTIALS_KEY])
        if isinstance(result, AuthFailure):
            return result, None
        return result, self.provider.get_sync(stamps[REVISION_KEY])


def access_token_for(principal: Principal, resource: str) -> AccessToken:
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
