"""RFC 9728 protected resource metadata, served by the edge for each endpoint: at its path form, and the default
endpoint's at the root form too. Public, cacheable, and open to any origin, as discovery needs."""

from __future__ import annotations

from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from mcp_expose.access.protected_resource import protected_resource_metadata, request_origin, resource_uri
from mcp_expose.core.db import in_worker_thread
from mcp_expose.core.endpoints import Endpoint
from mcp_expose.serving.edge import check_host
from mcp_expose.serving.edge_answers import headers_of, json_error

CORS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, OPTIONS"}


async def serve_metadata(endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> None:
    """The metadata document of `endpoint` (GET, HEAD), its CORS preflight (OPTIONS), or 405."""
    headers = headers_of(scope)
    refusal = check_host(headers)
    if refusal is not None:
        await json_error(refusal.status, refusal.error, refusal.description)(scope, receive, send)
        return
    if scope["method"] == "OPTIONS":
        await Response(status_code=204, headers={**CORS, "Access-Control-Allow-Headers": "*"})(scope, receive, send)
        return
    if scope["method"] not in ("GET", "HEAD"):
        await Response(status_code=405, headers={"Allow": "GET, OPTIONS"})(scope, receive, send)
        return
    scheme = scope.get("scheme", "http")
    document = await in_worker_thread(protected_resource_metadata)(
        resource_uri(scheme, headers, endpoint), request_origin(scheme, headers), endpoint
    )
    await JSONResponse(document, headers={**CORS, "Cache-Control": "public, max-age=3600"})(scope, receive, send)
